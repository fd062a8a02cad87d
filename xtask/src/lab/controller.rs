//! The controller as a local process: built by cargo, given its own ServiceAccount identity
//! (never the admin's, so missing RBAC shows up in the lab as it would in a cluster), started
//! detached, and waited for until its `/readyz` says 200.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, anyhow};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, PostParams};
use xshell::Shell;

use crate::cmdline;
use crate::wait::{self, Seen};
use e2e::process::{self, Spawned};
use e2e::{http_probe, project};

pub const PACKAGE: &str = "controller";
pub const BINARY: &str = "my-controller";
/// The ServiceAccount manifests/rbac.yaml creates for it.
pub const SERVICE_ACCOUNT_NAMESPACE: &str = "default";
pub const SERVICE_ACCOUNT: &str = "my-controller";
/// 48 hours: longer than a lab lives. The token sits in a kubeconfig that is read once at
/// start, so it is not refreshed; kube-apiserver runs with
/// `--service-account-max-token-expiration` of at least this so it is not cut short.
pub const TOKEN_SECONDS: i64 = 48 * 3600;
const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// `cargo build -p controller --bin my-controller`; the binary's path.
pub fn build(sh: &Shell) -> Result<PathBuf> {
    let _root = sh.push_dir(project::root());
    let build = cmdline::cargo(sh, &["build", "-p", PACKAGE, "--bin", BINARY]);
    build.run().context("building the controller failed")?;
    let binary = project::target_dir().join("debug").join(BINARY);
    if !binary.is_file() {
        return Err(anyhow!(
            "cargo build succeeded but {} is missing",
            binary.display()
        ));
    }
    Ok(binary)
}

/// A token for the controller's ServiceAccount (TokenRequest API: with no
/// kube-controller-manager in the lab there are no legacy token Secrets).
/// Returns the token and when it expires (RFC 3339).
pub async fn request_token(admin: &kube::Client) -> Result<(String, String)> {
    let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), SERVICE_ACCOUNT_NAMESPACE);
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            // No audiences: the API server's own (its --service-account-issuer).
            expiration_seconds: Some(TOKEN_SECONDS),
            ..Default::default()
        }),
        ..Default::default()
    };
    let granted: TokenRequest = accounts
        .create_subresource("token", SERVICE_ACCOUNT, &PostParams::default(), &request)
        .await
        .with_context(|| {
            format!("TokenRequest for ServiceAccount {SERVICE_ACCOUNT_NAMESPACE}/{SERVICE_ACCOUNT}")
        })?;
    let status = granted
        .status
        .ok_or_else(|| anyhow!("TokenRequest answered without a status"))?;
    let token = status
        .token
        .filter(|token| !token.is_empty())
        .ok_or_else(|| anyhow!("TokenRequest answered without a token"))?;
    let expires = status
        .expiration_timestamp
        .map(|time| time.0.to_string())
        .unwrap_or_default();
    Ok((token, expires))
}

/// The arguments the controller is started with (recorded in lab.json for restarts).
pub fn args(kubeconfig: &Path, listen: SocketAddr) -> Vec<String> {
    vec![
        "--kubeconfig".to_string(),
        kubeconfig.display().to_string(),
        "--listen".to_string(),
        listen.to_string(),
    ]
}

pub fn start(binary: &Path, args: &[String], log: &Path, pid_file: &Path) -> Result<Spawned> {
    let mut command = std::process::Command::new(binary);
    command.args(args);
    process::spawn_detached("controller", command, log, pid_file)
}

/// Poll `/readyz` until 200; stop early, with its log, if the process exits.
pub async fn wait_ready(controller: &mut Spawned, listen: SocketAddr) -> Result<()> {
    let result = wait::until("controller /readyz", READY_TIMEOUT, || {
        let exited = controller.exited();
        let error = exited.map(|status| controller.died(status));
        async move {
            if let Some(error) = error {
                return Seen::Failed(error);
            }
            match http_probe::get(listen, "/readyz", Duration::from_secs(2)).await {
                Ok(reply) if reply.status == 200 => Seen::Ready(()),
                Ok(reply) => Seen::NotYet(format!("HTTP {} {}", reply.status, reply.body)),
                Err(error) => Seen::NotYet(format!("{error:#}")),
            }
        }
    })
    .await;
    result.map_err(|error| controller.with_log_tail(error))
}
