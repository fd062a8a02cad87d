//! SIGINT, SIGTERM and SIGHUP for the commands that change a cluster
//! (`lab up`, `grade`, `bench`): caught from the start, so that none kills
//! xtask half-way. The first cancels the work, and the command undoes or
//! puts back what it did; what each further one does is the command's
//! ([`Interrupts::further`]).
//!
//! A hang-up (an ssh session dropped) also takes the terminal away: writing
//! to it would fail, and a failed write to stderr panics in Rust. From a
//! hang-up on, stdout and stderr go to a file, which says what happened.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};
use labkit::tr;
use tokio::signal::unix::{Signal, SignalKind, signal};

pub struct Interrupts {
    interrupt: Signal,
    terminate: Signal,
    hangup: Signal,
    /// Where stdout and stderr go after a hang-up.
    hangup_log: PathBuf,
    /// The first signal, once it came.
    pub seen: Option<&'static str>,
}

impl Interrupts {
    /// Catches the three; after a hang-up the output goes to `hangup_log`.
    pub fn catch(hangup_log: &Path) -> Result<Interrupts> {
        Ok(Interrupts {
            interrupt: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
            hangup: signal(SignalKind::hangup())?,
            hangup_log: hangup_log.to_path_buf(),
            seen: None,
        })
    }

    /// The next signal's name (a hang-up first moves the output to the file).
    async fn next(&mut self) -> &'static str {
        let name = tokio::select! {
            _ = self.interrupt.recv() => "SIGINT",
            _ = self.terminate.recv() => "SIGTERM",
            _ = self.hangup.recv() => "SIGHUP",
        };
        if name == "SIGHUP" {
            // Failing, nothing can be shown any more: the work goes on regardless.
            let _ = output_to(&self.hangup_log);
        }
        name
    }

    /// Resolves on the first signal, saying that `what` stops.
    pub async fn first(&mut self, what: &str) {
        let name = self.next().await;
        self.seen = Some(name);
        eprintln!("{}", tr!("{name}: stopping {what}", name, what));
    }

    /// From now on, each further signal calls `each` with its name (in a task
    /// of its own, until the process ends).
    pub fn further(mut self, each: impl Fn(&'static str) + Send + 'static) {
        tokio::spawn(async move {
            loop {
                let name = self.next().await;
                each(name);
            }
        });
    }
}

/// stdout and stderr appended to `log` (made if need be): what xtask says
/// after a hang-up is kept there instead of lost (or panicking).
fn output_to(log: &Path) -> Result<()> {
    labkit::files::create_dir(log.parent().unwrap_or(Path::new(".")))?;
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .with_context(|| tr!("cannot open {path}", path = log.display()))?;
    rustix::stdio::dup2_stdout(&file).context("dup2")?;
    rustix::stdio::dup2_stderr(&file).context("dup2")?;
    eprintln!("{}", tr!("SIGHUP: the terminal went away; what follows is kept here"));
    Ok(())
}
