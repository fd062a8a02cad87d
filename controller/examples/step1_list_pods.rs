//! Step 1: connect to the cluster and list the Pods of `default` (the course's 15 lines).

use k8s_openapi::api::core::v1::Pod;
use kube::{Api, Client, ResourceExt, api::ListParams};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // ① How to connect: $KUBECONFIG, else ~/.kube/config, else the in-cluster ServiceAccount.
    let client = Client::try_default().await?;
    // ② One typed handle: Pods in `default` (the Clientset's CoreV1().Pods("default")).
    let pods: Api<Pod> = Api::namespaced(client, "default");
    // ③ One GET: what the API server had a moment ago.
    for p in pods.list(&ListParams::default()).await? {
        println!("{}", p.name_any());
    }
    Ok(())
}
