//! Who the graded program is, and what it asks of the API server.
//!
//! It runs as a ServiceAccount of its own bound to the course's Role. Its
//! requests are counted by the API server itself: API Priority and Fairness
//! classifies every request by FlowSchema, and exports how many each schema
//! dispatched (`apiserver_flowcontrol_dispatched_requests_total`). Five
//! schemas that match only this ServiceAccount — creates, updates (and
//! patches), deletes, gets and lists of ConfigMaps, and any other request
//! (watches among them) — count what the program does, a write that changes
//! nothing included (the API server answers such an update without a new
//! resourceVersion, so the object alone cannot show it), and a read that an
//! informer would have served from its cache. A program needs no metrics or
//! logs of its own for this.
//!
//! The schemas are cluster-wide: each is named after the lab's record's
//! owner, so two grades on one cluster (an instructor grading two labs)
//! count their own programs apart. The counter is each API server's own: on
//! a cluster with more than one, the grader says so in one line and stops.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use k8s_openapi::api::{core::v1::ConfigMap, discovery::v1::EndpointSlice};
use kube::{Api, Client, api::ListParams};
use serde_json::{Value, json};

use labkit::{accounts, lab::Lab, metrics::Scrape};

use labkit::{
    eventually::{Check, eventually},
    files,
    record::Shared,
    tr,
};

/// The ServiceAccount, Role and RoleBinding of the graded program.
pub const IDENTITY: &str = "my-controller-grade";
/// How long its token lives: a grade takes minutes.
const TOKEN_SECONDS: i64 = 3600;
/// Field manager of what the grade applies.
const MANAGER: &str = "lab-kit-grade";
/// What a grade makes is recorded as made by it.
pub const BY: &str = "grade";
/// The API server's per-FlowSchema request counter.
const DISPATCHED: &str = "apiserver_flowcontrol_dispatched_requests_total";
/// A priority level every API server has (APF's suggested configuration);
/// the schemas only label requests, they do not change how they are served.
const PRIORITY_LEVEL: &str = "workload-low";

/// What the program asked of the API server, by kind of request.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Counts {
    pub creates: f64,
    pub updates: f64,
    pub deletes: f64,
    /// Gets and lists of ConfigMaps: an informer lists once, a poller again and again.
    pub reads: f64,
    /// Everything else: watches, discovery, other resources.
    pub others: f64,
}

impl Counts {
    pub fn writes(&self) -> f64 {
        self.creates + self.updates + self.deletes
    }

    pub fn all(&self) -> f64 {
        self.writes() + self.reads + self.others
    }

    /// What happened between `earlier` and `self`.
    pub fn since(&self, earlier: &Counts) -> Counts {
        Counts {
            creates: self.creates - earlier.creates,
            updates: self.updates - earlier.updates,
            deletes: self.deletes - earlier.deletes,
            reads: self.reads - earlier.reads,
            others: self.others - earlier.others,
        }
    }
}

/// The schemas, in matching order: (suffix, verbs of ConfigMaps), then the catch-all.
const CONFIG_MAP_SCHEMAS: [(&str, &[&str]); 4] = [
    ("creates", &["create"]),
    ("updates", &["update", "patch"]),
    ("deletes", &["delete", "deletecollection"]),
    ("reads", &["get", "list"]),
];
const OTHERS: &str = "others";
/// Below every suggested schema but `exempt` and the system ones, above
/// `service-accounts` (9000): the program's requests land here first.
const FIRST_PRECEDENCE: i32 = 1000;

/// The program's kubeconfig, in the borrow's folder `dir` (removed whole when the lab is put back).
pub fn kubeconfig_in(dir: &Path) -> PathBuf {
    dir.join("grade.kubeconfig")
}

/// A schema's name: the identity's, the lab's (its record's owner), the suffix.
fn schema_name(owner: &str, suffix: &str) -> String {
    format!("{IDENTITY}-{owner}-{suffix}")
}

/// The program's identity and the schemas counting its requests, in the
/// lab; [`Observer::remove`] takes them all away again.
pub struct Observer {
    admin: Client,
    namespace: String,
    /// The lab's record: what the grade made is in it.
    record: Shared,
    /// The record's owner, in the schemas' names.
    owner: String,
    /// Its kubeconfig: the lab's cluster, the ServiceAccount's token. Mode 0600.
    pub kubeconfig: PathBuf,
}

impl Observer {
    /// The ServiceAccount with the course's Role in `namespace`, a kubeconfig
    /// for it in the borrow's folder ([`kubeconfig_in`]), and the schemas,
    /// each recorded before it is made;
    /// returns once a request made with that kubeconfig is seen counted (so a
    /// count of 0 later means "none").
    pub async fn install(lab: &Lab, record: Shared, namespace: &str) -> anyhow::Result<Observer> {
        let admin = lab.client();
        one_api_server(&admin).await?;
        let owner = record.lock().await.owner.clone();
        let observer = Observer {
            admin,
            namespace: namespace.to_string(),
            record,
            owner,
            kubeconfig: kubeconfig_in(&lab.borrowed_dir()),
        };
        labkit::test_hook::at("grade:identity")?;
        for document in observer.identity().into_iter().chain(observer.schemas()) {
            let mut record = observer.record.lock().await;
            labkit::owned::apply(&observer.admin, &mut record, BY, MANAGER, document).await?;
        }
        let (token, _expires) =
            accounts::token(&observer.admin, namespace, IDENTITY, TOKEN_SECONDS).await?;
        let kubeconfig = accounts::kubeconfig_with_token(lab.file(), &token)?;
        let text = serde_saphyr::to_string(&kubeconfig)?;
        let dir = lab.borrowed_dir();
        std::fs::create_dir_all(&dir)
            .with_context(|| tr!("cannot create {path}", path = dir.display()))?;
        files::write_private(&observer.kubeconfig, text)?;
        observer.prove_counting().await?;
        Ok(observer)
    }

    /// `system:serviceaccount:<namespace>:<name>`, for messages.
    pub fn user(&self) -> String {
        format!("system:serviceaccount:{}:{IDENTITY}", self.namespace)
    }

    /// The ServiceAccount, the course's Role (its section 六, rule for rule) and the binding.
    fn identity(&self) -> Vec<Value> {
        let ns = self.namespace.as_str();
        let account = json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": IDENTITY, "namespace": ns}});
        let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": IDENTITY, "namespace": ns},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"],
                       "verbs": ["get", "list", "watch", "create", "update"]}]});
        let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": IDENTITY, "namespace": ns},
            "subjects": [{"kind": "ServiceAccount", "name": IDENTITY, "namespace": ns}],
            "roleRef": {"kind": "Role", "name": IDENTITY, "apiGroup": "rbac.authorization.k8s.io"}});
        vec![account, role, binding]
    }

    /// The five schemas, in matching order.
    fn schemas(&self) -> Vec<Value> {
        let subject = json!([{"kind": "ServiceAccount",
            "serviceAccount": {"name": IDENTITY, "namespace": self.namespace}}]);
        let mut schemas = Vec::new();
        let mut precedence = FIRST_PRECEDENCE;
        for (suffix, verbs) in CONFIG_MAP_SCHEMAS {
            let rules = json!([{"subjects": subject, "resourceRules": [{"verbs": verbs,
                "apiGroups": [""], "resources": ["configmaps"], "namespaces": ["*"]}]}]);
            schemas.push(schema(&schema_name(&self.owner, suffix), precedence, rules));
            precedence += 1;
        }
        let rules = json!([{"subjects": subject,
            "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
                               "namespaces": ["*"], "clusterScope": true}],
            "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}]}]);
        schemas.push(schema(&schema_name(&self.owner, OTHERS), precedence, rules));
        schemas
    }

    /// Makes requests as the program until one is counted: the schemas are
    /// then in force, and the token and the Role work.
    async fn prove_counting(&self) -> anyhow::Result<()> {
        let client = controller::connect::client(Some(&self.kubeconfig))
            .await
            .map_err(anyhow::Error::msg)?;
        let api: Api<ConfigMap> = Api::namespaced(client, &self.namespace);
        let what = tr!("the API server to count the grade identity's requests");
        eventually(&what, labkit::converge::HEAL_WITHIN, || async {
            let before = self.counts().await?;
            api.get_opt(crate::PROBE_NAME).await.with_context(|| {
                tr!(
                    "a get of ConfigMaps as {user} (the course's Role allows it)",
                    user = self.user()
                )
            })?;
            let after = self.counts().await?.since(&before);
            let seen =
                tr!("{series} shows {counts}", series = DISPATCHED, counts = format!("{after:?}"));
            Ok(Check::done_if(after.reads >= 1.0, (), seen))
        })
        .await
    }

    /// The program's requests so far, as the API server counted them.
    pub async fn counts(&self) -> anyhow::Result<Counts> {
        let request = http::Request::get("/metrics").body(Vec::new())?;
        let text = self
            .admin
            .request_text(request)
            .await
            .with_context(|| tr!("the API server's /metrics"))?;
        let scrape = Scrape::parse(&text);
        let count = |suffix: &str| {
            let name = schema_name(&self.owner, suffix);
            scrape.sum_matching(DISPATCHED, &[("flow_schema", name.as_str())])
        };
        Ok(Counts {
            creates: count("creates"),
            updates: count("updates"),
            deletes: count("deletes"),
            reads: count("reads"),
            others: count(OTHERS),
        })
    }

    /// Removes the schemas, the identity and its kubeconfig.
    pub async fn remove(self) -> anyhow::Result<()> {
        Observer::forget(self.admin, &self.record, &self.kubeconfig).await
    }

    /// Removes whatever a grade recorded in `record` (by its uid) and its
    /// `kubeconfig`; every removal is tried, the first failure returned.
    pub async fn forget(admin: Client, record: &Shared, kubeconfig: &Path) -> anyhow::Result<()> {
        let mut record = record.lock().await;
        let within = labkit::converge::HEAL_WITHIN;
        let deleted = labkit::owned::delete_all(&admin, &mut record, |e| e.by == BY, within).await;
        let removed = match kubeconfig.exists() {
            true => std::fs::remove_file(kubeconfig)
                .with_context(|| tr!("cannot remove {path}", path = kubeconfig.display())),
            false => Ok(()),
        };
        deleted?;
        removed
    }
}

/// The counter is per API server: a cluster that answers from more than one
/// (the `kubernetes` Service's endpoints) cannot be counted here.
async fn one_api_server(admin: &Client) -> anyhow::Result<()> {
    let slices: Api<EndpointSlice> = Api::namespaced(admin.clone(), "default");
    let params = ListParams::default().labels("kubernetes.io/service-name=kubernetes");
    let addresses: Vec<String> = slices
        .list(&params)
        .await
        .with_context(|| tr!("the kubernetes Service's EndpointSlices"))?
        .items
        .iter()
        .flat_map(|s| s.endpoints.iter().flatten().flat_map(|e| e.addresses.clone()))
        .collect();
    if addresses.len() > 1 {
        bail!(tr!(
            "this cluster answers from {n} API servers ({addresses}): the grader counts the program's \
             requests from one API server's /metrics (APF's dispatched counter), and cannot count \
             them here — grade on a lab with one (an envtest or kind lab)",
            n = addresses.len(),
            addresses = addresses.join(", ")
        ));
    }
    Ok(())
}

fn schema(name: &str, precedence: i32, rules: Value) -> Value {
    json!({"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema",
        "metadata": {"name": name},
        "spec": {"matchingPrecedence": precedence,
                 "priorityLevelConfiguration": {"name": PRIORITY_LEVEL},
                 "distinguisherMethod": {"type": "ByUser"},
                 "rules": rules}})
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::{Request, Response};
    use kube::client::Body;

    /// [`one_api_server`] where the `kubernetes` Service's EndpointSlice holds
    /// `addresses` (a mock API server, checking the request's shape).
    async fn with_addresses(addresses: &[&str]) -> anyhow::Result<()> {
        let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let endpoints: Vec<Value> = addresses.iter().map(|a| json!({"addresses": [a]})).collect();
        let server = tokio::spawn(async move {
            let (request, reply) = handle.next_request().await.expect("a request");
            let path = "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices";
            assert_eq!(request.uri().path(), path);
            let query = request.uri().query().unwrap_or_default().to_string();
            assert!(query.contains("service-name"), "{query}");
            let body = json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSliceList",
                "metadata": {}, "items": [{"metadata": {"name": "kubernetes"},
                "addressType": "IPv4", "endpoints": endpoints}]});
            let body = Body::from(serde_json::to_vec(&body).unwrap());
            let response = Response::builder().header("content-type", "application/json");
            reply.send_response(response.body(body).unwrap());
        });
        let result = one_api_server(&Client::new(service, "default")).await;
        server.await.unwrap();
        result
    }

    #[tokio::test]
    async fn a_cluster_of_more_than_one_api_server_is_said_in_one_line() {
        assert!(with_addresses(&["172.18.0.2"]).await.is_ok());
        let error = with_addresses(&["172.18.0.2", "172.18.0.3"]).await.unwrap_err().to_string();
        let said = "answers from 2 API servers (172.18.0.2, 172.18.0.3)";
        assert!(error.contains(said) && !error.contains('\n'), "{error}");
    }
}
