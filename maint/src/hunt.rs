//! `cargo maint hunt`: a flake hunt. The test command's lab parts again and again, as CI
//! runs them (each round `cargo maint test --only envtest` beside `--only docker`: fresh
//! labs on warm caches, every suite and lab test), and the grader's process-group tests,
//! the last rounds with a CPU hog on each core; then every test's passes over its runs,
//! idle and busy. A test that failed once is a flake, to be fixed at its cause.

use std::collections::{BTreeMap, BTreeSet};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::Result;

use crate::side_by_side;

#[derive(clap::Args)]
pub struct HuntArgs {
    /// Rounds of the lab parts.
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// How many of the rounds (the last ones), and of the process-group runs, have a CPU
    /// hog on each core.
    #[arg(long, default_value_t = 2)]
    busy: usize,
    /// Runs of the grader's process-group tests (`grader::program::group`).
    #[arg(long, default_value_t = 20)]
    group_runs: usize,
    /// The lab parts each round runs (`cargo maint test --only PART`).
    #[arg(long, value_enum, default_values = ["envtest", "docker"])]
    part: Vec<crate::test::Part>,
}

/// Each test's (passes, runs), idle and busy.
type Tally = BTreeMap<String, [(usize, usize); 2]>;

pub fn run(args: HuntArgs) -> Result<ExitCode> {
    let mut tally = Tally::new();
    // One hunt's logs: an earlier, longer one's last rounds would otherwise look like this one's.
    let _ = std::fs::remove_dir_all(labkit::project::target_dir().join("hunt"));
    for round in 0..args.rounds {
        let busy = round + args.busy >= args.rounds;
        let parts = args.part.iter().map(|part| {
            let only = clap::ValueEnum::to_possible_value(part).expect("a named part");
            let name = format!("round-{round}-{}", only.get_name());
            (name, xtask::cargo::cargo(["maint", "test", "--only", only.get_name()]))
        });
        crate::test::section(format!("round {} of {}{}", round + 1, args.rounds, hogged(busy)));
        let ran = with_hog(busy, || side_by_side::run("hunt", parts.collect()));
        for r in &ran {
            count(&mut tally, busy, &std::fs::read_to_string(&r.log).unwrap_or_default());
            // A part can fail outside any test (a lab that does not come up).
            add(
                &mut tally,
                busy,
                &format!("the part {}", r.what.rsplit('-').next().unwrap_or_default()),
                r.ok,
            );
        }
    }
    crate::test::section(format!("the grader's process-group tests, {} runs", args.group_runs));
    for run in 0..args.group_runs {
        let busy =
            run >= args.group_runs.saturating_sub(args.group_runs * args.busy / args.rounds.max(1));
        let cmd = xtask::cargo::cargo(["test", "-p", "grader", "--lib", "program::group"]);
        let output = with_hog(busy, || cmd.output())?;
        count(&mut tally, busy, &String::from_utf8_lossy(&output.stdout));
    }
    let table = table(&tally);
    print!("{table}");
    labkit::project::write_sample("flake-hunt.md", &table)?;
    let flaky = tally.values().any(|t| t.iter().any(|(passed, runs)| passed < runs));
    Ok(if flaky || tally.is_empty() { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

fn hogged(busy: bool) -> &'static str {
    if busy { ", a CPU hog on each core" } else { "" }
}

/// `work` with, when `busy`, a thread spinning on each core until it ends.
fn with_hog<T>(busy: bool, work: impl FnOnce() -> T) -> T {
    let stop = AtomicBool::new(false);
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    std::thread::scope(|scope| {
        for _ in 0..if busy { cores } else { 0 } {
            scope.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            });
        }
        let done = work();
        stop.store(true, Ordering::Relaxed);
        done
    })
}

/// Adds the verdicts of libtest's (or libtest-mimic's) output in `log`, one test binary's run
/// at a time (from its `running N tests` line): every test it started (`test NAME ... `; the
/// verdict may come lines later, after the test's own output), failed when the run's
/// `failures:` list names it. An ignored test is not counted.
fn count(tally: &mut Tally, busy: bool, log: &str) {
    let runs = log.split("\nrunning ").skip(1);
    for run in runs {
        let mut failed = BTreeSet::new();
        let mut lines = run.lines();
        while let Some(line) = lines.next() {
            if line == "failures:" {
                let names = lines.by_ref().map_while(|l| l.strip_prefix("    "));
                failed.extend(names.map(str::trim));
            }
        }
        for line in run.lines() {
            let started = line.strip_prefix("test ").and_then(|l| l.split_once(" ... "));
            match started {
                Some((_, verdict)) if verdict.trim() == "ignored" => {}
                Some((name, _)) => add(tally, busy, name.trim(), !failed.contains(name.trim())),
                None => {}
            }
        }
    }
}

fn add(tally: &mut Tally, busy: bool, name: &str, passed: bool) {
    let (passes, runs) = &mut tally.entry(name.to_string()).or_default()[usize::from(busy)];
    *passes += usize::from(passed);
    *runs += 1;
}

/// The tests that failed at least once first, then the rest in one line.
fn table(tally: &Tally) -> String {
    let cell = |(passed, runs): (usize, usize)| format!("{passed} of {runs}");
    let mut out = String::from("| test | passed, idle | passed, busy |\n|---|---|---|\n");
    let (flaky, steady): (Vec<_>, Vec<_>) =
        tally.iter().partition(|(_, t)| t.iter().any(|(passed, runs)| passed < runs));
    for (name, [idle, busy]) in &flaky {
        out += &format!("| {name} | {} | {} |\n", cell(*idle), cell(*busy));
    }
    let runs: usize = steady.iter().map(|(_, t)| t[0].1 + t[1].1).sum();
    out += &format!("\n{} tests passed every run ({runs} runs in all)\n", steady.len());
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn libtests_verdicts_are_counted_idle_and_busy_and_failures_listed_first() {
        let mut tally = super::Tally::new();
        let log = "\nrunning 3 tests\ntest a::one ... ok\ntest two                 ... $ started\n\
                   output of two\nFAILED\ntest three ... ignored\n\nfailures:\n\n---- two ----\n\
                   it broke\n    indented output\n\nfailures:\n    two\n\n\
                   test result: FAILED. 1 passed; 1 failed\n\nrunning 1 test\ntest two ... ok\n";
        super::count(&mut tally, false, log);
        super::count(&mut tally, true, "\nrunning 2 tests\ntest two ... ok\ntest a::one ... ok\n");
        assert_eq!(tally["two"], [(1, 2), (1, 1)]);
        assert_eq!(tally["a::one"], [(1, 1), (1, 1)]);
        assert!(!tally.contains_key("three") && !tally.contains_key("indented"));
        assert_eq!(
            super::table(&tally),
            "| test | passed, idle | passed, busy |\n|---|---|---|\n| two | 1 of 2 | 1 of 1 |\n\
             \n1 tests passed every run (2 runs in all)\n"
        );
    }
}
