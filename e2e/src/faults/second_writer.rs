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
    pace,
    reconcile::{LOG_PACED, REASON_CONTENDED},
};
use futures::TryStreamExt as _;
use k8s_openapi::{
    api::{core::v1::ConfigMap, events::v1::Event},
    jiff::{SignedDuration, Timestamp},
};
use kube::{
    api::{Patch, PatchParams},
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

/// How long the pace gets to show, at most: 3 corrections at once, then 1 s
/// and 2 s gaps, with a few seconds to spare for a busy machine.
const SHOWS_WITHIN: Duration = Duration::from_secs(30);
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

/// The test's own writer answers every correction at once: the controller's
/// corrections come at the pace, and a Warning Event names the writer.
async fn answered_at_once(lab: &Lab) -> anyhow::Result<String> {
    let since = Timestamp::now() - SignedDuration::from_secs(2);
    let desired = lab.desired().clone();
    let corrections = |cm: &ConfigMap| desired.is_satisfied_by(cm);
    // Its corrections in a row, the first gap and the second; one or two
    // more when the restart already corrected.
    let within = pace::FREE as usize + 4;
    let gaps = tokio::select! {
        gaps = paced_gaps(lab, corrections, within) => gaps?,
        ended = put_back_at_once(lab) => return Err(ended.err().unwrap_or_else(
            || anyhow::anyhow!(tr!("the watch on my-config ended")))),
    };
    let named = format!("field manager {SECOND_WRITER:?} keeps putting other data back");
    contended_event(lab, &named, since).await?;
    Ok(tr!(
        "a writer ({writer}) answering each correction at once: the controller's corrections \
         came {gaps} apart ({pace}), a Warning {reason} naming field manager {manager}",
        writer = SECOND_WRITER,
        gaps = show_gaps(&gaps),
        pace = pace::SUMMARY,
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
/// correct each other, each pacing its corrections, so my-config's changes
/// soon come a second apart, then two; each names the other ("another
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
    // Both writers' corrections in a row, the first gaps and the second.
    let within = 2 * (pace::FREE as usize + 2) + 2;
    let gaps = paced_gaps(lab, |_| true, within).await;
    let named = match gaps {
        Ok(_) => contended_event(lab, "another my-controller (same field manager)", since).await,
        Err(_) => Ok(String::new()),
    };
    // SAFETY: kill with a pid we own (its own process group, as spawned).
    unsafe { libc::kill(-(second.id() as libc::pid_t), libc::SIGTERM) };
    let _ = second.wait();
    let (gaps, _) = (gaps?, named?);
    // The lab's controller corrects once its paced wait is over (a few seconds).
    let stopped = Instant::now();
    wait_desired(lab).await?;
    let healed = stopped.elapsed();
    // Which of the two waits first is a race; together they must have.
    let ours = lines_with(&lab.controller_log(&mark).await?, LOG_PACED).len();
    let theirs = lines_with(&std::fs::read_to_string(&log)?, LOG_PACED).len();
    ensure!(ours + theirs >= 1, tr!("neither controller paced its corrections"));
    Ok(Measured::took(
        healed,
        tr!(
            "a second my-controller with other data: my-config changed {gaps} apart, the two \
             paced {ours} + {theirs} times (each report: a growing wait), a Warning {reason} \
             naming another my-controller; second stopped → desired in {healed}",
            gaps = show_gaps(&gaps),
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

/// Waits until the changes of my-config that `counts` picks show the pace
/// (`pace::FIRST_WAIT` between two, later twice that), and they do within
/// the first `within` of them; returns the gaps. Unpaced, `within` changes
/// come in milliseconds with neither gap; a busy machine only makes gaps longer.
async fn paced_gaps(
    lab: &Lab,
    counts: impl Fn(&ConfigMap) -> bool,
    within: usize,
) -> anyhow::Result<Vec<Duration>> {
    let config =
        watcher::Config::default().fields(&format!("metadata.name={}", lab.desired().name()));
    let (mut times, mut gaps) = (Vec::new(), Vec::new());
    let watch = async {
        let events = watcher(lab.config_maps(), config);
        futures::pin_mut!(events);
        while let Some(event) = events.try_next().await? {
            // Only changes after the watch started; a relist's objects are not changes.
            let watcher::Event::Apply(cm) = event else { continue };
            if !counts(&cm) {
                continue;
            }
            times.push(Instant::now());
            gaps = times.windows(2).map(|t| t[1] - t[0]).collect();
            if shows_the_pace(&gaps) {
                return Ok(());
            }
            ensure!(
                times.len() < within,
                tr!(
                    "my-config changed {n} times {gaps} apart: not paced",
                    n = times.len(),
                    gaps = show_gaps(&gaps)
                )
            );
        }
        anyhow::bail!(tr!("the watch on my-config ended"))
    };
    match tokio::time::timeout(SHOWS_WITHIN, watch).await {
        Ok(watched) => watched.map(|()| gaps),
        Err(_) => anyhow::bail!(tr!(
            "no gap of {first} and a later one of {second} in {window}: my-config changed {n} \
             times {gaps} apart",
            first = secs(pace::FIRST_WAIT),
            second = secs(pace::FIRST_WAIT * 2),
            window = secs(SHOWS_WITHIN),
            n = gaps.len() + 1,
            gaps = show_gaps(&gaps)
        )),
    }
}

/// A gap near the pace's first wait, and a later one near twice that (a
/// tenth shorter each, for a watch that delivers a little early).
fn shows_the_pace(gaps: &[Duration]) -> bool {
    let first = pace::FIRST_WAIT.mul_f64(0.9);
    let after = gaps.iter().position(|g| *g >= first);
    after.is_some_and(|i| gaps[i + 1..].iter().any(|g| *g >= first * 2))
}

fn show_gaps(gaps: &[Duration]) -> String {
    let shown: Vec<String> = gaps.iter().map(|g| format!("{:.1}s", g.as_secs_f64())).collect();
    shown.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pace_shows_as_a_gap_then_one_twice_as_long() {
        let gaps = |ms: &[u64]| ms.iter().map(|m| Duration::from_millis(*m)).collect::<Vec<_>>();
        assert!(shows_the_pace(&gaps(&[3, 2, 4, 1005, 2010])));
        assert!(shows_the_pace(&gaps(&[3, 1005, 4, 2, 2010])));
        assert!(!shows_the_pace(&gaps(&[3, 2010, 4, 1005])), "the longer one must come after");
        assert!(!shows_the_pace(&gaps(&[3, 2, 4, 5, 6, 1005])));
        assert!(!shows_the_pace(&[]));
    }
}
