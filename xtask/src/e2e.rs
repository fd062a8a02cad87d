//! `cargo xtask e2e`: the e2e suite (`cargo test -p e2e`) against the current
//! lab, then a summary table of what each experiment measured.

use std::fmt::Write as _;
use std::{path::PathBuf, process::ExitCode, time::Instant};

use anyhow::{Context, Result, bail};
use e2e::results::{self, Outcome};
use labkit::lab_file::{LabFile, ProviderKind};

use crate::cargo;

/// What the whole suite should take on the envtest lab. Most of it is real
/// waiting: the watch faults sit out client-go's growing retry gaps, the
/// second-writer fault lets two controllers fight for 10 s.
const SUITE_BAR_SECONDS: f64 = 150.0;

/// Runs the suite (or the one experiment `only`) against lab `name`.
pub fn run(name: &str, only: Option<&str>) -> Result<ExitCode> {
    let Some(lab) = LabFile::read(&labkit::project::lab_dir(name))? else {
        bail!("no lab named {name} is up: run `cargo xtask lab up --name {name}` first");
    };
    let filter = match only {
        Some(wanted) => {
            let experiment = e2e::find(wanted).with_context(|| {
                let known: Vec<_> =
                    e2e::all().map(|e| format!("{} ({})", e.aliases[0], e.name)).collect();
                format!("no experiment {wanted:?}; known: {}", known.join(", "))
            })?;
            Some(experiment.name)
        }
        None => None,
    };
    let results = results_file(name)?;
    // The course's examples run as binaries (e2e::examples), and so
    // does a second my-controller beside the lab's (faults: second_writer_paced).
    cargo::cargo(["build", "-p", "controller", "--bins", "--examples"]).run()?;
    let mut args = vec!["test", "-p", "e2e", "--test", "suite"];
    // Build first, so the wall time below is the suite's, not the compiler's.
    cargo::cargo([&args[..], &["--no-run"]].concat()).run()?;
    args.push("--");
    if let Some(test) = filter {
        args.extend(["--exact", test]);
    }
    let started = Instant::now();
    let passed = cargo::cargo(&args)
        .env("LAB_NAME", name)
        .env(results::RESULTS_ENV, results.display().to_string())
        .run()
        .is_ok();
    let wall = started.elapsed().as_secs_f64();
    let outcomes = results::read(&results)?;
    let mut summary = table(&outcomes);
    let expected = if filter.is_some() { 1 } else { e2e::all().count() };
    let ok = outcomes.iter().filter(|o| o.passed).count();
    let not_run: Vec<&Outcome> = outcomes.iter().filter(|o| o.not_run.is_some()).collect();
    let failed = expected - (ok + not_run.len()).min(expected);
    // The plain closing line CI reads: "e2e: N passed, N not run, N failed".
    let _ = writeln!(summary, "e2e: {ok} passed, {} not run, {failed} failed", not_run.len());
    for (o, why) in not_run.iter().filter_map(|o| Some((o, o.not_run.as_deref()?))) {
        let _ = writeln!(summary, "  {}: {why}", o.experiment);
    }
    // Repeated below the table: a CI log cut short keeps its last lines.
    for o in outcomes.iter().filter(|o| !o.passed && o.not_run.is_none()) {
        let _ = writeln!(summary, "  {}: FAILED: {}", o.experiment, o.detail);
    }
    if lab.provider == ProviderKind::Envtest {
        let over =
            if filter.is_none() && wall > SUITE_BAR_SECONDS { " — over the bar" } else { "" };
        let _ = writeln!(
            summary,
            "suite wall time {wall:.1} s (bar for the whole suite on envtest: {SUITE_BAR_SECONDS:.0} s){over}"
        );
    } else {
        // Each restart of the controller is a pod rollout here: no bar.
        let _ = writeln!(summary, "suite wall time {wall:.1} s on {}", lab.provider);
    }
    eprint!("{summary}");
    // docs/e2e.md links to what a real run printed.
    if filter.is_none() {
        let mode = if lab.controller.container.is_some() { "-container" } else { "" };
        labkit::project::write_sample(&format!("e2e-{}{mode}.md", lab.provider), &summary)?;
    }
    if !passed
        || outcomes.len() != expected
        || outcomes.iter().any(|o| !o.passed && o.not_run.is_none())
    {
        if outcomes.len() != expected {
            eprintln!(
                "expected {expected} results, got {}: see the test output above",
                outcomes.len()
            );
        }
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

/// `target/e2e/<lab>.jsonl`, emptied for this run (one a lab: suites on two labs can run at once).
fn results_file(lab: &str) -> Result<PathBuf> {
    let dir = labkit::project::target_dir().join("e2e");
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let path = dir.join(format!("{lab}.jsonl"));
    std::fs::write(&path, "").with_context(|| format!("cannot write {}", path.display()))?;
    Ok(path)
}

/// The summary table, in the suite's order.
fn table(outcomes: &[Outcome]) -> String {
    let order = |o: &Outcome| e2e::all().position(|e| e.name == o.experiment).unwrap_or(usize::MAX);
    let mut sorted: Vec<&Outcome> = outcomes.iter().collect();
    sorted.sort_by_key(|o| order(o));
    let mut text =
        String::from("\n| experiment | result | latency | measured |\n|---|---|---|---|\n");
    for o in sorted {
        let latency = o.latency_ms.map(|ms| format!("{ms:.1} ms")).unwrap_or_else(|| "—".into());
        let result = match (o.passed, &o.not_run) {
            (_, Some(_)) => "not run",
            (true, None) => "pass",
            (false, None) => "FAIL",
        };
        let _ = writeln!(text, "| {} | {result} | {latency} | {} |", o.experiment, o.detail);
        for w in &o.warnings {
            let _ = writeln!(text, "|   | warn |   | {w} |");
        }
    }
    text.push('\n');
    text
}
