//! What only the e2e faults ask of the controller's Deployment: who its pod
//! is, its exit code on a delete, its log as it goes. Test support (the
//! `test-support` feature).

use std::time::Duration;

use anyhow::{Context as _, bail};
use futures::TryStreamExt;
use kube::api::{DeleteParams, ListParams, LogParams, WatchEvent, WatchParams};
use tokio::time::Instant;

use super::{DeploymentHost, ROLLOUT_WITHIN};
use crate::tr;

impl DeploymentHost {
    /// The current pod's name and its container's restart count.
    pub async fn identity(&self) -> anyhow::Result<String> {
        let pod = self.current_pod().await?;
        let restarts = self
            .pods()
            .get(&pod)
            .await?
            .status
            .and_then(|s| s.container_statuses)
            .and_then(|c| c.first().map(|c| c.restart_count))
            .unwrap_or_default();
        Ok(tr!("pod {pod}, {restarts} restarts", pod, restarts))
    }

    /// `kubectl delete pod` (its grace period), then the exit code its
    /// container reported and how long after the delete it came. The
    /// ReplicaSet starts a new pod meanwhile.
    pub async fn delete_and_wait_exit(
        &self,
        pod: &str,
        within: Option<Duration>,
    ) -> anyhow::Result<(i32, Duration)> {
        let within = within.unwrap_or(ROLLOUT_WITHIN);
        let pods = self.pods();
        let fields = format!("metadata.name={pod}");
        let listed = pods.list(&ListParams::default().fields(&fields)).await?;
        let from = listed.metadata.resource_version.unwrap_or_default();
        let stream = pods.watch(&WatchParams::default().fields(&fields).timeout(60), &from).await?;
        futures::pin_mut!(stream);
        let deleted = Instant::now();
        pods.delete(pod, &DeleteParams::default()).await?;
        let mut last = tr!("no event");
        let exit = tokio::time::timeout(within, async {
            while let Some(event) = stream.try_next().await? {
                let (WatchEvent::Modified(p) | WatchEvent::Deleted(p)) = event else {
                    continue;
                };
                let terminated = p
                    .status
                    .and_then(|s| s.container_statuses)
                    .and_then(|c| c.into_iter().next())
                    .and_then(|c| c.state)
                    .and_then(|s| s.terminated);
                match terminated {
                    Some(t) => return Ok::<_, anyhow::Error>(Some(t.exit_code)),
                    None => last = tr!("terminating, container still running"),
                }
            }
            Ok(None)
        })
        .await;
        match exit {
            Ok(Ok(Some(code))) => Ok((code, deleted.elapsed())),
            Ok(Ok(None)) => bail!(tr!(
                "pod {pod}: the watch ended before its container's exit was reported; last seen: {last}",
                pod,
                last
            )),
            Ok(Err(e)) => Err(e),
            Err(_) => {
                let within = format!("{within:?}");
                bail!(tr!(
                    "pod {pod}: no exit within {within} of its deletion; last seen: {last}",
                    pod,
                    within,
                    last
                ))
            }
        }
    }

    /// `kubectl logs -f`: everything `pod` logs until its container exits.
    /// Returns once the stream has given its first line (a ready pod has
    /// logged its start), so nothing said after this call is missed.
    pub async fn follow_log(
        &self,
        pod: &str,
    ) -> anyhow::Result<tokio::task::JoinHandle<anyhow::Result<String>>> {
        use futures::AsyncBufReadExt;
        let params = LogParams { follow: true, ..LogParams::default() };
        let mut lines = self.pods().log_stream(pod, &params).await?.lines();
        let first = tokio::time::timeout(Duration::from_secs(10), lines.try_next())
            .await
            .with_context(|| tr!("pod {pod}'s log stream gave no line within 10 s", pod))??
            .with_context(|| tr!("pod {pod}'s log stream ended at once", pod))?;
        Ok(tokio::spawn(async move {
            let mut log = first + "\n";
            while let Some(line) = lines.try_next().await? {
                log.push_str(&line);
                log.push('\n');
            }
            Ok(log)
        }))
    }
}
