//! Who the graded program is, and what it asks of the API server.
//!
//! It runs as a ServiceAccount of its own bound to the course's Role. Its
//! requests are counted by the API server itself: API Priority and Fairness
//! classifies every request by FlowSchema, and exports how many each schema
//! dispatched (`apiserver_flowcontrol_dispatched_requests_total`). Four
//! schemas that match only this ServiceAccount — creates, updates (and
//! patches), deletes of ConfigMaps, and any other request — count what the
//! program does, a write that changes nothing included (the API server
//! answers such an update without a new resourceVersion, so the object alone
//! cannot show it). A program needs no metrics or logs of its own for this.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use k8s_openapi::api::{
    core::v1::{ConfigMap, ServiceAccount},
    flowcontrol::v1::FlowSchema,
    rbac::v1::{Role, RoleBinding},
};
use kube::{
    Api, Client,
    api::{DeleteParams, Patch, PatchParams},
};
use serde_json::{Value, json};

use crate::{accounts, metrics::Scrape};

use labkit::{
    eventually::{Check, eventually},
    files,
    lab_file::LabFile,
};

/// The ServiceAccount, Role and RoleBinding of the graded program.
pub const IDENTITY: &str = "my-controller-grade";
/// How long its token lives: a grade takes minutes.
const TOKEN_SECONDS: i64 = 3600;
/// Field manager of what the grade applies.
const MANAGER: &str = "lab-kit-grade";
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
    /// Everything else: lists, watches, gets, discovery.
    pub others: f64,
}

impl Counts {
    pub fn writes(&self) -> f64 {
        self.creates + self.updates + self.deletes
    }

    pub fn all(&self) -> f64 {
        self.writes() + self.others
    }

    /// What happened between `earlier` and `self`.
    pub fn since(&self, earlier: &Counts) -> Counts {
        Counts {
            creates: self.creates - earlier.creates,
            updates: self.updates - earlier.updates,
            deletes: self.deletes - earlier.deletes,
            others: self.others - earlier.others,
        }
    }
}

/// The schemas, in matching order: (suffix, verbs of ConfigMaps), then the catch-all.
const WRITE_SCHEMAS: [(&str, &[&str]); 3] = [
    ("creates", &["create"]),
    ("updates", &["update", "patch"]),
    ("deletes", &["delete", "deletecollection"]),
];
const OTHERS: &str = "others";
/// Below every suggested schema but `exempt` and the system ones, above
/// `service-accounts` (9000): the program's requests land here first.
const FIRST_PRECEDENCE: i32 = 1000;

fn schema_name(suffix: &str) -> String {
    format!("{IDENTITY}-{suffix}")
}

/// The program's identity and the schemas counting its requests, in the
/// lab; [`Observer::remove`] takes them all away again.
pub struct Observer {
    admin: Client,
    namespace: String,
    /// Its kubeconfig: the lab's cluster, the ServiceAccount's token. Mode 0600.
    pub kubeconfig: PathBuf,
}

impl Observer {
    /// The ServiceAccount with the course's Role in `namespace`, a kubeconfig
    /// for it in `dir`, and the schemas; returns once a request made with
    /// that kubeconfig is seen counted (so a count of 0 later means "none").
    pub async fn install(
        lab: &LabFile,
        admin: Client,
        namespace: &str,
        dir: &Path,
    ) -> anyhow::Result<Observer> {
        let observer = Observer {
            admin,
            namespace: namespace.to_string(),
            kubeconfig: dir.join("kubeconfig"),
        };
        observer.apply_identity().await?;
        observer.apply_schemas().await?;
        let (token, _expires) =
            accounts::token(&observer.admin, namespace, IDENTITY, TOKEN_SECONDS).await?;
        let kubeconfig = accounts::kubeconfig_with_token(lab, &token)?;
        let text = serde_saphyr::to_string(&kubeconfig)?;
        files::write_private(&observer.kubeconfig, text)?;
        observer.prove_counting().await?;
        Ok(observer)
    }

    /// `system:serviceaccount:<namespace>:<name>`, for messages.
    pub fn user(&self) -> String {
        format!("system:serviceaccount:{}:{IDENTITY}", self.namespace)
    }

    async fn apply_identity(&self) -> anyhow::Result<()> {
        let params = PatchParams::apply(MANAGER).force();
        let ns = self.namespace.as_str();
        let account = json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": IDENTITY, "namespace": ns}});
        // The course's Role, rule for rule (its section 六).
        let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": IDENTITY, "namespace": ns},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"],
                       "verbs": ["get", "list", "watch", "create", "update"]}]});
        let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": IDENTITY, "namespace": ns},
            "subjects": [{"kind": "ServiceAccount", "name": IDENTITY, "namespace": ns}],
            "roleRef": {"kind": "Role", "name": IDENTITY, "apiGroup": "rbac.authorization.k8s.io"}});
        let accounts: Api<ServiceAccount> = Api::namespaced(self.admin.clone(), ns);
        let roles: Api<Role> = Api::namespaced(self.admin.clone(), ns);
        let bindings: Api<RoleBinding> = Api::namespaced(self.admin.clone(), ns);
        accounts.patch(IDENTITY, &params, &Patch::Apply(&account)).await?;
        roles.patch(IDENTITY, &params, &Patch::Apply(&role)).await?;
        bindings.patch(IDENTITY, &params, &Patch::Apply(&binding)).await?;
        Ok(())
    }

    async fn apply_schemas(&self) -> anyhow::Result<()> {
        let params = PatchParams::apply(MANAGER).force();
        let schemas: Api<FlowSchema> = Api::all(self.admin.clone());
        let subject = json!([{"kind": "ServiceAccount",
            "serviceAccount": {"name": IDENTITY, "namespace": self.namespace}}]);
        let mut precedence = FIRST_PRECEDENCE;
        for (suffix, verbs) in WRITE_SCHEMAS {
            let rules = json!([{"subjects": subject, "resourceRules": [{"verbs": verbs,
                "apiGroups": [""], "resources": ["configmaps"], "namespaces": ["*"]}]}]);
            let name = schema_name(suffix);
            schemas.patch(&name, &params, &Patch::Apply(&schema(&name, precedence, rules))).await?;
            precedence += 1;
        }
        let rules = json!([{"subjects": subject,
            "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
                               "namespaces": ["*"], "clusterScope": true}],
            "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}]}]);
        let name = schema_name(OTHERS);
        schemas.patch(&name, &params, &Patch::Apply(&schema(&name, precedence, rules))).await?;
        Ok(())
    }

    /// Makes requests as the program until one is counted: the schemas are
    /// then in force, and the token and the Role work.
    async fn prove_counting(&self) -> anyhow::Result<()> {
        let client = controller::connect::client(Some(&self.kubeconfig))
            .await
            .map_err(anyhow::Error::msg)?;
        let api: Api<ConfigMap> = Api::namespaced(client, &self.namespace);
        let what = "the API server to count the grade identity's requests";
        eventually(what, crate::converge::HEAL_WITHIN, || async {
            let before = self.counts().await?;
            api.get_opt(crate::grade::PROBE_NAME).await.with_context(|| {
                format!("a get of ConfigMaps as {} (the course's Role allows it)", self.user())
            })?;
            let after = self.counts().await?.since(&before);
            Ok(Check::done_if(after.others >= 1.0, (), format!("{DISPATCHED} shows {after:?}")))
        })
        .await
    }

    /// The program's requests so far, as the API server counted them.
    pub async fn counts(&self) -> anyhow::Result<Counts> {
        let request = http::Request::get("/metrics").body(Vec::new())?;
        let text = self.admin.request_text(request).await.context("the API server's /metrics")?;
        let scrape = Scrape::parse(&text);
        let count = |suffix: &str| {
            scrape.sum_matching(DISPATCHED, &[("flow_schema", schema_name(suffix).as_str())])
        };
        Ok(Counts {
            creates: count("creates"),
            updates: count("updates"),
            deletes: count("deletes"),
            others: count(OTHERS),
        })
    }

    /// Removes the schemas, the identity and its kubeconfig.
    pub async fn remove(self) -> anyhow::Result<()> {
        Observer::forget(
            self.admin,
            &self.namespace,
            self.kubeconfig.parent().unwrap_or(Path::new(".")),
        )
        .await
    }

    /// Removes whatever a grade in `namespace` (files in `dir`) applied,
    /// present or not; every removal is tried, the first failure returned.
    pub async fn forget(admin: Client, namespace: &str, dir: &Path) -> anyhow::Result<()> {
        let schemas: Api<FlowSchema> = Api::all(admin.clone());
        let mut names: Vec<String> = WRITE_SCHEMAS.iter().map(|(s, _)| schema_name(s)).collect();
        names.push(schema_name(OTHERS));
        let mut results = Vec::new();
        for name in &names {
            results.push(delete(&schemas, name).await);
        }
        let bindings: Api<RoleBinding> = Api::namespaced(admin.clone(), namespace);
        let roles: Api<Role> = Api::namespaced(admin.clone(), namespace);
        let accounts: Api<ServiceAccount> = Api::namespaced(admin, namespace);
        results.push(delete(&bindings, IDENTITY).await);
        results.push(delete(&roles, IDENTITY).await);
        results.push(delete(&accounts, IDENTITY).await);
        let kubeconfig = dir.join("kubeconfig");
        if kubeconfig.exists() {
            results.push(
                std::fs::remove_file(&kubeconfig)
                    .with_context(|| format!("cannot remove {}", kubeconfig.display())),
            );
        }
        results.into_iter().collect()
    }
}

fn schema(name: &str, precedence: i32, rules: Value) -> Value {
    json!({"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema",
        "metadata": {"name": name},
        "spec": {"matchingPrecedence": precedence,
                 "priorityLevelConfiguration": {"name": PRIORITY_LEVEL},
                 "distinguisherMethod": {"type": "ByUser"},
                 "rules": rules}})
}

/// Deletes `name`; already gone is fine.
async fn delete<K>(api: &Api<K>, name: &str) -> anyhow::Result<()>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.is_not_found() => Ok(()),
        Err(e) => bail!("cannot delete {name}: {e}"),
    }
}
