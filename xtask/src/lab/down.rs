//! `lab down`, whichever the provider ([`super::provider::Provider::down`]):
//! stop everything a lab runs and forget it; nothing to do is not an error.

use std::process::ExitCode;

use anyhow::Result;

use crate::lab::providers;
use labkit::record::Record;

pub async fn run(name: &str, dry_run: bool) -> Result<ExitCode> {
    let dir = labkit::project::lab_dir(name);
    if !dry_run && let Some(record) = Record::load(&dir)? {
        crate::borrow::stop_leftovers(&record);
    }
    let anything = providers::of_lab(name)?.down(name, dry_run).await?;
    match (dry_run, anything) {
        (true, _) => {}
        (false, true) => println!("{}", labkit::tr!("lab {name} is down", name)),
        (false, false) => println!(
            "{}",
            labkit::tr!("lab {name} is not up (nothing at {path})", name, path = dir.display())
        ),
    }
    Ok(ExitCode::SUCCESS)
}
