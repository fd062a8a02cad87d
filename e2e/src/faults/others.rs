//! Someone else's hand on my-config: `binaryData` beside the data, another
//! controller that owns it, a second writer that keeps putting other data
//! back. The controller corrects what is its to correct, leaves what another
//! controller owns, and does not fight a second writer at API-server speed.

use std::time::Duration;

use anyhow::{Context as _, ensure};
use controller::{
    metrics::RECONCILES,
    reconcile::{LOG_OWNED, LOG_PACED, REASON_CONTENDED},
};
use futures::TryStreamExt;
use k8s_openapi::api::{core::v1::ConfigMap, events::v1::Event};
use kube::{
    Api,
    api::{DeleteParams, ListParams, Patch, PostParams, WatchEvent, WatchParams},
};
use serde_json::json;
use tokio::time::Instant;

use super::{lines_with, ms, secs, someone, then_restore};
use crate::{
    converge::{HEAL_WITHIN, measure_until_desired, wait_desired},
    lab::Lab,
    suite::Measured,
};
use labkit::eventually::{Check, eventually};

/// `binaryData` added beside the right data → removed: "right" and "corrected"
/// look at the same fields (the desired data is the whole key space).
pub async fn binary_data_removed(lab: &mut Lab) -> anyhow::Result<Measured> {
    wait_desired(lab).await?;
    let api = lab.config_maps();
    let name = lab.desired().name().to_string();
    let extra = json!({"binaryData": {"blob": "AAEC"}});
    let healed = measure_until_desired(lab, || async {
        api.patch(&name, &someone(), &Patch::Merge(&extra)).await?;
        Ok(())
    })
    .await?;
    let now = api.get(&name).await?;
    ensure!(now.binary_data.is_none_or(|b| b.is_empty()), "binaryData is still there");
    Ok(Measured::took(
        healed,
        format!("binaryData added beside the right data → removed in {}", ms(healed)),
    ))
}

/// How long the controller is watched leaving another controller's object alone.
const LEFT_ALONE_FOR: Duration = Duration::from_secs(3);

/// my-config controlled by another owner (a controller ownerReference) with
/// other data → not updated, reported (Warning Event `Contended`, the metric
/// `contended`); the ownerReference removed → corrected.
pub async fn owned_elsewhere_left_alone(lab: &mut Lab) -> anyhow::Result<Measured> {
    let result = owned_elsewhere(lab).await;
    let owners: Api<ConfigMap> = lab.config_maps();
    let _ = owners.delete(OWNER, &DeleteParams::default()).await;
    then_restore(lab, result).await
}

/// The owner: a ConfigMap beside my-config, so that on kind the garbage
/// collector finds it alive and leaves my-config be.
const OWNER: &str = "e2e-owner";

async fn owned_elsewhere(lab: &mut Lab) -> anyhow::Result<Measured> {
    wait_desired(lab).await?;
    let mark = lab.log_mark()?;
    let api = lab.config_maps();
    let name = lab.desired().name().to_string();
    let owner = ConfigMap {
        metadata: kube::api::ObjectMeta { name: Some(OWNER.into()), ..Default::default() },
        ..Default::default()
    };
    let owner = api.create(&PostParams::default(), &owner).await?;
    let uid = owner.metadata.uid.context("a created object has a uid")?;
    let before = lab.metrics().await?.get(RECONCILES, &[("result", "contended")]);
    let theirs = json!({
        "metadata": {"ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": OWNER,
                                           "uid": uid, "controller": true}]},
        "data": {crate::suite::first_key(lab.desired()): "env=theirs"},
    });
    api.patch(&name, &someone(), &Patch::Merge(&theirs)).await?;
    let written = api.get(&name).await?.metadata.resource_version;
    // Left alone: watched for a while, nothing written.
    let started = Instant::now();
    let mut every = tokio::time::interval(Duration::from_millis(200));
    while started.elapsed() < LEFT_ALONE_FOR {
        every.tick().await;
        let now = api.get(&name).await?.metadata.resource_version;
        ensure!(now == written, "another controller's ConfigMap was written");
    }
    let reports = lab.metrics().await?.get(RECONCILES, &[("result", "contended")]) - before;
    ensure!(reports >= 1.0, "no reconcile reported it contended");
    let log = lab.controller_log(&mark).await?;
    ensure!(!lines_with(&log, LOG_OWNED).is_empty(), "no warning line: {log}");
    contended_event(lab).await?;
    // Handed back: the ownerReference goes, the data is corrected.
    let handed_back = json!({"metadata": {"ownerReferences": null}});
    let healed = measure_until_desired(lab, || async {
        api.patch(&name, &someone(), &Patch::Merge(&handed_back)).await?;
        Ok(())
    })
    .await?;
    Ok(Measured::took(
        healed,
        format!(
            "controlled by ConfigMap/{OWNER} with other data: not written for {}, {reports} \
             contended reconciles, a Warning Event {REASON_CONTENDED}; ownerReference removed → \
             corrected in {}",
            secs(LEFT_ALONE_FOR),
            ms(healed)
        ),
    ))
}

/// Waits for a Warning Event `Contended` about my-config.
async fn contended_event(lab: &Lab) -> anyhow::Result<()> {
    let events: Api<Event> = Api::namespaced(lab.client(), lab.desired().namespace());
    let name = lab.desired().name().to_string();
    eventually("a Warning Event Contended", HEAL_WITHIN, || async {
        let list = events.list(&ListParams::default()).await?;
        let found = list.items.iter().any(|e| {
            e.reason.as_deref() == Some(REASON_CONTENDED)
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name.as_str())
        });
        Ok(Check::done_if(found, (), format!("{} Events", list.items.len())))
    })
    .await
}

/// How long the two writers are left to fight.
const FIGHT: Duration = Duration::from_secs(10);
/// Writes the two may make in [`FIGHT`]: each corrects a few times at once,
/// then at 1, 2, 4, … s gaps. Unpaced, they write hundreds of times a second.
const MAX_FIGHT_WRITES: usize = 40;

/// A second my-controller with other `--data` keeps my-config too: the two
/// correct each other, each pacing its corrections, so my-config changes
/// tens of times in 10 s, not thousands; the second stopped → desired again.
pub async fn second_writer_paced(lab: &mut Lab) -> anyhow::Result<Measured> {
    let result = fight(lab).await;
    then_restore(lab, result).await
}

async fn fight(lab: &mut Lab) -> anyhow::Result<Measured> {
    // A fresh controller: its corrections start a new row (see controller::pace).
    lab.restart_controller(&[]).await?;
    wait_desired(lab).await?;
    let mark = lab.log_mark()?;
    let key = crate::suite::first_key(lab.desired());
    let desired = lab.desired();
    let log = lab.file().state_dir.join("second-writer.log");
    // This run's lines only.
    let _ = std::fs::remove_file(&log);
    let cmd = super::host_controller()?
        .arg("--kubeconfig")
        .path(&lab.file().admin_kubeconfig)
        .args(["--namespace", desired.namespace(), "--name", desired.name()])
        .args(["--data", &format!("{key}=env=second-writer"), "--listen", "127.0.0.1:0"]);
    let mut second = cmd.spawn_to_log(&log)?;
    let writes = count_changes(lab, FIGHT).await;
    // SAFETY: kill with a pid we own (its own process group, as spawned).
    unsafe { libc::kill(-(second.id() as libc::pid_t), libc::SIGTERM) };
    let _ = second.wait();
    let writes = writes?;
    // The lab's controller corrects once its paced wait is over (a few seconds).
    let stopped = Instant::now();
    wait_desired(lab).await?;
    let healed = stopped.elapsed();
    ensure!(
        writes <= MAX_FIGHT_WRITES,
        "two writers changed my-config {writes} times in {}: not paced",
        secs(FIGHT)
    );
    // Which of the two waits first is a race; together they must have.
    let ours = lines_with(&lab.controller_log(&mark).await?, LOG_PACED).len();
    let theirs = lines_with(&std::fs::read_to_string(&log)?, LOG_PACED).len();
    ensure!(ours + theirs >= 1, "neither controller paced its corrections");
    Ok(Measured::took(
        healed,
        format!(
            "a second my-controller with other data for {}: my-config changed {writes} times, \
             the two paced {ours} + {theirs} times (each report: a growing wait); second stopped → \
             desired in {}",
            secs(FIGHT),
            secs(healed)
        ),
    ))
}

/// How many times my-config changed during `window`, seen through a watch.
async fn count_changes(lab: &Lab, window: Duration) -> anyhow::Result<usize> {
    let api = lab.config_maps();
    let fields = format!("metadata.name={}", lab.desired().name());
    let from = api.list(&ListParams::default().fields(&fields)).await?;
    let version = from.metadata.resource_version.unwrap_or_default();
    let params = WatchParams::default().fields(&fields).timeout(window.as_secs() as u32 + 5);
    let stream = api.watch(&params, &version).await?;
    futures::pin_mut!(stream);
    let mut changes = 0;
    let end = Instant::now() + window;
    loop {
        let next = match tokio::time::timeout_at(end, stream.try_next()).await {
            Err(_elapsed) => break,
            Ok(next) => next?,
        };
        match next {
            Some(WatchEvent::Modified(_) | WatchEvent::Added(_)) => changes += 1,
            Some(_) => {}
            None => break,
        }
    }
    Ok(changes)
}
