//! Waiting for the controller to converge: the desired data in place, the
//! work queue empty, and the time it took as a watch saw it.

use controller::metrics::{IN_FLIGHT, QUEUE_DELAYED, QUEUE_DEPTH};
use std::time::Duration;

use anyhow::bail;
use futures::TryStreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{DeleteParams, ListParams, WatchEvent, WatchParams};
use tokio::time::Instant;

use crate::lab::Lab;

use crate::eventually::{Check, eventually};

/// How long the controller gets to reach the desired state in any experiment.
pub const HEAL_WITHIN: Duration = Duration::from_secs(20);

/// Waits until my-config exists with exactly the desired data; returns it.
pub async fn wait_desired(lab: &Lab) -> anyhow::Result<ConfigMap> {
    let api = lab.config_maps();
    let desired = lab.desired().clone();
    eventually(&format!("{desired} to hold the desired data"), HEAL_WITHIN, || async {
        Ok(match api.get_opt(desired.name()).await? {
            Some(cm)
                if desired.is_satisfied_by(&cm) && cm.metadata.deletion_timestamp.is_none() =>
            {
                Check::Done(cm)
            }
            Some(cm) => Check::NotYet(format!("data {:?}", cm.data)),
            None => Check::NotYet("absent".into()),
        })
    })
    .await
}

/// Waits until the controller is idle: nothing queued, no retry waiting,
/// nothing running.
pub async fn wait_idle(lab: &Lab) -> anyhow::Result<crate::metrics::Scrape> {
    eventually("the controller to be idle", HEAL_WITHIN, || async {
        let m = lab.metrics().await?;
        let (depth, delayed, running) =
            (m.sum(QUEUE_DEPTH), m.sum(QUEUE_DELAYED), m.sum(IN_FLIGHT));
        Ok(Check::done_if(
            depth + delayed + running == 0.0,
            m,
            format!("{QUEUE_DEPTH} {depth}, {QUEUE_DELAYED} {delayed}, {IN_FLIGHT} {running}"),
        ))
    })
    .await
}

/// Starts a watch on my-config, runs `act` (the disturbance), and returns the
/// time from the start of `act` to the first watch event showing the desired
/// data again. Seen through a watch, not polling, so the figure is not
/// rounded up to a poll interval.
pub async fn measure_until_desired<F, Fut>(lab: &Lab, act: F) -> anyhow::Result<Duration>
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    let api = lab.config_maps();
    let desired = lab.desired().clone();
    let fields = format!("metadata.name={}", desired.name());
    let list = api.list(&ListParams::default().fields(&fields)).await?;
    let from = list.metadata.resource_version.unwrap_or_default();
    let stream = api.watch(&WatchParams::default().fields(&fields).timeout(60), &from).await?;
    futures::pin_mut!(stream);
    let started = Instant::now();
    act().await?;
    let mut last = String::from("no event");
    let seen = tokio::time::timeout(HEAL_WITHIN, async {
        while let Some(event) = stream.try_next().await? {
            match event {
                WatchEvent::Added(cm) | WatchEvent::Modified(cm) => {
                    if desired.is_satisfied_by(&cm) {
                        return Ok::<_, anyhow::Error>(Some(started.elapsed()));
                    }
                    last = format!("data {:?}", cm.data.unwrap_or_default());
                }
                WatchEvent::Deleted(_) => last = "deleted".into(),
                WatchEvent::Bookmark(_) => {}
                WatchEvent::Error(e) => bail!("watch error: {e}"),
            }
        }
        Ok(None)
    })
    .await;
    match seen {
        Ok(Ok(Some(latency))) => Ok(latency),
        Ok(Ok(None)) => {
            bail!("the watch ended before {desired} was desired again; last seen: {last}")
        }
        Ok(Err(e)) => Err(e),
        Err(_) => bail!(
            "{desired} not back to the desired data within {HEAL_WITHIN:?}; last seen: {last}"
        ),
    }
}

/// Deletes my-config (if present) and waits until it is gone.
pub async fn delete_and_wait_gone(lab: &Lab) -> anyhow::Result<()> {
    let api = lab.config_maps();
    let name = lab.desired().name();
    if api.get_opt(name).await?.is_some() {
        api.delete(name, &DeleteParams::default()).await?;
    }
    eventually(&format!("{name} to be gone"), HEAL_WITHIN, || async {
        Ok(match api.get_opt(name).await? {
            None => Check::Done(()),
            Some(cm) => Check::NotYet(format!(
                "still there, deletionTimestamp {:?}",
                cm.metadata.deletion_timestamp
            )),
        })
    })
    .await
}
