//! Which provider `lab up` uses.

use anyhow::{Result, bail};
use clap::ValueEnum;

use crate::lab::binaries;
use e2e::lab_file::ProviderKind;

/// `--provider`: what a person may ask for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ProviderChoice {
    /// kube-apiserver + etcd + the controller as local processes; no Docker needed.
    Envtest,
    /// A kind cluster (needs Docker).
    Kind,
    /// kind when Docker is usable, else envtest.
    Auto,
}

/// The provider to use, saying why when the choice was made for the person.
pub fn resolve(choice: ProviderChoice) -> Result<ProviderKind> {
    match choice {
        ProviderChoice::Envtest => Ok(ProviderKind::Envtest),
        ProviderChoice::Kind => bail!(
            "the kind provider is not available in this xtask yet; use `--provider envtest` (no Docker needed)"
        ),
        ProviderChoice::Auto => {
            if binaries::on_path("docker").is_some() {
                eprintln!(
                    "provider auto: docker is on PATH, but the kind provider is not available in this xtask yet: using envtest"
                );
            } else {
                eprintln!("provider auto: no docker on PATH, so no kind: using envtest");
            }
            Ok(ProviderKind::Envtest)
        }
    }
}
