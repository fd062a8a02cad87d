//! The controller as a Deployment (the kind lab): how the harness stops,
//! starts and restarts it, and reads its metrics and logs — all through the
//! Kubernetes API, as `kubectl scale`, `rollout restart`, `rollout status`,
//! `logs` and the API server's pod proxy would.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, bail};
use k8s_openapi::api::{
    apps::v1::Deployment,
    core::v1::{Pod, PodCondition},
};
use kube::{
    Api, Client, ResourceExt,
    api::{ListParams, LogParams, Patch, PatchParams},
};
use serde_json::json;

use crate::eventually::{Check, eventually};
use crate::tr;

#[cfg(any(test, feature = "test-support"))]
mod controls;

/// Where the Deployment lives (manifests/deployment.yaml); an existing
/// cluster's lab puts it in the namespace it was given.
pub const NAMESPACE: &str = "default";
pub const NAME: &str = "my-controller";
const CONTAINER: &str = "controller";
/// The label its pods carry (manifests/deployment.yaml).
pub const SELECTOR: &str = "app.kubernetes.io/name=my-controller";
/// The container's HTTP port (`--listen 0.0.0.0:8080`).
pub const PORT: u16 = 8080;
const ROLLOUT_WITHIN: Duration = Duration::from_secs(180);
/// How long a GET through the pod proxy may take (the controller answers at once).
const PROXY_WITHIN: Duration = Duration::from_secs(5);

pub struct DeploymentHost {
    client: Client,
    /// For [`DeploymentHost::status`]: a client that returns a 503 as it is (the lab's
    /// probe client; kube's default one retries a 503 for minutes).
    pub(crate) probe: Client,
    namespace: String,
}

impl DeploymentHost {
    /// The Deployment in `namespace` ([`NAMESPACE`] unless an existing cluster's lab
    /// gave another), through `client`.
    pub fn new(client: Client, namespace: &str) -> Self {
        Self { probe: client.clone(), client, namespace: namespace.into() }
    }

    pub fn deployments(&self) -> Api<Deployment> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    pub fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    /// The controller's pods, oldest first.
    async fn listed(&self) -> anyhow::Result<Vec<Pod>> {
        let mut pods = self.pods().list(&ListParams::default().labels(SELECTOR)).await?.items;
        pods.sort_by_key(|p| p.metadata.creation_timestamp.clone());
        Ok(pods)
    }

    /// Fails when a controller pod's container restarted: a crash, a failed
    /// liveness probe or the memory limit, which a test must not hide by
    /// replacing the pod.
    pub async fn ensure_no_restarts(&self) -> anyhow::Result<()> {
        for pod in &self.listed().await? {
            for status in pod.status.iter().flat_map(|s| s.container_statuses.iter().flatten()) {
                if status.restart_count > 0 {
                    let last = status
                        .last_state
                        .as_ref()
                        .and_then(|s| s.terminated.as_ref())
                        .map(|t| {
                            let reason = t.reason.clone().unwrap_or_default();
                            tr!("{reason} exit {code}", reason, code = t.exit_code)
                        })
                        .unwrap_or_else(|| tr!("unknown"));
                    bail!(tr!(
                        "pod {pod} restarted its container {count} times (last: {last}): see `kubectl describe pod {pod}`",
                        pod = pod.name_any(),
                        count = status.restart_count,
                        last
                    ));
                }
            }
        }
        Ok(())
    }

    /// `kubectl scale --replicas=0`, then wait until no pod is left.
    pub async fn stop(&self) -> anyhow::Result<()> {
        self.ensure_no_restarts().await?;
        let patch = json!({"spec": {"replicas": 0}});
        self.deployments().patch(NAME, &PatchParams::default(), &Patch::Merge(&patch)).await?;
        let what = tr!("the controller pods to be gone");
        eventually(&what, ROLLOUT_WITHIN, || async {
            let left = self.listed().await?.len();
            Ok(Check::done_if(left == 0, (), tr!("{left} pods left", left)))
        })
        .await
    }

    /// One replica whose container gets `extra` as its arguments (after the
    /// image's entrypoint), a fresh pod, and the rollout awaited. Returns the
    /// new pod's name.
    pub async fn start(&self, extra: &[&str]) -> anyhow::Result<String> {
        // Strategic merge: the containers list is merged by name.
        let containers = json!([{"name": CONTAINER, "args": extra}]);
        self.roll(
            json!({"spec": {"replicas": 1, "template": {"spec": {"containers": containers}}}}),
        )
        .await?;
        // The rollout counts the pod its ReplicaSet last saw ready; a probe may
        // have failed since on a busy node.
        eventually(&tr!("the new controller pod to be ready"), ROLLOUT_WITHIN, || async {
            let pod = self.newest_live(|_| true).await?.context(tr!("no controller pod"))?;
            Ok(Check::done_if(is_ready(&pod), pod.name_any(), readiness(&pod)))
        })
        .await
    }

    /// `kubectl rollout restart`: a new pod on the same spec (a new image
    /// under the same tag), the rollout awaited.
    pub async fn restart(&self) -> anyhow::Result<()> {
        self.roll(json!({})).await
    }

    /// `patch` (strategic merge) with a fresh value of the annotation `kubectl rollout
    /// restart` sets, so a new pod starts; the rollout awaited.
    async fn roll(&self, mut patch: serde_json::Value) -> anyhow::Result<()> {
        self.ensure_no_restarts().await?;
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
        let annotations = &mut patch["spec"]["template"]["metadata"]["annotations"];
        annotations["kubectl.kubernetes.io/restartedAt"] = json!(now.as_nanos().to_string());
        self.deployments().patch(NAME, &PatchParams::default(), &Patch::Strategic(&patch)).await?;
        wait_rollout(&self.deployments()).await
    }

    /// The newest controller pod, ready or not.
    pub async fn newest_pod(&self) -> anyhow::Result<Option<Pod>> {
        Ok(self.listed().await?.pop())
    }

    /// The pod the controller runs in now, ready or not: the newest one not
    /// being deleted. A controller that reports not-ready on purpose (its
    /// watch refused) is still this pod, with the same log and port.
    pub async fn current_pod(&self) -> anyhow::Result<String> {
        let pod = self.newest_live(|_| true).await?.with_context(|| tr!("no controller pod"))?;
        Ok(pod.name_any())
    }

    /// The newest pod that is Ready.
    pub async fn ready_pod(&self) -> anyhow::Result<Option<String>> {
        Ok(self.newest_live(is_ready).await?.map(|p| p.name_any()))
    }

    /// The newest pod not being deleted that `pick` takes.
    async fn newest_live(&self, pick: fn(&Pod) -> bool) -> anyhow::Result<Option<Pod>> {
        let mut pods = self.listed().await?.into_iter().rev();
        Ok(pods.find(|p| p.metadata.deletion_timestamp.is_none() && pick(p)))
    }

    /// `GET <path>` on the controller's port through the API server's pod proxy.
    pub async fn get(&self, path: &str) -> anyhow::Result<String> {
        let pod = self.ready_pod().await?.with_context(|| tr!("no ready controller pod"))?;
        Ok(self.client.request_text(self.proxied(&pod, path)?).await?)
    }

    /// `GET <path>` on `pod`'s port, through the API server's pod proxy.
    fn proxied(&self, pod: &str, path: &str) -> anyhow::Result<http::Request<Vec<u8>>> {
        let ns = &self.namespace;
        let uri = format!("/api/v1/namespaces/{ns}/pods/{pod}:{PORT}/proxy{path}");
        Ok(http::Request::get(uri).body(Vec::new())?)
    }

    /// The HTTP status of `GET <path>` through the pod proxy (a 503 is an
    /// answer here, not an error).
    pub async fn status(&self, path: &str) -> anyhow::Result<u16> {
        let pod = self.current_pod().await?;
        let request = self.proxied(&pod, path)?;
        let answer = tokio::time::timeout(PROXY_WITHIN, self.probe.send(request.map(Into::into)))
            .await
            .map_err(|_| {
                anyhow::anyhow!(tr!(
                    "GET {path} on pod {pod} through the API server: no answer within {within}",
                    path,
                    pod,
                    within = format!("{PROXY_WITHIN:?}")
                ))
            })?;
        Ok(answer?.status().as_u16())
    }

    /// The log of `pod` (`kubectl logs`): the last `tail` lines, or from the
    /// second `since` falls in (callers trim to the instant by the lines' own
    /// timestamps).
    pub async fn log(
        &self,
        pod: &str,
        tail: Option<i64>,
        since: Option<k8s_openapi::jiff::Timestamp>,
    ) -> anyhow::Result<String> {
        // kube sends `sinceTime` rounded to the nearest second: a moment in the
        // second half of a second became the next second, and the kubelet left
        // out the lines logged before it (a test then saw an empty log).
        let since_time = since.map(whole_second);
        let params = LogParams { tail_lines: tail, since_time, ..LogParams::default() };
        Ok(self.pods().logs(pod, &params).await?)
    }
}

/// The start of the second `at` falls in.
fn whole_second(at: k8s_openapi::jiff::Timestamp) -> k8s_openapi::jiff::Timestamp {
    k8s_openapi::jiff::Timestamp::from_second(at.as_second()).unwrap_or(at)
}

fn ready_condition(pod: &Pod) -> Option<&PodCondition> {
    pod.status.as_ref()?.conditions.as_ref()?.iter().find(|c| c.type_ == "Ready")
}

fn is_ready(pod: &Pod) -> bool {
    ready_condition(pod).is_some_and(|c| c.status == "True")
}

/// Its Ready condition, as `kubectl describe pod` shows it.
fn readiness(pod: &Pod) -> String {
    let condition = ready_condition(pod).cloned().unwrap_or_default();
    let why = [condition.reason, condition.message].into_iter().flatten();
    let why = why.collect::<Vec<_>>().join(": ");
    tr!("pod {pod}: Ready {status} ({why})", pod = pod.name_any(), status = condition.status, why)
}

/// `kubectl rollout status`: the Deployment's current generation is rolled
/// out and all its replicas are updated and available.
pub async fn wait_rollout(deployments: &Api<Deployment>) -> anyhow::Result<()> {
    let what = tr!("deployment/{name} to roll out", name = NAME);
    eventually(&what, ROLLOUT_WITHIN, || async {
        let d = deployments.get(NAME).await?;
        let want = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
        let status = d.status.unwrap_or_default();
        let observed = status.observed_generation >= d.metadata.generation;
        let (updated, available, total) = (
            status.updated_replicas.unwrap_or(0),
            status.available_replicas.unwrap_or(0),
            status.replicas.unwrap_or(0),
        );
        if status.conditions.iter().flatten().any(|c| c.type_ == "Progressing" && c.reason.as_deref() == Some("ProgressDeadlineExceeded")) {
            bail!(tr!("deployment/{name} exceeded its progress deadline: see `kubectl describe deployment {name}`", name = NAME));
        }
        Ok(Check::done_if(observed && updated == want && available == want && total == want, (), tr!("{updated} updated, {available} available, {total} total of {want}", updated, available, total, want)))
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pod_not_ready_says_why_as_kubectl_describe_does() {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "my-controller-1"},
            "status": {"conditions": [{"type": "Ready", "status": "False",
                "reason": "ContainersNotReady",
                "message": "containers with unready status: [controller]"}]}
        }))
        .unwrap();
        let seen = readiness(&pod);
        assert_eq!(
            seen,
            "pod my-controller-1: Ready False (ContainersNotReady: containers with unready status: [controller])"
        );
        assert!(!is_ready(&pod));
    }

    #[test]
    fn a_log_since_a_moment_is_asked_from_the_start_of_its_second() {
        let at: k8s_openapi::jiff::Timestamp = "2026-12-02T01:25:40.7Z".parse().unwrap();
        let asked = LogParams { since_time: Some(whole_second(at)), ..LogParams::default() };
        let request = kube::core::Request::new("/api/v1/namespaces/default/pods")
            .logs("my-controller", &asked)
            .unwrap();
        // Not 01:25:41, where kube's rounding put it.
        assert!(request.uri().to_string().contains("sinceTime=2026-12-02T01%3A25%3A40Z"));
    }
}
