//! `lab status`: what runs, where, which versions, whether it is ready.

use std::process::ExitCode;

use anyhow::Result;

use crate::lab::envtest;
use labkit::lab_file::{LabFile, ProviderKind};

pub async fn run(name: &str) -> Result<ExitCode> {
    let dir = labkit::project::lab_dir(name);
    let Some(lab) = LabFile::read(&dir)? else {
        if dir.exists() {
            println!(
                "lab {name}: incomplete (no lab.json in {}): an interrupted or failed `lab up`; \
                 `cargo xtask lab down --name {name}` cleans it up",
                dir.display()
            );
        } else {
            println!("lab {name}: not up (`cargo xtask lab up --name {name}` starts it)");
        }
        return Ok(ExitCode::FAILURE);
    };
    println!("lab {} ({}) in {}", lab.name, lab.provider, lab.state_dir.display());
    if lab.provider != ProviderKind::Envtest {
        return Ok(if crate::lab::kind::status(&lab).await? {
            println!("healthy");
            ExitCode::SUCCESS
        } else {
            println!(
                "NOT healthy: `cargo xtask lab up --name {name} --provider {}` repairs it",
                lab.provider
            );
            ExitCode::FAILURE
        });
    }
    let health = envtest::health(&lab).await;
    for line in &health.lines {
        println!("  {line}");
    }
    println!("  admin kubeconfig:      {}", lab.admin_kubeconfig.display());
    println!(
        "  controller kubeconfig: {} (ServiceAccount {}, token expires {})",
        lab.controller.kubeconfig.display(),
        lab.controller.service_account,
        lab.controller.token_expires
    );
    println!("  controller log:        {}", lab.controller.log.display());
    if health.healthy {
        println!("healthy");
        Ok(ExitCode::SUCCESS)
    } else {
        println!("NOT healthy: `cargo xtask lab up --name {name}` starts it anew");
        Ok(ExitCode::FAILURE)
    }
}
