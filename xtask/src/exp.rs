//! `cargo xtask exp <create|heal|correct|rerun|dedup>`: one of the course's
//! experiments, live against the current lab, narrated for a workshop attendee.
//!
//! The experiment itself is the e2e suite's function (`e2e::experiments::…`):
//! one definition, two uses. This module only wraps it: what is about to
//! happen, the kubectl commands that repeat it by hand, what the controller
//! logged meanwhile, the reaction time and what the suite measured, and what
//! to notice. Every part starts its line with a fixed label ([`KEY_LINES`]),
//! so the output can be checked by grep (and is, by [`transcript`] itself).

use std::{
    fmt::Write as _,
    path::PathBuf,
    process::{Command, ExitCode},
};

use anyhow::{Result, bail};
use controller::desired::Desired;
use e2e::{
    deployment::{NAME as DEPLOYMENT, NAMESPACE as DEPLOYMENT_NAMESPACE},
    experiments::{self, Experiment, Measured},
    lab::{self, DEFAULT_NAME, Lab},
    lab_file::{LabFile, ProviderKind},
    process::command_line,
};

use crate::lab::state_dir;

/// The experiments this verb narrates, by the short names it accepts (the
/// suite's aliases). The others (version, hot-loop, rbac, the faults) have
/// nothing to watch live; `cargo xtask e2e --exp NAME` runs them.
pub const NAMES: &[&str] = &["create", "heal", "correct", "rerun", "dedup"];

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
    let exp = Exp::resolve(exp)?;
    if LabFile::read(&state_dir(lab_name))?.is_none() {
        bail!("no lab named {lab_name} is up: run `{}` first", lab_up(lab_name));
    }
    let mut lab = Lab::find_named(lab_name).await?;
    let mut out = Transcript::default();
    // A person may have stopped the controller to try something by hand.
    restore(&mut lab).await?;
    let hand = Hand::new(lab.file(), lab.desired());
    out.lines(before(exp, &hand));

    // The log is a file on an envtest lab, the pod's log on kind.
    let mark = lab.log_mark().ok();
    let result = exp.run(&mut lab).await;
    let log = match &mark {
        Some(mark) => {
            // The experiment is done once a watch shows the result, which can
            // be before the controller got its own answer and logged it; idle
            // (nothing queued, nothing in flight) means its lines are written.
            // Best effort: a controller that cannot say still has a log.
            let _ = experiments::wait_idle(&lab).await;
            lab.controller_log(mark).await.ok()
        }
        None => None,
    };
    let restored = restore(&mut lab).await;
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

/// Leaves the lab as the lab started it: running, ready, on its own flags
/// (envtest: its processes; kind: the controller's Deployment).
async fn restore(lab: &mut Lab) -> Result<()> {
    lab.restore().await
}

/// `cargo xtask lab up`, with `--name` when it is not the default lab.
fn lab_up(lab_name: &str) -> String {
    if lab_name == DEFAULT_NAME {
        "cargo xtask lab up".into()
    } else {
        format!("cargo xtask lab up --name {lab_name}")
    }
}

/// What `cargo xtask exp` alone prints: one line per experiment.
fn listing() -> String {
    let mut text = String::from(
        "The course's experiments, live against the current lab \
         (cargo xtask exp NAME [--name LAB]):\n\n",
    );
    for exp in Exp::ALL {
        let _ = writeln!(text, "  {:<8} {:<20} {}", exp.short(), exp.course(), exp.entry().about);
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

/// The narrated experiments. A `match` on this enum is where each one gets
/// its suite function and its texts, so none can be forgotten.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Exp {
    Create,
    Heal,
    Correct,
    Rerun,
    Dedup,
}

/// What the measured time spans, or why there is none.
enum Reaction {
    Timed(&'static str),
    NotTimed(&'static str),
}

impl Exp {
    const ALL: [Exp; 5] = [Exp::Create, Exp::Heal, Exp::Correct, Exp::Rerun, Exp::Dedup];

    /// The suite's name: the function in `e2e::experiments` and its test.
    fn test_name(self) -> &'static str {
        match self {
            Exp::Create => "create_on_start",
            Exp::Heal => "self_heal_on_delete",
            Exp::Correct => "correct_on_patch",
            Exp::Rerun => "idempotent_rerun",
            Exp::Dedup => "dedup",
        }
    }

    /// The name a person types: one of [`NAMES`], an alias in the suite.
    fn short(self) -> &'static str {
        match self {
            Exp::Create => "create",
            Exp::Heal => "heal",
            Exp::Correct => "correct",
            Exp::Rerun => "rerun",
            Exp::Dedup => "dedup",
        }
    }

    /// The suite's entry: its aliases and its one-line description.
    fn entry(self) -> &'static Experiment {
        experiments::find(self.test_name())
            .expect("every narrated experiment is in e2e::experiments::ALL (a unit test checks)")
    }

    /// Where it is in the course.
    fn course(self) -> &'static str {
        match self {
            Exp::Create => "course experiment 1",
            Exp::Heal => "course experiment 2",
            Exp::Correct => "course experiment 3",
            Exp::Rerun => "course experiment 4",
            Exp::Dedup => "course step 3",
        }
    }

    /// An experiment by any name the suite accepts for it (`heal`,
    /// `self-heal`, `self_heal_on_delete`, …).
    fn resolve(word: &str) -> Result<Exp> {
        let known = || NAMES.join(", ");
        let Some(entry) = experiments::find(word) else {
            bail!("no experiment {word:?}; narrated: {} (`cargo xtask exp` lists them)", known());
        };
        match Exp::ALL.into_iter().find(|e| e.test_name() == entry.name) {
            Some(exp) => Ok(exp),
            None => bail!(
                "{word} ({}) has nothing to watch live, so it is not narrated: \
                 run it with `cargo xtask e2e --exp {word}`; narrated: {}",
                entry.name,
                known()
            ),
        }
    }

    /// The suite's function, called as the suite calls it.
    async fn run(self, lab: &mut Lab) -> Result<Measured> {
        match self {
            Exp::Create => experiments::create_on_start(lab).await,
            Exp::Heal => experiments::self_heal_on_delete(lab).await,
            Exp::Correct => experiments::correct_on_patch(lab).await,
            Exp::Rerun => experiments::idempotent_rerun(lab).await,
            Exp::Dedup => experiments::dedup(lab).await,
        }
    }

    /// What the experiment is about to do, in plain words.
    fn about_to(self, hand: &Hand) -> String {
        let cm = &hand.target;
        let key = &hand.key;
        match self {
            Exp::Create => format!(
                "stop the controller, delete {cm}, start the controller again, and time \
                 from its start until {cm} holds the desired data"
            ),
            Exp::Heal => format!(
                "delete {cm} as someone with kubectl would, and time how long until a watch \
                 shows it back with the desired data"
            ),
            Exp::Correct => format!(
                "patch {cm} the way someone might by hand ({key}=env=dev, an extra key \
                 e2e-extra, a label {label}=someone), and time how long until a watch shows \
                 the desired data again",
                label = experiments::DRIFT_LABEL
            ),
            Exp::Rerun => format!(
                "restart the controller twice while {cm} is already right, and check that \
                 nothing is written: not its resourceVersion, not its managedFields, no \
                 write on /metrics, no create or correct line in the log"
            ),
            Exp::Dedup => format!(
                "restart the controller with {flags} (each reconcile sleeps that long first), \
                 change {key} five times in a row, and count the reconciles on /metrics",
                flags = experiments::DEDUP_FLAGS.join(" ")
            ),
        }
    }

    /// Commands that repeat it by hand, each with what it is for.
    fn by_hand(self, hand: &Hand) -> Vec<String> {
        let get_yaml = hand.kubectl("get", &["-o", "yaml"]);
        let mut steps = vec![format!("export KUBECONFIG={}   # the lab's admin", hand.kubeconfig)];
        match self {
            Exp::Create => steps.extend([
                format!("{}   # stop the controller", hand.controller.stop()),
                hand.kubectl("delete", &[]),
                format!("{}   # NotFound: nobody brings it back", hand.kubectl("get", &[])),
                format!("{}   # start the controller", hand.controller.start(&[])),
                get_yaml,
                format!("{}   # Events: Created", hand.kubectl("describe", &[])),
            ]),
            Exp::Heal => steps.extend([
                format!(
                    "{}   # in a second terminal: see it go and come back",
                    hand.kubectl("get", &["--watch"])
                ),
                hand.kubectl("delete", &[]),
                format!("{get_yaml}   # a new uid and creationTimestamp: a new object"),
            ]),
            Exp::Correct => {
                let patch = experiments::drift_patch(&hand.desired).to_string();
                let unlabel = format!("{}-", experiments::DRIFT_LABEL);
                steps.extend([
                    hand.kubectl("patch", &["--type", "merge", "-p", &patch]),
                    format!("{get_yaml}   # {} back, e2e-extra gone, the label kept", hand.key),
                    format!(
                        "{}   # the experiment takes its label off again",
                        hand.kubectl("label", &[&unlabel])
                    ),
                ]);
            }
            Exp::Rerun => {
                let version =
                    hand.kubectl("get", &["-o", "jsonpath={.metadata.resourceVersion}{\"\\n\"}"]);
                steps.extend([
                    format!("{version}   # note the number"),
                    format!(
                        "{}   # stop the controller; then start it again:",
                        hand.controller.stop()
                    ),
                    hand.controller.start(&[]),
                    format!("{version}   # the same number"),
                    format!("{}   # no write", hand.metrics()),
                ]);
            }
            Exp::Dedup => steps.extend([
                format!("{}   # stop the controller", hand.controller.stop()),
                format!(
                    "{}   # start it with slow reconciles",
                    hand.controller.start(experiments::DEDUP_FLAGS)
                ),
                format!("{}   # note reconcile_total", hand.metrics()),
                dedup_loop(hand),
                format!("{}   # a few more reconciles, not five", hand.metrics()),
                format!(
                    "{}   # then put the controller back on its own flags:",
                    hand.controller.stop()
                ),
                hand.controller.start_without(experiments::DEDUP_FLAGS),
            ]),
        }
        steps
    }

    /// What the measured latency spans.
    fn reaction(self) -> Reaction {
        match self {
            Exp::Create => Reaction::Timed(
                "controller start → my-config holds the desired data (includes starting the process)",
            ),
            Exp::Heal => Reaction::Timed("delete → a watch shows it back with the desired data"),
            Exp::Correct => Reaction::Timed("patch → a watch shows the desired data again"),
            Exp::Rerun => Reaction::NotTimed("this experiment counts writes (there must be none)"),
            Exp::Dedup => Reaction::NotTimed("this experiment counts reconciles"),
        }
    }

    /// What to notice, mirroring the course's explanation of the experiment.
    fn notice(self) -> &'static [&'static str] {
        match self {
            Exp::Create => &[
                "no event announced my-config: the controller started with an empty cache; when \
                 its first list was complete (InitDone), runner.rs `inform` put the key on the \
                 queue anyway. That is the startup kick.",
                "reconcile (reconcile.rs) looked the key up in the cache, found nothing and sent \
                 exactly one create (api_writes_total{verb=\"create\"} = 1).",
                "kube-runtime's Controller never calls reconcile for an object missing from its \
                 cache; this controller reconciles keys, so \"absent\" is an ordinary case.",
            ],
            Exp::Heal => &[
                "the controller did not poll: the watch told it (a Delete event), the work queue \
                 got the key, reconcile found the object missing in the cache and created it.",
                "milliseconds, while the resync runs every 30 s: only the watch explains that.",
                "the object that came back is a new one (new uid): the controller does not undo \
                 a delete, it makes the state right again.",
            ],
            Exp::Correct => &[
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
            Exp::Rerun => &[
                "resourceVersion unchanged: level-triggered and idempotent, no write when \
                 already right. Each start ran the startup reconcile, which found the data equal \
                 and sent no request (reconcile_total{result=\"unchanged\"}, no api_writes_total).",
                "the controller keeps no memory of what it did before: it looks at the state \
                 each time, so ten runs are one run.",
                "managedFields unchanged too: not even an empty update reached the API server.",
            ],
            Exp::Dedup => &[
                "five changes, fewer reconciles: the queue holds each key once. WorkQueue::add \
                 (queue.rs) drops a key that is already waiting; one added while a worker holds \
                 it is marked dirty, and WorkQueue::done queues it once more.",
                "each reconcile read the latest state from the cache, not the state an event \
                 carried: the changes in between were never handled one by one, and the end \
                 state is the desired data.",
                "the slow reconciles were for this experiment only: the controller was \
                 restarted on the lab's own flags afterwards.",
            ],
        }
    }
}

/// What a person needs to repeat an experiment by hand on this lab.
struct Hand {
    kubeconfig: String,
    desired: Desired,
    /// `namespace/name` of the ConfigMap.
    target: String,
    name: String,
    namespace: String,
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
            target: desired.to_string(),
            name: desired.name().to_string(),
            namespace: desired.namespace().to_string(),
            key: experiments::first_key(desired),
            metrics_url: format!("{}/metrics", file.controller.url),
            controller,
        }
    }

    /// `kubectl VERB configmap NAME -n NAMESPACE REST…`, quoted for a shell.
    fn kubectl(&self, verb: &str, rest: &[&str]) -> String {
        let mut command = Command::new("kubectl");
        command.args([verb, "configmap", &self.name, "-n", &self.namespace]).args(rest);
        command_line(&command)
    }

    /// The reconcile and write counters of the controller's `/metrics`.
    fn metrics(&self) -> String {
        format!("curl -s {} | grep -E '^(reconcile_total|api_writes_total)'", self.metrics_url)
    }
}

impl ControllerHand {
    fn stop(&self) -> String {
        match self {
            // SIGTERM: it finishes a running reconcile and exits.
            ControllerHand::Process { pid_file, .. } => format!("kill $(cat {pid_file})"),
            ControllerHand::Deployment => {
                format!(
                    "kubectl scale deployment {DEPLOYMENT} -n {DEPLOYMENT_NAMESPACE} --replicas=0"
                )
            }
        }
    }

    /// Starts it again with `extra` flags. A process runs in the foreground,
    /// its log right there; Ctrl-C stops it, and the next `cargo xtask exp`
    /// or `cargo xtask e2e` starts the lab's own again. A Deployment gets the
    /// flags as the environment variables they have (controller/src/cli.rs).
    fn start(&self, extra: &[&str]) -> String {
        match self {
            ControllerHand::Process { binary, args, .. } => {
                let mut line = Command::new(binary);
                line.args(args).args(extra);
                command_line(&line)
            }
            ControllerHand::Deployment => {
                let scale = format!(
                    "kubectl scale deployment {DEPLOYMENT} -n {DEPLOYMENT_NAMESPACE} --replicas=1"
                );
                let vars: Vec<String> = flag_variables(extra)
                    .into_iter()
                    .map(|(name, value)| format!("{name}={value}"))
                    .collect();
                if vars.is_empty() {
                    scale
                } else {
                    format!(
                        "kubectl set env deployment {DEPLOYMENT} -n {DEPLOYMENT_NAMESPACE} {} && {scale}",
                        vars.join(" ")
                    )
                }
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
                format!(
                    "kubectl set env deployment {DEPLOYMENT} -n {DEPLOYMENT_NAMESPACE} {} && {}",
                    unset.join(" "),
                    self.start(&[])
                )
            }
        }
    }
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

/// dedup's five changes as one shell loop. A unit test checks that it sends
/// exactly `experiments::dedup_change`.
fn dedup_loop(hand: &Hand) -> String {
    const MARK: u32 = 999_999;
    let patch = experiments::dedup_change(&hand.desired, MARK)
        .to_string()
        // Leave the single quotes for `$i`: the shell fills it in.
        .replace(&MARK.to_string(), "'$i'");
    format!(
        "for i in 1 2 3 4 5; do kubectl patch configmap {} -n {} --type merge -p '{patch}'; done",
        hand.name, hand.namespace
    )
}

/// The narration before the experiment runs.
fn before(exp: Exp, hand: &Hand) -> Vec<String> {
    let mut lines = vec![
        format!("== {} ({}): {}", exp.short(), exp.course(), exp.entry().about),
        labelled("about to:", &exp.about_to(hand)),
    ];
    lines.extend(exp.by_hand(hand).iter().map(|step| labelled("by hand:", step)));
    lines.push(labelled(
        "running:",
        &format!(
            "e2e::experiments::{}, the same function `cargo xtask e2e --exp {}` runs …",
            exp.test_name(),
            exp.short()
        ),
    ));
    lines
}

/// The narration once the experiment is over: the controller's log, then
/// what was measured and what to notice, or the error.
fn after(exp: Exp, result: &Result<Measured>, log: Option<&str>) -> Vec<String> {
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
            let reaction = match (exp.reaction(), measured.latency) {
                (Reaction::Timed(span), Some(latency)) => {
                    format!("{:.1} ms ({span})", latency.as_secs_f64() * 1000.0)
                }
                (Reaction::NotTimed(why), _) => format!("not timed: {why}"),
                (Reaction::Timed(span), None) => format!("not reported ({span})"),
            };
            lines.push(labelled("reaction time:", &reaction));
            lines.push(labelled("measured:", &measured.detail));
            lines.extend(measured.warnings.iter().map(|w| labelled("warning:", w)));
            lines.extend(exp.notice().iter().map(|n| labelled("notice:", n)));
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

    #[test]
    fn every_narrated_experiment_is_a_suite_experiment() {
        assert_eq!(Exp::ALL.map(Exp::short), NAMES);
        for exp in Exp::ALL {
            let entry = experiments::find(exp.test_name())
                .unwrap_or_else(|| panic!("{} is not in the suite", exp.test_name()));
            assert_eq!(entry.name, exp.test_name());
            assert!(
                entry.aliases.contains(&exp.short()),
                "{} must be an alias of {}, so `cargo xtask e2e --exp` takes it too",
                exp.short(),
                entry.name
            );
        }
    }

    #[test]
    fn names_and_aliases_resolve() {
        for (word, exp) in [
            ("create", Exp::Create),
            ("create_on_start", Exp::Create),
            ("heal", Exp::Heal),
            ("self-heal", Exp::Heal),
            ("self_heal_on_delete", Exp::Heal),
            ("correct", Exp::Correct),
            ("rerun", Exp::Rerun),
            ("idempotent_rerun", Exp::Rerun),
            ("dedup", Exp::Dedup),
        ] {
            assert_eq!(Exp::resolve(word).unwrap(), exp, "{word}");
        }
    }

    #[test]
    fn a_suite_experiment_without_narration_points_to_e2e() {
        let error = Exp::resolve("version").unwrap_err().to_string();
        assert!(error.contains("cargo xtask e2e --exp version"), "{error}");
    }

    #[test]
    fn an_unknown_name_lists_the_narrated_ones() {
        let error = Exp::resolve("explode").unwrap_err().to_string();
        assert!(error.contains("create, heal, correct, rerun, dedup"), "{error}");
    }

    #[test]
    fn the_listing_has_one_line_per_experiment_with_the_suites_words() {
        let text = listing();
        for exp in Exp::ALL {
            let lines: Vec<_> = text
                .lines()
                .filter(|l| l.trim_start().starts_with(&format!("{} ", exp.short())))
                .collect();
            assert_eq!(lines.len(), 1, "{text}");
            assert!(lines[0].contains(exp.entry().about), "{text}");
        }
    }

    #[test]
    fn every_narration_has_every_key_line() {
        for exp in Exp::ALL {
            let latency =
                matches!(exp.reaction(), Reaction::Timed(_)).then_some(Duration::from_millis(56));
            let mut lines = before(exp, &hand(ProviderKind::Envtest));
            lines.extend(after(
                exp,
                &Ok(measured(latency)),
                Some("2026-01-01T00:00:00Z  INFO controller::reconcile: created\n"),
            ));
            let text = lines.join("\n");
            assert_eq!(missing_key_lines(&text), Vec::<&str>::new(), "{text}");
            assert!(text.contains(&format!("e2e::experiments::{}", exp.test_name())), "{text}");
        }
    }

    #[test]
    fn the_course_sentences_are_there() {
        let notice = |exp: Exp| exp.notice().join(" ");
        assert!(notice(Exp::Heal).contains("the controller did not poll: the watch told it"));
        assert!(notice(Exp::Rerun).contains(
            "resourceVersion unchanged: level-triggered and idempotent, no write when already right"
        ));
        assert!(
            notice(Exp::Dedup)
                .contains("five changes, fewer reconciles: the queue holds each key once")
        );
        assert!(notice(Exp::Create).contains("startup kick"));
        assert!(notice(Exp::Correct).contains("DeepCopy"));
    }

    #[test]
    fn by_hand_gives_the_course_commands() {
        let h = hand(ProviderKind::Envtest);
        let all = |exp: Exp| exp.by_hand(&h).join("\n");
        assert!(all(Exp::Heal).contains("kubectl delete configmap my-config -n default"));
        assert!(all(Exp::Heal).contains("kubectl get configmap my-config -n default -o yaml"));
        assert!(all(Exp::Correct).contains(
            r#"kubectl patch configmap my-config -n default --type merge -p '{"data":{"app.conf":"env=dev","e2e-extra":"added by hand"},"metadata":{"labels":{"e2e.lab/added-by":"someone"}}}'"#
        ));
        for exp in Exp::ALL {
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
        let line = dedup_loop(&hand(ProviderKind::Envtest));
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
        let lines = after(Exp::Heal, &Err(anyhow::anyhow!("boom")), Some(""));
        assert!(lines.iter().any(|l| l == &labelled("result:", "FAIL")));
        assert!(lines.iter().any(|l| l.starts_with("error:") && l.ends_with("boom")));
        assert!(!lines.iter().any(|l| l.starts_with("notice:")));
    }

    #[test]
    fn a_long_log_is_cut_to_its_end() {
        let log: String = (1..=40).map(|i| format!("line {i}\n")).collect();
        let lines = after(Exp::Heal, &Ok(measured(None)), Some(&log));
        let shown: Vec<_> = lines.iter().filter(|l| l.starts_with("  | ")).collect();
        assert_eq!(shown.len(), MAX_LOG_LINES);
        assert_eq!(shown.last().unwrap().as_str(), "  | line 40");
    }
}
