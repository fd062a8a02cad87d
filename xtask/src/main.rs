//! `cargo xtask …`: the kit's task runner (alias in `.cargo/config.toml`).
//!
//! Only the verbs live here; each one is a module of its own.

mod cmdline;
mod e2e;
mod envtest_bins;
mod lab;
mod test;
mod tidy;
mod wait;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "cargo xtask", about = "Tasks of the controller kit", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Start, inspect and stop a local lab: a Kubernetes API plus the controller.
    #[command(subcommand)]
    Lab(lab::LabCommand),
    /// Run the e2e suite against the current lab and print a summary table.
    E2e {
        /// Only this experiment (e.g. self-heal, correct, rerun, dedup).
        #[arg(long)]
        exp: Option<String>,
        #[command(flatten)]
        lab: lab::LabName,
    },
    /// The README's test command: unit tests, a fresh envtest lab, the e2e suite, lab down.
    Test,
    /// Find (or build with Go) the envtest kube-apiserver and etcd; print their paths and versions.
    EnvtestBins,
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Lab(command) => lab::run(command).await,
        Command::E2e { exp, lab } => e2e::run(&lab.name, exp.as_deref()),
        Command::Test => test::run().await,
        Command::EnvtestBins => envtest_bins::run().await,
    };
    match result {
        Ok(code) => code,
        Err(error) => {
            // `{:#}` keeps the whole context chain on one line.
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}
