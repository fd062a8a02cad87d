//! Faults against the current lab, one test each (`serial`: they share the
//! lab with the experiments). Without a lab they fail, saying what to run.

use e2e::faults;
use serial_test::serial;

#[test]
#[serial]
fn role_loses_create() {
    e2e::run_test("role_loses_create", faults::role_loses_create);
}

/// Every fault the harness knows has a test here (and so runs in CI).
#[test]
fn every_fault_has_a_test() {
    let source = include_str!("faults.rs");
    for fault in faults::ALL {
        assert!(
            source.contains(&format!("fn {}()", fault.name)),
            "no test for fault {}",
            fault.name
        );
    }
}
