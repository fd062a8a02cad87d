//! Someone else's hand on my-config: `binaryData` beside the data, another
//! controller that owns it. The controller corrects what is its to correct
//! and leaves what another controller owns (a second writer that keeps
//! putting other data back: [`super::second_writer`]).

use std::time::Duration;

use anyhow::{Context as _, ensure};
use controller::{
    metrics::RECONCILES,
    reconcile::{LOG_OWNED, REASON_CONTENDED},
};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Patch, PostParams};
use serde_json::json;

use super::{lines_with, ms, secs, someone, then_restore};
use labkit::eventually::{Check, eventually, throughout};
use labkit::{
    converge::{HEAL_WITHIN, measure_until_desired, wait_desired},
    lab::Lab,
    suite::Measured,
    tr,
};

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
    ensure!(now.binary_data.is_none_or(|b| b.is_empty()), tr!("binaryData is still there"));
    Ok(Measured::took(
        healed,
        tr!("binaryData added beside the right data → removed in {healed}", healed = ms(healed)),
    ))
}

/// How long the controller is watched leaving another controller's object alone.
const LEFT_ALONE_FOR: Duration = Duration::from_secs(3);

/// my-config controlled by another owner (a controller ownerReference) with
/// other data → not updated, reported (Warning Event `Contended`, the metric
/// `contended`); the ownerReference removed → corrected.
pub async fn owned_elsewhere_left_alone(lab: &mut Lab) -> anyhow::Result<Measured> {
    let mut owner_uid = None;
    let result = owned_elsewhere(lab, &mut owner_uid).await;
    let deleted = super::delete_made(&lab.config_maps(), OWNER, owner_uid).await;
    then_restore(lab, result.and_then(|measured| deleted.map(|()| measured))).await
}

/// The owner: a ConfigMap beside my-config, so that on kind the garbage
/// collector finds it alive and leaves my-config be.
const OWNER: &str = "e2e-owner";

/// `owner_uid`: the owner's uid once it is made, for the caller to delete it by.
async fn owned_elsewhere(
    lab: &mut Lab,
    owner_uid: &mut Option<String>,
) -> anyhow::Result<Measured> {
    wait_desired(lab).await?;
    let mark = lab.log_mark()?;
    let api = lab.config_maps();
    let name = lab.desired().name().to_string();
    let owner = ConfigMap {
        metadata: kube::api::ObjectMeta { name: Some(OWNER.into()), ..Default::default() },
        ..Default::default()
    };
    let owner = api.create(&PostParams::default(), &owner).await?;
    let uid = owner.metadata.uid.with_context(|| tr!("a created object has a uid"))?;
    *owner_uid = Some(uid.clone());
    let before = lab.metrics().await?.get(RECONCILES, &[("result", "contended")]);
    let theirs = json!({
        "metadata": {"ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": OWNER,
                                           "uid": uid, "controller": true}]},
        "data": {labkit::suite::first_key(lab.desired()): "env=theirs"},
    });
    api.patch(&name, &someone(), &Patch::Merge(&theirs)).await?;
    let written = api.get(&name).await?.metadata.resource_version;
    // Left alone: watched for a while, nothing written.
    throughout(LEFT_ALONE_FOR, Duration::from_millis(200), || async {
        let now = api.get(&name).await?.metadata.resource_version;
        ensure!(now == written, tr!("another controller's ConfigMap was written"));
        Ok(())
    })
    .await?;
    let reports = lab.metrics().await?.get(RECONCILES, &[("result", "contended")]) - before;
    ensure!(reports >= 1.0, tr!("no reconcile reported it contended"));
    let log = lab.controller_log(&mark).await?;
    ensure!(!lines_with(&log, LOG_OWNED).is_empty(), tr!("no warning line: {log}", log));
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
        tr!(
            "controlled by ConfigMap/{owner} with other data: not written for {window}, {reports} \
             contended reconciles, a Warning Event {reason}; ownerReference removed → \
             corrected in {healed}",
            owner = OWNER,
            window = secs(LEFT_ALONE_FOR),
            reports,
            reason = REASON_CONTENDED,
            healed = ms(healed)
        ),
    ))
}

/// Waits for a Warning Event `Contended` about my-config.
async fn contended_event(lab: &Lab) -> anyhow::Result<()> {
    eventually(&tr!("a Warning Event Contended"), HEAL_WITHIN, || async {
        let found = !super::warnings(lab, REASON_CONTENDED).await?.is_empty();
        Ok(Check::done_if(
            found,
            (),
            tr!("no {reason} Event on my-config", reason = REASON_CONTENDED),
        ))
    })
    .await
}
