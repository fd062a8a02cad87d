//! What the attendees and the instructor run, N at a time: `lab up` and
//! `lab down` as N laptops run them (each its own `cargo xtask`, its own
//! log), the course's experiments and self-heal rounds in every namespace at
//! once, the grades on the instructor's labs; each attendee's phases on one
//! [`Timeline`].

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use bench::rounds::{Disturbance, Rounds};
use labkit::command::Cmd;
use labkit::lab::Lab;
use serde::Serialize;
use xtask::cargo::cargo;

use super::{Cluster, PREFIX, ROOM};
use crate::side_by_side;

/// Where the attendees' and the instructor's commands log (`target/…`).
const LOGS: &str = "room-bench-logs";

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Phase {
    Up,
    Experiments,
    Graded,
    Down,
}

/// One phase of one attendee: seconds from `room up`'s start.
#[derive(Debug, Serialize)]
pub struct Span {
    pub attendee: usize,
    pub phase: Phase,
    pub start: f64,
    pub end: f64,
    pub ok: bool,
}

/// Every attendee's phases, in seconds from `room up`'s start.
#[derive(Debug, Serialize)]
pub struct Timeline {
    #[serde(skip)]
    origin: Instant,
    pub attendees: usize,
    pub spans: Vec<Span>,
}

impl Default for Timeline {
    fn default() -> Timeline {
        Timeline::new(Instant::now(), 0)
    }
}

impl Timeline {
    pub fn new(origin: Instant, attendees: usize) -> Timeline {
        Timeline { origin, attendees, spans: Vec::new() }
    }

    pub fn add(
        &mut self,
        attendee: usize,
        phase: Phase,
        (start, end): (Instant, Instant),
        ok: bool,
    ) {
        let at = |t: Instant| t.duration_since(self.origin).as_secs_f64();
        self.spans.push(Span { attendee, phase, start: at(start), end: at(end), ok });
    }

    /// The spans of `phase`: their durations, and from the first start to the last end.
    pub fn of(&self, phase: Phase) -> (Vec<f64>, f64) {
        let spans: Vec<&Span> = self.spans.iter().filter(|s| s.phase == phase).collect();
        let first = spans.iter().map(|s| s.start).fold(f64::INFINITY, f64::min);
        let last = spans.iter().map(|s| s.end).fold(0.0, f64::max);
        (spans.iter().map(|s| s.end - s.start).collect(), (last - first).max(0.0))
    }
}

/// Each attendee's command at once, each span on the timeline as `phase`.
fn on_timeline(phase: Phase, commands: Vec<(usize, Cmd)>, timeline: &mut Timeline) -> Vec<String> {
    let who: Vec<usize> = commands.iter().map(|(i, _)| *i).collect();
    let named = commands
        .into_iter()
        .map(|(i, cmd)| (format!("{phase:?}-{PREFIX}-{:02}", i + 1).to_lowercase(), cmd));
    let ran = side_by_side::run(LOGS, named.collect());
    for (i, ran) in who.into_iter().zip(&ran) {
        timeline.add(i, phase, ran.span, ran.ok);
    }
    side_by_side::failed(&ran)
}

/// Every attendee's `lab up --provider existing` with their kubeconfig from
/// `room up`, `wave` at a time.
pub fn up(labs: &[String], wave: usize, registry: &str, timeline: &mut Timeline) -> Vec<String> {
    let mut failed = Vec::new();
    for (w, chunk) in labs.chunks(wave).enumerate() {
        let commands = chunk.iter().enumerate().map(|(j, lab)| {
            let i = w * wave + j;
            (i, crate::test::existing::attendee_lab_up(ROOM, i, lab, registry))
        });
        failed.extend(on_timeline(Phase::Up, commands.collect(), timeline));
    }
    failed
}

/// `lab down` of `left` (names among `labs`), all at once.
pub fn down(left: &[&String], labs: &[String], timeline: &mut Timeline) -> Vec<String> {
    let commands = left.iter().filter_map(|name| {
        let i = labs.iter().position(|l| l == *name)?;
        Some((i, cargo(["xtask", "lab", "down", "--name", name])))
    });
    on_timeline(Phase::Down, commands.collect(), timeline)
}

/// The course's four experiments in every attendee's namespace, all
/// namespaces at once (each lab's in the course's order). What failed.
pub async fn experiments(labs: &[String], timeline: &mut Timeline) -> Vec<String> {
    let runs = labs.iter().enumerate().map(|(i, name)| async move {
        let start = Instant::now();
        let result = crate::test::existing::course_experiments(name).await;
        (i, (start, Instant::now()), result)
    });
    let mut failed = Vec::new();
    for (i, span, result) in futures::future::join_all(runs).await {
        timeline.add(i, Phase::Experiments, span, result.is_ok());
        if let Err(e) = result {
            failed.push(format!("experiments in {}: {e:#}", labs[i]));
        }
    }
    failed
}

/// `rounds` self-heals (delete my-config → back with the desired data, as
/// the bench times it) in each lab, the labs in lockstep: every sample.
pub async fn heal_at_once(labs: &[String], rounds: usize) -> Result<Vec<Duration>> {
    let runs = labs.iter().map(|name| async move {
        let (lab, mut heals) = warmed(name).await?;
        let mut samples = Vec::with_capacity(rounds);
        for _ in 0..rounds {
            samples.push(heals.once(&lab, Disturbance::Delete).await?);
        }
        anyhow::Ok(samples)
    });
    Ok(futures::future::try_join_all(runs).await?.into_iter().flatten().collect())
}

/// `rounds` self-heals in each lab, one lab after the other round by round:
/// each heal with every other controller running, none of them healing.
pub async fn heal_in_turn(labs: &[String], rounds: usize) -> Result<Vec<Duration>> {
    let mut sides = Vec::with_capacity(labs.len());
    for name in labs {
        sides.push(warmed(name).await?);
    }
    let mut samples = Vec::with_capacity(rounds * labs.len());
    for _ in 0..rounds {
        for (lab, heals) in &mut sides {
            samples.push(heals.once(lab, Disturbance::Delete).await?);
        }
    }
    Ok(samples)
}

/// How many LISTs attendee 01 keeps in flight in its storm.
const STORM: usize = 32;

/// `rounds` self-heals in lab `name` and as many LISTs of the room's namespaces
/// by the instructor (`admin`), both timed — while attendee 01 (as its own
/// token) keeps [`STORM`] LISTs of its ConfigMaps in flight when `storm`.
/// Returns the heals, the instructor's LISTs and how many LISTs the storm made.
pub async fn heal_beside_a_storm(
    name: &str,
    admin: &kube::Client,
    rounds: usize,
    storm: bool,
) -> Result<(Vec<Duration>, Vec<Duration>, usize)> {
    let kubeconfig = xtask::room::room_dir(ROOM).join(format!("{PREFIX}-01.kubeconfig"));
    let stormer = xtask::lab::kubeconfig::client(&kubeconfig).await?;
    let lists = std::sync::atomic::AtomicUsize::new(0);
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let storms = (0..if storm { STORM } else { 0 }).map(|_| {
        let (api, mut stopped) = (
            kube::Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(
                stormer.clone(),
                &format!("{PREFIX}-01"),
            ),
            stopped.clone(),
        );
        let lists = &lists;
        async move {
            while !*stopped.borrow_and_update() {
                // A refusal of the room's priority level (429) is part of the storm too.
                let _ = api.list(&Default::default()).await;
                lists.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        }
    });
    let measured = async {
        let measured = heal_and_list(name, admin, rounds).await;
        // Whatever happened: the storm ends with the measure.
        let _ = stop.send(true);
        measured
    };
    let (measured, _) = tokio::join!(measured, futures::future::join_all(storms));
    let (healed, listed) = measured?;
    Ok((healed, listed, lists.into_inner()))
}

/// `rounds` self-heals in lab `name`, each followed by a timed LIST of the room's
/// namespaces by the instructor (`admin`).
async fn heal_and_list(
    name: &str,
    admin: &kube::Client,
    rounds: usize,
) -> Result<(Vec<Duration>, Vec<Duration>)> {
    let (lab, mut heals) = warmed(name).await?;
    let namespaces = kube::Api::<k8s_openapi::api::core::v1::Namespace>::all(admin.clone());
    let room = kube::api::ListParams::default().labels(&format!("lab-kit.dev/room={ROOM}"));
    let (mut healed, mut listed) = (Vec::with_capacity(rounds), Vec::with_capacity(rounds));
    for _ in 0..rounds {
        healed.push(heals.once(&lab, Disturbance::Delete).await?);
        let started = Instant::now();
        namespaces.list(&room).await?;
        listed.push(started.elapsed());
    }
    Ok((healed, listed))
}

async fn warmed(name: &str) -> Result<(Lab, Rounds)> {
    let lab = Lab::find_named(name).await?;
    let mut heals = Rounds::new(&lab).await?;
    heals.warm_up(&lab).await?;
    Ok((lab, heals))
}

/// The grading of the room: per attendee, their program graded on one of
/// the instructor's labs (namespaces of their own), `graders` at once.
pub struct Graded {
    pub total: Duration,
    /// `grade --collect`'s table of the room.
    pub table: String,
    pub failures: Vec<String>,
}

/// The instructor's labs up, every attendee's program graded (the bench's
/// stands in for each: `my-controller`, built before the timing), the
/// room's table, the labs down.
pub fn grade(
    cluster: &Cluster,
    graders: usize,
    n: usize,
    timeline: &mut Timeline,
) -> Result<Graded> {
    let started = Instant::now();
    let program = labkit::project::target_dir().join("debug/my-controller");
    let results = labkit::project::target_dir().join("room-bench-grades");
    labkit::files::remove_dir(&results)?;
    std::fs::create_dir_all(&results)?;
    let labs: Vec<(String, String)> = (1..=graders)
        .map(|k| (format!("{ROOM}-grader-{k}"), format!("{ROOM}-grading-{k}")))
        .collect();
    let mut instructor = cargo(["xtask", "lab", "up", "--provider", "existing", "--registry"])
        .arg(&cluster.registry)
        .arg("--kubeconfig")
        .arg(cluster.kubeconfig.display().to_string());
    if let Some(context) = &cluster.context {
        instructor = instructor.args(["--context", context]);
    }
    let ups = labs.iter().map(|(name, namespace)| {
        let up = instructor.clone().args(["--name", name, "--namespace", namespace]);
        (format!("up-{name}"), up.arg("--create-namespace"))
    });
    let down = || {
        let made = labs.iter().filter(|(name, _)| labkit::project::lab_dir(name).exists());
        let downs = made.map(|(name, _)| {
            (format!("down-{name}"), cargo(["xtask", "lab", "down", "--name", name]))
        });
        side_by_side::failed(&side_by_side::run(LOGS, downs.collect()))
    };
    let up_failed = side_by_side::failed(&side_by_side::run(LOGS, ups.collect()));
    if !up_failed.is_empty() {
        let down_failed = down();
        bail!("the instructor's lab up failed: {up_failed:?} {down_failed:?}");
    }
    let grades = graded_by(&labs, n, &program, &results);
    let mut failures = Vec::new();
    for (i, span, ok, log) in grades {
        timeline.add(i, Phase::Graded, span, ok);
        if !ok {
            failures.push(format!(
                "grade of {PREFIX}-{:02}:\n{}",
                i + 1,
                labkit::files::tail(&log, 15)
            ));
        }
    }
    let collect = cargo(["xtask", "grade", "--collect", "--room", ROOM]);
    let collect = collect.env("KUBECONFIG", cluster.kubeconfig.display().to_string());
    let table = collect.read().unwrap_or_else(|e| format!("(grade --collect: {e:#})"));
    failures.extend(down());
    if failures.len() == n {
        bail!("no grade passed:\n{}", failures.join("\n"));
    }
    Ok(Graded { total: started.elapsed(), table, failures })
}

/// Attendees `0..n`'s programs graded, each instructor's lab (name,
/// namespace) taking the next from one queue: per grade, who, its span,
/// whether it passed, its log.
fn graded_by(
    labs: &[(String, String)],
    n: usize,
    program: &Path,
    results: &Path,
) -> Vec<(usize, (Instant, Instant), bool, PathBuf)> {
    let next = Mutex::new(0..n);
    let grades = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for (name, namespace) in labs {
            let (next, grades) = (&next, &grades);
            scope.spawn(move || {
                // `let else`, not `while let`: the queue's lock is let go before the grade.
                loop {
                    let Some(i) = next.lock().expect("the queue").next() else { break };
                    let who = format!("{PREFIX}-{:02}", i + 1);
                    let grade =
                        ["xtask", "grade", "--name", name, "--lang", "en", "--attendee", &who];
                    let kubeconfig = xtask::room::room_dir(ROOM).join(format!("{who}.kubeconfig"));
                    let cmd = cargo(grade)
                        .arg("--room")
                        .path(&kubeconfig)
                        .args([
                            "--",
                            &program.display().to_string(),
                            "--kubeconfig",
                            "{kubeconfig}",
                        ])
                        .args(["--namespace", namespace, "--listen", "127.0.0.1:0"]);
                    let log = results.join(format!("{who}.log"));
                    let start = Instant::now();
                    let ok = cmd.spawn_to_log(&log).and_then(|mut c| Ok(c.wait()?.success()));
                    let span = (start, Instant::now());
                    grades.lock().expect("the grades").push((i, span, matches!(ok, Ok(true)), log));
                }
            });
        }
    });
    grades.into_inner().expect("the grades")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_phase_is_each_attendees_span_and_from_the_first_start_to_the_last_end() {
        let origin = Instant::now();
        let mut timeline = Timeline::new(origin, 2);
        let at = |s: u64| origin + Duration::from_secs(s);
        timeline.add(0, Phase::Up, (at(1), at(4)), true);
        timeline.add(1, Phase::Up, (at(2), at(9)), false);
        timeline.add(1, Phase::Down, (at(20), at(21)), true);
        assert_eq!(timeline.of(Phase::Up), (vec![3.0, 7.0], 8.0));
        assert_eq!(timeline.of(Phase::Graded), (vec![], 0.0));
    }
}
