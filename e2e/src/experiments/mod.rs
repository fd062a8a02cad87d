//! The course's experiments as plain async functions: each sets the scene,
//! acts like a person with kubectl would, checks the outcome and returns what
//! it measured. The e2e tests, `cargo xtask e2e` and `cargo xtask exp` call
//! these same functions. Each leaves the lab as it found it: my-config as
//! desired and the controller running with the lab's own flags.

use controller::metrics::{RECONCILES, WRITES};
use std::time::Duration;

use anyhow::{Context as _, bail, ensure};
use controller::{
    desired::Desired,
    reconcile::{LOG_CORRECTED, LOG_CREATED},
    version::{self, Skew},
};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::{
    Api,
    api::{DeleteParams, ListParams, Patch, PatchParams, PostParams},
};
use serde_json::json;
use tokio::time::Instant;

mod pod;

use crate::{
    converge::{HEAL_WITHIN, delete_and_wait_gone, measure_until_desired, wait_desired, wait_idle},
    lab::Lab,
    suite::{Experiment, Measured, RunsOn, first_key},
};

use labkit::eventually::{Check, eventually};

/// The experiments' own writes play "someone else", under their own field manager.
fn someone() -> PatchParams {
    PatchParams { field_manager: Some("e2e-experiment".into()), ..PatchParams::default() }
}

/// Every experiment of the suite, in the order the suite runs them.
pub const ALL: &[Experiment] = &[
    Experiment {
        name: "create_on_start",
        run: |lab| Box::pin(create_on_start(lab)),
        aliases: &["create"],
        about: "my-config absent, controller (re)started → it appears with the desired data",
        runs_on: RunsOn::Any,
    },
    Experiment {
        name: "self_heal_on_delete",
        run: |lab| Box::pin(self_heal_on_delete(lab)),
        aliases: &["self-heal", "heal"],
        about: "delete my-config → it is back with the desired data",
        runs_on: RunsOn::Any,
    },
    Experiment {
        name: "correct_on_patch",
        run: |lab| Box::pin(correct_on_patch(lab)),
        aliases: &["correct"],
        about: "patch app.conf, add a key and a label → data put back, label kept",
        runs_on: RunsOn::Any,
    },
    Experiment {
        name: "idempotent_rerun",
        run: |lab| Box::pin(idempotent_rerun(lab)),
        aliases: &["rerun"],
        about: "restart twice while my-config is right → nothing written",
        runs_on: RunsOn::Any,
    },
    Experiment {
        name: "version_matching",
        run: |lab| Box::pin(version_matching(lab)),
        aliases: &["version"],
        about: "client built for 1.X ↔ cluster 1.X (±1 allowed); kubectl; kind node image",
        runs_on: RunsOn::Any,
    },
    Experiment {
        name: "dedup",
        run: |lab| Box::pin(dedup(lab)),
        aliases: &["dedup"],
        about: "slow reconcile, five quick changes → fewer than five reconciles",
        runs_on: RunsOn::Any,
    },
    Experiment {
        name: "no_hot_loop",
        run: |lab| Box::pin(no_hot_loop(lab)),
        aliases: &["hot-loop"],
        about: "1 s resync for 5 s → reconciles run, nothing is written",
        runs_on: RunsOn::Any,
    },
    Experiment {
        name: "least_privilege",
        run: |lab| Box::pin(least_privilege(lab)),
        aliases: &["rbac"],
        about: "the ServiceAccount may do exactly what the Role grants",
        runs_on: RunsOn::Any,
    },
    Experiment {
        name: "metrics_complete",
        run: |lab| Box::pin(metrics_complete(lab)),
        aliases: &["metrics"],
        about: "/metrics: every family prefixed my_controller_, every result and verb from the start, build_info",
        runs_on: RunsOn::Any,
    },
    Experiment {
        name: "pod_contract",
        run: |lab| Box::pin(pod_contract(lab)),
        aliases: &["pod"],
        about: "the pod as the kubelet runs it: probes, image, user, read-only root, no capabilities, projected token",
        runs_on: RunsOn::Kind("the kubelet and the node's container runtime"),
    },
];

pub use pod::pod_contract;

/// Experiment 1: with my-config absent, start the controller → my-config
/// appears with exactly the desired data.
pub async fn create_on_start(lab: &mut Lab) -> anyhow::Result<Measured> {
    lab.stop_controller().await?;
    delete_and_wait_gone(lab).await?;
    let started = Instant::now();
    lab.start_controller(&[]).await?;
    wait_desired(lab).await?;
    let latency = started.elapsed();
    let metrics = lab.metrics().await?;
    ensure!(
        metrics.get(WRITES, &[("verb", "create")]) == 1.0,
        "expected exactly one create from the new controller, metrics say {}",
        metrics.get(WRITES, &[("verb", "create")])
    );
    Ok(Measured {
        latency: Some(latency),
        detail: "created by the startup reconcile (start → desired, incl. process start)".into(),
        ..Measured::default()
    })
}

/// Experiment 2: delete my-config → it is back with the desired data.
pub async fn self_heal_on_delete(lab: &mut Lab) -> anyhow::Result<Measured> {
    wait_desired(lab).await?;
    let api = lab.config_maps();
    let name = lab.desired().name().to_string();
    let latency = measure_until_desired(lab, || async {
        api.delete(&name, &DeleteParams::default()).await?;
        Ok(())
    })
    .await?;
    Ok(Measured {
        latency: Some(latency),
        detail: "delete → recreated with the desired data (seen through a watch)".into(),
        ..Measured::default()
    })
}

/// The label [`correct_on_patch`] adds, playing someone else.
pub const DRIFT_LABEL: &str = "e2e.lab/added-by";

/// The merge patch of [`correct_on_patch`]: the first desired key set to
/// `env=dev`, an extra data key and [`DRIFT_LABEL`]. Public so that
/// `cargo xtask exp correct` shows this very patch as a kubectl command.
pub fn drift_patch(desired: &Desired) -> serde_json::Value {
    json!({
        "metadata": {"labels": {DRIFT_LABEL: "someone"}},
        "data": {first_key(desired): "env=dev", "e2e-extra": "added by hand"},
    })
}

/// Experiment 3: merge-patch `data.app.conf` to `env=dev`, add a data key and
/// a label → the data is put back, the extra key is gone, the label stays.
pub async fn correct_on_patch(lab: &mut Lab) -> anyhow::Result<Measured> {
    wait_desired(lab).await?;
    let api = lab.config_maps();
    let name = lab.desired().name().to_string();
    let drift = drift_patch(lab.desired());
    let latency = measure_until_desired(lab, || async {
        api.patch(&name, &someone(), &Patch::Merge(&drift)).await?;
        Ok(())
    })
    .await?;
    let now = api.get(&name).await?;
    let label = now.metadata.labels.as_ref().and_then(|l| l.get(DRIFT_LABEL));
    ensure!(
        label.map(String::as_str) == Some("someone"),
        "the label someone added was not kept: labels are {:?}",
        now.metadata.labels
    );
    // Leave it as found.
    let undo = json!({"metadata": {"labels": {DRIFT_LABEL: null}}});
    api.patch(&name, &someone(), &Patch::Merge(&undo)).await?;
    Ok(Measured {
        latency: Some(latency),
        detail: "patch → data put back, extra key removed, foreign label kept".into(),
        ..Measured::default()
    })
}

/// Experiment 4: restart the controller while my-config is right → nothing is
/// written. Twice in a row: ten runs are one run.
pub async fn idempotent_rerun(lab: &mut Lab) -> anyhow::Result<Measured> {
    let before = wait_desired(lab).await?;
    let mut reconciles = 0.0;
    for round in 1..=2 {
        let run = lab.restart_controller(&[]).await?;
        // The startup kick has run once the first reconcile is counted.
        let metrics = eventually("the startup reconcile", HEAL_WITHIN, || async {
            let m = lab.metrics().await?;
            let n = m.sum(RECONCILES);
            Ok(if n >= 1.0 {
                Check::Done(m)
            } else {
                Check::NotYet(format!("reconcile_total = {n}"))
            })
        })
        .await?;
        let writes = metrics.sum(WRITES);
        ensure!(writes == 0.0, "round {round}: the new controller wrote {writes} times");
        ensure!(
            metrics.get(RECONCILES, &[("result", "unchanged")]) >= 1.0,
            "round {round}: the startup reconcile did not find my-config in sync: {}",
            metrics.lines(RECONCILES)
        );
        let log = lab.controller_log(&run).await?;
        if let Some(line) =
            log.lines().find(|l| l.contains(LOG_CREATED) || l.contains(LOG_CORRECTED))
        {
            bail!("round {round}: the controller logged a write: {line}");
        }
        reconciles += metrics.sum(RECONCILES);
    }
    let after = lab.config_maps().get(lab.desired().name()).await?;
    ensure!(
        after.metadata.resource_version == before.metadata.resource_version,
        "resourceVersion moved from {:?} to {:?}",
        before.metadata.resource_version,
        after.metadata.resource_version
    );
    ensure!(
        after.metadata.managed_fields == before.metadata.managed_fields,
        "managedFields changed: {:?} → {:?}",
        before.metadata.managed_fields,
        after.metadata.managed_fields
    );
    let version = after.metadata.resource_version.unwrap_or_default();
    Ok(Measured {
        latency: None,
        detail: format!(
            "2 restarts, {reconciles} reconciles, 0 writes, resourceVersion {version} unchanged"
        ),
        values: vec![("reconciles", reconciles.to_string()), ("version", version)],
        ..Measured::default()
    })
}

/// The version rule: the API server's minor against the minor k8s-openapi was
/// compiled for (equal passes, ±1 passes with a warning, further fails);
/// kubectl's client against the server (a warning only); every kind node image
/// of `kind/node-images.toml`, and on a kind lab the node's kubelet, against
/// the compiled minor.
pub async fn version_matching(lab: &mut Lab) -> anyhow::Result<Measured> {
    let mut warnings = Vec::new();
    let client_minor = version::target_minor();
    let info = lab.client().apiserver_version().await?;
    let server_minor = version::parse_minor(&info.minor)
        .with_context(|| format!("cannot read the server's minor from {info:?}"))?;
    let skew = Skew::between(client_minor, server_minor);
    match skew {
        Skew::Same => {}
        Skew::OneApart { .. } => warnings.push(skew.to_string()),
        Skew::TooFar { .. } => bail!("{skew}"),
    }
    if let Some(kubectl) = kubectl_client_minor() {
        let kubectl_skew = Skew::between(kubectl, server_minor);
        if kubectl_skew != Skew::Same {
            let note = if kubectl_skew.is_supported() { "" } else { " (kubectl supports ±1)" };
            warnings.push(format!(
                "kubectl is 1.{kubectl}, the server 1.{server_minor}{note}: use the kubectl from `nix develop`"
            ));
        }
    }
    let table = labkit::kind_releases::table()?;
    for row in &table {
        let minor = labkit::kind_releases::image_minor(&row.image);
        ensure!(
            minor == Some(client_minor),
            "{}: kind {} runs {}, the kit is built for 1.{client_minor}: \
             give that row a kindest/node:v1.{client_minor}.x image",
            labkit::kind_releases::FILE,
            row.kind,
            row.image
        );
    }
    let releases: Vec<&str> = table.iter().map(|r| r.kind.as_str()).collect();
    let mut node = format!("kind node images 1.{client_minor} for kind {}", releases.join(", "));
    if lab.file().kind.is_some() {
        // What the kubelet itself reports.
        let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(lab.client());
        for n in nodes.list(&ListParams::default()).await? {
            let kubelet =
                n.status.and_then(|s| s.node_info).map(|i| i.kubelet_version).unwrap_or_default();
            let minor = version::parse_minor(
                kubelet.trim_start_matches('v').split('.').nth(1).unwrap_or(""),
            );
            ensure!(
                minor == Some(client_minor),
                "node {} runs kubelet {kubelet}, the kit is built for 1.{client_minor}",
                n.metadata.name.unwrap_or_default()
            );
            node = format!("kubelet {kubelet}; {node}");
        }
    }
    Ok(Measured {
        latency: None,
        detail: format!("server {} ↔ built for {} ↔ {node}", info.git_version, version::target()),
        warnings,
        values: Vec::new(),
    })
}

/// The flags [`dedup`] restarts the controller with: each reconcile sleeps first.
pub const DEDUP_FLAGS: &[&str] = &["--reconcile-delay", "2s"];

/// The `i`th of [`dedup`]'s five changes (a merge patch), public so that
/// `cargo xtask exp dedup` shows the same changes as kubectl commands.
pub fn dedup_change(desired: &Desired, i: u32) -> serde_json::Value {
    json!({"data": {first_key(desired): format!("env=dev-{i}")}})
}

/// Course step 3: with each reconcile slowed to 2 s, five quick changes of
/// my-config → fewer than five reconciles, and the final state is desired.
pub async fn dedup(lab: &mut Lab) -> anyhow::Result<Measured> {
    lab.restart_controller(DEDUP_FLAGS).await?;
    let result = dedup_with_slow_controller(lab).await;
    lab.restart_controller(&[]).await?;
    result
}

async fn dedup_with_slow_controller(lab: &mut Lab) -> anyhow::Result<Measured> {
    wait_idle(lab).await?;
    let baseline = lab.metrics().await?.sum(RECONCILES);
    let api = lab.config_maps();
    let name = lab.desired().name().to_string();
    for i in 1..=5 {
        let change = dedup_change(lab.desired(), i);
        api.patch(&name, &someone(), &Patch::Merge(&change)).await?;
    }
    wait_desired(lab).await?;
    let metrics = wait_idle(lab).await?;
    let reconciles = metrics.sum(RECONCILES) - baseline;
    ensure!(
        reconciles < 5.0,
        "five changes caused {reconciles} reconciles: keys were not coalesced"
    );
    ensure!(
        metrics.get(RECONCILES, &[("result", "updated")]) >= 1.0,
        "the data was put back, but not by a counted update"
    );
    Ok(Measured {
        latency: None,
        detail: format!("5 changes → {reconciles} reconciles"),
        values: vec![("reconciles", reconciles.to_string())],
        ..Measured::default()
    })
}

/// With a 1 s resync, over 5 s reconciles keep running and nothing is written.
pub async fn no_hot_loop(lab: &mut Lab) -> anyhow::Result<Measured> {
    lab.restart_controller(&["--resync", "1s"]).await?;
    let result = watch_quiet_resyncs(lab).await;
    lab.restart_controller(&[]).await?;
    result
}

async fn watch_quiet_resyncs(lab: &mut Lab) -> anyhow::Result<Measured> {
    wait_desired(lab).await?;
    let start = lab.metrics().await?;
    let (writes0, reconciles0) = (start.sum(WRITES), start.sum(RECONCILES));
    let began = Instant::now();
    let window = Duration::from_secs(5);
    let reconciles = eventually("5 s of resyncs", window + HEAL_WITHIN, || async {
        let m = lab.metrics().await?;
        let writes = m.sum(WRITES) - writes0;
        if writes > 0.0 {
            // A write here is a failure, not a state to wait out.
            bail!("the controller wrote {writes} times while my-config was right");
        }
        let reconciles = m.sum(RECONCILES) - reconciles0;
        Ok(if began.elapsed() >= window && reconciles >= 4.0 {
            Check::Done(reconciles)
        } else {
            Check::NotYet(format!("{reconciles} reconciles after {:?}", began.elapsed()))
        })
    })
    .await;
    // eventually() retries errors; a write must fail at once, so re-check.
    let writes = lab.metrics().await?.sum(WRITES) - writes0;
    ensure!(writes == 0.0, "the controller wrote {writes} times while my-config was right");
    let reconciles = reconciles?;
    Ok(Measured {
        latency: None,
        detail: format!(
            "{reconciles} reconciles in {:.1} s, 0 writes",
            began.elapsed().as_secs_f64()
        ),
        ..Measured::default()
    })
}

/// Least privilege, three ways: the ServiceAccount may do exactly what the
/// Role grants (SubjectAccessReviews); the Deployment's pod passes the
/// "restricted" Pod Security Standard; and when the lab runs the controller in
/// its image, that container is non-root, read-only and without capabilities.
pub async fn least_privilege(lab: &mut Lab) -> anyhow::Result<Measured> {
    let rbac = rbac_reviews(lab).await?;
    let pod = crate::security::deployment_passes_restricted(lab).await?;
    let mut detail = format!("{rbac}; {pod}");
    if let Some(container) = &lab.file().controller.container {
        detail.push_str("; ");
        detail.push_str(&crate::security::container_is_locked_down(container)?);
    }
    Ok(Measured { latency: None, detail, ..Measured::default() })
}

/// SubjectAccessReviews for the controller's ServiceAccount: allowed exactly
/// what the Role grants, denied everything around it.
async fn rbac_reviews(lab: &Lab) -> anyhow::Result<String> {
    let user =
        format!("system:serviceaccount:{}", lab.controller_service_account().replace('/', ":"));
    let ns = lab.desired().namespace().to_string();
    let sa_namespace =
        lab.controller_service_account().split('/').next().unwrap_or_default().to_string();
    const ALL_VERBS: &[&str] =
        &["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"];
    let mut checks: Vec<(ResourceAttributes, bool)> = Vec::new();
    let attrs =
        |group: &str, resource: &str, verb: &str, namespace: Option<&str>| ResourceAttributes {
            group: Some(group.into()),
            resource: Some(resource.into()),
            verb: Some(verb.into()),
            namespace: namespace.map(Into::into),
            ..ResourceAttributes::default()
        };
    let named = |name: &str, verb: &str| ResourceAttributes {
        name: Some(name.into()),
        ..attrs("", "configmaps", verb, Some(&ns))
    };
    let target = lab.desired().name().to_string();
    for verb in ALL_VERBS {
        // my-config itself: read (a list or watch by its name too), update; and
        // create, which a Role cannot narrow to a name.
        checks.push((
            named(&target, verb),
            ["get", "list", "watch", "update", "create"].contains(verb),
        ));
        // Another ConfigMap of the same namespace: nothing but that create.
        checks.push((named("someone-elses-config", verb), *verb == "create"));
        // Unnamed: only create (it names no existing object); no list of the namespace.
        checks.push((attrs("", "configmaps", verb, Some(&ns)), *verb == "create"));
        checks.push((
            attrs("events.k8s.io", "events", verb, Some(&ns)),
            ["create", "patch"].contains(verb),
        ));
        checks.push((attrs("", "secrets", verb, Some(&ns)), false));
        checks.push((attrs("", "configmaps", verb, Some("kube-system")), false));
        checks.push((attrs("", "configmaps", verb, None), false)); // all namespaces
        checks.push((attrs("", "namespaces", verb, None), false));
        checks.push((attrs("", "nodes", verb, None), false));
        checks.push((attrs("rbac.authorization.k8s.io", "roles", verb, Some(&ns)), false));
    }
    let api: Api<SubjectAccessReview> = Api::all(lab.client());
    let answers = futures::stream::iter(checks.iter().map(|(attrs, _)| {
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(user.clone()),
                groups: Some(vec![
                    "system:serviceaccounts".into(),
                    format!("system:serviceaccounts:{sa_namespace}"),
                ]),
                resource_attributes: Some(attrs.clone()),
                ..SubjectAccessReviewSpec::default()
            },
            ..SubjectAccessReview::default()
        };
        let api = api.clone();
        async move { api.create(&PostParams::default(), &review).await }
    }))
    .buffered(8)
    .try_collect::<Vec<_>>()
    .await?;
    let mut wrong = Vec::new();
    for ((attrs, expected), answer) in checks.iter().zip(&answers) {
        let allowed = answer.status.as_ref().is_some_and(|s| s.allowed);
        if allowed != *expected {
            wrong.push(format!(
                "{} {}{}{} in {}: {}",
                attrs.verb.as_deref().unwrap_or_default(),
                attrs
                    .group
                    .as_deref()
                    .filter(|g| !g.is_empty())
                    .map(|g| format!("{g}/"))
                    .unwrap_or_default(),
                attrs.resource.as_deref().unwrap_or_default(),
                attrs.name.as_deref().map(|n| format!("/{n}")).unwrap_or_default(),
                attrs.namespace.as_deref().unwrap_or("the cluster"),
                if allowed { "allowed, should be denied" } else { "denied, should be allowed" }
            ));
        }
    }
    ensure!(wrong.is_empty(), "RBAC differs from the Role: {}", wrong.join("; "));
    let granted = checks.iter().filter(|(_, e)| *e).count();
    Ok(format!(
        "{} reviews: {granted} allowed as granted, {} denied",
        checks.len(),
        checks.len() - granted
    ))
}

/// The controller's `/metrics` as a Prometheus user finds them: every family
/// named `my_controller_…`, every labelled series there before it first
/// moves (a rate over a series that appears later starts wrong), and
/// `build_info` with the Kubernetes version it was built for.
pub async fn metrics_complete(lab: &mut Lab) -> anyhow::Result<Measured> {
    use controller::metrics::{self as names, ReconcileResult, WriteVerb};
    let text = lab.metrics_text().await?;
    let scrape = crate::metrics::Scrape::parse(&text);
    let families: Vec<&str> =
        text.lines().filter_map(|l| l.strip_prefix("# TYPE ")?.split_whitespace().next()).collect();
    let stray: Vec<&&str> = families.iter().filter(|f| !f.starts_with("my_controller_")).collect();
    ensure!(stray.is_empty(), "families without the prefix: {stray:?}");
    let mut missing = Vec::new();
    for result in ReconcileResult::ALL {
        let label = format!("{result:?}");
        if !text.contains(&format!("{}{{result=\"{label}\"}}", names::RECONCILES)) {
            missing.push(format!("{}{{result={label}}}", names::RECONCILES));
        }
    }
    for verb in WriteVerb::ALL {
        let label = format!("{verb:?}");
        if !text.contains(&format!("{}{{verb=\"{label}\"}}", names::WRITES)) {
            missing.push(format!("{}{{verb={label}}}", names::WRITES));
        }
    }
    for name in [
        names::GIVE_UPS,
        names::PANICS,
        names::EVENTS_DROPPED,
        names::IN_FLIGHT,
        names::QUEUE_DEPTH,
        names::QUEUE_DELAYED,
    ] {
        if !text.lines().any(|l| l.starts_with(name)) {
            missing.push(name.to_string());
        }
    }
    ensure!(missing.is_empty(), "series missing before they moved: {missing:?}");
    let built_for = version::target();
    ensure!(
        text.lines().any(|l| l.starts_with(names::BUILD_INFO)
            && l.contains(&format!("kubernetes=\"{built_for}\""))),
        "no {} naming Kubernetes {built_for}",
        names::BUILD_INFO
    );
    let series = scrape.series();
    Ok(Measured {
        detail: format!(
            "{} families, {series} series, all my_controller_…; every result and verb from the start; build_info kubernetes={built_for}",
            families.len()
        ),
        ..Measured::default()
    })
}

/// kubectl's client minor version, when kubectl is on PATH and answers.
pub fn kubectl_client_minor() -> Option<u32> {
    let out =
        labkit::command::Cmd::argv(["kubectl", "version", "--client", "-o", "json"]).read().ok()?;
    let info: serde_json::Value = serde_json::from_str(&out).ok()?;
    controller::version::parse_minor(info["clientVersion"]["minor"].as_str()?)
}
