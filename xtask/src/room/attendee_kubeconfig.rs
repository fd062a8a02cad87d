//! An attendee's kubeconfig: the instructor's cluster entry with its CA
//! carried inline (`certificate-authority-data`: the file goes to another
//! laptop, where the instructor's CA file is not), the attendee's token as
//! its one user, one context named after the namespace and set to it.

use anyhow::{Context as _, Result};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use kube::config::Kubeconfig;
use labkit::tr;

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
}
