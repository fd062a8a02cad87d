//! The one way the kit runs an external command: it is echoed first as
//! `$ command`, exactly as a person would type it in a shell (quoted, with its
//! environment and working directory), then run, read or spawned.
//!
//! Hand-written rather than xshell's `cmd!`: xshell's echo is not copy-paste
//! safe (its own docs say so) and shows neither the environment nor the
//! directory, and it cannot spawn.

use std::{
    fmt,
    os::{fd::AsFd, unix::process::CommandExt},
    path::{Path, PathBuf},
    process::{Child, Command, ExitStatus, Output, Stdio},
    time::{Duration, Instant},
};

use anyhow::Context as _;

use crate::{project, tr};

/// A command line: program, arguments, extra environment, working directory.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Cmd {
    program: String,
    args: Vec<String>,
    env: Vec<(String, String)>,
    env_remove: Vec<String>,
    dir: Option<PathBuf>,
    /// SIGINT, SIGTERM and SIGHUP ignored by it ([`Cmd::deaf`]).
    deaf: bool,
}

impl Cmd {
    pub fn new(program: impl Into<String>) -> Cmd {
        Cmd { program: program.into(), ..Cmd::default() }
    }

    /// `Cmd::new(argv[0]).args(argv[1..])`.
    pub fn argv<I, S>(argv: I) -> Cmd
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut words = argv.into_iter();
        let program = words.next().map(|w| w.as_ref().to_string());
        Cmd::new(program.unwrap_or_default()).args(words)
    }

    pub fn arg(mut self, arg: impl AsRef<str>) -> Cmd {
        self.args.push(arg.as_ref().to_string());
        self
    }

    pub fn args<I, S>(mut self, args: I) -> Cmd
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        self.args.extend(args.into_iter().map(|a| a.as_ref().to_string()));
        self
    }

    /// Ignores SIGINT, SIGTERM and SIGHUP, and so do its children unless they
    /// catch them: `cargo test` stays to wait for the e2e suite, which catches
    /// a Ctrl-C itself and puts the lab back before it exits.
    pub fn deaf(mut self) -> Cmd {
        self.deaf = true;
        self
    }

    /// A path argument, as given (relative paths stay relative: they read
    /// better and the command runs from [`Cmd::dir`] or the project root).
    pub fn path(self, path: &Path) -> Cmd {
        self.arg(path.display().to_string())
    }

    pub fn env(mut self, key: &str, value: impl AsRef<str>) -> Cmd {
        self.env.push((key.to_string(), value.as_ref().to_string()));
        self
    }

    /// Not passed on from this process's environment (not shown: a shell
    /// where the person types the command does not have it either).
    pub fn env_remove(mut self, key: &str) -> Cmd {
        self.env_remove.push(key.to_string());
        self
    }

    /// Runs in `dir` (shown as `cd DIR && …`).
    pub fn dir(mut self, dir: impl Into<PathBuf>) -> Cmd {
        self.dir = Some(dir.into());
        self
    }

    pub fn program(&self) -> &str {
        &self.program
    }

    pub fn arguments(&self) -> &[String] {
        &self.args
    }

    /// The std command, configured but not echoed.
    fn to_command(&self) -> Command {
        let mut command = Command::new(&self.program);
        command.args(&self.args);
        for key in self.env_remove.iter().chain(&package_variables()) {
            command.env_remove(key);
        }
        for (key, value) in &self.env {
            command.env(key, value);
        }
        if let Some(dir) = &self.dir {
            command.current_dir(dir);
        }
        command.stdin(Stdio::null());
        // As typed in a terminal: a SIGINT or SIGQUIT that whatever started the kit ignores (a
        // shell's background job does) is not handed on, or a Ctrl-C the grader sends to the
        // program it grades would find it deaf.
        let handling = if self.deaf { libc::SIG_IGN } else { libc::SIG_DFL };
        // SAFETY: signal(2) is async-signal-safe, as a pre_exec hook must be.
        unsafe {
            command.pre_exec(move || {
                libc::signal(libc::SIGINT, handling);
                libc::signal(libc::SIGQUIT, libc::SIG_DFL);
                if handling == libc::SIG_IGN {
                    libc::signal(libc::SIGTERM, handling);
                    libc::signal(libc::SIGHUP, handling);
                }
                Ok(())
            });
        }
        command
    }

    fn echo(&self) {
        crate::progress!("$ {self}");
    }

    fn failed(&self, status: ExitStatus) -> anyhow::Error {
        anyhow::anyhow!(tr!("`{cmd}` failed ({status})", cmd = self, status))
    }

    /// Echo, run with the terminal's stderr (its stdout goes there too); an error unless it exits 0.
    pub fn run(&self) -> anyhow::Result<()> {
        self.echo();
        let (mut child, relay) = self.spawn_inherit()?;
        let status = child.wait()?;
        relay.into_iter().for_each(|r| drop(r.join()));
        if !status.success() {
            return Err(self.failed(status));
        }
        Ok(())
    }

    /// Like [`Cmd::run`] for a long command: a line every 30 s says it is
    /// still `doing` and for how long, so a long build is visibly one.
    pub fn run_long(&self, doing: &str) -> anyhow::Result<()> {
        self.echo();
        let started = Instant::now();
        let (mut child, relay) = self.spawn_inherit()?;
        // The exit comes through a channel, so it is seen the moment it
        // happens; a heartbeat line whenever HEARTBEAT passes without it.
        let (exited, exit) = std::sync::mpsc::channel();
        std::thread::spawn(move || exited.send(child.wait()));
        let mut next = HEARTBEAT;
        let status = loop {
            match exit.recv_timeout(next.saturating_sub(started.elapsed())) {
                Ok(status) => break status?,
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    let secs = started.elapsed().as_secs();
                    crate::progress!("{}", tr!("  still {doing} ({secs} s)", doing, secs));
                    next += HEARTBEAT;
                }
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    anyhow::bail!(tr!("lost `{cmd}` while waiting for it", cmd = self))
                }
            }
        };
        relay.into_iter().for_each(|r| drop(r.join()));
        if !status.success() {
            return Err(self.failed(status));
        }
        let secs = started.elapsed().as_secs();
        crate::progress!("{}", tr!("  {doing}: done in {secs} s", doing, secs));
        Ok(())
    }

    /// The terminal's stderr for both its streams: what a command run this
    /// way prints is the verb's progress, and stdout is for the verb's
    /// result alone (`cargo xtask e2e > file` holds the table, not cargo's lines).
    /// In Chinese, its lines are relayed marked `  | `: they are another program's, in its
    /// own language (the threads returned end with its output).
    fn spawn_inherit(&self) -> anyhow::Result<(Child, Vec<std::thread::JoinHandle<()>>)> {
        let mut command = self.to_command();
        if !crate::say::chinese() {
            let stderr = std::io::stderr().as_fd().try_clone_to_owned()?;
            command.stdout(Stdio::from(stderr));
        } else {
            command.stdout(Stdio::piped()).stderr(Stdio::piped());
        }
        let mut child = command.spawn().with_context(|| tr!("cannot start `{cmd}`", cmd = self))?;
        let relay = |stream: Option<Box<dyn std::io::Read + Send>>| {
            let stream = std::io::BufReader::new(stream?);
            Some(std::thread::spawn(move || {
                use std::io::BufRead as _;
                for line in stream.lines().map_while(Result::ok) {
                    eprintln!("  | {line}");
                }
            }))
        };
        let out = child.stdout.take().map(|s| Box::new(s) as Box<dyn std::io::Read + Send>);
        let err = child.stderr.take().map(|s| Box::new(s) as Box<dyn std::io::Read + Send>);
        Ok((child, [relay(out), relay(err)].into_iter().flatten().collect()))
    }

    /// Echo, run, and return its stdout, trimmed; an error (with its stderr)
    /// unless it exits 0.
    pub fn read(&self) -> anyhow::Result<String> {
        let output = self.output()?;
        if !output.status.success() {
            let stderr = String::from_utf8_lossy(&output.stderr);
            return Err(self.failed(output.status)).with_context(|| stderr.trim().to_string());
        }
        Ok(String::from_utf8_lossy(&output.stdout).trim().to_string())
    }

    /// Echo, run, and return everything it did, whatever its exit status.
    pub fn output(&self) -> anyhow::Result<Output> {
        self.echo();
        self.to_command()
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .output()
            .with_context(|| tr!("cannot start `{cmd}`", cmd = self))
    }

    /// Echo as `$ cmd >>LOG 2>&1 &`, then start it in its own process group
    /// with stdout and stderr appended to `log`: it outlives xtask and a
    /// Ctrl-C in xtask's terminal, and stopping the group stops whatever it
    /// started.
    pub fn spawn_to_log(&self, log: &Path) -> anyhow::Result<Child> {
        self.to_log(log)?.spawn().with_context(|| tr!("cannot start `{cmd}`", cmd = self))
    }

    /// Echo, and start it as this process's child with `stdout` and `stderr`
    /// as given: a tokio child, killed if dropped before it exits, so that a
    /// test's process never outlives the test.
    pub fn spawn(
        &self,
        stdout: impl Into<Stdio>,
        stderr: impl Into<Stdio>,
    ) -> anyhow::Result<tokio::process::Child> {
        self.echo();
        let mut command = self.to_command();
        command.stdout(stdout).stderr(stderr);
        self.spawn_child(command)
    }

    /// [`Cmd::spawn`] as [`Cmd::spawn_to_log`] starts and echoes it: output
    /// appended to `log`, its own process group.
    pub fn spawn_child_to_log(&self, log: &Path) -> anyhow::Result<tokio::process::Child> {
        let command = self.to_log(log)?;
        self.spawn_child(command)
    }

    fn spawn_child(&self, command: Command) -> anyhow::Result<tokio::process::Child> {
        tokio::process::Command::from(command)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| tr!("cannot start `{cmd}`", cmd = self))
    }

    /// Echoed as `$ cmd >>LOG 2>&1 &`: the command with its stdout and stderr
    /// appended to `log`, in a process group of its own.
    fn to_log(&self, log: &Path) -> anyhow::Result<Command> {
        crate::progress!("$ {self} >>{} 2>&1 &", self.word(&log.display().to_string()));
        let out = std::fs::File::options()
            .create(true)
            .append(true)
            .open(log)
            .with_context(|| tr!("cannot open {path}", path = log.display()))?;
        let mut command = self.to_command();
        command.stdout(out.try_clone()?).stderr(out).process_group(0);
        Ok(command)
    }

    /// A word as [`Display`](fmt::Display) shows it: relative to the project
    /// root when inside it, quoted for a shell.
    fn word(&self, word: &str) -> String {
        let root = format!("{}/", project::root().display());
        shell_quote(word.strip_prefix(root.as_str()).unwrap_or(word))
    }

    /// Whether it exits 0, echoed like any other (for probes).
    pub fn succeeds(&self) -> bool {
        self.output().is_ok_and(|o| o.status.success())
    }
}

/// How often [`Cmd::run_long`] says it is still at work.
const HEARTBEAT: Duration = Duration::from_secs(30);

/// Shown from the project root, where a person runs `cargo xtask`: paths
/// inside it are shown relative to it (the command runs with absolute ones) —
/// but after a `cd` elsewhere, where they would no longer lead there, as they are.
impl fmt::Display for Cmd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let root = format!("{}/", project::root().display());
        let cd = self.dir.as_ref().map(|d| format!("{}/", d.display())).filter(|d| *d != root);
        let word = |w: &str| if cd.is_some() { shell_quote(w) } else { self.word(w) };
        if let Some(dir) = &cd {
            write!(f, "cd {} && ", self.word(dir.trim_end_matches('/')))?;
        }
        for (key, value) in &self.env {
            write!(f, "{key}={} ", word(value))?;
        }
        write!(f, "{}", word(&self.program))?;
        for arg in &self.args {
            write!(f, " {}", word(arg))?;
        }
        Ok(())
    }
}

/// Quotes a word for a POSIX shell when it needs it.
pub fn shell_quote(word: &str) -> String {
    let plain = !word.is_empty()
        && word.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=:,@%+".contains(c));
    if plain { word.to_string() } else { format!("'{}'", word.replace('\'', r"'\''")) }
}

/// The variables `cargo run` and `cargo test` give their child for its package
/// (CARGO_MANIFEST_DIR, …): no command gets them, as none does in a shell. Passed
/// on to a nested cargo they change what ring's build script watches, so each
/// switch between a plain `cargo` and a nested one rebuilt ring, rustls and kube
/// — and, the path naming the clone, every CI run did, warm or not.
fn package_variables() -> Vec<String> {
    std::env::vars_os()
        .map(|(name, _)| name.to_string_lossy().into_owned())
        .filter(|name| {
            name.starts_with("CARGO_MANIFEST_")
                || name.starts_with("CARGO_PKG_")
                || ["CARGO_CRATE_NAME", "CARGO_BIN_NAME", "CARGO_PRIMARY_PACKAGE"]
                    .contains(&&**name)
        })
        .collect()
}

/// `cargo ARGS` run from the project root, as a person types it.
pub fn cargo<I, S>(args: I) -> Cmd
where
    I: IntoIterator<Item = S>,
    S: AsRef<str>,
{
    Cmd::new("cargo").args(args).dir(project::root())
}

/// The command must have failed because it is not installed.
pub fn is_not_found(error: &anyhow::Error) -> bool {
    error
        .chain()
        .filter_map(|e| e.downcast_ref::<std::io::Error>())
        .any(|e| e.kind() == std::io::ErrorKind::NotFound)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_command_gets_the_default_sigint_even_when_the_kit_ignores_it() {
        // SAFETY: a test of its own process's disposition, put back at once.
        let before = unsafe { libc::signal(libc::SIGINT, libc::SIG_IGN) };
        let status = super::Cmd::argv(["sh", "-c", "kill -INT $$; exit 0"]).output();
        unsafe { libc::signal(libc::SIGINT, before) };
        let status = status.unwrap().status;
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(libc::SIGINT), "{status}");
    }

    use super::*;

    #[test]
    fn command_lines_paste_back_into_a_shell() {
        let cmd = Cmd::argv(["/bin/etcd", "--data-dir=/tmp/a b", "--name=lab", "it's", ""]);
        assert_eq!(cmd.to_string(), r"/bin/etcd '--data-dir=/tmp/a b' --name=lab 'it'\''s' ''");
    }

    #[test]
    fn echoes_as_a_person_types_it() {
        let cmd = Cmd::argv(["docker", "image", "inspect", "--format", "{{.Id}}", "a b"])
            .env("RUSTFLAGS", "-C target-feature=+crt-static")
            .dir("xtask/envtest/kubernetes");
        assert_eq!(
            cmd.to_string(),
            "cd xtask/envtest/kubernetes && RUSTFLAGS='-C target-feature=+crt-static' \
             docker image inspect --format '{{.Id}}' 'a b'"
        );
        let root = project::root();
        let inside = Cmd::new("go").arg(root.join("target/x").display().to_string()).dir(&root);
        assert_eq!(inside.to_string(), "go target/x");
        let below = Cmd::new("go").dir(root.join("xtask/envtest/etcd"));
        assert_eq!(below.to_string(), "cd xtask/envtest/etcd && go");
        // After the cd, a path inside the project is shown whole: it still leads there.
        let work = root.join("cluster.work").display().to_string();
        let below = below.env("GOWORK", &work).arg(root.join("target/x").display().to_string());
        let target = root.join("target/x").display().to_string();
        assert_eq!(
            below.to_string(),
            format!("cd xtask/envtest/etcd && GOWORK={work} go {target}")
        );
    }

    #[test]
    fn reads_stdout_and_reports_failures_with_stderr() {
        assert_eq!(Cmd::argv(["echo", " hi "]).read().unwrap(), "hi");
        let error = Cmd::argv(["sh", "-c", "echo oops >&2; exit 3"]).read().unwrap_err();
        let text = format!("{error:#}");
        assert!(text.contains("oops") && text.contains("exit status: 3"), "{text}");
        let missing = Cmd::new("no-such-program-here").read().unwrap_err();
        assert!(is_not_found(&missing), "{missing:#}");
    }

    #[tokio::test]
    async fn a_child_is_spawned_with_the_output_asked_for() {
        let child = Cmd::argv(["sh", "-c", "echo out; echo err >&2"])
            .spawn(Stdio::piped(), Stdio::null())
            .unwrap();
        let output = child.wait_with_output().await.unwrap();
        assert_eq!(String::from_utf8_lossy(&output.stdout), "out\n");
        let log = std::env::temp_dir().join(format!("labkit-spawn-{}.log", std::process::id()));
        std::fs::write(&log, "before\n").unwrap();
        let mut child =
            Cmd::argv(["sh", "-c", "echo out; echo err >&2"]).spawn_child_to_log(&log).unwrap();
        assert!(child.wait().await.unwrap().success());
        assert_eq!(std::fs::read_to_string(&log).unwrap(), "before\nout\nerr\n");
        std::fs::remove_file(&log).unwrap();
    }

    #[test]
    fn a_long_command_reports_its_exit_status() {
        Cmd::argv(["sh", "-c", "exit 0"]).run_long("testing").unwrap();
        let error = Cmd::argv(["sh", "-c", "exit 3"]).run_long("testing").unwrap_err();
        assert!(format!("{error:#}").contains("exit"), "{error:#}");
    }

    /// `cargo test` gives this process its package's variables; a command it
    /// runs sees none of them, whether cargo itself, under `nice`, or another.
    #[test]
    fn no_command_gets_the_package_variables() {
        assert!(std::env::var_os("CARGO_MANIFEST_DIR").is_some(), "run by cargo test");
        let commands = [cargo(["build"]), Cmd::argv(["nice", "cargo", "build"]), Cmd::new("go")];
        for cmd in commands {
            let removed: Vec<String> = cmd
                .to_command()
                .get_envs()
                .filter(|(_, value)| value.is_none())
                .map(|(name, _)| name.to_string_lossy().into_owned())
                .collect();
            for name in ["CARGO_MANIFEST_DIR", "CARGO_PKG_NAME", "CARGO_PKG_VERSION"] {
                assert!(removed.iter().any(|s| s == name), "{name} passed on: {removed:?}");
            }
        }
    }
}
