//! The benchmark behind `cargo maint bench`: how fast the controller heals,
//! and what it costs, next to a floor (no controller at all) and its peers.
//! What it measures, how the sides take turns and the bars: docs/bench.md.
//!
//! | module      | holds                                                             |
//! |-------------|-------------------------------------------------------------------|
//! | [`run`]     | one run: its phases, in order                                     |
//! | [`subject`] | a controller under test, a process group the bench owns           |
//! | [`places`]  | where each side keeps its my-config in the latency rounds, and its Role |
//! | [`peers`]   | the peers: course-verbatim + course-go.patch, controller-runtime, stage 2; the Go programs built here (the course's for the grader's tests too) |
//! | [`phases`]  | where a round's milliseconds go, from the API server's audit log  |
//! | [`rounds`]  | one self-heal or correction round (through [`measure_until_desired`]) |
//! | [`floor`]   | the harness's own minimal loop, standing in for the controller    |
//! | [`quiet`]   | steady state (writes while right) and a burst of events           |
//! | [`load`]    | unrelated ConfigMaps: create many, delete them again              |
//! | [`usage`]   | RSS and CPU time of a process group, from `/proc`                 |
//! | [`report`], [`stats`], [`render`], [`chart`] | the JSON file, percentiles, tables, the CDF chart |
//! | [`kept`]    | what the chart draws of a run, kept to redraw it                  |
//!
//! Test support, for tests only (the `test-support` feature; in `tests/support/`): `layout`, a picture's layout
//! as the drawing module placed it, and its faults.
//!
//! [`measure_until_desired`]: labkit::converge::measure_until_desired

pub mod chart;
pub mod floor;
pub mod kept;
#[cfg(any(test, feature = "test-support"))]
#[path = "../tests/support/layout.rs"]
pub mod layout;
pub mod load;
pub mod peers;
pub mod phases;
pub mod places;
pub mod quiet;
pub mod render;
pub mod report;
pub mod rounds;
pub mod run;
pub mod stats;
pub mod subject;
pub mod usage;

/// Progress of a long run on stderr ("self-heal 50/200"): about ten lines
/// per run, however long, and always the last one.
pub struct Progress {
    what: String,
    total: usize,
    done: usize,
    every: usize,
}

impl Progress {
    pub fn new(what: impl Into<String>, total: usize) -> Self {
        Progress { what: what.into(), total, done: 0, every: total.div_ceil(10).max(1) }
    }

    /// `n` more done; shows it when a tenth has passed or all are done.
    pub fn add(&mut self, n: usize) {
        let before = self.done / self.every;
        self.done += n;
        if self.done / self.every != before || self.done == self.total {
            labkit::progress!("  {} {}/{}", self.what, self.done.min(self.total), self.total);
        }
    }
}
