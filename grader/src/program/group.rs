//! A run's process group, and how it takes a signal (Linux: `/proc`, and
//! `PR_SET_CHILD_SUBREAPER`).
//!
//! A stop judges what the group's processes did, not the exit of the one
//! started alone. Before the signal, each process of the group with a child
//! in it — a wrapper such as `go run` or a waiting shell, a program with
//! helpers — is held (SIGSTOP), and continued once its children in the
//! group have exited. So children end before their parents can reap them,
//! and each exit is seen: this process's own children reaped here, any other
//! read as a zombie (`/proc/PID/stat` holds the status its parent's waitpid
//! will get). The grader is a child subreaper, so what a wrapper that dies
//! leaves behind becomes its child: reaped here, not a zombie nobody waits for.
//!
//! The program is the first of the processes there at the signal to exit by
//! its own hand (an exit status, not killed by a signal): the one that
//! handled the signal. Its wrappers end after it and say little (`go run`
//! exits 1 after SIGINT whatever the program did; a shell's tools die of the
//! signal while the shell's trap exits 0). Its status is the stop's. When
//! none exited by its own hand, a signal killed them: another than the one
//! sent (a crash) when there is one, else the one sent — a program that does
//! not handle it. A group not gone within the time is killed ([`super`]).
//! Not told apart: a program that dies of the signal while a helper of its
//! own exits 0 on it (the helper is taken for the program).
//!
//! Without `/proc` (macOS; here [`WITHOUT_PROC`] makes it so) the group's
//! processes cannot be read: nothing is held, and a stop is judged by the
//! process started alone — the program itself when started as a binary, by
//! `cargo run` or a shell's `exec`; its wrapper's word otherwise. What is still
//! told: whether the whole group is gone in time (`kill(-pgid, 0)`).

use std::{collections::BTreeSet, os::unix::process::ExitStatusExt as _, process::ExitStatus};

use labkit::{
    eventually::{Check, eventually},
    process::group_members,
    tr,
};

/// Set, a stop is judged as where there is no `/proc` (the grader's tests of that way, on Linux).
pub const WITHOUT_PROC: &str = "LAB_GRADE_WITHOUT_PROC";

/// The group's processes can be read (`/proc`).
pub fn readable() -> bool {
    std::env::var_os(WITHOUT_PROC).is_none() && std::path::Path::new("/proc/self/stat").exists()
}

/// Makes this process a child subreaper (once): orphans of the graded
/// program's group become its children, for [`Group`] to reap.
pub(super) fn adopt_orphans() {
    #[cfg(target_os = "linux")]
    {
        static ONCE: std::sync::Once = std::sync::Once::new();
        // SAFETY: prctl(2) with integer arguments; it changes only who adopts this process's orphans.
        ONCE.call_once(|| unsafe {
            libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
        });
    }
}

/// A run: the process group that the process started leads.
pub(super) struct Group {
    /// The process started; its pid is the group's id.
    pgid: u32,
    /// Its exit status, once reaped.
    leader: Option<ExitStatus>,
    /// Every status reaped in the group, in order (the leader's, orphans').
    reaped: Vec<(u32, ExitStatus)>,
    /// Seen gone: its ids may be another's now, so it is never signalled again.
    gone: bool,
    /// Its processes can be read ([`readable`]).
    pub(super) readable: bool,
}

impl Group {
    pub(super) fn new(pgid: u32) -> Group {
        Group { pgid, leader: None, reaped: Vec::new(), gone: false, readable: readable() }
    }

    /// Its processes, or none when they cannot be read.
    fn members(&self) -> Vec<labkit::process::Member> {
        if self.readable { group_members(self.pgid) } else { Vec::new() }
    }

    fn id(&self) -> libc::pid_t {
        self.pgid as libc::pid_t
    }

    /// Reaps what of the group has exited and is this process's child.
    fn reap(&mut self) {
        loop {
            let mut raw = 0;
            // SAFETY: waitpid(2) on this process's children in the group; it writes only `raw`.
            let pid = unsafe { libc::waitpid(-self.id(), &mut raw, libc::WNOHANG) };
            if pid > 0 {
                let pid = pid as u32;
                if pid == self.pgid {
                    self.leader = Some(ExitStatus::from_raw(raw));
                }
                self.reaped.push((pid, ExitStatus::from_raw(raw)));
            } else if pid == 0
                || std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR)
            {
                // 0: the rest still runs; ECHILD: no child of this process is left in it.
                return;
            }
        }
    }

    /// The status of the process started, once it has exited.
    pub(super) fn leader_exited(&mut self) -> Option<ExitStatus> {
        self.reap();
        self.leader
    }

    /// No process of the group is left, zombies included.
    pub(super) fn is_gone(&mut self) -> bool {
        if !self.gone {
            self.reap();
            // SAFETY: kill(2) with signal 0 only checks that the group exists.
            self.gone = unsafe { libc::kill(-self.id(), 0) } == -1
                && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
        }
        self.gone
    }

    /// `signal` to the whole group, unless it is gone.
    pub(super) fn signal(&mut self, signal: libc::c_int) {
        if !self.is_gone() {
            // SAFETY: kill(2) with a negative pid signals that group; no memory is involved.
            unsafe { libc::kill(-self.id(), signal) };
        }
    }
}

/// How long the parents get to stop before the signal goes all the same.
const HOLD_WITHIN: std::time::Duration = std::time::Duration::from_secs(2);

/// A signal sent to the group, followed until all of it has exited.
pub(super) struct Stop {
    signal: libc::c_int,
    /// The processes there when it was sent.
    there: BTreeSet<u32>,
    /// Those held until their children in the group have exited.
    held: Vec<u32>,
    /// How each of `there` ended, in the order seen.
    ended: Vec<(u32, ExitStatus)>,
    /// How many of the group's reaped statuses were looked at.
    looked: usize,
}

impl Stop {
    /// Holds the parents, then sends `signal` to the group.
    pub(super) async fn send(group: &mut Group, signal: libc::c_int) -> Stop {
        group.reap();
        let members: Vec<_> = group.members().into_iter().filter(|m| !m.zombie).collect();
        let there = members.iter().map(|m| m.pid).collect();
        let held: Vec<u32> = members
            .iter()
            .filter(|m| members.iter().any(|child| child.ppid == m.pid))
            .map(|m| m.pid)
            .collect();
        for &pid in &held {
            process_signal(pid, libc::SIGSTOP);
        }
        // SIGSTOP is delivered when the process next runs: until then a wrapper
        // could still take the signal and reap the program before it is seen
        // (a loaded machine). So the signal goes once each holds still.
        // Past HOLD_WITHIN it goes all the same.
        let what = tr!("the held parents to stop");
        let _ = eventually(&what, HOLD_WITHIN, || {
            let held = &held;
            async move {
                let moving: Vec<u32> = held
                    .iter()
                    .copied()
                    .filter(|&pid| !labkit::process::stopped_or_gone(pid))
                    .collect();
                let seen = tr!("still running: {pids}", pids = format!("{moving:?}"));
                Ok(Check::done_if(moving.is_empty(), (), seen))
            }
        })
        .await;
        group.signal(signal);
        Stop { signal, there, held, ended: Vec::new(), looked: group.reaped.len() }
    }

    /// Looks once: records what ended, continues the parents whose children
    /// have; the program's status once the whole group is gone.
    pub(super) fn step(&mut self, group: &mut Group) -> Option<ExitStatus> {
        // Gone: every status is reaped by now, and recorded below before it is judged.
        let gone = group.is_gone();
        for &(pid, status) in &group.reaped[self.looked..] {
            self.ended_as(pid, status);
        }
        self.looked = group.reaped.len();
        let members = group.members();
        for zombie in members.iter().filter(|m| m.zombie) {
            self.ended_as(zombie.pid, ExitStatus::from_raw(zombie.exit_code));
        }
        let has_running_child = |pid: u32| members.iter().any(|m| m.ppid == pid && !m.zombie);
        self.held.retain(|&pid| {
            let hold = has_running_child(pid);
            if !hold {
                process_signal(pid, libc::SIGCONT);
            }
            hold
        });
        (self.held.is_empty() && gone).then(|| self.outcome(group.leader))
    }

    fn ended_as(&mut self, pid: u32, status: ExitStatus) {
        if self.there.contains(&pid) && !self.ended.iter().any(|(p, _)| *p == pid) {
            self.ended.push((pid, status));
        }
    }

    /// The program's status (the module's doc says which).
    fn outcome(&self, leader: Option<ExitStatus>) -> ExitStatus {
        let statuses = || self.ended.iter().map(|(_, s)| *s);
        statuses()
            .find(|s| s.code().is_some())
            .or_else(|| statuses().find(|s| s.signal() != Some(self.signal)))
            .or_else(|| statuses().next())
            .or(leader)
            .unwrap_or_else(|| ExitStatus::from_raw(self.signal))
    }
}

/// A stop dropped before the group was gone (it gave up, or the grade was
/// interrupted) continues what it held, to be killed with the rest.
impl Drop for Stop {
    fn drop(&mut self) {
        for pid in self.held.drain(..) {
            process_signal(pid, libc::SIGCONT);
        }
    }
}

fn process_signal(pid: u32, signal: libc::c_int) {
    // SAFETY: kill(2) to one process of the group; no memory is involved.
    unsafe { libc::kill(pid as libc::pid_t, signal) };
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    use labkit::{
        command::Cmd,
        eventually::{Check, eventually},
    };

    /// `script` run by sh in a group of its own, once it printed `ready`
    /// (its traps are set); `signal` sent as a stop sends it; the stop's
    /// status, or `None` when the group was still there after 5 s (then killed).
    async fn stopped(script: &str, signal: libc::c_int) -> Option<ExitStatus> {
        stopped_as(script, signal, true).await
    }

    /// [`stopped`], its group's processes `readable` or not (macOS).
    #[allow(clippy::zombie_processes, reason = "reaped by its pid, as a run is")]
    async fn stopped_as(script: &str, signal: libc::c_int, readable: bool) -> Option<ExitStatus> {
        adopt_orphans();
        static RUNS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let run = RUNS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let log =
            std::env::temp_dir().join(format!("grade-group-{}-{run}.log", std::process::id()));
        let _ = std::fs::remove_file(&log);
        let child = Cmd::argv(["sh", "-c", script]).spawn_to_log(&log).unwrap();
        // Ready, and its `sleep` started: a signal before that exec is taken
        // by a shell not yet waiting, whose trap then waits the whole sleep
        // (seen on a loaded machine).
        let pgid = child.id();
        eventually("it to be ready, its sleep started", Duration::from_secs(10), || {
            let log = &log;
            async move {
                let printed = std::fs::read_to_string(log).unwrap_or_default();
                let sleeping = labkit::process::group_members(pgid).iter().any(|m| {
                    std::fs::read_to_string(format!("/proc/{}/comm", m.pid))
                        .is_ok_and(|comm| comm.trim() == "sleep")
                });
                Ok(Check::done_if(printed.contains("ready") && sleeping, (), printed))
            }
        })
        .await
        .unwrap();
        let mut group = Group { readable, ..Group::new(child.id()) };
        let mut stop = Stop::send(&mut group, signal).await;
        let ended = eventually("the group to exit", Duration::from_secs(5), || {
            let outcome = stop.step(&mut group);
            async move { Ok(outcome.map_or(Check::NotYet("running".into()), Check::Done)) }
        })
        .await;
        if ended.is_err() {
            drop(stop);
            group.signal(libc::SIGKILL);
            eventually("the killed group to be gone", Duration::from_secs(5), || {
                let gone = group.is_gone();
                async move { Ok(Check::done_if(gone, (), "alive")) }
            })
            .await
            .unwrap();
        }
        let _ = std::fs::remove_file(&log);
        ended.ok()
    }

    /// A program in shell: SIGINT and SIGTERM end it with `exit 0`, its `sleep` dies of them.
    const PROGRAM: &str = "trap 'exit 0' INT TERM; echo ready; sleep 60";

    #[tokio::test]
    async fn a_wrapper_that_dies_of_sigterm_before_its_program_exits_0_is_clean() {
        // As `go run`: the wrapper has no handler, the program inside has.
        let script = format!("sh -c \"{PROGRAM}\"; echo the wrapper outlived it");
        let status = stopped(&script, libc::SIGTERM).await.expect("gone in time");
        assert!(status.success(), "{status}");
    }

    #[tokio::test]
    async fn a_wrapper_that_exits_1_after_its_program_exits_0_on_sigint_is_clean() {
        // As `go run` after SIGINT: it catches the signal, waits, exits 1.
        let script = format!("trap : INT; sh -c \"{PROGRAM}\"; exit 1");
        let status = stopped(&script, libc::SIGINT).await.expect("gone in time");
        assert!(status.success(), "{status}");
    }

    /// Without `/proc` the process started is judged: the program itself, or its wrapper's word.
    #[tokio::test]
    async fn without_proc_the_process_started_is_judged() {
        let status = stopped_as(PROGRAM, libc::SIGINT, false).await.expect("gone in time");
        assert!(status.success(), "{status}");
        let script = format!("trap : INT; sh -c \"{PROGRAM}\"; exit 1");
        let status = stopped_as(&script, libc::SIGINT, false).await.expect("gone in time");
        assert_eq!(status.code(), Some(1), "{status}");
        let ignores = "trap '' TERM; echo ready; sleep 60";
        assert!(stopped_as(ignores, libc::SIGTERM, false).await.is_none(), "still there: killed");
    }

    #[tokio::test]
    async fn a_program_that_exits_1_or_does_not_handle_the_signal_is_not_clean() {
        let exits_1 = "trap 'exit 1' TERM; echo ready; sleep 60";
        let status = stopped(exits_1, libc::SIGTERM).await.expect("gone in time");
        assert_eq!(status.code(), Some(1), "{status}");
        let wrapped = format!("sh -c \"{exits_1}\"; exit 0");
        let status = stopped(&wrapped, libc::SIGTERM).await.expect("gone in time");
        assert_eq!(status.code(), Some(1), "behind a wrapper: {status}");
        let no_handler = "echo ready; sleep 60";
        let status = stopped(no_handler, libc::SIGTERM).await.expect("gone in time");
        assert_eq!(status.signal(), Some(libc::SIGTERM), "{status}");
    }

    #[tokio::test]
    async fn a_program_that_ignores_the_signal_is_still_there() {
        assert!(stopped("trap '' TERM; echo ready; sleep 60", libc::SIGTERM).await.is_none());
    }

    fn stop(signal: libc::c_int, ended: &[i32]) -> ExitStatus {
        let ended: Vec<_> = ended
            .iter()
            .enumerate()
            .map(|(i, raw)| (i as u32, ExitStatus::from_raw(*raw)))
            .collect();
        let stop = Stop { signal, there: BTreeSet::new(), held: Vec::new(), ended, looked: 0 };
        stop.outcome(None)
    }

    const EXIT_0: i32 = 0;
    const EXIT_1: i32 = 1 << 8;

    #[test]
    fn the_first_to_exit_by_its_own_hand_is_the_program() {
        let term = libc::SIGTERM;
        // `go run` and SIGTERM: the program exits 0, go dies of the signal after it.
        assert!(stop(term, &[EXIT_0, term]).success());
        // `go run` and SIGINT: the program exits 0, go exits 1 after it.
        assert!(stop(libc::SIGINT, &[EXIT_0, EXIT_1]).success());
        // A shell program: its `sleep` dies of the signal, its trap exits 0.
        assert!(stop(term, &[term, EXIT_0]).success());
        // A program that exits 1 on the signal, behind a wrapper that exits 0.
        assert_eq!(stop(term, &[EXIT_1, EXIT_0]).code(), Some(1));
        // No handler: everything dies of the signal.
        assert_eq!(stop(term, &[term, term]).signal(), Some(term));
        // A crash is said over the signal that came with it.
        assert_eq!(stop(term, &[term, libc::SIGABRT]).signal(), Some(libc::SIGABRT));
    }
}
