//! A lab's steps as one list, built once and then either printed
//! (`--dry-run`, and the snapshot test) or carried out: what is printed is
//! what runs. A step is an external command (run, or read into the context),
//! a call through the Kubernetes API (shown as the `kubectl` a person would
//! type), or xtask's own work (shown in words); a condition, checked on the
//! context when the step's turn comes, may skip it.

use std::fmt;

use futures::future::BoxFuture;

use labkit::command::Cmd;
use labkit::tr;

/// Work done with the context: kube-rs calls, files, waits.
pub type Task<C> = Box<dyn for<'a> FnOnce(&'a mut C) -> BoxFuture<'a, anyhow::Result<()>> + Send>;
/// What a probe's output (or its failure) tells the context.
pub type Record<C> = Box<dyn FnOnce(&mut C, anyhow::Result<String>) -> anyhow::Result<()> + Send>;

pub enum Action<C> {
    /// An external command; its failure fails the plan.
    Run(Cmd),
    /// An external command as the plan shows it, adjusted to what the
    /// context learned by the time it runs (a flag an older tool lacks).
    Adjusted(Cmd, fn(&C, &Cmd) -> Cmd),
    /// A long external command (a build): progress every 30 s, saying what it is doing.
    Long(Cmd, String),
    /// An external command whose output (or failure) the context records.
    Probe(Cmd, Record<C>),
    /// Done with kube-rs; the text is the `kubectl` a person would type.
    Api(String, Task<C>),
    /// xtask's own work, in words.
    Own(String, Task<C>),
}

/// Whether a step's turn has come: checked on the context when it has.
pub type Holds<C> = Box<dyn Fn(&C) -> bool + Send>;

pub struct Step<C> {
    pub action: Action<C>,
    /// Shown as `# only …`; the step is skipped unless it holds.
    pub when: Option<(String, Holds<C>)>,
    /// Said when the step fails: what it means and what to do.
    pub hint: Option<String>,
}

impl<C> Step<C> {
    pub fn run(cmd: Cmd) -> Step<C> {
        Step::of(Action::Run(cmd))
    }

    pub fn adjusted(cmd: Cmd, adjust: fn(&C, &Cmd) -> Cmd) -> Step<C> {
        Step::of(Action::Adjusted(cmd, adjust))
    }

    pub fn long(cmd: Cmd, doing: impl Into<String>) -> Step<C> {
        Step::of(Action::Long(cmd, doing.into()))
    }

    pub fn probe(
        cmd: Cmd,
        record: impl FnOnce(&mut C, anyhow::Result<String>) -> anyhow::Result<()> + Send + 'static,
    ) -> Step<C> {
        Step::of(Action::Probe(cmd, Box::new(record)))
    }

    pub fn api<F>(kubectl: impl Into<String>, task: F) -> Step<C>
    where
        F: for<'a> FnOnce(&'a mut C) -> BoxFuture<'a, anyhow::Result<()>> + Send + 'static,
    {
        Step::of(Action::Api(kubectl.into(), Box::new(task)))
    }

    pub fn own<F>(note: impl Into<String>, task: F) -> Step<C>
    where
        F: for<'a> FnOnce(&'a mut C) -> BoxFuture<'a, anyhow::Result<()>> + Send + 'static,
    {
        Step::of(Action::Own(note.into(), Box::new(task)))
    }

    fn of(action: Action<C>) -> Step<C> {
        Step { action, when: None, hint: None }
    }

    /// What a failure of this step means, put before the command's own error.
    pub fn or(mut self, hint: impl Into<String>) -> Step<C> {
        self.hint = Some(hint.into());
        self
    }

    /// Runs only when `holds` says so at its turn; `text` is how the plan says it.
    pub fn when(
        mut self,
        text: impl Into<String>,
        holds: impl Fn(&C) -> bool + Send + 'static,
    ) -> Step<C> {
        self.when = Some((text.into(), Box::new(holds)));
        self
    }
}

impl<C> fmt::Display for Step<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let when = self.when.as_ref().map(|(text, _)| text);
        match &self.action {
            Action::Run(cmd)
            | Action::Adjusted(cmd, _)
            | Action::Long(cmd, _)
            | Action::Probe(cmd, _) => {
                write!(f, "$ {cmd}")?;
                if let Some(when) = when {
                    write!(f, "    # {}", tr!("only {when}", when))?;
                }
            }
            Action::Api(kubectl, _) => match when {
                None => write!(f, "$ {kubectl}    # {}", tr!("done with kube-rs"))?,
                Some(when) => {
                    write!(f, "$ {kubectl}    # {}", tr!("done with kube-rs, only {when}", when))?
                }
            },
            Action::Own(note, _) => match when {
                None => write!(f, "# {note}")?,
                Some(when) => write!(f, "# {}", tr!("{note} (only {when})", note, when))?,
            },
        }
        Ok(())
    }
}

/// The plan as the lines `--dry-run` prints.
pub fn render<C>(steps: &[Step<C>]) -> String {
    steps.iter().map(|s| format!("{s}\n")).collect()
}

/// `--dry-run`: the steps printed; else carried out. One list either way:
/// what is printed is what runs.
pub async fn print_or_execute<C>(
    steps: Vec<Step<C>>,
    context: &mut C,
    dry_run: bool,
) -> anyhow::Result<()> {
    if dry_run {
        print!("{}", render(&steps));
        return Ok(());
    }
    execute(steps, context).await
}

/// Carries the steps out in order. Commands echo themselves; the API calls
/// and xtask's own work are announced by their plan line.
pub async fn execute<C>(steps: Vec<Step<C>>, context: &mut C) -> anyhow::Result<()> {
    for step in steps {
        if let Some((_, holds)) = &step.when
            && !holds(context)
        {
            continue;
        }
        let done = match step.action {
            Action::Run(cmd) => cmd.run(),
            Action::Adjusted(cmd, adjust) => adjust(context, &cmd).run(),
            Action::Long(cmd, doing) => cmd.run_long(&doing),
            Action::Probe(cmd, record) => {
                let output = cmd.read();
                record(context, output)
            }
            Action::Api(kubectl, task) => {
                labkit::progress!("$ {kubectl}    # {}", tr!("done with kube-rs"));
                task(context).await
            }
            Action::Own(note, task) => {
                labkit::progress!("# {note}");
                task(context).await
            }
        };
        match (done, step.hint) {
            (Ok(()), _) => {}
            (Err(error), Some(hint)) => return Err(error.context(hint)),
            (Err(error), None) => return Err(error),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Seen {
        probed: Option<String>,
        ran: Vec<&'static str>,
    }

    #[tokio::test]
    async fn the_printed_plan_is_the_executed_plan() {
        let steps: Vec<Step<Seen>> = vec![
            Step::probe(
                Cmd::argv(["echo", "hi"]),
                |seen: &mut Seen, out: anyhow::Result<String>| {
                    seen.probed = Some(out?);
                    Ok(())
                },
            ),
            Step::own("remember", |seen: &mut Seen| {
                Box::pin(async move {
                    seen.ran.push("own");
                    Ok(())
                })
            }),
            Step::api("kubectl get cm", |seen: &mut Seen| {
                Box::pin(async move {
                    seen.ran.push("api");
                    Ok(())
                })
            })
            .when("if hi was probed", |seen| seen.probed.is_none()),
            Step::run(Cmd::argv(["true"]).env("X", "-C y")),
        ];
        assert_eq!(
            render(&steps),
            "$ echo hi\n# remember\n$ kubectl get cm    # done with kube-rs, only if hi was probed\n$ X='-C y' true\n"
        );
        let mut seen = Seen::default();
        execute(steps, &mut seen).await.unwrap();
        assert_eq!(seen.probed.as_deref(), Some("hi"));
        assert_eq!(seen.ran, vec!["own"], "the API step's condition did not hold");
    }

    #[tokio::test]
    async fn a_failing_command_stops_the_plan() {
        let steps: Vec<Step<Seen>> = vec![
            Step::run(Cmd::argv(["false"])),
            Step::own("never", |seen: &mut Seen| {
                Box::pin(async move {
                    seen.ran.push("never");
                    Ok(())
                })
            }),
        ];
        let mut seen = Seen::default();
        let error = execute(steps, &mut seen).await.unwrap_err();
        assert!(error.to_string().contains("`false` failed"), "{error}");
        assert!(seen.ran.is_empty());
    }

    #[test]
    fn steps_print_as_shell_lines() {
        let run: Step<()> = Step::run(Cmd::argv(["docker", "build", "-t", "a b"]));
        assert_eq!(
            run.when("if changed", |_| true).to_string(),
            "$ docker build -t 'a b'    # only if changed"
        );
        let api: Step<()> = Step::api("kubectl get cm", |_| Box::pin(async { Ok(()) }));
        assert_eq!(api.to_string(), "$ kubectl get cm    # done with kube-rs");
        let own: Step<()> = Step::own("wait", |_| Box::pin(async { Ok(()) }));
        assert_eq!(own.when("on kind", |_| true).to_string(), "# wait (only on kind)");
    }
}
