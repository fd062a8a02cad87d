//! The course's experiments against the current lab (`cargo xtask lab up`),
//! one test each. They share one object and one controller, hence `serial`.
//! Without a lab they fail, saying what to run: they never skip.

use e2e::experiments;
use serial_test::serial;

#[test]
#[serial]
fn create_on_start() {
    e2e::run_test("create_on_start", experiments::create_on_start);
}

#[test]
#[serial]
fn self_heal_on_delete() {
    e2e::run_test("self_heal_on_delete", experiments::self_heal_on_delete);
}

#[test]
#[serial]
fn correct_on_patch() {
    e2e::run_test("correct_on_patch", experiments::correct_on_patch);
}

#[test]
#[serial]
fn idempotent_rerun() {
    e2e::run_test("idempotent_rerun", experiments::idempotent_rerun);
}

#[test]
#[serial]
fn version_matching() {
    e2e::run_test("version_matching", experiments::version_matching);
}

#[test]
#[serial]
fn dedup() {
    e2e::run_test("dedup", experiments::dedup);
}

#[test]
#[serial]
fn no_hot_loop() {
    e2e::run_test("no_hot_loop", experiments::no_hot_loop);
}

#[test]
#[serial]
fn least_privilege() {
    e2e::run_test("least_privilege", experiments::least_privilege);
}

#[test]
#[serial]
fn metrics_complete() {
    e2e::run_test("metrics_complete", experiments::metrics_complete);
}

#[test]
#[serial]
fn pod_contract() {
    e2e::run_test("pod_contract", experiments::pod_contract);
}

/// Every experiment the harness knows has a test here (and so runs in CI).
#[test]
fn every_experiment_has_a_test() {
    e2e::suite::assert_each_has_a_test(include_str!("experiments.rs"), experiments::ALL);
}
