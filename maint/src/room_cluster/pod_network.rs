//! The pod network of the room cluster: the node image carries a one-node
//! conflist (`node_image::stage`); here each node gets its own podCIDR in
//! it and a route to the others' — what kindnetd does in kind's own images.
//!
//! Pods keep their own address on the way to another node's pods: ptp's
//! `ipMasq` is turned off, and each node masquerades only what leaves the
//! pod network (as kindnetd does). With ptp's masquerade a pod on one node
//! reached another node's pods as its node, which a NetworkPolicy that
//! admits the nodes (for the kubelet's probes) lets through.

use std::time::Duration;

use anyhow::Result;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, ListParams};

use labkit::command::Cmd;
use labkit::eventually::{Check, eventually};

const NODES_READY_WITHIN: Duration = Duration::from_secs(180);
/// kind's default pod subnet: each node's podCIDR is a /24 of it.
const POD_SUBNET: &str = "10.244.0.0/16";
const CONFLIST: &str = "/etc/cni/net.d/10-lab-kit.conflist";

/// Each node's conflist set to its podCIDR, routes to the other nodes' pods; then [`settle`].
pub async fn wire(client: &kube::Client) -> Result<()> {
    let nodes = Api::<Node>::all(client.clone());
    let listed = eventually("every node to have a podCIDR", NODES_READY_WITHIN, || async {
        let items = nodes.list(&ListParams::default()).await?.items;
        let wired: Vec<(String, String, String)> = items
            .iter()
            .filter_map(|n| {
                let cidr = n.spec.as_ref()?.pod_cidr.clone()?;
                let status = n.status.as_ref()?;
                let ip = status
                    .addresses
                    .iter()
                    .flatten()
                    .find(|a| a.type_ == "InternalIP")?
                    .address
                    .clone();
                Some((n.metadata.name.clone()?, cidr, ip))
            })
            .collect();
        Ok(Check::done_if(
            items.len() == 3 && wired.len() == 3,
            wired.clone(),
            format!("{} of {} nodes with a podCIDR", wired.len(), items.len()),
        ))
    })
    .await?;
    for (node, cidr, _) in &listed {
        let subnet = format!("s#\"subnet\": \"[^\"]*\"#\"subnet\": \"{cidr}\"#");
        let no_masquerade = "s#\"ipMasq\": true#\"ipMasq\": false#";
        Cmd::argv([
            "docker",
            "exec",
            node,
            "sed",
            "-i",
            "-e",
            &subnet,
            "-e",
            no_masquerade,
            CONFLIST,
        ])
        .run()?;
        Cmd::argv(["docker", "exec", node, "iptables", "-t", "nat", "-A", "POSTROUTING"])
            .args(["-s", POD_SUBNET, "!", "-d", POD_SUBNET, "-j", "MASQUERADE"])
            .run()?;
        for (other, their_cidr, their_ip) in &listed {
            if other != node {
                Cmd::argv([
                    "docker", "exec", node, "ip", "route", "replace", their_cidr, "via", their_ip,
                ])
                .run()?;
            }
        }
    }
    settle(client).await
}

/// CoreDNS restarted onto the nodes' own ranges, then every node Ready and
/// the replaced pods gone: what is listed next is the cluster's settled state.
async fn settle(client: &kube::Client) -> Result<()> {
    let (nodes, pods) =
        (Api::<Node>::all(client.clone()), Api::<Pod>::namespaced(client.clone(), "kube-system"));
    let dns = ListParams::default().labels("k8s-app=kube-dns");
    pods.delete_collection(&DeleteParams::default(), &dns).await?;
    eventually("three nodes Ready and CoreDNS running", NODES_READY_WITHIN, || async {
        let ready = nodes
            .list(&ListParams::default())
            .await?
            .items
            .iter()
            .filter(|n| {
                n.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
            })
            .count();
        let listed = pods.list(&dns).await?.items;
        let running = |p: &&Pod| {
            p.metadata.deletion_timestamp.is_none()
                && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
        };
        let settled = listed.iter().filter(running).count();
        Ok(Check::done_if(
            ready == 3 && settled >= 1 && settled == listed.len(),
            (),
            format!("{ready} nodes Ready, {settled} of {} CoreDNS pods running", listed.len()),
        ))
    })
    .await
}
