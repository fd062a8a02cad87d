//! Faults from other writers of my-config: a storm of them, one who freezes
//! it (`immutable: true`), one whose finalizer holds its deletion.

use controller::metrics::{GIVE_UPS, WRITES};
use std::time::Duration;

use anyhow::{Context as _, ensure};
use controller::reconcile::{LOG_CREATED, LOG_IMMUTABLE, REASON_IMMUTABLE};
use futures::future::join_all;
use k8s_openapi::api::{core::v1::ConfigMap, events::v1::Event};
use kube::api::{DeleteParams, Patch};
use serde_json::json;
use tokio::time::Instant;

use super::{
    config_map_requests, drift, ensure_not_restarted, error_lines, heal_after_delete, lines_with,
    ms, reconciled, secs, someone, then_restore, warnings,
};
use labkit::eventually::{Check, eventually};
use labkit::{
    converge::{HEAL_WITHIN, measure_until_desired, wait_desired, wait_idle},
    lab::Lab,
    scrape::Scrape,
    suite::Measured,
    tr,
};

const WRITERS: usize = 10;
const PATCHES_EACH: usize = 100;
/// Conflicts are routine: logged at info level and never given up, so 0 error
/// lines are expected; the bound leaves room for a stray transient failure
/// under load, not for one error per conflict (a storm causes hundreds).
const MAX_ERROR_LINES: usize = 5;

/// 10 concurrent writers merge-patch my-config's data 100 times each → the
/// controller's updates (which carry the cached resourceVersion) meet 409s
/// and retry; at the end my-config is desired, the controller is the same
/// process, alive, and its error log stays short.
pub async fn desired_after_conflict_storm(lab: &mut Lab) -> anyhow::Result<Measured> {
    wait_desired(lab).await?;
    wait_idle(lab).await?;
    let (was, mark) = (lab.controller_identity().await?, lab.log_mark()?);
    let before = lab.metrics().await?;
    let began = Instant::now();
    storm(lab).await?;
    let storm_took = began.elapsed();
    let last_write = Instant::now();
    wait_desired(lab).await?;
    let settled = last_write.elapsed();
    let after = wait_idle(lab).await?;
    ensure_not_restarted(lab, &was, &mark).await?;
    let healthz = lab.controller_status("/healthz").await?;
    ensure!(healthz == 200, tr!("/healthz {healthz} after the storm", healthz));

    let delta = |result: &str| reconciled(&after, result) - reconciled(&before, result);
    let give_ups = after.sum(GIVE_UPS) - before.sum(GIVE_UPS);
    let log = lab.controller_log(&mark).await?;
    let errors = error_lines(&log);
    ensure!(
        errors.len() <= MAX_ERROR_LINES,
        tr!(
            "{count} error lines during the storm (bound: {bound}):\n{lines}",
            count = errors.len(),
            bound = MAX_ERROR_LINES,
            lines = errors.join("\n")
        )
    );
    Ok(Measured::took(
        settled,
        tr!(
            "{patches} patches by {writers} writers in {took}: {conflicts} conflicts (info), {corrections} corrections, \
             {give_ups} give-ups, {errors} error lines; desired {settled} after the last patch; same controller ({was}), /healthz 200",
            patches = WRITERS * PATCHES_EACH,
            writers = WRITERS,
            took = secs(storm_took),
            conflicts = delta("conflict"),
            corrections = delta("updated"),
            give_ups,
            errors = errors.len(),
            settled = ms(settled),
            was
        ),
    ))
}

/// [`WRITERS`] tasks, each merge-patching my-config [`PATCHES_EACH`] times.
/// Merge patches carry no resourceVersion: the writers never conflict with
/// each other, only the controller's updates do.
async fn storm(lab: &Lab) -> anyhow::Result<()> {
    let writers = (0..WRITERS).map(|writer| {
        let (api, name, key) = (
            lab.config_maps(),
            lab.desired().name().to_string(),
            labkit::suite::first_key(lab.desired()),
        );
        tokio::spawn(async move {
            for n in 0..PATCHES_EACH {
                let change = json!({"data": {key.clone(): format!("env=storm-{writer}-{n}")}});
                api.patch(&name, &someone(), &Patch::Merge(&change)).await?;
            }
            Ok::<_, kube::Error>(())
        })
    });
    for outcome in join_all(writers).await {
        outcome.with_context(|| tr!("a writer panicked"))??;
    }
    Ok(())
}

/// Resync period for the immutable fault: each resync looks again.
const RESYNC: &str = "1s";
/// Reports to see: the first (from the freeze's event) and two resyncs after it.
const REPORTS: f64 = 3.0;

/// Someone sets `immutable: true` and other data in one update → no update
/// can succeed, so the controller sends none: it reports (one warning line,
/// a Warning Event `Immutable`, `reconcile_total{result="immutable"}`) and
/// does not retry; each resync looks again and reports again. Deleting the
/// frozen object — the way out the Event names — gets it recreated.
pub async fn immutable_drift_reported_not_written(lab: &mut Lab) -> anyhow::Result<Measured> {
    lab.restart_controller(&["--resync", RESYNC]).await?;
    let result = frozen_is_reported(lab).await;
    if result.is_err() {
        let _ = unfreeze(lab).await;
    }
    then_restore(lab, result).await
}

async fn frozen_is_reported(lab: &Lab) -> anyhow::Result<Measured> {
    let live = wait_desired(lab).await?;
    let uid = live.metadata.uid.clone().unwrap_or_default();
    wait_idle(lab).await?;
    let mark = lab.log_mark()?;
    let before = lab.metrics().await?;
    let puts_before = config_map_requests(lab, "PUT").await?;

    let freeze =
        json!({"immutable": true, "data": {labkit::suite::first_key(lab.desired()): "env=frozen"}});
    let frozen_at = Instant::now();
    lab.config_maps().patch(lab.desired().name(), &someone(), &Patch::Merge(&freeze)).await?;
    eventually(&tr!("a Warning Event Immutable"), HEAL_WITHIN, || async {
        let none = immutable_events(lab, &uid).await?.is_empty();
        Ok(Check::done_if(
            !none,
            (),
            tr!("no {reason} Event on my-config", reason = REASON_IMMUTABLE),
        ))
    })
    .await?;
    let reported = frozen_at.elapsed();
    let after = eventually(&tr!("two more resyncs"), HEAL_WITHIN, || async {
        let m = lab.metrics().await?;
        let reports = reconciled(&m, "immutable") - reconciled(&before, "immutable");
        Ok(Check::done_if(reports >= REPORTS, m, tr!("{reports} immutable reports", reports)))
    })
    .await?;

    nothing_sent(lab, &before, &after, puts_before).await?;
    // Reported again at each resync, but as one Event: the Recorder folds
    // repeats into its series count instead of piling up new Events.
    let events = immutable_events(lab, &uid).await?;
    ensure!(
        events.len() == 1,
        tr!(
            "expected one Immutable Event (repeats folded into its series), found {count}",
            count = events.len()
        )
    );
    let repeats = events[0].series.as_ref().map_or(1, |s| s.count);
    let window = frozen_at.elapsed();
    let healed = unfreeze(lab).await?;
    let (reports, warned) = reports_and_warnings(lab, &mark, &before).await?;
    Ok(Measured::took(
        reported,
        tr!(
            "frozen + drifted → Warning Event Immutable in {reported}; over {window}: {reports} reports \
             ({warned} warning lines, Event count {repeats}), 0 updates sent (API server PUTs 0), \
             0 errors, 0 retries; deleted → recreated in {healed}",
            reported = ms(reported),
            window = secs(window),
            reports,
            warned,
            repeats,
            healed = ms(healed)
        ),
    ))
}

/// The frozen my-config's verdict: no write, error, conflict, give-up, nor API server PUT.
async fn nothing_sent(
    lab: &Lab,
    before: &Scrape,
    after: &Scrape,
    puts_before: f64,
) -> anyhow::Result<()> {
    let delta = |result: &str| reconciled(after, result) - reconciled(before, result);
    let writes = after.sum(WRITES) - before.sum(WRITES);
    let give_ups = after.sum(GIVE_UPS) - before.sum(GIVE_UPS);
    ensure!(
        writes == 0.0 && delta("error") == 0.0 && delta("conflict") == 0.0 && give_ups == 0.0,
        tr!(
            "frozen my-config: {writes} writes, {errors} errors, {conflicts} conflicts, {give_ups} give-ups (all should be 0)",
            writes,
            errors = delta("error"),
            conflicts = delta("conflict"),
            give_ups
        )
    );
    // The controller's own metrics count only successful writes: the API
    // server's request counter shows whether any update was even attempted.
    let puts = config_map_requests(lab, "PUT").await? - puts_before;
    ensure!(
        puts == 0.0,
        tr!(
            "the API server received {puts} ConfigMap updates: the controller tried a write that cannot succeed",
            puts
        )
    );
    Ok(())
}

/// The reports (the metric) and the log read at one consistent point, once the frozen
/// my-config is deleted and recreated: the queue never reconciles a key twice at once, so
/// every report of the frozen object ended before the create, and the count is final; the
/// log is read until it holds the create's line, which follows every warning. One warning
/// line per report, no retry and no error line; returns the reports and the lines.
async fn reports_and_warnings(
    lab: &Lab,
    mark: &labkit::lab::ControllerRun,
    before: &Scrape,
) -> anyhow::Result<(f64, usize)> {
    let reports = reconciled(&lab.metrics().await?, "immutable") - reconciled(before, "immutable");
    let log = eventually(&tr!("the recreation in the controller's log"), HEAL_WITHIN, || async {
        let log = lab.controller_log(mark).await?;
        let created = log.contains(LOG_CREATED);
        let line = format!("{LOG_CREATED:?}");
        Ok(Check::done_if(created, log, tr!("no {line} line yet", line)))
    })
    .await?;
    let warned = lines_with(&log, LOG_IMMUTABLE).len();
    let retries = lines_with(&log, "reconcile failed; retrying").len();
    let errors = error_lines(&log).len();
    ensure!(
        warned as f64 == reports && reports >= REPORTS && retries == 0 && errors == 0,
        tr!(
            "expected one warning line per report ({reports}, at least {least}) and no retry or \
             error lines; saw {warned} warnings, {retries} retries, {errors} errors:\n{log}",
            reports,
            least = REPORTS,
            warned,
            retries,
            errors,
            log
        )
    );
    Ok((reports, warned))
}

/// The Warning Events `Immutable` about the object with `uid` (so one left by
/// an earlier run, about an earlier my-config, does not count).
async fn immutable_events(lab: &Lab, uid: &str) -> anyhow::Result<Vec<Event>> {
    let mut events = warnings(lab, REASON_IMMUTABLE).await?;
    events.retain(|e| e.regarding.as_ref().and_then(|r| r.uid.as_deref()) == Some(uid));
    Ok(events)
}

/// Deletes my-config if it is frozen (an immutable ConfigMap can still be
/// deleted) and returns how long the controller took to recreate it.
async fn unfreeze(lab: &Lab) -> anyhow::Result<Duration> {
    match lab.config_maps().get_opt(lab.desired().name()).await? {
        Some(cm) if cm.immutable == Some(true) => heal_after_delete(lab).await,
        _ => Ok(Duration::ZERO),
    }
}

/// A finalizer of someone else's, which holds my-config while it is deleted.
const FINALIZER: &str = "e2e.lab/hold";

/// my-config deleted while a finalizer holds it (deletionTimestamp set) →
/// the controller does not fight the deletion: no update or create while it
/// terminates, even when its data drifts meanwhile (`result="deleting"`);
/// once the finalizer is removed the object is gone and recreated.
pub async fn waits_for_finalizer_then_recreates(lab: &mut Lab) -> anyhow::Result<Measured> {
    let result = held_then_released(lab).await;
    // On failure the finalizer may still hold it.
    let released = release(lab).await;
    let result = result.and_then(|measured| released.map(|()| measured));
    then_restore(lab, result).await
}

async fn held_then_released(lab: &Lab) -> anyhow::Result<Measured> {
    let (api, name) = (lab.config_maps(), lab.desired().name().to_string());
    let old_uid = wait_desired(lab).await?.metadata.uid;
    let hold = json!({"metadata": {"finalizers": [FINALIZER]}});
    api.patch(&name, &someone(), &Patch::Merge(&hold)).await?;
    wait_idle(lab).await?;
    let before = lab.metrics().await?;

    api.delete(&name, &DeleteParams::default()).await?;
    wait_deleting(lab, &before, 1.0).await?;
    // Drift while terminating: a dying object is not corrected either.
    drift(lab, "env=terminating").await?;
    wait_deleting(lab, &before, 2.0).await?;
    let after = wait_idle(lab).await?;
    let writes = after.sum(WRITES) - before.sum(WRITES);
    let deleting = reconciled(&after, "deleting") - reconciled(&before, "deleting");
    ensure!(writes == 0.0, tr!("{writes} writes while my-config was terminating", writes));
    let held = api.get(&name).await?;
    ensure!(
        held.metadata.deletion_timestamp.is_some() && !lab.desired().is_satisfied_by(&held),
        tr!(
            "my-config should still be terminating with the drifted data: {timestamp}, {data}",
            timestamp = format!("{:?}", held.metadata.deletion_timestamp),
            data = format!("{:?}", held.data)
        )
    );

    let released = measure_until_desired(lab, || release(lab)).await?;
    let back = api.get(&name).await?;
    ensure!(
        back.metadata.uid != old_uid && back.metadata.deletion_timestamp.is_none(),
        tr!(
            "expected a new my-config, got uid {uid} (was {old_uid}), deletionTimestamp {timestamp}",
            uid = format!("{:?}", back.metadata.uid),
            old_uid = format!("{old_uid:?}"),
            timestamp = format!("{:?}", back.metadata.deletion_timestamp)
        )
    );
    Ok(Measured::took(
        released,
        tr!(
            "terminating under finalizer {finalizer}: {deleting} reconciles → deleting, 0 writes, \
             drift left alone; finalizer removed → recreated (new uid) in {released}",
            finalizer = FINALIZER,
            deleting,
            released = ms(released)
        ),
    ))
}

/// Waits until `reconcile_total{result="deleting"}` grew by `by` since `before`.
async fn wait_deleting(lab: &Lab, before: &Scrape, by: f64) -> anyhow::Result<()> {
    eventually(&tr!("a reconcile to find my-config terminating"), HEAL_WITHIN, || async {
        let count = reconciled(&lab.metrics().await?, "deleting") - reconciled(before, "deleting");
        Ok(Check::done_if(count >= by, (), tr!("{count} deleting reconciles", count)))
    })
    .await
}

/// Removes [`FINALIZER`] from my-config if it is there (the faults' only
/// finalizer: clearing the list lets the API server finish the delete).
async fn release(lab: &Lab) -> anyhow::Result<()> {
    let (api, name) = (lab.config_maps(), lab.desired().name());
    let held = |cm: &ConfigMap| {
        cm.metadata.finalizers.as_ref().is_some_and(|f| f.iter().any(|f| f == FINALIZER))
    };
    if api.get_opt(name).await?.as_ref().is_some_and(held) {
        let let_go = json!({"metadata": {"finalizers": null}});
        api.patch(name, &someone(), &Patch::Merge(&let_go)).await?;
    }
    Ok(())
}
