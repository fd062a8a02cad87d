//! The rows, in the course's order: the four experiments, a write that fails,
//! a write that conflicts, a quiet resync, no polling while quiet
//! ([`watches`]), a clean exit. Each sets its scene as admin (only when the
//! program did not leave it so), acts like a person with kubectl, waits for
//! my-config as the suite's experiments do ([`until_desired`]: through a
//! watch, here also until the program exits), and records what it saw;
//! [`Grading::diagnose`] then picks what to re-read.

use std::{process::ExitStatus, time::Duration};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    Api,
    api::{DeleteParams, Patch, PatchParams, PostParams},
};
use serde_json::json;
use tokio::time::Instant;

use super::{
    Denied, Hint, Options, Refused, Row, RowId, Step,
    identity::Identity,
    program::{Program, Stopped},
    proxy::{Counts, Proxy},
};
use crate::experiments::DRIFTED;
use labkit::{
    converge::{HEAL_WITHIN, Until, delete_and_wait_gone, until_desired},
    suite::first_key,
};
use labkit::{
    eventually::{Check, poll, throughout},
    tr,
};

mod conflict;
mod course;
mod provoke;
mod watches;

/// How long a program gets to try (and fail) to correct an immutable object.
const REFUSAL_WITHIN: Duration = Duration::from_secs(3);
/// "No hot loop" watches this much past one resync.
const RESYNC_MARGIN: Duration = Duration::from_secs(3);
/// It watches at least this long past the last event it provoked.
const SETTLE: Duration = Duration::from_secs(3);
/// How often an observation window looks at the program.
const SAMPLE_EVERY: Duration = Duration::from_millis(200);

/// A grade under way: made by [`crate::run`], all its fields set as a grade begins.
pub(super) struct Grading<'a> {
    pub(super) api: Api<ConfigMap>,
    pub(super) identity: Option<Identity>,
    /// Between the program and the API server, until [`Grading::finish`].
    pub(super) proxy: Option<Proxy>,
    /// The lab's record: what a row makes in the cluster goes in it first.
    pub(super) record: labkit::record::Shared,
    pub(super) program: Program,
    pub(super) desired: controller::desired::Desired,
    pub(super) options: &'a Options,
    pub(super) rows: Vec<Row>,
    /// How the first run took SIGINT (the rerun stops it that way, as Ctrl-C).
    pub(super) sigint: Option<Stopped>,
    /// The current run exited while it should have been running.
    pub(super) exited: Option<ExitStatus>,
    /// What the rerun's program read while nothing changed ("watches, not polls").
    pub(super) reads: watches::ReadWindow,
    /// The proxy's 403s and 409s when the last row was pushed: the next row's begin there.
    pub(super) answered: (usize, u64),
}

impl Grading<'_> {
    fn proxy(&self) -> &Proxy {
        self.proxy.as_ref().expect("the proxy lives until finish")
    }

    /// Every row, in order. An `Err` is a program that cannot be graded
    /// ([`Refused`]) or a lab that failed the grader.
    pub(super) async fn all(&mut self) -> anyhow::Result<()> {
        let at = |row: RowId| labkit::test_hook::at(&format!("grade:row:{}", row.key()));
        self.starts().await?;
        at(RowId::SelfHeal)?;
        self.self_heal().await?;
        at(RowId::Correction)?;
        self.correction().await?;
        at(RowId::FailedWrite)?;
        self.failed_write().await?;
        at(RowId::Conflict)?;
        self.conflict().await?;
        at(RowId::Rerun)?;
        self.rerun_and_hot_loop().await?;
        at(RowId::Watches)?;
        self.watches();
        at(RowId::CleanExit)?;
        self.clean_exit().await?;
        self.diagnose();
        Ok(())
    }

    /// Stops the program (killed if need be) and removes its identity.
    pub(super) async fn finish(&mut self) -> (Vec<Row>, String, anyhow::Result<()>) {
        self.program.kill().await;
        if let Some(proxy) = self.proxy.take() {
            let _ = std::fs::remove_file(&proxy.kubeconfig);
        }
        let identity = self.identity.take().expect("finish runs once");
        let user = identity.user();
        let removed = Identity::forget(self.api.clone().into_client(), &self.record).await;
        (std::mem::take(&mut self.rows), user, removed)
    }

    fn push<K: ToString>(
        &mut self,
        id: RowId,
        passed: bool,
        seen: &str,
        values: impl IntoIterator<Item = (K, String)>,
    ) {
        let values = values.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
        let (denied, conflicts) = (self.proxy().denied(), self.proxy().conflicts());
        let forbidden = times(&denied[self.answered.0..]);
        let conflicts_in_row = conflicts - self.answered.1;
        self.answered = (denied.len(), conflicts);
        let row = Row {
            id,
            passed,
            seen: seen.to_string(),
            values,
            hint: None,
            forbidden,
            conflicts: conflicts_in_row,
        };
        self.options.tell(Step::Row(&row));
        self.rows.push(row);
    }

    /// The row failed because the program exited; the first run is over.
    fn push_exited(&mut self, id: RowId, status: ExitStatus) {
        self.exited = Some(status);
        let last_line = self.program.last_line();
        self.push(id, false, "exited", [("status", exit_status(status)), ("last_line", last_line)]);
    }

    fn push_not_run(&mut self, id: RowId) {
        self.push(id, false, "not_run", Vec::<(&str, String)>::new());
    }

    /// Sets the scene "my-config is right", as admin, when the program did
    /// not leave it so (after a failed row).
    async fn ensure_desired(&self) -> anyhow::Result<()> {
        let name = self.desired.name();
        match self.api.get_opt(name).await? {
            Some(cm) if self.desired.is_satisfied_by(&cm) && cm.immutable != Some(true) => {
                return Ok(());
            }
            Some(cm) if cm.immutable != Some(true) => {
                let fixed = self.desired.corrected(&cm);
                self.api.replace(name, &PostParams::default(), &fixed).await?;
                return Ok(());
            }
            Some(_) => delete_and_wait_gone(&self.api, name).await?,
            None => {}
        }
        match self.api.create(&PostParams::default(), &self.desired.to_config_map()).await {
            // The program created it meanwhile: fine if right, checked next time.
            Ok(_) | Err(kube::Error::Api(_)) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// A row of the first run starts with my-config right; false (and the
    /// row "not run") once the first run has exited.
    async fn scene_is_set(&mut self, id: RowId) -> anyhow::Result<bool> {
        if self.exited.is_some() {
            self.push_not_run(id);
            return Ok(false);
        }
        self.ensure_desired().await?;
        Ok(true)
    }

    async fn version(&self) -> anyhow::Result<String> {
        Ok(self
            .api
            .get_opt(self.desired.name())
            .await?
            .and_then(|cm| cm.metadata.resource_version)
            .unwrap_or_else(|| tr!("absent")))
    }

    /// What to re-read for each failed row, from what all the rows saw: a
    /// refusal (403) first, whatever else went wrong, for it explains the rest.
    fn diagnose(&mut self) {
        let value = |row: &Row, key: &str| -> u64 {
            row.values.get(key).and_then(|v| v.parse().ok()).unwrap_or(0)
        };
        let self_heal_passed = self.rows.iter().any(|r| r.id == RowId::SelfHeal && r.passed);
        // A list or watch of ConfigMaps refused: the cache never filled, and every row after it
        // fails for that (but how the program exits: its own matter).
        let mut cache_refused = false;
        for row in &mut self.rows {
            let refused = row.forbidden.iter().any(Denied::of_config_maps);
            let refused_before = cache_refused && row.id != RowId::CleanExit;
            cache_refused |= row.forbidden.iter().any(|d| {
                d.of_config_maps()
                    && (d.asked.starts_with("list ") || d.asked.starts_with("watch "))
            });
            if row.passed {
                continue;
            }
            let hint = match (row.id, row.seen.as_str()) {
                _ if refused || refused_before => Hint::Forbidden,
                (RowId::Conflict, _) if row.conflicts > 0 => Hint::Conflict,
                (RowId::FailedWrite, "exited") => Hint::KeepRunning,
                (_, "exited" | "not_run") | (RowId::Rerun, "rerun.never_connected") => Hint::Exited,
                (RowId::Starts, "starts.absent") if value(row, "creates") == 0 => {
                    // It creates when an event comes, so what is missing is the kick.
                    if self_heal_passed { Hint::Kick } else { Hint::NotFound }
                }
                (RowId::SelfHeal, "self_heal.absent") if value(row, "creates") == 0 => {
                    Hint::NotFound
                }
                (RowId::Starts | RowId::SelfHeal, _) => Hint::DesiredData,
                (RowId::Correction | RowId::Conflict, _) if value(row, "updates") == 0 => {
                    Hint::Correct
                }
                (RowId::Correction | RowId::Conflict, _) => Hint::UpdateRefused,
                (RowId::FailedWrite, _) => Hint::NotFound,
                (RowId::Rerun | RowId::HotLoop, _) => Hint::NoWriteWhenRight,
                (RowId::Watches, "watches.per_event") => Hint::ReadCache,
                (RowId::Watches, _) => Hint::Informer,
                (RowId::CleanExit, _) => Hint::Signals,
            };
            row.hint = Some(hint);
        }
    }
}

/// Each distinct request with how often it came, in the order first seen.
fn times(asked: &[String]) -> Vec<Denied> {
    let mut counted: Vec<Denied> = Vec::new();
    for asked in asked {
        match counted.iter_mut().find(|d| d.asked == *asked) {
            Some(denied) => denied.times += 1,
            None => counted.push(Denied { asked: asked.clone(), times: 1 }),
        }
    }
    counted
}

/// Waits until the program has made a request, it exits (`Err(Some)`), or
/// `options.connect_within` passes (`Err(None)`). Ok: how long it took.
/// `before`: the counts from before the start (a fast program has asked
/// all it needs to by the time a count taken after its start comes back).
async fn connect(
    program: &mut Program,
    proxy: &Proxy,
    before: Counts,
    options: &Options,
) -> Result<Duration, Option<ExitStatus>> {
    let started = Instant::now();
    let what = tr!("the program's first request to the API server");
    let waited = poll(&what, options.connect_within, options.shown, || {
        let exited = program.exited();
        async move {
            if exited.is_some() {
                return Ok(Check::Stop(anyhow::anyhow!(tr!("it exited"))));
            }
            let made = proxy.counts().since(&before).all();
            Ok(Check::done_if(made >= 1, (), tr!("no request yet")))
        }
    })
    .await;
    waited.map(|()| started.elapsed()).map_err(|_| program.exited())
}

/// Watches the running program for `window`: it must not exit.
async fn observe(program: &mut Program, window: Duration) -> Option<ExitStatus> {
    let exited = || std::future::ready(program.exited().map_or(Ok(()), Err));
    let looked = throughout(window, SAMPLE_EVERY, exited).await;
    looked.err().or_else(|| program.exited())
}

/// Resolves with the program's exit status once it has exited: how the
/// grade's waits ([`until_desired`]) know their keeper ended.
async fn exit_of(program: &mut Program) -> ExitStatus {
    match observe(program, Duration::MAX).await {
        Some(status) => status,
        None => std::future::pending().await,
    }
}

/// How long "no hot loop" watches the restarted program, from its first
/// request: up to its first resync after the quiet window (resyncs come
/// every `resync` from the start), and a margin.
fn hot_loop_window(resync: Duration, quiet: Duration) -> Duration {
    if resync.is_zero() {
        return quiet + RESYNC_MARGIN;
    }
    let before_end = (quiet.as_secs_f64() / resync.as_secs_f64()).floor();
    resync.mul_f64(before_end + 1.0) + RESYNC_MARGIN
}

/// What my-config looked like, in one line, in the language chosen.
fn describe(cm: Option<&ConfigMap>) -> String {
    match cm {
        None => tr!("absent"),
        Some(cm) => {
            let data =
                serde_json::to_string(&cm.data.clone().unwrap_or_default()).unwrap_or_default();
            match (&cm.metadata.deletion_timestamp, cm.immutable) {
                (Some(_), _) => tr!("being deleted, data {data}", data),
                (None, Some(true)) => tr!("immutable, data {data}", data),
                _ => format!("data {data}"),
            }
        }
    }
}

/// How a stop went, as values `<name>.kind` (`exited`, `killed`, `gone`,
/// `not_measured`) and `<name>.status`, `.after`, `.within` as they apply;
/// the texts make one phrase of them, in the reader's language.
fn stop_values(name: &str, stop: Option<&Stopped>) -> Vec<(String, String)> {
    let (kind, details) = match stop {
        None => ("not_measured", vec![]),
        Some(Stopped::Exited { status, after }) => {
            ("exited", vec![("status", exit_status(*status)), ("after", ms(*after))])
        }
        Some(Stopped::Killed { within }) => ("killed", vec![("within", secs(*within))]),
        Some(Stopped::AlreadyGone { status }) => ("gone", vec![("status", exit_status(*status))]),
    };
    std::iter::once(("kind", kind.to_string()))
        .chain(details)
        .map(|(key, value)| (format!("{name}.{key}"), value))
        .collect()
}

/// The grader's own writes, under kubectl's field manager (a person's kubectl patch).
fn kubectl() -> PatchParams {
    PatchParams { field_manager: Some("kubectl-patch".into()), ..PatchParams::default() }
}

/// `exit 0`, `exit 255`, `killed by SIGKILL`: as a shell would say it (in
/// Chinese `退出码 0`, `被 SIGKILL 结束`).
fn exit_status(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt as _;
    match (status.code(), status.signal()) {
        (Some(code), _) => tr!("exit {code}", code),
        (None, Some(signal)) => {
            let name = match signal {
                libc::SIGINT => "SIGINT".to_string(),
                libc::SIGKILL => "SIGKILL".to_string(),
                libc::SIGTERM => "SIGTERM".to_string(),
                libc::SIGABRT => "SIGABRT".to_string(),
                libc::SIGSEGV => "SIGSEGV".to_string(),
                other => tr!("signal {number}", number = other),
            };
            tr!("killed by {name}", name)
        }
        (None, None) => status.to_string(),
    }
}

fn ms(d: Duration) -> String {
    format!("{:.0} ms", d.as_secs_f64() * 1000.0)
}

fn secs(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s.fract() == 0.0 { format!("{s:.0} s") } else { format!("{s:.1} s") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hot_loop_window_ends_past_a_resync_after_the_quiet_one() {
        let s = Duration::from_secs;
        // The course: the first resync (30 s) comes after 5 s of quiet.
        assert_eq!(hot_loop_window(s(30), s(5)), s(33));
        // Resyncs at 2, 4, 6 s: 6 s is the first after the quiet window.
        assert_eq!(hot_loop_window(s(2), s(5)), s(9));
        assert_eq!(hot_loop_window(s(5), s(5)), s(13));
    }
}
