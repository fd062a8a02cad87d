//! `lab down`: stop everything a lab runs and forget it; nothing to do is not an error.

use std::process::ExitCode;

use anyhow::Result;

use crate::lab::envtest::{self, Layout};
use crate::lab::{existing, kind};
use crate::plan;
use labkit::lab_file::{LabFile, ProviderKind};
use labkit::project::shown;
use labkit::record::Record;

pub async fn run(name: &str, dry_run: bool) -> Result<ExitCode> {
    let layout = Layout::new(&labkit::project::lab_dir(name));
    // Without a readable lab.json (an `up` that did not finish writes none)
    // the record says what was made; envtest processes are looked for too.
    let lab = LabFile::read(&layout.state_dir).ok().flatten();
    let record = Record::load(&layout.state_dir)?;
    if !dry_run && let Some(record) = &record {
        crate::borrow::stop_leftovers(record);
    }
    let recorded = record.as_ref().and_then(|r| r.provider);
    if lab.as_ref().map(|l| l.provider).or(recorded) == Some(ProviderKind::Existing) {
        let record = record.unwrap_or(Record::open(&layout.state_dir, name, recorded)?);
        if dry_run {
            println!(
                "# delete, newest first, what this lab made (its record {}; each with its uid as a precondition), then remove {}",
                shown(record.file()),
                shown(&layout.state_dir)
            );
            for entry in record.entries.iter().rev() {
                let uid = entry.uid.as_deref().unwrap_or("its owner label");
                println!("  {}    # {}, {uid}", entry.object, entry.by);
            }
            return Ok(ExitCode::SUCCESS);
        }
        existing::down(&layout.state_dir, record).await?;
        println!(
            "lab {name} is down (the cluster and what the lab did not make are left as they were)"
        );
        return Ok(ExitCode::SUCCESS);
    }
    let provider = lab.map(|lab| lab.provider).or(recorded);
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
        println!("lab {name} is down");
    } else {
        println!("lab {name} is not up (nothing at {})", layout.state_dir.display());
    }
    Ok(ExitCode::SUCCESS)
}
