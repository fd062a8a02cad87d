//! The course's experiments as plain async functions: each sets the scene,
//! acts like a person with kubectl would, checks the outcome and returns what
//! it measured. The e2e tests, `cargo xtask e2e` and `cargo xtask exp` call
//! these same functions. Each leaves the lab as it found it: my-config as
//! desired and the controller running with the lab's own flags.

use controller::metrics::{RECONCILES, WRITES};

use anyhow::{bail, ensure};
use controller::{
    desired::Desired,
    reconcile::{LOG_CORRECTED, LOG_CREATED},
};
use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::json;
use tokio::time::Instant;

use labkit::{
    converge::{HEAL_WITHIN, delete_and_wait_gone, measure_until_desired, wait_desired, wait_idle},
    lab::Lab,
    suite::{Experiment, Measured, entry, first_key},
    tr,
};

use labkit::eventually::{Check, eventually};

/// The experiments' own writes play "someone else", under their own field manager.
fn someone() -> PatchParams {
    PatchParams { field_manager: Some("e2e-experiment".into()), ..PatchParams::default() }
}

/// Every experiment of the suite, in the order the suite runs them.
pub const ALL: &[Experiment] = &[
    entry!(
        create_on_start,
        ["create"],
        "my-config absent, controller (re)started → it appears with the desired data"
    ),
    entry!(
        self_heal_on_delete,
        ["self-heal", "heal"],
        "delete my-config → it is back with the desired data"
    ),
    entry!(
        correct_on_patch,
        ["correct"],
        "patch app.conf, add a key and a label → data put back, label kept"
    ),
    entry!(idempotent_rerun, ["rerun"], "restart twice while my-config is right → nothing written"),
    entry!(dedup, ["dedup"], "slow reconcile, five quick changes → fewer than five reconciles"),
];

/// An experiment by test name or alias.
pub fn find(name: &str) -> Option<&'static Experiment> {
    ALL.iter().find(|e| e.name == name || e.aliases.contains(&name))
}

/// Experiment 1: with my-config absent, start the controller → my-config
/// appears with exactly the desired data.
pub async fn create_on_start(lab: &mut Lab) -> anyhow::Result<Measured> {
    lab.stop_controller().await?;
    delete_and_wait_gone(&lab.config_maps(), lab.desired().name()).await?;
    let started = Instant::now();
    lab.start_controller(&[]).await?;
    wait_desired(lab).await?;
    let latency = started.elapsed();
    // The watch can show my-config before the create's answer reaches the
    // controller, which counts it then: the count is waited for, not read once.
    let what = tr!("the new controller to count its create");
    let creates = eventually(&what, HEAL_WITHIN, || async {
        let creates = lab.metrics().await?.get(WRITES, &[("verb", "create")]);
        let seen = tr!("{creates} creates in its /metrics", creates);
        Ok(Check::done_if(creates >= 1.0, creates, seen))
    })
    .await?;
    ensure!(
        creates == 1.0,
        tr!("expected one create from the new controller, metrics say {creates}", creates)
    );
    Ok(Measured::took(
        latency,
        tr!("created by the startup reconcile (start → desired, incl. process start)"),
    ))
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
    Ok(Measured::took(
        latency,
        tr!("delete → recreated with the desired data (seen through a watch)"),
    ))
}

/// The value experiment 3 drifts the first desired key to (the grade's rows too).
pub const DRIFTED: &str = "env=dev";

/// The label [`correct_on_patch`] adds, playing someone else.
pub const DRIFT_LABEL: &str = "e2e.lab/added-by";

/// The merge patch of [`correct_on_patch`]: the first desired key set to
/// [`DRIFTED`], an extra data key and [`DRIFT_LABEL`]. Public so that
/// `cargo xtask exp correct` shows this very patch as a kubectl command.
pub fn drift_patch(desired: &Desired) -> serde_json::Value {
    json!({
        "metadata": {"labels": {DRIFT_LABEL: "someone"}},
        "data": {first_key(desired): DRIFTED, "e2e-extra": "added by hand"},
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
        tr!(
            "the label someone added was not kept: labels are {labels}",
            labels = format!("{:?}", now.metadata.labels)
        )
    );
    // Leave it as found.
    let undo = json!({"metadata": {"labels": {DRIFT_LABEL: null}}});
    api.patch(&name, &someone(), &Patch::Merge(&undo)).await?;
    Ok(Measured::took(latency, tr!("patch → data put back, extra key removed, foreign label kept")))
}

/// Experiment 4: restart the controller while my-config is right → nothing is
/// written. Twice in a row: ten runs are one run.
pub async fn idempotent_rerun(lab: &mut Lab) -> anyhow::Result<Measured> {
    let before = wait_desired(lab).await?;
    let mut reconciles = 0.0;
    for round in 1..=2 {
        let run = lab.restart_controller(&[]).await?;
        // The startup kick has run once the first reconcile is counted.
        let what = tr!("the startup reconcile");
        let metrics = eventually(&what, HEAL_WITHIN, || async {
            let m = lab.metrics().await?;
            let n = m.sum(RECONCILES);
            Ok(Check::done_if(n >= 1.0, m, format!("reconcile_total = {n}")))
        })
        .await?;
        let writes = metrics.sum(WRITES);
        ensure!(
            writes == 0.0,
            tr!("round {round}: the new controller wrote {writes} times", round, writes)
        );
        ensure!(
            metrics.get(RECONCILES, &[("result", "unchanged")]) >= 1.0,
            tr!(
                "round {round}: the startup reconcile did not find my-config in sync: {lines}",
                round,
                lines = metrics.lines(RECONCILES)
            )
        );
        let log = lab.controller_log(&run).await?;
        if let Some(line) =
            log.lines().find(|l| l.contains(LOG_CREATED) || l.contains(LOG_CORRECTED))
        {
            bail!(tr!("round {round}: the controller logged a write: {line}", round, line));
        }
        reconciles += metrics.sum(RECONCILES);
    }
    let after = lab.config_maps().get(lab.desired().name()).await?;
    ensure!(
        after.metadata.resource_version == before.metadata.resource_version,
        tr!(
            "resourceVersion moved from {before} to {after}",
            before = format!("{:?}", before.metadata.resource_version),
            after = format!("{:?}", after.metadata.resource_version)
        )
    );
    ensure!(
        after.metadata.managed_fields == before.metadata.managed_fields,
        tr!(
            "managedFields changed: {before} → {after}",
            before = format!("{:?}", before.metadata.managed_fields),
            after = format!("{:?}", after.metadata.managed_fields)
        )
    );
    let version = after.metadata.resource_version.unwrap_or_default();
    let detail = tr!(
        "2 restarts, {reconciles} reconciles, 0 writes, resourceVersion {version} unchanged",
        reconciles,
        version
    );
    let values = vec![("reconciles", reconciles.to_string()), ("version", version)];
    Ok(Measured { values, ..Measured::said(detail) })
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
    // All five in flight at once: on a busy machine one patch after another
    // can take longer than the worker's sleep, and then nothing is there to coalesce.
    let sent = Instant::now();
    let patches: Vec<_> = (1..=5).map(|i| Patch::Merge(dedup_change(lab.desired(), i))).collect();
    let params = someone();
    futures::future::try_join_all(patches.iter().map(|p| api.patch(&name, &params, p))).await?;
    let accepted = sent.elapsed();
    wait_desired(lab).await?;
    let metrics = wait_idle(lab).await?;
    let reconciles = metrics.sum(RECONCILES) - baseline;
    ensure!(
        reconciles < 5.0,
        tr!(
            "five changes (accepted within {accepted}; the worker sleeps {sleep}) caused \
             {reconciles} reconciles: keys were not coalesced",
            accepted = format!("{accepted:.1?}"),
            sleep = DEDUP_FLAGS[1],
            reconciles
        )
    );
    ensure!(
        metrics.get(RECONCILES, &[("result", "updated")]) >= 1.0,
        tr!("the data was put back, but not by a counted update")
    );
    let values = vec![("reconciles", reconciles.to_string())];
    Ok(Measured {
        values,
        ..Measured::said(tr!("5 changes → {reconciles} reconciles", reconciles))
    })
}
