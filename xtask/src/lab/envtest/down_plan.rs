//! `lab down` of an envtest lab: its processes stopped by process group, its
//! directory removed.

use super::*;

/// What `lab down` does for an envtest lab: every process the pid files name, newest first
/// (SIGTERM, then SIGKILL after a grace period), then the state.
/// Works without lab.json (a failed `up` leaves none).
pub fn down_plan(state_dir: &Path) -> Vec<Step<bool>> {
    let mut steps: Vec<Step<bool>> = ROLES
        .iter()
        .rev()
        .filter_map(|role| {
            let pid = labkit::files::read_number::<u32>(pid_file(state_dir, role))?;
            let dir = state_dir.to_path_buf();
            Some(Step::own(
                tr!("stop {role} (pid {pid}): SIGTERM to its process group, SIGKILL after a grace period", role, pid),
                move |_| {
                    Box::pin(async move {
                        report_stop(role, pid, &dir).await;
                        Ok(())
                    })
                },
            ))
        })
        .collect();
    let dir = state_dir.to_path_buf();
    steps.push(Step::own(
        tr!("remove {path}", path = shown(state_dir)),
        move |removed: &mut bool| {
            Box::pin(async move {
                *removed = labkit::files::remove_dir(&dir)?;
                Ok(())
            })
        },
    ));
    steps
}

async fn report_stop(role: &str, pid: u32, state_dir: &Path) {
    match process::stop(pid, state_dir, true).await {
        Ok(StopOutcome::NotRunning) => {
            labkit::progress!("{}", tr!("  {role} (pid {pid}) was not running", role, pid))
        }
        Ok(StopOutcome::NotOurs) => labkit::progress!(
            "{}",
            tr!("  {role}: pid {pid} is now another program's, left alone", role, pid)
        ),
        Ok(StopOutcome::Stopped { killed, after }) => labkit::progress!(
            "{}",
            tr!(
                "  stopped {role} (pid {pid}) with {signal} in {after}s",
                role,
                pid,
                signal = if killed { "SIGKILL" } else { "SIGTERM" },
                after = format!("{:.1}", after.as_secs_f64())
            )
        ),
        Err(error) => eprintln!(
            "{}",
            tr!(
                "  warning: cannot stop {role} (pid {pid}): {error}",
                role,
                pid,
                error = format!("{error:#}")
            )
        ),
    }
}
