//! `cargo xtask lab …`: a local Kubernetes API with the controller running against it.
//!
//! A lab has a name (`--name`, default `my-controller-lab`) and a state directory
//! `target/lab/<name>/`; `lab.json` there (see [`lab_file`]) tells every other tool about it.

pub mod apply;
pub mod binaries;
pub mod certs;
pub mod controller;
pub mod down;
pub mod envtest;
pub mod kubeconfig;
pub mod logs;
pub mod provider;
pub mod status;
pub mod up;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Args, Subcommand};

use e2e::project;

pub use e2e::lab::DEFAULT_NAME;

#[derive(Subcommand)]
pub enum LabCommand {
    /// Start a lab (or say that it is already up); prints how to reach it.
    Up {
        #[arg(long, value_enum, default_value_t = provider::ProviderChoice::Auto)]
        provider: provider::ProviderChoice,
        #[command(flatten)]
        lab: LabName,
    },
    /// Stop a lab's processes and remove its state directory (fine when it is not up).
    Down {
        #[command(flatten)]
        lab: LabName,
    },
    /// Processes, ports, versions, readiness; exits non-zero when the lab is not healthy.
    Status {
        #[command(flatten)]
        lab: LabName,
    },
    /// The controller's log.
    Logs {
        /// Keep printing what the controller writes (until Ctrl-C or `lab down`).
        #[arg(short, long)]
        follow: bool,
        #[command(flatten)]
        lab: LabName,
    },
}

#[derive(Args)]
pub struct LabName {
    /// The lab's name: lowercase letters, digits and '-' (it names a directory and a kind cluster).
    #[arg(long, default_value = DEFAULT_NAME, value_parser = parse_name)]
    pub name: String,
}

pub async fn run(command: LabCommand) -> Result<ExitCode> {
    match command {
        LabCommand::Up { provider, lab } => up::run(&lab.name, provider).await,
        LabCommand::Down { lab } => down::run(&lab.name),
        LabCommand::Status { lab } => status::run(&lab.name).await,
        LabCommand::Logs { follow, lab } => logs::run(&lab.name, follow),
    }
}

/// `target/lab/<name>`.
pub fn state_dir(name: &str) -> PathBuf {
    project::lab_dir(name)
}

fn parse_name(name: &str) -> Result<String, String> {
    let valid = !name.is_empty()
        && name.len() <= 40
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.starts_with('-')
        && !name.ends_with('-');
    if valid {
        Ok(name.to_string())
    } else {
        Err("use 1 to 40 lowercase letters, digits and '-', not starting or ending with '-'".into())
    }
}

#[cfg(test)]
mod tests {
    use super::parse_name;

    #[test]
    fn lab_names_are_directory_and_dns_safe() {
        assert!(parse_name("my-controller-lab").is_ok());
        assert!(parse_name("lab2").is_ok());
        for bad in ["", "-x", "x-", "Lab", "a/b", "..", "a b"] {
            assert!(parse_name(bad).is_err(), "{bad:?}");
        }
    }
}
