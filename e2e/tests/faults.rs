//! Faults against the current lab, one test each (`serial`: they share the
//! lab with the experiments). Without a lab they fail, saying what to run.

use e2e::faults;
use serial_test::serial;

#[test]
#[serial]
fn api_server_restart() {
    e2e::run_test("api_server_restart", faults::api_server_restart);
}

#[test]
#[serial]
fn etcd_compaction() {
    e2e::run_test("etcd_compaction", faults::etcd_compaction);
}

#[test]
#[serial]
fn role_loses_create() {
    e2e::run_test("role_loses_create", faults::role_loses_create);
}

#[test]
#[serial]
fn conflict_storm() {
    e2e::run_test("conflict_storm", faults::conflict_storm);
}

#[test]
#[serial]
fn api_server_down_at_start() {
    e2e::run_test("api_server_down_at_start", faults::api_server_down_at_start);
}

#[test]
#[serial]
fn sigterm_graceful() {
    e2e::run_test("sigterm_graceful", faults::sigterm_graceful);
}

#[test]
#[serial]
fn bad_input_writes_nothing() {
    e2e::run_test("bad_input_writes_nothing", faults::bad_input_writes_nothing);
}

#[test]
#[serial]
fn immutable_drift() {
    e2e::run_test("immutable_drift", faults::immutable_drift);
}

#[test]
#[serial]
fn finalizer_holds_deletion() {
    e2e::run_test("finalizer_holds_deletion", faults::finalizer_holds_deletion);
}

#[test]
#[serial]
fn credentials_private() {
    e2e::run_test("credentials_private", faults::credentials_private);
}

/// Every fault the harness knows has a test here (and so runs in CI).
#[test]
fn every_fault_has_a_test() {
    e2e::suite::assert_each_has_a_test(include_str!("faults.rs"), faults::ALL);
}
