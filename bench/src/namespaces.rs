//! Where each side keeps its my-config during the latency blocks, and the
//! Role that lets it. Every side runs at once and the rounds take turns one
//! by one, so each side needs a my-config of its own: a namespace of its own
//! (`bench-floor`, `bench-0`, `bench-1`, …), or the lab's for a peer pinned
//! there ([`Spec::takes_a_namespace`]).
//!
//! The sides run as the lab's controller ServiceAccount, whose Role names
//! default/my-config only; [`Grant`] binds the course's RBAC (configmaps:
//! get, list, watch, create, update — the course's informer lists every
//! ConfigMap of its namespace) plus Events to it in each namespace, and
//! takes it away again. The namespaces stay, empty: a lab without a
//! kube-controller-manager (envtest) never finishes deleting one, and the
//! next run reuses them.

use anyhow::{Context, Result};
use k8s_openapi::api::{
    core::v1::{ConfigMap, Namespace},
    rbac::v1::{Role, RoleBinding},
};
use kube::{
    Api,
    api::{DeleteParams, Patch, PatchParams},
};
use serde_json::json;

use crate::subject::Spec;
use e2e::lab::Lab;

/// The name of the Role and RoleBinding [`Grant`] makes in each namespace.
pub const ROLE: &str = "bench-sides";
/// The field manager of what [`Grant`] applies.
const MANAGER: &str = "bench";

/// The namespace of each side: `specs` in order, then the floor; a pinned
/// peer's is the lab's, `lab_namespace`.
pub fn of_sides(lab_namespace: &str, specs: &[Spec]) -> Vec<String> {
    let mut namespaces: Vec<String> = specs
        .iter()
        .enumerate()
        .map(|(i, spec)| match spec.takes_a_namespace() {
            true => format!("bench-{i}"),
            false => lab_namespace.to_string(),
        })
        .collect();
    namespaces.push("bench-floor".into());
    namespaces
}

/// The Role bound in each namespace the sides use, the lab's own included
/// (where the steady, burst and unrelated phases run).
pub struct Grant {
    lab_namespace: String,
    namespaces: Vec<String>,
    client: kube::Client,
}

impl Grant {
    /// Creates each of `namespaces` that is missing and binds the Role in it.
    pub async fn grant(lab: &Lab, namespaces: &[String]) -> Result<Grant> {
        let client = lab.client();
        let (sa_namespace, account) = lab
            .controller_service_account()
            .split_once('/')
            .context("the lab's ServiceAccount is namespace/name")?;
        let lab_namespace = lab.desired().namespace().to_string();
        let mut all = vec![lab_namespace.clone()];
        all.extend(namespaces.iter().filter(|n| **n != lab_namespace).cloned());
        let apply = PatchParams::apply(MANAGER).force();
        let spaces: Api<Namespace> = Api::all(client.clone());
        for namespace in &all {
            if spaces.get_opt(namespace).await?.is_none() {
                let made = json!({"apiVersion": "v1", "kind": "Namespace",
                                  "metadata": {"name": namespace}});
                spaces.patch(namespace, &apply, &Patch::Apply(&made)).await?;
            }
            let role = json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                "metadata": {"name": ROLE},
                "rules": [
                    {"apiGroups": [""], "resources": ["configmaps"],
                     "verbs": ["get", "list", "watch", "create", "update"]},
                    {"apiGroups": ["events.k8s.io"], "resources": ["events"],
                     "verbs": ["create", "patch"]},
                ],
            });
            let binding = json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                "metadata": {"name": ROLE},
                "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": sa_namespace}],
                "roleRef": {"kind": "Role", "name": ROLE, "apiGroup": "rbac.authorization.k8s.io"},
            });
            let roles: Api<Role> = Api::namespaced(client.clone(), namespace);
            let bindings: Api<RoleBinding> = Api::namespaced(client.clone(), namespace);
            roles.patch(ROLE, &apply, &Patch::Apply(&role)).await?;
            bindings.patch(ROLE, &apply, &Patch::Apply(&binding)).await?;
        }
        eprintln!("granted {ROLE} to {account} in {} for the sides", all.join(", "));
        let namespaces = all.split_off(1);
        Ok(Grant { lab_namespace, namespaces, client })
    }

    /// Deletes the Role and RoleBinding, and my-config outside the lab's namespace.
    pub async fn revoke(self, config_map: &str) -> Result<()> {
        let gone = DeleteParams::default();
        for namespace in std::iter::once(&self.lab_namespace).chain(&self.namespaces) {
            let bindings: Api<RoleBinding> = Api::namespaced(self.client.clone(), namespace);
            let roles: Api<Role> = Api::namespaced(self.client.clone(), namespace);
            bindings.delete(ROLE, &gone).await?;
            roles.delete(ROLE, &gone).await?;
        }
        for namespace in &self.namespaces {
            let config_maps: Api<ConfigMap> = Api::namespaced(self.client.clone(), namespace);
            if config_maps.get_opt(config_map).await?.is_some() {
                config_maps.delete(config_map, &gone).await?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn every_side_gets_a_namespace_of_its_own_but_a_pinned_peer() {
        let ours = Spec::Ours { binary: PathBuf::from("/t/release/my-controller") };
        let go = Spec::Peer { label: None, command: "go-peer".into(), pinned: false };
        let stage2 = Spec::Peer { label: None, command: "stage2".into(), pinned: true };
        assert_eq!(
            of_sides("default", &[ours, go, stage2]),
            ["bench-0", "bench-1", "default", "bench-floor"]
        );
    }
}
