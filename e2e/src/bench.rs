//! The benchmark's measurements, as plain async functions like the
//! experiments: `cargo xtask bench` orders them, repeats them and reports.
//!
//! | module      | measures                                                          |
//! |-------------|-------------------------------------------------------------------|
//! | [`rounds`]  | one self-heal or correction round (through [`measure_until_desired`]) |
//! | [`floor`]   | the harness's own minimal loop, standing in for the controller    |
//! | [`quiet`]   | steady state (writes while right) and a burst of events           |
//! | [`load`]    | unrelated ConfigMaps: create many, delete them again              |
//! | [`usage`]   | RSS and CPU time of a process group, from `/proc`                 |
//!
//! [`measure_until_desired`]: crate::converge::measure_until_desired

pub mod floor;
pub mod load;
pub mod quiet;
pub mod rounds;
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
