//! One benchmark run, in the order [`crate`] describes: the latency
//! blocks (every side at once, each on a my-config of its own, the rounds
//! taking turns one by one), then for each subject the steady window and a
//! burst, then the unrelated ConfigMaps once and each subject started among
//! them.

use std::{
    path::Path,
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use anyhow::{Result, ensure};

use super::{
    load,
    phases::Span,
    places::{self, Place, Sharing},
    quiet::{self, Burst, Steady},
    report::{self, Cost, Floor, Report, Series, Settings, Versus},
    rounds::{Disturbance, Rounds},
    stats::Summary,
    subject::{Spec, Subject},
    usage::Usage,
};
use controller::desired::Desired;
use labkit::{converge::wait_idle, lab::Lab};

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
    fn measured(self, spec: &Spec, n: usize) -> report::Subject {
        let (steady, steady_cpu) = self.steady.expect("measured above");
        let idle = self.idle.expect("measured above");
        report::Subject {
            label: spec.label(),
            ours: spec.is_ours(),
            command: spec.command_line(),
            metrics: spec.is_ours(),
            self_heal: Versus::new(self.heal),
            correction: Versus::new(self.correct),
            self_heal_with_unrelated: Series::new(self.heal_unrelated),
            startup: Versus::new(self.startup),
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
/// must be stopped, and each side's place ([`places::of_sides`] with
/// `sharing`) must let it keep my-config there. Also returns when each timed
/// round ran (for [`super::phases`]).
pub async fn measure(
    lab: &Lab,
    settings: &Settings,
    (specs, sharing): (&[Spec], Sharing),
    floor: &Path,
    log: &Path,
) -> Result<(Report, Vec<Span>)> {
    // Left by an interrupted run, they would distort the idle figures.
    let unrelated = load::Unrelated::of(lab).await?;
    unrelated.delete_all().await?;
    ensure!(specs.iter().any(Spec::is_ours), "the bench measures my-controller");
    // The floor (the `bench-floor` binary) runs as a process of its own, as
    // every subject does; it acts with the controller's identity. It is the
    // last side.
    let floor = Spec::Floor { binary: floor.to_path_buf() };
    let mut sides = Vec::new();
    let own = Place::kept_in(lab);
    for (spec, place) in specs.iter().chain([&floor]).zip(places::of_sides(&own, specs, sharing)) {
        // The same lab keeping this side's ConfigMap (same data); lab.json stays the lab's.
        let data = lab.desired().data().clone();
        let desired =
            Desired::new(&place.namespace, &place.name, data).map_err(anyhow::Error::msg)?;
        let lab = lab.seen_as(lab.file().clone(), desired, false);
        sides.push(Side { spec: spec.clone(), rounds: Rounds::new(&lab).await?, lab });
    }
    let mut run = Run { lab, log, rounds: Rounds::new(lab).await?, spans: Vec::new() };
    let mut tallies: Vec<Tally> = sides.iter().map(|_| Tally::default()).collect();

    // A block has at least one round of each.
    let blocks = settings.blocks.min(settings.rounds);
    run.blocks(&mut sides, &mut tallies, blocks, settings.rounds).await?;
    let floor = tallies.pop().expect("the floor is the last side");

    for (spec, tally) in specs.iter().zip(&mut tallies) {
        let window = Duration::from_secs_f64(settings.steady_seconds);
        let (steady, cpu, burst) =
            run.steady_and_burst(spec, tally, window, settings.burst).await?;
        tally.steady = Some((steady, cpu));
        tally.burst = Some(burst);
    }

    labkit::progress!(
        "\n== {} unrelated ConfigMaps, {} creates in flight",
        settings.unrelated,
        settings.parallel
    );
    // Fewer where a quota allows fewer (said in one line): the report says what was made.
    let made = unrelated.create(settings.unrelated, settings.parallel).await?;
    labkit::test_hook::at("bench:unrelated")?;
    for (spec, tally) in specs.iter().zip(&mut tallies) {
        run.among_unrelated(spec, tally, settings.rounds.min(UNRELATED_ROUNDS)).await?;
    }
    unrelated.delete_all().await?;

    let n = settings.rounds;
    let measured = specs.iter().zip(tallies).map(|(spec, t)| t.measured(spec, n)).collect();
    let meta = (
        SystemTime::now().duration_since(UNIX_EPOCH)?.as_secs(),
        (lab.file().name.clone(), lab.file().provider.clone()),
        lab.file().kubernetes_version.clone(),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
    );
    let floor =
        Floor { self_heal: Series::new(floor.heal), correction: Series::new(floor.correct) };
    let settings = Settings { blocks, unrelated: made, ..settings.clone() };
    let report = Report::new(meta, settings, floor, measured);
    Ok((report, run.spans))
}

/// A side of the latency blocks: a subject or the floor, the lab as it sees
/// it (its own my-config, [`Lab::seen_as`]) and its rounds' client.
struct Side {
    spec: Spec,
    lab: Lab,
    rounds: Rounds,
}

/// One bench run's state: the lab, the rounds' client of the phases after
/// the blocks, the spans of the timed rounds. Subjects run as [`Subject`]s
/// passed along and consumed by a stop, so no phase can use one that was
/// stopped.
struct Run<'a> {
    lab: &'a Lab,
    log: &'a Path,
    rounds: Rounds,
    /// Every timed round of the blocks: who, what, when.
    spans: Vec<Span>,
}

/// `0..len`, starting at `from % len`.
fn turn(len: usize, from: usize) -> Vec<usize> {
    (0..len).map(|i| (i + from) % len).collect()
}

impl Run<'_> {
    /// The latency blocks: every side started (each on its own my-config),
    /// then rounds that take turns one by one — a self-heal round of each
    /// side, then a correction round of each —, `n` of each kind per side
    /// spread over `blocks`; then every side stopped. A slow moment of the
    /// machine thus falls on neighbouring rounds of different sides.
    async fn blocks(
        &mut self,
        sides: &mut [Side],
        tallies: &mut [Tally],
        blocks: usize,
        n: usize,
    ) -> Result<()> {
        for block in 0..blocks {
            labkit::test_hook::at(&format!("bench:block:{block}"))?;
            // Rounds spread evenly; the first blocks take the remainder.
            let share = n / blocks + usize::from(block < n % blocks);
            let names: Vec<String> = sides.iter().map(|s| s.spec.label()).collect();
            labkit::progress!(
                "\n== block {}/{blocks}: {share} rounds of each kind, in turn: {}",
                block + 1,
                names.join(", ")
            );
            // Each block starts them one further along, so that no side
            // always starts first.
            let mut running = Vec::with_capacity(sides.len());
            for i in turn(sides.len(), block) {
                let (lab, spec) = (&sides[i].lab, &sides[i].spec);
                let subject = self.start(lab, spec, &mut tallies[i], &[]).await?;
                if tallies[i].idle.is_none() {
                    tallies[i].idle = Some(subject.usage()?);
                }
                running.push((i, subject));
            }
            for side in sides.iter_mut() {
                side.rounds.warm_up(&side.lab).await?;
            }
            labkit::test_hook::at(&format!("bench:block:{block}:running"))?;
            let before = running.iter().map(|(_, s)| s.usage()).collect::<Result<Vec<_>>>()?;
            for round in 0..share {
                // Each round starts one further along too: no side always
                // runs right after the same one.
                let order = turn(sides.len(), block + round);
                for what in [Disturbance::Delete, Disturbance::Patch] {
                    for &i in &order {
                        let took = self.round(&mut sides[i], what).await?;
                        let tally = &mut tallies[i];
                        match what {
                            Disturbance::Delete => tally.heal.push(took),
                            Disturbance::Patch => tally.correct.push(took),
                        }
                    }
                }
            }
            for ((i, subject), before) in running.into_iter().zip(before) {
                tallies[i].latency_cpu += subject.usage()?.cpu_since(&before);
                subject.stop().await?;
            }
            for (name, tally) in names.iter().zip(tallies.iter()) {
                let so_far = format!("{name} ({}/{n})", tally.heal.len());
                show_progress(&so_far, &tally.heal, &tally.correct);
            }
        }
        Ok(())
    }

    /// Starts `spec` keeping `lab`'s my-config with `extra` flags and, for
    /// ours, waits until its startup reconcile has finished too (nothing
    /// queued or running): a measure that follows starts from rest.
    async fn start(
        &self,
        lab: &Lab,
        spec: &Spec,
        tally: &mut Tally,
        extra: &[&str],
    ) -> Result<Subject> {
        let subject = Subject::start(lab, spec, extra, self.log).await?;
        tally.startup.push(ms(subject.startup));
        if spec.is_ours() {
            wait_idle(lab).await?;
        }
        Ok(subject)
    }

    /// One timed round of `what` on `side`'s my-config, in ms; its span kept.
    async fn round(&mut self, side: &mut Side, what: Disturbance) -> Result<f64> {
        let start = SystemTime::now();
        let took = ms(side.rounds.once(&side.lab, what).await?);
        let end = SystemTime::now();
        let (side_name, namespace) = (side.spec.label(), side.lab.desired().namespace().into());
        self.spans.push(Span { side: side_name, namespace, what, start, end });
        Ok(took)
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
        let metrics = spec.is_ours();
        let resync: &[&str] = if metrics { &["--resync", "1s"] } else { &[] };
        labkit::progress!(
            "\n== {}: steady state {window:?}{}, then a burst of {patches} patches ({BURST_IN_FLIGHT} in flight)",
            spec.label(),
            if metrics { " with --resync 1s" } else { "" }
        );
        let subject = self.start(self.lab, spec, tally, resync).await?;
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
        let subject = self.start(self.lab, spec, tally, &[]).await?;
        self.rounds.warm_up(self.lab).await?;
        for _ in 0..heal_rounds {
            tally.heal_unrelated.push(ms(self.rounds.once(self.lab, Disturbance::Delete).await?));
        }
        tally.with_unrelated = Some(subject.usage()?);
        subject.stop().await?;
        let p50 = Summary::of(&tally.heal_unrelated).map_or(0.0, |s| s.p50);
        labkit::progress!(
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
    labkit::progress!("  {side}: self-heal p50 {}, correction p50 {}", p50(heal), p50(correct));
}
