//! What a process group costs, read from `/proc`: resident memory (`VmRSS`,
//! and its peak `VmHWM`, from `/proc/<pid>/status`) and CPU time (`utime` +
//! `stime` from `/proc/<pid>/stat`). A group, not a pid: a controller started
//! through `sh -c` is the shell plus what it runs.

use std::time::Duration;

use anyhow::bail;
use serde::Serialize;

/// Memory and CPU of a process group at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Usage {
    /// Resident memory now, summed over the group, in KiB.
    pub rss_kib: u64,
    /// The peak resident memory of each process so far, summed, in KiB.
    pub peak_rss_kib: u64,
    /// CPU time used so far (user + system), summed over the group, in ms.
    pub cpu_ms: f64,
    /// Processes in the group.
    pub processes: usize,
}

impl Usage {
    /// Resident memory in MiB, for people.
    pub fn rss_mib(&self) -> f64 {
        self.rss_kib as f64 / 1024.0
    }

    /// CPU used between `earlier` and `self` (same process group).
    pub fn cpu_since(&self, earlier: &Usage) -> Duration {
        Duration::from_secs_f64(((self.cpu_ms - earlier.cpu_ms) / 1000.0).max(0.0))
    }
}

/// The usage of every process whose process group is `pgid` (the lab starts
/// its processes as group leaders, so `pgid` is the leader's pid).
pub fn of_group(pgid: u32) -> anyhow::Result<Usage> {
    let ticks_per_second = clock_ticks()?;
    let mut usage = Usage::default();
    for member in labkit::process::group_members(pgid) {
        // A process may exit between the listing and the reading: skip it.
        let Ok(status) = std::fs::read_to_string(format!("/proc/{}/status", member.pid)) else {
            continue;
        };
        let Some(cpu_ticks) = cpu_ticks(member.pid) else { continue };
        usage.processes += 1;
        usage.cpu_ms += cpu_ticks as f64 * 1000.0 / ticks_per_second;
        usage.rss_kib += status_kib(&status, "VmRSS").unwrap_or(0);
        usage.peak_rss_kib += status_kib(&status, "VmHWM").unwrap_or(0);
    }
    if usage.processes == 0 {
        bail!("no process in group {pgid}: it is not running");
    }
    Ok(usage)
}

/// CPU time `pid` used so far, user and system (stat fields 14 and 15), in clock ticks.
fn cpu_ticks(pid: u32) -> Option<u64> {
    let fields = labkit::process::stat_fields(pid)?;
    Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
}

/// A `Name:   123 kB` line of `/proc/<pid>/status` (or `/proc/meminfo`), in KiB.
pub fn status_kib(status: &str, name: &str) -> Option<u64> {
    status.lines().find_map(|line| {
        let value = line.strip_prefix(name)?.strip_prefix(':')?;
        value.trim().strip_suffix("kB")?.trim().parse().ok()
    })
}

fn clock_ticks() -> anyhow::Result<f64> {
    // SAFETY: sysconf only reads a configuration value.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks <= 0 {
        bail!("sysconf(_SC_CLK_TCK) failed");
    }
    Ok(ticks as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_kib_lines_of_status() {
        let status = "Name:\tmy-controller\nVmHWM:\t   10240 kB\nVmRSS:\t    8192 kB\n";
        assert_eq!(status_kib(status, "VmRSS"), Some(8192));
        assert_eq!(status_kib(status, "VmHWM"), Some(10240));
        assert_eq!(status_kib(status, "VmSwap"), None);
    }

    #[test]
    fn measures_this_test_process() {
        // The test runner is not a group leader: use our own group.
        // SAFETY: getpgrp has no preconditions.
        let pgid = unsafe { libc::getpgrp() } as u32;
        let usage = of_group(pgid).unwrap();
        assert!(usage.processes >= 1);
        assert!(usage.rss_kib > 0 && usage.peak_rss_kib >= usage.rss_kib);
    }
}
