//! The controller in an envtest lab: a process with its own ServiceAccount identity (never
//! the admin's, so missing RBAC shows up in the lab as it would in a cluster).

use std::net::SocketAddr;
use std::path::Path;

/// The ServiceAccount manifests/rbac.yaml creates for it.
pub const SERVICE_ACCOUNT_NAMESPACE: &str = "default";
pub const SERVICE_ACCOUNT: &str = "my-controller";
/// 48 hours: longer than a lab lives. The token sits in a kubeconfig that is read once at
/// start, so it is not refreshed; kube-apiserver runs with
/// `--service-account-max-token-expiration` of at least this so it is not cut short.
pub const TOKEN_SECONDS: i64 = 48 * 3600;

/// The arguments the controller is started with (recorded in lab.json for restarts).
pub fn args(kubeconfig: &Path, listen: SocketAddr) -> Vec<String> {
    vec![
        "--kubeconfig".to_string(),
        kubeconfig.display().to_string(),
        "--listen".to_string(),
        listen.to_string(),
    ]
}
