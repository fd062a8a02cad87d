//! Which provider `lab up` uses.

use anyhow::Result;
use clap::ValueEnum;

use labkit::lab_file::ProviderKind;

/// `--provider`: what a person may ask for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ProviderChoice {
    /// kube-apiserver + etcd + the controller as local processes; no Docker needed.
    Envtest,
    /// A kind cluster (needs Docker).
    Kind,
    /// A cluster that is there already (`--context`, `--registry`): the controller in one namespace.
    Existing,
    /// kind when Docker is usable, else envtest.
    Auto,
}

/// The provider to use, saying why when the choice was made for the person.
pub fn resolve(choice: ProviderChoice) -> Result<ProviderKind> {
    match choice {
        ProviderChoice::Envtest => Ok(ProviderKind::Envtest),
        ProviderChoice::Kind => Ok(ProviderKind::Kind),
        ProviderChoice::Existing => Ok(ProviderKind::Existing),
        ProviderChoice::Auto => {
            let (kind, why) = auto();
            labkit::progress!("provider auto: {why}: using {kind}");
            Ok(kind)
        }
    }
}

/// kind when a Docker daemon answers and kind is installed, else envtest.
fn auto() -> (ProviderKind, String) {
    if labkit::tools::on_path("kind").is_none() {
        return (ProviderKind::Envtest, "kind is not on PATH".into());
    }
    if labkit::tools::on_path("docker").is_none() {
        return (ProviderKind::Envtest, "docker is not on PATH".into());
    }
    let daemon =
        labkit::command::Cmd::argv(["docker", "info", "--format", "{{.ServerVersion}}"]).succeeds();
    if daemon {
        (ProviderKind::Kind, "Docker answers and kind is installed".into())
    } else {
        (ProviderKind::Envtest, "the Docker daemon does not answer".into())
    }
}
