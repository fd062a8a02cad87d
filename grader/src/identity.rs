//! Who the graded program is: a ServiceAccount of its own bound to the
//! course's Role, and a kubeconfig with its token, in the lab; the proxy
//! ([`super::proxy`]) passes the program's requests on with that token.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{Api, Client};
use serde_json::{Value, json};

use labkit::eventually::{Check, eventually};
use labkit::{accounts, files, lab::Lab, record::Shared, tr};

/// The ServiceAccount, Role and RoleBinding of the graded program.
pub const IDENTITY: &str = "my-controller-grade";
/// How long its token lives: a grade takes minutes.
const TOKEN_SECONDS: i64 = 3600;
/// Field manager of what the grade applies.
const MANAGER: &str = "lab-kit-grade";
/// What a grade makes is recorded as made by it.
pub const BY: &str = "grade";

/// The program's kubeconfig, in the borrow's folder `dir` (removed whole when the lab is put back).
pub fn kubeconfig_in(dir: &Path) -> PathBuf {
    dir.join("grade.kubeconfig")
}

/// The program's identity in the lab; [`Identity::remove`] takes it all away again.
pub struct Identity {
    admin: Client,
    namespace: String,
    /// The lab's record: what the grade made is in it.
    record: Shared,
    /// Its kubeconfig: the lab's cluster, the ServiceAccount's token. Mode 0600.
    pub kubeconfig: PathBuf,
}

impl Identity {
    /// The ServiceAccount with the course's Role in `namespace` and a kubeconfig
    /// for it in the borrow's folder ([`kubeconfig_in`]), each recorded before
    /// it is made; returns once a request made with that kubeconfig is allowed
    /// (the program's first one is then judged, not the RBAC cache's lag).
    pub async fn install(lab: &Lab, record: Shared, namespace: &str) -> anyhow::Result<Identity> {
        let identity = Identity {
            admin: lab.client(),
            namespace: namespace.to_string(),
            record,
            kubeconfig: kubeconfig_in(&lab.borrowed_dir()),
        };
        labkit::test_hook::at("grade:identity")?;
        for document in identity.documents() {
            let mut record = identity.record.lock().await;
            labkit::owned::apply(&identity.admin, &mut record, BY, MANAGER, document).await?;
        }
        let (token, _expires) =
            accounts::token(&identity.admin, namespace, IDENTITY, TOKEN_SECONDS).await?;
        let kubeconfig = accounts::kubeconfig_with_token(lab.file(), &token)?;
        let text = serde_saphyr::to_string(&kubeconfig)?;
        let dir = lab.borrowed_dir();
        std::fs::create_dir_all(&dir)
            .with_context(|| tr!("cannot create {path}", path = dir.display()))?;
        files::write_private(&identity.kubeconfig, text)?;
        identity.prove_allowed().await?;
        Ok(identity)
    }

    /// `system:serviceaccount:<namespace>:<name>`, for messages.
    pub fn user(&self) -> String {
        format!("system:serviceaccount:{}:{IDENTITY}", self.namespace)
    }

    /// The ServiceAccount, the course's Role (its section 六, rule for rule) and the binding.
    fn documents(&self) -> Vec<Value> {
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

    /// Gets a ConfigMap as the program until it is allowed: the token and the Role work.
    async fn prove_allowed(&self) -> anyhow::Result<()> {
        let client = controller::connect::client(Some(&self.kubeconfig))
            .await
            .map_err(anyhow::Error::msg)?;
        let api: Api<ConfigMap> = Api::namespaced(client, &self.namespace);
        let what =
            tr!("a get of ConfigMaps as {user} (the course's Role allows it)", user = self.user());
        eventually(&what, labkit::converge::HEAL_WITHIN, || async {
            let got = api.get_opt(crate::PROBE_NAME).await;
            let seen = got.as_ref().err().map(ToString::to_string).unwrap_or_default();
            Ok(Check::done_if(got.is_ok(), (), seen))
        })
        .await
    }

    /// Removes the identity and its kubeconfig.
    pub async fn remove(self) -> anyhow::Result<()> {
        Identity::forget(self.admin, &self.record, &self.kubeconfig).await
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
