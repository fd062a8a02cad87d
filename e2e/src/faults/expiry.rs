//! Credentials that expire: a kubeconfig whose exec plugin hands out a
//! client certificate valid for seconds. kube runs the plugin once and never
//! renews such a certificate, so the controller stops shortly before it
//! expires, exits non-zero and one line says why — a restart (the pod's)
//! runs the plugin again — rather than fail every request while `/healthz`
//! says 200.

use std::time::Duration;

use anyhow::{Context as _, ensure};
use controller::runner::LOG_CREDENTIALS_EXPIRE;
use k8s_openapi::{
    api::rbac::v1::RoleBinding,
    jiff::{SignedDuration, Timestamp},
};
use kube::{
    Api,
    api::{DeleteParams, Patch, PatchParams},
    config::Kubeconfig,
};
use serde_json::json;

use super::{heal_after_delete, lifecycle::spawn_command_ready, ms, secs, then_restore};
use labkit::files;
use labkit::{lab::Lab, pki, suite::Measured, tr};

/// The certificate's life: long enough to start, heal and be seen running.
const VALID_FOR: Duration = Duration::from_secs(15);
/// The user its certificate names, bound to the controller's Role for the test.
const USER: &str = "e2e-expiring";
/// The exit status for expiring credentials (controller/src/main.rs).
const EXPIRES: i32 = 3;

pub async fn exits_before_credentials_expire(lab: &mut Lab) -> anyhow::Result<Measured> {
    let bindings: Api<RoleBinding> = Api::namespaced(lab.client(), lab.desired().namespace());
    let result = run_until_expiry(lab, &bindings).await;
    let _ = bindings.delete(USER, &DeleteParams::default()).await;
    then_restore(lab, result).await
}

async fn run_until_expiry(lab: &mut Lab, bindings: &Api<RoleBinding>) -> anyhow::Result<Measured> {
    let (role_namespace, role) = super::rbac::service_account(lab)?;
    let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": USER, "namespace": role_namespace},
        "subjects": [{"kind": "User", "name": USER, "apiGroup": "rbac.authorization.k8s.io"}],
        "roleRef": {"kind": "Role", "name": role, "apiGroup": "rbac.authorization.k8s.io"}});
    bindings.patch(USER, &PatchParams::apply("e2e-fault").force(), &Patch::Apply(&binding)).await?;
    let (kubeconfig, expires) = exec_kubeconfig(lab)?;
    lab.stop_controller().await?;
    let kubeconfig = kubeconfig.display().to_string();
    let listen = lab.file().controller.url.trim_start_matches("http://").to_string();
    let cmd = super::host_controller()?.args(["--kubeconfig", &kubeconfig, "--listen", &listen]);
    let mut child = spawn_command_ready(lab, cmd).await?;
    let healed = heal_after_delete(lab).await?;
    let status = tokio::time::timeout(VALID_FOR + Duration::from_secs(10), child.wait())
        .await
        .with_context(|| tr!("still running after its credentials expired"))??;
    let stopped_at = Timestamp::now();
    ensure!(
        status.code() == Some(EXPIRES),
        tr!("it exited {status}, not with status {code}", status, code = EXPIRES)
    );
    let before = expires.duration_since(stopped_at);
    ensure!(
        before > SignedDuration::ZERO,
        tr!("it stopped {before} after its certificate expired", before)
    );
    let log = std::fs::read_to_string(&lab.file().controller.log)?;
    ensure!(log.contains(LOG_CREDENTIALS_EXPIRE), tr!("no line says why it stopped"));
    let before = Duration::try_from(before).unwrap_or_default();
    Ok(Measured::took(
        before,
        tr!(
            "exec plugin's client certificate valid {valid}: healed a delete in {healed}, then exited \
             {code} {before} before it expired, one line saying why",
            valid = secs(VALID_FOR),
            healed = ms(healed),
            code = EXPIRES,
            before = secs(before)
        ),
    ))
}

/// A kubeconfig for the lab whose user is an exec plugin printing a client
/// certificate valid for [`VALID_FOR`]; its path and the expiry.
fn exec_kubeconfig(lab: &Lab) -> anyhow::Result<(std::path::PathBuf, Timestamp)> {
    let dir = lab.file().state_dir.join("expiring");
    std::fs::create_dir_all(&dir)?;
    let issuer = pki::lab_issuer(&lab.file().state_dir.join("pki"))?;
    let not_after = time::OffsetDateTime::now_utc() + VALID_FOR;
    let (cert, key) = pki::client_certificate(&issuer, USER, not_after)?;
    let expires = Timestamp::from_second(not_after.unix_timestamp())?;
    let credential = json!({"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
        "status": {"clientCertificateData": cert, "clientKeyData": key,
                   "expirationTimestamp": expires.to_string()}});
    let credential_path = dir.join("credential.json");
    files::write_private(&credential_path, serde_json::to_vec(&credential)?)?;
    let plugin = dir.join("plugin.sh");
    std::fs::write(&plugin, format!("#!/bin/sh\nexec cat '{}'\n", credential_path.display()))?;
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&plugin, std::fs::Permissions::from_mode(0o700))?;
    let mut kubeconfig = Kubeconfig::read_from(&lab.file().admin_kubeconfig)?;
    for user in &mut kubeconfig.auth_infos {
        user.auth_info = Some(serde_json::from_value(json!({"exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": plugin.display().to_string(),
            "interactiveMode": "Never"}}))?);
    }
    let path = dir.join("kubeconfig");
    files::write_private(&path, serde_saphyr::to_string(&kubeconfig)?)?;
    Ok((path, expires))
}
