//! `lab status` of an envtest lab: every part asked, and whether it is healthy.

use super::*;

/// Checks every part of a running lab: processes, `/readyz` of both servers, `/version`,
/// the controller's token.
pub async fn health(lab: &LabFile) -> Health {
    let mut lines = Vec::new();
    let mut healthy = true;
    for p in &lab.processes {
        let running = process::is_alive(p.pid);
        healthy &= running;
        let version = p.version.as_deref().unwrap_or("-");
        let (role, pid) = (format!("{:<15}", p.role), format!("{:<7}", p.pid));
        let source = binaries::said(&p.source);
        lines.push(if running {
            tr!("{role} pid {pid} running     {version} ({source})", role, pid, version, source)
        } else {
            tr!("{role} pid {pid} NOT RUNNING {version} ({source})", role, pid, version, source)
        });
    }
    let checks = [
        ("etcd", etcd_health(lab).await),
        ("kube-apiserver", api_server_health(lab).await),
        ("controller", token_validity(lab).and(controller_health(lab).await)),
    ];
    for (what, check) in checks {
        match check {
            Ok(line) => lines.push(line),
            Err(error) => {
                healthy = false;
                let (what, error) = (format!("{what:<15}"), format!("{error:#}"));
                lines.push(tr!("{what} NOT READY: {error}", what, error));
            }
        }
    }
    Health { lines, healthy }
}

/// etcd's `/health` over TLS with the lab's certificate: a lab made before etcd
/// answered only those (no `etcd.kubeconfig`) is not healthy, and `lab up` starts it anew.
async fn etcd_health(lab: &LabFile) -> Result<String> {
    let etcd = labkit::lab::etcd_client(&lab.state_dir).await?;
    match probes::etcd_ready(etcd).await? {
        Check::Done(()) => Ok(tr!("etcd            /health ok, TLS with the lab's certificates")),
        Check::NotYet(seen) => Err(anyhow!(seen)),
        Check::Stop(error) => Err(error),
    }
}

async fn api_server_health(lab: &LabFile) -> Result<String> {
    let client = kubeconfig::probe_client(&lab.admin_kubeconfig).await?;
    if let Check::NotYet(seen) = probes::api_server_ready(client.clone()).await? {
        return Err(anyhow!("{} /readyz: {seen}", lab.api_server_url));
    }
    let version = client.apiserver_version().await.context("GET /version")?;
    Ok(tr!(
        "kube-apiserver  {url} /readyz ok, /version {version} ({platform})",
        url = lab.api_server_url,
        version = version.git_version,
        platform = version.platform
    ))
}

/// The controller's token is not refreshed: past its expiry the lab needs a new `up`.
fn token_validity(lab: &LabFile) -> Result<()> {
    let expires: k8s_openapi::jiff::Timestamp =
        lab.controller.token_expires.parse().with_context(|| {
            tr!(
                "token expiry {expiry} in lab.json",
                expiry = format!("{:?}", lab.controller.token_expires)
            )
        })?;
    if expires <= k8s_openapi::jiff::Timestamp::now() {
        let account = &lab.controller.service_account;
        return Err(anyhow!(tr!("token of {account} expired at {expires}", account, expires)));
    }
    Ok(())
}

async fn controller_health(lab: &LabFile) -> Result<String> {
    match probes::controller_ready(lab.controller.url.clone()).await? {
        Check::Done(()) => Ok(format!("controller      {}/readyz 200", lab.controller.url)),
        Check::NotYet(seen) => Err(anyhow!("{}{seen}", lab.controller.url)),
        Check::Stop(error) => Err(error),
    }
}
