//! "Watches, not polls": while nothing changes — the rerun's quiet window
//! and the hot-loop window after it — a program that reads my-config through
//! an informer asks the API server for no ConfigMap (its resyncs are served
//! from its cache); one that polls gets or lists it again and again. One
//! that asks as often while it holds a watch open is driven by events but
//! reads past its cache (the course's ④, "读走缓存").

use super::*;

/// Gets and lists of ConfigMaps a watching program may make in the window:
/// its initial list (when its first request was another), a relist after a
/// watch error, one more to spare — besides the lists of the relist the
/// hot-loop row provokes, which are allowed on top. The window is at least 8 s (the 5 s quiet
/// window and the 3 s margin): a 1 s poller makes 7 or more (docs/grade.md).
pub(super) const MOST_READS: u64 = 3;

/// The counts where the window began, and then what it saw.
#[derive(Default)]
pub(crate) struct ReadWindow {
    began: Option<(Counts, Instant)>,
    /// What it asked in the window, the window's length, and whether it held a watch open at its end.
    seen: Option<(Counts, Duration, bool)>,
    /// Lists the grader itself caused: the hot-loop row's relist ([`super::provoke`]).
    pub(super) provoked: u64,
}

impl Grading<'_> {
    /// The restarted program has made its first request: the window begins.
    pub(super) fn quiet_begins(&mut self) {
        let counts = self.proxy().counts();
        self.reads = ReadWindow { began: Some((counts, Instant::now())), ..ReadWindow::default() };
    }

    /// The hot-loop window is over with the program still running: the window ends.
    pub(super) fn quiet_ends(&mut self) {
        let Some((began, at)) = self.reads.began else { return };
        let watching = self.proxy().open_watches() > 0;
        self.reads.seen = Some((self.proxy().counts().since(&began), at.elapsed(), watching));
    }

    /// The row: not run when the window did not end with the program running.
    pub(super) fn watches(&mut self) {
        let Some((asked, window, watching)) = self.reads.seen else {
            self.push_not_run(RowId::Watches);
            return;
        };
        let most = MOST_READS + self.reads.provoked;
        let passed = asked.reads <= most;
        let seen = match (passed, watching) {
            (true, _) => "watches.pass",
            (false, true) => "watches.per_event",
            (false, false) => "watches.polled",
        };
        let values = [
            ("window", secs(window)),
            ("reads", asked.reads.to_string()),
            ("most", most.to_string()),
            ("gets", asked.gets.to_string()),
        ];
        self.push(RowId::Watches, passed, seen, values);
    }
}
