//! `cargo xtask envtest-bins`: find (or build) the envtest programs and say where they are.

use std::process::ExitCode;

use anyhow::Result;

use crate::lab::binaries;

pub async fn run() -> Result<ExitCode> {
    let found = binaries::find().await?;
    for (name, binary) in [("kube-apiserver", &found.kube_apiserver), ("etcd", &found.etcd)] {
        println!("{name:<15} {:<8} {}  ({})", binary.version, binary.path.display(), binary.source);
    }
    Ok(ExitCode::SUCCESS)
}
