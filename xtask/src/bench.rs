//! `cargo xtask bench`: how fast the controller heals, and what it costs.
//!
//! Against the current lab (envtest), in one run:
//!
//! * **latency** — self-heal (delete → recreated) and drift correction
//!   (patch → data put back), `--rounds` times each, timed through a watch by
//!   the e2e suite's own [`measure_until_desired`];
//! * **the floor** — the same rounds with the controller stopped and the
//!   harness's minimal loop in its place ([`StandIn`]: watch → one write), so
//!   each controller figure is also a ratio to what the API server allows on
//!   this machine at this moment;
//! * **steady state** — writes and reconciles over `--steady` with a 1 s resync
//!   (must write nothing);
//! * **burst** — `--burst` patches at once: changes seen vs reconciles run;
//! * **cost** — RSS and CPU time from `/proc`, idle, after the rounds, and with
//!   `--unrelated` ConfigMaps in the namespace (created `--parallel` at a
//!   time, deleted again with one deletecollection).
//!
//! **Floor and controller alternate** in `--blocks` blocks (floor, controller,
//! floor, controller, …) rather than running one after the other: a 2-core
//! machine shared with other work drifts over a run (its neighbours' load,
//! etcd's growing history), and alternating spreads that drift over both
//! sides instead of charging it to one. Alternating every round would need
//! a controller restart per round; a few blocks keep restarts few. Each
//! block starts with one unrecorded round of each kind, so no side pays for
//! opening its connections inside the timed window.
//!
//! **Which controller**: the bench runs the controller itself, as a process
//! group it owns, with the lab's controller arguments (its kubeconfig and
//! listen address): by default the *release* build, which it builds first
//! (`cargo build --release -p controller --bin my-controller`, echoed) — the
//! bar is for the release build; `--build debug` measures the debug build.
//! `--controller-cmd '<command>'` measures any other implementation instead
//! (`sh -c`, `KUBECONFIG` = the lab's controller kubeconfig). The lab's own
//! controller is stopped for the run and started again at the end, whatever
//! happened.
//!
//! Output: a table on stdout, `target/bench/bench-<unix time>.json` and
//! `.svg` (a CDF chart), and the same as `latest.json` / `latest.svg`.
//!
//! [`measure_until_desired`]: e2e::converge::measure_until_desired
//! [`StandIn`]: e2e::bench::floor::StandIn

mod report;
mod stats;
mod subject;
mod svg;

use std::{
    path::{Path, PathBuf},
    process::ExitCode,
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use anyhow::{Context, Result, bail, ensure};
use clap::{Args, ValueEnum};
use e2e::{
    bench::{
        floor::StandIn,
        load,
        quiet::{self, Steady},
        rounds::{Disturbance, Rounds},
        usage::Usage,
    },
    converge::wait_idle,
    lab::Lab,
    lab_file::ProviderKind,
    project,
};

use crate::{cargo, lab::LabName};
use report::{Comparison, ControllerInfo, Cost, Latency, Report, Series, Settings};
use stats::Summary;
use subject::{Spec, Subject};

/// Patches of a burst in flight at once.
const BURST_IN_FLIGHT: usize = 16;
/// Self-heal rounds with the unrelated ConfigMaps present (at most).
const UNRELATED_ROUNDS: usize = 50;

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
    /// Measure another controller instead: run with `sh -c`, KUBECONFIG set to the lab's controller kubeconfig.
    #[arg(long, value_name = "COMMAND")]
    controller_cmd: Option<String>,
    #[command(flatten)]
    lab: LabName,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Build {
    Release,
    Debug,
}

impl BenchArgs {
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
    let spec = match &args.controller_cmd {
        Some(command) => Spec::Foreign { command: command.clone() },
        None => Spec::Ours { binary: build(args.build)? },
    };
    let dir = project::target_dir().join("bench");
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let log = dir.join("controller.log");
    eprintln!("bench: {} against lab {}; its log: {}", spec.label(), args.lab.name, log.display());
    eprintln!("stopping the lab's own controller for the run");
    lab.stop_controller().await?;
    let measured = measure(&lab, &args, &spec, &log).await;
    eprintln!("starting the lab's own controller again");
    let restored = lab.start_controller(&[]).await;
    let report = measured?;
    restored.context("could not restart the lab's own controller")?;

    println!("{}", report::render(&report));
    let chart = chart(&report);
    for path in report::write(&dir, &report, &chart)? {
        eprintln!("wrote {}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// `cargo build [--release] -p controller --bin my-controller`; the binary.
fn build(build: Build) -> Result<PathBuf> {
    use crate::cargo::{BINARY, PACKAGE};
    let (flags, profile): (&[&str], _) = match build {
        Build::Release => (&["--release"], "release"),
        Build::Debug => (&[], "debug"),
    };
    let mut cargo_args = vec!["build"];
    cargo_args.extend(flags);
    cargo_args.extend(["-p", PACKAGE, "--bin", BINARY]);
    cargo::cargo(&cargo_args).run().context("building the controller failed")?;
    let binary = project::target_dir().join(profile).join(BINARY);
    ensure!(binary.is_file(), "cargo built no {}", binary.display());
    Ok(binary)
}

/// Every latency sample of the run, in ms.
#[derive(Default)]
struct Samples {
    floor_heal: Vec<f64>,
    floor_correct: Vec<f64>,
    heal: Vec<f64>,
    correct: Vec<f64>,
    heal_unrelated: Vec<f64>,
    startup: Vec<f64>,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

async fn measure(lab: &Lab, args: &BenchArgs, spec: &Spec, log: &Path) -> Result<Report> {
    // Left by an interrupted run, they would distort the idle figures.
    load::delete_all(&lab.config_maps()).await?;
    let mut run = Run {
        lab,
        spec,
        log,
        rounds: Rounds::new(lab).await?,
        // The floor acts as the controller does: with its identity.
        floor_client: controller::connect::client(Some(&lab.file().controller.kubeconfig))
            .await
            .map_err(anyhow::Error::msg)?,
        samples: Samples::default(),
    };

    eprintln!("\n== idle");
    let subject = run.start(&[]).await?;
    let idle = subject.usage()?;
    // A block has at least one round of each.
    let blocks = args.blocks.min(args.rounds);
    let (subject, latency_cpu) = run.latency(subject, args.rounds, blocks).await?;
    let after_runs = subject.usage()?;

    eprintln!("\n== burst: {} patches, {BURST_IN_FLIGHT} in flight", args.burst);
    let writer = run.rounds.writer();
    let burst = quiet::burst(lab, writer, args.burst, BURST_IN_FLIGHT, spec.has_metrics()).await?;

    let (subject, with_unrelated, with_unrelated_restarted) = run
        .unrelated(subject, args.unrelated, args.parallel, args.rounds.min(UNRELATED_ROUNDS))
        .await?;
    let (steady, steady_cpu) = run.steady(subject, args.steady).await?;

    let samples = run.samples;
    let latency = Latency {
        self_heal: Comparison::new(samples.floor_heal, samples.heal),
        correction: Comparison::new(samples.floor_correct, samples.correct),
        self_heal_with_unrelated: Series::new(samples.heal_unrelated),
    };
    let cost = Cost {
        idle,
        after_runs,
        latency_cpu_ms: ms(latency_cpu),
        latency_rounds: 2 * args.rounds,
        with_unrelated,
        with_unrelated_restarted,
        steady_cpu_ms: ms(steady_cpu),
    };
    Ok(Report {
        format: report::FORMAT,
        unix_time: SystemTime::now().duration_since(UNIX_EPOCH)?.as_secs(),
        lab: args.lab.name.clone(),
        kubernetes_version: lab.file().kubernetes_version.clone(),
        cpus: std::thread::available_parallelism().map_or(0, |n| n.get()),
        controller: ControllerInfo {
            label: spec.label(),
            binary: match spec {
                Spec::Ours { binary } => Some(binary.display().to_string()),
                Spec::Foreign { .. } => None,
            },
            command: match spec {
                Spec::Foreign { command } => Some(command.clone()),
                Spec::Ours { .. } => None,
            },
            metrics: spec.has_metrics(),
        },
        settings: Settings {
            rounds: args.rounds,
            blocks,
            steady_seconds: args.steady.as_secs_f64(),
            burst: args.burst,
            unrelated: args.unrelated,
            parallel: args.parallel,
        },
        bars: report::bars(&latency, &steady, &cost),
        latency,
        startup: Series::new(samples.startup),
        steady,
        burst,
        cost,
    })
}

/// One bench run's state: the lab, the controller under test, the rounds'
/// client, and what was measured so far. The controller runs as a
/// [`Subject`] passed along (and consumed by a stop), so no phase can use
/// one that was stopped.
struct Run<'a> {
    lab: &'a Lab,
    spec: &'a Spec,
    log: &'a Path,
    rounds: Rounds,
    floor_client: kube::Client,
    samples: Samples,
}

impl Run<'_> {
    /// Starts the controller under test and, for ours, waits until its
    /// startup reconcile has finished too (nothing queued or running): a
    /// measure that follows starts from rest.
    async fn start(&mut self, extra: &[&str]) -> Result<Subject> {
        let subject = Subject::start(self.lab, self.spec, extra, self.log).await?;
        self.samples.startup.push(ms(subject.startup));
        if self.spec.has_metrics() {
            wait_idle(self.lab).await?;
        }
        Ok(subject)
    }

    /// `count` rounds of `what`, their samples appended to `into`.
    async fn rounds(
        &mut self,
        what: Disturbance,
        count: usize,
        into: fn(&mut Samples) -> &mut Vec<f64>,
    ) -> Result<()> {
        for _ in 0..count {
            let took = self.rounds.once(self.lab, what).await?;
            into(&mut self.samples).push(ms(took));
        }
        Ok(())
    }

    /// One unrecorded round of each kind: whoever keeps my-config
    /// (controller or floor) and the harness have their connections open
    /// before the timing.
    async fn warm_up(&mut self) -> Result<()> {
        self.rounds.once(self.lab, Disturbance::Delete).await?;
        self.rounds.once(self.lab, Disturbance::Patch).await?;
        Ok(())
    }

    /// The latency rounds: `n` of each kind for the floor and for the
    /// controller, alternating in `blocks`. Returns the controller (running)
    /// and the CPU it used in its timed rounds.
    async fn latency(
        &mut self,
        mut subject: Subject,
        n: usize,
        blocks: usize,
    ) -> Result<(Subject, Duration)> {
        let label = self.spec.label();
        let mut cpu = Duration::ZERO;
        for block in 0..blocks {
            // Rounds spread evenly; the first blocks take the remainder.
            let share = n / blocks + usize::from(block < n % blocks);
            eprintln!(
                "\n== block {}/{blocks}: {share} rounds of each, floor then controller",
                block + 1
            );
            subject.stop().await?;
            let stand_in =
                StandIn::start(self.floor_client.clone(), self.lab.desired().clone()).await?;
            self.warm_up().await?;
            self.rounds(Disturbance::Delete, share, |s| &mut s.floor_heal).await?;
            self.rounds(Disturbance::Patch, share, |s| &mut s.floor_correct).await?;
            stand_in.stop().await?;
            let s = &self.samples;
            show_progress("floor", &s.floor_heal, &s.floor_correct, n);

            subject = self.start(&[]).await?;
            self.warm_up().await?;
            let before = subject.usage()?;
            self.rounds(Disturbance::Delete, share, |s| &mut s.heal).await?;
            self.rounds(Disturbance::Patch, share, |s| &mut s.correct).await?;
            cpu += subject.usage()?.cpu_since(&before);
            let s = &self.samples;
            show_progress(&label, &s.heal, &s.correct, n);
        }
        Ok((subject, cpu))
    }

    /// `count` unrelated ConfigMaps: the controller's usage once they are
    /// created, and again after a restart while they exist (its initial list
    /// would carry them all without the field selector); then `heal_rounds`
    /// self-heal rounds with them present, and their deletion.
    async fn unrelated(
        &mut self,
        subject: Subject,
        count: usize,
        parallel: usize,
        heal_rounds: usize,
    ) -> Result<(Subject, Usage, Usage)> {
        eprintln!("\n== {count} unrelated ConfigMaps, {parallel} creates in flight");
        let api = self.lab.config_maps();
        load::create(&api, count, parallel).await?;
        let running = subject.usage()?;
        eprintln!("restarting the controller while they exist");
        subject.stop().await?;
        let subject = self.start(&[]).await?;
        let restarted = subject.usage()?;
        self.warm_up().await?;
        self.rounds(Disturbance::Delete, heal_rounds, |s| &mut s.heal_unrelated).await?;
        let p50 = Summary::of(&self.samples.heal_unrelated).map_or(0.0, |s| s.p50);
        eprintln!(
            "  {}: self-heal {heal_rounds}/{heal_rounds} with them present (p50 {p50:.1} ms)",
            self.spec.label()
        );
        load::delete_all(&api).await?;
        Ok((subject, running, restarted))
    }

    /// The steady window: ours restarted with `--resync 1s` (another
    /// controller with its own settings); stopped afterwards. Returns what
    /// was seen and the CPU used in the window.
    async fn steady(&mut self, subject: Subject, window: Duration) -> Result<(Steady, Duration)> {
        let metrics = self.spec.has_metrics();
        let resync: &[&str] = if metrics { &["--resync", "1s"] } else { &[] };
        eprintln!(
            "\n== steady state: {window:?}{}",
            if metrics { " with --resync 1s" } else { "" }
        );
        subject.stop().await?;
        let subject = self.start(resync).await?;
        let before = subject.usage()?;
        let steady = quiet::steady(self.lab, window, metrics).await?;
        let cpu = subject.usage()?.cpu_since(&before);
        subject.stop().await?;
        Ok((steady, cpu))
    }
}

/// One progress line per side and block: rounds so far and the p50 so far.
fn show_progress(side: &str, heal: &[f64], correct: &[f64], total: usize) {
    let p50 =
        |samples: &[f64]| Summary::of(samples).map_or("—".into(), |s| format!("{:.1} ms", s.p50));
    eprintln!(
        "  {side}: self-heal {}/{total} (p50 {}), correction {}/{total} (p50 {})",
        heal.len(),
        p50(heal),
        correct.len(),
        p50(correct)
    );
}

/// The CDF chart of the run: self-heal and correction, floor next to the controller.
fn chart(report: &Report) -> String {
    use svg::{CONTROLLER, EXTRA, FLOOR, Line, Panel};
    let l = &report.latency;
    let label = report.controller.label.as_str();
    let unrelated = format!("{label}, {} unrelated ConfigMaps", report.settings.unrelated);
    let subtitle = format!(
        "lab {} · Kubernetes {} · {} CPUs · {} rounds per series in {} alternating blocks · floor: the harness's own watch → write loop",
        report.lab,
        report.kubernetes_version,
        report.cpus,
        report.settings.rounds,
        report.settings.blocks
    );
    svg::cdf(
        &format!("How fast {label} heals · {}", utc(report.unix_time)),
        &subtitle,
        &[
            Panel {
                title: "self-heal: delete → recreated",
                lines: vec![
                    Line {
                        label: "floor",
                        color: FLOOR,
                        dashed: true,
                        samples_ms: &l.self_heal.floor.samples_ms,
                    },
                    Line {
                        label,
                        color: CONTROLLER,
                        dashed: false,
                        samples_ms: &l.self_heal.controller.samples_ms,
                    },
                    Line {
                        label: &unrelated,
                        color: EXTRA,
                        dashed: false,
                        samples_ms: &l.self_heal_with_unrelated.samples_ms,
                    },
                ],
            },
            Panel {
                title: "correction: patch → data put back",
                lines: vec![
                    Line {
                        label: "floor",
                        color: FLOOR,
                        dashed: true,
                        samples_ms: &l.correction.floor.samples_ms,
                    },
                    Line {
                        label,
                        color: CONTROLLER,
                        dashed: false,
                        samples_ms: &l.correction.controller.samples_ms,
                    },
                ],
            },
        ],
    )
}

/// `2026-11-29 15:59 UTC` for a Unix time (the civil-from-days algorithm of
/// H. Hinnant's date library; no date crate for one line of a chart).
fn utc(unix: u64) -> String {
    let (days, secs) = ((unix / 86_400) as i64, unix % 86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year}-{month:02}-{day:02} {:02}:{:02} UTC", secs / 3600, secs % 3600 / 60)
}

#[cfg(test)]
mod tests {
    use super::utc;

    #[test]
    fn unix_times_read_as_utc_dates() {
        assert_eq!(utc(0), "1970-01-01 00:00 UTC");
        assert_eq!(utc(951_782_400), "2000-02-29 00:00 UTC");
        assert_eq!(utc(1_795_967_966), "2026-11-29 15:59 UTC");
    }
}
