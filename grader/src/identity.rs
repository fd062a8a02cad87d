//! Who the graded program is: a ServiceAccount of its own bound to the
//! course's Role, and a kubeconfig with its token, in memory only; the proxy
//! ([`super::proxy`]) passes the program's requests on with that token.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::{Api, Client, config::Kubeconfig};
use serde_json::{Value, json};

use labkit::eventually::{Check, eventually};
use labkit::{accounts, lab::Lab, record::Shared, tr};

/// The ServiceAccount, Role and RoleBinding of the graded program.
pub const IDENTITY: &str = "my-controller-grade";
/// How long its token lives: a grade takes minutes.
const TOKEN_SECONDS: i64 = 3600;
/// Field manager of what the grade applies.
const MANAGER: &str = "lab-kit-grade";
/// What a grade makes is recorded as made by it.
pub const BY: &str = "grade";

/// The program's identity in the lab; [`Identity::forget`] takes it all away again.
pub struct Identity {
    namespace: String,
    /// Its kubeconfig: the lab's cluster, the ServiceAccount's token. Never
    /// written: the proxy ([`super::proxy`]) holds the token for the program.
    pub kubeconfig: Kubeconfig,
}

impl Identity {
    /// The ServiceAccount with the course's Role in `namespace`, each part
    /// recorded before it is made, and a kubeconfig with its token; returns
    /// once a request made with that kubeconfig is allowed (the program's
    /// first one is then judged, not the RBAC cache's lag).
    pub async fn install(
        lab: &Lab,
        record: &Shared,
        namespace: &str,
        role: &crate::Role,
    ) -> anyhow::Result<Identity> {
        let admin = lab.client();
        labkit::test_hook::at("grade:identity")?;
        for document in documents(namespace, role)? {
            let mut record = record.lock().await;
            labkit::owned::apply(&admin, &mut record, BY, MANAGER, document).await?;
        }
        let (token, _expires) =
            accounts::token(&admin, namespace, IDENTITY, TOKEN_SECONDS, None).await?;
        let kubeconfig = accounts::kubeconfig_with_token(lab.file(), &token)?;
        let namespace = namespace.to_string();
        let identity = Identity { namespace, kubeconfig };
        identity.prove_allowed().await?;
        Ok(identity)
    }

    /// `system:serviceaccount:<namespace>:<name>`, for messages.
    pub fn user(&self) -> String {
        format!("system:serviceaccount:{}:{IDENTITY}", self.namespace)
    }

    /// Gets a ConfigMap as the program until it is allowed: the token and the Role work.
    async fn prove_allowed(&self) -> anyhow::Result<()> {
        let client = labkit::lab::client_of(self.kubeconfig.clone(), |_| ()).await?;
        let api: Api<ConfigMap> = Api::namespaced(client, &self.namespace);
        let what = tr!("a get of ConfigMaps as {user} (its Role allows it)", user = self.user());
        eventually(&what, labkit::converge::HEAL_WITHIN, || async {
            let got = api.get_opt(crate::PROBE_NAME).await;
            let seen = got.as_ref().err().map(ToString::to_string).unwrap_or_default();
            Ok(Check::done_if(got.is_ok(), (), seen))
        })
        .await
    }

    /// Removes whatever a grade recorded in `record` (by its uid); every
    /// removal is tried, the first failure returned.
    pub async fn forget(admin: Client, record: &Shared) -> anyhow::Result<()> {
        let mut record = record.lock().await;
        let within = labkit::converge::HEAL_WITHIN;
        labkit::owned::delete_all(&admin, &mut record, |e| e.by == BY, within).await.map(drop)
    }
}

/// The ServiceAccount, the Role (the course's, or the learner's rules) and the binding.
fn documents(ns: &str, role: &crate::Role) -> anyhow::Result<Vec<Value>> {
    let account = json!({"apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": IDENTITY, "namespace": ns}});
    let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": IDENTITY, "namespace": ns},
        "rules": serde_json::to_value(&role.rules)?});
    let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": IDENTITY, "namespace": ns},
        "subjects": [{"kind": "ServiceAccount", "name": IDENTITY, "namespace": ns}],
        "roleRef": {"kind": "Role", "name": IDENTITY, "apiGroup": "rbac.authorization.k8s.io"}});
    Ok(vec![account, role, binding])
}
