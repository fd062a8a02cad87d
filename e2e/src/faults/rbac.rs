//! RBAC faults: the Role loses `create`; and the lab's security promises —
//! credentials private on disk, Secrets out of the controller's reach.

use controller::metrics::{GIVE_UPS, RECONCILES};
use std::{os::unix::fs::PermissionsExt, path::PathBuf, time::Duration};

use anyhow::{Context as _, ensure};
use k8s_openapi::api::{
    authorization::v1::{LocalSubjectAccessReview, ResourceAttributes, SubjectAccessReviewSpec},
    core::v1::Secret,
    rbac::v1::{PolicyRule, Role},
};
use kube::{
    Api,
    api::{DeleteParams, ListParams, PostParams},
};

use labkit::{
    converge::{HEAL_WITHIN, wait_desired, wait_idle},
    lab::Lab,
    suite::Measured,
    tr,
};

use super::{error_lines, lines_with};
use labkit::eventually::{Check, eventually};

/// The Role loses `create` → delete my-config → the controller retries with
/// growing backoff, gives up after 5 retries (one error line, the give-up
/// metric), does not spin; the Role gets `create` back → healed within one
/// resync period. Also the lab's proof that the RBAC in `manifests/` is
/// really enforced on the controller.
pub async fn create_denied_gives_up_then_heals(lab: &mut Lab) -> anyhow::Result<Measured> {
    const RESYNC: Duration = Duration::from_secs(3);
    lab.restart_controller(&["--resync", "3s"]).await?;
    wait_desired(lab).await?;
    let original = set_config_map_create(lab, false).await?;
    let outcome = match labkit::test_hook::at("e2e:role edited") {
        Ok(()) => give_up_then_heal(lab, RESYNC).await,
        Err(e) => Err(e),
    };
    // Put the Role back whatever happened (the happy path already did).
    edit_rules(lab, |rules| *rules = original).await?;
    outcome
}

/// The controller's ServiceAccount: its namespace and name.
pub(super) fn service_account(lab: &Lab) -> anyhow::Result<(&str, &str)> {
    let account = lab.controller_service_account().split_once('/');
    account.with_context(|| tr!("the service account is namespace/name"))
}

/// Edits the rules of the controller's Role (replaced only when they change); the rules as
/// they were, to put back with another edit.
pub(super) async fn edit_rules(
    lab: &Lab,
    edit: impl FnOnce(&mut Vec<PolicyRule>),
) -> anyhow::Result<Vec<PolicyRule>> {
    // The controller's Role is named like its ServiceAccount (see manifests/rbac.yaml).
    let (namespace, name) = service_account(lab)?;
    let roles: Api<Role> = Api::namespaced(lab.client(), namespace);
    let mut role = roles.get(name).await?;
    let original = role.rules.clone().unwrap_or_default();
    edit(role.rules.get_or_insert_with(Vec::new));
    if role.rules.as_ref() != Some(&original) {
        roles.replace(name, &PostParams::default(), &role).await?;
    }
    Ok(original)
}

/// Grants or takes away `create` on ConfigMaps in the controller's Role; the rules as they were.
async fn set_config_map_create(lab: &Lab, granted: bool) -> anyhow::Result<Vec<PolicyRule>> {
    let original = edit_rules(lab, |rules| {
        // Create has a rule of its own (it cannot be narrowed to a name): taken
        // away, then given back.
        rules.retain(|rule| {
            !rule.verbs.iter().any(|v| v == "create")
                || rule.resource_names.is_some()
                || !rule.resources.iter().flatten().any(|r| r == "configmaps")
        });
        if granted {
            rules.push(PolicyRule {
                api_groups: Some(vec![String::new()]),
                resources: Some(vec!["configmaps".into()]),
                verbs: vec!["create".into()],
                ..PolicyRule::default()
            });
        }
    })
    .await?;
    wait_until_allowed(lab, "create", None, granted).await?;
    Ok(original)
}

async fn give_up_then_heal(lab: &Lab, resync: Duration) -> anyhow::Result<Measured> {
    let mark = lab.log_mark()?;
    let before = lab.metrics().await?;
    let errors0 = before.get(RECONCILES, &[("result", "error")]);
    let give_ups0 = before.sum(GIVE_UPS);
    lab.config_maps().delete(lab.desired().name(), &DeleteParams::default()).await?;

    eventually(&tr!("the controller to give up"), HEAL_WITHIN, || async {
        let m = lab.metrics().await?;
        let gave_up = m.sum(GIVE_UPS) - give_ups0;
        Ok(if gave_up >= 1.0 { Check::Done(()) } else { Check::NotYet(m.lines(RECONCILES)) })
    })
    .await?;
    // Given up means nothing scheduled: it does not spin. On a loaded
    // machine the 3 s resync may start another round before this looks:
    // each round is 6 attempts and one give-up all the same.
    let after = wait_idle(lab).await?;
    let attempts = after.get(RECONCILES, &[("result", "error")]) - errors0;
    let rounds = after.sum(GIVE_UPS) - give_ups0;
    ensure!(
        attempts == 6.0 * rounds,
        tr!(
            "expected 6 attempts (1 + 5 retries) for each give-up, saw {attempts} for {rounds}",
            attempts,
            rounds
        )
    );
    let delays = logged_give_ups(lab, &mark, rounds).await?;

    // The Role gets create back: the next resync heals.
    set_config_map_create(lab, true).await?;
    let restored = tokio::time::Instant::now();
    wait_desired(lab).await?;
    let healed = restored.elapsed();
    ensure!(
        healed <= resync + Duration::from_secs(2),
        tr!(
            "healed {healed} after the Role was fixed: more than one resync period ({resync})",
            healed = format!("{healed:?}"),
            resync = format!("{resync:?}")
        )
    );
    Ok(Measured::took(
        healed,
        tr!(
            "denied: 6 attempts, retry delays {delays} ms, 1 error line{rounds}; create restored → healed by resync",
            delays = format!("{:?}", &delays[..5.min(delays.len())]),
            rounds = match rounds > 1.0 {
                true => tr!(" (each of {rounds} rounds: the resync came first)", rounds),
                false => String::new(),
            }
        ),
    ))
}

/// The log of `rounds` give-ups: one denial error line, 5 growing retries each; their delays (ms).
async fn logged_give_ups(
    lab: &Lab,
    mark: &labkit::lab::ControllerRun,
    rounds: f64,
) -> anyhow::Result<Vec<f64>> {
    // A pod's log reaches the API through the node's log files: wait for the lines.
    let log = eventually(&tr!("the give-up to be logged"), HEAL_WITHIN, || async {
        let log = lab.controller_log(mark).await?;
        let retries = lines_with(&log, "reconcile failed; retrying").len();
        let errors = error_lines(&log).len();
        Ok(Check::done_if(
            errors as f64 >= rounds && retries as f64 >= 5.0 * rounds,
            log,
            tr!("{retries} retry lines, {errors} error lines", retries, errors),
        ))
    })
    .await?;
    let errors = error_lines(&log);
    ensure!(
        errors.len() as f64 == rounds && errors.iter().all(|e| e.contains("forbidden")),
        tr!(
            "expected one error line naming the denial for each give-up ({rounds}), got {count}:\n{lines}",
            rounds,
            count = errors.len(),
            lines = errors.join("\n")
        )
    );
    let retries = lines_with(&log, "reconcile failed; retrying");
    let delays: Vec<f64> = retries.into_iter().filter_map(retry_delay_ms).collect();
    // Each round's five retries wait longer and longer.
    ensure!(
        delays.len() as f64 == 5.0 * rounds
            && delays.chunks(5).all(|r| r.windows(2).all(|w| w[1] > w[0])),
        tr!(
            "expected 5 retries with growing delays for each give-up, saw {delays}",
            delays = format!("{delays:?}")
        )
    );
    Ok(delays)
}

/// `retry_in=10.02ms` (tracing's Debug of a Duration) → 10.02.
pub(super) fn retry_delay_ms(line: &str) -> Option<f64> {
    let value = line.split("retry_in=").nth(1)?.split_whitespace().next()?;
    let (number, unit) = value.split_at(value.find(|c: char| c.is_alphabetic() || c == 'µ')?);
    let number: f64 = number.parse().ok()?;
    Some(match unit {
        "ns" => number / 1e6,
        "µs" => number / 1e3,
        "ms" => number,
        "s" => number * 1e3,
        _ => return None,
    })
}

/// Waits until RBAC answers that the controller may (or may not) `verb`
/// ConfigMaps (the one called `name`, if given).
pub(super) async fn wait_until_allowed(
    lab: &Lab,
    verb: &str,
    name: Option<&str>,
    allowed: bool,
) -> anyhow::Result<()> {
    // Local: asked in the target's namespace, which a namespace's own user may do too.
    let api: Api<LocalSubjectAccessReview> =
        Api::namespaced(lab.client(), lab.desired().namespace());
    let user =
        format!("system:serviceaccount:{}", lab.controller_service_account().replace('/', ":"));
    let namespace = lab.desired().namespace();
    let review = LocalSubjectAccessReview {
        metadata: kube::api::ObjectMeta { namespace: Some(namespace.into()), ..Default::default() },
        spec: SubjectAccessReviewSpec {
            user: Some(user),
            resource_attributes: Some(ResourceAttributes {
                name: name.map(Into::into),
                ..labkit::accounts::access("", "configmaps", verb, Some(namespace))
            }),
            ..SubjectAccessReviewSpec::default()
        },
        ..LocalSubjectAccessReview::default()
    };
    let what = match allowed {
        true => tr!("RBAC to allow {verb}", verb),
        false => tr!("RBAC to deny {verb}", verb),
    };
    eventually(&what, HEAL_WITHIN, || async {
        let answer = api.create(&PostParams::default(), &review).await?;
        let now = answer.status.is_some_and(|s| s.allowed);
        Ok(if now == allowed { Check::Done(()) } else { Check::NotYet(format!("allowed = {now}")) })
    })
    .await
}

/// The lab's credentials are private on disk — mode 0600 for the admin and
/// controller kubeconfigs, lab.json (it names them) and every private key —
/// and the controller's own token cannot read Secrets: asked for real, with
/// that token, not only as a SubjectAccessReview (`least_privilege` covers
/// the whole Role that way).
pub async fn files_private_secrets_unreadable(lab: &mut Lab) -> anyhow::Result<Measured> {
    let files = credential_files(lab)?;
    let mut loose = Vec::new();
    for path in &files {
        let mode = std::fs::metadata(path)
            .with_context(|| tr!("cannot stat {path}", path = path.display()))?
            .permissions()
            .mode()
            & 0o777;
        if mode != 0o600 {
            let mode = format!("{mode:o}");
            loose.push(tr!("{path} is {mode}", path = path.display(), mode));
        }
    }
    ensure!(
        loose.is_empty(),
        tr!("credentials readable by others: {loose}", loose = loose.join("; "))
    );

    let controller = controller_client(lab).await?;
    let secrets: Api<Secret> = Api::namespaced(controller, lab.desired().namespace());
    let listed = secrets.list(&ListParams::default()).await.map(drop);
    // 403, not 404: a 404 would mean it was allowed to look.
    let got = secrets.get("any-secret").await.map(drop);
    for (what, answer) in [("list", &listed), ("get", &got)] {
        ensure!(
            matches!(answer, Err(kube::Error::Api(s)) if s.code == 403),
            tr!(
                "the controller's token may {what} Secrets: {answer}",
                what,
                answer = format!("{answer:?}")
            )
        );
    }
    let names: Vec<String> = files
        .iter()
        .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .collect();
    Ok(Measured::said(tr!(
        "{count} files 0600 ({names}); the controller's token: list and get Secrets → 403",
        count = files.len(),
        names = names.join(", ")
    )))
}

/// A client with the controller's own token: the one the lab gave it
/// (envtest), or on kind a fresh ServiceAccount token of the same kind the
/// kubelet projects into its pod (TokenRequest).
async fn controller_client(lab: &Lab) -> anyhow::Result<kube::Client> {
    if lab.deployment().is_none() {
        return controller::connect::client(Some(&lab.file().controller.kubeconfig))
            .await
            .map_err(anyhow::Error::msg);
    }
    let (namespace, name) = service_account(lab)?;
    let (token, _) = labkit::accounts::token(&lab.client(), namespace, name, 600, None).await?;
    let kubeconfig = labkit::accounts::kubeconfig_with_token(lab.file(), &token)?;
    labkit::lab::client_of(kubeconfig, |_| ()).await
}

/// The files holding credentials: the kubeconfigs, lab.json, and the
/// private keys under `pki/` (envtest labs; a Deployment's controller has no
/// file of its own: its token is projected into its pod).
fn credential_files(lab: &Lab) -> anyhow::Result<Vec<PathBuf>> {
    let file = lab.file();
    let mut files =
        vec![file.admin_kubeconfig.clone(), labkit::lab_file::LabFile::path(&file.state_dir)];
    if lab.deployment().is_none() {
        files.push(file.controller.kubeconfig.clone());
    }
    let pki = file.state_dir.join("pki");
    if pki.is_dir() {
        for entry in std::fs::read_dir(&pki)? {
            let path = entry?.path();
            if path.extension().is_some_and(|e| e == "key") {
                files.push(path);
            }
        }
    }
    files.sort();
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_tracing_durations() {
        assert_eq!(
            retry_delay_ms(
                "WARN x: reconcile failed; retrying key=a attempt=1 retry_in=5ms error=x"
            ),
            Some(5.0)
        );
        assert_eq!(retry_delay_ms("retry_in=10.5ms"), Some(10.5));
        assert_eq!(retry_delay_ms("retry_in=1.2s x"), Some(1200.0));
        assert_eq!(retry_delay_ms("retry_in=800µs"), Some(0.8));
        assert_eq!(retry_delay_ms("no delay here"), None);
    }
}
