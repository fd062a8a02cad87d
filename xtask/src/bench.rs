//! `cargo xtask bench`: how fast the controller heals, and what it costs,
//! against the current (envtest) lab. What is measured, in which order and
//! why: [`e2e::bench`]. This verb builds the controller (the release build by
//! default, `cargo build --release -p controller --bin my-controller`), stops
//! the lab's own controller for the run and starts it again whatever
//! happened, prints the tables and writes `target/bench/bench-<unix
//! time>.{json,svg}` and `latest.{json,svg}`.

use std::{path::PathBuf, process::ExitCode, time::Duration};

use anyhow::{Context, Result, bail, ensure};
use clap::{Args, ValueEnum};
use e2e::{
    bench::{
        chart, peers,
        report::{self, Settings},
        run,
        subject::Spec,
    },
    lab::Lab,
    lab_file::ProviderKind,
    project,
};

use crate::{cargo, lab::LabName};

#[derive(Args)]
pub struct BenchArgs {
    /// Rounds of each latency measure (self-heal, correction), for the controller and the floor alike.
    #[arg(short = 'n', long, default_value_t = 200)]
    rounds: usize,
    /// Length of the steady-state window (with a 1 s resync), e.g. 10s, 2s.
    #[arg(long, default_value = "10s", value_parser = controller::cli::parse_duration)]
    steady: Duration,
    /// Patches in the burst (coalescing: changes seen vs reconciles run).
    #[arg(long, default_value_t = 50)]
    burst: usize,
    /// Unrelated ConfigMaps created in the namespace for the memory measure (0: skip).
    #[arg(long, default_value_t = 10_000)]
    unrelated: usize,
    /// Creates in flight at once while making the unrelated ConfigMaps.
    #[arg(long, default_value_t = 32)]
    parallel: usize,
    /// Floor and controller rounds alternate in this many blocks, so the machine's drift over the run is shared by both.
    #[arg(long, default_value_t = 4)]
    blocks: usize,
    /// Which build of my-controller to measure (built first).
    #[arg(long, value_enum, default_value_t = Build::Release)]
    build: Build,
    /// Measure a peer in the same run: `go` (the course's controller, the course's program, e2e/peers/course-verbatim, with e2e/peers/course-go.patch), or a command run with `sh -c`, KUBECONFIG set to the lab's controller kubeconfig. Repeatable.
    #[arg(long, value_name = "go|COMMAND")]
    peer: Vec<String>,
    #[command(flatten)]
    lab: LabName,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Build {
    Release,
    Debug,
}

impl BenchArgs {
    fn settings(&self) -> Settings {
        Settings {
            rounds: self.rounds,
            blocks: self.blocks,
            steady_seconds: self.steady.as_secs_f64(),
            burst: self.burst,
            unrelated: self.unrelated,
            parallel: self.parallel,
        }
    }

    fn check(&self) -> Result<()> {
        ensure!(self.rounds >= 1, "--rounds must be at least 1");
        ensure!(self.blocks >= 1, "--blocks must be at least 1");
        ensure!(self.burst >= 1, "--burst must be at least 1");
        ensure!(self.parallel >= 1, "--parallel must be at least 1");
        ensure!(!self.steady.is_zero(), "--steady must be longer than 0");
        Ok(())
    }
}

pub async fn run(args: BenchArgs) -> Result<ExitCode> {
    args.check()?;
    let mut lab = Lab::find_named(&args.lab.name).await?;
    if lab.file().provider != ProviderKind::Envtest {
        bail!(
            "cargo xtask bench runs the controller as a local process: it needs an envtest lab, \
             and {} is a {} lab",
            args.lab.name,
            lab.file().provider
        );
    }
    let mut specs = vec![Spec::Ours { binary: build(args.build)? }];
    for peer in &args.peer {
        let command = Spec::Peer { label: None, command: peer.clone() };
        specs.push(if peer == "go" { peers::course_go()? } else { command });
    }
    let dir = project::target_dir().join("bench");
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let log = dir.join("controller.log");
    let labels = specs.iter().map(Spec::label).collect::<Vec<_>>().join(", ");
    eprintln!("bench: {labels} against lab {}; their log: {}", args.lab.name, log.display());
    eprintln!("stopping the lab's own controller for the run");
    lab.stop_controller().await?;
    let grant = if specs.len() > 1 { Some(peers::CourseRole::grant(&lab).await?) } else { None };
    let measured = run::measure(&lab, &args.settings(), &specs, &log).await;
    if let Some(grant) = grant {
        grant.revoke().await.context("could not delete the peers' Role")?;
    }
    eprintln!("starting the lab's own controller again");
    let restored = lab.start_controller(&[]).await;
    let report = measured?;
    restored.context("could not restart the lab's own controller")?;

    println!("{}", report::render(&report));
    let chart = chart::of(&report);
    for path in report::write(&dir, &report, &chart)? {
        eprintln!("wrote {}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// `cargo build [--release] -p controller --bin my-controller -p e2e --bin
/// bench-floor`; my-controller's binary.
fn build(build: Build) -> Result<PathBuf> {
    use crate::cargo::{BINARY, PACKAGE};
    let (flags, profile): (&[&str], _) = match build {
        Build::Release => (&["--release"], "release"),
        Build::Debug => (&[], "debug"),
    };
    let mut cargo_args = vec!["build"];
    cargo_args.extend(flags);
    // The floor (e2e/src/bin/bench-floor.rs) is built alongside, the same way.
    cargo_args.extend(["-p", PACKAGE, "--bin", BINARY, "-p", "e2e", "--bin", "bench-floor"]);
    cargo::cargo(&cargo_args).run().context("building the controller failed")?;
    let binary = project::target_dir().join(profile).join(BINARY);
    ensure!(binary.is_file(), "cargo built no {}", binary.display());
    Ok(binary)
}
