//! A controller under test: ours (the binary cargo just built, with the
//! lab's controller arguments) or a peer (the course's Go controller built
//! from `bench/peers/course-verbatim/` and `bench/peers/course-go.patch`, or any `--peer` command, run with `sh -c`).
//! Each runs as a process group the bench owns: started, its `/proc` usage
//! read, stopped — and killed if the bench ends early.

use std::{
    path::{Path, PathBuf},
    process::Child,
    time::Duration,
};

use crate::usage::{self, Usage};

use labkit::{converge::delete_and_wait_gone, http_probe, lab::Lab};

use anyhow::{Context, Result, bail};
use labkit::{
    command::Cmd,
    eventually::{Check, eventually},
    files,
};
use tokio::time::Instant;

/// Names a peer's ConfigMap (my-controller reads it too): the bench's sides
/// may share a namespace ([`crate::places`]).
pub const NAME_ENV: &str = "MY_CONTROLLER_NAME";
/// How long a controller gets from its start to my-config created.
const READY_WITHIN: Duration = Duration::from_secs(60);

/// A controller the bench measures.
#[derive(Clone, Debug)]
pub enum Spec {
    /// Ours: this binary with the lab's controller arguments.
    Ours { binary: PathBuf },
    /// The floor: `bench-floor` (bench/src/bin), built next to ours, with the
    /// lab's controller kubeconfig.
    Floor { binary: PathBuf },
    /// A peer: `sh -c <command>` with `KUBECONFIG` set to the lab's
    /// controller kubeconfig (its ServiceAccount, not admin), its context's
    /// namespace the one it is to keep my-config in, and [`NAME_ENV`] that
    /// ConfigMap's name. `label` names it in
    /// tables; without one, its program does. `pinned`: it keeps my-config in
    /// the lab's namespace whatever KUBECONFIG says (its own RBAC is there).
    Peer { label: Option<String>, command: String, pinned: bool },
}

impl Spec {
    /// Whether it is my-controller, the one that serves our `/metrics` (reconciles, writes).
    pub fn is_ours(&self) -> bool {
        matches!(self, Spec::Ours { .. })
    }

    /// Whether it keeps my-config wherever the bench says (not only in the
    /// lab's namespace).
    pub fn takes_a_namespace(&self) -> bool {
        !matches!(self, Spec::Peer { pinned: true, .. })
    }

    /// The command line it runs with (ours: the binary; flags are the lab's).
    pub fn command_line(&self) -> String {
        match self {
            Spec::Ours { binary } | Spec::Floor { binary } => binary.display().to_string(),
            Spec::Peer { command, .. } => command.clone(),
        }
    }

    /// A short name for tables and the chart.
    pub fn label(&self) -> String {
        match self {
            Spec::Ours { binary } => {
                let profile = binary
                    .parent()
                    .and_then(Path::file_name)
                    .map(|p| p.to_string_lossy().into_owned())
                    .unwrap_or_default();
                format!("my-controller ({profile})")
            }
            Spec::Floor { .. } => "floor".into(),
            Spec::Peer { label: Some(label), .. } => label.clone(),
            Spec::Peer { label: None, command, .. } => {
                // The program: the first word that is not a VAR=value.
                let first = command
                    .split_whitespace()
                    .find(|word| !word.contains('='))
                    .unwrap_or("command");
                let name = Path::new(first)
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_else(|| first.to_string());
                format!("{name} (--peer)")
            }
        }
    }
}

/// A running controller under test.
pub struct Subject {
    child: Child,
    pid: u32,
    /// Start → my-config created by it.
    pub startup: Duration,
}

impl Subject {
    /// Deletes my-config, starts the controller with `extra` flags (ours
    /// only) and waits until it has created my-config again: the one sign of
    /// readiness every implementation gives (ours also answers `/readyz`).
    /// `lab` says which my-config ([`Lab::seen_as`]). Its output is
    /// appended to `log`.
    pub async fn start(lab: &Lab, spec: &Spec, extra: &[&str], log: &Path) -> Result<Subject> {
        delete_and_wait_gone(&lab.config_maps(), lab.desired().name()).await?;
        let cmd = command(lab, spec, extra)?;
        let started = Instant::now();
        // Its own group: its usage is the group's, and stopping it stops
        // whatever `sh -c` started.
        let child = cmd.spawn_to_log(log).context("cannot start the controller")?;
        let pid = child.id();
        lab.started(pid).await;
        let mut subject = Subject { child, pid, startup: Duration::ZERO };
        subject.wait_ready(lab, spec, log).await?;
        subject.startup = started.elapsed();
        Ok(subject)
    }

    async fn wait_ready(&mut self, lab: &Lab, spec: &Spec, log: &Path) -> Result<()> {
        let url = lab.file().controller.url.clone();
        let api = lab.config_maps();
        let desired = lab.desired().clone();
        let metrics = spec.is_ours();
        let child = &mut self.child;
        let waited = eventually("the controller to create my-config", READY_WITHIN, || {
            let exited = child.try_wait().ok().flatten();
            let (url, api, desired) = (url.clone(), api.clone(), desired.clone());
            async move {
                if let Some(status) = exited {
                    return Ok(Check::Stop(anyhow::anyhow!("it exited: {status}")));
                }
                if metrics {
                    let ready =
                        http_probe::get_url(&url, "/readyz", Duration::from_secs(2)).await?;
                    if ready.status != 200 {
                        return Ok(Check::NotYet(format!("/readyz {}", ready.status)));
                    }
                }
                Ok(match api.get_opt(desired.name()).await? {
                    Some(cm) if desired.is_satisfied_by(&cm) => Check::Done(()),
                    Some(cm) => Check::NotYet(format!("data {:?}", cm.data)),
                    None => Check::NotYet("my-config absent".into()),
                })
            }
        })
        .await;
        waited.map_err(|e| anyhow::anyhow!("{e:#}\n{}", files::tail(log, 30)))
    }

    /// Its current memory and CPU use (the whole process group).
    pub fn usage(&self) -> Result<Usage> {
        usage::of_group(self.pid)
    }

    /// SIGTERM to the group, then SIGKILL after a grace period; waits
    /// (polling with a deadline) until the leader has exited.
    pub async fn stop(self) -> Result<()> {
        labkit::process::stop_group(self.pid, true).await.map(drop)
    }
}

impl Drop for Subject {
    /// A bench that fails half-way leaves no controller behind.
    fn drop(&mut self) {
        if let (Ok(None), Ok(pgid)) = (self.child.try_wait(), libc::pid_t::try_from(self.pid)) {
            // SAFETY: kill takes plain integers; a group that is gone is ESRCH, harmless.
            unsafe { libc::kill(-pgid, libc::SIGKILL) };
            let _ = self.child.wait();
        }
    }
}

/// The command line of the controller under test.
fn command(lab: &Lab, spec: &Spec, extra: &[&str]) -> Result<Cmd> {
    let controller = &lab.file().controller;
    let (namespace, name) = (lab.desired().namespace(), lab.desired().name());
    Ok(match spec {
        Spec::Ours { binary } | Spec::Floor { binary } => {
            let cmd = Cmd::new(binary.display().to_string())
                .arg("--kubeconfig")
                .path(&controller.kubeconfig)
                .args(["--namespace", namespace, "--name", name]);
            if !spec.is_ours() {
                return Ok(cmd);
            }
            let listen = controller
                .url
                .strip_prefix("http://")
                .with_context(|| format!("controller URL {} is not http://", controller.url))?;
            // The correction rounds are a second writer on purpose: a
            // paced controller would wait seconds from the fourth round on.
            cmd.args(["--listen", listen]).arg("--no-pacing").args(extra)
        }
        Spec::Peer { command: line, .. } => {
            if !extra.is_empty() {
                bail!("a peer takes no flags from the bench");
            }
            let kubeconfig = controller_kubeconfig(lab)?;
            Cmd::argv(["sh", "-c", line])
                .env("KUBECONFIG", kubeconfig.display().to_string())
                .env(NAME_ENV, name)
        }
    })
}

/// The lab's controller kubeconfig, its context's namespace the one `lab` keeps my-config
/// in: for programs that take their namespace from the kubeconfig, as kubectl does.
/// Outside the lab's namespace a copy is written in the borrow's folder
/// ([`Lab::borrowed_dir`]).
fn controller_kubeconfig(lab: &Lab) -> Result<PathBuf> {
    let (path, namespace) = (&lab.file().controller.kubeconfig, lab.desired().namespace());
    if namespace == lab.file().target.namespace {
        return Ok(path.clone());
    }
    let mut config = kube::config::Kubeconfig::read_from(path)?;
    for named in &mut config.contexts {
        if let Some(context) = named.context.as_mut() {
            context.namespace = Some(namespace.to_string());
        }
    }
    let dir = lab.borrowed_dir();
    files::create_dir(&dir)?;
    let copy = dir.join(format!("controller-{namespace}.kubeconfig"));
    files::write_private(&copy, &serde_saphyr::to_string(&config)?)?;
    Ok(copy)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_name_the_program_and_the_build() {
        let ours = Spec::Ours { binary: PathBuf::from("/w/target/release/my-controller") };
        assert_eq!(ours.label(), "my-controller (release)");
        assert!(ours.is_ours());
        let theirs = Spec::Peer {
            label: None,
            command: "RUST_LOG=info /opt/bin/their-controller --fast".into(),
            pinned: false,
        };
        assert_eq!(theirs.label(), "their-controller (--peer)");
        assert!(!theirs.is_ours());
        assert!(theirs.takes_a_namespace());
        let go = Spec::Peer {
            label: Some("course-go".into()),
            command: "/x/course-go".into(),
            pinned: true,
        };
        assert_eq!(go.label(), "course-go");
        assert!(!go.takes_a_namespace());
    }
}
