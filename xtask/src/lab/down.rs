//! `lab down`: stop everything a lab runs and forget it; nothing to do is not an error.

use std::process::ExitCode;

use anyhow::{Result, bail};

use crate::lab::envtest::{self, Layout};
use crate::lab::state_dir;
use e2e::lab_file::{LabFile, ProviderKind};

pub fn run(name: &str) -> Result<ExitCode> {
    let layout = Layout::new(&state_dir(name));
    // An unreadable lab.json must not keep the processes running: the pid files suffice.
    if let Ok(Some(lab)) = LabFile::read(&layout.state_dir)
        && lab.provider != ProviderKind::Envtest
    {
        bail!(
            "lab {name} was made by the {} provider, which this xtask cannot manage yet",
            lab.provider
        );
    }
    if envtest::down(&layout)? {
        eprintln!("lab {name} is down");
    } else {
        eprintln!(
            "lab {name} is not up (nothing at {})",
            layout.state_dir.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}
