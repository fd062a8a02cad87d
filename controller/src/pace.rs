//! Corrections of one key, paced: a few at once, then at growing gaps.
//!
//! Someone who edits my-config by hand is corrected at once. A second writer
//! that keeps putting other data back — another instance with other
//! `--data`, a CI job, an operator — is not fought at API-server speed: after
//! [`FREE`] corrections in a row, each further one waits 1 s, 2 s, 4 s, 8 s;
//! a correction more than [`QUIET`] after the previous one starts a new row.
//! Two such writers then change the object about eight times in half a
//! minute each, instead of hundreds of times a second; and a person's edit
//! after a fight waits at most one gap.

use std::time::Duration;

use tokio::time::Instant;

/// Corrections in a row that are written at once.
pub const FREE: u32 = 3;
/// The first wait after those; it doubles with each further correction.
const FIRST_WAIT: Duration = Duration::from_secs(1);
/// A correction this long after the previous one starts a new row.
pub const QUIET: Duration = Duration::from_secs(10);

#[derive(Debug, Default)]
pub struct Pace {
    last: Option<Instant>,
    /// Corrections in the current row.
    row: u32,
    /// The correction whose wait was last reported (see [`Pace::news`]).
    reported: Option<Instant>,
    /// `--no-pacing`: no correction ever waits.
    off: bool,
}

impl Pace {
    /// A pace that never makes a correction wait.
    pub fn off() -> Self {
        Pace { off: true, ..Pace::default() }
    }

    /// How long to wait before the next correction may be written (`None`: now).
    pub fn wait(&mut self, now: Instant) -> Option<Duration> {
        if self.off {
            return None;
        }
        let last = self.last?;
        let since = now.saturating_duration_since(last);
        if since > QUIET {
            self.row = 0;
        }
        if self.row < FREE {
            return None;
        }
        let doubling = self.row - FREE;
        let gap = FIRST_WAIT.saturating_mul(1 << doubling.min(16));
        gap.checked_sub(since).filter(|left| !left.is_zero())
    }

    /// A correction was written now.
    pub fn corrected(&mut self, now: Instant) {
        if self.last.is_some_and(|last| now.saturating_duration_since(last) > QUIET) {
            self.row = 0;
        }
        self.last = Some(now);
        self.row += 1;
    }

    /// Whether the wait after the last correction is news. Every event
    /// during a wait reconciles again and finds the same wait: it is
    /// reported once, not once per event.
    pub fn news(&mut self) -> bool {
        let news = self.reported != self.last;
        self.reported = self.last;
        news
    }

    /// Corrections in the current row.
    pub fn row(&self) -> u32 {
        self.row
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn off_never_waits() {
        let mut pace = Pace::off();
        for _ in 0..20 {
            assert_eq!(pace.wait(Instant::now()), None);
            pace.corrected(Instant::now());
        }
        assert_eq!(pace.row(), 20);
    }

    #[tokio::test(start_paused = true)]
    async fn three_at_once_then_growing_gaps_then_a_quiet_minute_starts_over() {
        let mut pace = Pace::default();
        let mut written = Vec::new();
        let start = Instant::now();
        // A writer that undoes every correction at once: correct whenever allowed.
        while start.elapsed() < Duration::from_secs(40) {
            match pace.wait(Instant::now()) {
                None => {
                    pace.corrected(Instant::now());
                    written.push(start.elapsed().as_secs());
                }
                Some(wait) => tokio::time::advance(wait).await,
            }
        }
        // 3 at once, then 1, 2, 4, 8 s apart; the next gap (16 s) is past
        // QUIET, so that correction starts a new row.
        assert_eq!(written, [0, 0, 0, 1, 3, 7, 15, 31, 31, 31, 32, 34, 38]);
        tokio::time::advance(QUIET + Duration::from_secs(1)).await;
        assert_eq!(pace.wait(Instant::now()), None);
        pace.corrected(Instant::now());
        assert_eq!(pace.row(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_wait_is_news_once_however_often_it_is_asked_about() {
        let mut pace = Pace::default();
        for _ in 0..FREE {
            pace.corrected(Instant::now());
        }
        assert!(pace.wait(Instant::now()).is_some());
        let asked: Vec<bool> = (0..5).map(|_| pace.news()).collect();
        assert_eq!(asked, [true, false, false, false, false]);
        tokio::time::advance(FIRST_WAIT).await;
        pace.corrected(Instant::now());
        assert!(pace.news(), "the wait after the next correction is news again");
    }
}
