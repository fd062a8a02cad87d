//! `cargo xtask lab …`: a local Kubernetes API with the controller running against it.
//!
//! A lab has a name (`--name`, default `my-controller-lab`) and a state directory
//! `target/lab/<name>/`; `lab.json` there (see [`labkit::lab_file`]) tells every other tool about it.

pub mod binaries;
pub mod certs;
pub mod controller;
pub mod deploy;
pub mod down;
pub mod env;
pub mod envtest;
pub mod existing;
pub mod kind;
pub mod kubeconfig;
pub mod manifests;
pub mod options;
pub mod provider;
pub mod providers;
pub mod release;
pub mod status;
pub mod up;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Args, Subcommand};
use labkit::tr;

pub use labkit::lab::DEFAULT_NAME;
pub use options::UpOptions;

#[derive(Subcommand)]
pub enum LabCommand {
    /// Start a lab (or say that it is already up); prints how to reach it.
    #[command(mut_arg("provider", providers::choice))]
    Up {
        #[command(flatten)]
        options: UpOptions,
        #[command(flatten)]
        lab: LabName,
    },
    /// Stop a lab's processes (or delete its kind cluster) and remove its state (fine when it is not up).
    Down {
        /// Print the commands in order without running them.
        #[arg(long)]
        dry_run: bool,
        #[command(flatten)]
        lab: LabName,
    },
    /// Save every image the kind lab needs (the node image, the controller image) into one archive.
    Bundle {
        /// The archive to write (`-f`, a file, as in kubectl; `-o` is an output format there).
        #[arg(short = 'f', long = "file", value_name = "FILE", default_value = "lab-bundle.tar")]
        output: PathBuf,
        #[arg(long, value_enum, default_value_t = crate::image::Builder::Auto)]
        image_builder: crate::image::Builder,
        /// The node image to carry: the pinned one (pulled), `built` (`cargo maint node-image`), or a reference.
        #[arg(long, value_name = "IMAGE")]
        node_image: Option<String>,
    },
    /// Stop the lab's own controller (so that yours is the only writer), or start it again.
    Controller {
        #[arg(value_enum)]
        action: ControllerAction,
        #[command(flatten)]
        lab: LabName,
    },
    /// `down`, then `up` with the same options: a clean lab.
    #[command(mut_arg("provider", providers::choice))]
    Reset {
        #[command(flatten)]
        options: UpOptions,
        #[command(flatten)]
        lab: LabName,
    },
    /// Processes, ports, versions, readiness; exits non-zero when the lab is not healthy.
    Status {
        #[command(flatten)]
        lab: LabName,
        #[command(flatten)]
        output: crate::output::OutputArg,
    },
    /// The lab's variables as `export` lines (KIT, KUBECONFIG), for a new terminal:
    /// `eval "$(cargo xtask lab env)"`.
    Env {
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
    /// Stage 2 on a running lab: the ConfigMapTemplate CRD and the stage-2 RBAC
    /// (manifests/stage2/), and a kubeconfig of its ServiceAccount to run the example with.
    Stage2 {
        #[command(flatten)]
        lab: LabName,
    },
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum ControllerAction {
    /// Stop it (envtest: its process; kind: the Deployment scaled to 0).
    Stop,
    /// Start it again with the lab's own flags, and wait until it is ready.
    Start,
}

#[derive(Args)]
pub struct LabName {
    /// The lab's name: lowercase letters, digits and '-' (it names a directory and a kind cluster).
    #[arg(long, default_value = DEFAULT_NAME, value_parser = parse_name)]
    pub name: String,
}

pub async fn run(command: LabCommand) -> Result<ExitCode> {
    match command {
        LabCommand::Up { options, lab } => up::run(&lab.name, &options).await,
        LabCommand::Down { dry_run, lab } => down::run(&lab.name, dry_run).await,
        LabCommand::Bundle { output, image_builder, node_image } => {
            let node = kind::NodeImage::parse(node_image.as_deref());
            kind::bundle::create(&output, image_builder, node).await?;
            Ok(ExitCode::SUCCESS)
        }
        LabCommand::Reset { options, lab } => {
            down::run(&lab.name, options.dry_run).await?;
            up::run(&lab.name, &options).await
        }
        LabCommand::Controller { action, lab } => {
            crate::borrow::put_back_if_left(&lab.name).await?;
            let mut lab = labkit::lab::Lab::find_named(&lab.name).await?;
            match action {
                ControllerAction::Stop => {
                    lab.stop_controller().await?;
                    println!(
                        "{}",
                        tr!(
                            "the lab's controller is stopped: `cargo xtask lab controller start` brings it back"
                        )
                    );
                }
                ControllerAction::Start => {
                    lab.restore_controller().await?;
                    println!(
                        "{}",
                        tr!("the lab's controller runs with its own flags and is ready")
                    );
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        LabCommand::Status { lab, output } => status::run(&lab.name, output.output).await,
        LabCommand::Env { lab } => env::run(&lab.name),
        LabCommand::Logs { follow, lab } => {
            providers::of_lab(&lab.name)?.logs(&lab.name, follow).await?;
            Ok(ExitCode::SUCCESS)
        }
        LabCommand::Stage2 { lab } => {
            let lab = labkit::lab::Lab::find_named(&lab.name).await?;
            if !lab.file().offers.own_cluster {
                anyhow::bail!(tr!(
                    "lab stage2 installs a CustomResourceDefinition, cluster-wide, which the kit does \
                     not do on a cluster it did not make (lab {name} is on {place}): use an envtest or kind lab",
                    name = lab.file().name,
                    place = lab.file().offers.place
                ));
            }
            let kubeconfig = labkit::stage2::install(&lab).await?.display().to_string();
            let admin = lab.file().admin_kubeconfig.display();
            let run = labkit::say::padded(&tr!("run it:"), 13);
            println!(
                "  {run}cargo run -p controller --example stage2_crd -- --kubeconfig {kubeconfig}"
            );
            let template = labkit::say::padded(&tr!("a template:"), 13);
            println!(
                "  {template}KUBECONFIG={admin} kubectl apply -f manifests/stage2/template.yaml"
            );
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn parse_name(name: &str) -> Result<String, String> {
    // A DNS label (a kind cluster's name is one) of at most 40.
    if name.len() <= 40 && ::controller::desired::is_dns1123_label(name) {
        Ok(name.to_string())
    } else {
        Err(tr!("use 1 to 40 lowercase letters, digits and '-', not starting or ending with '-'"))
    }
}

// A fourth provider, the test that a provider is its folder and one line in providers.rs.
#[cfg(test)]
mod fourth;

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
