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
//! my-config only; [`Grant`] binds the course's RBAC (configmaps: get, list,
//! watch, create, update — the course's informer lists every ConfigMap of
//! its namespace) plus Events to it in each namespace, and takes it away
//! again with the sides' ConfigMaps. The namespaces stay, empty: a lab
//! without a kube-controller-manager (envtest) never finishes deleting one,
//! and the next run reuses them.

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

/// The Role bound in each namespace the sides use, the lab's own included
/// (where the steady, burst and unrelated phases run).
pub struct Grant {
    /// The lab's namespace first, then the sides' others.
    namespaces: Vec<String>,
    /// The sides' ConfigMaps, the lab's own my-config not among them.
    config_maps: Vec<Place>,
    client: kube::Client,
}

impl Grant {
    /// Creates each namespace of `places` that is missing and binds the Role in it.
    pub async fn grant(lab: &Lab, places: &[Place]) -> Result<Grant> {
        let client = lab.client();
        let (sa_namespace, account) = lab
            .controller_service_account()
            .split_once('/')
            .context("the lab's ServiceAccount is namespace/name")?;
        let own = Place::kept_in(lab);
        let mut all = vec![own.namespace.clone()];
        for place in places {
            if !all.contains(&place.namespace) {
                all.push(place.namespace.clone());
            }
        }
        let config_maps = places.iter().filter(|p| **p != own).cloned().collect();
        let grant = Grant { namespaces: all, config_maps, client };
        let grant = grant.bind_or_take_back(account, sa_namespace).await?;
        eprintln!("granted {ROLE} to {account} in {} for the sides", grant.namespaces.join(", "));
        Ok(grant)
    }

    /// [`Grant::bind`]; a grant refused half-way is taken away again (what
    /// was not made yet is skipped), so a failed bench leaves nothing bound.
    async fn bind_or_take_back(self, account: &str, sa_namespace: &str) -> Result<Grant> {
        match self.bind(account, sa_namespace).await {
            Ok(()) => Ok(self),
            Err(error) => Err(match self.revoke().await {
                Ok(()) => error,
                Err(left) => {
                    anyhow::anyhow!(
                        "{error:#}; taking the half-made grant away failed too: {left:#}"
                    )
                }
            }),
        }
    }

    /// Creates each namespace but the lab's that is missing, and binds the
    /// Role to `namespace/account` in each.
    async fn bind(&self, account: &str, sa_namespace: &str) -> Result<()> {
        let (client, own) = (&self.client, &self.namespaces[0]);
        let apply = PatchParams::apply(MANAGER).force();
        let spaces: Api<Namespace> = Api::all(client.clone());
        for namespace in &self.namespaces {
            // The lab's is there (the lab is in it), and who may not read namespaces may bench.
            if namespace != own && spaces.get_opt(namespace).await?.is_none() {
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
        Ok(())
    }

    /// Deletes the Role and RoleBinding, and the sides' ConfigMaps.
    pub async fn revoke(self) -> Result<()> {
        for namespace in &self.namespaces {
            let bindings: Api<RoleBinding> = Api::namespaced(self.client.clone(), namespace);
            let roles: Api<Role> = Api::namespaced(self.client.clone(), namespace);
            delete_if_there(&bindings, ROLE).await?;
            delete_if_there(&roles, ROLE).await?;
        }
        for Place { namespace, name } in &self.config_maps {
            let config_maps: Api<ConfigMap> = Api::namespaced(self.client.clone(), namespace);
            delete_if_there(&config_maps, name).await?;
        }
        Ok(())
    }
}

/// Deletes `name`; one that is not there is fine (never made, or gone already).
async fn delete_if_there<K>(api: &Api<K>, name: &str) -> Result<()>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(error) => Err(error.into()),
    }
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

    /// A mock API server that records each request as "METHOD path" and
    /// answers it with `answer(method, path)`: a status code (a Status body
    /// when it is not 200, else a minimal object of the path's kind).
    fn mock(answer: fn(&str, &str) -> u16) -> (kube::Client, tokio::task::JoinHandle<Vec<String>>) {
        use http::{Request, Response};
        use kube::client::Body;
        let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let server = tokio::spawn(async move {
            let mut seen = Vec::new();
            while let Some((request, reply)) = handle.next_request().await {
                let (method, path) =
                    (request.method().to_string(), request.uri().path().to_string());
                let code = answer(&method, &path);
                let body = match code {
                    200 if path.contains("/roles") => json!({
                        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                        "metadata": {"name": ROLE}}),
                    200 => json!({
                        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                        "metadata": {"name": ROLE},
                        "roleRef": {"kind": "Role", "name": ROLE, "apiGroup": "rbac.authorization.k8s.io"}}),
                    _ => json!({"apiVersion": "v1", "kind": "Status", "status": "Failure",
                                "code": code, "message": format!("{code} for {path}")}),
                };
                seen.push(format!("{method} {path}"));
                let response = Response::builder()
                    .status(code)
                    .header("content-type", "application/json")
                    .body(Body::from(serde_json::to_vec(&body).unwrap()))
                    .unwrap();
                reply.send_response(response);
            }
            seen
        });
        (kube::Client::new(service, "default"), server)
    }

    fn half_made(client: kube::Client) -> Grant {
        Grant {
            namespaces: vec!["default".into(), "bench-0".into()],
            config_maps: vec![Place { namespace: "bench-0".into(), name: "my-config".into() }],
            client,
        }
    }

    /// The binding in the lab's namespace refused (403), after its Role was made.
    fn binding_refused(method: &str, path: &str) -> u16 {
        match method {
            "PATCH" if path.ends_with("/rolebindings/bench-sides") => 403,
            "PATCH" => 200,
            _ if path
                == "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles/bench-sides" =>
            {
                200
            }
            _ => 404,
        }
    }

    #[tokio::test]
    async fn a_grant_refused_half_way_is_taken_back_and_what_was_not_made_is_skipped() {
        let (client, server) = mock(binding_refused);
        let error = match half_made(client).bind_or_take_back("my-controller", "default").await {
            Ok(_) => panic!("a refused binding was taken for a grant"),
            Err(error) => format!("{error:#}"),
        };
        assert!(error.contains("403 for /apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings/bench-sides"), "{error}");
        assert!(!error.contains("taking the half-made grant away"), "{error}");
        let rbac = "/apis/rbac.authorization.k8s.io/v1/namespaces";
        assert_eq!(
            server.await.unwrap(),
            [
                format!("PATCH {rbac}/default/roles/bench-sides"),
                format!("PATCH {rbac}/default/rolebindings/bench-sides"),
                format!("DELETE {rbac}/default/rolebindings/bench-sides"),
                format!("DELETE {rbac}/default/roles/bench-sides"),
                format!("DELETE {rbac}/bench-0/rolebindings/bench-sides"),
                format!("DELETE {rbac}/bench-0/roles/bench-sides"),
                "DELETE /api/v1/namespaces/bench-0/configmaps/my-config".to_string(),
            ]
        );
    }

    #[tokio::test]
    async fn a_grant_that_cannot_be_taken_back_says_so_with_why_it_was_refused() {
        fn nothing_deleted(method: &str, path: &str) -> u16 {
            match method {
                "DELETE" => 500,
                _ => binding_refused(method, path),
            }
        }
        let (client, _server) = mock(nothing_deleted);
        let error = match half_made(client).bind_or_take_back("my-controller", "default").await {
            Ok(_) => panic!("a refused binding was taken for a grant"),
            Err(error) => format!("{error:#}"),
        };
        let (why, left) =
            error.split_once("; taking the half-made grant away failed too: ").expect(&error);
        assert!(why.contains("403 for"), "{error}");
        assert!(left.contains("500 for"), "{error}");
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
