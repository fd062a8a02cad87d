//! `lab env`: the variables a terminal needs for this lab, as `export` lines,
//! so that every terminal a page opens is one `eval "$(cargo xtask lab env)"`
//! away from working — no variable set only in another terminal, no path
//! that assumes the default lab name or target directory.

use std::process::ExitCode;

use anyhow::Result;
use labkit::command::shell_quote;

/// `KIT` (this repository: `cargo xtask` runs there, `$KIT/workqueue` is the
/// crate page 00 adds) and `KUBECONFIG` (the lab's admin).
pub fn run(name: &str) -> Result<ExitCode> {
    // Not up: nothing on stdout, so that an `eval` of it changes nothing.
    let lab = labkit::lab::file_of(name)?;
    let kit = labkit::project::root().display().to_string();
    println!("export KIT={}", shell_quote(&kit));
    println!("export KUBECONFIG={}", shell_quote(&lab.admin_kubeconfig.display().to_string()));
    Ok(ExitCode::SUCCESS)
}
