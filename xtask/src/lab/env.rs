//! `lab env`: the variables a terminal needs for this lab, as `export` lines,
//! so that every terminal a page opens is one `eval "$(cargo xtask lab env)"`
//! away from working — no variable set only in another terminal, no path
//! that assumes the default lab name or target directory.

use std::process::ExitCode;

use anyhow::Result;
use labkit::{command::shell_quote, lab_file::LabFile};

/// `KIT` (this repository: `cargo xtask` runs there, `$KIT/workqueue` is the
/// crate page 00 adds) and `KUBECONFIG` (the lab's admin).
pub fn exports(lab: &LabFile) -> Vec<String> {
    let kit = labkit::project::root().display().to_string();
    let kubeconfig = lab.admin_kubeconfig.display().to_string();
    vec![
        format!("export KIT={}", shell_quote(&kit)),
        format!("export KUBECONFIG={}", shell_quote(&kubeconfig)),
    ]
}

pub fn run(name: &str) -> Result<ExitCode> {
    // Not up: nothing on stdout, so that an `eval` of it changes nothing.
    let lab = labkit::lab::file_of(name)?;
    for line in exports(&lab) {
        println!("{line}");
    }
    Ok(ExitCode::SUCCESS)
}
