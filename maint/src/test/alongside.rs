//! A part of `cargo maint test` run beside the calling one: `cargo maint test --only
//! PART` in a process group of its own, its output in a log that is shown whole when it
//! ends (two parts' lines interleaved would be unreadable), its sections on the same clock.

use std::path::{Path, PathBuf};
use std::process::{Child, ExitCode, ExitStatus};
use std::sync::Mutex;
use std::time::{Duration, UNIX_EPOCH};

use anyhow::{Context as _, Result, bail};

use super::{Part, STARTED_ENV, section, started};

/// The process groups of the parts running alongside, for the Ctrl-C handler.
static GROUPS: Mutex<Vec<i32>> = Mutex::new(Vec::new());

/// How often a wait for a part alongside says where it is.
const REPORT_EVERY: Duration = Duration::from_secs(60);

/// Passes a Ctrl-C on to every part running alongside: each takes its labs down.
pub(super) fn interrupt_all() {
    for group in GROUPS.lock().map(|g| g.clone()).unwrap_or_default() {
        unsafe { libc::killpg(group, libc::SIGINT) };
    }
}

pub(super) struct Alongside {
    child: Option<Child>,
    group: i32,
    log: PathBuf,
    /// How its messages name it ("the Docker labs").
    what: &'static str,
}

impl Alongside {
    /// Starts `cargo maint test --only PART`, its output in `target/test-PART-labs.log`.
    pub(super) fn start(part: Part) -> Result<Alongside> {
        let what = part.what();
        let only = clap::ValueEnum::to_possible_value(&part).context("a part's name")?;
        let log = labkit::project::target_dir().join(format!("test-{}-labs.log", only.get_name()));
        let _ = std::fs::remove_file(&log);
        section(format!("{what}, alongside; their log is shown when they end"));
        let since_epoch = started().duration_since(UNIX_EPOCH).unwrap_or_default();
        let child = xtask::cargo::cargo(["maint", "test", "--only", only.get_name()])
            .env(STARTED_ENV, format!("{:.3}", since_epoch.as_secs_f64()))
            .spawn_to_log(&log)?;
        let group = child.id() as i32;
        GROUPS.lock().expect("not poisoned").push(group);
        Ok(Alongside { child: Some(child), group, log, what })
    }

    /// Waits for it, its last line every minute; then its whole log, and its result.
    pub(super) async fn wait(mut self) -> Result<ExitCode> {
        let what = self.what;
        section(format!("waiting for {what} (log: {})", self.log.display()));
        let child = self.child.take().expect("started");
        let status = exit_of(child, &self.log, REPORT_EVERY, None, &format!("{what}:")).await?;
        self.forget();
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        eprintln!(
            "---- {what}' log ({}) ----\n{log}---- end of {what}' log ({status}) ----",
            self.log.display()
        );
        Ok(if status.success() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
    }

    fn forget(&self) {
        if let Ok(mut groups) = GROUPS.lock() {
            groups.retain(|g| *g != self.group);
        }
    }
}

impl Drop for Alongside {
    /// On an error or a panic of the calling part: the part alongside is interrupted as a
    /// Ctrl-C would, so that it takes its labs down, and waited for.
    fn drop(&mut self) {
        let Some(mut child) = self.child.take() else { return };
        self.forget();
        if matches!(child.try_wait(), Ok(Some(_))) {
            return;
        }
        eprintln!("interrupting {} (pid group {}): their labs go down", self.what, self.group);
        unsafe { libc::killpg(self.group, libc::SIGINT) };
        let _ = child.wait();
    }
}

/// Waits for `child` to exit (a blocking thread waits: std's Child has no async wait),
/// printing `say` and the last line of its `log` every `every`; past `within`, an error
/// with the log's tail (the child is left to its owner to stop).
pub(super) async fn exit_of(
    mut child: Child,
    log: &Path,
    every: Duration,
    within: Option<Duration>,
    say: &str,
) -> Result<ExitStatus> {
    let started = tokio::time::Instant::now();
    let mut exited = tokio::task::spawn_blocking(move || child.wait());
    let mut report = tokio::time::interval_at(started + every, every);
    let deadline = tokio::time::sleep_until(started + within.unwrap_or_default());
    tokio::pin!(deadline);
    loop {
        tokio::select! {
            status = &mut exited => return Ok(status.context("waiting for a process")??),
            _ = report.tick() => {
                let text = std::fs::read_to_string(log).unwrap_or_default();
                eprintln!("  {say} {}", text.lines().last().unwrap_or_default());
            }
            () = &mut deadline, if within.is_some() => bail!(
                "not done within {} min; {} ends:\n{}",
                within.unwrap_or_default().as_secs() / 60,
                log.display(),
                labkit::files::tail(log, 20)
            ),
        }
    }
}
