//! The version rule (the course's version-matching check), against the
//! server, kubectl and the kind node images.

use anyhow::{Context as _, bail, ensure};
use controller::version::{self, Skew};
use labkit::{tools::kubectl_client_minor, tr};

use kube::{Api, api::ListParams};

use super::*;

/// The version rule: the API server's minor against the minor k8s-openapi was
/// compiled for (equal passes, ±1 passes with a warning, further fails);
/// kubectl's client against the server (a warning only); every kind node image
/// of `kind/node-images.toml`, and on a kind lab the node's kubelet, against
/// the compiled minor.
pub async fn version_matching(lab: &mut Lab) -> anyhow::Result<Measured> {
    let mut warnings = Vec::new();
    let client_minor = version::target_minor();
    let info = lab.client().apiserver_version().await?;
    let server_minor = version::parse_minor(&info.minor).with_context(|| {
        tr!("cannot read the server's minor from {info}", info = format!("{info:?}"))
    })?;
    let skew = Skew::between(client_minor, server_minor);
    match skew {
        Skew::Same => {}
        // Warnings are passed on to a narration (`cargo xtask exp`): in its language. The
        // English is the skew's own (controller::version::Skew's Display).
        Skew::OneApart { client, server } => warnings.push(tr!(
            "client built for 1.{client}, server is 1.{server}: one minor apart is allowed",
            client,
            server
        )),
        Skew::TooFar { client, server } => bail!(tr!(
            "client built for 1.{client}, server is 1.{server}: more than one minor apart; \
             use a 1.{client} cluster, or rebuild with k8s-openapi's v1_{server} feature",
            client,
            server
        )),
    }
    if let Some(kubectl) = kubectl_client_minor() {
        let kubectl_skew = Skew::between(kubectl, server_minor);
        if kubectl_skew != Skew::Same {
            let note = match kubectl_skew.is_supported() {
                true => String::new(),
                false => tr!(" (kubectl supports ±1)"),
            };
            warnings.push(tr!(
                "kubectl is 1.{kubectl}, the server 1.{server}{note}: use the kubectl \
                 from `nix develop`",
                kubectl,
                server = server_minor,
                note
            ));
        }
    }
    let node = node_images(lab, client_minor).await?;
    let detail = tr!(
        "server {server} ↔ built for {built_for} ↔ {node}",
        server = info.git_version,
        built_for = version::target(),
        node
    );
    Ok(Measured { warnings, ..Measured::said(detail) })
}

/// The kind node images (on a kind lab, the kubelets too) against `client_minor`: the node part.
async fn node_images(lab: &Lab, client_minor: u32) -> anyhow::Result<String> {
    let table = labkit::kind_releases::table()?;
    for row in &table {
        let minor = labkit::kind_releases::image_minor(&row.image);
        ensure!(
            minor == Some(client_minor),
            tr!(
                "{file}: kind {kind} runs {image}, the kit is built for 1.{minor}: \
                 give that row a kindest/node:v1.{minor}.x image",
                file = labkit::kind_releases::FILE,
                kind = row.kind,
                image = row.image,
                minor = client_minor
            )
        );
    }
    let releases: Vec<&str> = table.iter().map(|r| r.kind.as_str()).collect();
    let mut node = tr!(
        "kind node images 1.{minor} for kind {releases}",
        minor = client_minor,
        releases = releases.join(", ")
    );
    if lab.file().kind.is_some() {
        // What the kubelet itself reports.
        let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(lab.client());
        for n in nodes.list(&ListParams::default()).await? {
            let kubelet =
                n.status.and_then(|s| s.node_info).map(|i| i.kubelet_version).unwrap_or_default();
            let minor = version::parse_minor(
                kubelet.trim_start_matches('v').split('.').nth(1).unwrap_or(""),
            );
            ensure!(
                minor == Some(client_minor),
                tr!(
                    "node {name} runs kubelet {kubelet}, the kit is built for 1.{minor}",
                    name = n.metadata.name.unwrap_or_default(),
                    kubelet,
                    minor = client_minor
                )
            );
            node = tr!("kubelet {kubelet}; {node}", kubelet, node);
        }
    }
    Ok(node)
}
