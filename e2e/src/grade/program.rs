//! The program under grade: started as a person starts it in a terminal (its
//! own process group, output to a log), signalled as a terminal signals it
//! (the whole group: `go run` and `cargo run` pass nothing on by themselves),
//! and killed, group and all, when it will not stop.

use std::{
    path::PathBuf,
    process::{Child, ExitStatus},
    time::Duration,
};

use anyhow::Context as _;
use tokio::time::Instant;

use labkit::{
    command::Cmd,
    eventually::{Check, eventually},
    files,
    record::Shared,
    say::pick,
};

/// How a stop by signal went.
#[derive(Clone, Debug)]
pub enum Stopped {
    /// It exited by itself, this long after the signal.
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
    cmd: Cmd,
    pub log: PathBuf,
    child: Option<Child>,
    pub runs: u32,
    /// The lab's record: each run's process group goes into its borrow, so
    /// that a grade killed outright has it killed by the next command.
    record: Shared,
}

impl Program {
    pub fn new(cmd: Cmd, log: PathBuf, record: Shared) -> Program {
        Program { cmd, log, child: None, runs: 0, record }
    }

    /// Starts a run, its output appended to the log after a header line,
    /// its process group in the lab's record.
    pub async fn start(&mut self) -> anyhow::Result<()> {
        self.runs += 1;
        let (runs, cmd) = (self.runs, &self.cmd);
        let header = pick(
            format!("=== run {runs} of `{cmd}` ===\n"),
            format!("=== 第 {runs} 次运行 `{cmd}` ===\n"),
        );
        let mut log = std::fs::OpenOptions::new().create(true).append(true).open(&self.log)?;
        std::io::Write::write_all(&mut log, header.as_bytes())?;
        let child = self.cmd.spawn_to_log(&self.log)?;
        let pid = child.id();
        self.child = Some(child);
        // Gone already (it exited at once): nothing to record.
        let _ = self.record.lock().await.started(pid);
        Ok(())
    }

    /// `Some(status)` once the current run has exited (reaped).
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.as_mut().and_then(|c| c.try_wait().ok().flatten())
    }

    /// Sends `signal` to the run's process group, then waits up to `within`
    /// for it to exit; kills the group when it does not.
    pub async fn stop(&mut self, signal: libc::c_int, within: Duration) -> anyhow::Result<Stopped> {
        if let Some(status) = self.exited() {
            return Ok(Stopped::AlreadyGone { status });
        }
        let pid = self.child.as_ref().context("the program was never started")?.id();
        let sent = Instant::now();
        signal_group(pid, signal);
        let exited = eventually("the program to exit", within, || {
            let status = self.exited();
            async move {
                Ok(match status {
                    Some(status) => Check::Done(status),
                    None => Check::NotYet("still running".into()),
                })
            }
        })
        .await;
        match exited {
            Ok(status) => Ok(Stopped::Exited { status, after: sent.elapsed() }),
            Err(_) => {
                self.kill().await;
                Ok(Stopped::Killed { within })
            }
        }
    }

    /// SIGKILL to the whole group, and the run reaped.
    pub async fn kill(&mut self) {
        let Some(child) = self.child.as_mut() else { return };
        if child.try_wait().ok().flatten().is_some() {
            return;
        }
        signal_group(child.id(), libc::SIGKILL);
        let _ = eventually("the killed program to be gone", Duration::from_secs(10), || {
            let gone = child.try_wait().ok().flatten().is_some();
            async move { Ok(if gone { Check::Done(()) } else { Check::NotYet("alive".into()) }) }
        })
        .await;
    }

    /// The last lines it printed, for messages.
    pub fn tail(&self, lines: usize) -> String {
        files::tail(&self.log, lines)
    }

    /// The last line it printed (nothing: empty).
    pub fn last_line(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        // A run's header line ([`Program::start`]) is the grade's, not the program's.
        let header = |l: &str| l.starts_with("=== ") && l.ends_with(" ===");
        text.lines().rev().find(|l| !l.trim().is_empty() && !header(l)).unwrap_or("").to_string()
    }

    /// As a person would type it.
    pub fn command(&self) -> String {
        self.cmd.to_string()
    }
}

/// `signal` to the process group `pid` leads (each run is started as its own group).
fn signal_group(pid: u32, signal: libc::c_int) {
    // SAFETY: kill(2) with a negative pid signals that group; no memory is involved.
    unsafe { libc::kill(-(pid as libc::pid_t), signal) };
}
