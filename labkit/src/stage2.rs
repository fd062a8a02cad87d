//! Stage 2 on a lab (`cargo xtask lab stage2`): the ConfigMapTemplate CRD
//! and its RBAC from `manifests/stage2/`, a kubeconfig of its ServiceAccount
//! (a TokenRequest token, so the Role is what it gets), and taking it away.

use std::time::Duration;

use controller::template::ConfigMapTemplate;
use k8s_openapi::{
    api::core::v1::ServiceAccount,
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
};
use kube::{
    Api, Client,
    api::{DeleteParams, ListParams},
};

use crate::{
    eventually::{Check, eventually},
    lab::Lab,
    project, tr,
};

/// Where stage 2's objects live.
pub const NAMESPACE: &str = "default";
/// The stage-2 ServiceAccount, Role and RoleBinding (manifests/stage2/rbac.yaml).
pub const ACCOUNT: &str = "my-controller-stage2";
/// The ConfigMapTemplate CRD's name.
pub const CRD: &str = "configmaptemplates.lab.my-controller.dev";
const WITHIN: Duration = Duration::from_secs(30);

/// Deletes every template, the CRD and what manifests/stage2/rbac.yaml made
/// (the ConfigMaps the templates made stay: envtest has no garbage collector).
pub async fn uninstall(lab: &Lab) -> anyhow::Result<()> {
    let admin = lab.client();
    let templates: Api<ConfigMapTemplate> = Api::namespaced(admin.clone(), NAMESPACE);
    templates.delete_collection(&DeleteParams::default(), &ListParams::default()).await?;
    let crds: Api<CustomResourceDefinition> = Api::all(admin.clone());
    crds.delete(CRD, &DeleteParams::default()).await?;
    remove_rbac(&admin).await
}

/// Applies manifests/stage2/crd.yaml and rbac.yaml to `lab`, waits until the
/// CRD is established, and writes a kubeconfig of the stage-2
/// ServiceAccount (`target/lab/<name>/stage2.kubeconfig`); its path.
pub async fn install(lab: &Lab) -> anyhow::Result<std::path::PathBuf> {
    let admin = lab.client();
    for file in ["manifests/stage2/crd.yaml", "manifests/stage2/rbac.yaml"] {
        let path = project::root().join(file);
        crate::apply::documents(&admin, "e2e-stage2", &path, crate::apply::read_documents(&path)?)
            .await?;
    }
    let crds: Api<CustomResourceDefinition> = Api::all(admin.clone());
    let what = tr!("the CRD to be established");
    eventually(&what, WITHIN, || async {
        let crd = crds.get(CRD).await?;
        let conditions = crd.status.and_then(|s| s.conditions).unwrap_or_default();
        let established = conditions.iter().any(|c| c.type_ == "Established" && c.status == "True");
        Ok(Check::done_if(established, (), format!("conditions {conditions:?}")))
    })
    .await?;
    account_kubeconfig(lab, &admin).await
}

/// Where [`install`] writes the stage-2 ServiceAccount's kubeconfig.
pub fn kubeconfig(lab: &Lab) -> std::path::PathBuf {
    lab.file().state_dir.join("stage2.kubeconfig")
}

/// A kubeconfig for the stage-2 ServiceAccount: the admin kubeconfig's
/// cluster, a TokenRequest token as the user.
async fn account_kubeconfig(lab: &Lab, admin: &Client) -> anyhow::Result<std::path::PathBuf> {
    let (token, _) = crate::accounts::token(admin, NAMESPACE, ACCOUNT, 3600, None).await?;
    let config = crate::accounts::kubeconfig_with_token(lab.file(), &token)?;
    let path = kubeconfig(lab);
    let text = serde_saphyr::to_string(&config)?;
    crate::files::write_private(&path, &text)?;
    Ok(path)
}

/// Deletes what manifests/stage2/rbac.yaml made (all named [`ACCOUNT`]).
async fn remove_rbac(admin: &Client) -> anyhow::Result<()> {
    use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
    let params = DeleteParams::default();
    Api::<RoleBinding>::namespaced(admin.clone(), NAMESPACE).delete(ACCOUNT, &params).await?;
    Api::<Role>::namespaced(admin.clone(), NAMESPACE).delete(ACCOUNT, &params).await?;
    Api::<ServiceAccount>::namespaced(admin.clone(), NAMESPACE).delete(ACCOUNT, &params).await?;
    Ok(())
}
