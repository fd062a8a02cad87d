//! `lab down`: stop everything a lab runs and forget it; nothing to do is not an error.

use std::process::ExitCode;

use anyhow::Result;

use crate::lab::envtest::{self, Layout};
use crate::lab::{kind, state_dir};
use crate::plan;
use e2e::lab_file::{LabFile, ProviderKind};

pub fn run(name: &str, dry_run: bool) -> Result<ExitCode> {
    let layout = Layout::new(&state_dir(name));
    // An unreadable lab.json must not keep the processes running: the pid files suffice.
    let provider = match LabFile::read(&layout.state_dir) {
        Ok(Some(lab)) => lab.provider,
        _ => ProviderKind::Envtest,
    };
    if dry_run {
        let steps = match provider {
            ProviderKind::Kind => kind::down_plan(name),
            ProviderKind::Envtest => envtest::down_plan(&layout),
        };
        print!("{}", plan::render(&steps));
        return Ok(ExitCode::SUCCESS);
    }
    match provider {
        ProviderKind::Kind => kind::down(name)?,
        ProviderKind::Envtest if envtest::down(&layout)? => eprintln!("lab {name} is down"),
        ProviderKind::Envtest => {
            eprintln!(
                "lab {name} is not up (nothing at {})",
                layout.state_dir.display()
            )
        }
    }
    Ok(ExitCode::SUCCESS)
}
