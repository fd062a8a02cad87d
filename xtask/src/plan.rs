//! A lab's command plan: the steps `lab up` / `lab down` take, as a person
//! would type them. `--dry-run` prints the plan; the kind plan has a snapshot
//! test, so any change to it shows in review.

use std::fmt;

use e2e::process::shell_quote;

/// One step of a plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// An external command.
    Run {
        env: Vec<(String, String)>,
        argv: Vec<String>,
        when: Option<String>,
    },
    /// Done through the Kubernetes API with kube-rs; `kubectl` is what a person would type.
    Api {
        kubectl: String,
        when: Option<String>,
    },
    /// Something xtask does itself (writing a file, waiting).
    Note(String),
}

impl Step {
    pub fn run<I, S>(argv: I) -> Step
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        Step::Run {
            env: Vec::new(),
            argv: argv.into_iter().map(|s| s.as_ref().to_string()).collect(),
            when: None,
        }
    }

    pub fn api(kubectl: impl Into<String>) -> Step {
        Step::Api {
            kubectl: kubectl.into(),
            when: None,
        }
    }

    pub fn note(text: impl Into<String>) -> Step {
        Step::Note(text.into())
    }

    /// Adds an environment variable to a `Run` step.
    pub fn env(mut self, key: &str, value: &str) -> Step {
        if let Step::Run { env, .. } = &mut self {
            env.push((key.into(), value.into()));
        }
        self
    }

    /// Marks a step as conditional (shown in the plan).
    pub fn when(mut self, condition: &str) -> Step {
        if let Step::Run { when, .. } | Step::Api { when, .. } = &mut self {
            *when = Some(condition.into());
        }
        self
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Step::Run { env, argv, when } => {
                write!(f, "$ ")?;
                for (k, v) in env {
                    write!(f, "{k}={} ", shell_quote(v))?;
                }
                let words: Vec<String> = argv.iter().map(|a| shell_quote(a)).collect();
                write!(f, "{}", words.join(" "))?;
                if let Some(when) = when {
                    write!(f, "    # only {when}")?;
                }
                Ok(())
            }
            Step::Api { kubectl, when } => {
                write!(f, "$ {kubectl}    # done with kube-rs")?;
                if let Some(when) = when {
                    write!(f, ", only {when}")?;
                }
                Ok(())
            }
            Step::Note(text) => write!(f, "# {text}"),
        }
    }
}

/// The plan as the lines `--dry-run` prints.
pub fn render(steps: &[Step]) -> String {
    steps.iter().map(|s| format!("{s}\n")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_print_as_shell_lines() {
        let step = Step::run(["docker", "build", "-t", "a b"])
            .env("X", "-C y")
            .when("if changed");
        assert_eq!(
            step.to_string(),
            "$ X='-C y' docker build -t 'a b'    # only if changed"
        );
        assert_eq!(
            Step::api("kubectl get cm").to_string(),
            "$ kubectl get cm    # done with kube-rs"
        );
        assert_eq!(Step::note("wait").to_string(), "# wait");
    }
}
