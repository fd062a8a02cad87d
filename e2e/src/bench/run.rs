//! One benchmark run, in the order [`crate::bench`] describes: idle, the
//! latency blocks (floor and controller alternating), the burst, the
//! unrelated ConfigMaps, the steady window.

use std::{
    path::Path,
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use anyhow::Result;

use super::{
    floor::StandIn,
    load,
    quiet::{self, Steady},
    report::{self, Comparison, ControllerInfo, Cost, Latency, Report, Series, Settings},
    rounds::{Disturbance, Rounds},
    stats::Summary,
    subject::{Spec, Subject},
    usage::Usage,
};
use crate::{converge::wait_idle, lab::Lab};

/// Patches of a burst in flight at once.
const BURST_IN_FLIGHT: usize = 16;
/// Self-heal rounds with the unrelated ConfigMaps present (at most).
const UNRELATED_ROUNDS: usize = 50;

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

/// Measures `spec` against `lab` with `settings`; the controller's output
/// goes to `log`. The lab's own controller must be stopped.
pub async fn measure(lab: &Lab, settings: &Settings, spec: &Spec, log: &Path) -> Result<Report> {
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
    let blocks = settings.blocks.min(settings.rounds);
    let (subject, latency_cpu) = run.latency(subject, settings.rounds, blocks).await?;
    let after_runs = subject.usage()?;

    eprintln!("\n== burst: {} patches, {BURST_IN_FLIGHT} in flight", settings.burst);
    let writer = run.rounds.writer();
    let burst =
        quiet::burst(lab, writer, settings.burst, BURST_IN_FLIGHT, spec.has_metrics()).await?;

    let (subject, with_unrelated, with_unrelated_restarted) = run
        .unrelated(
            subject,
            settings.unrelated,
            settings.parallel,
            settings.rounds.min(UNRELATED_ROUNDS),
        )
        .await?;
    let (steady, steady_cpu) =
        run.steady(subject, Duration::from_secs_f64(settings.steady_seconds)).await?;

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
        latency_rounds: 2 * settings.rounds,
        with_unrelated,
        with_unrelated_restarted,
        steady_cpu_ms: ms(steady_cpu),
    };
    Ok(Report {
        format: report::FORMAT,
        unix_time: SystemTime::now().duration_since(UNIX_EPOCH)?.as_secs(),
        lab: lab.file().name.clone(),
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
        settings: Settings { blocks, ..settings.clone() },
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
