//! `lab down`: stop everything a lab runs and forget it; nothing to do is not an error.

use std::process::ExitCode;

use anyhow::Result;

use crate::lab::envtest::{self, Layout};
use crate::lab::{existing, kind};
use crate::plan;
use labkit::lab_file::{LabFile, ProviderKind};

pub async fn run(name: &str, dry_run: bool) -> Result<ExitCode> {
    let layout = Layout::new(&labkit::project::lab_dir(name));
    // Without a readable lab.json (a failed `up` writes none) a kind cluster
    // of this name may still run, and envtest processes may: both are looked for.
    let lab = LabFile::read(&layout.state_dir).ok().flatten();
    if let Some(lab) = lab.as_ref().filter(|lab| lab.provider == ProviderKind::Existing) {
        if dry_run {
            println!(
                "# delete, in reverse order, what `lab up` created, then remove {}",
                layout.state_dir.display()
            );
            for object in lab.existing.iter().flat_map(|e| e.applied.iter()).rev() {
                println!("  {object}");
            }
            return Ok(ExitCode::SUCCESS);
        }
        existing::down(lab).await?;
        eprintln!(
            "lab {name} is down (the cluster and what the lab did not create are left as they were)"
        );
        return Ok(ExitCode::SUCCESS);
    }
    let provider = lab.map(|lab| lab.provider);
    let kind_too =
        provider != Some(ProviderKind::Envtest) && labkit::tools::on_path("kind").is_some();
    if dry_run {
        if provider != Some(ProviderKind::Kind) {
            print!("{}", plan::render(&envtest::down_plan(&layout)));
        }
        if kind_too || provider == Some(ProviderKind::Kind) {
            print!("{}", plan::render(&kind::down_plan(name, &layout.state_dir)));
        }
        return Ok(ExitCode::SUCCESS);
    }
    let mut anything = false;
    if provider != Some(ProviderKind::Kind) {
        anything |= envtest::down(&layout).await?;
    }
    if kind_too || provider == Some(ProviderKind::Kind) {
        anything |= kind::down(name, &layout.state_dir).await?;
    }
    if anything {
        eprintln!("lab {name} is down");
    } else {
        eprintln!("lab {name} is not up (nothing at {})", layout.state_dir.display());
    }
    Ok(ExitCode::SUCCESS)
}
