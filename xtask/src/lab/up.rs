//! `lab up`, whichever the provider ([`super::provider::Provider::up`]).
//! An `up` that fails or is interrupted (SIGINT, SIGTERM, SIGHUP) and
//! leaves no lab.json (a first one, or envtest's, which starts anew) is
//! undone by the provider's down plan, made from what the steps it
//! completed recorded; one killed leaves that for `lab down`. A failed
//! update of a lab that is up (kind, existing) is not undone.

use std::process::ExitCode;

use anyhow::{Result, anyhow, bail};

use crate::interrupt::Interrupts;
use crate::lab::{
    options::{self, UpOptions},
    providers,
};
use labkit::lab_file::LabFile;
use labkit::project::shown;
use labkit::record::Record;

pub async fn run(name: &str, options: &UpOptions) -> Result<ExitCode> {
    let kind = options::resolve(options.provider)?;
    options.check_for(kind)?;
    let provider = providers::of(kind);
    if options.dry_run {
        provider.up(name, options).await?;
        return Ok(ExitCode::SUCCESS);
    }
    let state_dir = labkit::project::lab_dir(name);
    crate::borrow::put_back_if_left(name).await?;
    // lab.json's provider, or the record's of an `up` that did not finish: an
    // `up` of another provider would clean the folder and lose what it names.
    if let Some(there) = providers::kind_of_lab(name)?
        && there != kind
    {
        bail!(
            "lab {name} is on provider {there}: `cargo xtask lab down --name {name}` first, or use another --name"
        );
    }
    let mut signals = Interrupts::catch(&state_dir.join("hangup.log"))?;
    let result = tokio::select! {
        result = provider.up(name, options) => result,
        () = signals.first("lab up") => Err(anyhow!("interrupted")),
    };
    match result {
        Ok(Some(lab)) => print_how_to_use(&lab),
        Ok(None) => bail!("lab up finished without writing lab.json"),
        Err(error) if LabFile::read(&state_dir).ok().flatten().is_some() => return Err(error),
        Err(error) => {
            undo(name, signals).await;
            return Err(error);
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// After an `up` failed or was interrupted: `lab down`, the provider's plan
/// for what the lab's files say was made. Each further signal gives up at
/// once: the files stay for `lab down`.
async fn undo(name: &str, signals: Interrupts) {
    let record = Record::path(&labkit::project::lab_dir(name));
    let again =
        format!("`cargo xtask lab down --name {name}` removes what {} names", shown(&record));
    let said = again.clone();
    signals.further(move |signal| {
        eprintln!("{signal}: given up undoing; {said}");
        std::process::exit(130);
    });
    eprintln!("lab up did not finish: undoing what it made");
    if let Err(error) = super::down::run(name, false).await {
        eprintln!("warning: the undo failed: {error:#}; {again}");
    }
}

fn print_how_to_use(lab: &LabFile) {
    println!();
    println!("  lab file:        {}", LabFile::path(&lab.state_dir).display());
    println!("  API server:      {} ({})", lab.api_server_url, lab.kubernetes_version);
    if lab.controller.url.is_empty() {
        println!("  controller:      deployment/{} in {}", super::kind::DEPLOYMENT, lab.name);
    } else {
        println!("  controller:      {} (/healthz /readyz /metrics)", lab.controller.url);
    }
    if let Some(existing) = lab.existing() {
        println!("  namespace:       {} (context {})", existing.namespace, existing.context);
        println!("  image:           {}", existing.controller_image);
    }
    println!("  admin:           export KUBECONFIG={}", lab.admin_kubeconfig.display());
    println!("  a new terminal:  eval \"$(cargo xtask lab env --name {})\"", lab.name);
    println!("  controller log:  cargo xtask lab logs -f --name {}", lab.name);
    println!("  experiments:     cargo xtask e2e --name {}", lab.name);
    println!("  stop:            cargo xtask lab down --name {}", lab.name);
}
