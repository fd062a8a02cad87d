//! A lab whose controller is a Deployment (kind, an existing cluster): the
//! steps of `lab up` both providers' plans share — the manifests applied as
//! the lab's ([`apply`]), the rollout awaited ([`rollout`]), lab.json written
//! ([`write_lab_file`]) — and `lab status` and `lab logs`, after the
//! provider's own lines: the API server, the Deployment and its pod (phase,
//! readiness, restarts, the image it runs).

use std::path::Path;

use anyhow::{Context as _, Result};
use kube::ResourceExt;
use kube::api::LogParams;
use serde_json::Value;

use crate::lab::controller::SERVICE_ACCOUNT;
use crate::lab::manifests::FIELD_MANAGER;
use crate::lab::{kubeconfig, provider::Health};
use crate::plan::Step;
pub use labkit::deployment::{DeploymentHost, NAME as DEPLOYMENT, NAMESPACE};
use labkit::lab_file::{Applied, Controller, LabFile};
use labkit::project::shown;
use labkit::record::Record;
use labkit::tr;

/// What `lab up` makes is recorded as made by it.
pub const BY: &str = "lab up";

/// What a provider's `lab up` that deploys the controller gives the shared steps.
pub trait Deploys: Send + 'static {
    fn client(&self) -> Result<kube::Client>;
    /// What this lab made, written before each object is made.
    fn record(&mut self) -> Result<&mut Record>;
    /// The manifests made for this cluster, in the order they are applied.
    fn documents(&self) -> Result<Vec<Value>>;
    /// lab.json as `lab up` writes it last, `controller` the Deployment's.
    fn lab_file(&self, controller: Controller) -> Result<LabFile>;
}

/// The manifests applied as this lab's ([`labkit::owned::apply`]): made, or
/// updated when the record claims them. `kept`, the ConfigMap the controller
/// keeps, is made by the lab before the Deployment (the controller then finds
/// it right), so one that appeared meanwhile stops `up` in one line; a lab that
/// has it already leaves it to the controller. `kubectl` is the command a
/// person would type up to its verb, `note` what the plan says of it.
pub fn apply<C: Deploys>(kubectl: &str, note: &str, kept: Option<Applied>) -> Step<C> {
    let files = "-f manifests/rbac.yaml -f manifests/deployment.yaml";
    Step::api(
        format!(
            "{kubectl} apply --server-side --force-conflicts --field-manager={FIELD_MANAGER} {files}    # {note}"
        ),
        move |up: &mut C| {
            Box::pin(async move {
                let client = up.client()?;
                for document in up.documents()? {
                    if let Some(kept) = kept.as_ref().filter(|_| document["kind"] == "Deployment")
                        && up.record()?.find(kept).is_none()
                    {
                        let made = kept_config_map(kept);
                        labkit::owned::apply(&client, up.record()?, BY, FIELD_MANAGER, made)
                            .await?;
                        up.record()?.kept_by_controller(kept)?;
                    }
                    labkit::owned::apply(&client, up.record()?, BY, FIELD_MANAGER, document)
                        .await?;
                }
                Ok(())
            })
        },
    )
}

/// `kept` with the course's data, as the controller would make it.
fn kept_config_map(kept: &Applied) -> Value {
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": { "namespace": kept.namespace, "name": kept.name },
        "data": controller::desired::default_data(),
    })
}

/// The rollout in `namespace` awaited.
pub fn rollout<C: Deploys>(kubectl: &str, namespace: &str) -> Step<C> {
    let namespace = namespace.to_string();
    Step::api(format!("{kubectl} rollout status deployment/{DEPLOYMENT}"), |up: &mut C| {
        Box::pin(async move {
            let deployments = DeploymentHost::new(up.client()?, &namespace).deployments();
            labkit::deployment::wait_rollout(&deployments).await
        })
    })
}

/// The record: lab.json in `dir`, which the suites read; the controller's
/// ServiceAccount in `namespace`.
pub fn write_lab_file<C: Deploys>(dir: &Path, namespace: &str) -> Step<C> {
    let account = format!("{namespace}/{SERVICE_ACCOUNT}");
    Step::own(tr!("write {path}", path = shown(&LabFile::path(dir))), |up: &mut C| {
        Box::pin(async move {
            let lab = up.lab_file(Controller::deployment(account))?;
            labkit::test_hook::at("lab up:lab.json")?;
            lab.write()
        })
    })
}

/// What `lab status` shows of the lab after the provider's `lines`, and whether it is healthy.
pub async fn status(lab: &LabFile, mut lines: Vec<String>) -> Result<Health> {
    let client = kubeconfig::client(&lab.admin_kubeconfig).await?;
    let version = client
        .apiserver_version()
        .await
        .map(|v| v.git_version)
        .unwrap_or_else(|error| tr!("unreachable: {error}", error));
    lines.push(tr!("API server:   {url} ({version})", url = lab.api_server_url, version));
    let host = DeploymentHost::new(client, lab.deployment_namespace());
    let ready = match host.deployments().get_opt(DEPLOYMENT).await? {
        Some(d) => {
            let status = d.status.unwrap_or_default();
            let (ready, want) =
                (status.ready_replicas.unwrap_or(0), d.spec.and_then(|s| s.replicas).unwrap_or(1));
            let name = DEPLOYMENT;
            lines.push(tr!("deployment/{name}: {ready}/{want} ready", name, ready, want));
            ready == want && want > 0
        }
        None => {
            lines.push(tr!("deployment/{name}: missing", name = DEPLOYMENT));
            false
        }
    };
    if let Some(pod) = host.newest_pod().await? {
        let status = pod.status.clone().unwrap_or_default();
        let container =
            status.container_statuses.as_ref().and_then(|c| c.first()).cloned().unwrap_or_default();
        lines.push(tr!(
            "pod {pod}: {phase}, ready {ready}, {restarts} restarts, image {image} ({id})",
            pod = pod.name_any(),
            phase = status.phase.unwrap_or_default(),
            ready = container.ready,
            restarts = container.restart_count,
            image = container.image,
            id = container.image_id
        ));
    }
    Ok(Health { lines, healthy: ready })
}

/// `lab logs [-f]`: the controller pod's log.
pub async fn logs(name: &str, follow: bool) -> Result<()> {
    use futures::{AsyncBufReadExt, TryStreamExt};
    let lab = labkit::lab::file_of(name)?;
    let client = kubeconfig::client(&lab.admin_kubeconfig).await?;
    let host = DeploymentHost::new(client, lab.deployment_namespace());
    let pod = host
        .newest_pod()
        .await?
        .with_context(|| tr!("no controller pod: `cargo xtask lab status` shows why"))?;
    let (name, namespace) = (pod.name_any(), lab.deployment_namespace());
    let kubeconfig = labkit::project::shown(&lab.admin_kubeconfig);
    let f = if follow { "-f " } else { "" };
    let how = tr!("done with kube-rs");
    labkit::progress!(
        "$ kubectl --kubeconfig {kubeconfig} -n {namespace} logs {f}pod/{name}    # {how}"
    );
    let pods = host.pods();
    if !follow {
        print!("{}", pods.logs(&name, &LogParams::default()).await?);
        return Ok(());
    }
    let params = LogParams { follow: true, ..Default::default() };
    let mut lines = pods.log_stream(&name, &params).await?.lines();
    while let Some(line) = lines.try_next().await? {
        println!("{line}");
    }
    Ok(())
}
