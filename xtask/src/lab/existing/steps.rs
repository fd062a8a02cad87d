//! The steps of `lab up --provider existing` that are more than a command,
//! and what they learn on the way ([`Up`]); [`super::up_plan`] puts them in order.

use std::path::PathBuf;

use anyhow::{Context as _, Result, bail};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

use super::Given;
use crate::lab::deploy::{BY, Deploys};
use crate::lab::manifests::{self, FIELD_MANAGER};
use crate::lab::provider::Provider;
use controller::version::{Skew, parse_minor, target_minor};
use labkit::accounts::access;
use labkit::lab_file::{self, Applied, Existing, LabFile, Offers};
use labkit::record::Record;
use labkit::tr;

/// What `lab up` learns on the way.
#[derive(Default)]
pub struct Up {
    pub(super) name: String,
    pub(super) state_dir: PathBuf,
    pub(super) given: Given,
    /// What this lab made, an earlier `up`'s included (this is then an update
    /// or the completion of an interrupted one).
    pub(super) record: Record,
    pub(super) client: Option<kube::Client>,
    pub(super) server: String,
    pub(super) version: String,
    /// `None`: not allowed to look (an attendee may not read namespaces).
    pub(super) namespace_exists: Option<bool>,
    /// The pushed image by digest.
    pub(super) digest: Option<String>,
    /// See [`Offers::cluster_wide`](labkit::lab_file::Offers::cluster_wide).
    pub(super) cluster_wide: bool,
}

impl Up {
    fn namespace(&self) -> &str {
        &self.given.namespace
    }
}

impl Deploys for Up {
    fn client(&self) -> Result<kube::Client> {
        self.client.clone().with_context(|| tr!("no client for the cluster yet"))
    }

    fn record(&mut self) -> Result<&mut Record> {
        Ok(&mut self.record)
    }

    fn documents(&self) -> Result<Vec<Value>> {
        let image = self.digest.clone().with_context(|| tr!("no pushed image"))?;
        manifests(self.namespace(), &image, &self.given.target())
    }

    /// With a kubeconfig of the one context next to it.
    fn lab_file(&self, controller: lab_file::Controller) -> Result<LabFile> {
        let existing = Existing {
            kubeconfig: self.given.kubeconfig.clone(),
            context: self.given.context.clone(),
            namespace: self.namespace().to_string(),
            controller_image: self.digest.clone().unwrap_or_default(),
        };
        Ok(LabFile {
            kubernetes_version: self.version.clone(),
            api_server_url: self.server.clone(),
            offers: Offers { cluster_wide: self.cluster_wide, ..super::Existing.offers() },
            existing: Some(existing),
            ..super::Existing.lab_file(&self.name, &self.state_dir, self.given.target(), controller)
        })
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
        .with_context(|| tr!("the context's cluster has no server"))?;
    let client = labkit::lab::client_of(config.clone(), |_| ()).await?;
    let info = client.apiserver_version().await.with_context(|| {
        tr!(
            "the API server of context {context} ({server}) does not answer",
            context = up.given.context,
            server = up.server
        )
    })?;
    let server = parse_minor(&info.minor).with_context(|| {
        tr!("the server reports minor {minor}", minor = format!("{:?}", info.minor))
    })?;
    let skew = Skew::between(target_minor(), server);
    let version = &info.git_version;
    if !skew.is_supported() {
        bail!(tr!(
            "context {context} runs {version}: {skew}",
            context = up.given.context,
            version,
            skew
        ));
    }
    labkit::progress!(
        "{}",
        tr!("  {version} at {server}: {skew}", version, server = up.server, skew)
    );
    (up.client, up.version) = (Some(client), info.git_version);
    // Written now: a `lab down` after an interrupted `up` reaches the cluster through it.
    labkit::files::create_dir(&up.state_dir)?;
    let kubeconfig = up.state_dir.join("kubeconfig");
    labkit::files::write_private(&kubeconfig, serde_saphyr::to_string(&up.given.config)?)?;
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
        bail!(tr!(
            "namespace {namespace} does not exist: create it (`kubectl create namespace {namespace}`), \
             or add --create-namespace (then `lab down` removes it)",
            namespace
        ));
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
            wanted.push(access(group, resource, verb, Some(&namespace)));
        }
    }
    wanted.push(access("", "pods", "list", Some(&namespace)));
    // To see whether someone's my-config is in the way.
    wanted.push(access("", "configmaps", "get", Some(&namespace)));
    if up.namespace_exists == Some(false) {
        wanted.push(access("", "namespaces", "create", None));
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
        bail!(tr!(
            "context {context} may not {denied} in namespace {namespace} (SelfSubjectAccessReview): ask the \
             cluster's admin for those rights there (`cargo xtask room up` makes a namespace and a \
             kubeconfig that has them), or use a context that has them",
            context = up.given.context,
            denied = denied.join(", "),
            namespace
        ));
    }
    let reviews = access("authorization.k8s.io", "subjectaccessreviews", "create", None);
    let default_pods = access("", "pods", "create", Some("default"));
    up.cluster_wide = may(&client, reviews).await? && may(&client, default_pods).await?;
    Ok(())
}

/// `docker image inspect`'s repo digests → the pushed image by digest.
pub fn record_digest(up: &mut Up, out: Result<String>) -> Result<()> {
    let pushed = up.given.pushed()?;
    let (repository, _tag) =
        pushed.rsplit_once(':').with_context(|| tr!("the image reference has no tag"))?;
    let out = out.with_context(|| tr!("the pushed image is not in Docker"))?;
    let digest = out.split_whitespace().find(|d| d.starts_with(&format!("{repository}@sha256:")));
    up.digest = Some(
        digest
            .with_context(|| {
                tr!(
                    "Docker knows no digest in {repository} after the push (it has: {out})",
                    repository,
                    out = format!("{out:?}")
                )
            })?
            .to_string(),
    );
    Ok(())
}

pub async fn create_namespace(up: &mut Up) -> Result<()> {
    let document =
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": up.namespace()}});
    let client = up.client()?;
    labkit::owned::apply(&client, &mut up.record, BY, FIELD_MANAGER, document).await?;
    Ok(())
}

/// The manifests made for the namespace: everything in it, the Role for
/// its `my-config`, the Deployment on the pushed image by digest.
fn manifests(namespace: &str, image: &str, target: &lab_file::Target) -> Result<Vec<Value>> {
    let mut documents: Vec<Value> = manifests::rbac(target)?
        .into_iter()
        .filter(|d| d["kind"] != "Namespace")
        .chain(manifests::deployment(target)?)
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

/// What `up` makes in the namespace, and the my-config its controller will
/// make: when any of them is there and this lab did not make it, `up` stops
/// here, before anything is built, pushed or applied — someone's my-config
/// would be rewritten by the controller, its other keys and binaryData lost.
pub async fn check_nothing_in_the_way(up: &mut Up) -> Result<()> {
    let client = up.client()?;
    let image = "checked before the image is pushed";
    let mut objects = Vec::new();
    for document in manifests(up.namespace(), image, &up.given.target())? {
        objects.push(labkit::apply::identify(&client, &document).await?.0);
    }
    objects.push(my_config(&up.given.target()));
    let in_the_way = labkit::owned::in_the_way(&client, &up.record, &objects).await?;
    if let Some(first) = in_the_way.first() {
        let more = match in_the_way.len() {
            1 => String::new(),
            n => tr!(" (and {n} more: {rest})", n = n - 1, rest = in_the_way[1..].join("; ")),
        };
        bail!(tr!(
            "{first}{more}: use another --namespace, or remove it if it is yours to remove",
            first,
            more
        ));
    }
    labkit::test_hook::at("lab up:checked")
}

/// The ConfigMap the lab's controller will keep.
pub fn my_config(target: &lab_file::Target) -> Applied {
    let (namespace, name) = (Some(target.namespace.clone()), target.name.clone());
    Applied { api_version: "v1".into(), kind: "ConfigMap".into(), namespace, name }
}
