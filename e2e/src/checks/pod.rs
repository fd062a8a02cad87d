//! The contract of the controller's pod on a kind node: the course's
//! Deployment as the kubelet really runs it.

use anyhow::{Context as _, ensure};
use controller::metrics::RECONCILES;
use k8s_openapi::api::core::v1::Pod;
use kube::{Api, ResourceExt};
use serde_json::Value;

use labkit::{lab::Lab, node::Node, suite::Measured};

/// The ServiceAccount token's mount point in every pod.
const TOKEN_MOUNT: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// The controller's pod as the kubelet runs it: Running and Ready through
/// its probes, never restarted, on the image `lab up` built (pull policy
/// IfNotPresent), as 65532 with a read-only root and no capabilities (from
/// the pod's status and from the node's runtime), with the kubelet's
/// projected ServiceAccount token, and its `/metrics` served through the API
/// server's pod proxy.
pub async fn pod_ready_non_root_read_only(lab: &mut Lab) -> anyhow::Result<Measured> {
    let kind = lab.file().kind().cloned().context("lab.json has no kind section")?;
    let pods: Api<Pod> = Api::namespaced(lab.client(), labkit::deployment::NAMESPACE);
    let name = labkit::deployment::DeploymentHost::new(lab.client())
        .ready_pod()
        .await?
        .context("no ready controller pod")?;
    let pod = pods.get(&name).await?;
    let spec = pod.spec.clone().context("pod without spec")?;
    let container = spec.containers.first().context("pod without containers")?;
    let status = pod.status.clone().context("pod without status")?;
    let state = status
        .container_statuses
        .as_ref()
        .and_then(|c| c.first())
        .context("pod without container status")?;

    ensure!(status.phase.as_deref() == Some("Running"), "pod {name} is {:?}", status.phase);
    let probes = [&container.liveness_probe, &container.readiness_probe]
        .iter()
        .map(|p| p.as_ref().and_then(|p| p.http_get.as_ref()).and_then(|h| h.path.clone()))
        .collect::<Vec<_>>();
    ensure!(
        probes == [Some("/healthz".to_string()), Some("/readyz".to_string())],
        "probes are {probes:?}, not /healthz and /readyz"
    );
    ensure!(state.ready, "container not ready");
    ensure!(state.restart_count == 0, "container restarted {} times", state.restart_count);
    ensure!(
        container.image_pull_policy.as_deref() == Some("IfNotPresent"),
        "pull policy {:?}",
        container.image_pull_policy
    );
    let built = kind.controller_image_id.trim_start_matches("sha256:");
    // The kubelet reports the identity the process runs with (pod status `user`).
    let uid = state.user.as_ref().and_then(|u| u.linux.as_ref()).map(|l| l.uid);
    ensure!(uid.is_none_or(|u| u == 65532), "pod status says uid {uid:?}");

    // The node's runtime: the OCI spec the container really got.
    let id = state
        .container_id
        .as_deref()
        .and_then(|c| c.split("://").nth(1))
        .context("no container ID in the pod status")?;
    let inspected = Node::new(&kind.node).inspect(id)?;
    // The pod status names the image by the digest `kind load` gave it; the
    // runtime also knows its image ID, which is Docker's.
    let running = inspected["status"]["imageId"].as_str().unwrap_or_default();
    ensure!(
        !built.is_empty() && running.ends_with(built),
        "the container runs image {running} (pod status: {}), and lab up built {}",
        state.image_id,
        kind.controller_image_id
    );
    locked_down(&inspected["info"]["runtimeSpec"])?;
    let expires = projected_token(container, &spec, &inspected)?;

    let metrics = lab.metrics().await?;
    ensure!(metrics.sum(RECONCILES) >= 1.0, "/metrics through the pod proxy shows no reconcile");
    Ok(Measured::said(format!(
        "pod {} Running and Ready (probes /healthz, /readyz), 0 restarts; image {} = the one built, \
             IfNotPresent; runtime: uid/gid 65532, read-only root, no capabilities, no_new_privs; \
             projected token ({expires} s) mounted read-only; /metrics through the pod proxy",
        pod.name_any(),
        &built[..12.min(built.len())]
    )))
}

/// The OCI spec the container got: uid/gid 65532, read-only root, no
/// capabilities, no_new_privs.
fn locked_down(runtime: &Value) -> anyhow::Result<()> {
    ensure!(
        runtime["process"]["user"]["uid"] == 65532 && runtime["process"]["user"]["gid"] == 65532,
        "the runtime runs it as {}",
        runtime["process"]["user"]
    );
    ensure!(runtime["root"]["readonly"] == true, "root filesystem not read-only");
    let caps = &runtime["process"]["capabilities"];
    let granted: Vec<&Value> = ["bounding", "effective", "permitted"]
        .iter()
        .flat_map(|set| caps[set].as_array().into_iter().flatten())
        .collect();
    ensure!(granted.is_empty(), "capabilities granted: {granted:?}");
    ensure!(
        runtime["process"]["noNewPrivileges"] == true,
        "no_new_privs is not set (allowPrivilegeEscalation)"
    );
    Ok(())
}

/// The kubelet's projected, expiring token, mounted read-only (no Secret):
/// its lifetime in seconds.
fn projected_token(
    container: &k8s_openapi::api::core::v1::Container,
    spec: &k8s_openapi::api::core::v1::PodSpec,
    inspected: &Value,
) -> anyhow::Result<i64> {
    let token_volume = container
        .volume_mounts
        .iter()
        .flatten()
        .find(|m| m.mount_path == TOKEN_MOUNT)
        .context("no ServiceAccount token mount")?;
    let volume = spec
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == token_volume.name)
        .context("the token mount names no volume")?;
    let expires = volume
        .projected
        .as_ref()
        .and_then(|p| p.sources.iter().flatten().find_map(|s| s.service_account_token.as_ref()))
        .and_then(|t| t.expiration_seconds)
        .context("the token volume is not a projected serviceAccountToken")?;
    let mounted = inspected["status"]["mounts"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|m| m["containerPath"] == TOKEN_MOUNT)
        .context("the runtime has no token mount")?;
    ensure!(mounted["readonly"] == true, "the token is mounted read-write");
    Ok(expires)
}
