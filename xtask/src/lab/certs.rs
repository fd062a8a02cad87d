//! The lab's PKI, made with rcgen (no openssl): a CA, kube-apiserver's serving certificate,
//! the admin's client certificate, and the ServiceAccount token signing key.
//!
//! Keys are ECDSA P-256 (PKCS#8 PEM): Go's TLS stack, kube-apiserver's
//! `--service-account-*-key-file` (ES256 tokens) and rustls all take them, and they are
//! generated in microseconds where RSA would cost a noticeable part of the cold start.
//! Validity is rcgen's default (1975–4096): the CA lives and dies with one lab.

use std::path::Path;

use anyhow::{Context, Result};
use rcgen::{CertificateParams, ExtendedKeyUsagePurpose, Issuer, KeyPair, KeyUsagePurpose};

use labkit::{pki, tr};

use labkit::files::{write_private, write_public};

/// The admin identity: `system:masters` is bound to cluster-admin by the default RBAC policy.
pub const ADMIN_USER: &str = "lab-admin";
const ADMIN_GROUP: &str = "system:masters";

/// Names kube-apiserver is reached by: loopback for us, the in-cluster names and the first
/// address of `--service-cluster-ip-range` (the `kubernetes` Service) for anything that
/// follows in-cluster conventions.
pub const SERVING_NAMES: &[&str] = &[
    "127.0.0.1",
    "::1",
    "localhost",
    "10.0.0.1",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
];

/// The PEM the kubeconfigs embed; the files are `ca.crt`, `apiserver.{crt,key}`,
/// `sa.{key,pub}` (the ServiceAccount token signing key), `admin.{crt,key}` and `ca.key`.
#[derive(Clone)]
pub struct Pki {
    pub ca_pem: String,
    pub admin_cert_pem: String,
    pub admin_key_pem: String,
}

/// Generate everything into `dir` (private keys 0600).
pub fn generate(dir: &Path) -> Result<Pki> {
    labkit::files::create_dir(dir)?;

    let ca_key = KeyPair::generate().with_context(|| tr!("CA key"))?;
    let ca_params = pki::ca_params();
    let ca_cert = ca_params.self_signed(&ca_key).with_context(|| tr!("CA certificate"))?;
    let ca = Issuer::new(ca_params, ca_key);

    let serving_key = KeyPair::generate().with_context(|| tr!("serving key"))?;
    let names: Vec<String> = SERVING_NAMES.iter().map(|name| name.to_string()).collect();
    let mut serving =
        CertificateParams::new(names).with_context(|| tr!("serving certificate names"))?;
    serving.distinguished_name = pki::name("kube-apiserver", None);
    serving.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
    // Client use too: etcd serves with it, and its JSON gateway dials etcd's gRPC with it.
    serving.extended_key_usages =
        vec![ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth];
    serving.use_authority_key_identifier_extension = true;
    let serving_cert =
        serving.signed_by(&serving_key, &ca).with_context(|| tr!("serving certificate"))?;

    let admin_key = KeyPair::generate().with_context(|| tr!("admin key"))?;
    let admin = pki::client_params(ADMIN_USER, Some(ADMIN_GROUP));
    let admin_cert = admin.signed_by(&admin_key, &ca).with_context(|| tr!("admin certificate"))?;

    let service_account = KeyPair::generate().with_context(|| tr!("service account key"))?;

    let pki = Pki {
        ca_pem: ca_cert.pem(),
        admin_cert_pem: admin_cert.pem(),
        admin_key_pem: admin_key.serialize_pem(),
    };
    write_public(&dir.join("ca.crt"), &pki.ca_pem)?;
    // The CA key is kept (0600) so a person can mint more identities for experiments.
    write_private(&dir.join("ca.key"), ca.key().serialize_pem())?;
    write_public(&dir.join("apiserver.crt"), serving_cert.pem())?;
    write_private(&dir.join("apiserver.key"), serving_key.serialize_pem())?;
    write_public(&dir.join("admin.crt"), &pki.admin_cert_pem)?;
    write_private(&dir.join("admin.key"), &pki.admin_key_pem)?;
    write_private(&dir.join("sa.key"), service_account.serialize_pem())?;
    write_public(&dir.join("sa.pub"), service_account.public_key_pem())?;
    Ok(pki)
}

/// etcd's flags for the files [`generate`] wrote into `dir`: it serves with the
/// API server's certificate (loopback is among its names) and answers only a
/// client, or peer, with a certificate of the lab's CA.
pub fn etcd_flags(dir: &Path) -> Vec<String> {
    let file = |name: &str| dir.join(name).display().to_string();
    let mut flags = Vec::new();
    for side in ["", "peer-"] {
        flags.push(format!("--{side}cert-file={}", file("apiserver.crt")));
        flags.push(format!("--{side}key-file={}", file("apiserver.key")));
        flags.push(format!("--{side}client-cert-auth=true"));
        flags.push(format!("--{side}trusted-ca-file={}", file("ca.crt")));
    }
    flags
}

/// kube-apiserver's flags for the files [`generate`] wrote into `dir`: its etcd
/// client certificate is the admin's.
pub fn api_server_flags(dir: &Path) -> [String; 8] {
    let file = |name: &str| dir.join(name).display().to_string();
    [
        format!("--etcd-cafile={}", file("ca.crt")),
        format!("--etcd-certfile={}", file("admin.crt")),
        format!("--etcd-keyfile={}", file("admin.key")),
        format!("--tls-cert-file={}", file("apiserver.crt")),
        format!("--tls-private-key-file={}", file("apiserver.key")),
        format!("--client-ca-file={}", file("ca.crt")),
        format!("--service-account-key-file={}", file("sa.pub")),
        format!("--service-account-signing-key-file={}", file("sa.key")),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_private_keys_owner_only() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("xtask-pki-test-{}", std::process::id()));
        let pki = generate(&dir).unwrap();
        for key in ["ca.key", "apiserver.key", "admin.key", "sa.key"] {
            let mode = std::fs::metadata(dir.join(key)).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600, "{key}");
        }
        assert!(pki.ca_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(pki.admin_key_pem.contains("PRIVATE KEY"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
