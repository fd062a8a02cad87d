//! Course step 2 — the informer: list once, then watch, and print what happens.
//!
//! Teaches: client-go's `SharedInformer` with `AddFunc`/`UpdateFunc`/`DeleteFunc`
//! is kube-rs's `watcher` stream. Its first list arrives as `Init`, `InitApply`…,
//! `InitDone` (shown here as one `[ADD]` per existing Pod, then "cache synced",
//! like `WaitForCacheSync`); later changes arrive as `Apply` and `Delete`. After
//! a lost watch it lists again, and the differences show as ADD/UPDATE/DELETE.
//!
//!     cargo run -p controller --example step2_watch_pods -- --namespace default
//!
//! Ctrl-C or SIGTERM ends it cleanly.

use std::collections::HashMap;

use clap::Parser;
use controller::{connect, runner::shutdown_signal};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::{
    Api, ResourceExt,
    runtime::{WatchStreamExt, watcher},
};

#[derive(Parser)]
struct Args {
    #[arg(long)]
    kubeconfig: Option<std::path::PathBuf>,
    #[arg(long, default_value = "default")]
    namespace: String,
}

fn key(pod: &Pod) -> String {
    format!("{}/{}", pod.namespace().unwrap_or_default(), pod.name_any())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let client = connect::client(args.kubeconfig.as_deref()).await.map_err(anyhow::Error::msg)?;
    let pods: Api<Pod> = Api::namespaced(client, &args.namespace);
    let events = watcher(pods, watcher::Config::default()).default_backoff();
    futures::pin_mut!(events);

    // key → resourceVersion: what we have printed so far (a tiny cache).
    let mut known: HashMap<String, String> = HashMap::new();
    let mut listing: HashMap<String, String> = HashMap::new();
    let shutdown = shutdown_signal();
    tokio::pin!(shutdown);
    loop {
        let event = tokio::select! {
            _ = &mut shutdown => break,
            event = events.next() => match event {
                Some(event) => event,
                None => break,
            },
        };
        match event {
            Ok(watcher::Event::Init) => listing.clear(),
            Ok(watcher::Event::InitApply(pod)) => {
                listing.insert(key(&pod), pod.resource_version().unwrap_or_default());
            }
            Ok(watcher::Event::InitDone) => {
                // Compare the fresh list with what we knew (empty the first time).
                for (k, rv) in &listing {
                    match known.get(k) {
                        None => println!("[ADD] {k}"),
                        Some(old) if old != rv => println!("[UPDATE] {k}"),
                        Some(_) => {}
                    }
                }
                for k in known.keys().filter(|k| !listing.contains_key(*k)) {
                    println!("[DELETE] {k}");
                }
                known = std::mem::take(&mut listing);
                println!("--- cache synced: {} pods ---", known.len());
            }
            Ok(watcher::Event::Apply(pod)) => {
                let verb = if known.contains_key(&key(&pod)) { "UPDATE" } else { "ADD" };
                println!("[{verb}] {}", key(&pod));
                known.insert(key(&pod), pod.resource_version().unwrap_or_default());
            }
            Ok(watcher::Event::Delete(pod)) => {
                println!("[DELETE] {}", key(&pod));
                known.remove(&key(&pod));
            }
            Err(e) => eprintln!("watch error (retrying): {e}"),
        }
    }
    println!("stopped");
    Ok(())
}
