//! Course step 1 — "15 lines": connect to the cluster and list the Pods of a namespace.
//!
//! Teaches: the client-go `Clientset` is kube-rs's `Client`; a typed handle on one
//! resource in one namespace is `Api<Pod>`; a list is one GET.
//!
//!     cargo run -p controller --example step1_list_pods -- --namespace kube-system
//!
//! Kubeconfig: `--kubeconfig PATH`, else `$KUBECONFIG`, `~/.kube/config`, in-cluster.

use clap::Parser;
use controller::connect;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, ResourceExt};

#[derive(Parser)]
struct Args {
    #[arg(long)]
    kubeconfig: Option<std::path::PathBuf>,
    #[arg(long, default_value = "default")]
    namespace: String,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let client = connect::client(args.kubeconfig.as_deref()).await.map_err(anyhow::Error::msg)?;
    let pods: Api<Pod> = Api::namespaced(client, &args.namespace);
    let list = pods.list(&ListParams::default()).await?;
    println!("{} pods in namespace {}:", list.items.len(), args.namespace);
    for pod in &list.items {
        println!("  {}", pod.name_any());
    }
    Ok(())
}
