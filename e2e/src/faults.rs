//! Faults: the controller keeps its promise when things go wrong. Each is a
//! plain async function like the experiments, run by `e2e/tests/suite.rs`,
//! returning what it measured. Each leaves the lab as it found it: my-config
//! desired, every process running with the lab's own flags (faults that stop
//! the API server or change the Role put it back even when they fail).
//!
//! | module            | faults                                                       |
//! |-------------------|--------------------------------------------------------------|
//! | [`control_plane`] | API server restart, a delete hidden by etcd compaction, API server down at start, a frozen API server |
//! | [`rbac`]          | the Role loses `create`; credentials private, Secrets denied |
//! | [`writers`]       | conflict storm, `immutable: true`, a finalizer holding a delete |
//! | [`lifecycle`]     | SIGTERM (idle and mid-reconcile), bad input writes nothing   |
//! | [`watch`]         | the Role loses `list` or `watch`: growing gaps, not ready     |
//! | [`silence`]       | a connection that stays open and brings nothing: noticed, re-listed |
//! | [`others`]        | `binaryData`, another controller's object                    |
//! | [`second_writer`] | a second writer: paced corrections, its field manager named  |
//! | [`expiry`]        | an exec plugin's client certificate that expires             |

pub(crate) mod control_plane;
mod expiry;
pub(crate) mod lifecycle;
mod others;
mod rbac;
mod second_writer;
mod silence;
mod watch;
mod writers;

use std::time::Duration;

use anyhow::ensure;
use controller::{metrics::RECONCILES, runner::LOG_STARTING};
use k8s_openapi::api::events::v1::Event;
use kube::{
    Api,
    api::{DeleteParams, ListParams, Patch, PatchParams},
};
use serde_json::json;

pub use self::{
    control_plane::{
        reconcile_cannot_hang, reconnects_after_api_server_restart, relists_after_etcd_compaction,
        waits_for_api_server_at_start,
    },
    expiry::exits_before_credentials_expire,
    lifecycle::{bad_input_writes_nothing, sigterm_finishes_reconcile_then_exits},
    others::{binary_data_removed, owned_elsewhere_left_alone},
    rbac::{create_denied_gives_up_then_heals, files_private_secrets_unreadable},
    second_writer::second_writer_paced,
    silence::silent_watch_noticed_and_relisted,
    watch::{list_refused_backs_off, watch_refused_not_ready},
    writers::{
        desired_after_conflict_storm, immutable_drift_reported_not_written,
        waits_for_finalizer_then_recreates,
    },
};
use labkit::eventually::{Check, eventually};
use labkit::{
    converge::{HEAL_WITHIN, measure_until_desired, wait_desired},
    lab::{ControllerRun, Lab},
    scrape::Scrape,
    suite::{Experiment, Measured, RunsOn, entry},
    tr,
};

/// Deletes `name` only if it is the object a fault made, `uid` (none when it
/// made none): the uid is the delete's precondition, so one someone else made
/// under the name is left; gone already is fine.
async fn delete_made<K>(api: &Api<K>, name: &str, uid: Option<String>) -> anyhow::Result<()>
where
    K: kube::Resource + Clone + k8s_openapi::serde::de::DeserializeOwned + std::fmt::Debug,
{
    let Some(uid) = uid else { return Ok(()) };
    let precondition = kube::api::Preconditions { uid: Some(uid), resource_version: None };
    match api.delete(name, &DeleteParams::default().preconditions(precondition)).await {
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => Ok(()),
        done => done.map(drop).map_err(Into::into),
    }
}

/// Why the faults that restart kube-apiserver leave a cluster the kit did not make alone.
const RESTARTS_API_SERVER: &str = "it restarts kube-apiserver, which is not the kit's to restart";

/// Every fault test, in the order the suite runs them.
pub const ALL: &[Experiment] = &[
    entry!(
        reconnects_after_api_server_restart,
        ["api_server_restart", "apiserver-restart"],
        "kube-apiserver killed and started again → same controller reconnects, heals a delete within 5 s",
        RunsOn::OwnCluster(RESTARTS_API_SERVER)
    ),
    entry!(
        relists_after_etcd_compaction,
        ["etcd_compaction", "compaction", "410"],
        "etcd compacted past the controller's resourceVersion → watch 410 → re-list, keeps healing",
        RunsOn::Envtest(
            "it compacts etcd through its loopback gateway and restarts kube-apiserver without its watch cache"
        )
    ),
    entry!(
        list_refused_backs_off,
        ["list-refused"],
        "the Role loses list → refused LISTs retried at growing gaps (0.8 s doubling), not ready; list back → ready, heals",
        RunsOn::OwnCluster(RESTARTS_API_SERVER)
    ),
    entry!(
        watch_refused_not_ready,
        ["watch-refused"],
        "the Role loses watch → not ready (no frozen cache that looks ready), a new LIST after each refusal; watch back → ready, heals",
        RunsOn::OwnCluster(RESTARTS_API_SERVER)
    ),
    entry!(
        silent_watch_noticed_and_relisted,
        ["silent-watch", "frozen-connection"],
        "a proxy stops forwarding on the controller's open connections → not ready within --watch-timeout + 3 s, re-listed through a new connection, a drift made meanwhile corrected",
        RunsOn::Envtest(
            "it puts a TCP proxy of its own between a controller process and kube-apiserver"
        )
    ),
    entry!(
        reconcile_cannot_hang,
        ["hang"],
        "kube-apiserver frozen (SIGSTOP) during a write → abandoned after --reconcile-timeout, counted, retried; thawed → healed",
        RunsOn::Envtest("it freezes the envtest lab's kube-apiserver process with SIGSTOP")
    ),
    entry!(
        create_denied_gives_up_then_heals,
        ["role_loses_create", "rbac-denied"],
        "Role loses create → 6 attempts, one error line, give-up; create back → healed by resync"
    ),
    entry!(
        desired_after_conflict_storm,
        ["conflict_storm", "storm"],
        "10 writers × 100 patches of my-config → desired at the end, same process, few error lines"
    ),
    entry!(
        waits_for_api_server_at_start,
        ["api_server_down_at_start", "apiserver-down"],
        "controller started with the API server down → retries, not ready; API server up → ready, heals",
        RunsOn::Envtest(
            "it starts the controller while kube-apiserver is stopped; on kind the pod itself is made through the API server"
        )
    ),
    entry!(
        sigterm_finishes_reconcile_then_exits,
        ["sigterm_graceful", "sigterm"],
        "SIGTERM idle → exit 0 within 1 s (kind: the pod deleted, within 5 s); during a slow reconcile → it finishes, then exit 0"
    ),
    entry!(
        bad_input_writes_nothing,
        ["bad-input"],
        "bad flags or data files with the lab up → exit 2, my-config untouched",
        RunsOn::Envtest("it runs the controller binary with the lab's own arguments")
    ),
    entry!(
        immutable_drift_reported_not_written,
        ["immutable_drift", "immutable"],
        "immutable: true with other data → reported once per resync (Warning Event), no update, no retries",
        RunsOn::ClusterWide("it counts the updates in the API server's /metrics")
    ),
    entry!(
        binary_data_removed,
        ["binary-data"],
        "binaryData beside the right data → removed (right and corrected look at the same fields)"
    ),
    entry!(
        owned_elsewhere_left_alone,
        ["owned"],
        "another controller owns my-config (controller ownerReference) with other data → not written, Warning Event; handed back → corrected"
    ),
    entry!(
        second_writer_paced,
        ["two-writers"],
        "a writer answering each correction at once, then a second my-controller with other --data → corrections at the stated pace (not thousands), a Warning Event naming each writer; stopped → desired"
    ),
    entry!(
        waits_for_finalizer_then_recreates,
        ["finalizer_holds_deletion", "finalizer"],
        "delete held by a finalizer → left alone while terminating; finalizer removed → recreated"
    ),
    entry!(
        exits_before_credentials_expire,
        ["expiring_credentials", "expiry"],
        "an exec plugin's client certificate valid 15 s → the controller exits 3 before it expires, one line saying why",
        RunsOn::Envtest("it signs a short-lived client certificate with the envtest lab's CA key")
    ),
    entry!(
        files_private_secrets_unreadable,
        ["credentials_private", "security"],
        "kubeconfigs, lab.json and keys are 0600; the controller's token cannot read Secrets"
    ),
];

/// The faults' own writes play "someone else", under their own field manager.
fn someone() -> PatchParams {
    PatchParams { field_manager: Some("e2e-fault".into()), ..PatchParams::default() }
}

/// Merge-patches the first data key of my-config to `value`, as someone else.
async fn drift(lab: &Lab, value: &str) -> anyhow::Result<()> {
    let change = json!({"data": {labkit::suite::first_key(lab.desired()): value}});
    lab.config_maps().patch(lab.desired().name(), &someone(), &Patch::Merge(&change)).await?;
    Ok(())
}

/// Deletes my-config and returns how long the controller took to bring it
/// back with the desired data (seen through a watch).
async fn heal_after_delete(lab: &Lab) -> anyhow::Result<Duration> {
    let api = lab.config_maps();
    let name = lab.desired().name().to_string();
    measure_until_desired(lab, || async move {
        api.delete(&name, &DeleteParams::default()).await?;
        Ok(())
    })
    .await
}

/// `reconcile_total{result}` in a scrape of the controller's `/metrics`.
fn reconciled(metrics: &Scrape, result: &str) -> f64 {
    metrics.get(RECONCILES, &[("result", result)])
}

/// The Warning Events `reason` about my-config (about any object of its name: a caller that
/// cares which one looks at `regarding.uid`).
async fn warnings(lab: &Lab, reason: &str) -> anyhow::Result<Vec<Event>> {
    let events: Api<Event> = Api::namespaced(lab.client(), lab.desired().namespace());
    let mut events = events.list(&ListParams::default()).await?.items;
    events.retain(|e| {
        e.reason.as_deref() == Some(reason)
            && e.type_.as_deref() == Some("Warning")
            && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(lab.desired().name())
    });
    Ok(events)
}

/// Waits until the controller's `path` (`/healthz`, `/readyz`) answers `code`.
async fn until_status(
    lab: &Lab,
    what: &str,
    path: &str,
    code: u16,
    within: Duration,
) -> anyhow::Result<()> {
    eventually(what, within, || async {
        let status = lab.controller_status(path).await?;
        Ok(Check::done_if(status == code, (), format!("{path} {status}")))
    })
    .await
}

/// The API server's `apiserver_request_total` for `verb` on ConfigMaps, whatever the answer.
async fn config_map_requests(lab: &Lab, verb: &str) -> anyhow::Result<f64> {
    let request = http::Request::get("/metrics").body(Vec::new())?;
    let text = lab.client().request_text(request).await?;
    let labels = [("verb", verb), ("resource", "configmaps")];
    Ok(Scrape::parse(&text).sum_matching("apiserver_request_total", &labels))
}

/// The log lines containing `needle`.
fn lines_with<'a>(log: &'a str, needle: &str) -> Vec<&'a str> {
    log.lines().filter(|l| l.contains(needle)).collect()
}

/// `first` is in the log, and `then` after it (its last occurrence).
fn in_order(log: &str, first: &str, then: &str) -> bool {
    matches!((log.find(first), log.rfind(then)), (Some(f), Some(t)) if t > f)
}

/// The controller's error lines (text format: ` ERROR ` after the timestamp).
fn error_lines(log: &str) -> Vec<&str> {
    lines_with(log, " ERROR ")
}

/// How many times the controller logged its start (text format:
/// `INFO controller::runner: starting configmap=…`).
fn starts(log: &str) -> usize {
    lines_with(log, &format!(": {LOG_STARTING} ")).len()
}

/// The controller survived: the same process (kind: pod, no restart) as at
/// `mark` runs, and it has not logged a (re)start since.
async fn ensure_not_restarted(lab: &Lab, was: &str, mark: &ControllerRun) -> anyhow::Result<()> {
    let now = lab.controller_identity().await?;
    ensure!(now == was, tr!("the controller is not the same: {was} then {now}", was, now));
    // kind: the kubelet's readiness probe may not have seen /readyz turn 200 yet.
    eventually(&tr!("the controller to run (kind: its pod ready)"), HEAL_WITHIN, || async {
        let running = lab.controller_running().await?;
        Ok(Check::done_if(running, (), tr!("{now} not running", now)))
    })
    .await?;
    let starts = starts(&lab.controller_log(mark).await?);
    ensure!(starts == 0, tr!("the controller started again ({starts} times)", starts));
    Ok(())
}

/// Puts the lab back (every process on the lab's flags, ready) and proves the
/// controller heals again, after `result` — whatever it was. The fault's own
/// failure wins over a failure to restore.
async fn then_restore(lab: &mut Lab, result: anyhow::Result<Measured>) -> anyhow::Result<Measured> {
    let restored = async {
        lab.restore().await?;
        // A drift put back: proof that its watch and its writes work again.
        measure_until_desired(lab, || drift(lab, "env=after-fault")).await?;
        wait_desired(lab).await
    }
    .await;
    match (result, restored) {
        (Ok(measured), Ok(_)) => Ok(measured),
        (Err(e), _) => Err(e),
        (Ok(_), Err(e)) => Err(e.context(tr!("the fault passed, but restoring the lab failed"))),
    }
}

/// The host's debug my-controller (`cargo xtask e2e` builds it), for a
/// fault that runs a controller of its own beside or instead of the lab's.
fn host_controller() -> anyhow::Result<labkit::command::Cmd> {
    let binary = labkit::project::target_dir().join("debug/my-controller");
    ensure!(
        binary.is_file(),
        tr!("{binary} is missing: `cargo build -p controller`", binary = binary.display())
    );
    Ok(labkit::command::Cmd::new(binary.display().to_string()))
}

/// Milliseconds, for details.
fn ms(d: Duration) -> String {
    format!("{:.0} ms", d.as_secs_f64() * 1000.0)
}

/// Seconds, for details.
fn secs(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_fault_has_a_distinct_name_and_alias() {
        let mut names: Vec<&str> = ALL.iter().flat_map(|f| f.aliases.iter().copied()).collect();
        names.extend(ALL.iter().map(|f| f.name));
        let count = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), count, "duplicate names or aliases");
    }

    #[test]
    fn finds_error_lines_only() {
        let log = "2026-11-29T15:34:13Z  INFO x: fine\n2026-11-29T15:34:13Z ERROR x: bad\n";
        assert_eq!(error_lines(log), vec!["2026-11-29T15:34:13Z ERROR x: bad"]);
    }
}
