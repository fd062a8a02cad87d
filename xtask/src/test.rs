//! `cargo xtask test`, the README's test command: the unit tests, then a fresh
//! envtest lab, the e2e suite against it, and the lab down whatever happened.

use std::process::ExitCode;

use anyhow::Result;
use xshell::Shell;

use crate::{
    cmdline,
    lab::{self, ControllerChoice, UpOptions},
};

/// Its own lab, so a person's `my-controller-lab` is left alone.
pub const LAB_NAME: &str = "my-controller-test";

pub async fn run() -> Result<ExitCode> {
    let sh = Shell::new()?;
    sh.change_dir(e2e::project::root());
    eprintln!("== unit tests");
    // Everything that needs no lab: the e2e crate's integration tests need
    // the lab below, its own unit tests do not.
    cmdline::cargo(&["test", "--workspace", "--exclude", "e2e"]).run()?;
    cmdline::cargo(&["test", "-p", "e2e", "--lib"]).run()?;

    // A Ctrl-C reaches the test processes (same terminal); xtask itself stays
    // to take the lab down.
    tokio::spawn(async {
        if tokio::signal::ctrl_c().await.is_ok() {
            eprintln!("interrupted: the lab goes down once the running step ends");
        }
    });
    let processes = suite_on_fresh_lab(ControllerChoice::Process).await?;
    if processes != ExitCode::SUCCESS {
        return Ok(processes);
    }
    match docker_usable(&sh) {
        Ok(()) => {
            let container = suite_on_fresh_lab(ControllerChoice::Container).await?;
            // The image now exists: the offline bundle's save/load must give it back.
            eprintln!("== offline bundle round trip");
            lab::bundle::round_trip(&e2e::project::target_dir())?;
            Ok(container)
        }
        Err(reason) if std::env::var(CONTAINER_REQUIRED_ENV).is_ok_and(|v| v == "1") => {
            anyhow::bail!("{CONTAINER_REQUIRED_ENV}=1 but Docker is not usable: {reason}")
        }
        Err(reason) => {
            eprintln!(
                "== NOT RUN: the e2e suite with the controller in its container (Docker is not usable: {reason})"
            );
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Set to 1 (CI does, once dockerd runs) to make the container run mandatory.
pub const CONTAINER_REQUIRED_ENV: &str = "LAB_CONTAINER_REQUIRED";

/// A fresh envtest lab with the controller as `host`, the suite, the lab down.
async fn suite_on_fresh_lab(host: ControllerChoice) -> Result<ExitCode> {
    eprintln!("== a fresh envtest lab ({LAB_NAME}), controller as a {host:?}");
    let _down = LabDown;
    lab::down::run(LAB_NAME, false).await?;
    lab::up::run(LAB_NAME, &UpOptions::envtest(host)).await?;
    eprintln!("== e2e suite (controller as a {host:?})");
    let suite = crate::e2e::run(LAB_NAME, None)?;
    if suite != ExitCode::SUCCESS || host != ControllerChoice::Process {
        return Ok(suite);
    }
    // The workshop's narrated experiments run the same functions; check that
    // each one still tells its story (its key lines) and passes.
    for name in crate::exp::NAMES {
        eprintln!("== cargo xtask exp {name}");
        let (code, transcript) = crate::exp::transcript(LAB_NAME, name).await?;
        let missing = crate::exp::missing_key_lines(&transcript);
        if code != ExitCode::SUCCESS || !missing.is_empty() {
            eprintln!("exp {name} failed or lacks key lines {missing:?}");
            return Ok(ExitCode::FAILURE);
        }
    }
    short_benchmark().await
}

/// A short `cargo xtask bench`: it must complete and write its JSON report.
async fn short_benchmark() -> Result<ExitCode> {
    eprintln!(
        "== cargo xtask bench --name {LAB_NAME} -n 20 --steady 2s --unrelated 500 --build debug"
    );
    let report = e2e::project::target_dir().join("bench/latest.json");
    let _ = std::fs::remove_file(&report);
    let code = crate::bench::run(crate::bench::BenchArgs::short(LAB_NAME)).await?;
    let text = std::fs::read_to_string(&report)
        .map_err(|e| anyhow::anyhow!("the benchmark wrote no {}: {e}", report.display()))?;
    let json: serde_json::Value = serde_json::from_str(&text)?;
    anyhow::ensure!(
        json["latency"]["self_heal"]["controller"]["n"] == 20,
        "{} lacks the 20 self-heal rounds",
        report.display()
    );
    eprintln!("bench: wrote {}", report.display());
    Ok(code)
}

/// Whether a Docker daemon answers.
fn docker_usable(sh: &Shell) -> Result<(), String> {
    if crate::lab::binaries::on_path("docker").is_none() {
        return Err("no docker on PATH".into());
    }
    let format = "{{.ServerVersion}}";
    xshell::cmd!(sh, "docker info --format {format}")
        .quiet()
        .ignore_stdout()
        .ignore_stderr()
        .run()
        .map_err(|_| "the Docker daemon does not answer (`docker info`)".to_string())
}

/// Takes the test lab down when `run` ends, by success, error or panic.
struct LabDown;

impl Drop for LabDown {
    fn drop(&mut self) {
        eprintln!("== lab down");
        // Drop cannot await: block this worker thread on the runtime instead.
        let down = tokio::task::block_in_place(|| {
            tokio::runtime::Handle::current().block_on(lab::down::run(LAB_NAME, false))
        });
        if let Err(e) = down {
            eprintln!("error: could not take the lab down: {e:#}");
        }
    }
}
