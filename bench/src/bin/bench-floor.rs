//! The bench's floor as a process of its own, like every subject: the
//! harness's minimal watch → write loop (`bench::floor::keep`) keeping
//! my-config until SIGTERM. `cargo maint bench` builds and runs it; by hand:
//!
//!     bench-floor --kubeconfig PATH [--namespace default] [--name my-config]

use anyhow::{Context, bail};
use controller::desired::{Desired, default_data};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let (mut kubeconfig, mut namespace, mut name) =
        (None, "default".to_string(), "my-config".to_string());
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().with_context(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--kubeconfig" => kubeconfig = Some(std::path::PathBuf::from(value)),
            "--namespace" => namespace = value,
            "--name" => name = value,
            other => bail!(
                "unknown flag {other}: bench-floor --kubeconfig PATH [--namespace NS] [--name NAME]"
            ),
        }
    }
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
