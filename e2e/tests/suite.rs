//! The e2e suite against the current lab (`cargo xtask lab up`): every entry
//! of the registry (`e2e::all`: the course's experiments, the faults, the
//! step examples) is one test, named as its entry. One at a time: they share
//! one lab, one my-config and one controller. Without a lab they fail,
//! saying what to run; an entry that does not apply to the lab says so in one
//! line and is counted as not run.

use std::process::ExitCode;

use labkit::{
    lab,
    results::{self, Outcome},
    suite, tr,
};
use libtest_mimic::{Arguments, Failed, Trial};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Set by the first SIGINT, SIGTERM or SIGHUP ([`catch_signals`]).
static STOPPING: AtomicBool = AtomicBool::new(false);

/// For the whole run, on a thread of its own: a signal lets the running
/// experiment finish and the lab be restored (a fault puts back what it
/// changed, a Role among them), then the suite stops; a second one stops it
/// at once. Left to their default, a Ctrl-C would kill a fault half-way.
fn catch_signals() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        std::thread::spawn(|| {
            use tokio::signal::unix::{SignalKind, signal};
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build();
            runtime.expect("a tokio runtime").block_on(async {
                let kinds = [SignalKind::interrupt(), SignalKind::terminate(), SignalKind::hangup()];
                let mut signals: Vec<_> = kinds.map(|k| signal(k).expect("a signal handler")).into();
                loop {
                    let waits = signals.iter_mut().map(|s| Box::pin(s.recv()));
                    futures::future::select_all(waits).await;
                    if STOPPING.swap(true, Ordering::SeqCst) {
                        eprintln!("{}", tr!("a second signal: the suite stops now; `cargo xtask lab reset` if the lab is not as it was"));
                        std::process::exit(130);
                    }
                    eprintln!("{}", tr!("a signal: the running experiment finishes and the lab is restored, then the suite stops"));
                }
            });
        });
    });
}

fn main() -> ExitCode {
    let mut args = Arguments::from_args();
    args.test_threads = Some(1);
    // `--exact self-heal`: an alias names its entry, as `cargo xtask e2e --exp` takes it.
    if let (true, Some(word)) = (args.exact, args.filter.clone()) {
        let Some(entry) = e2e::find(&word) else {
            let known: Vec<_> =
                e2e::all().map(|e| format!("{} ({})", e.aliases[0], e.name)).collect();
            eprintln!("no experiment {word:?}; known: {}", known.join(", "));
            return ExitCode::from(2);
        };
        args.filter = Some(entry.name.to_string());
    }
    let tests = e2e::all()
        .map(|entry| Trial::test(entry.name, move || run_test(entry).map_err(Failed::from)))
        .collect();
    libtest_mimic::run(&args, tests).exit_code()
}

/// Runs `experiment` against the current lab as a test: an error when no lab
/// is up or the experiment fails (with the lab's diagnostics); records the
/// outcome for `cargo xtask e2e`'s summary either way.
pub fn run_test(experiment: &suite::Experiment) -> Result<(), String> {
    let name = experiment.name;
    catch_signals();
    if STOPPING.load(Ordering::SeqCst) {
        std::process::exit(130);
    }
    let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
    let outcome = runtime.block_on(async {
        let mut lab = match lab::Lab::find().await {
            Ok(lab) => lab,
            Err(e) => return Err(format!("{e:#}")),
        };
        // Said in one line and counted by the summary: never a silent skip.
        if let Some(why) = experiment.runs_on.skip_reason(lab.file()) {
            eprintln!("{name}: {why}");
            append(&Outcome {
                detail: why.clone(),
                not_run: Some(why),
                ..outcome(name, Duration::ZERO)
            });
            return Ok(());
        }
        let started = Instant::now();
        let result = (experiment.run)(&mut lab).await;
        let wall = started.elapsed();
        // What went wrong is read before the restore replaces the controller.
        let diagnostics = match &result {
            Err(_) => lab.diagnostics().await,
            Ok(_) => String::new(),
        };
        // Leave the lab as found even when the experiment failed half-way;
        // a lab that cannot be restored fails the test that left it so.
        let restored = lab.restore().await;
        let result = match (result, restored) {
            (Ok(_), Err(e)) => Err(e.context(tr!("could not restore the lab"))),
            (result, _) => result,
        };
        append(&measured(name, &result, wall));
        if STOPPING.load(Ordering::SeqCst) {
            eprintln!("{}", tr!("{name}: finished, the lab restored; the suite stops", name));
            std::process::exit(130);
        }
        match result {
            Ok(measured) => {
                for warning in &measured.warnings {
                    eprintln!("{}", tr!("warning: {warning}", warning));
                }
                eprintln!("{name}: {}", measured.detail);
                Ok(())
            }
            Err(e) => Err(format!("{e:#}\n\n{diagnostics}")),
        }
    });
    outcome.map_err(|message| tr!("{name} failed: {message}", name, message))
}

/// An outcome with its name and wall time: the rest is the run's.
fn outcome(name: &str, wall: Duration) -> Outcome {
    Outcome { experiment: name.to_string(), wall_s: wall.as_secs_f64(), ..Outcome::default() }
}

/// What a run measured, or why it failed (the error's first line).
fn measured(name: &str, result: &anyhow::Result<suite::Measured>, wall: Duration) -> Outcome {
    let base = outcome(name, wall);
    match result {
        Ok(m) => Outcome {
            passed: true,
            latency_ms: m.latency.map(|l| l.as_secs_f64() * 1000.0),
            detail: m.detail.clone(),
            warnings: m.warnings.clone(),
            ..base
        },
        Err(e) => {
            Outcome { detail: format!("{e:#}").lines().next().unwrap_or_default().into(), ..base }
        }
    }
}

/// Appends an outcome to `$E2E_RESULTS`; does nothing when it is unset.
fn append(outcome: &Outcome) {
    use std::io::Write as _;
    let Some(path) = std::env::var_os(results::RESULTS_ENV) else {
        return;
    };
    let line = serde_json::to_string(outcome).expect("plain data");
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut f| writeln!(f, "{line}"));
    if let Err(e) = written {
        let path = path.to_string_lossy();
        eprintln!("{}", tr!("cannot record the result in {path}: {error}", path, error = e));
    }
}
