//! Faults around the controller's own process: how it stops (SIGTERM), and
//! how it refuses to start on bad input — without a write, even with a lab up.

use controller::metrics::IN_FLIGHT;
use std::{
    process::{ExitStatus, Stdio},
    time::Duration,
};

use anyhow::{Context as _, ensure};
use controller::{reconcile::LOG_CORRECTED, runner::LOG_SHUTTING_DOWN};
use tokio::{process::Child, time::Instant};

use super::{drift, in_order, ms, secs, then_restore};
use labkit::{
    command::Cmd,
    eventually::{Check, eventually},
};
use labkit::{
    converge::{HEAL_WITHIN, wait_desired, wait_idle},
    lab::Lab,
    suite::Measured,
    tr,
};

/// The bar for an idle controller's exit after SIGTERM.
const IDLE_EXIT_WITHIN: Duration = Duration::from_secs(1);
/// `--reconcile-delay` of the mid-reconcile case: long enough to signal inside it.
const SLOW_RECONCILE: Duration = Duration::from_secs(3);

/// SIGTERM ends the controller cleanly: idle → exit 0 within 1 s; during a
/// slow reconcile → that reconcile finishes, its write included, then exit 0.
/// The controllers signalled here are this test's own children (the lab's
/// arguments, its log), so their exit status can be read — a detached
/// process's status is lost to whoever did not spawn it. The lab's
/// controller is stopped meanwhile (same port) and started again after.
pub async fn sigterm_finishes_reconcile_then_exits(lab: &mut Lab) -> anyhow::Result<Measured> {
    wait_desired(lab).await?;
    if lab.deployment().is_some() {
        let result = sigterm_by_pod_deletion(lab).await;
        return then_restore(lab, result).await;
    }
    lab.stop_controller().await?;
    let result = async {
        let idle = sigterm_when_idle(lab).await?;
        let slow = sigterm_mid_reconcile(lab).await?;
        Ok(Measured::took(
            idle,
            tr!(
                "idle: exit 0 {idle} after SIGTERM; mid-reconcile ({delay} delay): the running \
                 reconcile corrected the drift, then exit 0 {slow} after SIGTERM",
                idle = ms(idle),
                delay = secs(SLOW_RECONCILE),
                slow = ms(slow)
            ),
        ))
    }
    .await;
    then_restore(lab, result).await
}

/// Idle controller → SIGTERM → exit 0 within [`IDLE_EXIT_WITHIN`]; returns how long it took.
async fn sigterm_when_idle(lab: &Lab) -> anyhow::Result<Duration> {
    let mut child = spawn_ready(lab, &[]).await?;
    wait_idle(lab).await?;
    let (status, took) = terminate(&mut child, IDLE_EXIT_WITHIN + HEAL_WITHIN).await?;
    ensure!(status.code() == Some(0), tr!("idle controller: {status} after SIGTERM", status));
    ensure!(
        took <= IDLE_EXIT_WITHIN,
        tr!(
            "idle controller took {took} to exit after SIGTERM (bar: {bar})",
            took = ms(took),
            bar = ms(IDLE_EXIT_WITHIN)
        )
    );
    Ok(took)
}

/// SIGTERM while a reconcile with something to write is running → that
/// reconcile completes (the drift is corrected, after the shutdown line),
/// then exit 0; returns how long the exit took.
///
/// The running reconcile is the startup one: every reconcile sleeps
/// `--reconcile-delay` *before* it reads the cache, so the patch made right
/// after the controller is ready is what that reconcile finds and corrects.
/// (Waiting for the startup reconcile and then patching would show the same
/// with another 3 s.)
async fn sigterm_mid_reconcile(lab: &Lab) -> anyhow::Result<Duration> {
    let mark = lab.log_mark()?;
    let delay = format!("{}s", SLOW_RECONCILE.as_secs());
    let mut child = spawn_ready(lab, &["--reconcile-delay", &delay]).await?;
    drift(lab, "env=sigterm").await?;
    reconcile_running(lab).await?;
    let (status, took) = terminate(&mut child, SLOW_RECONCILE + HEAL_WITHIN).await?;
    ensure!(
        status.code() == Some(0),
        tr!("controller stopped mid-reconcile: {status} after SIGTERM", status)
    );
    corrected_after_shutdown(&lab.controller_log(&mark).await?)?;
    let now = lab.config_maps().get(lab.desired().name()).await?;
    ensure!(
        lab.desired().is_satisfied_by(&now),
        tr!("after the exit my-config holds {data}", data = format!("{:?}", now.data))
    );
    Ok(took)
}

/// The controller's `log` shows the drift corrected after its shutdown line.
fn corrected_after_shutdown(log: &str) -> anyhow::Result<()> {
    ensure!(
        in_order(log, LOG_SHUTTING_DOWN, LOG_CORRECTED),
        tr!(
            "expected {corrected} after {shutdown} in the log:\n{log}",
            corrected = format!("{LOG_CORRECTED:?}"),
            shutdown = format!("{LOG_SHUTTING_DOWN:?}"),
            log
        )
    );
    Ok(())
}

/// What an idle pod's exit may take on kind, from the delete request: the
/// kubelet's own reaction (it watches the API) comes on top of the exit.
const POD_IDLE_EXIT_WITHIN: Duration = Duration::from_secs(5);
/// On kind the signal comes a second or two after the delete, and the pod is
/// ready only after its probe: a reconcile long enough to be inside it.
const POD_SLOW_RECONCILE: Duration = Duration::from_secs(10);

/// kind: SIGTERM as a pod gets it — the pod is deleted and the kubelet
/// signals its container; the exit code is read from the pod's last status.
async fn sigterm_by_pod_deletion(lab: &mut Lab) -> anyhow::Result<Measured> {
    wait_idle(lab).await?;
    let host = lab.deployment().with_context(|| tr!("the controller is not a Deployment"))?;
    let pod = host.ready_pod().await?.with_context(|| tr!("no ready controller pod"))?;
    let (code, idle) = host.delete_and_wait_exit(&pod, None).await?;
    ensure!(code == 0, tr!("idle pod {pod}: exit {code} after SIGTERM", pod, code));
    ensure!(
        idle <= POD_IDLE_EXIT_WITHIN,
        tr!(
            "idle pod {pod} took {idle} from delete to exit (bar: {bar})",
            pod,
            idle = ms(idle),
            bar = ms(POD_IDLE_EXIT_WITHIN)
        )
    );

    let delay = format!("{}s", POD_SLOW_RECONCILE.as_secs());
    lab.restart_controller(&["--reconcile-delay", &delay]).await?;
    let slow = host.ready_pod().await?.with_context(|| tr!("no ready controller pod"))?;
    let log = host.follow_log(&slow).await?;
    drift(lab, "env=sigterm").await?;
    reconcile_running(lab).await?;
    let (code, took) =
        host.delete_and_wait_exit(&slow, Some(POD_SLOW_RECONCILE + HEAL_WITHIN)).await?;
    ensure!(
        code == 0,
        tr!("pod {pod} stopped mid-reconcile: exit {code} after SIGTERM", pod = slow, code)
    );
    let log = log.await.with_context(|| tr!("reading the pod's log"))??;
    corrected_after_shutdown(&log).with_context(|| slow.clone())?;
    Ok(Measured::took(
        idle,
        tr!(
            "pod deleted while idle: exit 0 {idle} after the delete; deleted during a {delay} reconcile: \
             it corrected the drift after \"shutting down\", then exit 0 {took} after the delete",
            idle = ms(idle),
            delay = secs(POD_SLOW_RECONCILE),
            took = ms(took)
        ),
    ))
}

/// Starts a controller with the lab's flags plus `extra` as this test's
/// child (killed if dropped before it exits), and waits until it is ready.
pub(super) async fn spawn_ready(lab: &Lab, extra: &[&str]) -> anyhow::Result<Child> {
    spawn_command_ready(lab, lab.controller_command(extra)?).await
}

/// Starts `cmd` (a controller serving the lab controller's address) as this
/// test's child, output appended to the lab controller's log, and waits
/// until it is ready.
pub(super) async fn spawn_command_ready(lab: &Lab, cmd: Cmd) -> anyhow::Result<Child> {
    let mut child = cmd.spawn_child_to_log(&lab.file().controller.log)?;
    eventually(&tr!("the controller to be ready"), HEAL_WITHIN, || {
        let exited = child.try_wait();
        async move {
            if let Ok(Some(status)) = exited {
                // Not worth waiting for: report it (eventually retries errors, so say Done).
                return Ok(Check::Done(Err(anyhow::anyhow!(tr!("it exited: {status}", status)))));
            }
            let status = lab.controller_status("/readyz").await?;
            Ok(Check::done_if(status == 200, Ok(()), format!("/readyz {status}")))
        }
    })
    .await??;
    Ok(child)
}

/// SIGTERM to `child`; its exit status and how long after the signal it came.
pub(crate) async fn terminate(
    child: &mut Child,
    within: Duration,
) -> anyhow::Result<(ExitStatus, Duration)> {
    let pid = child.id().with_context(|| tr!("the controller already exited"))?;
    let pid = libc::pid_t::try_from(pid)?;
    let sent = Instant::now();
    // SAFETY: kill takes plain integers; the pid is our own unreaped child.
    if unsafe { libc::kill(pid, libc::SIGTERM) } != 0 {
        return Err(std::io::Error::last_os_error()).context("kill -TERM");
    }
    let status = tokio::time::timeout(within, child.wait())
        .await
        .with_context(|| tr!("no exit within {within} of SIGTERM", within = ms(within)))??;
    Ok((status, sent.elapsed()))
}

/// Bad input with a lab up (the controller's real kubeconfig, a reachable
/// API server) → exit 2 and one line, and no write: my-config's
/// resourceVersion does not move. `controller/tests/bad_input.rs` checks the
/// messages themselves against an unreachable server.
pub async fn bad_input_writes_nothing(lab: &mut Lab) -> anyhow::Result<Measured> {
    let before = wait_desired(lab).await?;
    let scratch = lab.file().state_dir.join("bad-input");
    let result = refuse_each(lab, &scratch).await;
    let _ = std::fs::remove_dir_all(&scratch);
    let refused = result?;
    let after = lab.config_maps().get(lab.desired().name()).await?;
    let (rv_before, rv_after) = (
        before.metadata.resource_version.unwrap_or_default(),
        after.metadata.resource_version.unwrap_or_default(),
    );
    ensure!(
        rv_before == rv_after,
        tr!(
            "my-config's resourceVersion moved from {before} to {after}",
            before = rv_before,
            after = rv_after
        )
    );
    Ok(Measured::said(tr!(
        "{count} bad inputs ({cases}) → exit 2 and one line each; resourceVersion {version} unchanged",
        count = refused.len(),
        cases = refused.join(", "),
        version = rv_after
    )))
}

/// Runs the controller once per bad input; the names of the cases refused as they should be.
async fn refuse_each(lab: &Lab, scratch: &std::path::Path) -> anyhow::Result<Vec<String>> {
    std::fs::create_dir_all(scratch)?;
    let malformed = scratch.join("malformed.yaml");
    std::fs::write(&malformed, "app.conf: [1, 2\n")?;
    let big = scratch.join("big.json");
    let over = controller::desired::MAX_DATA_BYTES;
    std::fs::write(&big, format!("{{\"k\": \"{}\"}}", "x".repeat(over)))?;
    let (malformed, big) = (malformed.display().to_string(), big.display().to_string());
    let cases: [(String, Vec<&str>); 4] = [
        (tr!("invalid namespace"), vec!["--namespace", "Not_A_Label"]),
        (tr!("malformed data file"), vec!["--data-file", &malformed]),
        (tr!("data file over 1 MiB"), vec!["--data-file", &big]),
        (tr!("unknown flag"), vec!["--frobnicate"]),
    ];
    let mut refused = Vec::new();
    for (what, args) in cases {
        let child = lab.controller_command(&args)?.spawn(Stdio::piped(), Stdio::piped())?;
        let out = tokio::time::timeout(HEAL_WITHIN, child.wait_with_output()).await.with_context(
            || tr!("{what}: still running after {within}", what, within = secs(HEAL_WITHIN)),
        )??;
        let stderr = String::from_utf8_lossy(&out.stderr);
        ensure!(
            out.status.code() == Some(2),
            tr!(
                "{what}: {status} (expected exit 2); stderr: {stderr}",
                what,
                status = out.status,
                stderr
            )
        );
        ensure!(
            stderr.trim_end().lines().count() == 1 && out.stdout.is_empty(),
            tr!(
                "{what}: expected one line on stderr and nothing on stdout, got {stderr} / {stdout}",
                what,
                stderr = format!("{stderr:?}"),
                stdout = format!("{:?}", String::from_utf8_lossy(&out.stdout))
            )
        );
        ensure!(!stderr.contains("panicked"), tr!("{what}: panicked: {stderr}", what, stderr));
        refused.push(what);
    }
    Ok(refused)
}

/// Waits until the controller reports a reconcile in flight (`/metrics`).
pub(super) async fn reconcile_running(lab: &Lab) -> anyhow::Result<()> {
    eventually(&tr!("a reconcile to be running"), HEAL_WITHIN, || async {
        let running = lab.metrics().await?.sum(IN_FLIGHT);
        Ok(Check::done_if(running >= 1.0, (), format!("reconciles_in_flight {running}")))
    })
    .await
}
