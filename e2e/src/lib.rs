//! The e2e suite's registry: the course's experiments (from `grader`), the
//! kit's checks, the faults and the step examples, each run as one test of `tests/suite.rs`
//! against the current lab, its result recorded for `cargo xtask e2e`.
//! Tests only: no crate but the tests depends on this one.
//!
//! | module       | holds                                                      |
//! |--------------|------------------------------------------------------------|
//! | [`checks`]   | versions, no hot loop, least privilege, metrics, the pod   |
//! | [`etcd`]     | etcd's JSON gateway, for the faults and step 4's relist     |
//! | [`faults`]   | the controller keeping its promise when things go wrong    |
//! | [`examples`] | the course's step programs, run as a learner runs them     |
//!
//! Test support, for tests only (the `test-support` feature; in `tests/support/`): `pages`,
//! the course pages, typed as a learner types them.

pub mod checks;
pub mod etcd;
pub mod examples;
pub mod faults;
#[cfg(any(test, feature = "test-support"))]
#[path = "../tests/support/pages.rs"]
pub mod pages;

use grader::experiments;
use labkit::suite;

/// Everything the suite runs, in its order: experiments, faults, examples.
pub fn all() -> impl Iterator<Item = &'static suite::Experiment> {
    experiments::ALL.iter().chain(checks::ALL).chain(faults::ALL).chain(examples::ALL)
}

/// Finds an experiment, fault or example by test name or alias.
pub fn find(name: &str) -> Option<&'static suite::Experiment> {
    all().find(|e| e.name == name || e.aliases.contains(&name))
}
