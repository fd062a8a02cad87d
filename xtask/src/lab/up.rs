//! `lab up`, whichever the provider ([`super::provider::Provider::up`]).
//! An `up` that fails or is interrupted (SIGINT, SIGTERM, SIGHUP) and
//! leaves no lab.json (a first one, or envtest's, which starts anew) is
//! undone by the provider's down plan, made from what the steps it
//! completed recorded; one killed leaves that for `lab down`. A failed
//! update of a lab that is up (kind, existing) is not undone.

use std::process::ExitCode;

use anyhow::{Result, anyhow, bail};

use crate::interrupt::Interrupts;
use crate::lab::{UpOptions, providers};
use labkit::lab_file::{ControllerRuns, LabFile};
use labkit::project::shown;
use labkit::record::Record;
use labkit::tr;

pub async fn run(name: &str, options: &UpOptions) -> Result<ExitCode> {
    let provider = providers::resolve(&options.provider)?;
    options.check_for(provider.flags())?;
    if options.dry_run {
        provider.up(name, options).await?;
        return Ok(ExitCode::SUCCESS);
    }
    labkit::test_hook::at("lab up:locked")?;
    let state_dir = labkit::project::lab_dir(name);
    crate::borrow::put_back_if_left(name).await?;
    // lab.json's provider, or the record's of an `up` that did not finish: an
    // `up` of another provider would clean the folder and lose what it names.
    if let Some(there) = providers::name_of_lab(name)?
        && there != provider.name()
    {
        bail!(tr!(
            "lab {name} is on provider {there}: `cargo xtask lab down --name {name}` first, or use another --name",
            name,
            there
        ));
    }
    let mut signals = Interrupts::catch(&state_dir.join("hangup.log"))?;
    let result = tokio::select! {
        result = provider.up(name, options) => result,
        () = signals.first("lab up") => Err(anyhow!(tr!("interrupted"))),
    };
    match result {
        Ok(Some(lab)) => print_how_to_use(&lab),
        Ok(None) => bail!(tr!("lab up finished without writing lab.json")),
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
    let again = tr!(
        "`cargo xtask lab down --name {name}` removes what {path} names",
        name,
        path = shown(&record)
    );
    let said = again.clone();
    signals.further(move |signal| {
        eprintln!("{}", tr!("{signal}: given up undoing; {again}", signal, again = said));
        std::process::exit(130);
    });
    eprintln!("{}", tr!("lab up did not finish: undoing what it made"));
    if let Err(error) = super::down::run(name, false).await {
        let error = format!("{error:#}");
        eprintln!("{}", tr!("warning: the undo failed: {error}; {again}", error, again));
    }
}

fn print_how_to_use(lab: &LabFile) {
    // One line a label: the label in the reader's language, the value (a
    // command among them) as it is typed.
    let row =
        |label: String, value: String| println!("  {}{value}", labkit::say::padded(&label, 17));
    let name = &lab.name;
    println!();
    row(tr!("lab file:"), LabFile::path(&lab.state_dir).display().to_string());
    row(tr!("API server:"), format!("{} ({})", lab.api_server_url, lab.kubernetes_version));
    if let ControllerRuns::Deployment(_) = lab.controller_runs() {
        let deployment = format!("deployment/{}", super::kind::DEPLOYMENT);
        row(tr!("controller:"), tr!("{deployment} in {name}", deployment, name));
    } else {
        row(tr!("controller:"), format!("{} (/healthz /readyz /metrics)", lab.controller.url));
    }
    if let Some(existing) = &lab.existing {
        let (namespace, context) = (&existing.namespace, &existing.context);
        row(tr!("namespace:"), tr!("{namespace} (context {context})", namespace, context));
        row(tr!("image:"), existing.controller_image.clone());
    }
    // A command as typed, after `$ `, as the kit echoes the ones it runs.
    row(tr!("admin:"), format!("$ export KUBECONFIG={}", lab.admin_kubeconfig.display()));
    row(tr!("a new terminal:"), format!("$ eval \"$(cargo xtask lab env --name {name})\""));
    row(tr!("controller log:"), format!("$ cargo xtask lab logs -f --name {name}"));
    row(tr!("experiments:"), format!("$ cargo xtask e2e --name {name}"));
    row(tr!("stop:"), format!("$ cargo xtask lab down --name {name}"));
}
