//! The e2e suite against the current lab (`cargo xtask lab up`): every entry
//! of the registry (`e2e::all`: the course's experiments, the faults, the
//! step examples) is one test, named as its entry. One at a time: they share
//! one lab, one my-config and one controller. Without a lab they fail,
//! saying what to run; an entry that does not apply to the lab says so in one
//! line and is counted as not run.

use libtest_mimic::{Arguments, Failed, Trial};

fn main() -> std::process::ExitCode {
    let mut args = Arguments::from_args();
    args.test_threads = Some(1);
    let tests = e2e::all()
        .map(|entry| Trial::test(entry.name, move || e2e::run_test(entry).map_err(Failed::from)))
        .collect();
    libtest_mimic::run(&args, tests).exit_code()
}
