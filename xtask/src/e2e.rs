//! `cargo xtask e2e`: the e2e suite (`cargo test -p e2e`) against the current
//! lab, then a summary table of what each experiment measured.

use std::fmt::Write as _;
use std::{path::PathBuf, process::ExitCode, time::Instant};

use anyhow::{Context, Result, bail};
use labkit::lab_file::ControllerRuns;
use labkit::results::{self, Outcome};
use labkit::tr;
use serde_json::json;

use crate::cargo;
use crate::output::{self, Format};

/// The JSON document's name and version (docs/output.md).
const SCHEMA: &str = "lab-kit/e2e/v1";

/// What the whole suite should take on the envtest lab. Most of it is real
/// waiting: the watch faults sit out client-go's growing retry gaps, the
/// second-writer fault lets two controllers fight for 10 s.
const SUITE_BAR_SECONDS: f64 = 150.0;

/// Runs the suite (or the one experiment `only`) against lab `name`.
pub fn run(name: &str, only: Option<&str>, format: Format) -> Result<ExitCode> {
    let lab = labkit::lab::file_of(name)?;
    let results = results_file(name)?;
    // The course's examples run as binaries (e2e::examples), and so
    // does a second my-controller beside the lab's (faults: second_writer_paced).
    cargo::cargo(["build", "-p", "controller", "--bins", "--examples"]).run()?;
    let mut args = vec!["test", "-p", "e2e", "--test", "suite"];
    // Build first, so the wall time below is the suite's, not the compiler's.
    cargo::cargo([&args[..], &["--no-run"]].concat()).run()?;
    args.push("--");
    let filter = only.map(|word| ["--exact", word]);
    let expected =
        listed(&[&args[..], &["--list"], filter.as_ref().map_or(&[][..], |f| &f[..])].concat())?;
    args.extend(filter.iter().flatten());
    let started = Instant::now();
    // Deaf to a Ctrl-C, as xtask is while it waits: the suite finishes the running
    // experiment and puts the lab back, and the lab's lock is held until it has.
    let passed = cargo::cargo(&args)
        .deaf()
        .env("LAB_NAME", name)
        .env(results::RESULTS_ENV, results.display().to_string())
        .env(labkit::say::LANG_ENV, crate::locale::Lang::chosen().file_stem())
        .run()
        .is_ok();
    let wall = started.elapsed().as_secs_f64();
    let outcomes = results::read(&results)?;
    // Each restart of the controller is a pod rollout where it is a Deployment: no bar there.
    let bar =
        matches!(lab.controller_runs(), ControllerRuns::Process(_)).then_some(SUITE_BAR_SECONDS);
    let summary = summary(&outcomes, &expected, only.is_none(), wall, (name, &lab.provider, bar));
    report(format, &summary, &mut std::io::stdout().lock())?;
    // docs/e2e.md links to what a real run printed.
    if only.is_none() {
        labkit::project::write_sample(&format!("e2e-{}.md", lab.provider), &summary.text)?;
    }
    if !passed || outcomes.len() != expected.len() || summary.failed > 0 {
        if outcomes.len() != expected.len() {
            eprintln!(
                "{}",
                tr!(
                    "expected {expected} results, got {got}: see the test output above",
                    expected = expected.len(),
                    got = outcomes.len()
                )
            );
        }
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

/// The suite's tests, in its order, as its `--list` prints them (`args`: the
/// cargo command with `--list` and the filter; an unknown name fails there,
/// with the names it knows).
fn listed(args: &[&str]) -> Result<Vec<String>> {
    let output = cargo::cargo(args).output()?;
    if !output.status.success() {
        // The suite's own line says what is wrong; cargo's around it is noise here.
        let stderr = String::from_utf8_lossy(&output.stderr);
        let said = stderr.lines().find(|line| line.starts_with("no experiment"));
        bail!("{}", said.unwrap_or(stderr.trim()));
    }
    let list = String::from_utf8_lossy(&output.stdout);
    Ok(list.lines().filter_map(|line| line.strip_suffix(": test")).map(String::from).collect())
}

/// What a run found, as the table people read and as `-o json`'s document.
struct Summary {
    text: String,
    document: serde_json::Value,
    failed: usize,
}

/// The summary of `outcomes` of a run that expected the tests `expected`, in
/// the suite's order (`whole`: the whole suite) and took `wall` seconds on `lab` (its name,
/// its provider, and the suite's bar there if it has one).
fn summary(
    outcomes: &[Outcome],
    expected: &[String],
    whole: bool,
    wall: f64,
    lab: (&str, &str, Option<f64>),
) -> Summary {
    let (name, provider, bar) = lab;
    // In the suite's order.
    let mut outcomes: Vec<&Outcome> = outcomes.iter().collect();
    outcomes
        .sort_by_key(|o| expected.iter().position(|e| *e == o.experiment).unwrap_or(usize::MAX));
    let mut text = table(&outcomes);
    let ok = outcomes.iter().filter(|o| o.passed).count();
    let not_run: Vec<&Outcome> = outcomes.iter().copied().filter(|o| o.not_run.is_some()).collect();
    // An experiment with no result (the suite stopped early) counts as failed.
    let failed = expected.len() - (ok + not_run.len()).min(expected.len());
    // The plain closing line CI reads: "e2e: N passed, N not run, N failed".
    let closing = tr!(
        "e2e: {ok} passed, {not_run} not run, {failed} failed",
        ok,
        not_run = not_run.len(),
        failed
    );
    let _ = writeln!(text, "{closing}");
    for (o, why) in not_run.iter().filter_map(|o| Some((o, o.not_run.as_deref()?))) {
        let _ = writeln!(text, "  {}: {why}", o.experiment);
    }
    // Repeated below the table: a CI log cut short keeps its last lines.
    for o in outcomes.iter().filter(|o| !o.passed && o.not_run.is_none()) {
        let line =
            tr!("  {experiment}: FAILED: {detail}", experiment = o.experiment, detail = o.detail);
        let _ = writeln!(text, "{line}");
    }
    let _ = writeln!(text, "{}", wall_line(wall, whole, provider, bar));
    let results: Vec<serde_json::Value> = outcomes
        .into_iter()
        .map(|o| {
            json!({
                "experiment": o.experiment,
                "result": result_word(o),
                "latency_ms": o.latency_ms,
                "detail": o.detail,
                "warnings": o.warnings,
                "not_run": o.not_run,
                "wall_seconds": o.wall_s,
            })
        })
        .collect();
    let document = json!({
        "schema": SCHEMA,
        "lab": name,
        "provider": provider,
        "passed": ok,
        "not_run": not_run.len(),
        "failed": failed,
        "expected": expected.len(),
        "wall_seconds": wall,
        "bar_seconds": if whole { bar } else { None },
        "results": results,
    });
    Summary { text, document, failed }
}

/// The suite's wall-time line: against the envtest `bar` (over it, when the `whole` suite is).
fn wall_line(wall: f64, whole: bool, provider: &str, bar: Option<f64>) -> String {
    let wall_s = format!("{wall:.1}");
    let Some(bar) = bar else {
        return tr!("suite wall time {wall} s on {provider}", wall = wall_s, provider);
    };
    let line = tr!(
        "suite wall time {wall} s (bar for the whole suite on envtest: {bar} s)",
        wall = wall_s,
        bar = format!("{bar:.0}")
    );
    if whole && wall > bar { line + &tr!(" — over the bar") } else { line }
}

/// The result, on `out` (stdout: progress and the suite's own output are on stderr).
fn report(format: Format, summary: &Summary, out: &mut dyn std::io::Write) -> Result<()> {
    match format {
        Format::Text => {
            out.write_all(summary.text.as_bytes()).with_context(|| tr!("cannot print the table"))
        }
        Format::Json => output::json(out, &summary.document),
    }
}

/// `target/e2e/<lab>.jsonl`, emptied for this run (one a lab: suites on two labs can run at once).
fn results_file(lab: &str) -> Result<PathBuf> {
    let dir = labkit::project::target_dir().join("e2e");
    labkit::files::create_dir(&dir)?;
    let path = dir.join(format!("{lab}.jsonl"));
    labkit::files::write_public(&path, "")?;
    Ok(path)
}

/// `pass`, `FAIL` or `not run`, as the JSON says it (always English: docs/output.md).
fn result_word(o: &Outcome) -> &'static str {
    match (o.passed, &o.not_run) {
        (_, Some(_)) => "not run",
        (true, None) => "pass",
        (false, None) => "FAIL",
    }
}

/// The summary table of `outcomes`, in their order.
fn table(outcomes: &[&Outcome]) -> String {
    let heading = tr!("| experiment | result | latency | measured |");
    let mut text = format!("\n{heading}\n|---|---|---|---|\n");
    for o in outcomes {
        let latency = o.latency_ms.map(|ms| format!("{ms:.1} ms")).unwrap_or_else(|| "—".into());
        let result = labkit::say::translate(result_word(o), &[]);
        let _ = writeln!(text, "| {} | {result} | {latency} | {} |", o.experiment, o.detail);
        let warn = tr!("warn");
        for w in &o.warnings {
            let _ = writeln!(text, "|   | {warn} |   | {w} |");
        }
    }
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcomes() -> Vec<Outcome> {
        let first = e2e::all().next().unwrap().name;
        let second = e2e::all().nth(1).unwrap().name;
        let third = e2e::all().nth(2).unwrap().name;
        vec![
            Outcome {
                experiment: first.into(),
                passed: true,
                latency_ms: Some(4.2),
                detail: "healed".into(),
                warnings: vec!["slow start".into()],
                wall_s: 1.5,
                not_run: None,
            },
            Outcome {
                experiment: second.into(),
                passed: false,
                latency_ms: None,
                detail: "not healed within 10 s".into(),
                warnings: vec![],
                wall_s: 10.0,
                not_run: None,
            },
            Outcome {
                experiment: third.into(),
                passed: false,
                latency_ms: None,
                detail: String::new(),
                warnings: vec![],
                wall_s: 0.0,
                not_run: Some("needs a kind lab".into()),
            },
        ]
    }

    /// The table is the verb's result: what `run` hands to stdout, whole;
    /// `-o json` puts the document there instead, the table nowhere.
    #[test]
    fn the_result_is_the_table_or_the_document_and_nothing_else() {
        let names: Vec<String> = e2e::all().take(3).map(|e| e.name.to_string()).collect();
        let summary =
            summary(&outcomes(), &names, false, 12.5, ("lab1", "envtest", Some(SUITE_BAR_SECONDS)));
        let mut stdout = Vec::new();
        report(Format::Text, &summary, &mut stdout).unwrap();
        let text = String::from_utf8(stdout).unwrap();
        assert_eq!(text, summary.text);
        assert!(text.contains("| experiment | result | latency | measured |"), "{text}");
        assert!(text.contains("e2e: 1 passed, 1 not run, 1 failed"), "{text}");
        let mut stdout = Vec::new();
        report(Format::Json, &summary, &mut stdout).unwrap();
        let document: serde_json::Value = serde_json::from_slice(&stdout).unwrap();
        assert_eq!(document, summary.document);
        assert_eq!(summary.failed, 1);
    }

    #[test]
    fn the_json_document_has_the_documented_fields() {
        let names: Vec<String> = e2e::all().map(|e| e.name.to_string()).collect();
        let whole = names.len();
        let summary =
            summary(&outcomes(), &names, true, 140.0, ("lab1", "envtest", Some(SUITE_BAR_SECONDS)));
        let document = &summary.document;
        labkit::json_doc::assert_documented(document);
        assert_eq!(document["schema"], SCHEMA);
        assert_eq!(document["failed"], whole - 2);
        assert_eq!(document["results"][1]["result"], "FAIL");
        assert_eq!(document["bar_seconds"], SUITE_BAR_SECONDS);
    }
}
