//! The version rule (the course's version-matching check), against the
//! server, kubectl and the kind node images.

use anyhow::{Context as _, bail, ensure};
use controller::version::{self, Skew};
use labkit::{say::pick, tools::kubectl_client_minor};

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
    let server_minor = version::parse_minor(&info.minor)
        .with_context(|| format!("cannot read the server's minor from {info:?}"))?;
    let skew = Skew::between(client_minor, server_minor);
    match skew {
        Skew::Same => {}
        // Warnings are passed on to a narration (`cargo xtask exp`): in its language.
        Skew::OneApart { client, server } => warnings.push(pick(
            skew.to_string(),
            format!("客户端为 1.{client} 编译，服务器是 1.{server}：差一个小版本，允许"),
        )),
        Skew::TooFar { .. } => bail!("{skew}"),
    }
    if let Some(kubectl) = kubectl_client_minor() {
        let kubectl_skew = Skew::between(kubectl, server_minor);
        if kubectl_skew != Skew::Same {
            let supported = kubectl_skew.is_supported();
            let note = if supported { "" } else { " (kubectl supports ±1)" };
            let zh_note = if supported { "" } else { "（kubectl 支持 ±1）" };
            warnings.push(pick(
                format!(
                    "kubectl is 1.{kubectl}, the server 1.{server_minor}{note}: use the kubectl \
                     from `nix develop`"
                ),
                format!(
                    "kubectl 是 1.{kubectl}，服务器是 1.{server_minor}{zh_note}：\
                     用 `nix develop` 里的 kubectl"
                ),
            ));
        }
    }
    let table = labkit::kind_releases::table()?;
    for row in &table {
        let minor = labkit::kind_releases::image_minor(&row.image);
        ensure!(
            minor == Some(client_minor),
            "{}: kind {} runs {}, the kit is built for 1.{client_minor}: \
             give that row a kindest/node:v1.{client_minor}.x image",
            labkit::kind_releases::FILE,
            row.kind,
            row.image
        );
    }
    let releases: Vec<&str> = table.iter().map(|r| r.kind.as_str()).collect();
    let mut node = format!("kind node images 1.{client_minor} for kind {}", releases.join(", "));
    if lab.file().kind().is_some() {
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
                "node {} runs kubelet {kubelet}, the kit is built for 1.{client_minor}",
                n.metadata.name.unwrap_or_default()
            );
            node = format!("kubelet {kubelet}; {node}");
        }
    }
    Ok(Measured {
        latency: None,
        detail: format!("server {} ↔ built for {} ↔ {node}", info.git_version, version::target()),
        warnings,
        values: Vec::new(),
    })
}
