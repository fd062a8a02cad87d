//! Where each side keeps its my-config during the latency blocks, and the
//! Role that lets it. Every side runs at once and the rounds take turns one
//! by one, so each side needs a my-config of its own. On an envtest lab
//! each gets a namespace of its own (`bench-floor`, `bench-0`, `bench-1`,
//! …), or the lab's for a peer pinned there ([`Spec::takes_a_namespace`]).
//! On a cluster the kit did not make ([`Sharing::OneNamespace`]) the bench
//! may not create namespaces (an attendee of a room may not), so every side
//! keeps a ConfigMap of its own name in the lab's namespace
//! (`my-config-bench-0`, …, `my-config-bench-floor`).
//!
//! The sides run as the lab's controller ServiceAccount, whose Role names
//! my-config only; [`grant`] binds the course's RBAC (configmaps: get, list,
//! watch, create, update — the course's informer lists every ConfigMap of
//! its namespace) plus Events to it in each namespace, and [`revoke`] takes
//! it away again with the sides' ConfigMaps. The namespaces stay, empty: a
//! lab without a kube-controller-manager (envtest) never finishes deleting
//! one, and the next run reuses them.

use anyhow::{Context, Result};
use k8s_openapi::api::core::v1::Namespace;
use kube::Api;
use serde_json::json;

use crate::subject::Spec;
use labkit::lab::Lab;
use labkit::lab_file::Applied;
use labkit::record::{How, Shared};

/// The name of the Role and RoleBinding [`grant`] makes in each namespace.
pub const ROLE: &str = "bench-sides";
/// The field manager of what [`grant`] applies.
pub const MANAGER: &str = "bench";

/// How the sides' my-configs are kept apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sharing {
    /// A namespace each (an envtest lab: the bench may create namespaces).
    NamespaceEach,
    /// All in the lab's namespace, a ConfigMap name each.
    OneNamespace,
}

/// Where one side keeps its my-config.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Place {
    pub namespace: String,
    pub name: String,
}

impl Place {
    /// The my-config `lab` keeps.
    pub fn kept_in(lab: &Lab) -> Place {
        Place { namespace: lab.desired().namespace().into(), name: lab.desired().name().into() }
    }
}

/// The place of each side: `specs` in order, then the floor. `lab` is the
/// lab's own my-config (a pinned peer's place).
pub fn of_sides(lab: &Place, specs: &[Spec], sharing: Sharing) -> Vec<Place> {
    let place = |side: &str| match sharing {
        Sharing::NamespaceEach => {
            Place { namespace: format!("bench-{side}"), name: lab.name.clone() }
        }
        Sharing::OneNamespace => {
            Place { namespace: lab.namespace.clone(), name: format!("{}-bench-{side}", lab.name) }
        }
    };
    let mut places: Vec<Place> = specs
        .iter()
        .enumerate()
        .map(|(i, spec)| match spec.takes_a_namespace() {
            true => place(&i.to_string()),
            false => lab.clone(),
        })
        .collect();
    places.push(place("floor"));
    places
}

/// What the bench makes is in the lab's record as made by it: the lab is
/// borrowed for the run, and put back (those deleted) however it ends.
pub const BY: &str = "bench";
/// The namespaces the bench makes on an envtest lab stay for the next run
/// (without a namespace controller one is never finished deleting) and go
/// with the lab: recorded apart from what a run deletes.
pub const KEPT: &str = "bench (namespaces, kept with the lab)";

/// Binds the Role in each namespace of `places`, the lab's own included
/// (where the steady, burst and unrelated phases run), making each missing
/// namespace; the sides' ConfigMaps (which the sides make) are recorded
/// before any side starts. All of it through the lab's record
/// ([`labkit::owned`]): [`revoke`] deletes exactly what was made, a grant
/// refused half-way included.
pub async fn grant(lab: &Lab, places: &[Place], record: &Shared) -> Result<()> {
    let client = lab.client();
    let (sa_namespace, account) = lab
        .controller_service_account()
        .split_once('/')
        .context("the lab's ServiceAccount is namespace/name")?;
    let own = Place::kept_in(lab);
    let mut namespaces = vec![own.namespace.clone()];
    for place in places {
        if !namespaces.contains(&place.namespace) {
            namespaces.push(place.namespace.clone());
        }
    }
    let spaces: Api<Namespace> = Api::all(client.clone());
    let mut record = record.lock().await;
    for namespace in &namespaces {
        // The lab's is there (the lab is in it), and who may not read namespaces may bench.
        if *namespace != own.namespace && spaces.get_opt(namespace).await?.is_none() {
            let made = json!({"apiVersion": "v1", "kind": "Namespace",
                              "metadata": {"name": namespace}});
            labkit::owned::apply(&client, &mut record, KEPT, MANAGER, made).await?;
        }
        for document in role_and_binding(namespace, account, sa_namespace) {
            labkit::owned::apply(&client, &mut record, BY, MANAGER, document).await?;
        }
    }
    for place in places.iter().filter(|p| **p != own) {
        let config_map = Applied {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            namespace: Some(place.namespace.clone()),
            name: place.name.clone(),
        };
        record.intend(&config_map, BY, How::ByController)?;
    }
    labkit::progress!("granted {ROLE} to {account} in {} for the sides", namespaces.join(", "));
    Ok(())
}

/// The Role the sides need in `namespace` (the course's RBAC and Events),
/// bound to `sa_namespace/account`.
fn role_and_binding(namespace: &str, account: &str, sa_namespace: &str) -> [serde_json::Value; 2] {
    let role = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": ROLE, "namespace": namespace},
        "rules": [
            {"apiGroups": [""], "resources": ["configmaps"],
             "verbs": ["get", "list", "watch", "create", "update"]},
            {"apiGroups": ["events.k8s.io"], "resources": ["events"],
             "verbs": ["create", "patch"]},
        ],
    });
    let binding = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": ROLE, "namespace": namespace},
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": sa_namespace}],
        "roleRef": {"kind": "Role", "name": ROLE, "apiGroup": "rbac.authorization.k8s.io"},
    });
    [role, binding]
}

/// Deletes what the run made ([`BY`]), each by its recorded uid: the
/// Roles, bindings and the sides' ConfigMaps, and the Secret its token is
/// bound to. The namespaces ([`KEPT`]) stay.
pub async fn revoke(lab: &Lab, record: &Shared) -> Result<()> {
    let mut record = record.lock().await;
    let within = std::time::Duration::from_secs(120);
    let left =
        labkit::owned::delete_all(&lab.client(), &mut record, |e| e.by == BY, within).await?;
    anyhow::ensure!(left.is_empty(), "left alone, not the bench's: {}", left.join("; "));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn sides() -> Vec<Spec> {
        let ours = Spec::Ours { binary: PathBuf::from("/t/release/my-controller") };
        let go = Spec::Peer { label: None, command: "go-peer".into(), pinned: false };
        let stage2 = Spec::Peer { label: None, command: "stage2".into(), pinned: true };
        vec![ours, go, stage2]
    }

    fn at(places: Vec<Place>) -> Vec<String> {
        places.into_iter().map(|p| format!("{}/{}", p.namespace, p.name)).collect()
    }

    #[test]
    fn every_side_gets_a_namespace_of_its_own_but_a_pinned_peer() {
        let lab = Place { namespace: "default".into(), name: "my-config".into() };
        assert_eq!(
            at(of_sides(&lab, &sides(), Sharing::NamespaceEach)),
            [
                "bench-0/my-config",
                "bench-1/my-config",
                "default/my-config",
                "bench-floor/my-config"
            ]
        );
    }

    #[test]
    fn in_one_namespace_every_side_gets_a_name_of_its_own() {
        let lab = Place { namespace: "attendee-07".into(), name: "my-config".into() };
        let places = of_sides(&lab, &sides()[..2], Sharing::OneNamespace);
        assert_eq!(
            at(places),
            [
                "attendee-07/my-config-bench-0",
                "attendee-07/my-config-bench-1",
                "attendee-07/my-config-bench-floor"
            ]
        );
    }
}
