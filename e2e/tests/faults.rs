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
fn list_refused_backs_off() {
    e2e::run_test("list_refused_backs_off", faults::list_refused_backs_off);
}

#[test]
#[serial]
fn watch_refused_not_ready() {
    e2e::run_test("watch_refused_not_ready", faults::watch_refused_not_ready);
}

#[test]
#[serial]
fn binary_data_removed() {
    e2e::run_test("binary_data_removed", faults::binary_data_removed);
}

#[test]
#[serial]
fn owned_elsewhere_left_alone() {
    e2e::run_test("owned_elsewhere_left_alone", faults::owned_elsewhere_left_alone);
}

#[test]
#[serial]
fn second_writer_paced() {
    e2e::run_test("second_writer_paced", faults::second_writer_paced);
}

#[test]
#[serial]
fn reconcile_cannot_hang() {
    e2e::run_test("reconcile_cannot_hang", faults::reconcile_cannot_hang);
}

#[test]
#[serial]
fn expiring_credentials() {
    e2e::run_test("expiring_credentials", faults::expiring_credentials);
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
