//! What `cargo maint test` runs beside the calling part: another part (`cargo maint test
//! --only PART`) or the kind node image's build, each in a process group of its own, its
//! output in a log (a part's is shown whole when it ends: two parts' lines interleaved would
//! be unreadable), a part's sections on the same clock.

use std::path::PathBuf;
use std::process::{Child, ExitCode, ExitStatus};
use std::sync::Mutex;
use std::time::{Duration, UNIX_EPOCH};

use anyhow::{Context as _, Result, bail};
use labkit::command::Cmd;

use super::{Part, STARTED_ENV, section, started};

/// The process groups running alongside, for the Ctrl-C handler.
static GROUPS: Mutex<Vec<i32>> = Mutex::new(Vec::new());

/// How often a wait for a part alongside says where it is.
const REPORT_EVERY: Duration = Duration::from_secs(60);

/// Passes a Ctrl-C on to everything running alongside: each part takes its labs down.
pub(super) fn interrupt_all() {
    for group in GROUPS.lock().map(|g| g.clone()).unwrap_or_default() {
        unsafe { libc::killpg(group, libc::SIGINT) };
    }
}

pub(super) struct Alongside {
    child: Option<Child>,
    group: i32,
    pub(super) log: PathBuf,
    /// How its messages name it ("the Docker labs").
    what: &'static str,
    /// Waited for to its end: nothing is left to stop.
    done: bool,
}

impl Alongside {
    /// `cmd` in a process group of its own, its output in `target/<log>`.
    pub(super) fn spawn(what: &'static str, cmd: Cmd, log: &str) -> Result<Alongside> {
        let log = labkit::project::target_dir().join(log);
        let _ = std::fs::remove_file(&log);
        let child = cmd.spawn_to_log(&log)?;
        let group = child.id() as i32;
        GROUPS.lock().expect("not poisoned").push(group);
        Ok(Alongside { child: Some(child), group, log, what, done: false })
    }

    /// Starts `cargo maint test --only PART`, its output in `target/test-PART-labs.log`.
    pub(super) fn start(part: Part) -> Result<Alongside> {
        let only = clap::ValueEnum::to_possible_value(&part).context("a part's name")?;
        section(format!("{}, alongside; their log is shown when they end", part.what()));
        let since_epoch = started().duration_since(UNIX_EPOCH).unwrap_or_default();
        let cmd = xtask::cargo::cargo(["maint", "test", "--only", only.get_name()])
            .env(STARTED_ENV, format!("{:.3}", since_epoch.as_secs_f64()));
        Alongside::spawn(part.what(), cmd, &format!("test-{}-labs.log", only.get_name()))
    }

    /// Waits for a part, its last line every minute; then its whole log, and its result.
    pub(super) async fn wait(mut self) -> Result<ExitCode> {
        let status = self.exit(REPORT_EVERY, None).await?;
        let (what, log) = (self.what, std::fs::read_to_string(&self.log).unwrap_or_default());
        eprintln!(
            "---- {what}' log ({}) ----\n{log}---- end of {what}' log ({status}) ----",
            self.log.display()
        );
        Ok(if status.success() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
    }

    /// Waits for it to exit (a blocking thread waits: std's Child has no async wait),
    /// printing the last line of its log every `every`; past `within`, an error with the
    /// log's tail (it is stopped when dropped).
    pub(super) async fn exit(
        &mut self,
        every: Duration,
        within: Option<Duration>,
    ) -> Result<ExitStatus> {
        section(format!("waiting for {} (log: {})", self.what, self.log.display()));
        let mut child = self.child.take().expect("started");
        let started = tokio::time::Instant::now();
        let mut exited = tokio::task::spawn_blocking(move || child.wait());
        let mut report = tokio::time::interval_at(started + every, every);
        let deadline = tokio::time::sleep_until(started + within.unwrap_or_default());
        tokio::pin!(deadline);
        loop {
            tokio::select! {
                status = &mut exited => {
                    self.done = true;
                    return Ok(status.context("waiting for a process")??);
                }
                _ = report.tick() => {
                    let text = std::fs::read_to_string(&self.log).unwrap_or_default();
                    eprintln!("  {}: {}", self.what, text.lines().last().unwrap_or_default());
                }
                () = &mut deadline, if within.is_some() => bail!(
                    "not done within {} min; {} ends:\n{}",
                    within.unwrap_or_default().as_secs() / 60,
                    self.log.display(),
                    labkit::files::tail(&self.log, 20)
                ),
            }
        }
    }
}

impl Drop for Alongside {
    /// On an error or a panic of the calling part, or past a wait's deadline: interrupted as
    /// a Ctrl-C would (a part takes its labs down), and waited for.
    fn drop(&mut self) {
        if let Ok(mut groups) = GROUPS.lock() {
            groups.retain(|g| *g != self.group);
        }
        if self.done || matches!(self.child.as_mut().map(Child::try_wait), Some(Ok(Some(_)))) {
            return;
        }
        eprintln!("interrupting {} (pid group {})", self.what, self.group);
        unsafe { libc::killpg(self.group, libc::SIGINT) };
        if let Some(mut child) = self.child.take() {
            let _ = child.wait();
        }
    }
}
