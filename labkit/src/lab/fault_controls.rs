//! What only the e2e faults do to a lab: restart its API server, tell one
//! run of the controller from the next, start one that cannot get ready yet,
//! own its process, ask after the controller. Test support (the `test-support` feature).

use std::time::{Duration, Instant};

use anyhow::ensure;

use super::{
    API_SERVER, CONTROLLER, ControllerRun, HTTP_TIMEOUT, Lab, READY_WITHIN, api_server_ready,
};
use crate::{
    command::Cmd,
    eventually::{Check, eventually},
    http_probe, tr,
};

impl Lab {
    /// Kills kube-apiserver (see [`Lab::stop_process`]) and starts it again
    /// with the lab's flags plus `extra`, waiting for its `/readyz`. Returns
    /// how long it was away. On kind: its static pod's container is killed in
    /// the node (`crictl stop --timeout 0`, `crictl rm`) and the kubelet starts
    /// a new one.
    pub async fn restart_api_server(&mut self, extra: &[&str]) -> anyhow::Result<Duration> {
        let began = Instant::now();
        if let Some(kind) = &self.file.kind {
            ensure!(extra.is_empty(), tr!("a kind lab's API server runs on kubeadm's flags only"));
            let node = crate::node::Node::new(&kind.node);
            let old = node.container_id("kube-apiserver")?;
            node.kill_container(&old)?;
            let client = self.client();
            let what = tr!("kube-apiserver to run again and be ready");
            eventually(&what, READY_WITHIN, || {
                let (node, old, client) = (&node, &old, client.clone());
                async move {
                    let now = node.container_id("kube-apiserver").unwrap_or_default();
                    if now.is_empty() || now == *old {
                        return Ok(Check::NotYet(tr!("container {old} not replaced yet", old)));
                    }
                    api_server_ready(client).await
                }
            })
            .await?;
        } else {
            self.stop_process(API_SERVER).await?;
            self.start_api_server(extra).await?;
        }
        Ok(began.elapsed())
    }

    /// Who the controller is: its pid (envtest), or its pod and that pod's
    /// restart count (kind). Another answer later means it was restarted.
    pub async fn controller_identity(&self) -> anyhow::Result<String> {
        match self.deployment() {
            Some(deployment) => deployment.identity().await,
            None => Ok(format!("pid {}", self.pid(CONTROLLER)?)),
        }
    }

    /// Starts the controller like [`Lab::start_controller`] but returns at
    /// once: for a start that cannot become ready yet (the API server is down).
    pub async fn start_controller_without_waiting(
        &mut self,
        extra: &[&str],
    ) -> anyhow::Result<ControllerRun> {
        let run = self.log_end();
        self.start_process(CONTROLLER, extra).await?;
        Ok(run)
    }

    /// The controller's command line from lab.json plus `extra`: for a test
    /// that must own the process to read its exit status (a detached one's
    /// status is lost). Not recorded in lab.json; it listens on the lab
    /// controller's port, so stop that one first.
    pub fn controller_command(&self, extra: &[&str]) -> anyhow::Result<Cmd> {
        let spec = self.process(CONTROLLER)?;
        Ok(Cmd::new(spec.binary.display().to_string()).args(&spec.args).args(extra))
    }

    /// `namespace/name` of the controller's ServiceAccount.
    pub fn controller_service_account(&self) -> &str {
        &self.file.controller.service_account
    }

    /// Whether the controller runs (envtest: its process; kind: a ready pod).
    pub async fn controller_running(&self) -> anyhow::Result<bool> {
        match self.deployment() {
            Some(deployment) => Ok(deployment.ready_pod().await?.is_some()),
            None => self.is_running(CONTROLLER),
        }
    }

    /// The HTTP status of `GET <path>` on the controller's port (kind: through
    /// the API server's pod proxy).
    pub async fn controller_status(&self, path: &str) -> anyhow::Result<u16> {
        match self.deployment() {
            Some(deployment) => deployment.status(path).await,
            None => {
                Ok(http_probe::get_url(&self.file.controller.url, path, HTTP_TIMEOUT).await?.status)
            }
        }
    }
}
