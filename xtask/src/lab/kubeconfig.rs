//! The lab's kubeconfig files, and kube clients made from them.
//!
//! The files are self-contained (certificates and keys embedded as base64), so they keep
//! working when copied elsewhere; `kubectl --kubeconfig <file>` reads them as they are.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use kube::config::Kubeconfig;
use serde_json::{Value, json};

use labkit::{files, tr};

/// Write a one-cluster, one-user, one-context kubeconfig, owner-readable only. `user_entry`:
/// who it speaks as, a client certificate and its key ([`client_certificate`]) or a bearer
/// token (`{"token": …}`, a ServiceAccount's from the TokenRequest API).
pub fn write(
    path: &Path,
    lab_name: &str,
    server: &str,
    ca_pem: &str,
    user: &str,
    user_entry: Value,
) -> Result<()> {
    let context = format!("{user}@{lab_name}");
    let config: Value = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{
            "name": lab_name,
            "cluster": {
                "server": server,
                "certificate-authority-data": STANDARD.encode(ca_pem),
            },
        }],
        "users": [{ "name": user, "user": user_entry }],
        "contexts": [{
            "name": context,
            "context": { "cluster": lab_name, "user": user, "namespace": "default" },
        }],
        "current-context": context,
    });
    let yaml = serde_saphyr::to_string(&config)
        .with_context(|| tr!("cannot render kubeconfig as YAML"))?;
    files::write_private(path, yaml)
}

/// A user entry speaking with a client certificate and its private key (PEM), embedded.
pub fn client_certificate(cert_pem: &str, key_pem: &str) -> Value {
    json!({
        "client-certificate-data": STANDARD.encode(cert_pem),
        "client-key-data": STANDARD.encode(key_pem),
    })
}

/// A client for the kubeconfig at `path`, as any kube-rs program would make it.
pub async fn client(path: &Path) -> Result<kube::Client> {
    client_with(path, |_| {}).await
}

/// A client for readiness probes: it fails fast and does not retry on its own, so each poll
/// reports what the server said right then.
pub async fn probe_client(path: &Path) -> Result<kube::Client> {
    client_with(path, |config| {
        config.connect_timeout = Some(Duration::from_secs(1));
        config.read_timeout = Some(Duration::from_secs(2));
        config.default_retry = false;
    })
    .await
}

async fn client_with(path: &Path, adjust: impl FnOnce(&mut kube::Config)) -> Result<kube::Client> {
    let kubeconfig = Kubeconfig::read_from(path)
        .with_context(|| tr!("cannot read kubeconfig {path}", path = path.display()))?;
    labkit::lab::client_of(kubeconfig, adjust)
        .await
        .with_context(|| tr!("cannot use kubeconfig {path}", path = path.display()))
}
