//! The benchmark behind `cargo xtask bench`: how fast the controller heals,
//! and what it costs.
//!
//! Against the current lab (envtest), in one run:
//!
//! * **latency** — self-heal (delete → recreated) and drift correction
//!   (patch → data put back), `--rounds` times each, timed through a watch by
//!   the e2e suite's own [`measure_until_desired`];
//! * **the floor** — the same rounds with the controller stopped and the
//!   harness's minimal loop in its place ([`StandIn`]: watch → one write), so
//!   each controller figure is also a ratio to what the API server allows on
//!   this machine at this moment;
//! * **steady state** — writes and reconciles over `--steady` with a 1 s resync
//!   (must write nothing);
//! * **burst** — `--burst` patches at once: changes seen vs reconciles run;
//! * **cost** — RSS and CPU time from `/proc`, idle, after the rounds, and with
//!   `--unrelated` ConfigMaps in the namespace (created `--parallel` at a
//!   time, deleted again with one deletecollection).
//!
//! **Floor and controller alternate** in `--blocks` blocks (floor, controller,
//! floor, controller, …) rather than running one after the other: a 2-core
//! machine shared with other work drifts over a run (its neighbours' load,
//! etcd's growing history), and alternating spreads that drift over both
//! sides instead of charging it to one. Alternating every round would need
//! a controller restart per round; a few blocks keep restarts few. Each
//! block starts with one unrecorded round of each kind, so no side pays for
//! opening its connections inside the timed window.
//!
//! **Which controllers**: my-controller and each peer (`--peer go`: the
//! course's own Go controller, [`peers::course_go`]; `--peer '<command>'`:
//! any other, `sh -c`, `KUBECONFIG` = the lab's controller kubeconfig), each
//! run by the bench as a process group it owns. my-controller is the
//! *release* build by default, which xtask builds first; the bar is for the
//! release build. In each block the floor runs, then every subject in turn;
//! the steady window, the burst and the unrelated ConfigMaps follow for
//! each. The lab's own controller is stopped for the run and started again
//! at the end, whatever happened.
//!
//! Output: a table on stdout, `target/bench/bench-<unix time>.json` and
//! `.svg` (a CDF chart), and the same as `latest.json` / `latest.svg`.
//!
//! | module      | holds                                                             |
//! |-------------|-------------------------------------------------------------------|
//! | [`run`]     | one run: the phases above, in order                               |
//! | [`subject`] | a controller under test, a process group the bench owns           |
//! | [`peers`]   | the course's Go controller: course-verbatim + course-go.patch     |
//! | [`phases`]  | where a round's milliseconds go, from the API server's audit log  |
//! | [`rounds`]  | one self-heal or correction round (through [`measure_until_desired`]) |
//! | [`floor`]   | the harness's own minimal loop, standing in for the controller    |
//! | [`quiet`]   | steady state (writes while right) and a burst of events           |
//! | [`load`]    | unrelated ConfigMaps: create many, delete them again              |
//! | [`usage`]   | RSS and CPU time of a process group, from `/proc`                 |
//! | [`report`], [`stats`], [`chart`] | the JSON file and tables, percentiles, the CDF chart |
//!
//! [`measure_until_desired`]: e2e::converge::measure_until_desired
//! [`StandIn`]: floor::StandIn

pub mod chart;
pub mod floor;
pub mod load;
pub mod peers;
pub mod phases;
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

    /// One more done; shows it when a tenth has passed or all are done.
    pub fn tick(&mut self) {
        self.add(1);
    }

    /// `n` more done.
    pub fn add(&mut self, n: usize) {
        let before = self.done / self.every;
        self.done += n;
        if self.done / self.every != before || self.done == self.total {
            eprintln!("  {} {}/{}", self.what, self.done.min(self.total), self.total);
        }
    }
}
