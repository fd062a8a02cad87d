//! `cargo xtask test`, the README's test command: the unit tests, then a fresh
//! envtest lab, the e2e suite against it, and the lab down whatever happened.

use std::process::ExitCode;

use anyhow::Result;
use xshell::Shell;

use crate::{
    cmdline,
    lab::{self, provider::ProviderChoice},
};

/// Its own lab, so a person's `my-controller-lab` is left alone.
pub const LAB_NAME: &str = "my-controller-test";

pub async fn run() -> Result<ExitCode> {
    let sh = Shell::new()?;
    sh.change_dir(e2e::project::root());
    eprintln!("== unit tests");
    // Everything that needs no lab: the e2e crate's integration tests need
    // the lab below, its own unit tests do not.
    cmdline::cargo(&sh, &["test", "--workspace", "--exclude", "e2e"]).run()?;
    cmdline::cargo(&sh, &["test", "-p", "e2e", "--lib"]).run()?;

    // A Ctrl-C reaches the test processes (same terminal); xtask itself stays
    // to take the lab down.
    tokio::spawn(async {
        if tokio::signal::ctrl_c().await.is_ok() {
            eprintln!("interrupted: the lab goes down once the running step ends");
        }
    });
    eprintln!("== a fresh envtest lab ({LAB_NAME})");
    let _down = LabDown;
    lab::down::run(LAB_NAME)?;
    lab::up::run(LAB_NAME, ProviderChoice::Envtest).await?;
    eprintln!("== e2e suite");
    crate::e2e::run(LAB_NAME, None)
}

/// Takes the test lab down when `run` ends, by success, error or panic.
struct LabDown;

impl Drop for LabDown {
    fn drop(&mut self) {
        eprintln!("== lab down");
        if let Err(e) = lab::down::run(LAB_NAME) {
            eprintln!("error: could not take the lab down: {e:#}");
        }
    }
}
