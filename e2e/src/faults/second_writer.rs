//! A second writer that keeps putting other data back into my-config. The
//! controller corrects it at the pace `controller::pace::SUMMARY` states —
//! never at API-server speed, never giving up — and a Warning Event
//! `Contended` names that writer's field manager. Two writers: one of the
//! test's own that answers every correction at once (its field manager
//! named), then a second my-controller with other `--data` (the same field
//! manager: "another my-controller").

use std::time::Duration;

use anyhow::ensure;
use controller::{
    metrics::WRITES,
    pace,
    reconcile::{LOG_PACED, REASON_CONTENDED},
};
use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::{
    api::events::v1::Event,
    jiff::{SignedDuration, Timestamp},
};
use kube::{
    api::{ListParams, Patch, PatchParams, WatchEvent, WatchParams},
    runtime::watcher,
};
use serde_json::json;
use tokio::time::Instant;

use super::{lines_with, secs, then_restore};
use labkit::eventually::{Check, eventually};
use labkit::{
    converge::{HEAL_WITHIN, wait_desired},
    lab::Lab,
    suite::Measured,
    tr,
};

/// How long the two writers are left to fight.
const FIGHT: Duration = Duration::from_secs(10);
/// Writes the two may make in [`FIGHT`]: each corrects a few times at once,
/// then at 1, 2, 4, … s gaps. Unpaced, they write hundreds of times a second.
const MAX_FIGHT_WRITES: usize = 40;
/// How long the test's own writer puts its data back after every correction:
/// the corrections at once and two growing gaps.
const ANSWERED: Duration = Duration::from_secs(4);
/// That writer's field manager, which the Warning Event must name.
const SECOND_WRITER: &str = "e2e-second-writer";
/// The data it puts back.
const THEIRS: &str = "env=second-writer";

/// A writer that answers every correction at once, then a second
/// my-controller: corrections at the stated pace, each writer named in a
/// Warning Event; every writer stopped → desired again.
pub async fn second_writer_paced(lab: &mut Lab) -> anyhow::Result<Measured> {
    let result = async {
        // A fresh controller for each: its corrections start a new row
        // (see controller::pace), and it corrects at once when it starts.
        lab.restart_controller(&[]).await?;
        wait_desired(lab).await?;
        let answered = answered_at_once(lab).await?;
        lab.restart_controller(&[]).await?;
        wait_desired(lab).await?;
        let fight = fight(lab).await?;
        Ok(Measured { detail: format!("{answered}; {}", fight.detail), ..fight })
    }
    .await;
    then_restore(lab, result).await
}

/// The test's own writer for [`ANSWERED`]: the controller's corrections
/// stay within what the pace allows, and a Warning Event names the writer.
async fn answered_at_once(lab: &Lab) -> anyhow::Result<String> {
    let since = Timestamp::now() - SignedDuration::from_secs(2);
    let updates = || async { anyhow::Ok(lab.metrics().await?.get(WRITES, &[("verb", "update")])) };
    let before = updates().await?;
    match tokio::time::timeout(ANSWERED, put_back_at_once(lab)).await {
        Err(_elapsed) => {}
        Ok(ended) => ended?,
    }
    let corrections = updates().await? - before;
    let allowed = pace::corrections_within(ANSWERED);
    ensure!(
        corrections >= 1.0 && corrections <= f64::from(allowed),
        tr!(
            "{corrections} corrections in {window} beside a writer answering each at once \
             (the pace allows {allowed}: {pace})",
            corrections,
            window = secs(ANSWERED),
            allowed,
            pace = pace::SUMMARY
        )
    );
    let named = format!("field manager {SECOND_WRITER:?} keeps putting other data back");
    contended_event(lab, &named, since).await?;
    Ok(tr!(
        "a writer ({writer}) answering each correction at once for {window}: {corrections} \
         corrections (the pace allows {allowed}), a Warning {reason} naming field \
         manager {manager}",
        writer = SECOND_WRITER,
        window = secs(ANSWERED),
        corrections,
        allowed,
        reason = REASON_CONTENDED,
        manager = format!("{SECOND_WRITER:?}")
    ))
}

/// Puts [`THEIRS`] back as [`SECOND_WRITER`] each time my-config holds
/// other data, at once; runs until dropped.
async fn put_back_at_once(lab: &Lab) -> anyhow::Result<()> {
    let (api, name) = (lab.config_maps(), lab.desired().name().to_string());
    let key = labkit::suite::first_key(lab.desired());
    let params = PatchParams { field_manager: Some(SECOND_WRITER.into()), ..Default::default() };
    let theirs = json!({"data": {key.clone(): THEIRS}});
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let events = watcher(api.clone(), config);
    futures::pin_mut!(events);
    while let Some(event) = events.try_next().await? {
        let (watcher::Event::Apply(live) | watcher::Event::InitApply(live)) = event else {
            continue;
        };
        if live.data.as_ref().and_then(|d| d.get(&key)).map(String::as_str) != Some(THEIRS) {
            api.patch(&name, &params, &Patch::Merge(&theirs)).await?;
        }
    }
    Ok(())
}

/// A second my-controller with other `--data` keeps my-config too: the two
/// correct each other, each pacing its corrections, so my-config changes
/// tens of times in 10 s, not thousands; each names the other ("another
/// my-controller": one field manager); the second stopped → desired again.
async fn fight(lab: &Lab) -> anyhow::Result<Measured> {
    let since = Timestamp::now() - SignedDuration::from_secs(2);
    let mark = lab.log_mark()?;
    let key = labkit::suite::first_key(lab.desired());
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
    let named = match writes {
        Ok(_) => contended_event(lab, "another my-controller (same field manager)", since).await,
        Err(_) => Ok(String::new()),
    };
    // SAFETY: kill with a pid we own (its own process group, as spawned).
    unsafe { libc::kill(-(second.id() as libc::pid_t), libc::SIGTERM) };
    let _ = second.wait();
    let (writes, _) = (writes?, named?);
    // The lab's controller corrects once its paced wait is over (a few seconds).
    let stopped = Instant::now();
    wait_desired(lab).await?;
    let healed = stopped.elapsed();
    ensure!(
        writes <= MAX_FIGHT_WRITES,
        tr!(
            "two writers changed my-config {writes} times in {window}: not paced",
            writes,
            window = secs(FIGHT)
        )
    );
    // Which of the two waits first is a race; together they must have.
    let ours = lines_with(&lab.controller_log(&mark).await?, LOG_PACED).len();
    let theirs = lines_with(&std::fs::read_to_string(&log)?, LOG_PACED).len();
    ensure!(ours + theirs >= 1, tr!("neither controller paced its corrections"));
    Ok(Measured::took(
        healed,
        tr!(
            "a second my-controller with other data for {window}: my-config changed {writes} times, \
             the two paced {ours} + {theirs} times (each report: a growing wait), a Warning \
             {reason} naming another my-controller; second stopped → desired in {healed}",
            window = secs(FIGHT),
            writes,
            ours,
            theirs,
            reason = REASON_CONTENDED,
            healed = secs(healed)
        ),
    ))
}

/// Waits for a Warning Event `Contended` about my-config, recorded since
/// `since`, whose note starts with `named`; returns that note.
async fn contended_event(lab: &Lab, named: &str, since: Timestamp) -> anyhow::Result<String> {
    let what = tr!(
        "a Warning Event {reason} starting {named}",
        reason = REASON_CONTENDED,
        named = format!("{named:?}")
    );
    eventually(&what, HEAL_WITHIN, || async {
        let mut contended = super::warnings(lab, REASON_CONTENDED).await?;
        contended.retain(|e| last_seen(e).is_some_and(|at| at >= since));
        let note = |e: &Event| e.note.clone().unwrap_or_default();
        let found = contended.iter().map(note).find(|n| n.starts_with(named));
        let seen: Vec<String> = contended.iter().map(note).collect();
        Ok(match found {
            Some(note) => Check::Done(note),
            None => Check::NotYet(tr!(
                "{reason} notes since then: {seen}",
                reason = REASON_CONTENDED,
                seen = format!("{seen:?}")
            )),
        })
    })
    .await
}

/// When an Event was last recorded: its series' last observation, or its time.
fn last_seen(event: &Event) -> Option<Timestamp> {
    let series = event.series.as_ref().map(|s| s.last_observed_time.0);
    series.or(event.event_time.as_ref().map(|t| t.0))
}

/// How many times my-config changed during `window`, seen through a watch.
async fn count_changes(lab: &Lab, window: Duration) -> anyhow::Result<usize> {
    let api = lab.config_maps();
    let fields = format!("metadata.name={}", lab.desired().name());
    let from = api.list(&ListParams::default().fields(&fields)).await?;
    let version = from.metadata.resource_version.unwrap_or_default();
    let params = WatchParams::default().fields(&fields).timeout(window.as_secs() as u32 + 5);
    // A window to count in, not a wait for a state: the verdict is a ceiling on the writes
    // in it, and a slower machine only makes fewer. It ends with the window or the watch.
    let events = api.watch(&params, &version).await?.take_until(tokio::time::sleep(window));
    let changes = events.try_fold(0, |n, event| async move {
        Ok(n + usize::from(matches!(event, WatchEvent::Modified(_) | WatchEvent::Added(_))))
    });
    Ok(changes.await?)
}
