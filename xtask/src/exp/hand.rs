//! What a person needs to repeat an experiment by hand on this lab: the
//! kubectl commands for envtest or kind, as the narration prints them.

use super::*;
use labkit::command::shell_quote;

/// What a person needs to repeat an experiment by hand on this lab.
pub(super) struct Hand {
    /// Its admin kubeconfig, its controller's URL, and where that controller runs
    /// ([`LabFile::controller_runs`]).
    lab: LabFile,
    pub(super) desired: Desired,
    /// The data key the experiments change.
    pub(super) key: String,
    /// Its texts: "the lab's admin"; said of a controller started by hand as a process, which
    /// holds its terminal (`foreground`) and is stopped with Ctrl-C (`ctrl_c`: its pid is in
    /// no pid file); `{why} ({note})` and `{first}; {why}` with the language's punctuation.
    words: &'static Narrations,
}

impl Hand {
    pub(super) fn new(file: &LabFile, desired: &Desired, words: &'static Narrations) -> Hand {
        Hand { lab: file.clone(), desired: desired.clone(), key: first_key(desired), words }
    }

    /// A template of [`narrated`](super::narrated) with this lab's words.
    pub(super) fn fill(&self, template: &str) -> String {
        template
            .replace("{cm}", &self.desired.to_string())
            .replace("{key}", &self.key)
            .replace("{label}", DRIFT_LABEL)
            .replace("{flags}", &DEDUP_FLAGS.join(" "))
    }

    /// `export KUBECONFIG=…`, then `steps` as a person types them. A
    /// controller process started by hand runs in the foreground of a
    /// terminal of its own; it is stopped there with Ctrl-C, not through the
    /// lab's pid file (which names the lab's own, stopped before).
    pub(super) fn commands(&self, steps: &[HandStep]) -> Vec<String> {
        let t = |key: &str| self.words.texts[key].as_str();
        let admin = t("admin");
        let kubeconfig = self.lab.admin_kubeconfig.display().to_string();
        let mut lines = vec![format!("export KUBECONFIG={}   # {admin}", shell_quote(&kubeconfig))];
        let process = matches!(self.lab.controller_runs(), ControllerRuns::Process(_));
        let mut started_by_hand = false;
        for step in steps {
            let mut why = self.fill(&step.why);
            let command = match step.action {
                Do::Stop if process && started_by_hand => {
                    started_by_hand = false;
                    let stop = match why.is_empty() {
                        true => t("ctrl_c").to_string(),
                        false => fill(t("then"), &[("first", t("ctrl_c")), ("why", &why)]),
                    };
                    lines.push(format!("# {stop}"));
                    continue;
                }
                Do::Start | Do::StartSlow | Do::StartOwn if process => {
                    started_by_hand = true;
                    why = match why.is_empty() {
                        true => t("foreground").to_string(),
                        false => fill(t("with_note"), &[("why", &why), ("note", t("foreground"))]),
                    };
                    self.command(step)
                }
                _ => self.command(step),
            };
            lines.push(if why.is_empty() { command } else { format!("{command}   # {why}") });
        }
        lines
    }

    pub(super) fn command(&self, step: &HandStep) -> String {
        match step.action {
            Do::Kubectl => {
                let (verb, rest) =
                    step.args.split_first().map_or(("get", &[][..]), |(v, r)| (v, r));
                self.kubectl(verb, &rest.iter().map(String::as_str).collect::<Vec<_>>())
            }
            Do::Stop => self.stop(),
            Do::Start => self.start(&[]),
            Do::StartSlow => self.start(DEDUP_FLAGS),
            Do::StartOwn => self.start_without(DEDUP_FLAGS),
            Do::Metrics => format!("{} | {}", self.metrics(), metrics_grep()),
            Do::DriftPatch => {
                let patch = experiments::drift_patch(&self.desired).to_string();
                self.kubectl("patch", &["--type", "merge", "-p", &patch])
            }
            Do::DriftUnlabel => self.kubectl("label", &[&format!("{DRIFT_LABEL}-")]),
            Do::DedupLoop => self.dedup_loop(),
        }
    }

    /// What prints the controller's `/metrics`: curl on its port (a process),
    /// or the API server's pod proxy (a Deployment: its port is the pod's).
    fn metrics(&self) -> String {
        match self.lab.controller_runs() {
            ControllerRuns::Process(_) => format!("curl -s {}/metrics", self.lab.controller.url),
            ControllerRuns::Deployment(namespace) => format!(
                "kubectl get --raw \"/api/v1/namespaces/{namespace}/pods/$(kubectl get pods -n {namespace} \
                 -l {SELECTOR} -o jsonpath='{{.items[0].metadata.name}}'):{PORT}/proxy/metrics\""
            ),
        }
    }

    /// `kubectl VERB configmap NAME -n NAMESPACE REST…`, quoted for a shell.
    pub(super) fn kubectl(&self, verb: &str, rest: &[&str]) -> String {
        let (name, namespace) = (self.desired.name(), self.desired.namespace());
        Cmd::new("kubectl").args([verb, "configmap", name, "-n", namespace]).args(rest).to_string()
    }

    /// dedup's five changes as one shell loop. A unit test checks that it
    /// sends exactly `experiments::dedup_change`.
    pub(super) fn dedup_loop(&self) -> String {
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

    pub(super) fn stop(&self) -> String {
        match self.lab.controller_runs() {
            // SIGTERM: it finishes a running reconcile and exits.
            ControllerRuns::Process(p) => {
                format!("kill $(cat {})", shell_quote(&p.pid_file.display().to_string()))
            }
            ControllerRuns::Deployment(namespace) => scale(namespace, 0),
        }
    }

    /// Starts it again with `extra` flags. A process runs in the foreground,
    /// its log right there; Ctrl-C stops it, and the next `cargo xtask exp`
    /// or `cargo xtask e2e` starts the lab's own again. A Deployment gets the
    /// flags as the environment variables they have (controller/src/cli.rs).
    pub(super) fn start(&self, extra: &[&str]) -> String {
        match self.lab.controller_runs() {
            ControllerRuns::Process(p) => {
                Cmd::new(p.binary.display().to_string()).args(&p.args).args(extra).to_string()
            }
            ControllerRuns::Deployment(namespace) => {
                let vars: Vec<String> = flag_variables(extra)
                    .into_iter()
                    .map(|(name, value)| format!("{name}={value}"))
                    .collect();
                set_env_then_scale_up(namespace, &vars)
            }
        }
    }

    /// Starts it again on the lab's own flags after a start with `extra`.
    pub(super) fn start_without(&self, extra: &[&str]) -> String {
        match self.lab.controller_runs() {
            ControllerRuns::Process(_) => self.start(&[]),
            ControllerRuns::Deployment(namespace) => {
                let unset: Vec<String> =
                    flag_variables(extra).into_iter().map(|(name, _)| format!("{name}-")).collect();
                set_env_then_scale_up(namespace, &unset)
            }
        }
    }
}

/// The two counters the narration reads, by the names the controller's
/// registry serves (controller/src/metrics.rs).
fn metrics_grep() -> String {
    format!("grep -E '^({}|{})'", controller::metrics::RECONCILES, controller::metrics::WRITES)
}

fn scale(namespace: &str, replicas: u8) -> String {
    format!("kubectl scale deployment {DEPLOYMENT} -n {namespace} --replicas={replicas}")
}

fn set_env_then_scale_up(namespace: &str, vars: &[String]) -> String {
    if vars.is_empty() {
        return scale(namespace, 1);
    }
    format!(
        "kubectl set env deployment {DEPLOYMENT} -n {namespace} {} && {}",
        vars.join(" "),
        scale(namespace, 1)
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
