//! `lab up`: start a lab unless a healthy one is already there.

use std::process::ExitCode;

use anyhow::{Result, bail};

use crate::lab::envtest::{self, Layout};
use crate::lab::provider::{self, ProviderChoice};
use crate::lab::state_dir;
use e2e::lab_file::{LabFile, ProviderKind};

pub async fn run(name: &str, choice: ProviderChoice) -> Result<ExitCode> {
    let provider = provider::resolve(choice)?;
    let layout = Layout::new(&state_dir(name));

    match LabFile::read(&layout.state_dir) {
        Ok(Some(lab)) => {
            if lab.provider != ProviderKind::Envtest {
                bail!(
                    "lab {name} was made by the {} provider, which this xtask cannot manage yet",
                    lab.provider
                );
            }
            let health = envtest::health(&lab).await;
            if health.healthy {
                eprintln!("lab {name} is already up and healthy; not starting another");
                for line in &health.lines {
                    eprintln!("  {line}");
                }
                print_how_to_use(&lab);
                return Ok(ExitCode::SUCCESS);
            }
            eprintln!("lab {name} is there but not healthy:");
            for line in &health.lines {
                eprintln!("  {line}");
            }
            eprintln!("cleaning it up and starting anew");
            envtest::down(&layout)?;
        }
        Ok(None) if layout.state_dir.exists() => {
            eprintln!(
                "{} holds an incomplete lab (no lab.json): cleaning it up",
                layout.state_dir.display()
            );
            envtest::down(&layout)?;
        }
        Ok(None) => {}
        Err(error) => {
            eprintln!("warning: {error:#}; cleaning up");
            envtest::down(&layout)?;
        }
    }

    let lab = match provider {
        ProviderKind::Envtest => envtest::up(name, &layout).await?,
        ProviderKind::Kind => bail!("the kind provider is not available in this xtask yet"),
    };
    print_how_to_use(&lab);
    Ok(ExitCode::SUCCESS)
}

fn print_how_to_use(lab: &LabFile) {
    eprintln!();
    eprintln!(
        "  lab file:        {}",
        LabFile::path(&lab.state_dir).display()
    );
    eprintln!(
        "  API server:      {} ({})",
        lab.api_server_url, lab.kubernetes_version
    );
    eprintln!(
        "  controller:      {} (/healthz /readyz /metrics)",
        lab.controller.url
    );
    eprintln!(
        "  admin:           export KUBECONFIG={}",
        lab.admin_kubeconfig.display()
    );
    eprintln!(
        "  controller log:  cargo xtask lab logs -f --name {}",
        lab.name
    );
    eprintln!(
        "  stop:            cargo xtask lab down --name {}",
        lab.name
    );
}
