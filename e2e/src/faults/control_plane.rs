//! Faults of the control plane: the API server goes away and comes back;
//! etcd forgets the history the controller's watch stands on; the API server
//! is not there when the controller starts.

use std::time::Duration;

use anyhow::{bail, ensure};
use controller::{
    metrics::{IN_FLIGHT, RECONCILES},
    runner::{LOG_RELISTED, LOG_UNREACHABLE, LOG_WATCH_FAILED},
};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Patch, PostParams};
use serde_json::json;
use tokio::time::Instant;

use super::{
    ensure_not_restarted, heal_after_delete, lines_with, ms, rbac::retry_delay_ms, reconciled,
    secs, someone, starts, then_restore, until_status,
};
use crate::etcd::Etcd;
use labkit::eventually::{Check, eventually, throughout};
use labkit::{
    converge::{HEAL_WITHIN, wait_desired},
    lab::{API_SERVER, CONTROLLER, Lab},
    suite::Measured,
    tr,
};

/// The bar: a delete made once the API server is back is healed within this
/// of the controller's next try.
const HEAL_AFTER_RESTART: Duration = Duration::from_secs(5);

/// kube-apiserver killed and started again while the controller runs → the
/// same controller process reconnects by itself (its watch resumes or
/// re-lists) and heals a delete made once the API server is back, within 5 s
/// of its next try. Its tries come with growing gaps (0.8 s, 1.6, 3.2, …):
/// when the API server takes long to come back (a loaded machine: seen 6 s on
/// kind), a gap begun just before that is waited out first, so the bar is 5 s
/// plus the last gap the controller announced (`retry_in` of its last
/// "watch failed" line).
pub async fn reconnects_after_api_server_restart(lab: &mut Lab) -> anyhow::Result<Measured> {
    let result = restart_then_heal(lab).await;
    then_restore(lab, result).await
}

/// A controller started afresh: its watch backoff begins at 0.8 s. One that
/// went through an earlier fault's failures less than 2 minutes ago would
/// wait longer (client-go's reflector keeps its backoff that long too), and
/// the figures would depend on the order the faults ran in.
pub(super) async fn fresh_controller(lab: &mut Lab) -> anyhow::Result<()> {
    lab.restart_controller(&[]).await?;
    wait_desired(lab).await.map(drop)
}

async fn restart_then_heal(lab: &mut Lab) -> anyhow::Result<Measured> {
    fresh_controller(lab).await?;
    let (was, mark) = (lab.controller_identity().await?, lab.log_mark()?);
    let outage = lab.restart_api_server(&[]).await?;
    let healed = heal_after_delete(lab).await?;
    let log = lab.controller_log(&mark).await?;
    let failures = lines_with(&log, LOG_WATCH_FAILED);
    let gap = failures.last().and_then(|line| retry_delay_ms(line)).unwrap_or_default();
    let gap = Duration::from_secs_f64(gap / 1e3);
    ensure!(
        healed <= HEAL_AFTER_RESTART + gap,
        tr!(
            "a delete made after the API server came back took {healed} to heal (bar: {bar} after the \
             controller's next try; its last pause was {gap})",
            healed = ms(healed),
            bar = secs(HEAL_AFTER_RESTART),
            gap = secs(gap)
        )
    );
    ensure_not_restarted(lab, &was, &mark).await?;
    let how = match log.contains(LOG_RELISTED) {
        true => tr!("re-listed"),
        false => tr!("resumed its watch"),
    };
    Ok(Measured::took(
        healed,
        tr!(
            "API server killed, back and ready in {outage}; the controller ({was}, no restart) \
             {how} after {failures} failed watch attempts (last pause {gap}); delete → healed in {healed}",
            outage = secs(outage),
            was,
            how,
            failures = failures.len(),
            gap = secs(gap),
            healed = ms(healed)
        ),
    ))
}

/// Writes to an unrelated ConfigMap between the controller's last event and the compaction:
/// the history a busy cluster accumulates, which compaction then discards.
const CHURN_WRITES: usize = 20;
/// How a 410 reads in a "watch failed" line (`ApiError: … (Status { code: 410, reason:
/// "Expired", … })`). Not a bare "410": a line's timestamp (`…:03.410123Z`) or the
/// API server's port can hold those digits.
const GONE: &[&str] = &["code: 410", "Expired", "too old resource version"];

/// A "watch failed" line that reports a 410 Gone.
fn reports_gone(line: &str) -> bool {
    GONE.iter().any(|g| line.contains(g))
}
/// An etcd key outside the API server's `/registry/` prefix: no Kubernetes object sees it.
const SCRATCH_KEY: &str = "/e2e-faults/scratch";

/// my-config deleted behind the API server's back and etcd compacted past
/// the controller's resourceVersion, so no Delete event can ever reach it →
/// it lists again when the API server is back, and recreates my-config.
///
/// client-go's reflector would resume its watch from the old resourceVersion
/// and get 410 Gone (the compacted history), then list; this controller lists
/// again after any watch failure (`runner::inform`), so it never asks for the
/// compacted revision: no 410 is expected, and none is tolerated. The API
/// server comes back without its watch cache (see [`compact_while_down`]), so
/// a resumed watch *would* reach etcd's compacted history. Put back on the
/// lab's flags afterwards.
pub async fn relists_after_etcd_compaction(lab: &mut Lab) -> anyhow::Result<Measured> {
    let result = compaction_forces_relist(lab).await;
    then_restore(lab, result).await
}

async fn compaction_forces_relist(lab: &mut Lab) -> anyhow::Result<Measured> {
    fresh_controller(lab).await?;
    let (was, mark) = (lab.controller_identity().await?, lab.log_mark()?);
    churn(lab, CHURN_WRITES).await?;
    let (frozen, compacted) = compact_while_down(lab).await?;
    let back = Instant::now();
    wait_desired(lab).await?;
    let recreated = back.elapsed();
    let log = lab.controller_log(&mark).await?;
    ensure!(
        log.contains(LOG_RELISTED),
        tr!("my-config is back, but the controller never re-listed")
    );
    let failures = lines_with(&log, LOG_WATCH_FAILED);
    let gone: Vec<_> = failures.iter().filter(|l| reports_gone(l)).collect();
    ensure!(
        gone.is_empty(),
        tr!("the controller asked for a compacted revision: {gone}", gone = format!("{gone:?}"))
    );
    ensure_not_restarted(lab, &was, &mark).await?;
    Ok(Measured::took(
        recreated,
        tr!(
            "my-config deleted in etcd, history compacted at revision {compacted} (etcd: revision \
             {frozen} compacted) while the API server was down; {failures} watch failures, none a 410 → \
             re-listed and recreated {recreated} after the API server was back; same process",
            compacted,
            frozen,
            failures = failures.len(),
            recreated = ms(recreated)
        ),
    ))
}

/// Stops kube-apiserver, deletes my-config in etcd behind its back, moves etcd's
/// revision past anything a watch holds and compacts it, then starts
/// kube-apiserver without its watch cache (`--watch-cache=false`): a watch
/// that resumes from its old resourceVersion is then served by etcd itself,
/// which refuses it as compacted → 410 Gone (see [`relists_after_etcd_compaction`]).
/// Returns etcd's revision when it stopped, and the compacted one. The lab's
/// restore puts kube-apiserver back on its own flags.
pub(crate) async fn compact_while_down(lab: &mut Lab) -> anyhow::Result<(u64, u64)> {
    let etcd = Etcd::new(lab.etcd().await?);
    let (namespace, name) = (lab.desired().namespace(), lab.desired().name());
    let key = format!("/registry/configmaps/{namespace}/{name}");
    lab.stop_process(API_SERVER).await?;
    let frozen = etcd.revision().await?;
    etcd.delete(&key).await?;
    etcd.put(SCRATCH_KEY, "moves the revision").await?;
    let compacted = etcd.delete(SCRATCH_KEY).await?;
    etcd.compact(compacted).await?;
    let refusal = match etcd.read_at(frozen).await {
        Ok(()) => bail!(tr!(
            "etcd still serves revision {frozen} after compacting at {compacted}",
            frozen,
            compacted
        )),
        Err(e) => format!("{e:#}"),
    };
    ensure!(
        refusal.contains("compacted"),
        tr!("etcd refused revision {frozen}, but not as compacted: {refusal}", frozen, refusal)
    );
    lab.start_api_server(&["--watch-cache=false"]).await?;
    Ok((frozen, compacted))
}

/// `writes` patches of a scratch ConfigMap (created, then deleted), which the
/// controller's field selector never shows it.
async fn churn(lab: &Lab, writes: usize) -> anyhow::Result<()> {
    const NAME: &str = "e2e-churn";
    let api = lab.config_maps();
    let mut scratch = ConfigMap::default();
    scratch.metadata.name = Some(NAME.into());
    // A create: one of the name that is someone else's stops the fault, and is left.
    let made = api.create(&PostParams::default(), &scratch).await?.metadata.uid;
    for i in 0..writes {
        let change = json!({"data": {"n": i.to_string()}});
        api.patch(NAME, &someone(), &Patch::Merge(&change)).await?;
    }
    super::delete_made(&api, NAME, made).await
}

/// How long the controller is watched staying not-ready while the API server is down.
const NOT_READY_WINDOW: Duration = Duration::from_millis(1500);
/// Between two looks during that window.
const SAMPLE_EVERY: Duration = Duration::from_millis(100);

/// The API server is down when the controller starts → it keeps retrying
/// (and logs it), stays alive (`/healthz` 200) and not ready (`/readyz`
/// 503); once the API server is up it becomes ready and heals, as the same
/// process.
pub async fn waits_for_api_server_at_start(lab: &mut Lab) -> anyhow::Result<Measured> {
    let result = start_without_api_server(lab).await;
    then_restore(lab, result).await
}

async fn start_without_api_server(lab: &mut Lab) -> anyhow::Result<Measured> {
    lab.stop_controller().await?;
    lab.stop_process(API_SERVER).await?;
    let run = lab.start_controller_without_waiting(&[]).await?;
    let pid = lab.pid(CONTROLLER)?;
    until_status(lab, &tr!("the controller's /healthz"), "/healthz", 200, HEAL_WITHIN).await?;
    let samples = stays_alive_not_ready(lab, NOT_READY_WINDOW).await?;
    let log = lab.controller_log(&run).await?;
    let (unreachable, watch_failed) =
        (lines_with(&log, LOG_UNREACHABLE).len(), lines_with(&log, LOG_WATCH_FAILED).len());
    ensure!(
        unreachable + watch_failed >= 2,
        tr!("the controller did not log its retries while the API server was down:\n{log}", log)
    );

    // Timed from the API server's start: the controller may well be ready
    // before the API server's own /readyz says so (it serves before all its
    // post-start hooks are done).
    let up = Instant::now();
    lab.start_api_server(&[]).await?;
    let api_ready = up.elapsed();
    until_status(lab, &tr!("the controller to become ready"), "/readyz", 200, HEAL_WITHIN).await?;
    let ready = up.elapsed();
    let healed = heal_after_delete(lab).await?;
    ensure!(
        lab.pid(CONTROLLER)? == pid && lab.is_running(CONTROLLER)?,
        tr!("the controller did not survive the wait")
    );
    let starts = starts(&lab.controller_log(&run).await?);
    ensure!(starts == 1, tr!("the controller started {starts} times", starts));
    Ok(Measured::took(
        ready,
        tr!(
            "API server down: {samples} looks over {window} all /readyz 503 + /healthz 200, \
             {unreachable} \"{line}\" + {watch_failed} \"watch failed\" lines; \
             API server started → its /readyz in {api_ready}, the controller's in {ready}; \
             delete → healed in {healed}, same pid",
            samples,
            window = secs(NOT_READY_WINDOW),
            unreachable,
            line = LOG_UNREACHABLE,
            watch_failed,
            api_ready = ms(api_ready),
            ready = ms(ready),
            healed = ms(healed)
        ),
    ))
}

/// Over `window`, every look finds `/healthz` 200 and `/readyz` 503; returns
/// how many looks were taken.
async fn stays_alive_not_ready(lab: &Lab, window: Duration) -> anyhow::Result<usize> {
    let began = Instant::now();
    throughout(window, SAMPLE_EVERY, || async {
        let (healthz, readyz) =
            (lab.controller_status("/healthz").await?, lab.controller_status("/readyz").await?);
        ensure!(
            healthz == 200 && readyz == 503,
            tr!(
                "after {elapsed} without an API server: /healthz {healthz}, /readyz {readyz} \
                 (expected 200 and 503)",
                elapsed = ms(began.elapsed()),
                healthz,
                readyz
            )
        );
        Ok(())
    })
    .await
}

/// The flags of [`reconcile_cannot_hang`]: each reconcile waits 1 s first
/// (time to freeze the API server), and gives up on its requests after 2 s.
const HANG_FLAGS: &[&str] = &["--reconcile-delay", "1s", "--reconcile-timeout", "2s"];

/// kube-apiserver frozen (SIGSTOP: its connections stay open, nothing
/// answers) while the controller writes → the reconcile is abandoned after
/// `--reconcile-timeout`, counted as a failure, its key not held; the API
/// server thawed → the retry heals.
pub async fn reconcile_cannot_hang(lab: &mut Lab) -> anyhow::Result<Measured> {
    let result = frozen_write(lab).await;
    // Thawed whatever happened: nothing else works while it is stopped.
    if let Ok(pid) = lab.pid(API_SERVER) {
        signal(pid, libc::SIGCONT);
    }
    then_restore(lab, result).await
}

async fn frozen_write(lab: &mut Lab) -> anyhow::Result<Measured> {
    lab.restart_controller(HANG_FLAGS).await?;
    wait_desired(lab).await?;
    // The startup reconcile over first: the one in flight at the freeze is then the drift's,
    // started from a cache that holds the drift (else the freeze may beat the drift's event).
    eventually(&tr!("the startup reconcile to end"), HEAL_WITHIN, || async {
        let m = lab.metrics().await?;
        let over = m.sum(IN_FLIGHT) == 0.0 && m.sum(RECONCILES) >= 1.0;
        Ok(Check::done_if(over, (), m.lines(RECONCILES)))
    })
    .await?;
    let mark = lab.log_mark()?;
    let before = reconciled(&lab.metrics().await?, "timeout");
    let pid = lab.pid(API_SERVER)?;
    super::drift(lab, "env=frozen").await?;
    super::lifecycle::reconcile_running(lab).await?;
    signal(pid, libc::SIGSTOP);
    let frozen = Instant::now();
    // The controller's own /metrics: it answers while the API server does not.
    let timed_out = eventually(&tr!("the reconcile to be abandoned"), HEAL_WITHIN, || async {
        let m = lab.metrics().await?;
        let n = reconciled(&m, "timeout") - before;
        Ok(Check::done_if(n >= 1.0, frozen.elapsed(), m.lines(RECONCILES)))
    })
    .await?;
    let healthz = lab.controller_status("/healthz").await?;
    ensure!(healthz == 200, tr!("/healthz {healthz} while the API server is frozen", healthz));
    signal(pid, libc::SIGCONT);
    let thawed = Instant::now();
    wait_desired(lab).await?;
    let healed = thawed.elapsed();
    let log = lab.controller_log(&mark).await?;
    ensure!(
        log.contains("no answer from the API server within"),
        tr!("no line says the reconcile was abandoned")
    );
    Ok(Measured::took(
        healed,
        tr!(
            "API server frozen (SIGSTOP) during a write: abandoned after {after} (reconcile delay 1 s + \
             timeout 2 s), /healthz 200; thawed → healed in {healed}",
            after = secs(timed_out),
            healed = ms(healed)
        ),
    ))
}

/// `signal` to the process `pid` (the lab's, from lab.json).
fn signal(pid: u32, signal: libc::c_int) {
    // SAFETY: kill(2) with a pid the lab started; no memory is involved.
    unsafe { libc::kill(pid as libc::pid_t, signal) };
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lines as the controller logs them (the text format, kube 5's errors).
    #[test]
    fn a_410_is_told_from_digits_that_happen_to_read_410() {
        let refused = format!(
            "2026-12-02T22:41:03.410123Z  WARN controller::runner: {LOG_WATCH_FAILED} \
             error=failed to perform initial object list: ServiceError: client error (Connect): \
             tcp connect error: Connection refused (os error 111) retry_in=0.8s"
        );
        let on_port = refused
            .replace("03.410123Z", "03.123456Z")
            .replace("tcp connect error", "tcp connect error 127.0.0.1:44101");
        let gone = format!(
            "2026-12-02T22:41:05.000001Z  WARN controller::runner: {LOG_WATCH_FAILED} \
             error=error returned by apiserver during watch: too old resource version: 274 (277): \
             Expired retry_in=1.6s"
        );
        let start_gone = "error=failed to start watching object: ApiError: too old resource \
             version: Expired (Status { status: Some(Failure), code: 410, reason: \"Expired\" })";
        assert!(!reports_gone(&refused) && !reports_gone(&on_port));
        assert!(reports_gone(&gone) && reports_gone(start_gone));
    }
}
