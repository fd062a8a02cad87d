//! The lab handle: finds the lab `cargo xtask lab up` left (its `lab.json`),
//! talks to its API server as admin, and drives the controller under test:
//! stop, start with extra flags, restart, read its metrics and its log.

use std::{path::PathBuf, time::Duration};

use anyhow::{Context as _, anyhow, bail};
use controller::{connect, desired::Desired};
use k8s_openapi::api::{core::v1::ConfigMap, events::v1::Event};
use kube::{
    Api, Client,
    api::{ListParams, ResourceExt},
};

use crate::{
    eventually::{Check, eventually},
    http_probe,
    lab_file::{LabFile, ProviderKind},
    metrics::Scrape,
    process, project,
};

/// The lab name `cargo xtask lab up` uses unless told otherwise.
pub const DEFAULT_NAME: &str = "my-controller-lab";
/// Environment variable naming the lab to use.
pub const NAME_ENV: &str = "LAB_NAME";
/// How long a (re)started controller gets to report ready.
const READY_WITHIN: Duration = Duration::from_secs(60);
/// Timeout of one HTTP request to the controller.
const HTTP_TIMEOUT: Duration = Duration::from_secs(5);

pub struct Lab {
    file: LabFile,
    client: Client,
    desired: Desired,
    /// Flags added to the lab's own for the controller running now.
    extra_args: Vec<String>,
}

/// One start of the controller: where its log began.
#[derive(Clone, Debug)]
pub struct ControllerRun {
    log_offset: u64,
}

impl Lab {
    /// The lab named by `$LAB_NAME` (default [`DEFAULT_NAME`]). Fails, saying
    /// what to run, when no lab is up or its API server does not answer: a
    /// test that needs the cluster never passes without one.
    pub async fn find() -> anyhow::Result<Lab> {
        let name = std::env::var(NAME_ENV).unwrap_or_else(|_| DEFAULT_NAME.to_string());
        let state_dir = project::lab_dir(&name);
        let file = LabFile::read(&state_dir)?.ok_or_else(|| {
            anyhow!(
                "no lab named {name} is up (no {}): run `cargo xtask lab up` first",
                LabFile::path(&state_dir).display()
            )
        })?;
        let client = connect::client(Some(&file.admin_kubeconfig))
            .await
            .map_err(anyhow::Error::msg)?;
        client.apiserver_version().await.with_context(|| {
            format!(
                "the lab {name}'s API server ({}) does not answer: see `cargo xtask lab status`, \
                 or `cargo xtask lab down` and `cargo xtask lab up`",
                file.api_server_url
            )
        })?;
        Ok(Lab {
            file,
            client,
            desired: Desired::default(),
            extra_args: Vec::new(),
        })
    }

    /// An admin client (system:masters).
    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// ConfigMaps in the desired object's namespace.
    pub fn config_maps(&self) -> Api<ConfigMap> {
        Api::namespaced(self.client(), self.desired.namespace())
    }

    /// What the lab's controller keeps (it runs with the default desired state).
    pub fn desired(&self) -> &Desired {
        &self.desired
    }

    pub fn file(&self) -> &LabFile {
        &self.file
    }

    pub fn project_root(&self) -> PathBuf {
        project::root()
    }

    /// `namespace/name` of the controller's ServiceAccount.
    pub fn controller_service_account(&self) -> &str {
        &self.file.controller.service_account
    }

    fn controller_process(&self) -> anyhow::Result<&crate::lab_file::Process> {
        match self.file.provider {
            ProviderKind::Envtest => self
                .file
                .processes
                .iter()
                .find(|p| p.role == "controller")
                .ok_or_else(|| anyhow!("lab.json lists no controller process")),
            other => bail!("restarting the controller on a {other} lab is not supported"),
        }
    }

    /// Stops the controller (SIGTERM, then SIGKILL after a grace period).
    pub async fn stop_controller(&mut self) -> anyhow::Result<()> {
        let (pid, state_dir) = (self.controller_process()?.pid, self.file.state_dir.clone());
        tokio::task::spawn_blocking(move || process::stop(pid, &state_dir)).await??;
        Ok(())
    }

    /// Starts the controller with the lab's flags plus `extra` (later flags
    /// win), and waits until it reports ready.
    pub async fn start_controller(&mut self, extra: &[&str]) -> anyhow::Result<ControllerRun> {
        let spec = self.controller_process()?.clone();
        let log_offset = std::fs::metadata(&spec.log).map(|m| m.len()).unwrap_or(0);
        let mut args = spec.args.clone();
        args.extend(extra.iter().map(|s| s.to_string()));
        let mut command = std::process::Command::new(&spec.binary);
        command.args(&args);
        let mut spawned =
            process::spawn_detached("controller", command, &spec.log, &spec.pid_file)?;
        self.extra_args = extra.iter().map(|s| s.to_string()).collect();
        if let Some(entry) = self
            .file
            .processes
            .iter_mut()
            .find(|p| p.role == "controller")
        {
            entry.pid = spawned.pid;
        }
        self.file.write()?;
        let url = self.file.controller.url.clone();
        eventually("the controller to be ready", READY_WITHIN, || {
            let died = spawned.exited().map(|status| spawned.died(status));
            let url = url.clone();
            async move {
                if let Some(died) = died {
                    return Err(died);
                }
                let reply = http_probe::get_url(&url, "/readyz", HTTP_TIMEOUT).await?;
                Ok(if reply.status == 200 {
                    Check::Done(())
                } else {
                    Check::NotYet(format!("/readyz {}: {}", reply.status, reply.body))
                })
            }
        })
        .await
        .with_context(|| crate::files::tail(&spec.log, 20))?;
        Ok(ControllerRun { log_offset })
    }

    /// Stop, then start with `extra` flags.
    pub async fn restart_controller(&mut self, extra: &[&str]) -> anyhow::Result<ControllerRun> {
        self.stop_controller().await?;
        self.start_controller(extra).await
    }

    /// Restarts the controller with the lab's own flags if an experiment
    /// left it running with others (or stopped).
    pub async fn restore_controller(&mut self) -> anyhow::Result<()> {
        let running = process::is_alive(self.controller_process()?.pid);
        if !self.extra_args.is_empty() || !running {
            self.restart_controller(&[]).await?;
        }
        Ok(())
    }

    /// One scrape of the controller's `/metrics`.
    pub async fn metrics(&self) -> anyhow::Result<Scrape> {
        let reply =
            http_probe::get_url(&self.file.controller.url, "/metrics", HTTP_TIMEOUT).await?;
        if reply.status != 200 {
            bail!("/metrics answered {}: {}", reply.status, reply.body);
        }
        Ok(Scrape::parse(&reply.body))
    }

    /// The current end of the controller's log: [`Lab::controller_log`] from here.
    pub fn log_mark(&self) -> anyhow::Result<ControllerRun> {
        let path = &self.file.controller.log;
        let log_offset = std::fs::metadata(path)
            .with_context(|| format!("cannot read {}", path.display()))?
            .len();
        Ok(ControllerRun { log_offset })
    }

    /// What the controller logged since `run` started.
    pub async fn controller_log(&self, run: &ControllerRun) -> anyhow::Result<String> {
        let path = &self.file.controller.log;
        let bytes = tokio::fs::read(path)
            .await
            .with_context(|| format!("cannot read {}", path.display()))?;
        let from = (run.log_offset as usize).min(bytes.len());
        Ok(String::from_utf8_lossy(&bytes[from..]).into_owned())
    }

    /// What a person needs when an experiment fails: the controller's log
    /// tail, my-config as YAML, and the recent Events of its namespace.
    pub async fn diagnostics(&self) -> String {
        let mut out = String::new();
        out.push_str(&crate::files::tail(&self.file.controller.log, 40));
        out.push_str("\n\n");
        match self.config_maps().get_opt(self.desired.name()).await {
            Ok(Some(mut cm)) => {
                cm.managed_fields_mut().clear();
                let yaml = serde_saphyr::to_string(&cm).unwrap_or_else(|e| format!("({e})"));
                out.push_str(&format!("{} as stored:\n{yaml}\n", self.desired));
            }
            Ok(None) => out.push_str(&format!("{} does not exist\n", self.desired)),
            Err(e) => out.push_str(&format!("cannot read {}: {e}\n", self.desired)),
        }
        let events: Api<Event> = Api::namespaced(self.client(), self.desired.namespace());
        match events.list(&ListParams::default()).await {
            Ok(list) => {
                let mut items = list.items;
                items.sort_by_key(|e| e.metadata.creation_timestamp.clone());
                out.push_str("recent Events:\n");
                for e in items.iter().rev().take(10).rev() {
                    out.push_str(&format!(
                        "  {} {} {}: {}\n",
                        e.reason.as_deref().unwrap_or("-"),
                        e.regarding
                            .as_ref()
                            .and_then(|r| r.name.as_deref())
                            .unwrap_or("-"),
                        e.reporting_controller.as_deref().unwrap_or("-"),
                        e.note.as_deref().unwrap_or("")
                    ));
                }
            }
            Err(e) => out.push_str(&format!("cannot list Events: {e}\n")),
        }
        out
    }
}
