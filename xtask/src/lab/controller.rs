//! The controller in an envtest lab: its own ServiceAccount identity (never the admin's, so
//! missing RBAC shows up in the lab as it would in a cluster), and how it is run, as a
//! process or in its image the way a pod runs it.

use std::net::SocketAddr;
use std::path::Path;

use anyhow::{Context, Result};

/// The ServiceAccount manifests/rbac.yaml creates for it.
pub const SERVICE_ACCOUNT_NAMESPACE: &str = "default";
pub const SERVICE_ACCOUNT: &str = "my-controller";
/// 48 hours: longer than a lab lives. The token sits in a kubeconfig that is read once at
/// start, so it is not refreshed; kube-apiserver runs with
/// `--service-account-max-token-expiration` of at least this so it is not cut short.
pub const TOKEN_SECONDS: i64 = 48 * 3600;

/// `--controller`: where the envtest lab runs the controller.
#[derive(Clone, Copy, Debug, Default)]
pub enum Host {
    #[default]
    Process,
    Container(crate::image::Builder),
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
    labkit::files::write_private(&dir.join("token"), token)?;
    labkit::files::write_public(&dir.join("ca.crt"), ca_pem)?;
    labkit::files::write_public(&dir.join("namespace"), SERVICE_ACCOUNT_NAMESPACE)?;
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
