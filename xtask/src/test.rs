//! `cargo xtask test`, the README's test command: the unit tests; then fresh
//! labs, each made as a person makes one, with the e2e suite and the lab's
//! own tests (`xtask/tests/<provider>_lab.rs`) and the grader's (`xtask/tests/grade.rs`,
//! not on the container lab: the grade stops its controller anyway) against it, and taken down
//! whatever happened: envtest with the controller as a process, envtest with
//! the controller in its image, and kind.

use std::process::ExitCode;

use anyhow::{Context as _, Result, bail, ensure};
use e2e::lab::NAME_ENV;
use labkit::command::Cmd;

use crate::{
    cargo,
    lab::{self, ControllerChoice, UpOptions, provider::ProviderChoice},
};

/// Its own lab, so a person's `my-controller-lab` is left alone.
pub const LAB_NAME: &str = "my-controller-test";
/// Set to 1 (CI does, once dockerd runs) to make the container and kind runs mandatory.
pub const DOCKER_REQUIRED_ENV: &str = "LAB_DOCKER_REQUIRED";
/// The kind lab's node image (`--node-image`): unset for the pinned one,
/// `built` where no registry can be reached (CI sets it).
pub const NODE_IMAGE_ENV: &str = "LAB_NODE_IMAGE";

/// When `cargo xtask test` started: each section says how far into the run it
/// begins, as `.ci/run`'s do, so a run's log shows where its minutes went.
static STARTED: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();

/// `== title (N s)`: a section of the run and the seconds since it started.
fn section(title: impl std::fmt::Display) {
    let since = STARTED.get_or_init(std::time::Instant::now).elapsed();
    eprintln!("== {title} ({:.0} s)", since.as_secs_f64());
}

pub async fn run() -> Result<ExitCode> {
    section("unit tests");
    // The lab tests (e2e/tests, and xtask/tests with `test = false`) need the labs below.
    cargo::cargo(["test", "--workspace", "--exclude", "e2e"]).run()?;
    cargo::cargo(["test", "-p", "e2e", "--lib"]).run()?;

    // A Ctrl-C reaches the test processes (same terminal); xtask itself stays
    // to take the lab down.
    tokio::spawn(async {
        if tokio::signal::ctrl_c().await.is_ok() {
            eprintln!("interrupted: the lab goes down once the running step ends");
        }
    });
    let node_image = std::env::var(NODE_IMAGE_ENV).ok().filter(|v| !v.is_empty());
    // Built while the envtest labs run: their tests mostly wait.
    let node_image_build = match node_image.as_deref() == Some("built") && docker_usable().is_ok() {
        true => Some(NodeImageBuild::start()?),
        false => None,
    };
    let envtest = |host| UpOptions::envtest(host);
    let code = on_fresh_lab(&envtest(ControllerChoice::Process), &["envtest_lab", "grade"]).await?;
    if code != ExitCode::SUCCESS {
        return Ok(code);
    }
    let required = std::env::var(DOCKER_REQUIRED_ENV).is_ok_and(|v| v == "1");
    let missing = match docker_usable() {
        Err(reason) => Some(format!("Docker is not usable: {reason}")),
        Ok(()) if labkit::tools::on_path("kind").is_none() => Some(
            "kind is not on PATH (kind v0.33: `nix develop`, or build xtask/node-image/kind)"
                .to_string(),
        ),
        Ok(()) => None,
    };
    if let Some(why) = missing {
        if required {
            bail!("{DOCKER_REQUIRED_ENV}=1 but {why}");
        }
        section(format!(
            "NOT RUN: the suite with the controller in its container, and on kind ({why})"
        ));
        return Ok(ExitCode::SUCCESS);
    }
    let code = on_fresh_lab(&envtest(ControllerChoice::Container), &[]).await?;
    if code != ExitCode::SUCCESS {
        return Ok(code);
    }
    if let Some(build) = node_image_build {
        build.wait().await?;
    }
    let kind = UpOptions {
        provider: ProviderChoice::Kind,
        node_image,
        ..envtest(ControllerChoice::Process)
    };
    let kubeconfig_before = user_kubeconfig();
    let code = on_fresh_lab(&kind, &["kind_lab", "grade"]).await?;
    ensure!(
        user_kubeconfig() == kubeconfig_before,
        "the kind lab changed {}",
        user_kubeconfig_path().display()
    );
    Ok(code)
}

/// A fresh lab made with `options`, the e2e suite against it, then the lab
/// tests `tests` (`cargo test -p xtask --test NAME`: the lab's own, and the
/// grader's), the lab down whatever happened.
async fn on_fresh_lab(options: &UpOptions, tests: &[&str]) -> Result<ExitCode> {
    let what = match (options.provider, options.controller) {
        (ProviderChoice::Kind, _) => "a kind lab".to_string(),
        (_, host) => format!("an envtest lab, controller as a {host:?}"),
    };
    section(format!("{what} ({LAB_NAME})"));
    let mut down = LabDown { kind: options.provider == ProviderChoice::Kind, done: false };
    lab::down::run(LAB_NAME, false).await?;
    let started = std::time::Instant::now();
    lab::up::run(LAB_NAME, options).await?;
    eprintln!("lab up in {:.0} s", started.elapsed().as_secs_f64());
    section(format!("e2e suite on {what}"));
    let mut code = crate::e2e::run(LAB_NAME, None)?;
    for test in tests {
        if code != ExitCode::SUCCESS {
            break;
        }
        section(format!("xtask/tests/{test}.rs on {what}"));
        let run = cargo::cargo(["test", "-p", "xtask", "--test", test, "--", "--test-threads=1"])
            .env(NAME_ENV, LAB_NAME)
            .run();
        if run.is_err() {
            code = ExitCode::FAILURE;
        }
    }
    down.now().await?;
    Ok(code)
}

fn user_kubeconfig_path() -> std::path::PathBuf {
    std::env::var_os("KUBECONFIG").map(std::path::PathBuf::from).unwrap_or_else(|| {
        std::path::PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".kube/config")
    })
}

/// The user's own kubeconfig, which a lab must leave alone.
fn user_kubeconfig() -> Option<Vec<u8>> {
    std::fs::read(user_kubeconfig_path()).ok()
}

/// Whether a Docker daemon answers.
fn docker_usable() -> Result<(), String> {
    if labkit::tools::on_path("docker").is_none() {
        return Err("no docker on PATH".into());
    }
    Cmd::argv(["docker", "info", "--format", "{{.ServerVersion}}"])
        .read()
        .map(drop)
        .map_err(|_| "the Docker daemon does not answer (`docker info`)".to_string())
}

/// `cargo xtask lab node-image` in the background, at the lowest CPU
/// priority: on a cold machine it is minutes of compiling Kubernetes, and the
/// envtest labs' tests, which run meanwhile, mostly wait (their processes
/// come first). Stopped if the run ends before the kind lab needs it.
struct NodeImageBuild {
    child: Option<std::process::Child>,
    /// Its process group (its own: cargo, xtask and the builds they start).
    group: i32,
    /// Reaped: nothing is left to stop.
    done: bool,
    log: std::path::PathBuf,
}

/// The node image build's deadline, counted from when the kind lab needs it.
const NODE_IMAGE_WITHIN: std::time::Duration = std::time::Duration::from_secs(30 * 60);

impl NodeImageBuild {
    fn start() -> Result<NodeImageBuild> {
        let log = labkit::project::target_dir().join("node-image-build.log");
        let _ = std::fs::remove_file(&log);
        section("the kind node image, built in the background while the envtest labs run");
        let cmd = Cmd::argv(["nice", "-n", "19", "cargo", "xtask", "lab", "node-image"]);
        let child = cmd.spawn_to_log(&log)?;
        Ok(NodeImageBuild { group: child.id() as i32, child: Some(child), done: false, log })
    }

    /// Waits for the build, its last line every 30 s; its log's tail when it fails.
    async fn wait(mut self) -> Result<()> {
        const REPORT_EVERY: std::time::Duration = std::time::Duration::from_secs(30);
        section(format!("waiting for the kind node image (log: {})", self.log.display()));
        let started = tokio::time::Instant::now();
        let mut child = self.child.take().expect("started");
        // std's Child has no async wait: a blocking thread waits for it.
        let mut exited = tokio::task::spawn_blocking(move || child.wait());
        let mut report = tokio::time::interval_at(started + REPORT_EVERY, REPORT_EVERY);
        let deadline = tokio::time::sleep_until(started + NODE_IMAGE_WITHIN);
        tokio::pin!(deadline);
        loop {
            tokio::select! {
                status = &mut exited => {
                    self.done = true;
                    let status = status.context("waiting for the node image build")??;
                    ensure!(
                        status.success(),
                        "building the kind node image failed ({status}); its log ends:\n{}",
                        labkit::files::tail(&self.log, 20)
                    );
                    eprintln!(
                        "kind node image ready ({:.0} s of waiting)",
                        started.elapsed().as_secs_f64()
                    );
                    return Ok(());
                }
                _ = report.tick() => {
                    let log = std::fs::read_to_string(&self.log).unwrap_or_default();
                    eprintln!("  still building: {}", log.lines().last().unwrap_or_default());
                }
                // Dropping `self` stops the build; the blocking thread reaps it.
                () = &mut deadline => bail!(
                    "the kind node image was not built within {} min; its log ends:\n{}",
                    NODE_IMAGE_WITHIN.as_secs() / 60,
                    labkit::files::tail(&self.log, 20)
                ),
            }
        }
    }
}

impl Drop for NodeImageBuild {
    fn drop(&mut self) {
        if self.done || matches!(self.child.as_mut().map(|c| c.try_wait()), Some(Ok(Some(_)))) {
            return;
        }
        eprintln!("stopping the node image build (pid group {})", self.group);
        unsafe { libc::killpg(self.group, libc::SIGTERM) };
        if let Some(mut child) = self.child.take() {
            let _ = child.wait();
        }
    }
}

/// Takes the test lab down: [`LabDown::now`], or when dropped (an error or a
/// panic). A kind lab is taken down without its lab.json, as after a lost
/// state directory: the cluster must go all the same.
struct LabDown {
    kind: bool,
    done: bool,
}

impl LabDown {
    async fn now(&mut self) -> Result<()> {
        self.done = true;
        section(format!("lab down{}", if self.kind { " without lab.json" } else { "" }));
        if self.kind {
            std::fs::remove_file(labkit::lab_file::LabFile::path(&labkit::project::lab_dir(
                LAB_NAME,
            )))?;
        }
        lab::down::run(LAB_NAME, false).await?;
        if self.kind {
            let clusters = Cmd::argv(["kind", "get", "clusters"]).read()?;
            ensure!(
                !clusters.lines().any(|c| c == LAB_NAME)
                    && !labkit::project::lab_dir(LAB_NAME).exists(),
                "lab down without lab.json left the cluster or its state: {clusters}"
            );
        }
        Ok(())
    }
}

impl Drop for LabDown {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        section("lab down");
        // Drop cannot await: block this worker thread on the runtime instead.
        let down = tokio::task::block_in_place(|| {
            tokio::runtime::Handle::current().block_on(lab::down::run(LAB_NAME, false))
        });
        if let Err(e) = down {
            eprintln!("error: could not take the lab down: {e:#}");
        }
    }
}
