//! What a controller does when there is (almost) nothing to do: over a
//! steady window it must write nothing, and a burst of events must cost it
//! fewer reconciles than events. Watched from both sides: the controller's
//! `/metrics` (ours only) and a watch on my-config (any controller).

use controller::metrics::{RECONCILES, WRITES};
use std::{collections::HashSet, time::Duration};

use anyhow::{Context as _, bail};
use futures::{StreamExt, TryStreamExt, stream::BoxStream};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    Api,
    api::{ListParams, Patch, WatchEvent, WatchParams},
};
use serde::Serialize;
use tokio::time::Instant;

use super::rounds::bench_writes;
use labkit::{
    converge::{HEAL_WITHIN, wait_desired, wait_idle},
    lab::Lab,
    scrape::Scrape,
};

/// A steady window: my-config right, nobody touching it.
#[derive(Clone, Debug, Serialize)]
pub struct Steady {
    pub seconds: f64,
    /// Reconciles run in the window (`/metrics`); `None` for a controller
    /// without our metrics.
    pub reconciles: Option<f64>,
    /// Writes the controller counted (`api_writes_total`); `None` as above.
    pub writes: Option<f64>,
    /// Changes to my-config a watch saw in the window: any controller's
    /// writes, counted by the API server's side.
    pub changes_seen: u64,
}

/// Watches my-config for `window` while nobody else touches it. `metrics`:
/// the controller serves ours (`reconcile_total`, `api_writes_total`).
pub async fn steady(lab: &Lab, window: Duration, metrics: bool) -> anyhow::Result<Steady> {
    let at_start = wait_desired(lab).await?;
    let before = scrape(lab, metrics).await?;
    let api = lab.config_maps();
    let name = lab.desired().name();
    let mut watch = Watch::open(&api, name).await?;
    let started = Instant::now();
    let end = started + window;
    let mut changes = 0u64;
    let mut next_report = started + Duration::from_secs(1);
    let total = window.as_secs_f64();
    loop {
        let until = end.min(next_report);
        match tokio::time::timeout_at(until, watch.next()).await {
            Ok(event) => match event? {
                Some(_) => changes += 1,
                // The API server ends a watch at its timeout: watch again
                // (a change in between still shows in the resourceVersion).
                None => watch = Watch::open(&api, name).await?,
            },
            Err(_) if Instant::now() >= end => break,
            Err(_) => {
                labkit::progress!(
                    "  steady {:.0}/{total:.0} s: {changes} changes seen",
                    started.elapsed().as_secs_f64()
                );
                next_report += Duration::from_secs(1);
            }
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    let at_end = api.get_opt(name).await?;
    let version = |cm: Option<&ConfigMap>| cm.and_then(|cm| cm.metadata.resource_version.clone());
    if version(at_end.as_ref()) != version(Some(&at_start)) {
        changes = changes.max(1);
    }
    let after = scrape(lab, metrics).await?;
    let delta = |name: &str| Some(after.as_ref()?.sum(name) - before.as_ref()?.sum(name));
    Ok(Steady {
        seconds,
        reconciles: delta(RECONCILES),
        writes: delta(WRITES),
        changes_seen: changes,
    })
}

/// A burst of patches and what it cost.
#[derive(Clone, Debug, Serialize)]
pub struct Burst {
    /// Patches sent (each changes my-config's data).
    pub patches: usize,
    /// Changes of my-config a watch saw, from the first patch until the data
    /// was desired again: the patches plus the controller's corrections.
    pub events: u64,
    /// Reconciles the controller ran for them (`/metrics`; `None` without).
    pub reconciles: Option<f64>,
    /// Writes among those reconciles (`None` without our metrics).
    pub writes: Option<f64>,
    /// First patch sent → desired again, in ms.
    pub settled_ms: f64,
}

/// Sends `patches` merge patches of my-config's data through `writer`, at
/// most `in_flight` at once, then waits until the data is desired again
/// (and, with `metrics`, the controller idle) and counts.
pub async fn burst(
    lab: &Lab,
    writer: &Api<ConfigMap>,
    patches: usize,
    in_flight: usize,
    metrics: bool,
) -> anyhow::Result<Burst> {
    let desired = lab.desired().clone();
    wait_desired(lab).await?;
    if metrics {
        wait_idle(lab).await?;
    }
    let before = scrape(lab, metrics).await?;
    let key = labkit::suite::first_key(&desired);
    let mut watch = Watch::open(&lab.config_maps(), desired.name()).await?;
    let started = Instant::now();
    let name = desired.name();
    // The resourceVersion each patch produced: the watch shows them all
    // before the final correction.
    let mut pending: HashSet<String> = futures::stream::iter(1..=patches)
        .map(|i| {
            let drift = serde_json::json!({"data": {key.clone(): format!("env=burst-{i}")}});
            async move {
                let cm = writer.patch(name, &bench_writes(), &Patch::Merge(&drift)).await?;
                Ok::<_, anyhow::Error>(cm.metadata.resource_version.unwrap_or_default())
            }
        })
        .buffer_unordered(in_flight.max(1))
        .try_collect()
        .await?;
    let mut events = 0u64;
    let settled = tokio::time::timeout(HEAL_WITHIN, async {
        while let Some(cm) = watch.next().await? {
            events += 1;
            if let Some(rv) = &cm.metadata.resource_version {
                pending.remove(rv);
            }
            if pending.is_empty() && desired.is_satisfied_by(&cm) {
                return Ok::<_, anyhow::Error>(started.elapsed());
            }
        }
        bail!("the watch ended before the burst settled")
    })
    .await
    .with_context(|| format!("{desired} not desired within {HEAL_WITHIN:?} of a burst"))??;
    if metrics {
        wait_idle(lab).await?;
    }
    let after = scrape(lab, metrics).await?;
    let delta = |name: &str| Some(after.as_ref()?.sum(name) - before.as_ref()?.sum(name));
    Ok(Burst {
        patches,
        events,
        reconciles: delta(RECONCILES),
        writes: delta(WRITES),
        settled_ms: settled.as_secs_f64() * 1000.0,
    })
}

async fn scrape(lab: &Lab, metrics: bool) -> anyhow::Result<Option<Scrape>> {
    Ok(if metrics { Some(lab.metrics().await?) } else { None })
}

/// A watch on one ConfigMap from its current version: each change is one item.
struct Watch {
    stream: BoxStream<'static, kube::Result<WatchEvent<ConfigMap>>>,
}

impl Watch {
    async fn open(api: &Api<ConfigMap>, name: &str) -> anyhow::Result<Watch> {
        let fields = format!("metadata.name={name}");
        let list = api.list(&ListParams::default().fields(&fields)).await?;
        let from = list.metadata.resource_version.unwrap_or_default();
        let stream = api.watch(&WatchParams::default().fields(&fields).timeout(290), &from).await?;
        Ok(Watch { stream: stream.boxed() })
    }

    /// The next change (Added, Modified; a Deleted yields its last state);
    /// `None` when the watch ends.
    async fn next(&mut self) -> anyhow::Result<Option<ConfigMap>> {
        loop {
            return match self.stream.try_next().await? {
                None => Ok(None),
                Some(
                    WatchEvent::Added(cm) | WatchEvent::Modified(cm) | WatchEvent::Deleted(cm),
                ) => Ok(Some(cm)),
                Some(WatchEvent::Bookmark(_)) => continue,
                Some(WatchEvent::Error(e)) => bail!("watch error: {e}"),
            };
        }
    }
}
