//! Test-only hooks: the interrupt tests stop a command at a named phase of
//! its work, the way a person's Ctrl-C, a dropped ssh session or a
//! `kill -9` would, and then compare the cluster before and after.
//!
//! `LAB_KIT_TEST_AT=PHASE=ACTION[,PHASE=ACTION…]`, where ACTION is
//! `SIGINT`, `SIGTERM`, `SIGHUP`, `SIGKILL` or `SIGSTOP` (sent to this process
//! when the phase is reached; a stopped one goes on at the test's `SIGCONT`),
//! `SIGINT-group` (to its whole process group, as a terminal's Ctrl-C) or
//! `fail` (the phase fails). Unset — every real run —
//! each [`at`] is one environment lookup.

use anyhow::{Result, bail};

/// The variable the tests set.
pub const VARIABLE: &str = "LAB_KIT_TEST_AT";

/// `phase` is reached: does what the variable says for it, if anything.
pub fn at(phase: &str) -> Result<()> {
    let Ok(plan) = std::env::var(VARIABLE) else { return Ok(()) };
    for (name, action) in plan.split(',').filter_map(|p| p.split_once('=')) {
        if name != phase {
            continue;
        }
        if action == "SIGINT-group" {
            eprintln!("{VARIABLE}: {action} at {phase}");
            // SAFETY: killpg(2) to this process's own group; no memory is involved.
            unsafe { libc::killpg(libc::getpgrp(), libc::SIGINT) };
            continue;
        }
        let signal = match action {
            "fail" => bail!("{VARIABLE}: {phase} fails (a test)"),
            "SIGINT" => libc::SIGINT,
            "SIGTERM" => libc::SIGTERM,
            "SIGHUP" => libc::SIGHUP,
            "SIGKILL" => libc::SIGKILL,
            "SIGSTOP" => libc::SIGSTOP,
            other => bail!("{VARIABLE}: {other:?} is not a signal the hook sends, nor fail"),
        };
        eprintln!("{VARIABLE}: {action} at {phase}");
        // SAFETY: kill(2) to this very process; no memory is involved.
        unsafe { libc::kill(libc::getpid(), signal) };
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_phase_fails_when_told_and_passes_otherwise() {
        // SAFETY (edition 2024): set_var in a single-threaded test of its own variable.
        unsafe { std::env::set_var(VARIABLE, "a=fail,b=SIGKILL") };
        assert!(at("a").unwrap_err().to_string().contains("a fails"));
        assert!(at("c").is_ok(), "a phase the variable does not name");
        unsafe { std::env::remove_var(VARIABLE) };
        assert!(at("a").is_ok());
    }
}
