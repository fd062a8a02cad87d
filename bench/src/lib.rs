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
//! **The sides take turns round by round**: in the latency rounds the floor
//! and every subject run at once, each on a my-config of its own
//! ([`namespaces`]), and one round of each side follows another, so a slow
//! moment of a shared 2-core machine falls on neighbouring rounds of
//! different sides instead of on several of one. Every side is started
//! afresh in each of `--blocks` blocks, and each start is followed by one
//! unrecorded round of each kind, so no side pays for opening its
//! connections inside the timed window.
//!
//! **Which controllers**: my-controller and each peer (`--peer go`: the
//! course's own Go controller, [`peers::course_go`]; `--peer '<command>'`:
//! any other, `sh -c`, `KUBECONFIG` = the lab's controller kubeconfig, its
//! context naming the side's namespace), each run by the bench as a process
//! group it owns. my-controller is the *release* build by default, which
//! xtask builds first; the bar is for the release build. The steady window,
//! the burst and the unrelated ConfigMaps follow for each subject alone, in
//! the lab's namespace. The lab's own controller is stopped for the run and started again
//! at the end, whatever happened.
//!
//! Output: a table on stdout, `target/bench/bench-<unix time>.json` and
//! `.svg` (a CDF chart), and the same as `latest.json` / `latest.svg`.
//!
//! | module      | holds                                                             |
//! |-------------|-------------------------------------------------------------------|
//! | [`run`]     | one run: the phases above, in order                               |
//! | [`subject`] | a controller under test, a process group the bench owns           |
//! | [`namespaces`] | each side's namespace in the latency rounds, and its Role      |
//! | [`peers`]   | the peers: course-verbatim + course-go.patch, controller-runtime, stage 2 |
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
pub mod namespaces;
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
