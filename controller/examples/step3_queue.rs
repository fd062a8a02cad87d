//! Step 3: the event handlers only put a key on a work queue ("a slip of
//! paper"); two workers take keys and process them slowly. Five quick changes
//! of one Pod make about two processings, not five, and the last one reads the
//! latest state from the cache. A Pod labelled fail=true fails: it is retried
//! with growing delays, then given up after 5 retries.

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::{
    Api, Client, ResourceExt,
    runtime::{
        WatchStreamExt,
        reflector::{self, ObjectRef, Store},
        watcher,
    },
};
use tokio::signal::unix::{SignalKind, signal};
use workqueue::{RateLimit, WatchBackoff, WorkQueue};

fn key_of(pod: &Pod) -> String {
    format!("{}/{}", pod.namespace().unwrap_or_default(), pod.name_any())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut terminate = signal(SignalKind::terminate())?;
    let client = Client::try_default().await?;
    let pods: Api<Pod> = Api::namespaced(client, "default");

    // ① The queue: client-go's NewTypedRateLimitingQueue with its default rate limiter.
    let queue: WorkQueue<String> = WorkQueue::new(RateLimit::default());

    // The informer now also keeps a cache (the Store), and ② its handlers
    // only put the key on the queue.
    let (cache, writer) = reflector::store();
    let events = reflector::reflector(writer, watcher(pods, watcher::Config::default()))
        .backoff(WatchBackoff::default())
        .touched_objects();
    let informer = tokio::spawn({
        let queue = queue.clone();
        async move {
            tokio::pin!(events);
            while let Some(event) = events.next().await {
                match event {
                    Ok(pod) => {
                        let queued = queue.add(key_of(&pod));
                        println!(
                            "event   {}  {}",
                            key_of(&pod),
                            if queued { "queued" } else { "coalesced" }
                        );
                    }
                    Err(e) => eprintln!("watch error, retrying: {e}"),
                }
            }
        }
    });

    // ③ Once the cache has synced, two workers.
    cache.wait_until_ready().await?;
    println!("=== cache synced, workers start ===");
    let workers: Vec<_> = (0..2)
        .map(|_| {
            let (queue, cache) = (queue.clone(), cache.clone());
            tokio::spawn(async move { while process_next_item(&queue, &cache).await {} })
        })
        .collect();

    tokio::select! {
        _ = interrupt.recv() => {}
        _ = terminate.recv() => {}
    }
    queue.shut_down();
    informer.abort();
    for worker in workers {
        worker.await?;
    }
    println!("stopped");
    Ok(())
}

/// The worker's skeleton: learn it by heart, every hand-written controller looks like this.
async fn process_next_item(queue: &WorkQueue<String>, cache: &Store<Pod>) -> bool {
    // Wait for a key; None once the queue shuts down.
    let Some(key) = queue.get().await else {
        return false;
    };
    match business(cache, &key).await {
        // Success: clear the key's backoff (never forget this).
        Ok(()) => queue.forget(&key),
        // Failure: retry after a growing delay, five times...
        Err(e) if queue.num_requeues(&key) < 5 => {
            let delay = queue.add_rate_limited(key.clone());
            println!("failed  {key}: {e}; retry in {delay:.0?}");
        }
        // ...then give up (the next event brings it back).
        Err(e) => {
            queue.forget(&key);
            println!("giving up {key}: {e}");
        }
    }
    // Always done, or the queue thinks the key is still being processed.
    queue.done(&key);
    true
}

/// Your business logic; for now, print what the cache holds, slowly.
async fn business(cache: &Store<Pod>, key: &str) -> anyhow::Result<()> {
    // Slow on purpose, for the dedup experiment.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (namespace, name) = key.split_once('/').unwrap_or(("", key));
    // The latest state, read when we get to it (not the state the event carried).
    let Some(pod) = cache.get(&ObjectRef::new(name).within(namespace)) else {
        println!("processed {key}: gone");
        return Ok(());
    };
    if pod.labels().get("fail").is_some_and(|v| v == "true") {
        anyhow::bail!("label fail=true");
    }
    println!("processed {key}: labels {:?}", pod.labels());
    Ok(())
}
