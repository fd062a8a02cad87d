//! The objects a cluster lists, to compare before and after a command
//! that must leave it as it was (the room's test and bench here; the lab
//! tests of xtask/tests/ include this file as `common::cluster`).

use std::collections::BTreeSet;

use anyhow::{Result, ensure};
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use kube::discovery::{Discovery, verbs};

/// Every object the cluster lists (`kind namespace/name`), but for what
/// comes and goes by itself (Events, Leases): to compare before and after.
pub async fn snapshot(client: &kube::Client) -> Result<BTreeSet<String>> {
    let discovery = Discovery::new(client.clone()).run().await?;
    let mut seen = BTreeSet::new();
    for group in discovery.groups() {
        for (resource, capabilities) in group.recommended_resources() {
            if !capabilities.supports_operation(verbs::LIST)
                || ["Event", "Lease"].contains(&resource.kind.as_str())
            {
                continue;
            }
            let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
            for object in api.list(&ListParams::default()).await?.items {
                seen.insert(describe(&resource, &object));
            }
        }
    }
    Ok(seen)
}

fn describe(resource: &ApiResource, object: &DynamicObject) -> String {
    let name = object.metadata.name.clone().unwrap_or_default();
    match &object.metadata.namespace {
        Some(namespace) => format!("{}/{} {namespace}/{name}", resource.group, resource.kind),
        None => format!("{}/{} {name}", resource.group, resource.kind),
    }
}

/// What `after` has that `before` had not, and the other way round.
pub fn difference(before: &BTreeSet<String>, after: &BTreeSet<String>) -> Result<()> {
    let added: Vec<&String> = after.difference(before).collect();
    let removed: Vec<&String> = before.difference(after).collect();
    ensure!(
        added.is_empty() && removed.is_empty(),
        "the cluster is not as it was: added {added:?}, removed {removed:?}"
    );
    Ok(())
}
