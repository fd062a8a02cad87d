//! Stage 2 on a lab (`cargo xtask lab stage2`): the ConfigMapTemplate CRD
//! and its RBAC from `manifests/stage2/`, a kubeconfig of its ServiceAccount
//! (a TokenRequest token, so the Role is what it gets), and taking it away.

use std::time::Duration;

use controller::template::ConfigMapTemplate;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{
    Api, Client,
    api::{DeleteParams, ListParams},
};

use crate::{
    apply::{identify, read_documents},
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
/// What [`install`] applies, in order.
const MANIFESTS: [&str; 2] = ["manifests/stage2/crd.yaml", "manifests/stage2/rbac.yaml"];

/// Deletes every template, then every object of [`MANIFESTS`], the last first
/// (the ConfigMaps the templates made stay: envtest has no garbage collector).
pub async fn uninstall(lab: &Lab) -> anyhow::Result<()> {
    let admin = lab.client();
    let templates: Api<ConfigMapTemplate> = Api::namespaced(admin.clone(), NAMESPACE);
    templates.delete_collection(&DeleteParams::default(), &ListParams::default()).await?;
    for file in MANIFESTS.iter().rev() {
        for document in read_documents(&project::root().join(file))?.iter().rev() {
            let (object, api) = identify(&admin, document).await?;
            api.delete(&object.name, &DeleteParams::default()).await?;
        }
    }
    Ok(())
}

/// Applies manifests/stage2/crd.yaml and rbac.yaml to `lab`, waits until the
/// CRD is established, and writes a kubeconfig of the stage-2
/// ServiceAccount (`target/lab/<name>/stage2.kubeconfig`); its path.
pub async fn install(lab: &Lab) -> anyhow::Result<std::path::PathBuf> {
    let admin = lab.client();
    for file in MANIFESTS {
        let path = project::root().join(file);
        crate::apply::documents(&admin, "e2e-stage2", &path, read_documents(&path)?).await?;
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
