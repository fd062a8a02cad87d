//! What the lab tests share: the lab under test, and `cargo xtask` run as a
//! person runs it.

#![allow(dead_code)] // Each test file uses its own part.

use e2e::{
    command::{Cmd, cargo},
    lab::Lab,
};

/// The lab under test: `$LAB_NAME` (`cargo xtask test` sets it). No lab,
/// no test: it fails.
pub async fn lab() -> Lab {
    Lab::find().await.unwrap_or_else(|e| panic!("these tests need a running lab: {e:#}"))
}

/// `cargo xtask ARGS`.
pub fn xtask(args: &[&str]) -> Cmd {
    cargo(["xtask"]).args(args)
}

/// With `E2E_WRITE_SAMPLES=1`, `text` becomes `docs/samples/<name>`: the
/// sample outputs the docs link to are what a real run printed.
pub fn write_sample(name: &str, text: &str) {
    if std::env::var_os("E2E_WRITE_SAMPLES").is_some_and(|v| v == "1") {
        let path = e2e::project::root().join("docs/samples").join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
}

/// What a command printed, and whether it succeeded.
pub struct Ran {
    pub ok: bool,
    pub stdout: String,
    pub stderr: String,
}

pub fn run(cmd: &Cmd) -> Ran {
    let out = cmd.output().unwrap_or_else(|e| panic!("cannot run `{cmd}`: {e:#}"));
    Ran {
        ok: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Runs `cmd` with the terminal's output; panics unless it succeeds.
pub fn succeeds(cmd: &Cmd) {
    cmd.run().unwrap_or_else(|e| panic!("{e:#}"));
}

/// The ConfigMap the other-target tests make a lab for: not the default
/// namespace, not the default name.
pub const OTHER_TARGET: &str = "lab-target/other-config";

/// `lab up --target OTHER_TARGET` (`up` is the lab's own `lab up`): the Role
/// is made for exactly that one, and the controller keeps it; then the lab
/// is put back on the default ConfigMap.
pub fn another_target(up: &[&str]) {
    succeeds(&xtask(up).args(["--target", OTHER_TARGET]));
    let name = std::env::var(e2e::lab::NAME_ENV).unwrap_or(e2e::lab::DEFAULT_NAME.into());
    for experiment in ["rbac", "create", "heal"] {
        succeeds(&xtask(&["e2e", "--exp", experiment, "--name", &name]));
    }
    succeeds(&xtask(up));
}
