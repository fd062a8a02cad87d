//! ServiceAccount credentials for what must act as a ServiceAccount, not as
//! the admin: a token from the TokenRequest API (labs have no legacy token
//! Secrets), and the lab's admin kubeconfig with that token as its user.

use anyhow::{Context as _, Result};
use k8s_openapi::api::{
    authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec},
    authorization::v1::ResourceAttributes,
    core::v1::ServiceAccount,
};
use kube::{
    Api, Client,
    api::PostParams,
    config::{AuthInfo, Kubeconfig},
};

use crate::{lab_file::LabFile, tr};

/// A token of ServiceAccount `namespace/name`, valid `seconds`, for the API
/// server's own audience; with when it expires (RFC 3339). Bound to the Secret
/// `secret` (its name and uid) when given: the API server refuses the token
/// once that Secret is deleted (or made again with another uid).
pub async fn token(
    admin: &Client,
    namespace: &str,
    name: &str,
    seconds: i64,
    secret: Option<(&str, &str)>,
) -> Result<(String, String)> {
    let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), namespace);
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            expiration_seconds: Some(seconds),
            bound_object_ref: secret.map(|(secret, uid)| BoundObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Secret".into()),
                name: Some(secret.into()),
                uid: Some(uid.into()),
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    let granted =
        accounts.create_token_request(name, &PostParams::default(), &request).await.with_context(
            || tr!("TokenRequest for ServiceAccount {namespace}/{name}", namespace, name),
        )?;
    let status = granted.status.with_context(|| tr!("TokenRequest answered without a status"))?;
    let token = status
        .token
        .filter(|t| !t.is_empty())
        .with_context(|| tr!("TokenRequest answered without a token"))?;
    let expires = status.expiration_timestamp.map(|time| time.0.to_string()).unwrap_or_default();
    Ok((token, expires))
}

/// The lab's admin kubeconfig (its cluster and CA) with every user replaced
/// by `token`.
pub fn kubeconfig_with_token(lab: &LabFile, token: &str) -> Result<Kubeconfig> {
    Ok(with_token(Kubeconfig::read_from(&lab.admin_kubeconfig)?, token))
}

/// `kubeconfig` (its clusters and CAs) with every user replaced by `token`.
pub fn with_token(mut kubeconfig: Kubeconfig, token: &str) -> Kubeconfig {
    for user in &mut kubeconfig.auth_infos {
        user.auth_info =
            Some(AuthInfo { token: Some(token.to_string().into()), ..Default::default() });
    }
    kubeconfig
}

/// What an access review asks: `verb` on `resource` of API `group`, in namespace `ns` (in all
/// namespaces, or of a cluster-wide resource, without one).
pub fn access(group: &str, resource: &str, verb: &str, ns: Option<&str>) -> ResourceAttributes {
    ResourceAttributes {
        group: Some(group.into()),
        resource: Some(resource.into()),
        verb: Some(verb.into()),
        namespace: ns.map(Into::into),
        ..ResourceAttributes::default()
    }
}
