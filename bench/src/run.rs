//! One benchmark run, in the order [`crate`] describes: the latency
//! blocks (the floor, then each subject, alternating), then for each subject
//! the steady window and a burst, then the unrelated ConfigMaps once and each
//! subject started among them.

use std::{
    path::Path,
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use anyhow::{Result, ensure};

use super::{
    load,
    phases::Span,
    quiet::{self, Burst, Steady},
    report::{Cost, Floor, Measured, Report, Series, Settings},
    rounds::{Disturbance, Rounds},
    stats::Summary,
    subject::{Spec, Subject},
    usage::Usage,
};
use e2e::{converge::wait_idle, lab::Lab};

/// Patches of a burst in flight at once.
const BURST_IN_FLIGHT: usize = 16;
/// Self-heal rounds with the unrelated ConfigMaps present (at most).
const UNRELATED_ROUNDS: usize = 50;

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// What one subject measured so far.
#[derive(Default)]
struct Tally {
    heal: Vec<f64>,
    correct: Vec<f64>,
    heal_unrelated: Vec<f64>,
    startup: Vec<f64>,
    idle: Option<Usage>,
    with_unrelated: Option<Usage>,
    latency_cpu: Duration,
    steady: Option<(Steady, Duration)>,
    burst: Option<Burst>,
}

impl Tally {
    /// What the report keeps of it; `n` rounds of each latency measure.
    fn measured(self, spec: &Spec, n: usize) -> Measured {
        let (steady, steady_cpu) = self.steady.expect("measured above");
        let idle = self.idle.expect("measured above");
        Measured {
            label: spec.label(),
            ours: spec.is_ours(),
            command: spec.command_line(),
            metrics: spec.has_metrics(),
            self_heal: self.heal,
            correction: self.correct,
            self_heal_with_unrelated: self.heal_unrelated,
            startup: self.startup,
            steady,
            burst: self.burst.expect("measured above"),
            cost: Cost {
                idle,
                with_unrelated: self.with_unrelated.unwrap_or(idle),
                latency_cpu_ms: ms(self.latency_cpu),
                latency_rounds: 2 * n,
                steady_cpu_ms: ms(steady_cpu),
            },
        }
    }
}

/// Measures every subject of `specs` (my-controller first) against `lab`
/// with `settings`; their output goes to `log`. The lab's own controller
/// must be stopped. Also returns when each timed round ran (for
/// [`super::phases`]).
pub async fn measure(
    lab: &Lab,
    settings: &Settings,
    specs: &[Spec],
    floor: &Path,
    log: &Path,
) -> Result<(Report, Vec<Span>)> {
    // Left by an interrupted run, they would distort the idle figures.
    load::delete_all(&lab.config_maps()).await?;
    // The floor (the `bench-floor` binary) runs as a process of its own, as
    // every subject does; it acts with the controller's identity.
    ensure!(specs.iter().any(Spec::is_ours), "the bench measures my-controller");
    let floor = Spec::Floor { binary: floor.to_path_buf() };
    let mut run = Run {
        lab,
        log,
        rounds: Rounds::new(lab).await?,
        floor,
        floor_heal: Vec::new(),
        floor_correct: Vec::new(),
        spans: Vec::new(),
    };
    let mut tallies: Vec<Tally> = specs.iter().map(|_| Tally::default()).collect();

    // A block has at least one round of each.
    let blocks = settings.blocks.min(settings.rounds);
    run.blocks(specs, &mut tallies, blocks, settings.rounds).await?;

    for (spec, tally) in specs.iter().zip(&mut tallies) {
        let window = Duration::from_secs_f64(settings.steady_seconds);
        let (steady, cpu, burst) =
            run.steady_and_burst(spec, tally, window, settings.burst).await?;
        tally.steady = Some((steady, cpu));
        tally.burst = Some(burst);
    }

    let api = lab.config_maps();
    eprintln!(
        "\n== {} unrelated ConfigMaps, {} creates in flight",
        settings.unrelated, settings.parallel
    );
    load::create(&api, settings.unrelated, settings.parallel).await?;
    for (spec, tally) in specs.iter().zip(&mut tallies) {
        run.among_unrelated(spec, tally, settings.rounds.min(UNRELATED_ROUNDS)).await?;
    }
    load::delete_all(&api).await?;

    let n = settings.rounds;
    let measured = specs.iter().zip(tallies).map(|(spec, t)| t.measured(spec, n)).collect();
    let meta = (
        SystemTime::now().duration_since(UNIX_EPOCH)?.as_secs(),
        lab.file().name.clone(),
        lab.file().kubernetes_version.clone(),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
    );
    let floor = Floor {
        self_heal: Series::new(run.floor_heal),
        correction: Series::new(run.floor_correct),
    };
    let report = Report::new(meta, Settings { blocks, ..settings.clone() }, floor, measured);
    Ok((report, run.spans))
}

/// One bench run's state: the lab, the rounds' client, the floor's client
/// and samples. Subjects run as [`Subject`]s passed along and consumed by a
/// stop, so no phase can use one that was stopped.
struct Run<'a> {
    lab: &'a Lab,
    log: &'a Path,
    rounds: Rounds,
    floor: Spec,
    floor_heal: Vec<f64>,
    floor_correct: Vec<f64>,
    /// Every timed round of the blocks: who, what, when.
    spans: Vec<Span>,
}

impl Run<'_> {
    /// The latency blocks: the floor and every subject take turns,
    /// `n` rounds of each measure spread over `blocks`.
    async fn blocks(
        &mut self,
        specs: &[Spec],
        tallies: &mut [Tally],
        blocks: usize,
        n: usize,
    ) -> Result<()> {
        for block in 0..blocks {
            // Rounds spread evenly; the first blocks take the remainder.
            let share = n / blocks + usize::from(block < n % blocks);
            // Each block starts one further along the order, so that no side
            // always follows the same one (or always runs first).
            let sides = specs.len() + 1;
            let order: Vec<usize> = (0..sides).map(|i| (i + block) % sides).collect();
            let names: Vec<String> = order
                .iter()
                .map(|&i| specs.get(i).map_or("the floor".into(), Spec::label))
                .collect();
            eprintln!(
                "\n== block {}/{blocks}: {share} rounds of each: {}",
                block + 1,
                names.join(", ")
            );
            for i in order {
                match specs.get(i) {
                    Some(spec) => self.subject_block(spec, &mut tallies[i], share, n).await?,
                    None => self.floor_block(share).await?,
                }
            }
        }
        Ok(())
    }

    /// Starts `spec` with `extra` flags and, for ours, waits until its
    /// startup reconcile has finished too (nothing queued or running): a
    /// measure that follows starts from rest.
    async fn start(&self, spec: &Spec, tally: &mut Tally, extra: &[&str]) -> Result<Subject> {
        let subject = Subject::start(self.lab, spec, extra, self.log).await?;
        tally.startup.push(ms(subject.startup));
        if spec.has_metrics() {
            wait_idle(self.lab).await?;
        }
        Ok(subject)
    }

    /// `count` rounds of `what` while `side` keeps my-config; their times
    /// in ms. With a side, each round's span is kept.
    async fn rounds(
        &mut self,
        side: Option<&str>,
        what: Disturbance,
        count: usize,
    ) -> Result<Vec<f64>> {
        let mut took = Vec::with_capacity(count);
        for _ in 0..count {
            let start = SystemTime::now();
            took.push(ms(self.rounds.once(self.lab, what).await?));
            if let Some(side) = side {
                let end = SystemTime::now();
                self.spans.push(Span { side: side.into(), what, start, end });
            }
        }
        Ok(took)
    }

    /// One unrecorded round of each kind: whoever keeps my-config (a
    /// subject or the floor) and the harness have their connections open
    /// before the timing.
    async fn warm_up(&mut self) -> Result<()> {
        self.rounds.once(self.lab, Disturbance::Delete).await?;
        self.rounds.once(self.lab, Disturbance::Patch).await?;
        Ok(())
    }

    async fn floor_block(&mut self, share: usize) -> Result<()> {
        let stand_in = Subject::start(self.lab, &self.floor, &[], self.log).await?;
        self.warm_up().await?;
        let heal = self.rounds(Some("floor"), Disturbance::Delete, share).await?;
        let correct = self.rounds(Some("floor"), Disturbance::Patch, share).await?;
        stand_in.stop().await?;
        self.floor_heal.extend(heal);
        self.floor_correct.extend(correct);
        show_progress("floor", &self.floor_heal, &self.floor_correct);
        Ok(())
    }

    /// `share` rounds of each kind for `spec`, started for the block and
    /// stopped after it; its idle usage is taken in the first block.
    async fn subject_block(
        &mut self,
        spec: &Spec,
        tally: &mut Tally,
        share: usize,
        total: usize,
    ) -> Result<()> {
        let subject = self.start(spec, tally, &[]).await?;
        if tally.idle.is_none() {
            tally.idle = Some(subject.usage()?);
        }
        self.warm_up().await?;
        let before = subject.usage()?;
        let side = spec.label();
        let heal = self.rounds(Some(&side), Disturbance::Delete, share).await?;
        let correct = self.rounds(Some(&side), Disturbance::Patch, share).await?;
        tally.latency_cpu += subject.usage()?.cpu_since(&before);
        subject.stop().await?;
        tally.heal.extend(heal);
        tally.correct.extend(correct);
        show_progress(
            &format!("{} ({}/{total})", spec.label(), tally.heal.len()),
            &tally.heal,
            &tally.correct,
        );
        Ok(())
    }

    /// The steady window — ours restarted with `--resync 1s`, another with
    /// its own settings — then a burst; the subject is stopped afterwards.
    async fn steady_and_burst(
        &mut self,
        spec: &Spec,
        tally: &mut Tally,
        window: Duration,
        patches: usize,
    ) -> Result<(Steady, Duration, Burst)> {
        let metrics = spec.has_metrics();
        let resync: &[&str] = if metrics { &["--resync", "1s"] } else { &[] };
        eprintln!(
            "\n== {}: steady state {window:?}{}, then a burst of {patches} patches ({BURST_IN_FLIGHT} in flight)",
            spec.label(),
            if metrics { " with --resync 1s" } else { "" }
        );
        let subject = self.start(spec, tally, resync).await?;
        let before = subject.usage()?;
        let steady = quiet::steady(self.lab, window, metrics).await?;
        let cpu = subject.usage()?.cpu_since(&before);
        let burst =
            quiet::burst(self.lab, self.rounds.writer(), patches, BURST_IN_FLIGHT, metrics).await?;
        subject.stop().await?;
        Ok((steady, cpu, burst))
    }

    /// `spec` started while the unrelated ConfigMaps exist (its initial list
    /// would carry them all without a field selector), `heal_rounds`
    /// self-heal rounds among them; its usage after those.
    async fn among_unrelated(
        &mut self,
        spec: &Spec,
        tally: &mut Tally,
        heal_rounds: usize,
    ) -> Result<()> {
        let subject = self.start(spec, tally, &[]).await?;
        self.warm_up().await?;
        tally.heal_unrelated = self.rounds(None, Disturbance::Delete, heal_rounds).await?;
        tally.with_unrelated = Some(subject.usage()?);
        subject.stop().await?;
        let p50 = Summary::of(&tally.heal_unrelated).map_or(0.0, |s| s.p50);
        eprintln!(
            "  {}: self-heal {heal_rounds}/{heal_rounds} among them (p50 {p50:.1} ms)",
            spec.label()
        );
        Ok(())
    }
}

/// One progress line per side and block: rounds so far and the p50 so far.
fn show_progress(side: &str, heal: &[f64], correct: &[f64]) {
    let p50 =
        |samples: &[f64]| Summary::of(samples).map_or("—".into(), |s| format!("{:.1} ms", s.p50));
    eprintln!("  {side}: self-heal p50 {}, correction p50 {}", p50(heal), p50(correct));
}
