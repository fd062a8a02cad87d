//! Faults of the control plane: the API server goes away and comes back;
//! etcd forgets the history the controller's watch stands on; the API server
//! is not there when the controller starts.

use std::time::Duration;

use anyhow::{Context as _, bail, ensure};
use controller::runner::{LOG_RELISTED, LOG_UNREACHABLE, LOG_WATCH_FAILED};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{DeleteParams, Patch, PostParams};
use serde_json::json;
use tokio::time::Instant;

use super::{
    controller_status, ensure_not_restarted, heal_after_delete, lines_with, ms, secs, someone,
    starts, then_restore,
};
use crate::{
    converge::{HEAL_WITHIN, wait_desired},
    etcd::Etcd,
    eventually::{Check, eventually},
    lab::{API_SERVER, CONTROLLER, Lab},
    suite::Measured,
};

/// The bar: a delete made once the API server is back is healed within this.
const HEAL_AFTER_RESTART: Duration = Duration::from_secs(5);

/// kube-apiserver killed and started again while the controller runs → the
/// same controller process reconnects by itself (its watch resumes or
/// re-lists) and heals a delete made once the API server is back, within 5 s.
pub async fn api_server_restart(lab: &mut Lab) -> anyhow::Result<Measured> {
    let result = restart_then_heal(lab).await;
    then_restore(lab, result).await
}

async fn restart_then_heal(lab: &mut Lab) -> anyhow::Result<Measured> {
    wait_desired(lab).await?;
    let (was, mark) = (lab.controller_identity().await?, lab.log_mark()?);
    let outage = lab.restart_api_server(&[]).await?;
    let healed = heal_after_delete(lab).await?;
    ensure!(
        healed <= HEAL_AFTER_RESTART,
        "a delete made after the API server came back took {} to heal (bar: {})",
        ms(healed),
        secs(HEAL_AFTER_RESTART)
    );
    ensure_not_restarted(lab, &was, &mark).await?;
    let log = lab.controller_log(&mark).await?;
    let failed = lines_with(&log, LOG_WATCH_FAILED).len();
    let how = if log.contains(LOG_RELISTED) { "re-listed" } else { "resumed its watch" };
    Ok(Measured {
        latency: Some(healed),
        detail: format!(
            "API server killed, back and ready in {}; the controller ({was}, no restart) \
             {how} after {failed} failed watch attempts; delete → healed in {}",
            secs(outage),
            ms(healed)
        ),
        ..Measured::default()
    })
}

/// Writes to an unrelated ConfigMap between the controller's last event and the compaction:
/// the history a busy cluster accumulates, which compaction then discards.
const CHURN_WRITES: usize = 20;
/// An etcd key outside the API server's `/registry/` prefix: no Kubernetes object sees it.
const SCRATCH_KEY: &str = "/e2e-faults/scratch";

/// etcd compacted past the controller's resourceVersion → its watch gets
/// 410 Gone → it re-lists and keeps healing, without restarting.
///
/// What exactly triggers the 410: the controller's watch must reconnect for
/// etcd's history to matter (an open watch is not cut by a compaction), so
/// kube-apiserver is killed. While it is down nothing else writes, so the
/// controller's resourceVersion is at most etcd's revision then; two writes
/// of a scratch key move past it and the compaction discards everything up
/// to the newest. kube-apiserver comes back *without its watch cache*
/// (`--watch-cache=false`), so the controller's watch is served by etcd
/// itself, and etcd refuses it as compacted → 410 Expired. (With the watch
/// cache on, a freshly started API server refuses any resourceVersion older
/// than its cache anyway — "too old resource version" — compaction or not;
/// `api_server_restart` usually shows that one.) The API server is put back
/// on the lab's flags afterwards.
pub async fn etcd_compaction(lab: &mut Lab) -> anyhow::Result<Measured> {
    let result = compaction_forces_relist(lab).await;
    then_restore(lab, result).await
}

async fn compaction_forces_relist(lab: &mut Lab) -> anyhow::Result<Measured> {
    wait_desired(lab).await?;
    let (was, mark) = (lab.controller_identity().await?, lab.log_mark()?);
    let etcd = Etcd::new(lab.etcd_client_addr()?);
    churn(lab, CHURN_WRITES).await?;

    lab.stop_process(API_SERVER).await?;
    let frozen = etcd.revision().await?;
    etcd.put(SCRATCH_KEY, "moves the revision").await?;
    let compacted = etcd.delete(SCRATCH_KEY).await?;
    etcd.compact(compacted).await?;
    let refusal = match etcd.read_at(frozen).await {
        Ok(()) => bail!("etcd still serves revision {frozen} after compacting at {compacted}"),
        Err(e) => format!("{e:#}"),
    };
    ensure!(
        refusal.contains("compacted"),
        "etcd refused revision {frozen}, but not as compacted: {refusal}"
    );

    lab.start_api_server(&["--watch-cache=false"]).await?;
    let back = Instant::now();
    eventually("the controller to re-list", HEAL_WITHIN, || async {
        let log = lab.controller_log(&mark).await?;
        Ok(if log.contains(LOG_RELISTED) {
            Check::Done(())
        } else {
            let last = lines_with(&log, LOG_WATCH_FAILED).pop().unwrap_or("none");
            Check::NotYet(format!("no re-list yet; last watch failure: {last}"))
        })
    })
    .await?;
    let relisted = back.elapsed();
    let log = lab.controller_log(&mark).await?;
    let gone = lines_with(&log, LOG_WATCH_FAILED)
        .into_iter()
        .find(|l| l.contains("Expired") || l.contains("410"))
        .context("the controller re-listed, but logged no 410 Expired")?;
    let gone = gone.split("error=").nth(1).unwrap_or(gone).trim();
    let healed = heal_after_delete(lab).await?;
    ensure_not_restarted(lab, &was, &mark).await?;
    Ok(Measured {
        latency: Some(relisted),
        detail: format!(
            "compacted at revision {compacted} (etcd: revision {frozen} compacted); watch from etcd \
             → {gone:?} → re-listed {} after the API server was back; delete → healed in {}",
            ms(relisted),
            ms(healed)
        ),
        ..Measured::default()
    })
}

/// `writes` patches of a scratch ConfigMap (created, then deleted), which the
/// controller's field selector never shows it.
async fn churn(lab: &Lab, writes: usize) -> anyhow::Result<()> {
    const NAME: &str = "e2e-churn";
    let api = lab.config_maps();
    if api.get_opt(NAME).await?.is_some() {
        api.delete(NAME, &DeleteParams::default()).await?;
    }
    let mut scratch = ConfigMap::default();
    scratch.metadata.name = Some(NAME.into());
    api.create(&PostParams::default(), &scratch).await?;
    for i in 0..writes {
        let change = json!({"data": {"n": i.to_string()}});
        api.patch(NAME, &someone(), &Patch::Merge(&change)).await?;
    }
    api.delete(NAME, &DeleteParams::default()).await?;
    Ok(())
}

/// How long the controller is watched staying not-ready while the API server is down.
const NOT_READY_WINDOW: Duration = Duration::from_millis(1500);
/// Between two looks during that window.
const SAMPLE_EVERY: Duration = Duration::from_millis(100);

/// The API server is down when the controller starts → it keeps retrying
/// (and logs it), stays alive (`/healthz` 200) and not ready (`/readyz`
/// 503); once the API server is up it becomes ready and heals, as the same
/// process.
pub async fn api_server_down_at_start(lab: &mut Lab) -> anyhow::Result<Measured> {
    let result = start_without_api_server(lab).await;
    then_restore(lab, result).await
}

async fn start_without_api_server(lab: &mut Lab) -> anyhow::Result<Measured> {
    lab.stop_controller().await?;
    lab.stop_process(API_SERVER).await?;
    let run = lab.start_controller_without_waiting(&[]).await?;
    let pid = lab.controller_pid()?;
    eventually("the controller's /healthz", HEAL_WITHIN, || async {
        let status = controller_status(lab, "/healthz").await?;
        Ok(if status == 200 {
            Check::Done(())
        } else {
            Check::NotYet(format!("/healthz {status}"))
        })
    })
    .await?;
    let samples = stays_alive_not_ready(lab, NOT_READY_WINDOW).await?;
    let log = lab.controller_log(&run).await?;
    let (unreachable, watch_failed) =
        (lines_with(&log, LOG_UNREACHABLE).len(), lines_with(&log, LOG_WATCH_FAILED).len());
    ensure!(
        unreachable + watch_failed >= 2,
        "the controller did not log its retries while the API server was down:\n{log}"
    );

    // Timed from the API server's start: the controller may well be ready
    // before the API server's own /readyz says so (it serves before all its
    // post-start hooks are done).
    let up = Instant::now();
    lab.start_api_server(&[]).await?;
    let api_ready = up.elapsed();
    eventually("the controller to become ready", HEAL_WITHIN, || async {
        let status = controller_status(lab, "/readyz").await?;
        Ok(if status == 200 { Check::Done(()) } else { Check::NotYet(format!("/readyz {status}")) })
    })
    .await?;
    let ready = up.elapsed();
    let healed = heal_after_delete(lab).await?;
    ensure!(
        lab.controller_pid()? == pid && lab.is_running(CONTROLLER)?,
        "the controller did not survive the wait"
    );
    let starts = starts(&lab.controller_log(&run).await?);
    ensure!(starts == 1, "the controller started {starts} times");
    Ok(Measured {
        latency: Some(ready),
        detail: format!(
            "API server down: {samples} looks over {} all /readyz 503 + /healthz 200, \
             {unreachable} \"{LOG_UNREACHABLE}\" + {watch_failed} \"watch failed\" lines; \
             API server started → its /readyz in {}, the controller's in {}; \
             delete → healed in {}, same pid",
            secs(NOT_READY_WINDOW),
            ms(api_ready),
            ms(ready),
            ms(healed)
        ),
        ..Measured::default()
    })
}

/// Over `window`, every look finds `/healthz` 200 and `/readyz` 503; returns
/// how many looks were taken.
async fn stays_alive_not_ready(lab: &Lab, window: Duration) -> anyhow::Result<usize> {
    let began = Instant::now();
    let mut looks = 0;
    while began.elapsed() < window {
        let (healthz, readyz) =
            (controller_status(lab, "/healthz").await?, controller_status(lab, "/readyz").await?);
        ensure!(
            healthz == 200 && readyz == 503,
            "after {} without an API server: /healthz {healthz}, /readyz {readyz} \
             (expected 200 and 503)",
            ms(began.elapsed())
        );
        looks += 1;
        tokio::time::sleep(SAMPLE_EVERY).await;
    }
    Ok(looks)
}
