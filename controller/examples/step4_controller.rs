//! Course step 4 — the whole controller in one file: keep `default/my-config`
//! as desired (create it when missing, put its data back when changed, write
//! nothing when right).
//!
//! It mirrors the course's final main.go one to one: the desired state, the
//! informer cache (`reflector`), the kick after sync, two workers,
//! `process_next_item` with give-up after 5 failures (the kit's
//! `controller::queue::WorkQueue`), and `reconcile`: read the cache → create /
//! compare → update an owned clone / nothing. `controller/src/` is the same
//! loop hardened for production (docs/controller.md lists what it adds).
//!
//!     cargo run -p controller --example step4_controller
//!     RUST_LOG=info,step4_controller=debug cargo run -p controller --example step4_controller -- --resync 5s
//!
//! The second line is the course's `go run main.go -v=1`: every resync logs
//! "matches the desired state, nothing to do".

use std::{collections::BTreeMap, time::Duration};

use anyhow::Context as _;
use clap::Parser;
use controller::{
    cli::parse_duration,
    connect,
    queue::{RateLimit, WorkQueue},
    runner::shutdown_signal,
};
use futures::StreamExt;
use k8s_openapi::{api::core::v1::ConfigMap, apimachinery::pkg::apis::meta::v1::ObjectMeta};
use kube::{
    Api, ResourceExt,
    api::PostParams,
    runtime::{
        WatchStreamExt,
        reflector::{self, ObjectRef, Store},
        watcher,
    },
};
use tracing::{debug, error, info, warn};

const TARGET_NAMESPACE: &str = "default";
const TARGET_NAME: &str = "my-config";
/// The course's `NumRequeues(key) < 5`.
const MAX_RETRIES: u32 = 5;
/// The course's `for i := 0; i < 2; i++ { go wait.UntilWithContext(…) }`.
const WORKERS: usize = 2;

/// The course's `desiredData`: what my-config must hold.
fn desired_data() -> BTreeMap<String, String> {
    BTreeMap::from([("app.conf".to_string(), "env=prod\nreplicas=3".to_string())])
}

#[derive(Parser)]
struct Args {
    /// Path of a kubeconfig; without it `KUBECONFIG`, `~/.kube/config`, or in-cluster.
    #[arg(long)]
    kubeconfig: Option<std::path::PathBuf>,
    /// How often every cached ConfigMap is queued again (the informer's resync).
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    resync: Duration,
}

#[derive(Clone)]
struct Controller {
    /// Writes go to the API server…
    config_maps: Api<ConfigMap>,
    /// …reads come from the informer's cache (the course's `cmLister`).
    cache: Store<ConfigMap>,
    queue: WorkQueue<String>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if args.resync.is_zero() {
        anyhow::bail!("--resync must be more than 0 (the course uses 30s)");
    }
    controller::telemetry::init_for_example();
    let client = connect::client(args.kubeconfig.as_deref()).await.map_err(anyhow::Error::msg)?;
    // Only the target namespace is watched, like `informers.WithNamespace`.
    let config_maps: Api<ConfigMap> = Api::namespaced(client, TARGET_NAMESPACE);
    let (cache, writer) = reflector::store();
    let c = Controller {
        config_maps: config_maps.clone(),
        cache,
        queue: WorkQueue::new(RateLimit::default()),
    };

    // Fixed move ①: the event handlers only put keys on the queue.
    let informer = {
        let queue = c.queue.clone();
        let events = reflector::reflector(writer, watcher(config_maps, watcher::Config::default()))
            .default_backoff()
            .touched_objects();
        tokio::spawn(async move {
            futures::pin_mut!(events);
            while let Some(event) = events.next().await {
                match event {
                    Ok(cm) => enqueue(&queue, &cm),
                    Err(e) => warn!("watch error, retrying: {e}"),
                }
            }
        })
    };

    // Fixed move ②: no worker starts before the cache has synced.
    tokio::select! {
        ready = c.cache.wait_until_ready() => ready.context("the informer stopped before it synced")?,
        _ = shutdown_signal() => return Ok(()),
    }
    info!("cache synced");

    // ★ The kick: my-config may never have existed, so no event would ever
    // bring its key; queue it once so the reconcile runs at least once.
    c.queue.add(format!("{TARGET_NAMESPACE}/{TARGET_NAME}"));

    // The resync: every cached object comes back as if it had been updated.
    let resync = {
        let c = c.clone();
        tokio::spawn(async move {
            let mut every =
                tokio::time::interval_at(tokio::time::Instant::now() + args.resync, args.resync);
            loop {
                every.tick().await;
                for cm in c.cache.state() {
                    enqueue(&c.queue, &cm);
                }
            }
        })
    };

    let workers: Vec<_> = (0..WORKERS)
        .map(|_| {
            let c = c.clone();
            tokio::spawn(async move { while c.process_next_item().await {} })
        })
        .collect();

    shutdown_signal().await;
    info!("signal received, shutting down");
    c.queue.shut_down();
    informer.abort();
    resync.abort();
    for worker in workers {
        worker.await?;
    }
    Ok(())
}

/// The course's `enqueue`: `namespace/name` of the object, nothing else.
fn enqueue(queue: &WorkQueue<String>, cm: &ConfigMap) {
    queue.add(format!("{}/{}", cm.namespace().unwrap_or_default(), cm.name_any()));
}

impl Controller {
    /// One key from the queue through `reconcile`; false once the queue is shut down.
    async fn process_next_item(&self) -> bool {
        let Some(key) = self.queue.get().await else {
            return false;
        };
        match self.reconcile(&key).await {
            Ok(()) => self.queue.forget(&key),
            Err(e) if self.queue.num_requeues(&key) < MAX_RETRIES => {
                info!("reconcile failed, retrying later ({key}): {e:#}");
                self.queue.add_rate_limited(key.clone());
            }
            Err(e) => {
                error!("reconcile failed {MAX_RETRIES} times, giving up ({key}): {e:#}");
                self.queue.forget(&key);
            }
        }
        // The course's `defer c.queue.Done(key)`.
        self.queue.done(&key);
        true
    }

    /// The one piece of business logic: make the live object what we want.
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
        // ★ The cache hands out a shared `Arc<ConfigMap>`: change an owned
        // clone (the course's `DeepCopy()`), never the cached object.
        let mut copy = ConfigMap::clone(&cm);
        copy.data = Some(desired);
        // Its resourceVersion makes this a compare-and-swap: a stale cache
        // gets 409 Conflict, and the retry reads the newer object.
        self.config_maps.replace(name, &PostParams::default(), &copy).await?;
        Ok(())
    }
}
