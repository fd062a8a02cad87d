//! Grades a controller program — Rust, the course's Go, any language —
//! against the lab, the way the course ends: "make the four experiments pass".
//!
//! The lab's own controller is stopped for the duration. The program runs as
//! a local process with the course's Role (its own ServiceAccount:
//! [`identity`]); `KUBECONFIG` and `{kubeconfig}` in its command give it that
//! identity. Every row is judged from the API server alone: the ConfigMap as
//! stored, and the program's requests as the proxy passed them on — no
//! metrics, logs or Events are asked of the program. It reaches the API
//! server through the grade's [`proxy`] on loopback, which can make one of
//! its writes conflict and its informer list again. [`run`] always stops the
//! program and takes the identity away; the caller restores the controller.
//!
//! | module          | holds                                                        |
//! |-----------------|--------------------------------------------------------------|
//! | [`experiments`] | the course's experiments and more, run by `cargo xtask e2e` and `exp` |
//! | [`rows`]        | the grade's rows, each judged from the API server            |
//! | [`identity`]    | the program's ServiceAccount, Role and kubeconfig                |
//! | [`program`]     | the program under grade, its process group                   |
//! | [`proxy`]       | the grade's proxy in front of the API server, counting the requests |

pub mod experiments;
mod identity;
mod program;
mod proxy;
mod rows;

use std::{
    collections::BTreeMap, future::Future, panic::AssertUnwindSafe, path::PathBuf, time::Duration,
};

use anyhow::Context as _;
use controller::desired::Desired;
use futures::FutureExt as _;
use k8s_openapi::api::rbac::v1::PolicyRule;
use serde::{Deserialize, Serialize};

pub use identity::IDENTITY;
pub use program::WITHOUT_PROC;

use labkit::lab::Lab;

use labkit::command::Cmd;
use labkit::record::Shared;
use labkit::tr;

/// A ConfigMap name the identity's first request reads (it need not exist).
pub const PROBE_NAME: &str = "my-controller-grade-probe";
/// Replaced in the command by the path of the program's kubeconfig.
pub const KUBECONFIG_WORD: &str = "{kubeconfig}";

/// How to grade.
#[derive(Clone)]
pub struct Options {
    /// The program and its arguments; [`KUBECONFIG_WORD`] is replaced.
    pub command: Vec<String>,
    /// The data the program keeps in the lab's target ConfigMap.
    pub data: BTreeMap<String, String>,
    /// The program's resync period: "no hot loop" watches at least one.
    pub resync: Duration,
    /// How long a (re)started program gets to make its first request.
    pub connect_within: Duration,
    /// How long a restarted program is watched for writes ("idempotent rerun").
    pub quiet: Duration,
    /// How long it gets to exit after SIGINT or SIGTERM.
    pub exit_within: Duration,
    /// How many of its writes "conflicts" makes conflict, one after another
    /// (more than 1: a test of the grader's own steadiness).
    pub conflicts: u32,
    /// The Role it runs with: the course's, or the rules of a Role file of the learner's.
    pub role: Role,
    /// Say what is waited for while waiting (a person runs it).
    pub shown: bool,
    /// Told as the grade goes on.
    pub progress: Progress,
}

/// What the grade tells as it goes on, for a person to follow.
pub enum Step<'a> {
    /// A row is done.
    Row(&'a Row),
    /// The restarted program is watched this long for writes (it includes a resync).
    Watching { window: Duration },
}

/// A callback for each [`Step`] (none: silent).
pub type Progress = Option<std::sync::Arc<dyn Fn(Step<'_>) + Send + Sync>>;

impl Options {
    /// The course's data, and windows that fit the course's program.
    pub fn new(command: Vec<String>) -> Options {
        Options {
            command,
            data: controller::desired::default_data(),
            resync: Duration::from_secs(30),
            connect_within: Duration::from_secs(60),
            quiet: Duration::from_secs(5),
            exit_within: Duration::from_secs(5),
            conflicts: 1,
            role: Role::course(),
            shown: false,
            progress: None,
        }
    }

    fn tell(&self, step: Step<'_>) {
        if let Some(tell) = &self.progress {
            tell(step);
        }
    }
}

/// An enum of keys: each variant's name in texts and JSON, and all of them in order.
macro_rules! keyed {
    ($(#[$doc:meta])* $name:ident { $($(#[$vdoc:meta])* $variant:ident = $key:literal,)* }) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
        pub enum $name {
            $($(#[$vdoc])* #[serde(rename = $key)] $variant,)*
        }

        impl $name {
            pub const ALL: &[$name] = &[$($name::$variant),*];

            /// The name in texts and JSON.
            pub fn key(self) -> &'static str {
                match self {
                    $($name::$variant => $key,)*
                }
            }
        }
    };
}

keyed! {
    /// The rows, in the order they run.
    RowId {
        Starts = "starts",
        SelfHeal = "self_heal",
        Correction = "correction",
        FailedWrite = "failed_write",
        Conflict = "conflict",
        Rerun = "rerun",
        HotLoop = "hot_loop",
        Watches = "watches",
        CleanExit = "clean_exit",
    }
}

impl RowId {
    /// Part of the course's graduation — the four experiments, and what the course's text
    /// asks of step 4: an informer, no hot loop (docs/grade.md quotes it) — or beyond it.
    pub fn in_course(self) -> bool {
        !matches!(self, RowId::FailedWrite | RowId::Conflict | RowId::CleanExit)
    }
}

/// The Role the program runs with.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Role {
    /// The file it was read from; none: the course's (its section 六, rule for rule).
    pub file: Option<PathBuf>,
    pub rules: Vec<PolicyRule>,
}

impl Role {
    pub fn course() -> Role {
        let verbs = ["get", "list", "watch", "create", "update"].map(String::from).to_vec();
        let rule = PolicyRule {
            api_groups: Some(vec![String::new()]),
            resources: Some(vec!["configmaps".into()]),
            verbs,
            ..PolicyRule::default()
        };
        Role { file: None, rules: vec![rule] }
    }

    /// Its rules in one line: `get, list, watch, create, update configmaps`.
    pub fn summary(&self) -> String {
        let rule = |r: &PolicyRule| {
            let resources = r.resources.clone().unwrap_or_default().join(",");
            format!("{} {resources}", r.verbs.join(", "))
        };
        self.rules.iter().map(rule).collect::<Vec<_>>().join("; ")
    }
}

keyed! {
    /// What to re-read when a row fails: a part of the course.
    Hint {
        /// The kick after the cache synced.
        Kick = "kick",
        /// NotFound in the cache means "create it".
        NotFound = "not_found",
        /// What it creates or writes is not the desired data.
        DesiredData = "desired_data",
        /// A change of the object must be compared and corrected.
        Correct = "correct",
        /// Its corrections were sent but did not put the data back.
        UpdateRefused = "update_refused",
        /// A failure is retried, then given up; the program keeps running.
        KeepRunning = "keep_running",
        /// A 409 Conflict is retried with the newer object (self-check Q6).
        Conflict = "conflict",
        /// Right means no write at all.
        NoWriteWhenRight = "no_write_when_right",
        /// Read through an informer (list once, then watch), not by polling.
        Informer = "informer",
        /// Driven by events, but each read goes to the API server: read the cache (④).
        ReadCache = "read_cache",
        /// The API server answered 403: the program asks what its Role does not allow.
        Forbidden = "forbidden",
        /// SIGINT and SIGTERM end it cleanly.
        Signals = "signals",
        /// It exited while it should have been running.
        Exited = "exited",
    }
}

/// One row: passed or not, what was seen (a key of the texts and its
/// values), and on failure what to re-read.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Row {
    pub id: RowId,
    pub passed: bool,
    /// `<row>.<outcome>` (`starts.pass`, `starts.absent`, …) or `exited`, `not_run`.
    pub seen: String,
    pub values: BTreeMap<String, String>,
    pub hint: Option<Hint>,
    /// What the API server answered 403 Forbidden while the row ran.
    pub forbidden: Vec<Denied>,
    /// How many of the program's updates of my-config were answered 409 Conflict while the row ran.
    pub conflicts: u64,
}

/// A request the API server answered 403 Forbidden, as `kubectl auth can-i` asks it
/// (`list configmaps -A`), and how often.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Denied {
    pub asked: String,
    pub times: u64,
}

impl Denied {
    /// Of ConfigMaps, what the course's controller works on (not an Event, a Lease).
    pub fn of_config_maps(&self) -> bool {
        let resource = self.asked.split_whitespace().nth(1).unwrap_or_default();
        resource.split('/').next() == Some("configmaps")
    }
}

/// What a grade found.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Report {
    pub rows: Vec<Row>,
    /// Everything the program printed, run after run.
    pub log: PathBuf,
    /// `system:serviceaccount:…` the program ran as.
    pub user: String,
    /// Stops were judged by every process of the program's group (`/proc`), not
    /// by the process started alone ([`program`]'s group module says what that misses).
    pub group_read: bool,
}

impl Report {
    /// Every row of the course's graduation passed (`in_course`), or every row beyond it.
    pub fn passed(&self, in_course: bool) -> bool {
        RowId::ALL
            .iter()
            .filter(|id| id.in_course() == in_course)
            .all(|id| self.rows.iter().any(|r| r.id == *id && r.passed))
    }
}

/// The program could not be graded at all: it did not start, exited before
/// it asked the API server anything, or never asked. `reason` names its text
/// (`cannot_start`, `exited_at_once`, `never_connected`), `value` fills it
/// (why, the exit status, the time waited); `detail` holds the last lines it
/// printed.
#[derive(Debug, thiserror::Error)]
#[error("`{command}` cannot be graded: {reason} ({value})\n{detail}")]
pub struct Refused {
    pub command: String,
    pub reason: &'static str,
    pub value: String,
    pub detail: String,
}

/// Grades `options.command` against `lab`'s target ConfigMap. The lab's
/// controller must be stopped by the caller, which restores it afterwards;
/// the program's identity and the program itself are gone when this
/// returns, whether it returns a report, an error, or `cancel` fires first
/// (then the error says so). What it makes — the identity, the ConfigMap
/// the hot-loop row makes, the program's process group — is in `record` (the lab's)
/// before it exists, as made by [`crate::identity::BY`], so that whoever puts the lab back
/// after a grade that was killed finds it.
pub async fn run(
    lab: &Lab,
    options: &Options,
    record: Shared,
    cancel: impl Future<Output = ()>,
) -> anyhow::Result<Report> {
    let desired =
        Desired::new(lab.desired().namespace(), lab.desired().name(), options.data.clone())
            .map_err(|e| anyhow::anyhow!(tr!("the desired data: {e}", e)))?;
    let dir = lab.file().state_dir.join("grade");
    labkit::files::create_dir(&dir)?;
    let kubeconfig = proxy::kubeconfig_in(&lab.borrowed_dir());
    let argv: Vec<String> = options
        .command
        .iter()
        .map(|w| w.replace(KUBECONFIG_WORD, &kubeconfig.display().to_string()))
        .collect();
    // Its output goes to a file, as a log: no colours (https://no-color.org).
    let cmd =
        Cmd::argv(&argv).env("NO_COLOR", "1").env("KUBECONFIG", kubeconfig.display().to_string());
    let log = dir.join("program.log");
    std::fs::write(&log, "").with_context(|| tr!("cannot write {path}", path = log.display()))?;

    let identity = identity::Identity::install(lab, &record, desired.namespace(), &options.role);
    let identity = match identity.await {
        Ok(identity) => identity,
        Err(e) => {
            // Whatever part was applied goes again.
            let _ = identity::Identity::forget(lab.client(), &record).await;
            return Err(e.context(tr!("cannot set up the program's identity")));
        }
    };
    let target =
        proxy::Target { namespace: desired.namespace().into(), name: desired.name().into() };
    let proxy = proxy::Proxy::start(&identity, &lab.borrowed_dir(), target, lab.client()).await;
    let proxy = match proxy {
        Ok(proxy) => proxy,
        Err(e) => {
            let _ = identity::Identity::forget(lab.client(), &record).await;
            return Err(e.context(tr!("cannot start the grade's proxy to the API server")));
        }
    };
    let mut grading = rows::Grading {
        api: kube::Api::namespaced(lab.client(), desired.namespace()),
        identity: Some(identity),
        proxy: Some(proxy),
        program: program::Program::new(cmd, log.clone(), record.clone()),
        record,
        desired,
        options,
        rows: Vec::new(),
        sigint: None,
        exited: None,
        reads: Default::default(),
        answered: (0, 0),
    };
    let outcome = tokio::select! {
        done = AssertUnwindSafe(grading.all()).catch_unwind() => match done {
            Ok(result) => result,
            Err(_) => Err(anyhow::anyhow!(tr!("the grade itself panicked (a bug in grader/src)"))),
        },
        () = cancel => Err(anyhow::anyhow!(tr!("interrupted"))),
    };
    let (rows, user, removed) = grading.finish().await;
    outcome?;
    removed.with_context(|| tr!("cannot remove the program's identity"))?;
    Ok(Report { rows, log, user, group_read: program::readable() })
}
