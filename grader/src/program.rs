//! The program under grade: started as a person starts it in a terminal (its
//! own process group, output to a log), signalled as a terminal signals it
//! (the whole group), and killed, group and all, when it will not stop.
//!
//! Started through a wrapper — `go run`, a shell script that waits — the
//! program is a process of the group, not the one started, and the wrapper's
//! exit says little about it: `go run` dies of SIGTERM at once (it catches only
//! SIGINT and SIGQUIT), and after SIGINT exits 1 whatever the program did. So
//! a stop judges the group, by what each of its processes did ([`group`]).
//! `cargo run` and a shell's `exec` leave no wrapper: the program is the
//! process started.

mod group;

pub use group::{WITHOUT_PROC, readable};

use std::{path::PathBuf, process::ExitStatus, time::Duration};

use anyhow::Context as _;
use tokio::time::Instant;

use labkit::{
    command::Cmd,
    eventually::{Check, eventually},
    record::Shared,
    tr,
};

/// How a stop by signal went.
#[derive(Clone, Debug)]
pub enum Stopped {
    /// The whole group exited by itself, this long after the signal; `status`
    /// is the program's ([`group`] says which process that is).
    Exited { status: ExitStatus, after: Duration },
    /// It was still running after the time it had; it was killed.
    Killed { within: Duration },
    /// It had exited before the signal was sent.
    AlreadyGone { status: ExitStatus },
}

impl Stopped {
    /// A clean stop: exit status 0 after the signal.
    pub fn is_clean(&self) -> bool {
        matches!(self, Stopped::Exited { status, .. } if status.success())
    }
}

/// One command line, run as often as the grade needs it.
pub struct Program {
    pub cmd: Cmd,
    pub log: PathBuf,
    run: Option<group::Group>,
    pub runs: u32,
    /// The lab's record: each run's process group goes into its borrow, so
    /// that a grade killed outright has it killed by the next command.
    record: Shared,
}

impl Program {
    pub fn new(cmd: Cmd, log: PathBuf, record: Shared) -> Program {
        Program { cmd, log, run: None, runs: 0, record }
    }

    /// Starts a run, its output appended to the log after a header line,
    /// its process group in the lab's record.
    pub async fn start(&mut self) -> anyhow::Result<()> {
        group::adopt_orphans();
        self.runs += 1;
        let (runs, cmd) = (self.runs, &self.cmd);
        let header = format!("{}\n", tr!("=== run {runs} of `{cmd}` ===", runs, cmd));
        let mut log = std::fs::OpenOptions::new().create(true).append(true).open(&self.log)?;
        std::io::Write::write_all(&mut log, header.as_bytes())?;
        // Waited for by its pid ([`group::Group`]), not through the `Child`:
        // one waitpid reaps the leader and what the group leaves alike.
        let pid = self.cmd.spawn_to_log(&self.log)?.id();
        self.run = Some(group::Group::new(pid));
        // Gone already (it exited at once): nothing to record.
        let _ = self.record.lock().await.started(pid);
        Ok(())
    }

    /// `Some(status)` once the process started has exited (reaped).
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.run.as_mut().and_then(group::Group::leader_exited)
    }

    /// Sends `signal` to the run's process group, then waits up to `within`
    /// for the whole group to exit; kills the group when it does not.
    pub async fn stop(&mut self, signal: libc::c_int, within: Duration) -> anyhow::Result<Stopped> {
        let run = self.run.as_mut().with_context(|| tr!("the program was never started"))?;
        if let Some(status) = run.leader_exited().filter(|_| run.is_gone()) {
            return Ok(Stopped::AlreadyGone { status });
        }
        let sent = Instant::now();
        let mut stop = group::Stop::send(run, signal).await;
        let what = tr!("the program's process group to exit");
        let ended =
            eventually(&what, within, || {
                let outcome = stop.step(run);
                async move {
                    Ok(outcome.map_or_else(|| Check::NotYet(tr!("still running")), Check::Done))
                }
            })
            .await;
        match ended {
            Ok(status) => Ok(Stopped::Exited { status, after: sent.elapsed() }),
            Err(_) => {
                drop(stop);
                self.kill().await;
                Ok(Stopped::Killed { within })
            }
        }
    }

    /// SIGKILL to the whole group, and all of it reaped.
    pub async fn kill(&mut self) {
        let Some(run) = self.run.as_mut() else { return };
        if run.is_gone() {
            return;
        }
        run.signal(libc::SIGKILL);
        let what = tr!("the killed program to be gone");
        let _ = eventually(&what, Duration::from_secs(10), || {
            let gone = run.is_gone();
            async move { Ok(Check::done_if(gone, (), tr!("alive"))) }
        })
        .await;
    }

    /// The last line it printed (nothing: empty).
    pub fn last_line(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        // A run's header line ([`Program::start`]) is the grade's, not the program's.
        let header = |l: &str| l.starts_with("=== ") && l.ends_with(" ===");
        text.lines().rev().find(|l| !l.trim().is_empty() && !header(l)).unwrap_or("").to_string()
    }
}
