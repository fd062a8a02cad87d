//! The floor: the harness's own minimal loop in the controller's place.
//!
//! With the controller stopped, [`StandIn`] watches my-config and, on each
//! event, sends the one write that puts it right — a create after a delete,
//! an update after a drift — with nothing in between: no cache, no queue, no
//! Events. Timed by the same rounds as the controller, it shows what the API
//! server allows on this machine at this moment: a controller can add to
//! that, never go below it.

use std::sync::{
    Arc,
    atomic::{AtomicU64, Ordering},
};

use anyhow::{Context as _, bail};
use controller::desired::Desired;
use futures::TryStreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    Api, Client,
    api::{ListParams, PostParams, WatchEvent, WatchParams},
};
use tokio::{sync::oneshot, task::JoinHandle};

/// The stand-in's field manager.
pub const FIELD_MANAGER: &str = "bench-floor";

/// What the stand-in wrote.
#[derive(Debug, Default)]
pub struct Tally {
    pub creates: AtomicU64,
    pub updates: AtomicU64,
    /// Writes the API server refused (a 409 when racing another writer).
    pub refused: AtomicU64,
}

/// The running stand-in; [`StandIn::stop`] ends it.
pub struct StandIn {
    task: JoinHandle<anyhow::Result<()>>,
    tally: Arc<Tally>,
}

impl StandIn {
    /// Starts the loop with `client` (give it the controller's own identity,
    /// so authentication and RBAC cost the same) and returns once its watch
    /// is open: from then on it reacts to every change.
    pub async fn start(client: Client, desired: Desired) -> anyhow::Result<StandIn> {
        let api = Api::namespaced(client, desired.namespace());
        let tally = Arc::new(Tally::default());
        let (opened, watching) = oneshot::channel();
        let task = tokio::spawn(keep(api, desired, tally.clone(), opened));
        if watching.await.is_err() {
            // It ended before its watch opened: its error says why.
            return Err(match task.await {
                Ok(Err(e)) => e.context("the floor's stand-in could not start"),
                Ok(Ok(())) => anyhow::anyhow!("the floor's stand-in ended at once"),
                Err(e) => anyhow::Error::new(e).context("the floor's stand-in panicked"),
            });
        }
        Ok(StandIn { task, tally })
    }

    /// What it wrote so far.
    pub fn tally(&self) -> &Tally {
        &self.tally
    }

    /// Stops it; fails if it had failed (its watch broke for good).
    pub async fn stop(mut self) -> anyhow::Result<()> {
        if self.task.is_finished() {
            return (&mut self.task).await.context("the floor's stand-in panicked")?;
        }
        Ok(())
    }
}

impl Drop for StandIn {
    /// Stopped or dropped (a bench that fails half-way), it writes no more.
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The loop: list (and put right what is there), watch, react; list again
/// when the watch ends.
async fn keep(
    api: Api<ConfigMap>,
    desired: Desired,
    tally: Arc<Tally>,
    opened: oneshot::Sender<()>,
) -> anyhow::Result<()> {
    let fields = format!("metadata.name={}", desired.name());
    let mut opened = Some(opened);
    loop {
        let list = api.list(&ListParams::default().fields(&fields)).await?;
        put_right(&api, &desired, list.items.first(), &tally).await;
        let from = list.metadata.resource_version.unwrap_or_default();
        let params = WatchParams::default().fields(&fields).timeout(290);
        let stream = api.watch(&params, &from).await?;
        if let Some(opened) = opened.take() {
            let _ = opened.send(());
        }
        futures::pin_mut!(stream);
        while let Some(event) = stream.try_next().await? {
            match event {
                WatchEvent::Deleted(_) => put_right(&api, &desired, None, &tally).await,
                WatchEvent::Added(cm) | WatchEvent::Modified(cm) => {
                    put_right(&api, &desired, Some(&cm), &tally).await
                }
                WatchEvent::Bookmark(_) => {}
                // 410 Gone: the version is too old; list again.
                WatchEvent::Error(e) if e.code == 410 => break,
                WatchEvent::Error(e) => bail!("the floor's watch failed: {e}"),
            }
        }
    }
}

/// The one write that makes `live` desired, if any. A refused write is
/// counted, not fatal: the next event tries again, as a controller would.
async fn put_right(
    api: &Api<ConfigMap>,
    desired: &Desired,
    live: Option<&ConfigMap>,
    tally: &Tally,
) {
    let params = PostParams { field_manager: Some(FIELD_MANAGER.into()), ..PostParams::default() };
    let (result, counter) = match live {
        None => (api.create(&params, &desired.to_config_map()).await, &tally.creates),
        Some(cm) if cm.metadata.deletion_timestamp.is_some() || desired.is_satisfied_by(cm) => {
            return;
        }
        // The cached resourceVersion goes along: a concurrent change is a 409.
        Some(cm) => {
            (api.replace(desired.name(), &params, &desired.corrected(cm)).await, &tally.updates)
        }
    };
    let counter = if result.is_ok() { counter } else { &tally.refused };
    counter.fetch_add(1, Ordering::Relaxed);
}
