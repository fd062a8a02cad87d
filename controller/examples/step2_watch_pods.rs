//! Step 2: an informer pushes the Pods' events to us: one [ADD] per Pod that
//! exists (the first LIST), "cache synced", then [ADD], [UPDATE] and [DELETE]
//! as they happen. Ctrl-C or SIGTERM ends it cleanly.

use std::collections::HashMap;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::{
    Api, Client, ResourceExt,
    runtime::{WatchStreamExt, watcher},
};
use tokio::signal::unix::{SignalKind, signal};
use workqueue::WatchBackoff;

/// `namespace/name`: the course's keyOf.
fn key_of(pod: &Pod) -> String {
    format!("{}/{}", pod.namespace().unwrap_or_default(), pod.name_any())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // Ctrl-C or SIGTERM: stop cleanly (every step from here on does this).
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut terminate = signal(SignalKind::terminate())?;

    let client = Client::try_default().await?;
    let pods: Api<Pod> = Api::namespaced(client, "default");

    // The informer: LIST once (Init, one InitApply per Pod, InitDone), then
    // WATCH (Apply for an added or changed Pod, Delete). After a lost watch it
    // lists again. WatchBackoff spaces out the retries as client-go does:
    // 0.8 s doubling to 30 s (kube's `.default_backoff()` never grows them).
    let events = watcher(pods, watcher::Config::default()).backoff(WatchBackoff::default());
    tokio::pin!(events);

    // key → resourceVersion: what we have seen, to tell ADD from UPDATE.
    let mut known: HashMap<String, String> = HashMap::new();
    let mut listed: HashMap<String, String> = HashMap::new();
    loop {
        let event = tokio::select! {
            _ = interrupt.recv() => break,
            _ = terminate.recv() => break,
            event = events.next() => event,
        };
        match event {
            Some(Ok(watcher::Event::Init)) => listed.clear(),
            Some(Ok(watcher::Event::InitApply(pod))) => {
                listed.insert(key_of(&pod), pod.resource_version().unwrap_or_default());
            }
            Some(Ok(watcher::Event::InitDone)) => {
                // The list against what we knew (nothing, the first time).
                for (key, version) in &listed {
                    match known.get(key) {
                        None => println!("[ADD] {key}"),
                        Some(old) if old != version => println!("[UPDATE] {key}"),
                        Some(_) => {}
                    }
                }
                for key in known.keys().filter(|key| !listed.contains_key(*key)) {
                    println!("[DELETE] {key}");
                }
                known = std::mem::take(&mut listed);
                println!("=== cache synced: {} Pods, watching ===", known.len());
            }
            Some(Ok(watcher::Event::Apply(pod))) => {
                let key = key_of(&pod);
                let verb = if known.contains_key(&key) { "UPDATE" } else { "ADD" };
                println!("[{verb}] {key}");
                known.insert(key, pod.resource_version().unwrap_or_default());
            }
            Some(Ok(watcher::Event::Delete(pod))) => {
                println!("[DELETE] {}", key_of(&pod));
                known.remove(&key_of(&pod));
            }
            Some(Err(e)) => eprintln!("watch error, retrying: {e}"),
            None => break,
        }
    }
    println!("stopped");
    Ok(())
}
