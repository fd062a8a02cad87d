//! The steps of `lab up --provider existing` that are more than a command,
//! and what they learn on the way ([`Up`]); [`super::up_plan`] puts them in order.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, Result, bail};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PostParams};
use kube::config::KubeConfigOptions;
use serde_json::{Value, json};

use super::Given;
use crate::lab::apply;
use crate::lab::controller::SERVICE_ACCOUNT;
use controller::version::{Skew, parse_minor, target_minor};
use labkit::lab_file::{self, Applied, Existing, LabFile, ProviderKind};

/// How long one deletion (a namespace with its contents) may take.
const DELETE_WITHIN: Duration = Duration::from_secs(120);

/// What `lab up` learns on the way.
pub struct Up {
    name: String,
    state_dir: PathBuf,
    given: Given,
    /// The lab's record from an earlier `up` (this is then an update).
    earlier: Option<Existing>,
    client: Option<kube::Client>,
    server: String,
    version: String,
    /// `None`: not allowed to look (an attendee may not read namespaces).
    pub namespace_exists: Option<bool>,
    /// The pushed image by digest.
    digest: Option<String>,
    /// What this `up` created, in order.
    created: Vec<Applied>,
    /// See [`Existing::cluster_wide`].
    cluster_wide: bool,
}

impl Up {
    pub fn new(name: &str, state_dir: &Path, given: &Given, earlier: Option<Existing>) -> Up {
        Up {
            name: name.into(),
            state_dir: state_dir.into(),
            given: given.clone(),
            earlier,
            client: None,
            server: String::new(),
            version: String::new(),
            namespace_exists: None,
            digest: None,
            created: Vec::new(),
            cluster_wide: false,
        }
    }

    fn client(&self) -> Result<kube::Client> {
        self.client.clone().context("no client for the cluster yet")
    }

    fn namespace(&self) -> &str {
        &self.given.namespace
    }

    /// What this lab made, an earlier `up`'s and this one's.
    fn made(&self) -> Vec<Applied> {
        let earlier = self.earlier.iter().flat_map(|e| e.applied.iter().cloned());
        earlier.chain(self.created.iter().cloned()).collect()
    }
}

/// The context's cluster answers, at a minor this kit's client supports.
pub async fn connect(up: &mut Up) -> Result<()> {
    let config = up.given.config.clone();
    up.server = config
        .clusters
        .first()
        .and_then(|c| c.cluster.as_ref())
        .and_then(|c| c.server.clone())
        .context("the context's cluster has no server")?;
    let options = KubeConfigOptions::default();
    let client: kube::Client =
        kube::Config::from_custom_kubeconfig(config.clone(), &options).await?.try_into()?;
    let info = client.apiserver_version().await.with_context(|| {
        format!("the API server of context {} ({}) does not answer", up.given.context, up.server)
    })?;
    let server = parse_minor(&info.minor)
        .with_context(|| format!("the server reports minor {:?}", info.minor))?;
    let skew = Skew::between(target_minor(), server);
    if !skew.is_supported() {
        bail!("context {} runs {}: {skew}", up.given.context, info.git_version);
    }
    eprintln!("  {} at {}: {skew}", info.git_version, up.server);
    (up.client, up.version) = (Some(client), info.git_version);
    Ok(())
}

/// Whether the namespace is there; missing without `--create-namespace` stops here.
pub async fn look_at_namespace(up: &mut Up) -> Result<()> {
    let namespace = up.namespace().to_string();
    up.namespace_exists = match Api::<Namespace>::all(up.client()?).get_opt(&namespace).await {
        Ok(found) => Some(found.is_some()),
        Err(kube::Error::Api(status)) if status.code == 403 => None,
        Err(error) => return Err(error.into()),
    };
    if up.namespace_exists == Some(false) && !up.given.create_namespace {
        bail!(
            "namespace {namespace} does not exist: create it (`kubectl create namespace {namespace}`), \
             or add --create-namespace (then `lab down` removes it)"
        );
    }
    Ok(())
}

/// One question for the API server about this user (SelfSubjectAccessReview).
async fn may(client: &kube::Client, question: ResourceAttributes) -> Result<bool> {
    let review = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(question),
            ..Default::default()
        },
        ..Default::default()
    };
    let answer = Api::<SelfSubjectAccessReview>::all(client.clone())
        .create(&PostParams::default(), &review)
        .await
        .context("SelfSubjectAccessReview")?;
    Ok(answer.status.is_some_and(|s| s.allowed))
}

fn question(
    verb: &str,
    group: &str,
    resource: &str,
    namespace: Option<&str>,
) -> ResourceAttributes {
    ResourceAttributes {
        verb: Some(verb.into()),
        group: Some(group.into()),
        resource: Some(resource.into()),
        namespace: namespace.map(String::from),
        ..Default::default()
    }
}

/// The rights `up` and `down` use, asked of the API server as this user
/// before anything is applied; and whether it has cluster-wide ones.
pub async fn check_rights(up: &mut Up) -> Result<()> {
    let (client, namespace) = (up.client()?, up.namespace().to_string());
    let mut wanted = Vec::new();
    for (group, resource) in [
        ("", "serviceaccounts"),
        ("rbac.authorization.k8s.io", "roles"),
        ("rbac.authorization.k8s.io", "rolebindings"),
        ("apps", "deployments"),
    ] {
        for verb in ["create", "patch", "delete"] {
            wanted.push(question(verb, group, resource, Some(&namespace)));
        }
    }
    wanted.push(question("list", "", "pods", Some(&namespace)));
    if up.namespace_exists == Some(false) {
        wanted.push(question("create", "", "namespaces", None));
    }
    let mut denied = Vec::new();
    for asked in wanted {
        if !may(&client, asked.clone()).await? {
            denied.push(format!(
                "{} {}",
                asked.verb.unwrap_or_default(),
                asked.resource.unwrap_or_default()
            ));
        }
    }
    if !denied.is_empty() {
        bail!(
            "context {} may not {} in namespace {namespace} (SelfSubjectAccessReview): ask the \
             cluster's admin for those rights there (`cargo xtask room up` makes a namespace and a \
             kubeconfig that has them), or use a context that has them",
            up.given.context,
            denied.join(", ")
        );
    }
    let reviews = question("create", "authorization.k8s.io", "subjectaccessreviews", None);
    let default_pods = question("create", "", "pods", Some("default"));
    up.cluster_wide = may(&client, reviews).await? && may(&client, default_pods).await?;
    Ok(())
}

/// `docker image inspect`'s repo digests → the pushed image by digest.
pub fn record_digest(up: &mut Up, out: Result<String>) -> Result<()> {
    let repository = up.given.repository()?;
    let out = out.context("the pushed image is not in Docker")?;
    let digest = out.split_whitespace().find(|d| d.starts_with(&format!("{repository}@sha256:")));
    up.digest = Some(
        digest
            .with_context(|| {
                format!("Docker knows no digest in {repository} after the push (it has: {out:?})")
            })?
            .to_string(),
    );
    Ok(())
}

pub async fn create_namespace(up: &mut Up) -> Result<()> {
    let document =
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": up.namespace()}});
    let namespace: Namespace = serde_json::from_value(document)?;
    Api::<Namespace>::all(up.client()?).create(&PostParams::default(), &namespace).await?;
    up.created.push(Applied {
        api_version: "v1".into(),
        kind: "Namespace".into(),
        namespace: None,
        name: up.namespace().into(),
    });
    Ok(())
}

/// The manifests made for the namespace: everything in it, the Role for
/// its `my-config`, the Deployment on the pushed image by digest.
fn manifests(namespace: &str, image: &str, target: &lab_file::Target) -> Result<Vec<Value>> {
    let mut documents: Vec<Value> = apply::rbac_for(target)?
        .into_iter()
        .filter(|d| d["kind"] != "Namespace")
        .chain(apply::deployment_for(target)?)
        .collect();
    for document in &mut documents {
        document["metadata"]["namespace"] = json!(namespace);
        // pointer_mut, not indexing: indexing a missing key would add it.
        let subjects = document.pointer_mut("/subjects").and_then(Value::as_array_mut);
        for subject in subjects.into_iter().flatten() {
            subject["namespace"] = json!(namespace);
        }
        let containers =
            document.pointer_mut("/spec/template/spec/containers").and_then(Value::as_array_mut);
        for container in containers.into_iter().flatten() {
            container["image"] = json!(image);
        }
    }
    Ok(documents)
}

/// Applies the manifests. An object of the same name that this lab did not
/// make (nor an interrupted `up` of it, by its field manager) stops it
/// before anything is applied: it belongs to someone else.
pub async fn apply_manifests(up: &mut Up) -> Result<()> {
    let client = up.client()?;
    let image = up.digest.clone().context("no pushed image")?;
    let documents = manifests(up.namespace(), &image, &up.given.target())?;
    let made = up.made();
    let mut fresh = Vec::new();
    for document in &documents {
        let (object, api) = labkit::apply::identify(&client, document).await?;
        match api.get_opt(&object.name).await? {
            None => fresh.push(object),
            Some(_) if made.contains(&object) => {}
            Some(found) => {
                let managers: Vec<String> = found
                    .metadata
                    .managed_fields
                    .iter()
                    .flatten()
                    .filter_map(|m| m.manager.clone())
                    .collect();
                if !managers.iter().any(|m| m == apply::FIELD_MANAGER) {
                    bail!(
                        "{object} is there already and this lab did not make it (managed by {}): \
                         use another --namespace, or remove it",
                        managers.join(", ")
                    );
                }
            }
        }
    }
    for document in documents {
        let object = labkit::apply::identify(&client, &document).await?.0;
        let source = labkit::project::manifests_dir().join(if object.kind == "Deployment" {
            "deployment.yaml"
        } else {
            "rbac.yaml"
        });
        labkit::apply::documents(&client, apply::FIELD_MANAGER, &source, vec![document]).await?;
        if fresh.contains(&object) {
            up.created.push(object);
        }
    }
    Ok(())
}

pub async fn wait_rollout(up: &mut Up) -> Result<()> {
    e2e::deployment::wait_rollout(&Api::<Deployment>::namespaced(up.client()?, up.namespace()))
        .await
}

/// lab.json, with a kubeconfig of the one context next to it.
pub async fn write_lab_file(up: &mut Up) -> Result<()> {
    std::fs::create_dir_all(&up.state_dir)
        .with_context(|| format!("cannot create {}", up.state_dir.display()))?;
    let kubeconfig = up.state_dir.join("kubeconfig");
    labkit::files::write_private(&kubeconfig, serde_saphyr::to_string(&up.given.config)?)?;
    let created_namespace = up.earlier.as_ref().is_some_and(|e| e.created_namespace)
        || up.created.iter().any(|o| o.kind == "Namespace");
    let namespace = up.namespace().to_string();
    let lab = LabFile {
        format: lab_file::FORMAT,
        name: up.name.clone(),
        provider: ProviderKind::Existing,
        state_dir: up.state_dir.clone(),
        created_unix: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or_default(),
        kubernetes_version: up.version.clone(),
        api_server_url: up.server.clone(),
        admin_kubeconfig: kubeconfig,
        controller: lab_file::Controller {
            // Reached through the API server's pod proxy (see e2e::lab).
            url: String::new(),
            kubeconfig: PathBuf::new(),
            service_account: format!("{namespace}/{SERVICE_ACCOUNT}"),
            token_expires: "projected by the kubelet (rotated)".into(),
            log: PathBuf::new(),
            container: None,
        },
        processes: Vec::new(),
        kind: None,
        existing: Some(Existing {
            kubeconfig: up.given.kubeconfig.clone(),
            context: up.given.context.clone(),
            namespace,
            created_namespace,
            controller_image: up.digest.clone().unwrap_or_default(),
            applied: up.made(),
            cluster_wide: up.cluster_wide,
        }),
        target: up.given.target(),
    };
    lab.write()
}

/// After a failed first `up`: what it created, deleted again.
pub async fn undo(up: &Up) {
    let Ok(client) = up.client() else { return };
    if up.created.is_empty() {
        return;
    }
    eprintln!("lab up failed: deleting what it created");
    if let Err(error) = delete_all(&client, &up.created).await {
        eprintln!(
            "warning: {error:#}: see what is left with `kubectl get all,sa,role,rolebinding -n {}`",
            up.namespace()
        );
    }
}

/// Deletes `made` in reverse order, each awaited.
pub async fn delete_all(client: &kube::Client, made: &[Applied]) -> Result<()> {
    for object in made.iter().rev() {
        if labkit::apply::delete(client, object, DELETE_WITHIN).await? {
            eprintln!("  deleted {object}");
        }
    }
    Ok(())
}
