//! The lab's long-running processes: started detached (own process group, output to a log
//! file, a pid file beside it) so they outlive `cargo xtask lab up` and a Ctrl-C in its
//! terminal; stopped by signalling that group.

use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::Duration;

use anyhow::{Context, Result};
use tokio::time::Instant;

use crate::{
    command::Cmd,
    eventually::{Check, eventually},
    files, tr,
};

/// Graceful first: kube-apiserver drains and etcd closes its database on SIGTERM.
const TERM_GRACE: Duration = Duration::from_secs(10);
const KILL_GRACE: Duration = Duration::from_secs(5);

/// A process started by this run of xtask.
pub struct Spawned {
    pub name: String,
    pub pid: u32,
    pub log: PathBuf,
    /// Kept so an early exit is noticed (and reaped) while `up` waits for readiness.
    child: Child,
}

impl Spawned {
    /// `Some(status)` once the process has exited.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// A failed wait for this process, with the end of its log (the reason is usually
    /// there). An exit already carries the log (see [`Spawned::died`]); a timeout gets it here.
    pub fn with_log_tail(&mut self, error: anyhow::Error) -> anyhow::Error {
        if self.exited().is_some() {
            error
        } else {
            anyhow::anyhow!("{error:#}\n{}", files::tail(&self.log, 30))
        }
    }

    /// The error for "it died while we waited", with the end of its log.
    pub fn died(&self, status: std::process::ExitStatus) -> anyhow::Error {
        anyhow::anyhow!(tr!(
            "{name} (pid {pid}) exited: {status}\n{tail}",
            name = &self.name,
            pid = self.pid,
            status,
            tail = files::tail(&self.log, 30)
        ))
    }
}

/// Starts `cmd` detached (see [`Cmd::spawn_to_log`]) and writes its pid to `pid_file`.
pub fn spawn_detached(name: &str, cmd: &Cmd, log: &Path, pid_file: &Path) -> Result<Spawned> {
    let child = cmd.spawn_to_log(log).with_context(|| tr!("cannot start {name}", name))?;
    let pid = child.id();
    files::write_public(pid_file, format!("{pid}\n"))?;
    Ok(Spawned { name: name.to_string(), pid, log: log.to_path_buf(), child })
}

/// Running: it exists and is neither a zombie (a dead child nobody has reaped yet) nor
/// dead. Existence is asked of the kernel, not of `/proc`, which macOS does not have.
pub fn is_alive(pid: u32) -> bool {
    let Ok(pid_t) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: kill with signal 0 only checks that the process exists and may be signalled.
    let exists = unsafe { libc::kill(pid_t, 0) } == 0
        || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
    exists && !state(pid).is_some_and(|state| matches!(state.as_str(), "Z" | "X"))
}

/// The fields of `/proc/PID/stat` after its command name (which may hold spaces): the
/// first is field 3, the state.
pub fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    Some(rest.split_whitespace().map(String::from).collect())
}

/// `pid` is stopped (SIGSTOP: state `T`), or gone, or a zombie: it runs no more code.
pub fn stopped_or_gone(pid: u32) -> bool {
    state(pid).is_none_or(|state| matches!(state.as_str(), "T" | "t" | "Z" | "X"))
}

/// Its state letter (`/proc/PID/stat` field 3); `None` once it is gone.
fn state(pid: u32) -> Option<String> {
    stat_fields(pid)?.into_iter().next()
}

/// When `pid` started (clock ticks since boot, `/proc/PID/stat` field 22):
/// with the pid, it names one process, not a later one given the same pid.
pub fn start_time(pid: u32) -> Option<u64> {
    // Field 22 overall is the 20th after the command name (state is field 3).
    stat_fields(pid)?.get(19)?.parse().ok()
}

/// A process group, told apart from a later one with the same id by its
/// leader's start time (`/proc/PID/stat` field 22, clock ticks since boot).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Group {
    pub pgid: u32,
    pub started: u64,
}

/// A process group this process started (`pid` leads it), as a lab's record keeps it.
pub fn group_of(pid: u32) -> Option<Group> {
    Some(Group { pgid: pid, started: start_time(pid)? })
}

/// SIGKILL to `group` if its leader is still the process recorded (same
/// start time); a group whose leader is gone gets it too when a member of
/// it is left (found under `/proc`, by its process group id). `true` when
/// anything was signalled.
pub fn kill_group(group: Group) -> bool {
    let leader_is_it = start_time(group.pgid) == Some(group.started);
    let leader_gone = start_time(group.pgid).is_none();
    let member_left = leader_gone && members(group.pgid).next().is_some();
    if !(leader_is_it || member_left) {
        return false;
    }
    let Ok(pgid) = libc::pid_t::try_from(group.pgid) else { return false };
    // SAFETY: kill(2) with a negative pid signals that process group; no memory is involved.
    unsafe { libc::kill(-pgid, libc::SIGKILL) == 0 }
}

/// A process of a group, as `/proc/PID/stat` shows it.
#[derive(Clone, Copy, Debug)]
pub struct Member {
    pub pid: u32,
    pub ppid: u32,
    /// It has exited and its parent has not reaped it yet.
    pub zombie: bool,
    /// A zombie's wait status, as waitpid(2) will report it to its parent (field 52).
    pub exit_code: i32,
}

/// The processes of process group `pgid`, zombies among them.
pub fn group_members(pgid: u32) -> Vec<Member> {
    members(pgid)
        .filter_map(|pid| {
            let fields = stat_fields(pid)?;
            Some(Member {
                pid,
                ppid: fields.get(1)?.parse().ok()?,
                zombie: fields.first()? == "Z",
                exit_code: fields.get(49)?.parse().ok()?,
            })
        })
        .collect()
}

/// The processes of process group `pgid` (field 5 of their stat).
fn members(pgid: u32) -> impl Iterator<Item = u32> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(move |pid| {
            stat_fields(*pid).and_then(|f| f.get(2)?.parse::<u32>().ok()) == Some(pgid)
        })
}

/// Guards against pid reuse: `pid`'s command line holds `mark`. Every process the lab starts
/// has its state directory in its command line (data dir, cert dir, kubeconfig), so a pid
/// whose command line lacks it is somebody else's process now.
pub fn belongs_to(pid: u32, mark: &str) -> bool {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline"));
    cmdline.is_ok_and(|cmdline| String::from_utf8_lossy(&cmdline).contains(mark))
}

pub enum StopOutcome {
    /// It had already exited.
    NotRunning,
    /// The pid now belongs to an unrelated process: left alone.
    NotOurs,
    /// Stopped by SIGTERM (or SIGKILL after the grace period).
    Stopped { killed: bool, after: Duration },
}

/// `graceful`: SIGTERM to the process group, wait, then SIGKILL; polls, with deadlines, never
/// sleeps blind. Else SIGKILL at once — a crash, not a shutdown — then wait until it is gone:
/// for a process whose graceful stop would wait on its clients (kube-apiserver drains open
/// watches for up to its request timeout).
pub async fn stop(pid: u32, state_dir: &Path, graceful: bool) -> Result<StopOutcome> {
    if !is_alive(pid) {
        return Ok(StopOutcome::NotRunning);
    }
    if !belongs_to(pid, &state_dir.to_string_lossy()) {
        return Ok(StopOutcome::NotOurs);
    }
    stop_group(pid, graceful).await
}

/// [`stop`] of a process this one started itself (its pid cannot be another's yet).
pub async fn stop_group(pid: u32, graceful: bool) -> Result<StopOutcome> {
    let start = Instant::now();
    if graceful {
        signal_group(pid, libc::SIGTERM)?;
        if gone(pid, TERM_GRACE).await.is_ok() {
            return Ok(StopOutcome::Stopped { killed: false, after: start.elapsed() });
        }
        let grace = format!("{TERM_GRACE:?}");
        crate::progress!(
            "{}",
            tr!("  pid {pid} still running after {grace} of SIGTERM: SIGKILL", pid, grace)
        );
    }
    signal_group(pid, libc::SIGKILL)?;
    gone(pid, KILL_GRACE).await.with_context(|| tr!("it survived SIGKILL"))?;
    Ok(StopOutcome::Stopped { killed: true, after: start.elapsed() })
}

/// Signal the whole group when the process leads one (it does when the lab started it).
fn signal_group(pid: u32, signal: libc::c_int) -> Result<()> {
    let pid_t = libc::pid_t::try_from(pid).with_context(|| tr!("pid out of range"))?;
    // SAFETY: getpgid and kill take plain integers and report failure through errno.
    let target = if unsafe { libc::getpgid(pid_t) } == pid_t { -pid_t } else { pid_t };
    // SAFETY: as above.
    if unsafe { libc::kill(target, signal) } != 0 {
        let error = std::io::Error::last_os_error();
        if error.raw_os_error() != Some(libc::ESRCH) {
            return Err(error).with_context(|| format!("kill -{signal} {target}"));
        }
    }
    Ok(())
}

async fn gone(pid: u32, within: Duration) -> Result<()> {
    let what = tr!("pid {pid} to exit", pid);
    eventually(&what, within, || async move {
        Ok(if is_alive(pid) { Check::NotYet(tr!("running")) } else { Check::Done(()) })
    })
    .await
}

#[cfg(test)]
mod tests {
    #[test]
    fn this_process_is_a_member_of_its_group() {
        // SAFETY: getpgrp has no preconditions.
        let pgid = unsafe { libc::getpgrp() } as u32;
        let members = super::group_members(pgid);
        let me = members.iter().find(|m| m.pid == std::process::id());
        assert!(me.is_some_and(|m| !m.zombie), "{members:?}");
        assert!(super::is_alive(std::process::id()));
    }
}
