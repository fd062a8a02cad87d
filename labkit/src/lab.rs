//! The lab handle: finds the lab `cargo xtask lab up` left (its `lab.json`),
//! talks to its API server as admin, and drives the controller under test:
//! stop, start with extra flags, restart, read its metrics and its log.

use std::{collections::BTreeMap, future::Future, net::Ipv4Addr, path::Path, time::Duration};

use anyhow::{Context as _, anyhow, bail};
use controller::{connect, desired::Desired};
use k8s_openapi::api::{core::v1::ConfigMap, events::v1::Event};
use kube::{
    Api, Client, Config,
    api::{ListParams, ResourceExt},
    config::{KubeConfigOptions, Kubeconfig},
};

use crate::{deployment::DeploymentHost, http_probe, scrape::Scrape};

mod borrowed;
mod controller_log;
#[cfg(any(test, feature = "test-support"))]
mod fault_controls;
pub mod probes;
mod views;

use probes::{api_server_ready, controller_ready, etcd_ready, wait_ports_free, wait_ready};

use crate::{
    command::Cmd,
    eventually::{Check, eventually},
    lab_file::{ControllerRuns, LabFile, Process},
    process::{self, Spawned},
    project,
    record::Shared,
    tr,
};

/// The lab name `cargo xtask lab up` uses unless told otherwise.
pub const DEFAULT_NAME: &str = "my-controller-lab";
/// Environment variable naming the lab to use.
pub const NAME_ENV: &str = "LAB_NAME";
/// How long a (re)started controller gets to report ready.
const READY_WITHIN: Duration = Duration::from_secs(60);
/// Timeout of one HTTP request to the controller.
const HTTP_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Clone)]
pub struct Lab {
    file: LabFile,
    client: Client,
    /// The same admin, without kube's retry of 503: a controller that says
    /// "not ready" through the pod proxy answers 503, and kube's default
    /// client would retry that 15 times over about five minutes.
    probe: Client,
    desired: Desired,
    /// Flags added to the lab's own, by role, for the processes running now.
    extra_args: BTreeMap<String, Vec<String>>,
    /// The controller is a local process of the caller's ([`Lab::seen_as`]).
    local_controller: bool,
    /// The lab's record while `grade` or `bench` borrows it (xtask's `borrow` sets
    /// it, and takes it back when the borrow is over): the processes they start go
    /// into it ([`Lab::started`]).
    pub record: Option<Shared>,
}

/// The lab file of the lab called `name`; an error saying how to start it
/// when that lab is not up.
pub fn file_of(name: &str) -> anyhow::Result<LabFile> {
    let state_dir = project::lab_dir(name);
    // The first error a learner meets, in the language chosen ([`crate::say`]).
    let not_up = || {
        let path = LabFile::path(&state_dir);
        let path = path.display();
        let up = match name {
            DEFAULT_NAME => "cargo xtask lab up".to_string(),
            _ => format!("cargo xtask lab up --name {name}"),
        };
        anyhow!(tr!("no lab named {name} is up (no {path}): run `{up}` first", name, path, up))
    };
    LabFile::read(&state_dir)?.ok_or_else(not_up)
}

/// A client of `kubeconfig` (its current context), `adjust`ed first: the kit's one client
/// stack, the controller's (`controller::connect::build`: TCP_NODELAY on its connections).
pub async fn client_of(
    kubeconfig: Kubeconfig,
    adjust: impl FnOnce(&mut Config),
) -> anyhow::Result<Client> {
    let mut config =
        Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
    adjust(&mut config);
    Ok(connect::build(config)?)
}

pub use crate::lab_file::{API_SERVER, CONTROLLER, ETCD};

/// The kubeconfig of an envtest lab's etcd, in its folder: etcd's client URL over TLS, the
/// lab's CA and the admin's certificate. etcd answers only a certificate of the lab's CA
/// (the API server's and this one), so no other user of the machine reaches the store.
pub const ETCD_KUBECONFIG: &str = "etcd.kubeconfig";

/// A client of the etcd whose kubeconfig is in `dir` ([`ETCD_KUBECONFIG`]): its `/health`
/// and v3 JSON gateway through kube's client stack, which speaks any HTTP over that TLS.
pub async fn etcd_client(dir: &Path) -> anyhow::Result<Client> {
    let path = dir.join(ETCD_KUBECONFIG);
    let kubeconfig = Kubeconfig::read_from(&path)
        .with_context(|| tr!("cannot read kubeconfig {path}", path = path.display()))?;
    client_of(kubeconfig, |config| {
        config.read_timeout = Some(HTTP_TIMEOUT);
        config.default_retry = false;
    })
    .await
}

/// One start of the controller (or a mark in its log): where to read its log from.
#[derive(Clone, Debug)]
pub struct ControllerRun {
    /// envtest: a byte offset into the log file.
    log_offset: u64,
    /// kind: the log of the pod current when it was taken, from this time on
    /// (`None`: a new pod, its whole log). The API's resolution is a second.
    since: Option<k8s_openapi::jiff::Timestamp>,
}

impl Lab {
    /// The lab named by `$LAB_NAME` (default [`DEFAULT_NAME`]). Fails, saying
    /// what to run, when no lab is up or its API server does not answer: a
    /// test that needs the cluster never passes without one.
    pub async fn find() -> anyhow::Result<Lab> {
        let name = std::env::var(NAME_ENV).unwrap_or_else(|_| DEFAULT_NAME.to_string());
        Self::find_named(&name).await
    }

    /// The lab called `name`, as [`Lab::find`] does: for callers that take
    /// the name as a flag (`cargo xtask exp --name …`) rather than from the
    /// environment.
    pub async fn find_named(name: &str) -> anyhow::Result<Lab> {
        let file = file_of(name)?;
        let admin = &file.admin_kubeconfig;
        let client = connect::client(Some(admin)).await.map_err(anyhow::Error::msg)?;
        // The same admin without kube's retries (see [`Lab`]).
        let probe = client_of(Kubeconfig::read_from(admin)?, |c| c.default_retry = false).await?;
        let answered = client.apiserver_version().await;
        let url = &file.api_server_url;
        answered.with_context(|| {
            tr!(
                "the lab {name}'s API server ({url}) does not answer: see `cargo xtask lab status`, \
                 or `cargo xtask lab down` and `cargo xtask lab up`",
                name,
                url
            )
        })?;
        let desired = file.target.desired()?;
        Ok(Lab {
            file,
            client,
            probe,
            desired,
            extra_args: BTreeMap::new(),
            local_controller: false,
            record: None,
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

    /// The lab.json entry of the process playing `role` (envtest labs only).
    fn process(&self, role: &str) -> anyhow::Result<&Process> {
        if !self.file.offers.local_control_plane {
            bail!(tr!(
                "stopping and starting {role} on a {provider} lab is not supported",
                role,
                provider = self.file.provider
            ));
        }
        self.file
            .processes
            .iter()
            .find(|p| p.role == role)
            .ok_or_else(|| anyhow!(tr!("lab.json lists no {role} process", role)))
    }

    /// The pid of `role` as lab.json records it (updated by every start).
    pub fn pid(&self, role: &str) -> anyhow::Result<u32> {
        Ok(self.process(role)?.pid)
    }

    /// Whether `role`'s process is running (alive and not a zombie).
    pub fn is_running(&self, role: &str) -> anyhow::Result<bool> {
        Ok(process::is_alive(self.pid(role)?))
    }

    /// A client of the lab's etcd ([`etcd_client`]).
    pub async fn etcd(&self) -> anyhow::Result<Client> {
        etcd_client(&self.file.state_dir).await
    }

    /// Stops `role`'s process group: SIGTERM, then SIGKILL after a grace
    /// period — except kube-apiserver, which is killed at once. With a watch
    /// open (the controller's) its graceful shutdown waits out its 60 s
    /// request timeout: the lab does not set
    /// `--shutdown-watch-termination-grace-period`. For the controller a
    /// crashed API server is the harsher fault anyway (no goodbye on the watch).
    pub async fn stop_process(&mut self, role: &str) -> anyhow::Result<()> {
        process::stop(self.pid(role)?, &self.file.state_dir, role != API_SERVER).await?;
        Ok(())
    }

    /// Starts `role` as lab.json describes it — same binary, arguments, log
    /// and pid file — with `extra` flags appended (later flags win), and
    /// records the new pid in lab.json so `lab down` and later tests find it.
    /// Does not wait for it to be ready.
    pub async fn start_process(&mut self, role: &str, extra: &[&str]) -> anyhow::Result<Spawned> {
        let spec = self.process(role)?.clone();
        wait_ports_free(&spec.ports).await?;
        let cmd = Cmd::new(spec.binary.display().to_string()).args(&spec.args).args(extra);
        let spawned = process::spawn_detached(role, &cmd, &spec.log, &spec.pid_file)?;
        self.extra_args.insert(role.to_string(), extra.iter().map(|s| s.to_string()).collect());
        if let Some(entry) = self.file.processes.iter_mut().find(|p| p.role == role) {
            entry.pid = spawned.pid;
        }
        self.file.write()?;
        Ok(spawned)
    }

    /// Starts `role` (see [`Lab::start_process`]) and waits until it is ready:
    /// etcd's `/health`, the API server's `/readyz` (asked as admin), the
    /// controller's `/readyz`. Fails at once, with its log, if it exits.
    async fn start_ready(&mut self, role: &str, extra: &[&str]) -> anyhow::Result<()> {
        let mut spawned = self.start_process(role, extra).await?;
        let what = tr!("{role} to be ready", role);
        match role {
            ETCD => {
                let etcd = self.etcd().await?;
                wait_ready(&what, &mut spawned, false, || etcd_ready(etcd.clone())).await
            }
            API_SERVER => {
                let client = self.client();
                wait_ready(&what, &mut spawned, false, || api_server_ready(client.clone())).await
            }
            _ => {
                let url = self.file.controller.url.clone();
                wait_ready(&what, &mut spawned, false, || controller_ready(url.clone())).await
            }
        }
    }

    /// Starts kube-apiserver (stopped before) and waits for its `/readyz`.
    pub async fn start_api_server(&mut self, extra: &[&str]) -> anyhow::Result<()> {
        self.start_ready(API_SERVER, extra).await
    }

    /// The controller as a Deployment (kind, an existing cluster), in its namespace.
    pub fn deployment(&self) -> Option<DeploymentHost> {
        if self.local_controller {
            return None;
        }
        match self.file.controller_runs() {
            ControllerRuns::Deployment(namespace) => {
                let mut host = DeploymentHost::new(self.client(), namespace);
                host.probe = self.probe.clone();
                Some(host)
            }
            ControllerRuns::Process(_) => None,
        }
    }

    /// Stops the controller: SIGTERM, then SIGKILL after a grace period
    /// (kind: scaled to zero).
    pub async fn stop_controller(&mut self) -> anyhow::Result<()> {
        match self.deployment() {
            Some(deployment) => {
                self.extra_args.insert(CONTROLLER.into(), Vec::new());
                deployment.stop().await
            }
            None => self.stop_process(CONTROLLER).await,
        }
    }

    /// Starts the controller with the lab's flags plus `extra` (later flags
    /// win), and waits until it reports ready (kind: a new pod with `extra`
    /// as its arguments, the rollout awaited).
    pub async fn start_controller(&mut self, extra: &[&str]) -> anyhow::Result<ControllerRun> {
        if let Some(deployment) = self.deployment() {
            deployment.start(extra).await?;
            self.extra_args
                .insert(CONTROLLER.into(), extra.iter().map(|s| s.to_string()).collect());
            return Ok(ControllerRun { log_offset: 0, since: None });
        }
        let run = self.log_end();
        self.start_ready(CONTROLLER, extra).await?;
        Ok(run)
    }

    /// Stop, then start with `extra` flags (kind: `rollout restart`, which
    /// the strategy `Recreate` turns into exactly that).
    pub async fn restart_controller(&mut self, extra: &[&str]) -> anyhow::Result<ControllerRun> {
        if self.deployment().is_none() {
            self.stop_controller().await?;
        }
        self.start_controller(extra).await
    }

    /// Whether `role` must be restarted to be as the lab started it: not
    /// running, or running with flags of a test.
    fn needs_restore(&self, role: &str) -> anyhow::Result<bool> {
        let extra = self.extra_args.get(role).is_some_and(|e| !e.is_empty());
        Ok(extra || !self.is_running(role)?)
    }

    /// Leaves the lab as the tests expect to find it: etcd, kube-apiserver
    /// and the controller running with the lab's own flags, and ready.
    /// Restarts only what needs it, in start order.
    pub async fn restore(&mut self) -> anyhow::Result<()> {
        if self.deployment().is_some() {
            // A kind cluster's control plane is not the harness's to restart.
            return self.restore_controller().await;
        }
        for role in [ETCD, API_SERVER] {
            if self.needs_restore(role)? {
                self.stop_process(role).await?;
                self.start_ready(role, &[]).await?;
            }
        }
        self.restore_controller().await
    }

    /// Restarts the controller with the lab's own flags if an experiment
    /// left it running with others, stopped, or not ready.
    pub async fn restore_controller(&mut self) -> anyhow::Result<()> {
        if let Some(deployment) = self.deployment() {
            let flags = self.extra_args.get(CONTROLLER).is_some_and(|e| !e.is_empty());
            // Every pod is checked before it is replaced and after each test:
            // a restart anywhere in the suite fails it (the probes, the limits).
            deployment.ensure_no_restarts().await?;
            if flags || deployment.ready_pod().await?.is_none() {
                self.restart_controller(&[]).await?;
            }
            return Ok(());
        }
        let ready = controller_ready(self.file.controller.url.clone())
            .await
            .is_ok_and(|c| matches!(c, Check::Done(())));
        if self.needs_restore(CONTROLLER)? || !ready {
            self.restart_controller(&[]).await?;
        }
        Ok(())
    }

    /// One scrape of the controller's `/metrics`.
    pub async fn metrics(&self) -> anyhow::Result<Scrape> {
        Ok(Scrape::parse(&self.metrics_text().await?))
    }

    /// The controller's `/metrics`, as served.
    pub async fn metrics_text(&self) -> anyhow::Result<String> {
        if let Some(deployment) = self.deployment() {
            // Through the API server's pod proxy: no port-forward needed.
            return deployment.get("/metrics").await;
        }
        let reply =
            http_probe::get_url(&self.file.controller.url, "/metrics", HTTP_TIMEOUT).await?;
        if reply.status != 200 {
            bail!(tr!(
                "/metrics answered {status}: {body}",
                status = reply.status,
                body = reply.body
            ));
        }
        Ok(reply.body)
    }
}
