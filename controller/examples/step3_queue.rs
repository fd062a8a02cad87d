//! Course step 3 — the work queue: handlers only enqueue keys, workers process them.
//!
//! Teaches: why a controller does not work inside its event handlers. Events put
//! a `namespace/name` key on the queue (`controller::queue::WorkQueue`, the
//! counterpart of client-go's rate-limited workqueue); two workers take keys and
//! "process" slowly. Change a Pod's labels five times quickly and you will see
//! fewer than five processings, each reading the *latest* state from the cache.
//!
//! Failure policy, as in the course's `handleErr`: a Pod labelled `fail=true`
//! fails its processing; it is retried with per-key exponential backoff
//! (5 ms, 10 ms, 20 ms, …), forgotten on success, given up after 5 retries.
//!
//!     cargo run -p controller --example step3_queue -- --namespace default --process-time 2s
//!     kubectl label pod mypod round=1 --overwrite; … round=5   (in another terminal)

use std::{sync::Arc, time::Duration};

use clap::Parser;
use controller::{
    cli::parse_duration,
    connect,
    queue::{RateLimit, WorkQueue},
    runner::shutdown_signal,
};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::{
    Api, ResourceExt,
    runtime::{
        WatchStreamExt,
        reflector::{self, ObjectRef, Store},
        watcher,
    },
};

#[derive(Parser)]
struct Args {
    #[arg(long)]
    kubeconfig: Option<std::path::PathBuf>,
    #[arg(long, default_value = "default")]
    namespace: String,
    /// How long one processing takes.
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    process_time: Duration,
    #[arg(long, default_value_t = 2)]
    workers: usize,
    #[arg(long, default_value_t = 5)]
    max_retries: u32,
}

type Key = ObjectRef<Pod>;

/// `namespace/name`, as the course prints keys.
fn show(key: &Key) -> String {
    format!("{}/{}", key.namespace.as_deref().unwrap_or_default(), key.name)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Arc::new(Args::parse());
    let client = connect::client(args.kubeconfig.as_deref()).await.map_err(anyhow::Error::msg)?;
    let pods: Api<Pod> = Api::namespaced(client, &args.namespace);
    let (cache, writer) = reflector::store();
    let queue: WorkQueue<Key> = WorkQueue::new(RateLimit::default());

    // The event handlers: nothing but "enqueue the key".
    let informer = {
        let queue = queue.clone();
        let events = reflector::reflector(writer, watcher(pods, watcher::Config::default()))
            .default_backoff()
            .touched_objects();
        async move {
            futures::pin_mut!(events);
            while let Some(event) = events.next().await {
                match event {
                    Ok(pod) => {
                        let key = ObjectRef::from_obj(&pod);
                        let queued = queue.add(key.clone());
                        println!(
                            "event  {}  {}",
                            show(&key),
                            if queued { "queued" } else { "coalesced" }
                        );
                    }
                    Err(e) => eprintln!("watch error (retrying): {e}"),
                }
            }
        }
    };
    let informer = tokio::spawn(informer);
    cache.wait_until_ready().await?;
    println!("--- cache synced; {} workers ---", args.workers);

    let workers: Vec<_> = (0..args.workers)
        .map(|id| tokio::spawn(worker(id, queue.clone(), cache.clone(), args.clone())))
        .collect();
    shutdown_signal().await;
    queue.shut_down();
    informer.abort();
    for w in workers {
        w.await?;
    }
    println!("stopped");
    Ok(())
}

async fn worker(id: usize, queue: WorkQueue<Key>, cache: Store<Pod>, args: Arc<Args>) {
    while let Some(key) = queue.get().await {
        tokio::time::sleep(args.process_time).await;
        // Read the latest state now, not the state the event carried.
        let result = match cache.get(&key) {
            None => Ok(format!("{} is gone", show(&key))),
            Some(pod) if pod.labels().get("fail").is_some_and(|v| v == "true") => {
                Err("label fail=true".to_string())
            }
            Some(pod) => Ok(format!("{} labels={:?}", show(&key), pod.labels())),
        };
        match result {
            Ok(seen) => {
                queue.forget(&key);
                println!("worker {id}: processed {seen}");
            }
            Err(e) if queue.num_requeues(&key) < args.max_retries => {
                let delay = queue.add_rate_limited(key.clone());
                println!("worker {id}: {} failed ({e}); retry in {delay:?}", show(&key));
            }
            Err(e) => {
                queue.forget(&key);
                println!(
                    "worker {id}: {} failed ({e}); giving up after {} retries",
                    show(&key),
                    args.max_retries
                );
            }
        }
        queue.done(&key);
    }
}
