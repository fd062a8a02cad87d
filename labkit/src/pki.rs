//! The envtest lab's PKI (rcgen, no openssl): its CA, and client
//! certificates signed by it. `cargo xtask lab up` makes the CA
//! (xtask/src/lab/certs.rs); the faults mint identities with it — one whose
//! certificate expires within seconds, say.

use std::path::Path;

use anyhow::Context as _;

use crate::tr;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};

/// The CA's name and uses; the same each time, so that the CA can be
/// recreated from its key to sign more (its certificate is not parsed).
pub fn ca_params() -> CertificateParams {
    let mut params = CertificateParams::default();
    params.distinguished_name = name("lab-ca", None);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    params
}

/// A client certificate's parameters: the user is the CN, the group the O.
pub fn client_params(user: &str, group: Option<&str>) -> CertificateParams {
    let mut params = CertificateParams::default();
    params.distinguished_name = name(user, group);
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    params.use_authority_key_identifier_extension = true;
    params
}

/// The lab's CA, from its key in `pki_dir` (`ca.key`).
pub fn lab_issuer(pki_dir: &Path) -> anyhow::Result<Issuer<'static, KeyPair>> {
    let path = pki_dir.join("ca.key");
    let key =
        KeyPair::from_pem(&crate::files::read(&path)?).with_context(|| tr!("the lab's CA key"))?;
    Ok(Issuer::new(ca_params(), key))
}

/// A client certificate for `user` valid until `not_after`, signed by
/// `issuer`: its certificate and key, as PEM.
pub fn client_certificate(
    issuer: &Issuer<'_, KeyPair>,
    user: &str,
    not_after: time::OffsetDateTime,
) -> anyhow::Result<(String, String)> {
    let key = KeyPair::generate().with_context(|| tr!("a client key"))?;
    let mut params = client_params(user, None);
    params.not_before = time::OffsetDateTime::now_utc() - time::Duration::minutes(1);
    params.not_after = not_after;
    let cert = params.signed_by(&key, issuer).with_context(|| tr!("a client certificate"))?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// CN (user name for client certificates) and O (group).
pub fn name(common_name: &str, organization: Option<&str>) -> DistinguishedName {
    let mut name = DistinguishedName::new();
    name.push(DnType::CommonName, common_name);
    if let Some(organization) = organization {
        name.push(DnType::OrganizationName, organization);
    }
    name
}
