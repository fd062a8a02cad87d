//! Is it up yet: the lab's processes (etcd, kube-apiserver, the controller)
//! asked as a person would (their health endpoints), and their ports free
//! again after a stop. `cargo xtask lab up` and the faults wait on these.

use super::*;
use crate::tr;

/// How long a stopped process's ports may stay taken.
const PORTS_FREED_WITHIN: Duration = Duration::from_secs(5);

/// Waits until every loopback port in `ports` can be bound again. A killed
/// multi-threaded process (kube-apiserver) shows as a zombie — gone, for
/// [`process::is_alive`] — as soon as its main thread exits, while its other
/// threads may still hold its sockets for a moment; starting its successor
/// then fails with "address already in use".
pub(super) async fn wait_ports_free(ports: &BTreeMap<String, u16>) -> anyhow::Result<()> {
    for port in ports.values().copied() {
        let what = tr!("port {port} to be free", port);
        eventually(&what, PORTS_FREED_WITHIN, || async move { Ok(port_free(port)) }).await?;
    }
    Ok(())
}

/// Whether `port` can be bound on loopback now. std sets SO_REUSEADDR, as
/// Go's listeners do, so connections in TIME_WAIT do not count.
fn port_free(port: u16) -> Check<()> {
    match std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, port)) {
        Ok(_) => Check::Done(()),
        Err(e) => Check::NotYet(e.to_string()),
    }
}

/// Polls `probe` until it says ready, for at most [`READY_WITHIN`]; gives up
/// at once, with the end of its log, when `spawned` exits meanwhile.
/// `shown`: say what it waits for while it does (xtask).
pub async fn wait_ready<F, Fut>(
    what: &str,
    spawned: &mut Spawned,
    shown: bool,
    mut probe: F,
) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<Check<()>>>,
{
    let waited = crate::eventually::poll(what, READY_WITHIN, shown, || {
        let died = spawned.exited().map(|status| spawned.died(status));
        let look = probe();
        async move {
            match died {
                // Waiting on a dead process is pointless.
                Some(died) => Ok(Check::Stop(died)),
                None => look.await,
            }
        }
    })
    .await;
    waited.map_err(|e| spawned.with_log_tail(e))
}

/// The controller's `/readyz` answers 200.
pub async fn controller_ready(url: String) -> anyhow::Result<Check<()>> {
    let reply = http_probe::get_url(&url, "/readyz", HTTP_TIMEOUT).await?;
    Ok(Check::done_if(reply.status == 200, (), format!("/readyz {}: {}", reply.status, reply.body)))
}

/// The API server's `/readyz` answers 200 to the admin; when not, which of its
/// checks still fail.
pub async fn api_server_ready(client: Client) -> anyhow::Result<Check<()>> {
    let request = http::Request::get("/readyz").body(Vec::new())?;
    Ok(match client.request_text(request).await {
        Ok(_) => Check::Done(()),
        Err(kube::Error::Api(status)) => {
            let failing: Vec<&str> = status
                .message
                .lines()
                .filter_map(|line| line.strip_prefix("[-]"))
                .map(|line| line.split_whitespace().next().unwrap_or(line))
                .collect();
            Check::NotYet(tr!(
                "/readyz {code}: waiting for {failing}",
                code = status.code,
                failing = failing.join(", ")
            ))
        }
        // The innermost error: "Connection refused" rather than four layers of client plumbing.
        Err(e) => Check::NotYet(format!("/readyz: {}", anyhow::Error::new(e).root_cause())),
    })
}

/// etcd's `/health` says `"health":"true"` (`etcd`: [`super::etcd_client`]).
pub async fn etcd_ready(etcd: Client) -> anyhow::Result<Check<()>> {
    let request = http::Request::get("/health").body(Vec::new())?;
    Ok(match etcd.request_text(request).await {
        Ok(body) => Check::done_if(body.contains("\"true\""), (), format!("/health: {body}")),
        Err(e) => Check::NotYet(format!("/health: {}", anyhow::Error::new(e).root_cause())),
    })
}
