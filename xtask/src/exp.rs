//! `cargo xtask exp <create|heal|correct|rerun|dedup>`: one of the course's
//! experiments, live against the current lab, narrated for a workshop attendee.
//!
//! The experiment itself is the e2e suite's function (`e2e::experiments::…`):
//! one definition, two uses. This module only wraps it, and each narration is
//! a row of [`NARRATED`]: what is about to happen, the kubectl commands that
//! repeat it by hand, what the controller logged meanwhile, the reaction time
//! and what the suite measured, and what to notice. Every part starts its line
//! with a fixed label ([`KEY_LINES`]), so the output can be checked by grep
//! (and is, by [`transcript`] itself).

use std::{fmt::Write as _, path::PathBuf, process::ExitCode};

use anyhow::{Result, bail};
use controller::desired::Desired;
use e2e::{
    command::Cmd,
    converge::wait_idle,
    deployment::{NAME as DEPLOYMENT, NAMESPACE as DEPLOYMENT_NAMESPACE},
    experiments::{self, DEDUP_FLAGS, DRIFT_LABEL},
    lab::{self, DEFAULT_NAME, Lab},
    lab_file::{LabFile, ProviderKind},
    suite::{Experiment, Measured, first_key},
};
use futures::future::BoxFuture;

use crate::lab::state_dir;

/// The label every narration has at the start of at least one line (in this
/// order) when its experiment passed; [`missing_key_lines`] checks for them.
pub const KEY_LINES: &[&str] = &[
    "about to:",
    "by hand:",
    "running:",
    "controller logged:",
    "reaction time:",
    "measured:",
    "notice:",
    "result:",
];

/// Labels are padded to one width so the texts line up in a terminal.
const LABEL_WIDTH: usize = 20;
/// The controller's log during an experiment is short; a flood (say, a
/// retry storm) is cut to its end, where the outcome is.
const MAX_LOG_LINES: usize = 30;

/// One narrated experiment. The others (version, hot-loop, rbac, the faults)
/// have nothing to watch live; `cargo xtask e2e --exp NAME` runs them.
struct Narrated {
    /// The name a person types, an alias in the suite.
    short: &'static str,
    /// The suite's name: the function in `e2e::experiments` and its test.
    test_name: &'static str,
    course: &'static str,
    /// The suite's function, called as the suite calls it.
    run: for<'a> fn(&'a mut Lab) -> BoxFuture<'a, Result<Measured>>,
    /// In plain words; `{cm}`, `{key}`, `{label}` and `{flags}` are filled in
    /// from the lab ([`Hand::fill`]).
    about_to: &'static str,
    /// The commands that repeat it by hand, after `export KUBECONFIG=…`.
    by_hand: &'static [HandStep],
    /// What the measured latency spans, or why there is none.
    reaction: Reaction,
    /// What to notice, mirroring the course's explanation of the experiment.
    notice: &'static [&'static str],
}

enum Reaction {
    Timed(&'static str),
    NotTimed(&'static str),
}

/// One by-hand command; the text after it is its `# comment` ("" for none).
#[derive(Clone, Copy)]
enum HandStep {
    /// `kubectl VERB configmap NAME -n NAMESPACE ARGS…`
    Kubectl(&'static str, &'static [&'static str], &'static str),
    Stop(&'static str),
    /// Start on the lab's own flags.
    Start(&'static str),
    /// Start with [`DEDUP_FLAGS`].
    StartSlow(&'static str),
    /// Start on the lab's own flags after a start with [`DEDUP_FLAGS`].
    StartOwn(&'static str),
    Metrics(&'static str),
    /// The patch correct_on_patch sends.
    DriftPatch(&'static str),
    /// The label it takes off again.
    DriftUnlabel(&'static str),
    /// dedup's five changes as one shell loop.
    DedupLoop,
}

const GET_YAML: &[&str] = &["-o", "yaml"];
const RESOURCE_VERSION: &[&str] = &["-o", "jsonpath={.metadata.resourceVersion}{\"\\n\"}"];

/// The narrated experiments, in the course's order.
const NARRATED: &[Narrated] = &[
    Narrated {
        short: "create",
        test_name: "create_on_start",
        course: "course experiment 1",
        run: |lab| Box::pin(experiments::create_on_start(lab)),
        about_to: "stop the controller, delete {cm}, start the controller again, and time \
                   from its start until {cm} holds the desired data",
        by_hand: &[
            HandStep::Stop("stop the controller"),
            HandStep::Kubectl("delete", &[], ""),
            HandStep::Kubectl("get", &[], "NotFound: nobody brings it back"),
            HandStep::Start("start the controller"),
            HandStep::Kubectl("get", GET_YAML, ""),
            HandStep::Kubectl("describe", &[], "Events: Created"),
        ],
        reaction: Reaction::Timed(
            "controller start → my-config holds the desired data (includes starting the process)",
        ),
        notice: &[
            "no event announced my-config: the controller started with an empty cache; when \
             its first list was complete (InitDone), runner.rs `inform` put the key on the \
             queue anyway. That is the startup kick.",
            "reconcile (reconcile.rs) looked the key up in the cache, found nothing and sent \
             exactly one create (api_writes_total{verb=\"create\"} = 1).",
            "kube-runtime's Controller never calls reconcile for an object missing from its \
             cache; this controller reconciles keys, so \"absent\" is an ordinary case.",
        ],
    },
    Narrated {
        short: "heal",
        test_name: "self_heal_on_delete",
        course: "course experiment 2",
        run: |lab| Box::pin(experiments::self_heal_on_delete(lab)),
        about_to: "delete {cm} as someone with kubectl would, and time how long until a watch \
                   shows it back with the desired data",
        by_hand: &[
            HandStep::Kubectl("get", &["--watch"], "in a second terminal: see it go and come back"),
            HandStep::Kubectl("delete", &[], ""),
            HandStep::Kubectl("get", GET_YAML, "a new uid and creationTimestamp: a new object"),
        ],
        reaction: Reaction::Timed("delete → a watch shows it back with the desired data"),
        notice: &[
            "the controller did not poll: the watch told it (a Delete event), the work queue \
             got the key, reconcile found the object missing in the cache and created it.",
            "milliseconds, while the resync runs every 30 s: only the watch explains that.",
            "the object that came back is a new one (new uid): the controller does not undo \
             a delete, it makes the state right again.",
        ],
    },
    Narrated {
        short: "correct",
        test_name: "correct_on_patch",
        course: "course experiment 3",
        run: |lab| Box::pin(experiments::correct_on_patch(lab)),
        about_to: "patch {cm} the way someone might by hand ({key}=env=dev, an extra key \
                   e2e-extra, a label {label}=someone), and time how long until a watch shows \
                   the desired data again",
        by_hand: &[
            HandStep::DriftPatch(""),
            HandStep::Kubectl("get", GET_YAML, "{key} back, e2e-extra gone, the label kept"),
            HandStep::DriftUnlabel("the experiment takes its label off again"),
        ],
        reaction: Reaction::Timed("patch → a watch shows the desired data again"),
        notice: &[
            "the controller compared data, not generation: ConfigMaps have no \
             metadata.generation (Desired::is_satisfied_by, desired.rs).",
            "the whole desired data came back and the extra key is gone (the desired data is \
             the whole truth), but the label is kept: Desired::corrected changes only data, \
             on an owned clone of the cached object (the course's DeepCopy).",
            "the update carried the cached resourceVersion: had someone written in between, \
             the API server would have answered 409 Conflict and the key would have been \
             retried with the newer version (runner.rs `process`).",
            "one write only: the controller's own update comes back as a watch event, and \
             that reconcile finds the data right and writes nothing. No hot loop.",
        ],
    },
    Narrated {
        short: "rerun",
        test_name: "idempotent_rerun",
        course: "course experiment 4",
        run: |lab| Box::pin(experiments::idempotent_rerun(lab)),
        about_to: "restart the controller twice while {cm} is already right, and check that \
                   nothing is written: not its resourceVersion, not its managedFields, no \
                   write on /metrics, no create or correct line in the log",
        by_hand: &[
            HandStep::Kubectl("get", RESOURCE_VERSION, "note the number"),
            HandStep::Stop("stop the controller; then start it again:"),
            HandStep::Start(""),
            HandStep::Kubectl("get", RESOURCE_VERSION, "the same number"),
            HandStep::Metrics("no write"),
        ],
        reaction: Reaction::NotTimed("this experiment counts writes (there must be none)"),
        notice: &[
            "resourceVersion unchanged: level-triggered and idempotent, no write when \
             already right. Each start ran the startup reconcile, which found the data equal \
             and sent no request (reconcile_total{result=\"unchanged\"}, no api_writes_total).",
            "the controller keeps no memory of what it did before: it looks at the state \
             each time, so ten runs are one run.",
            "managedFields unchanged too: not even an empty update reached the API server.",
        ],
    },
    Narrated {
        short: "dedup",
        test_name: "dedup",
        course: "course step 3",
        run: |lab| Box::pin(experiments::dedup(lab)),
        about_to: "restart the controller with {flags} (each reconcile sleeps that long first), \
                   change {key} five times in a row, and count the reconciles on /metrics",
        by_hand: &[
            HandStep::Stop("stop the controller"),
            HandStep::StartSlow("start it with slow reconciles"),
            HandStep::Metrics("note reconcile_total"),
            HandStep::DedupLoop,
            HandStep::Metrics("a few more reconciles, not five"),
            HandStep::Stop("then put the controller back on its own flags:"),
            HandStep::StartOwn(""),
        ],
        reaction: Reaction::NotTimed("this experiment counts reconciles"),
        notice: &[
            "five changes, fewer reconciles: the queue holds each key once. WorkQueue::add \
             (queue.rs) drops a key that is already waiting; one added while a worker holds \
             it is marked dirty, and WorkQueue::done queues it once more.",
            "each reconcile read the latest state from the cache, not the state an event \
             carried: the changes in between were never handled one by one, and the end \
             state is the desired data.",
            "the slow reconciles were for this experiment only: the controller was \
             restarted on the lab's own flags afterwards.",
        ],
    },
];

/// The names this verb narrates, as a person types them.
pub fn names() -> impl Iterator<Item = &'static str> {
    NARRATED.iter().map(|n| n.short)
}

/// `cargo xtask exp [NAME] [--name LAB]`: without NAME, the list; with it,
/// the experiment against lab `lab_name`. Fails when it fails.
pub async fn run(lab_name: &str, exp: Option<&str>) -> Result<ExitCode> {
    match exp {
        None => {
            print!("{}", listing());
            Ok(ExitCode::SUCCESS)
        }
        Some(exp) => Ok(transcript(lab_name, exp).await?.0),
    }
}

/// Runs experiment `exp` against lab `lab_name`, printing the narration as it
/// goes; returns the exit code and a copy of the narration (stdout). A
/// narration of a passed experiment that lacks one of [`KEY_LINES`] is a
/// failure too: the output is this verb's product.
pub async fn transcript(lab_name: &str, exp: &str) -> Result<(ExitCode, String)> {
    let exp = resolve(exp)?;
    if LabFile::read(&state_dir(lab_name))?.is_none() {
        bail!("no lab named {lab_name} is up: run `{}` first", lab_up(lab_name));
    }
    let mut lab = Lab::find_named(lab_name).await?;
    let mut out = Transcript::default();
    // A person may have stopped the controller to try something by hand.
    lab.restore().await?;
    let hand = Hand::new(lab.file(), lab.desired());
    out.lines(before(exp, &hand));

    // The log is a file on an envtest lab, the pod's log on kind.
    let mark = lab.log_mark().ok();
    let result = (exp.run)(&mut lab).await;
    let log = match &mark {
        Some(mark) => {
            // The experiment is done once a watch shows the result, which can
            // be before the controller got its own answer and logged it; idle
            // (nothing queued, nothing in flight) means its lines are written.
            // Best effort: a controller that cannot say still has a log.
            let _ = wait_idle(&lab).await;
            lab.controller_log(mark).await.ok()
        }
        None => None,
    };
    let restored = lab.restore().await;
    out.lines(after(exp, &result, log.as_deref()));

    let code = match (&result, restored) {
        (Ok(_), Ok(())) => {
            let missing = missing_key_lines(&out.text);
            if !missing.is_empty() {
                bail!("the narration lacks the lines {missing:?}: a bug in xtask/src/exp.rs");
            }
            ExitCode::SUCCESS
        }
        (result, restored) => {
            // The error itself is in the narration ("error:"); what a person
            // needs to find the cause goes to stderr.
            if result.is_err() {
                eprintln!("{}", lab.diagnostics().await);
            }
            if let Err(e) = restored {
                eprintln!(
                    "error: could not put the lab back as it was: {e:#}\n\
                     `cargo xtask lab reset --name {lab_name}` starts it anew"
                );
            }
            ExitCode::FAILURE
        }
    };
    Ok((code, out.text))
}

/// The labels of [`KEY_LINES`] that no line of `transcript` starts with.
pub fn missing_key_lines(transcript: &str) -> Vec<&'static str> {
    KEY_LINES
        .iter()
        .copied()
        .filter(|key| !transcript.lines().any(|line| line.starts_with(key)))
        .collect()
}

/// `cargo xtask lab up`, with `--name` when it is not the default lab.
fn lab_up(lab_name: &str) -> String {
    if lab_name == DEFAULT_NAME {
        "cargo xtask lab up".into()
    } else {
        format!("cargo xtask lab up --name {lab_name}")
    }
}

/// An experiment by any name the suite accepts for it (`heal`, `self-heal`,
/// `self_heal_on_delete`, …).
fn resolve(word: &str) -> Result<&'static Narrated> {
    let known = || names().collect::<Vec<_>>().join(", ");
    let Some(entry) = e2e::find(word) else {
        bail!("no experiment {word:?}; narrated: {} (`cargo xtask exp` lists them)", known());
    };
    match NARRATED.iter().find(|n| n.test_name == entry.name) {
        Some(exp) => Ok(exp),
        None => bail!(
            "{word} ({}) has nothing to watch live, so it is not narrated: \
             run it with `cargo xtask e2e --exp {word}`; narrated: {}",
            entry.name,
            known()
        ),
    }
}

impl Narrated {
    /// The suite's entry: its aliases and its one-line description.
    fn entry(&self) -> &'static Experiment {
        e2e::find(self.test_name)
            .expect("every narrated experiment is in e2e::experiments::ALL (a unit test checks)")
    }
}

/// What `cargo xtask exp` alone prints: one line per experiment.
fn listing() -> String {
    let mut text = String::from(
        "The course's experiments, live against the current lab \
         (cargo xtask exp NAME [--name LAB]):\n\n",
    );
    for exp in NARRATED {
        let _ = writeln!(text, "  {:<8} {:<20} {}", exp.short, exp.course, exp.entry().about);
    }
    text.push_str(
        "\nEach runs the e2e suite's own function (cargo xtask e2e --exp NAME runs it as a test).\n",
    );
    text
}

/// `label` padded to [`LABEL_WIDTH`], then `text`.
fn labelled(label: &str, text: &str) -> String {
    format!("{label:<LABEL_WIDTH$}{text}")
}

/// Prints each line at once (the experiments take seconds; a person reads
/// along) and keeps a copy.
#[derive(Default)]
struct Transcript {
    text: String,
}

impl Transcript {
    fn lines(&mut self, lines: Vec<String>) {
        for line in lines {
            println!("{line}");
            self.text.push_str(&line);
            self.text.push('\n');
        }
    }
}

/// What a person needs to repeat an experiment by hand on this lab.
struct Hand {
    kubeconfig: String,
    desired: Desired,
    /// The data key the experiments change.
    key: String,
    metrics_url: String,
    controller: ControllerHand,
}

/// How to stop and start the lab's controller by hand.
enum ControllerHand {
    /// An envtest lab: a process (or `docker run`) with a pid file.
    Process { pid_file: String, binary: PathBuf, args: Vec<String> },
    /// A kind lab: the Deployment of `manifests/deployment.yaml`.
    Deployment,
}

impl Hand {
    fn new(file: &LabFile, desired: &Desired) -> Hand {
        let process = file.processes.iter().find(|p| p.role == lab::CONTROLLER);
        let controller = match (file.provider, process) {
            (ProviderKind::Envtest, Some(p)) => ControllerHand::Process {
                pid_file: p.pid_file.display().to_string(),
                binary: p.binary.clone(),
                args: p.args.clone(),
            },
            _ => ControllerHand::Deployment,
        };
        Hand {
            kubeconfig: file.admin_kubeconfig.display().to_string(),
            desired: desired.clone(),
            key: first_key(desired),
            metrics_url: format!("{}/metrics", file.controller.url),
            controller,
        }
    }

    /// A template of [`NARRATED`] with this lab's words.
    fn fill(&self, template: &str) -> String {
        template
            .replace("{cm}", &self.desired.to_string())
            .replace("{key}", &self.key)
            .replace("{label}", DRIFT_LABEL)
            .replace("{flags}", &DEDUP_FLAGS.join(" "))
    }

    /// `export KUBECONFIG=…`, then `steps` as a person types them.
    fn commands(&self, steps: &[HandStep]) -> Vec<String> {
        let mut lines = vec![format!("export KUBECONFIG={}   # the lab's admin", self.kubeconfig)];
        for step in steps {
            let (command, why) = self.command(*step);
            let why = self.fill(why);
            lines.push(if why.is_empty() { command } else { format!("{command}   # {why}") });
        }
        lines
    }

    fn command(&self, step: HandStep) -> (String, &'static str) {
        let c = &self.controller;
        match step {
            HandStep::Kubectl(verb, rest, why) => (self.kubectl(verb, rest), why),
            HandStep::Stop(why) => (c.stop(), why),
            HandStep::Start(why) => (c.start(&[]), why),
            HandStep::StartSlow(why) => (c.start(DEDUP_FLAGS), why),
            HandStep::StartOwn(why) => (c.start_without(DEDUP_FLAGS), why),
            HandStep::Metrics(why) => (
                format!(
                    "curl -s {} | grep -E '^(reconcile_total|api_writes_total)'",
                    self.metrics_url
                ),
                why,
            ),
            HandStep::DriftPatch(why) => {
                let patch = experiments::drift_patch(&self.desired).to_string();
                (self.kubectl("patch", &["--type", "merge", "-p", &patch]), why)
            }
            HandStep::DriftUnlabel(why) => {
                (self.kubectl("label", &[&format!("{DRIFT_LABEL}-")]), why)
            }
            HandStep::DedupLoop => (self.dedup_loop(), ""),
        }
    }

    /// `kubectl VERB configmap NAME -n NAMESPACE REST…`, quoted for a shell.
    fn kubectl(&self, verb: &str, rest: &[&str]) -> String {
        let (name, namespace) = (self.desired.name(), self.desired.namespace());
        Cmd::new("kubectl").args([verb, "configmap", name, "-n", namespace]).args(rest).to_string()
    }

    /// dedup's five changes as one shell loop. A unit test checks that it
    /// sends exactly `experiments::dedup_change`.
    fn dedup_loop(&self) -> String {
        const MARK: u32 = 999_999;
        let patch = experiments::dedup_change(&self.desired, MARK)
            .to_string()
            // Leave the single quotes for `$i`: the shell fills it in.
            .replace(&MARK.to_string(), "'$i'");
        format!(
            "for i in 1 2 3 4 5; do kubectl patch configmap {} -n {} --type merge -p '{patch}'; done",
            self.desired.name(),
            self.desired.namespace()
        )
    }
}

impl ControllerHand {
    fn stop(&self) -> String {
        match self {
            // SIGTERM: it finishes a running reconcile and exits.
            ControllerHand::Process { pid_file, .. } => format!("kill $(cat {pid_file})"),
            ControllerHand::Deployment => scale(0),
        }
    }

    /// Starts it again with `extra` flags. A process runs in the foreground,
    /// its log right there; Ctrl-C stops it, and the next `cargo xtask exp`
    /// or `cargo xtask e2e` starts the lab's own again. A Deployment gets the
    /// flags as the environment variables they have (controller/src/cli.rs).
    fn start(&self, extra: &[&str]) -> String {
        match self {
            ControllerHand::Process { binary, args, .. } => {
                Cmd::new(binary.display().to_string()).args(args).args(extra).to_string()
            }
            ControllerHand::Deployment => {
                let vars: Vec<String> = flag_variables(extra)
                    .into_iter()
                    .map(|(name, value)| format!("{name}={value}"))
                    .collect();
                set_env_then_scale_up(&vars)
            }
        }
    }

    /// Starts it again on the lab's own flags after a start with `extra`.
    fn start_without(&self, extra: &[&str]) -> String {
        match self {
            ControllerHand::Process { .. } => self.start(&[]),
            ControllerHand::Deployment => {
                let unset: Vec<String> =
                    flag_variables(extra).into_iter().map(|(name, _)| format!("{name}-")).collect();
                set_env_then_scale_up(&unset)
            }
        }
    }
}

fn scale(replicas: u8) -> String {
    format!("kubectl scale deployment {DEPLOYMENT} -n {DEPLOYMENT_NAMESPACE} --replicas={replicas}")
}

fn set_env_then_scale_up(vars: &[String]) -> String {
    if vars.is_empty() {
        return scale(1);
    }
    format!(
        "kubectl set env deployment {DEPLOYMENT} -n {DEPLOYMENT_NAMESPACE} {} && {}",
        vars.join(" "),
        scale(1)
    )
}

/// `--reconcile-delay 2s` → `MY_CONTROLLER_RECONCILE_DELAY`, `2s`: the
/// controller's flags each have such a variable (controller/src/cli.rs).
fn flag_variables<'a>(flags: &[&'a str]) -> Vec<(String, &'a str)> {
    flags
        .chunks(2)
        .map(|pair| {
            let name = pair[0].trim_start_matches("--").replace('-', "_");
            let value = pair.get(1).copied().unwrap_or_default();
            (format!("MY_CONTROLLER_{}", name.to_uppercase()), value)
        })
        .collect()
}

/// The narration before the experiment runs.
fn before(exp: &Narrated, hand: &Hand) -> Vec<String> {
    let mut lines = vec![
        format!("== {} ({}): {}", exp.short, exp.course, exp.entry().about),
        labelled("about to:", &hand.fill(exp.about_to)),
    ];
    lines.extend(hand.commands(exp.by_hand).iter().map(|step| labelled("by hand:", step)));
    lines.push(labelled(
        "running:",
        &format!(
            "e2e::experiments::{}, the same function `cargo xtask e2e --exp {}` runs …",
            exp.test_name, exp.short
        ),
    ));
    lines
}

/// The narration once the experiment is over: the controller's log, then
/// what was measured and what to notice, or the error.
fn after(exp: &Narrated, result: &Result<Measured>, log: Option<&str>) -> Vec<String> {
    let mut lines = Vec::new();
    match log {
        None => lines.push(labelled(
            "controller logged:",
            &format!("(not readable here: `kubectl logs deployment/{DEPLOYMENT}`)"),
        )),
        Some(log) => {
            let logged: Vec<&str> = log.lines().filter(|l| !l.trim().is_empty()).collect();
            let skipped = logged.len().saturating_sub(MAX_LOG_LINES);
            let summary = match (logged.len(), skipped) {
                (0, _) => "nothing at info level (unchanged reconciles log at debug)".to_string(),
                (1, _) => "1 line during the experiment".to_string(),
                (n, 0) => format!("{n} lines during the experiment"),
                (n, _) => format!("{n} lines during the experiment, the last {MAX_LOG_LINES}:"),
            };
            lines.push(labelled("controller logged:", &summary));
            lines.extend(logged[skipped..].iter().map(|l| format!("  | {l}")));
        }
    }
    match result {
        Ok(measured) => {
            let reaction = match (&exp.reaction, measured.latency) {
                (Reaction::Timed(span), Some(latency)) => {
                    format!("{:.1} ms ({span})", latency.as_secs_f64() * 1000.0)
                }
                (Reaction::NotTimed(why), _) => format!("not timed: {why}"),
                (Reaction::Timed(span), None) => format!("not reported ({span})"),
            };
            lines.push(labelled("reaction time:", &reaction));
            lines.push(labelled("measured:", &measured.detail));
            lines.extend(measured.warnings.iter().map(|w| labelled("warning:", w)));
            lines.extend(exp.notice.iter().map(|n| labelled("notice:", n)));
            lines.push(labelled("result:", "pass"));
        }
        Err(e) => {
            lines.push(labelled("result:", "FAIL"));
            lines.push(labelled("error:", &format!("{e:#}")));
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use std::{path::PathBuf, time::Duration};

    use e2e::lab_file::{Controller, Process};

    use super::*;

    fn lab_file(provider: ProviderKind) -> LabFile {
        let dir = PathBuf::from("/kit/target/lab/ws-lab");
        LabFile {
            format: e2e::lab_file::FORMAT,
            name: "ws-lab".into(),
            provider,
            state_dir: dir.clone(),
            created_unix: 0,
            kubernetes_version: "v1.36.3".into(),
            api_server_url: "https://127.0.0.1:6443".into(),
            admin_kubeconfig: dir.join("kubeconfig"),
            controller: Controller {
                url: "http://127.0.0.1:8080".into(),
                kubeconfig: dir.join("controller.kubeconfig"),
                service_account: "default/my-controller".into(),
                token_expires: String::new(),
                log: dir.join("controller.log"),
                container: None,
            },
            kind: None,
            target: Default::default(),
            processes: vec![Process {
                role: lab::CONTROLLER.into(),
                pid: 42,
                pid_file: dir.join("controller.pid"),
                binary: "/kit/target/debug/my-controller".into(),
                args: vec![
                    "--kubeconfig".into(),
                    dir.join("controller.kubeconfig").display().to_string(),
                    "--listen".into(),
                    "127.0.0.1:8080".into(),
                ],
                version: None,
                source: "cargo build".into(),
                log: dir.join("controller.log"),
                ports: Default::default(),
            }],
        }
    }

    fn hand(provider: ProviderKind) -> Hand {
        Hand::new(&lab_file(provider), &Desired::default())
    }

    fn measured(latency: Option<Duration>) -> Measured {
        Measured { latency, detail: "what the suite measured".into(), warnings: Vec::new() }
    }

    fn narrated(short: &str) -> &'static Narrated {
        NARRATED.iter().find(|n| n.short == short).unwrap()
    }

    #[test]
    fn every_narrated_experiment_is_a_suite_experiment() {
        assert_eq!(names().collect::<Vec<_>>(), ["create", "heal", "correct", "rerun", "dedup"]);
        for exp in NARRATED {
            let entry = e2e::find(exp.test_name)
                .unwrap_or_else(|| panic!("{} is not in the suite", exp.test_name));
            assert_eq!(entry.name, exp.test_name);
            assert!(
                entry.aliases.contains(&exp.short),
                "{} must be an alias of {}, so `cargo xtask e2e --exp` takes it too",
                exp.short,
                entry.name
            );
        }
    }

    #[test]
    fn names_and_aliases_resolve() {
        for (word, exp) in [
            ("create", "create"),
            ("create_on_start", "create"),
            ("heal", "heal"),
            ("self-heal", "heal"),
            ("self_heal_on_delete", "heal"),
            ("correct", "correct"),
            ("rerun", "rerun"),
            ("idempotent_rerun", "rerun"),
            ("dedup", "dedup"),
        ] {
            assert_eq!(resolve(word).unwrap().short, exp, "{word}");
        }
    }

    #[test]
    fn a_suite_experiment_without_narration_points_to_e2e() {
        let error = resolve("version").err().unwrap().to_string();
        assert!(error.contains("cargo xtask e2e --exp version"), "{error}");
    }

    #[test]
    fn an_unknown_name_lists_the_narrated_ones() {
        let error = resolve("explode").err().unwrap().to_string();
        assert!(error.contains("create, heal, correct, rerun, dedup"), "{error}");
    }

    #[test]
    fn the_listing_has_one_line_per_experiment_with_the_suites_words() {
        let text = listing();
        for exp in NARRATED {
            let lines: Vec<_> = text
                .lines()
                .filter(|l| l.trim_start().starts_with(&format!("{} ", exp.short)))
                .collect();
            assert_eq!(lines.len(), 1, "{text}");
            assert!(lines[0].contains(exp.entry().about), "{text}");
        }
    }

    #[test]
    fn every_narration_has_every_key_line() {
        for exp in NARRATED {
            let latency =
                matches!(exp.reaction, Reaction::Timed(_)).then_some(Duration::from_millis(56));
            let mut lines = before(exp, &hand(ProviderKind::Envtest));
            lines.extend(after(
                exp,
                &Ok(measured(latency)),
                Some("2026-01-01T00:00:00Z  INFO controller::reconcile: created\n"),
            ));
            let text = lines.join("\n");
            assert_eq!(missing_key_lines(&text), Vec::<&str>::new(), "{text}");
            assert!(text.contains(&format!("e2e::experiments::{}", exp.test_name)), "{text}");
            for hole in ["{cm}", "{key}", "{label}", "{flags}"] {
                assert!(!text.contains(hole), "{hole} left unfilled: {text}");
            }
        }
    }

    #[test]
    fn the_course_sentences_are_there() {
        let notice = |exp: &str| narrated(exp).notice.join(" ");
        assert!(notice("heal").contains("the controller did not poll: the watch told it"));
        assert!(notice("rerun").contains(
            "resourceVersion unchanged: level-triggered and idempotent, no write when already right"
        ));
        assert!(
            notice("dedup")
                .contains("five changes, fewer reconciles: the queue holds each key once")
        );
        assert!(notice("create").contains("startup kick"));
        assert!(notice("correct").contains("DeepCopy"));
    }

    #[test]
    fn by_hand_gives_the_course_commands() {
        let h = hand(ProviderKind::Envtest);
        let all = |exp: &Narrated| h.commands(exp.by_hand).join("\n");
        assert!(all(narrated("heal")).contains("kubectl delete configmap my-config -n default"));
        assert!(
            all(narrated("heal")).contains("kubectl get configmap my-config -n default -o yaml")
        );
        assert!(all(narrated("correct")).contains(
            r#"kubectl patch configmap my-config -n default --type merge -p '{"data":{"app.conf":"env=dev","e2e-extra":"added by hand"},"metadata":{"labels":{"e2e.lab/added-by":"someone"}}}'"#
        ));
        assert!(all(narrated("correct")).contains("# app.conf back, e2e-extra gone"));
        for exp in NARRATED {
            assert!(
                all(exp).starts_with("export KUBECONFIG=/kit/target/lab/ws-lab/kubeconfig"),
                "{}",
                all(exp)
            );
        }
    }

    #[test]
    fn the_controller_is_restarted_by_hand_with_the_labs_command_line() {
        let h = hand(ProviderKind::Envtest);
        assert_eq!(h.controller.stop(), "kill $(cat /kit/target/lab/ws-lab/controller.pid)");
        assert_eq!(
            h.controller.start(experiments::DEDUP_FLAGS),
            "/kit/target/debug/my-controller --kubeconfig /kit/target/lab/ws-lab/controller.kubeconfig \
             --listen 127.0.0.1:8080 --reconcile-delay 2s"
        );
        assert_eq!(h.controller.start_without(experiments::DEDUP_FLAGS), h.controller.start(&[]));
        let kind = hand(ProviderKind::Kind);
        assert_eq!(
            kind.controller.start(experiments::DEDUP_FLAGS),
            "kubectl set env deployment my-controller -n default MY_CONTROLLER_RECONCILE_DELAY=2s \
             && kubectl scale deployment my-controller -n default --replicas=1"
        );
        assert_eq!(
            kind.controller.start_without(experiments::DEDUP_FLAGS),
            "kubectl set env deployment my-controller -n default MY_CONTROLLER_RECONCILE_DELAY- \
             && kubectl scale deployment my-controller -n default --replicas=1"
        );
    }

    #[test]
    fn the_dedup_loop_sends_the_experiments_changes() {
        let line = hand(ProviderKind::Envtest).dedup_loop();
        // What bash makes of the loop body for i=3.
        let body = line
            .split_once("-p '")
            .and_then(|(_, rest)| rest.rsplit_once("'; done"))
            .map(|(patch, _)| patch.replace("'$i'", "3"))
            .expect(&line);
        let sent: serde_json::Value = serde_json::from_str(&body).expect(&body);
        assert_eq!(sent, experiments::dedup_change(&Desired::default(), 3));
    }

    #[test]
    fn a_failure_says_fail_and_why() {
        let lines = after(narrated("heal"), &Err(anyhow::anyhow!("boom")), Some(""));
        assert!(lines.iter().any(|l| l == &labelled("result:", "FAIL")));
        assert!(lines.iter().any(|l| l.starts_with("error:") && l.ends_with("boom")));
        assert!(!lines.iter().any(|l| l.starts_with("notice:")));
    }

    #[test]
    fn a_long_log_is_cut_to_its_end() {
        let log: String = (1..=40).map(|i| format!("line {i}\n")).collect();
        let lines = after(narrated("heal"), &Ok(measured(None)), Some(&log));
        let shown: Vec<_> = lines.iter().filter(|l| l.starts_with("  | ")).collect();
        assert_eq!(shown.len(), MAX_LOG_LINES);
        assert_eq!(shown.last().unwrap().as_str(), "  | line 40");
    }
}
