//! An attendee's kubeconfig: the instructor's cluster entry with its CA
//! carried inline (`certificate-authority-data`: the file goes to another
//! laptop, where the instructor's CA file is not), the attendee's token as
//! its one user, one context named after the namespace and set to it.

use std::path::Path;

use anyhow::{Context as _, Result};
use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use kube::config::Kubeconfig;
use labkit::tr;

/// The shortest token the API server issues (TokenRequest's minimum).
const SHORTEST_TOKEN: i64 = 600;

pub fn for_attendee(instructor: &Kubeconfig, namespace: &str, token: &str) -> Result<Kubeconfig> {
    let mut config = labkit::accounts::with_token(instructor.clone(), token);
    for named in &mut config.clusters {
        if let Some(cluster) = named.cluster.as_mut() {
            // kube-rs made the path absolute when it read the instructor's file.
            if let Some(path) = cluster.certificate_authority.take() {
                let pem = std::fs::read(&path)
                    .with_context(|| tr!("cannot read the cluster's CA file {path}", path))?;
                cluster.certificate_authority_data = Some(STANDARD.encode(pem));
            }
        }
    }
    for user in &mut config.auth_infos {
        user.name = namespace.to_string();
    }
    for named in &mut config.contexts {
        named.name = namespace.to_string();
        if let Some(context) = named.context.as_mut() {
            context.user = Some(namespace.to_string());
            context.namespace = Some(namespace.to_string());
        }
    }
    config.current_context = Some(namespace.to_string());
    Ok(config)
}

/// `seconds`, or less when the kubeconfig at `path` holds a token (a JWT)
/// that ends sooner: a token minted with it need not outlive it, and in a
/// room may not outlive the room's own ([`super::guard`]).
pub fn token_seconds_within(path: &Path, seconds: i64) -> i64 {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let config: serde_json::Value = serde_saphyr::from_str(&text).unwrap_or_default();
    let expires = config["users"][0]["user"]["token"].as_str().and_then(expiry);
    let left = |expires: i64| expires - k8s_openapi::jiff::Timestamp::now().as_second();
    expires.map_or(seconds, |expires| seconds.min(left(expires).max(SHORTEST_TOKEN)))
}

/// A JWT's `exp` claim (seconds since the epoch); nothing is verified.
fn expiry(token: &str) -> Option<i64> {
    let payload = URL_SAFE_NO_PAD.decode(token.split('.').nth(1)?).ok()?;
    serde_json::from_slice::<serde_json::Value>(&payload).ok()?["exp"].as_i64()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ca_file_is_carried_inline() {
        let dir = std::env::temp_dir().join(format!("room-kubeconfig-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("ca.crt"), "-----BEGIN CERTIFICATE-----\nx\n").unwrap();
        let text = "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:6443\n    certificate-authority: ca.crt\nusers:\n- name: admin\n  user:\n    token: t\ncontexts:\n- name: ctx\n  context:\n    cluster: c\n    user: admin\ncurrent-context: ctx\n";
        std::fs::write(dir.join("kubeconfig"), text).unwrap();
        let instructor = Kubeconfig::read_from(dir.join("kubeconfig")).unwrap();
        let config = for_attendee(&instructor, "attendee-01", "secret").unwrap();
        let cluster = config.clusters[0].cluster.as_ref().unwrap();
        assert_eq!(cluster.certificate_authority, None);
        let pem = STANDARD.decode(cluster.certificate_authority_data.as_ref().unwrap()).unwrap();
        assert!(pem.starts_with(b"-----BEGIN CERTIFICATE-----"));
        assert_eq!(config.current_context.as_deref(), Some("attendee-01"));
        let user = config.auth_infos[0].auth_info.as_ref().unwrap();
        assert!(user.token.is_some() && user.client_certificate.is_none());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_jwts_expiry_is_read_from_its_payload() {
        let payload = URL_SAFE_NO_PAD.encode(r#"{"exp":1767225600,"sub":"x"}"#);
        assert_eq!(expiry(&format!("e30.{payload}.c2ln")), Some(1767225600));
        assert_eq!(expiry("not-a-jwt"), None);
    }
}
