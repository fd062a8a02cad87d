//! The e2e suite against the current lab (`cargo xtask lab up`): every entry
//! of the registry (`e2e::all`: the course's experiments, the faults, the
//! step examples) is one test, named as its entry. One at a time: they share
//! one lab, one my-config and one controller. Without a lab they fail,
//! saying what to run; an entry that does not apply to the lab says so in one
//! line and is counted as not run.

use std::process::ExitCode;

use libtest_mimic::{Arguments, Failed, Trial};

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
        .map(|entry| Trial::test(entry.name, move || e2e::run_test(entry).map_err(Failed::from)))
        .collect();
    libtest_mimic::run(&args, tests).exit_code()
}
