//! The addresses outside the pod network that must reach an attendee's pods
//! through their NetworkPolicy: every node's (the kubelet probes the pods
//! from its node) and the API server's (its pod proxy, which `lab status`
//! and the e2e suite read the controller's /metrics through).

use std::collections::BTreeSet;

use anyhow::{Result, ensure};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, ListParams};
use labkit::tr;

/// Each node's InternalIP and each API server endpoint, as one-address CIDRs.
pub async fn sources(client: &kube::Client) -> Result<Vec<String>> {
    labkit::progress!(
        "$ kubectl get nodes; kubectl -n default get endpointslices -l kubernetes.io/service-name=kubernetes    # done with kube-rs"
    );
    let mut addresses = BTreeSet::new();
    for node in Api::<Node>::all(client.clone()).list(&ListParams::default()).await? {
        let listed = node.status.and_then(|s| s.addresses).unwrap_or_default();
        addresses.extend(listed.into_iter().filter(|a| a.type_ == "InternalIP").map(|a| a.address));
    }
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), "default");
    let api_server = ListParams::default().labels("kubernetes.io/service-name=kubernetes");
    for slice in slices.list(&api_server).await? {
        addresses.extend(slice.endpoints.into_iter().flatten().flat_map(|e| e.addresses));
    }
    ensure!(
        !addresses.is_empty(),
        tr!("the cluster lists no node address: no NetworkPolicy can admit the kubelet")
    );
    Ok(addresses.iter().map(|a| one_address(a)).collect())
}

fn one_address(ip: &str) -> String {
    if ip.contains(':') { format!("{ip}/128") } else { format!("{ip}/32") }
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_address_is_a_cidr_of_one() {
        assert_eq!(super::one_address("172.18.0.2"), "172.18.0.2/32");
        assert_eq!(super::one_address("fc00:f853::2"), "fc00:f853::2/128");
    }
}
