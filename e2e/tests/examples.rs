//! The course's step examples against the current lab (their binaries are
//! built by `cargo test`, so by `cargo xtask test`); step 4 is graded by
//! `cargo xtask grade` instead (xtask/tests/grade.rs). Serial with the other
//! suites, which share the lab.

use e2e::examples;
use serial_test::serial;

#[test]
#[serial]
fn step1_list_pods() {
    e2e::run_test("step1_list_pods", examples::step1_list_pods);
}

#[test]
#[serial]
fn step2_watch_pods() {
    e2e::run_test("step2_watch_pods", examples::step2_watch_pods);
}

#[test]
#[serial]
fn step3_queue() {
    e2e::run_test("step3_queue", examples::step3_queue);
}

#[test]
#[serial]
fn step4_heals_across_a_relist() {
    e2e::run_test("step4_heals_across_a_relist", examples::step4_heals_across_a_relist);
}

#[test]
#[serial]
fn stage2_crd() {
    e2e::run_test("stage2_crd", examples::stage2_crd);
}

/// Every example the harness knows has a test here (and so runs in CI).
#[test]
fn every_example_has_a_test() {
    e2e::suite::assert_each_has_a_test(include_str!("examples.rs"), examples::ALL);
}
