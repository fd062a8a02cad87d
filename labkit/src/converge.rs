//! Waiting for the controller to converge: the desired data in place, the
//! work queue empty, and the time it took as a watch saw it.

use controller::metrics::{IN_FLIGHT, QUEUE_DELAYED, QUEUE_DEPTH};
use std::{convert::Infallible, future::Future, time::Duration};

use anyhow::bail;
use controller::desired::Desired;
use futures::TryStreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    Api,
    api::{DeleteParams, ListParams, WatchEvent, WatchParams},
};
use tokio::time::Instant;

use crate::{lab::Lab, tr};

use crate::eventually::{Check, eventually};

/// How long the controller gets to reach the desired state in any experiment.
pub const HEAL_WITHIN: Duration = Duration::from_secs(20);

/// Waits until my-config exists with exactly the desired data; returns it.
pub async fn wait_desired(lab: &Lab) -> anyhow::Result<ConfigMap> {
    let api = lab.config_maps();
    let desired = lab.desired().clone();
    let what = tr!("{desired} to hold the desired data", desired);
    eventually(&what, HEAL_WITHIN, || async {
        Ok(match api.get_opt(desired.name()).await? {
            Some(cm)
                if desired.is_satisfied_by(&cm) && cm.metadata.deletion_timestamp.is_none() =>
            {
                Check::Done(cm)
            }
            Some(cm) => Check::NotYet(format!("data {:?}", cm.data)),
            None => Check::NotYet(tr!("absent")),
        })
    })
    .await
}

/// Waits until the controller is idle: nothing queued, no retry waiting,
/// nothing running.
pub async fn wait_idle(lab: &Lab) -> anyhow::Result<crate::scrape::Scrape> {
    let what = tr!("the controller to be idle");
    eventually(&what, HEAL_WITHIN, || async {
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

/// How a wait for my-config ([`until_desired`]) ended.
pub enum Until<E> {
    /// It held the desired data this long after the act began.
    Reached { after: Duration },
    /// Not within [`HEAL_WITHIN`] of the act; as last seen (`None`: absent).
    TimedOut { last: Option<Box<ConfigMap>> },
    /// Whoever keeps it ended first (the program under grade exited).
    Ended(E),
}

/// Starts a watch on my-config, runs `act` (a disturbance, or the start of
/// whoever keeps it), and waits for the first watch event showing the desired
/// data: at most [`HEAL_WITHIN`] after `act`, and only while the future `act`
/// returns is pending (it resolves when the keeper ends). Seen through a
/// watch, not polling, so the time is not rounded up to a poll interval.
pub async fn until_desired<A, F, K, E>(
    api: &Api<ConfigMap>,
    desired: &Desired,
    act: A,
) -> anyhow::Result<Until<E>>
where
    A: FnOnce() -> F,
    F: Future<Output = anyhow::Result<K>>,
    K: Future<Output = E>,
{
    let fields = format!("metadata.name={}", desired.name());
    let list = api.list(&ListParams::default().fields(&fields)).await?;
    let mut last = list.items.into_iter().next().map(Box::new);
    let from = list.metadata.resource_version.unwrap_or_default();
    // Open through an act that starts a program (`go run` compiles first).
    let params = WatchParams::default().fields(&fields).timeout(290);
    let stream = api.watch(&params, &from).await?;
    futures::pin_mut!(stream);
    let started = Instant::now();
    let keeping = act().await?;
    let watched = tokio::time::timeout(HEAL_WITHIN, async {
        while let Some(event) = stream.try_next().await? {
            match event {
                WatchEvent::Added(cm) | WatchEvent::Modified(cm) => {
                    let right =
                        desired.is_satisfied_by(&cm) && cm.metadata.deletion_timestamp.is_none();
                    last = Some(Box::new(cm));
                    if right {
                        return Ok(started.elapsed());
                    }
                }
                WatchEvent::Deleted(_) => last = None,
                WatchEvent::Bookmark(_) => {}
                WatchEvent::Error(e) => bail!(tr!("watch error: {error}", error = e)),
            }
        }
        bail!(tr!("the watch ended before {desired} held the desired data", desired))
    });
    // A keeper that ended is said first, as the grader's poll did: its
    // ConfigMap seen right at the same moment is not its work.
    let seen = tokio::select! {
        biased;
        ended = keeping => return Ok(Until::Ended(ended)),
        seen = watched => seen,
    };
    match seen {
        Ok(after) => Ok(Until::Reached { after: after? }),
        Err(_) => Ok(Until::TimedOut { last }),
    }
}

/// [`until_desired`] of the lab's my-config, its controller keeping it.
pub async fn measure_until_desired<F, Fut>(lab: &Lab, act: F) -> anyhow::Result<Duration>
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = anyhow::Result<()>>,
{
    let (api, desired) = (lab.config_maps(), lab.desired());
    let kept = || async { act().await.map(|()| std::future::pending::<Infallible>()) };
    match until_desired(&api, desired, kept).await? {
        Until::Reached { after } => Ok(after),
        Until::TimedOut { last } => bail!(tr!(
            "{desired} not back to the desired data within {within}; last seen: {last}",
            desired,
            within = format!("{HEAL_WITHIN:?}"),
            last =
                last.map_or(tr!("absent"), |cm| format!("data {:?}", cm.data.unwrap_or_default()))
        )),
        Until::Ended(never) => match never {},
    }
}

/// Deletes ConfigMap `name` (if present) and waits until it is gone.
pub async fn delete_and_wait_gone(api: &Api<ConfigMap>, name: &str) -> anyhow::Result<()> {
    if api.get_opt(name).await?.is_some() {
        api.delete(name, &DeleteParams::default()).await?;
    }
    let what = tr!("{name} to be gone", name);
    eventually(&what, HEAL_WITHIN, || async {
        Ok(match api.get_opt(name).await? {
            None => Check::Done(()),
            Some(cm) => Check::NotYet(tr!(
                "still there, deletionTimestamp {timestamp}",
                timestamp = format!("{:?}", cm.metadata.deletion_timestamp)
            )),
        })
    })
    .await
}
