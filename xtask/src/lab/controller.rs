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
    let build = cmdline::cargo(&["build", "-p", PACKAGE, "--bin", BINARY]);
    build.run().context("building the controller failed")?;
    let binary = project::target_dir().join("debug").join(BINARY);
    if !binary.is_file() {
        return Err(anyhow!("cargo build succeeded but {} is missing", binary.display()));
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
    let status = granted.status.ok_or_else(|| anyhow!("TokenRequest answered without a status"))?;
    let token = status
        .token
        .filter(|token| !token.is_empty())
        .ok_or_else(|| anyhow!("TokenRequest answered without a token"))?;
    let expires = status.expiration_timestamp.map(|time| time.0.to_string()).unwrap_or_default();
    Ok((token, expires))
}

/// `--controller`: where the envtest lab runs the controller.
#[derive(Clone, Copy, Debug)]
pub enum Host {
    Process,
    Container(crate::image::Builder),
}

/// How the envtest lab runs the controller: as a process (the default), or in
/// its image with exactly what a pod gets (`--controller container`).
#[derive(Clone, Debug)]
pub enum Launch {
    Process { binary: PathBuf },
    Container { image: String },
}

/// The name of a lab's controller container.
pub fn container_name(lab: &str) -> String {
    format!("{lab}-controller")
}

/// Where a pod finds its ServiceAccount credentials; the controller's in-cluster
/// configuration reads `token`, `ca.crt` and `namespace` there.
pub const SERVICE_ACCOUNT_MOUNT: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// Writes the files a pod's ServiceAccount volume holds. The token is 0600 and,
/// when xtask runs as root, owned by the image's user: the container reads it
/// as that user, as a pod does with `fsGroup`.
pub fn write_service_account_dir(dir: &Path, token: &str, ca_pem: &str) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    e2e::files::write_private(&dir.join("token"), token)?;
    e2e::files::write_public(&dir.join("ca.crt"), ca_pem)?;
    e2e::files::write_public(&dir.join("namespace"), SERVICE_ACCOUNT_NAMESPACE)?;
    let (uid, gid) = crate::image::USER.split_once(':').context("image user is uid:gid")?;
    let (uid, gid): (u32, u32) = (uid.parse()?, gid.parse()?);
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        for file in ["", "token", "ca.crt", "namespace"] {
            std::os::unix::fs::chown(dir.join(file), Some(uid), Some(gid))
                .with_context(|| format!("cannot chown {}", dir.join(file).display()))?;
        }
    } else if uid != unsafe { libc::geteuid() } {
        anyhow::bail!(
            "the container runs as {uid}:{gid} and cannot read a 0600 token owned by you: \
             run as root (CI does) or use the process controller"
        );
    }
    Ok(())
}

/// `docker run` of the controller image as a pod would run it: the API server's
/// address in `KUBERNETES_SERVICE_HOST`/`_PORT`, the ServiceAccount files
/// mounted read-only, a read-only root filesystem, a non-root user, no
/// capabilities. Attached (not `-d`): the lab tracks the `docker run` process,
/// its output is the controller's log, and SIGTERM to it reaches the container.
pub fn container_args(
    lab: &str,
    image: &str,
    sa_dir: &Path,
    api_port: u16,
    listen: SocketAddr,
) -> Vec<String> {
    let mut args: Vec<String> = [
        "run",
        "--rm",
        "--name",
        &container_name(lab),
        "--network",
        "host",
        "--read-only",
        "--user",
        crate::image::USER,
        "--cap-drop",
        "ALL",
        "--security-opt",
        "no-new-privileges",
        "-e",
        "KUBERNETES_SERVICE_HOST=127.0.0.1",
        "-e",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.push(format!("KUBERNETES_SERVICE_PORT={api_port}"));
    args.push("-v".into());
    args.push(format!("{}:{SERVICE_ACCOUNT_MOUNT}:ro", sa_dir.display()));
    args.push(image.into());
    args.extend(["--listen".to_string(), listen.to_string()]);
    args
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
