//! A learner alone at a lab (envtest, or kind: its commands differ): a new
//! terminal set up with `cargo xtask lab env` reaches it, and every command
//! `cargo xtask exp` prints to repeat an experiment by hand (`--by-hand`) runs
//! there and prints what its comment says. The commands run in `sh`, as
//! pasted. On envtest a controller started by hand runs in a process group of
//! its own, as in a terminal of its own, and is stopped with SIGINT, as Ctrl-C
//! there; on kind the lines scale the Deployment and set its environment.

mod common;

use std::{path::PathBuf, process::Child, time::Duration};

use common::{lab, run, xtask};
use controller::metrics::{IN_FLIGHT, QUEUE_DEPTH, RECONCILES, WRITES};
use grader::experiments::DRIFT_LABEL;
use kube::api::ListParams;
use labkit::lab::Lab;
use labkit::{
    command::Cmd,
    eventually::{Check, eventually},
};
use serial_test::serial;

/// Long enough for a controller to start and a watch event to arrive on a
/// loaded machine; a person would wait as long.
const WITHIN: Duration = Duration::from_secs(60);

#[tokio::test]
#[serial]
async fn a_new_terminal_reaches_the_lab_after_lab_env() {
    let lab = lab().await;
    let name = lab.file().name.clone();
    let printed = run(&xtask(&["lab", "env", "--name", &name]));
    assert!(printed.ok, "cargo xtask lab env failed: {}", printed.stderr);
    // A terminal elsewhere with no KUBECONFIG of its own, as page 00's terminal 2.
    let desired = lab.desired();
    let script = format!(
        "eval \"$1\"; kubectl get configmap {} -n {} -o name && test -d \"$KIT/workqueue\" && echo \"$KIT\"",
        desired.name(),
        desired.namespace()
    );
    let terminal = Cmd::argv(["sh", "-c", script.as_str(), "sh", printed.stdout.as_str()])
        .env_remove("KUBECONFIG")
        .env_remove("KIT")
        .dir(std::env::temp_dir());
    let ran = run(&terminal);
    assert!(ran.ok, "{}\n{}\nlab env printed:\n{}", ran.stdout, ran.stderr, printed.stdout);
    let kit = labkit::project::root().display().to_string();
    assert_eq!(ran.stdout, format!("configmap/{}\n{kit}\n", desired.name()), "{}", printed.stdout);
    // No such lab: one line, and nothing for `eval` to run.
    let none = run(&xtask(&["lab", "env", "--name", "no-such-lab"]));
    assert!(!none.ok && none.stdout.is_empty(), "{}", none.stdout);
    assert!(none.stderr.lines().any(|l| l.starts_with("error: no lab named no-such-lab")));
}

#[tokio::test]
#[serial]
async fn every_by_hand_command_prints_what_its_comment_says() {
    let name = lab().await.file().name.clone();
    for exp in ["create", "heal", "correct", "rerun", "dedup"] {
        let printed = run(&xtask(&["exp", exp, "--by-hand", "--name", &name, "--lang", "en"]));
        assert!(printed.ok, "exp {exp} --by-hand: {}", printed.stderr);
        let mut by_hand = ByHand::new(exp, &printed.stdout).await;
        by_hand.run_all().await;
        // As the narration says: Ctrl-C in its terminal, then the lab's own
        // again (docs/zh-CN/10-troubleshooting.md).
        by_hand.ctrl_c().await;
        common::succeeds(&xtask(&["lab", "controller", "start", "--name", &name]));
        eprintln!("exp {exp}: every by-hand command printed what it says");
    }
}

/// One experiment's by-hand commands and what the test saw of them.
struct ByHand {
    exp: &'static str,
    lab: Lab,
    /// `export KUBECONFIG=…`, the first line, before every command.
    export: String,
    lines: Vec<String>,
    /// The controller started by hand (its own process group), if running.
    controller: Option<Child>,
    /// `kubectl get --watch`, running meanwhile, and its output file.
    watch: Option<(Child, PathBuf)>,
    /// What one command left for a later one to compare with.
    noted: Option<String>,
    dir: PathBuf,
}

impl ByHand {
    async fn new(exp: &'static str, printed: &str) -> ByHand {
        let lab = lab().await;
        let mut lines = printed.lines().map(str::to_string);
        let export = lines.next().unwrap_or_default();
        assert!(export.starts_with("export KUBECONFIG="), "{printed}");
        let dir = labkit::project::target_dir().join("by-hand-tests").join(exp);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let lines = lines.collect();
        ByHand { exp, lab, export, lines, controller: None, watch: None, noted: None, dir }
    }

    async fn run_all(&mut self) {
        for (i, line) in self.lines.clone().iter().enumerate() {
            eprintln!("{} by hand, step {i}: {line}", self.exp);
            if line.starts_with("# Ctrl-C") {
                self.ctrl_c().await;
            } else if self.binary().is_some_and(|b| line.starts_with(&b)) {
                self.start(line).await;
            } else if scales_up(line) {
                self.start_deployment(line).await;
            } else if line.contains(" --watch") {
                let out = self.dir.join("watch.log");
                let child = self.shell(line).spawn_to_log(&out).unwrap();
                self.watch = Some((child, out));
                // The watch's first line: the object as it is now.
                self.until(
                    line,
                    "the watch's first row",
                    |t| rows(t) >= 1,
                    Some(&self.dir.join("watch.log")),
                )
                .await;
            } else {
                self.expect(i, line).await;
            }
        }
        if let Some((child, out)) = self.watch.take() {
            let seen = "the watch to show it go and come back";
            let watched = self.until("", seen, |text| rows(text) >= 2, Some(&out));
            watched.await;
            end_group(child);
        }
    }

    /// `sh -c 'export KUBECONFIG=…; LINE'`, in the by-hand folder.
    fn shell(&self, line: &str) -> Cmd {
        let script = format!("{}\n{line}", self.export);
        Cmd::argv(["sh", "-c", script.as_str()]).env_remove("KUBECONFIG").dir(&self.dir)
    }

    /// The lab's controller binary, which a by-hand start runs (envtest; on
    /// kind the controller is a Deployment).
    fn binary(&self) -> Option<String> {
        let process = self.lab.file().processes.iter().find(|p| p.role == "controller");
        process.map(|p| p.binary.display().to_string())
    }

    /// Step `i` (`line`), checked against its comment: what each experiment's
    /// commands print, in order.
    async fn expect(&mut self, i: usize, line: &str) {
        // The desired data's first line (`env=prod`), as `-o yaml` shows it.
        let value = self.desired_line();
        match (self.exp, i) {
            // `kill $(cat …/controller.pid)`: the lab's own stops.
            (_, _) if line.starts_with("kill ") => {
                self.once(line, "");
                self.until_stopped().await;
            }
            // kind: `kubectl scale deployment … --replicas=0`.
            (_, _) if line.starts_with("kubectl scale deployment ") => {
                self.once(line, "scaled");
                self.until_stopped().await;
            }
            ("create", 1) | ("heal", 1) => {
                self.noted = Some(self.uid());
                self.once(line, "deleted");
            }
            ("create", 2) => {
                let got = run(&self.shell(line));
                assert!(!got.ok && got.stderr.contains("NotFound"), "{line}: {}", got.stderr);
            }
            ("create", 4) => {
                self.until(line, "the desired data", |t| t.contains(&value), None).await
            }
            ("create", 5) => {
                let created = |t: &str| events(t).contains("Created");
                self.until(line, "Events: Created", created, None).await;
            }
            ("heal", 2) => {
                let old = self.noted.clone().unwrap_or_default();
                assert!(!old.is_empty(), "no uid before the delete");
                let new = |t: &str| t.contains(&value) && t.contains("uid: ") && !t.contains(&old);
                self.until(line, "a new uid", new, None).await;
            }
            ("correct", 0) => {
                self.once(line, "patched");
            }
            ("correct", 1) => {
                let label = format!("{DRIFT_LABEL}: someone");
                let back =
                    |t: &str| t.contains(&value) && !t.contains("e2e-extra") && t.contains(&label);
                self.until(line, "key back, e2e-extra gone, the label kept", back, None).await;
            }
            ("correct", 2) => {
                self.once(line, "unlabeled");
                let text = run(&self.shell(&format!("{} -o yaml", self.kubectl_get()))).stdout;
                assert!(!text.contains(DRIFT_LABEL), "the label is still there:\n{text}");
            }
            ("rerun", 0) => {
                let version = self.once(line, "");
                assert!(version.trim().parse::<u64>().is_ok(), "{line}: {version:?}");
                self.noted = Some(version);
            }
            ("rerun", 3) => {
                let version = self.once(line, "");
                assert_eq!(Some(&version), self.noted.as_ref(), "{line}: not the same number");
            }
            ("rerun", 4) => {
                let text = self.once(line, WRITES);
                assert!(counters_only(&text), "{line}:\n{text}");
                assert_eq!(sum(&text, WRITES), 0.0, "{line}: a write\n{text}");
            }
            ("dedup", 2) => {
                let text = self.once(line, RECONCILES);
                assert!(counters_only(&text), "{line}:\n{text}");
                self.noted = Some(sum(&text, RECONCILES).to_string());
            }
            ("dedup", 3) => {
                let text = self.once(line, "patched");
                assert_eq!(text.matches("patched").count(), 5, "{line}:\n{text}");
            }
            ("dedup", 4) => self.fewer_reconciles_than_changes(line, &value).await,
            _ => panic!("{} by hand, step {i}: no check for `{line}`: add one", self.exp),
        }
    }

    /// The first line of the desired data's first value.
    fn desired_line(&self) -> String {
        let desired = self.lab.desired();
        let value = desired.data().get(&labkit::suite::first_key(desired)).cloned().unwrap();
        value.lines().next().unwrap_or_default().to_string()
    }

    /// The object's uid now (before a delete: the one that must not come back).
    fn uid(&self) -> String {
        let line = format!("{} -o jsonpath={{.metadata.uid}}", self.kubectl_get());
        run(&self.shell(&line)).stdout.trim().to_string()
    }

    /// Runs `line` once: it succeeds and its output contains `says`.
    fn once(&self, line: &str, says: &str) -> String {
        let got = run(&self.shell(line));
        assert!(got.ok, "{line}: {}{}", got.stdout, got.stderr);
        assert!(got.stdout.contains(says), "{line}: printed {:?}, not {says:?}", got.stdout);
        got.stdout
    }

    /// Runs `line` (or reads `file`) until `holds` its output, as a person
    /// looks again a moment later.
    async fn until(
        &self,
        line: &str,
        said: &str,
        holds: impl Fn(&str) -> bool,
        file: Option<&PathBuf>,
    ) {
        let what = format!("`{line}` to show {said}");
        eventually(&what, WITHIN, || {
            let text = match file {
                Some(file) => std::fs::read_to_string(file).unwrap_or_default(),
                None => run(&self.shell(line)).stdout,
            };
            let done = holds(&text);
            async move { Ok(if done { Check::Done(()) } else { Check::NotYet(text) }) }
        })
        .await
        .unwrap_or_else(|e| panic!("{}: {e:#}", self.exp));
    }

    /// `kubectl get configmap NAME -n NAMESPACE`, as the narration spells it.
    fn kubectl_get(&self) -> String {
        let d = self.lab.desired();
        format!("kubectl get configmap {} -n {}", d.name(), d.namespace())
    }

    /// A start by hand: its own process group, as its own terminal; ready,
    /// and its startup reconcile done, before the next command.
    async fn start(&mut self, line: &str) {
        assert!(self.controller.is_none(), "{line}: one started by hand runs already");
        assert!(line.contains("terminal of its own"), "{line}: where it runs is not said");
        let log = self.dir.join("controller.log");
        // `exec`: the shell becomes the controller, so SIGINT reaches it alone.
        let child = self.shell(&format!("exec {line}")).spawn_to_log(&log).unwrap();
        self.controller = Some(child);
        let lab = &self.lab;
        eventually("the controller started by hand to reconcile", WITHIN, || async move {
            let scrape = match lab.metrics().await {
                Ok(scrape) => scrape,
                Err(e) => return Ok(Check::NotYet(format!("{e:#}"))),
            };
            let reconciled = scrape.sum(RECONCILES) >= 1.0 && scrape.sum(IN_FLIGHT) == 0.0;
            Ok(if reconciled { Check::Done(()) } else { Check::NotYet("no reconcile yet".into()) })
        })
        .await
        .unwrap_or_else(|e| panic!("{line}: {e:#}\n{}", labkit::files::tail(&log, 20)));
    }

    /// kind: the Deployment scaled up (its environment set first, when the
    /// line says so); one pod left, ready, its startup reconcile done, before
    /// the next command — as a person waits for `kubectl get pods`.
    async fn start_deployment(&mut self, line: &str) {
        self.once(line, "scaled");
        let lab = &self.lab;
        let pods = lab.deployment().expect("a kind lab's controller is a Deployment").pods();
        let selector = ListParams::default().labels(labkit::deployment::SELECTOR);
        eventually("the Deployment's one new pod to reconcile", WITHIN, || {
            let (pods, selector) = (pods.clone(), selector.clone());
            async move {
                let listed = pods.list(&selector).await?.items;
                let names: Vec<String> =
                    listed.iter().filter_map(|p| p.metadata.name.clone()).collect();
                if listed.len() != 1 || !lab.controller_running().await? {
                    return Ok(Check::NotYet(format!("pods {names:?}")));
                }
                let scrape = match lab.metrics().await {
                    Ok(scrape) => scrape,
                    Err(e) => return Ok(Check::NotYet(format!("{names:?}: {e:#}"))),
                };
                let reconciled = scrape.sum(RECONCILES) >= 1.0 && scrape.sum(IN_FLIGHT) == 0.0;
                Ok(match reconciled {
                    true => Check::Done(()),
                    false => Check::NotYet(format!("{names:?}: no reconcile yet")),
                })
            }
        })
        .await
        .unwrap_or_else(|e| panic!("{line}: {e:#}"));
    }

    /// Ctrl-C where the controller started by hand runs: it exits 0.
    async fn ctrl_c(&mut self) {
        let Some(mut child) = self.controller.take() else { return };
        let log = self.dir.join("controller.log");
        let group = -(child.id() as libc::pid_t);
        let (status, printed) = common::interrupt(&mut child, group, &log).await;
        assert!(status.success(), "Ctrl-C: {status}\n{printed}");
    }

    /// After a `kill` of the lab's controller (or its Deployment scaled to
    /// 0): gone before the next command.
    async fn until_stopped(&self) {
        let lab = &self.lab;
        eventually("the lab's controller to stop", WITHIN, || async move {
            let running = lab.controller_running().await?;
            Ok(if running { Check::NotYet("running".into()) } else { Check::Done(()) })
        })
        .await
        .unwrap();
    }

    /// dedup's second metrics line: once the changes are reconciled (the data
    /// desired, nothing queued or running), a few more reconciles than at the
    /// first, not five.
    async fn fewer_reconciles_than_changes(&self, line: &str, value: &str) {
        let before: f64 = self.noted.as_deref().unwrap_or("0").parse().unwrap();
        let yaml = format!("{} -o yaml", self.kubectl_get());
        let lab = &self.lab;
        eventually("the five changes to be reconciled", WITHIN, || {
            let text = run(&self.shell(&yaml)).stdout;
            async move {
                let scrape = lab.metrics().await?;
                let idle = scrape.sum(IN_FLIGHT) == 0.0 && scrape.sum(QUEUE_DEPTH) == 0.0;
                Ok(match text.contains(value) && idle {
                    true => Check::Done(()),
                    false => Check::NotYet(text),
                })
            }
        })
        .await
        .unwrap();
        let text = run(&self.shell(line)).stdout;
        let more = sum(&text, RECONCILES) - before;
        assert!((1.0..5.0).contains(&more), "{line}: {more} more reconciles for 5 changes\n{text}");
    }
}

/// What a failed step leaves running is stopped: the watch, a controller
/// started by hand (it holds the lab controller's port).
impl Drop for ByHand {
    fn drop(&mut self) {
        for child in self.controller.take().into_iter().chain(self.watch.take().map(|w| w.0)) {
            end_group(child);
        }
    }
}

/// SIGKILL to `child`'s process group (`sh` and what it started), then reaped.
fn end_group(mut child: Child) {
    // SAFETY: kill with the group of a child this test started.
    unsafe { libc::kill(-(child.id() as libc::pid_t), libc::SIGKILL) };
    let _ = child.wait();
}

/// kind: a line that scales the controller's Deployment up (after setting
/// or unsetting its environment).
fn scales_up(line: &str) -> bool {
    line.contains("kubectl scale deployment ") && line.contains("--replicas=1")
}

/// The Events section of `kubectl describe`.
fn events(describe: &str) -> &str {
    describe.split("Events:").nth(1).unwrap_or_default()
}

/// The data rows of `kubectl get --watch` (the header aside).
fn rows(text: &str) -> usize {
    text.lines().filter(|l| !l.starts_with("NAME") && !l.trim().is_empty()).count()
}

/// Every line is a counter series of the controller's.
fn counters_only(text: &str) -> bool {
    !text.trim().is_empty()
        && text.lines().all(|l| l.starts_with(RECONCILES) || l.starts_with(WRITES))
}

/// The sum of `name`'s series in a `/metrics` excerpt.
fn sum(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(name))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum()
}
