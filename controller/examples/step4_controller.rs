//! Step 4: the controller. Keeps the ConfigMap default/my-config as desired:
//! creates it when missing, puts its data back when changed, writes nothing
//! when it is right. The course's final main.go, one to one.
//!
//! RUST_LOG=info,my_controller=debug is the course's -v=1: every resync (30 s)
//! logs "matches the desired state, nothing to do". It names your crate
//! (the kit's copy: step4_controller); RUST_LOG=debug adds kube's and hyper's.

use std::{collections::BTreeMap, panic::AssertUnwindSafe, time::Duration};

use anyhow::Context as _;
use futures::{FutureExt, StreamExt};
use k8s_openapi::{api::core::v1::ConfigMap, apimachinery::pkg::apis::meta::v1::ObjectMeta};
use kube::{
    Api, Client, ResourceExt,
    api::PostParams,
    runtime::{
        WatchStreamExt,
        reflector::{self, ObjectRef, Store},
        watcher,
    },
};
use tokio::signal::unix::{SignalKind, signal};
use tracing::{debug, error, info, warn};
use tracing_subscriber::EnvFilter;
use workqueue::{RateLimit, WatchBackoff, WorkQueue};

// ========== The desired state: this controller's only business knowledge ==========
const TARGET_NAMESPACE: &str = "default";
const TARGET_NAME: &str = "my-config";

fn desired_data() -> BTreeMap<String, String> {
    BTreeMap::from([("app.conf".to_string(), "env=prod\nreplicas=3".to_string())])
}

#[derive(Clone)]
struct Controller {
    /// Writes go to the API server...
    config_maps: Api<ConfigMap>,
    /// ...reads come from the informer's cache (the course's cmLister).
    cache: Store<ConfigMap>,
    queue: WorkQueue<String>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()))
        .init();
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut terminate = signal(SignalKind::terminate())?;
    let client = Client::try_default().await?;

    // Only `default` is watched, like informers.WithNamespace.
    let config_maps: Api<ConfigMap> = Api::namespaced(client, TARGET_NAMESPACE);
    let (cache, writer) = reflector::store();
    let c = Controller {
        config_maps: config_maps.clone(),
        cache,
        queue: WorkQueue::new(RateLimit::default()),
    };

    // Fixed move ①: the event handlers only put keys on the queue.
    let events = reflector::reflector(writer, watcher(config_maps, watcher::Config::default()))
        .backoff(WatchBackoff::default());
    let informer = tokio::spawn({
        let queue = c.queue.clone();
        async move {
            tokio::pin!(events);
            while let Some(event) = events.next().await {
                match event {
                    Ok(
                        watcher::Event::InitApply(cm)
                        | watcher::Event::Apply(cm)
                        | watcher::Event::Delete(cm),
                    ) => enqueue(&queue, &cm),
                    // A list again after a lost watch: kick again. A ConfigMap
                    // deleted meanwhile has no Delete event (client-go's
                    // informer hands out a tombstone; kube's watcher does not).
                    Ok(watcher::Event::InitDone) => {
                        queue.add(format!("{TARGET_NAMESPACE}/{TARGET_NAME}"));
                    }
                    Ok(watcher::Event::Init) => {}
                    Err(e) => warn!("watch error, retrying: {e}"),
                }
            }
        }
    });

    // Fixed move ②: no worker starts before the cache has synced.
    tokio::select! {
        synced = c.cache.wait_until_ready() => synced.context("the informer stopped before it synced")?,
        _ = interrupt.recv() => return Ok(()),
        _ = terminate.recv() => return Ok(()),
    }
    info!("cache synced");

    // ★ The kick: my-config may not exist, and then no event will ever bring
    // its key. Queue it once, so the reconcile runs at least once.
    c.queue.add(format!("{TARGET_NAMESPACE}/{TARGET_NAME}"));

    // The resync (30 s, so you can watch it happen): every cached object is
    // queued again, as if it had changed.
    let resync = tokio::spawn({
        let c = c.clone();
        async move {
            let every = Duration::from_secs(30);
            let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
            loop {
                ticks.tick().await;
                for cm in c.cache.state() {
                    enqueue(&c.queue, &cm);
                }
            }
        }
    });

    // Two workers.
    let workers: Vec<_> = (0..2)
        .map(|_| {
            let c = c.clone();
            tokio::spawn(async move { while c.process_next_item().await {} })
        })
        .collect();

    tokio::select! {
        _ = interrupt.recv() => {}
        _ = terminate.recv() => {}
    }
    info!("signal received, shutting down");
    c.queue.shut_down();
    informer.abort();
    resync.abort();
    for worker in workers {
        worker.await?;
    }
    Ok(())
}

/// The key of an object: `namespace/name`.
fn enqueue(queue: &WorkQueue<String>, cm: &ConfigMap) {
    queue.add(format!("{}/{}", cm.namespace().unwrap_or_default(), cm.name_any()));
}

impl Controller {
    // ---------- The worker's skeleton: the same as step 3 ----------
    async fn process_next_item(&self) -> bool {
        let Some(key) = self.queue.get().await else {
            return false;
        };
        // A panic is a failure like any other: the key must still reach `done`.
        let result = AssertUnwindSafe(self.reconcile(&key))
            .catch_unwind()
            .await
            .unwrap_or_else(|_| Err(anyhow::anyhow!("the reconcile panicked")));
        match result {
            Ok(()) => self.queue.forget(&key),
            Err(e) if self.queue.num_requeues(&key) < 5 => {
                info!("reconcile failed, retrying later ({key}): {e}");
                self.queue.add_rate_limited(key.clone());
            }
            Err(e) => {
                error!("reconcile failed 5 times, giving up ({key}): {e}");
                self.queue.forget(&key);
            }
        }
        self.queue.done(&key);
        true
    }
}

impl Controller {
    // ---------- reconcile: where 90% of your work will be ----------
    async fn reconcile(&self, key: &str) -> anyhow::Result<()> {
        let (namespace, name) = key.split_once('/').context("a key is namespace/name")?;
        // Not our object: other ConfigMaps' events come in too, and that is fine.
        if namespace != TARGET_NAMESPACE || name != TARGET_NAME {
            return Ok(());
        }
        let desired = desired_data();

        // Read from the cache, not from the API server.
        let Some(cm) = self.cache.get(&ObjectRef::new(name).within(namespace)) else {
            // Wanted but missing → create it (self-healing).
            info!("{key} does not exist, creating it");
            let fresh = ConfigMap {
                metadata: ObjectMeta {
                    name: Some(name.into()),
                    namespace: Some(namespace.into()),
                    ..ObjectMeta::default()
                },
                data: Some(desired),
                ..ConfigMap::default()
            };
            self.config_maps.create(&PostParams::default(), &fresh).await?;
            return Ok(());
        };

        // Present → compare, and correct only when different.
        if cm.data.as_ref() == Some(&desired) {
            debug!("{key} matches the desired state, nothing to do");
            // ★ Right means no write at all: this is what prevents a hot loop.
            return Ok(());
        }
        info!("{key} drifted from the desired state, correcting it");
        // ★ The cache hands out a shared Arc<ConfigMap>: change a clone you
        // own (the course's DeepCopy), never the cached object.
        let mut copy = ConfigMap::clone(&cm);
        copy.data = Some(desired);
        // Its resourceVersion makes this a compare-and-swap: a stale cache
        // gets 409 Conflict, and the retry reads the newer object.
        self.config_maps.replace(name, &PostParams::default(), &copy).await?;
        Ok(())
    }
}
