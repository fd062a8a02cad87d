//! The contract of the controller's pod on a kind node: the course's
//! Deployment as the kubelet really runs it.

use anyhow::{Context as _, ensure};
use controller::metrics::RECONCILES;
use k8s_openapi::api::core::v1::{Container, ContainerStatus, Pod, PodStatus};
use kube::{Api, ResourceExt};
use serde_json::Value;

use labkit::{lab::Lab, node::Node, suite::Measured, tr};

/// The ServiceAccount token's mount point in every pod.
const TOKEN_MOUNT: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// The controller's pod as the kubelet runs it: Running and Ready through
/// its probes, never restarted, on the image `lab up` built (pull policy
/// IfNotPresent), as 65532 with a read-only root and no capabilities (from
/// the pod's status and from the node's runtime), with the kubelet's
/// projected ServiceAccount token, and its `/metrics` served through the API
/// server's pod proxy.
pub async fn pod_ready_non_root_read_only(lab: &mut Lab) -> anyhow::Result<Measured> {
    let kind = lab.file().kind.clone().with_context(|| tr!("lab.json has no kind section"))?;
    let pods: Api<Pod> = Api::namespaced(lab.client(), labkit::deployment::NAMESPACE);
    let name = labkit::deployment::DeploymentHost::new(lab.client(), labkit::deployment::NAMESPACE)
        .ready_pod()
        .await?
        .with_context(|| tr!("no ready controller pod"))?;
    let pod = pods.get(&name).await?;
    let spec = pod.spec.clone().with_context(|| tr!("pod without spec"))?;
    let container = spec.containers.first().with_context(|| tr!("pod without containers"))?;
    let status = pod.status.clone().with_context(|| tr!("pod without status"))?;
    let state = status
        .container_statuses
        .as_ref()
        .and_then(|c| c.first())
        .with_context(|| tr!("pod without container status"))?;

    status_as_declared(&name, container, &status, state)?;
    let built = kind.controller_image_id.trim_start_matches("sha256:");

    // The node's runtime: the OCI spec the container really got.
    let id = state
        .container_id
        .as_deref()
        .and_then(|c| c.split("://").nth(1))
        .with_context(|| tr!("no container ID in the pod status"))?;
    let inspected = Node::new(&kind.node).inspect(id)?;
    // The pod status names the image by the digest `kind load` gave it; the
    // runtime also knows its image ID, which is Docker's.
    let running = inspected["status"]["imageId"].as_str().unwrap_or_default();
    ensure!(
        !built.is_empty() && running.ends_with(built),
        tr!(
            "the container runs image {running} (pod status: {status}), and lab up built {built}",
            running,
            status = state.image_id,
            built = kind.controller_image_id
        )
    );
    locked_down(&inspected["info"]["runtimeSpec"])?;
    let expires = projected_token(container, &spec, &inspected)?;

    let metrics = lab.metrics().await?;
    ensure!(
        metrics.sum(RECONCILES) >= 1.0,
        tr!("/metrics through the pod proxy shows no reconcile")
    );
    Ok(Measured::said(tr!(
        "pod {pod} Running and Ready (probes /healthz, /readyz), 0 restarts; image {image} = the one built, \
             IfNotPresent; runtime: uid/gid 65532, read-only root, no capabilities, no_new_privs; \
             projected token ({expires} s) mounted read-only; /metrics through the pod proxy",
        pod = pod.name_any(),
        image = &built[..12.min(built.len())],
        expires
    )))
}

/// The pod's status and spec: Running, probed, ready, never restarted, IfNotPresent, uid 65532.
fn status_as_declared(
    name: &str,
    container: &Container,
    status: &PodStatus,
    state: &ContainerStatus,
) -> anyhow::Result<()> {
    ensure!(
        status.phase.as_deref() == Some("Running"),
        tr!("pod {name} is {phase}", name, phase = format!("{:?}", status.phase))
    );
    let probes = [&container.liveness_probe, &container.readiness_probe]
        .iter()
        .map(|p| p.as_ref().and_then(|p| p.http_get.as_ref()).and_then(|h| h.path.clone()))
        .collect::<Vec<_>>();
    ensure!(
        probes == [Some("/healthz".to_string()), Some("/readyz".to_string())],
        tr!("probes are {probes}, not /healthz and /readyz", probes = format!("{probes:?}"))
    );
    ensure!(state.ready, tr!("container not ready"));
    ensure!(
        state.restart_count == 0,
        tr!("container restarted {count} times", count = state.restart_count)
    );
    ensure!(
        container.image_pull_policy.as_deref() == Some("IfNotPresent"),
        tr!("pull policy {policy}", policy = format!("{:?}", container.image_pull_policy))
    );
    // The kubelet reports the identity the process runs with (pod status `user`).
    let uid = state.user.as_ref().and_then(|u| u.linux.as_ref()).map(|l| l.uid);
    ensure!(
        uid.is_none_or(|u| u == 65532),
        tr!("pod status says uid {uid}", uid = format!("{uid:?}"))
    );
    Ok(())
}

/// The OCI spec the container got: uid/gid 65532, read-only root, no
/// capabilities, no_new_privs.
fn locked_down(runtime: &Value) -> anyhow::Result<()> {
    ensure!(
        runtime["process"]["user"]["uid"] == 65532 && runtime["process"]["user"]["gid"] == 65532,
        tr!("the runtime runs it as {user}", user = runtime["process"]["user"])
    );
    ensure!(runtime["root"]["readonly"] == true, tr!("root filesystem not read-only"));
    let caps = &runtime["process"]["capabilities"];
    let granted: Vec<&Value> = ["bounding", "effective", "permitted"]
        .iter()
        .flat_map(|set| caps[set].as_array().into_iter().flatten())
        .collect();
    ensure!(
        granted.is_empty(),
        tr!("capabilities granted: {granted}", granted = format!("{granted:?}"))
    );
    ensure!(
        runtime["process"]["noNewPrivileges"] == true,
        tr!("no_new_privs is not set (allowPrivilegeEscalation)")
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
        .with_context(|| tr!("no ServiceAccount token mount"))?;
    let volume = spec
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == token_volume.name)
        .with_context(|| tr!("the token mount names no volume"))?;
    let expires = volume
        .projected
        .as_ref()
        .and_then(|p| p.sources.iter().flatten().find_map(|s| s.service_account_token.as_ref()))
        .and_then(|t| t.expiration_seconds)
        .with_context(|| tr!("the token volume is not a projected serviceAccountToken"))?;
    let mounted = inspected["status"]["mounts"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|m| m["containerPath"] == TOKEN_MOUNT)
        .with_context(|| tr!("the runtime has no token mount"))?;
    ensure!(mounted["readonly"] == true, tr!("the token is mounted read-write"));
    Ok(expires)
}
