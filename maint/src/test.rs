//! `cargo maint test`, the README's test command: the unit tests; then fresh
//! labs, each made as a person makes one, with the e2e suite and the lab's
//! own tests (`xtask/tests/<provider>_lab.rs`) against it, and taken down whatever
//! happened. The parts run side by side, each with its own lab names: envtest, beside it
//! the grader's tests on two envtest labs of their own, and the Docker labs (kind, beside
//! it a room on a cluster the kit did not make: [`existing`]) — the suites mostly wait, so
//! on two cores the parts take little more than the longest of them; on a cold machine the
//! kind node image is built first.

use std::{
    process::ExitCode,
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use anyhow::{Context as _, Result, bail, ensure};
use labkit::command::Cmd;
use labkit::lab::NAME_ENV;

use xtask::{
    cargo,
    lab::{self, UpOptions},
};

mod alongside;
pub(crate) mod existing;

use alongside::Alongside;

/// Its own lab, so a person's `my-controller-lab` is left alone.
pub const LAB_NAME: &str = "my-controller-test";
/// The Docker labs' name: they run while [`LAB_NAME`] does.
pub const DOCKER_LAB_NAME: &str = "my-controller-test-docker";
/// Set to 1 (CI does, once dockerd runs) to make the kind and room runs mandatory.
pub const DOCKER_REQUIRED_ENV: &str = "LAB_DOCKER_REQUIRED";
/// The kind lab's node image (`--node-image`): unset for the pinned one,
/// `built` where no registry can be reached (CI sets it).
pub const NODE_IMAGE_ENV: &str = "LAB_NODE_IMAGE";
/// When the whole run started (seconds since the epoch), handed to the part run
/// alongside so that its sections count from the same moment.
const STARTED_ENV: &str = "LAB_TEST_STARTED";

/// One part of the labs (`--only`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Part {
    /// An envtest lab.
    Envtest,
    /// A kind lab, then a room on a three-node cluster the kit did not make.
    Docker,
    /// Only the room on a three-node cluster the kit did not make (the kind node image must
    /// be in Docker, or `LAB_NODE_IMAGE` name one).
    Existing,
    /// Only the grader's tests, on two envtest labs of their own.
    Grade,
}

impl Part {
    /// How the log names it when it runs alongside another.
    fn what(self) -> &'static str {
        match self {
            Part::Envtest => "the envtest lab",
            Part::Docker => "the Docker labs",
            Part::Existing => "the room's labs",
            Part::Grade => "the grader's tests",
        }
    }
}

/// When `cargo maint test` started: each section says how far into the run it
/// begins, as `.ci/run`'s do, so a run's log shows where its minutes went.
static STARTED: std::sync::OnceLock<SystemTime> = std::sync::OnceLock::new();

fn started() -> SystemTime {
    *STARTED.get_or_init(|| {
        std::env::var(STARTED_ENV)
            .ok()
            .and_then(|s| s.parse::<f64>().ok())
            .map(|secs| UNIX_EPOCH + Duration::from_secs_f64(secs))
            .unwrap_or_else(SystemTime::now)
    })
}

/// `== title (N s)`: a section of the run and the seconds since it started.
pub(crate) fn section(title: impl std::fmt::Display) {
    let since = started().elapsed().unwrap_or_default();
    labkit::progress!("== {title} ({:.0} s)", since.as_secs_f64());
}

pub async fn run(only: Option<Part>) -> Result<ExitCode> {
    started();
    // A Ctrl-C reaches the test processes (same terminal) and is passed on to the parts
    // run alongside (process groups of their own); xtask itself stays to take the labs down.
    tokio::spawn(async {
        if tokio::signal::ctrl_c().await.is_ok() {
            eprintln!("interrupted: the labs go down once the running steps end");
            alongside::interrupt_all();
        }
    });
    match only {
        Some(Part::Envtest) => return envtest_part().await,
        Some(Part::Docker) => return docker_part().await,
        Some(Part::Existing) => {
            let node_image = std::env::var(NODE_IMAGE_ENV).ok().filter(|v| !v.is_empty());
            return existing::part(node_image.as_deref()).await;
        }
        Some(Part::Grade) => return grade_part().await,
        None => {}
    }
    // A cold machine: the kind node image is most of the run's CPU. Built first (the
    // unit tests and the controller's release build beside it); the Docker part starts
    // once the release build is done (its kind lab waits for the image on the build's
    // lock), the envtest part once the image is built.
    // Built beside the envtest part instead, the Docker labs had to wait for it and came
    // after that part: 59 min cold, their half with idle CPU.
    let building = match docker_missing().is_none() && node_image_to_build() {
        true => Some(node_image_build("node-image-build.log")?),
        false => None,
    };
    section("unit tests");
    // The lab tests (e2e/tests, and xtask/tests with `test = false`) need the labs below.
    cargo::cargo(["test", "--workspace", "--exclude", "e2e"]).run()?;
    cargo::cargo(["test", "-p", "e2e", "--lib"]).run()?;

    if let Some(why) = docker_missing() {
        if std::env::var(DOCKER_REQUIRED_ENV).is_ok_and(|v| v == "1") {
            bail!("{DOCKER_REQUIRED_ENV}=1 but {why}");
        }
        section(format!("NOT RUN: the suite on kind, and the room ({why})"));
        return envtest_part().await;
    }
    // Compiled now rather than beside the suites' timing-bound checks: the kind lab's image
    // and the bench's release binaries share these dependencies. And before the Docker labs:
    // the kind lab and the room's three attendees each build the controller's image from it at
    // once, and lab up does not yet keep two such builds apart (one image tag and one build
    // folder on the machine): from one binary they make one image.
    section("the controller's static release build, before the Docker labs");
    let release = xtask::image::StaticTarget::detect()?.controller_build();
    release.run_long("building the static controller")?;
    let docker = match building {
        Some(build) => {
            let docker = Alongside::start(Part::Docker)?;
            // On an error the Docker part is interrupted (Alongside's drop).
            node_image_built(build).await?;
            docker
        }
        None => Alongside::start(Part::Docker)?,
    };
    let envtest = envtest_part().await;
    let docker = docker.wait().await?;
    let envtest = envtest?;
    Ok(if envtest == ExitCode::SUCCESS { docker } else { envtest })
}

/// The envtest lab: the suite, the lab's own tests, the by-hand commands' (`lab env`, the
/// narrations'), the guest's (its API server standing in for a cluster the kit did not
/// make); beside it, from the start, the grader's on two labs of their own ([`grade_part`]).
async fn envtest_part() -> Result<ExitCode> {
    let grade = Alongside::start(Part::Grade)?;
    let code =
        on_fresh_lab(LAB_NAME, &UpOptions::envtest(), &["envtest_lab", "by_hand", "guest"]).await?;
    let graded = grade.wait().await?;
    Ok(if code == ExitCode::SUCCESS { graded } else { code })
}

/// The labs that need Docker: kind (its node image built first where `LAB_NODE_IMAGE=built`),
/// then the room.
async fn docker_part() -> Result<ExitCode> {
    if let Some(why) = docker_missing() {
        bail!("the Docker labs cannot run: {why}");
    }
    let node_image = std::env::var(NODE_IMAGE_ENV).ok().filter(|v| !v.is_empty());
    // Built, or found built; when `cargo maint test` is building it already, this one
    // waits on the build's lock.
    if node_image.as_deref() == Some("built") {
        node_image_built(node_image_build("node-image-build-docker.log")?).await?;
    }
    // Before the room, which builds the same registry image: Docker Hub through a mirror
    // here, as a learner in mainland China has it (xtask/tests/kind_lab.rs pulls through it).
    let _mirror = crate::mirror::Mirror::start().await?;
    // The room beside the kind lab: its cluster and the images it builds (the registry,
    // kube-router) take CPU the kind lab's suites leave idle.
    let room = Alongside::start(Part::Existing)?;
    let mirror = xtask::mirrors::RegistryMirror { url: Some(crate::mirror::URL.into()) };
    let kind = UpOptions { provider: "kind".into(), node_image, mirror, ..UpOptions::envtest() };
    let kubeconfig_before = user_kubeconfig();
    // The grader's Deployment path is proven on the existing cluster (its tests): not again here.
    let code = on_fresh_lab(DOCKER_LAB_NAME, &kind, &["by_hand", "kind_lab"]).await?;
    ensure!(
        user_kubeconfig() == kubeconfig_before,
        "the kind lab (or the room beside it) changed {}",
        user_kubeconfig_path().display()
    );
    let room = room.wait().await?;
    Ok(if code == ExitCode::SUCCESS { room } else { code })
}

/// Whether the kind lab's node image is to be built here (`LAB_NODE_IMAGE=built`) and is
/// not in Docker yet.
fn node_image_to_build() -> bool {
    let built = std::env::var(NODE_IMAGE_ENV).is_ok_and(|v| v == "built");
    built
        && crate::node_image::Recipe::new(&Default::default()).is_ok_and(|recipe| {
            xtask::lab::kind::image_present(&recipe.reference()).read().is_err()
        })
}

/// Why the Docker labs cannot run here, if they cannot.
fn docker_missing() -> Option<String> {
    match docker_usable() {
        Err(reason) => Some(format!("Docker is not usable: {reason}")),
        Ok(()) if labkit::tools::on_path("kind").is_none() => Some(
            "kind is not on PATH (kind v0.33: `nix develop`, or build maint/node-image/kind)"
                .to_string(),
        ),
        Ok(()) => None,
    }
}

/// A fresh lab `name` made with `options`, the e2e suite against it, then the lab
/// tests `tests` (`cargo test -p xtask --test NAME`: the lab's own, and the
/// grader's), the lab down whatever happened.
async fn on_fresh_lab(name: &'static str, options: &UpOptions, tests: &[&str]) -> Result<ExitCode> {
    let kind = options.provider == "kind";
    let what = if kind { "a kind lab" } else { "an envtest lab" };
    section(format!("{what} ({name})"));
    let mut down = LabDown { name, kind, done: false };
    lab::down::run(name, false).await?;
    let started = std::time::Instant::now();
    lab::up::run(name, options).await?;
    labkit::progress!("lab up in {:.0} s", started.elapsed().as_secs_f64());
    section(format!("e2e suite on {what}"));
    let mut code = xtask::e2e::run(name, None, xtask::output::Format::Text)?;
    for test in tests {
        if code != ExitCode::SUCCESS {
            break;
        }
        section(format!("xtask/tests/{test}.rs on {what}"));
        let run = cargo::cargo(["test", "-p", "xtask", "--test", test, "--", "--test-threads=1"])
            .env(NAME_ENV, name)
            .run();
        if let Err(e) = run {
            eprintln!("{e:#}");
            code = ExitCode::FAILURE;
        }
    }
    down.now().await?;
    Ok(code)
}

/// The two envtest labs of [`grade_part`].
pub const GRADE_LABS: [&str; 2] = ["my-controller-test-grade", "my-controller-test-grade-2"];

/// `xtask/tests/grade.rs` in two halves at once, each on an envtest lab of its own (down
/// whatever happened): one after the other its grades took ten minutes, most of it the
/// programs' resync windows, on CI's critical path.
async fn grade_part() -> Result<ExitCode> {
    let mut downs = Vec::new();
    for name in GRADE_LABS {
        section(format!("an envtest lab ({name})"));
        downs.push(LabDown { name, kind: false, done: false });
        lab::down::run(name, false).await?;
        lab::up::run(name, &UpOptions::envtest()).await?;
    }
    section("xtask/tests/grade.rs in two halves, one on each lab");
    let grade = || cargo::cargo(["test", "-p", "xtask", "--test", "grade", "--"]);
    let listed = grade().arg("--list").read()?;
    let tests: Vec<&str> = listed.lines().filter_map(|l| l.strip_suffix(": test")).collect();
    ensure!(!tests.is_empty(), "xtask/tests/grade.rs lists no test:\n{listed}");
    let half = |lab: &str, parity: usize| {
        let mine = tests.iter().enumerate().filter(|(i, _)| i % 2 == parity).map(|(_, t)| *t);
        let cmd = grade().args(["--test-threads=1", "--exact"]).args(mine).env(NAME_ENV, lab);
        (format!("grade-tests-on-{lab}"), cmd)
    };
    let halves = vec![half(GRADE_LABS[0], 0), half(GRADE_LABS[1], 1)];
    let ran = crate::side_by_side::shown(&crate::side_by_side::run("grade-tests", halves));
    for down in &mut downs {
        down.now().await?;
    }
    Ok(match ran {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{e:#}");
            ExitCode::FAILURE
        }
    })
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

/// `cargo maint node-image` in the background, at a low CPU priority: on a
/// cold machine it is minutes of compiling Kubernetes, and what runs meanwhile
/// (the unit tests, a lab's tests) comes first; CI's sandbox check, at the idle
/// priority, comes after (`.ci/run`). Stopped if the run ends before the kind
/// lab needs it. Its output goes to `log` in the target directory (one a part: two may
/// run at once).
fn node_image_build(log: &str) -> Result<Alongside> {
    section("the kind node image, built in the background at a low CPU priority");
    let cmd = Cmd::argv(["nice", "-n", "10", "cargo", "maint", "node-image"]);
    Alongside::spawn("the kind node image", cmd, log)
}

/// The node image build's deadline, counted from when the kind lab needs it.
const NODE_IMAGE_WITHIN: Duration = Duration::from_secs(30 * 60);

/// Waits for the build, its last line every 30 s; its log's tail when it fails.
async fn node_image_built(mut build: Alongside) -> Result<()> {
    let started = std::time::Instant::now();
    let every = Duration::from_secs(30);
    let status =
        build.exit(every, Some(NODE_IMAGE_WITHIN)).await.context("building the kind node image")?;
    ensure!(
        status.success(),
        "building the kind node image failed ({status}); its log ends:\n{}",
        labkit::files::tail(&build.log, 20)
    );
    eprintln!("kind node image ready ({:.0} s of waiting)", started.elapsed().as_secs_f64());
    Ok(())
}

/// Takes the test lab down: [`LabDown::now`], or when dropped (an error or a
/// panic). A kind lab is taken down without its lab.json, as after a lost
/// state directory: the cluster must go all the same.
struct LabDown {
    name: &'static str,
    kind: bool,
    done: bool,
}

impl LabDown {
    async fn now(&mut self) -> Result<()> {
        self.done = true;
        section(format!("lab down{}", if self.kind { " without lab.json" } else { "" }));
        if self.kind {
            std::fs::remove_file(labkit::lab_file::LabFile::path(&labkit::project::lab_dir(
                self.name,
            )))?;
        }
        lab::down::run(self.name, false).await?;
        if self.kind {
            let clusters = Cmd::argv(["kind", "get", "clusters"]).read()?;
            ensure!(
                !clusters.lines().any(|c| c == self.name)
                    && !labkit::project::lab_dir(self.name).exists(),
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
            tokio::runtime::Handle::current().block_on(lab::down::run(self.name, false))
        });
        if let Err(e) = down {
            eprintln!("error: could not take the lab down: {e:#}");
        }
    }
}
