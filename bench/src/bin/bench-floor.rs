//! The bench's floor as a process of its own, like every subject: the
//! harness's minimal watch → write loop (`bench::floor::keep`) keeping
//! my-config until SIGTERM. `cargo maint bench` builds and runs it; by hand:
//!
//!     bench-floor --kubeconfig PATH [--namespace default] [--name my-config]

use anyhow::Context;
use clap::Parser;
use controller::desired::{Desired, default_data};

/// The bench's floor: keeps my-config until SIGTERM.
#[derive(Parser)]
struct Args {
    #[arg(long)]
    kubeconfig: Option<std::path::PathBuf>,
    #[arg(long, default_value = "default")]
    namespace: String,
    #[arg(long, default_value = "my-config")]
    name: String,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let Args { kubeconfig, namespace, name } = Args::parse();
    let desired = Desired::new(namespace, name, default_data())?;
    let client =
        controller::connect::client(kubeconfig.as_deref()).await.map_err(anyhow::Error::msg)?;
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        kept = bench::floor::keep(client, desired) => kept.context("the floor's loop failed"),
        _ = terminate.recv() => Ok(()),
        _ = tokio::signal::ctrl_c() => Ok(()),
    }
}
