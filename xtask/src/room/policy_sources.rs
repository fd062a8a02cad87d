//! The addresses outside the pod network an attendee's pods talk with through
//! their NetworkPolicy: every node's (the kubelet probes the pods from its
//! node) and the API server's (its pod proxy, which `lab status` and the e2e
//! suite read the controller's /metrics through; and the one place outside
//! the namespace the controller itself connects to).

use std::collections::BTreeSet;

use anyhow::{Result, ensure};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, ListParams};
use labkit::tr;

/// Where an attendee's pods are reached from, and what they may reach outside.
#[derive(Debug, Default)]
pub struct Sources {
    /// Each node's InternalIP and each API server endpoint, as one-address CIDRs.
    pub nodes: Vec<String>,
    /// Each API server endpoint, as a one-address CIDR, and its ports.
    pub api_servers: Vec<String>,
    pub api_ports: BTreeSet<i32>,
}

pub async fn sources(client: &kube::Client) -> Result<Sources> {
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
    let (mut api_servers, mut api_ports) = (BTreeSet::new(), BTreeSet::new());
    for slice in slices.list(&api_server).await? {
        api_servers.extend(slice.endpoints.into_iter().flatten().flat_map(|e| e.addresses));
        api_ports.extend(slice.ports.into_iter().flatten().filter_map(|p| p.port));
    }
    ensure!(
        !addresses.is_empty() && !api_servers.is_empty() && !api_ports.is_empty(),
        tr!(
            "the cluster lists no node address or API server port: no NetworkPolicy can admit the kubelet"
        )
    );
    let cidrs = |set: &BTreeSet<String>| set.iter().map(|a| one_address(a)).collect::<Vec<_>>();
    addresses.extend(api_servers.iter().cloned());
    Ok(Sources { nodes: cidrs(&addresses), api_servers: cidrs(&api_servers), api_ports })
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
