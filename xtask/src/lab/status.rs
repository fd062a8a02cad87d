//! `lab status`: what runs, where, which versions, whether it is ready; as
//! lines, or as one JSON document (`-o json`, docs/output.md).

use std::process::ExitCode;

use anyhow::Result;
use serde_json::json;

use crate::lab::{provider::Health, providers};
use crate::output::{self, Format};
use labkit::lab_file::{ControllerRuns, LabFile};
use labkit::tr;

/// The JSON document's name and version (docs/output.md).
const SCHEMA: &str = "lab-kit/lab-status/v1";

pub async fn run(name: &str, format: Format) -> Result<ExitCode> {
    let dir = labkit::project::lab_dir(name);
    let Some(lab) = LabFile::read(&dir)? else {
        let (state, text) = if dir.exists() {
            let text = tr!(
                "lab {name}: incomplete (no lab.json in {path}): an interrupted or failed `lab up`; \
                 `cargo xtask lab down --name {name}` cleans it up",
                name,
                path = dir.display()
            );
            ("incomplete", text)
        } else {
            (
                "absent",
                tr!("lab {name}: not up (`cargo xtask lab up --name {name}` starts it)", name),
            )
        };
        match format {
            Format::Text => println!("{text}"),
            Format::Json => output::print_json(&document(name, state, &dir, None))?,
        }
        return Ok(ExitCode::FAILURE);
    };
    let health = providers::named(&lab.provider)?.status(&lab).await?;
    match format {
        Format::Text => print_text(&lab, &health),
        Format::Json => {
            output::print_json(&document(name, "up", &lab.state_dir, Some((&lab, &health))))?
        }
    }
    Ok(if health.healthy { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

fn print_text(lab: &LabFile, health: &Health) {
    let name = &lab.name;
    // A lab of processes is started anew by `lab up`; one of a Deployment is repaired.
    let processes = matches!(lab.controller_runs(), ControllerRuns::Process(_));
    let (provider, path) = (&lab.provider, lab.state_dir.display());
    println!("{}", tr!("lab {name} ({provider}) in {path}", name, provider, path));
    for line in &health.lines {
        println!("  {line}");
    }
    let row =
        |label: String, value: String| println!("  {}{value}", labkit::say::padded(&label, 23));
    row(tr!("admin kubeconfig:"), lab.admin_kubeconfig.display().to_string());
    if processes {
        let controller = &lab.controller;
        let kubeconfig = tr!(
            "{path} (ServiceAccount {account}, token expires {expires})",
            path = controller.kubeconfig.display(),
            account = controller.service_account,
            expires = controller.token_expires
        );
        row(tr!("controller kubeconfig:"), kubeconfig);
        row(tr!("controller log:"), controller.log.display().to_string());
    }
    if health.healthy {
        println!("{}", tr!("healthy"));
    } else if processes {
        println!("{}", tr!("NOT healthy: `cargo xtask lab up --name {name}` starts it anew", name));
    } else {
        println!(
            "{}",
            tr!(
                "NOT healthy: `cargo xtask lab up --name {name} --provider {provider}` repairs it",
                name,
                provider
            )
        );
    }
}

/// `lab status -o json`: of a lab that is up (healthy or not), or of one that
/// is not, whose `state` says why (`absent`, `incomplete`) and whose other
/// fields are null.
fn document(
    name: &str,
    state: &str,
    dir: &std::path::Path,
    up: Option<(&LabFile, &Health)>,
) -> serde_json::Value {
    let lab = up.map(|(lab, _)| lab);
    json!({
        "schema": SCHEMA,
        "name": name,
        "state": state,
        "healthy": up.is_some_and(|(_, health)| health.healthy),
        "provider": lab.map(|lab| &lab.provider),
        "state_dir": dir.display().to_string(),
        "parts": up.map_or(&[][..], |(_, health)| &health.lines[..]),
        "api_server": lab.map(|lab| &lab.api_server_url),
        "kubernetes_version": lab.map(|lab| &lab.kubernetes_version),
        "admin_kubeconfig": lab.map(|lab| lab.admin_kubeconfig.display().to_string()),
        "controller": lab.map(|lab| json!({
            "kubeconfig": lab.controller.kubeconfig.display().to_string(),
            "service_account": lab.controller.service_account,
            "token_expires": lab.controller.token_expires,
            "log": lab.controller.log.display().to_string(),
        })),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A lab that is up is checked against the page by the lab test
    /// (xtask/tests/envtest_lab.rs); this is the document of one that is not.
    #[test]
    fn the_document_of_an_absent_lab_has_the_documented_fields() {
        let document =
            document("nolab", "absent", std::path::Path::new("/x/target/lab/nolab"), None);
        labkit::json_doc::assert_documented(&document);
        assert_eq!(document["state"], "absent");
    }
}
