//! A watch that goes silent: a TCP proxy between the controller and
//! kube-apiserver stops forwarding bytes on the connections it holds and
//! keeps them open — a NAT or load balancer that lost their state, a peer
//! gone behind a silent path — while new connections still go through.
//! HTTP/1.1 has no pings: only the controller's read timeout
//! (`--watch-timeout` + 3 s) can tell. It must say not ready within it, list
//! again through a new connection and correct a drift made meanwhile.

use std::{
    net::SocketAddr,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, AtomicUsize, Ordering},
    },
    time::Duration,
};

use anyhow::{Context as _, ensure};
use controller::runner::{LOG_RELISTED, LOG_WATCH_SILENT};
use kube::config::Kubeconfig;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
    task::AbortHandle,
    time::Instant,
};

use super::{
    config_map_requests, drift, in_order, lifecycle::spawn_command_ready, lines_with, ms, secs,
    then_restore, until_status,
};
use labkit::eventually::{Check, eventually};
use labkit::{
    converge::{HEAL_WITHIN, wait_desired, wait_idle},
    lab::{ControllerRun, Lab},
    suite::Measured,
    tr,
};

/// The controller's `--watch-timeout` here: short, so the silence is noticed soon.
const WATCH_TIMEOUT: Duration = Duration::from_secs(3);
/// Polling and a loaded machine's scheduling, on top of the read timeout.
const SLACK: Duration = Duration::from_secs(2);

pub async fn silent_watch_noticed_and_relisted(lab: &mut Lab) -> anyhow::Result<Measured> {
    let result = match Proxy::start(api_server(lab)?).await {
        Ok(proxy) => through_the_proxy(lab, &proxy).await,
        Err(e) => Err(e),
    };
    then_restore(lab, result).await
}

/// kube-apiserver's address, from lab.json.
fn api_server(lab: &Lab) -> anyhow::Result<SocketAddr> {
    let url: http::Uri = lab.file().api_server_url.parse()?;
    let authority = url.authority().with_context(|| tr!("the API server URL has no host"))?;
    Ok(authority.as_str().parse()?)
}

/// Runs a controller of its own (the host's binary, the lab's listen
/// address) whose kubeconfig points at `proxy`, freezes the proxy, and
/// measures; the controller is stopped before the lab's is put back.
async fn through_the_proxy(lab: &mut Lab, proxy: &Proxy) -> anyhow::Result<Measured> {
    wait_desired(lab).await?;
    let kubeconfig = proxied_kubeconfig(lab, proxy.addr)?;
    lab.stop_controller().await?;
    let mark = lab.log_mark()?;
    let listen = lab.file().controller.url.trim_start_matches("http://").to_string();
    let watch_timeout = format!("{}s", WATCH_TIMEOUT.as_secs());
    let cmd = super::host_controller()?
        .arg("--kubeconfig")
        .path(&kubeconfig)
        .args(["--listen", &listen, "--watch-timeout", &watch_timeout])
        .args(lab.file().target.flags());
    let mut child = spawn_command_ready(lab, cmd).await?;
    let result = async {
        wait_idle(lab).await?;
        let ended = healthy_watches_pass(lab, &mark).await?;
        let measured = frozen(lab, proxy).await?;
        let log = lab.controller_log(&mark).await?;
        ensure!(
            in_order(&log, LOG_WATCH_SILENT, LOG_RELISTED),
            tr!(
                "expected {silent}, then {relisted}, in the log:\n{log}",
                silent = format!("{LOG_WATCH_SILENT:?}"),
                relisted = format!("{LOG_RELISTED:?}"),
                log
            )
        );
        let silences = lines_with(&log, LOG_WATCH_SILENT).len();
        let detail = tr!(
            "{ended} watches ended by the API server at --watch-timeout, no alarm; {measured}; \
             {silences} silence line",
            ended,
            measured = measured.detail,
            silences
        );
        Ok(Measured { detail, ..measured })
    }
    .await;
    let _ = child.kill().await;
    result
}

/// Watches the API server ends itself: the read timeout above their
/// timeoutSeconds never trips on them.
const HEALTHY_WATCHES: f64 = 2.0;

/// Waits until the API server has ended [`HEALTHY_WATCHES`] of the
/// controller's watches at their timeoutSeconds (the lab's only watcher of
/// ConfigMaps meanwhile), then checks that it stayed ready, nothing failed.
async fn healthy_watches_pass(lab: &Lab, mark: &ControllerRun) -> anyhow::Result<f64> {
    let before = config_map_requests(lab, "WATCH").await?;
    let within = WATCH_TIMEOUT * (HEALTHY_WATCHES as u32 + 1) + HEAL_WITHIN;
    let what = tr!("the API server to end the controller's watches");
    let ended = eventually(&what, within, || async {
        let ended = config_map_requests(lab, "WATCH").await? - before;
        Ok(Check::done_if(ended >= HEALTHY_WATCHES, ended, tr!("{ended} ended", ended)))
    })
    .await?;
    let status = lab.controller_status("/readyz").await?;
    let log = lab.controller_log(mark).await?;
    let alarms = lines_with(&log, " WARN ");
    ensure!(
        status == 200 && alarms.is_empty(),
        tr!("/readyz {status}, warnings:\n{alarms}", status, alarms = alarms.join("\n"))
    );
    Ok(ended)
}

/// The controller's kubeconfig, its server the proxy.
fn proxied_kubeconfig(lab: &Lab, proxy: SocketAddr) -> anyhow::Result<std::path::PathBuf> {
    let mut kubeconfig = Kubeconfig::read_from(&lab.file().controller.kubeconfig)?;
    for named in &mut kubeconfig.clusters {
        if let Some(cluster) = named.cluster.as_mut() {
            // The serving certificate names 127.0.0.1, whatever the port.
            cluster.server = Some(format!("https://{proxy}"));
        }
    }
    let path = lab.file().state_dir.join("silent-watch.kubeconfig");
    labkit::files::write_private(&path, serde_saphyr::to_string(&kubeconfig)?)?;
    Ok(path)
}

/// Freezes every connection, drifts my-config (directly, not through the
/// proxy), and waits for: not ready within the read timeout, then the drift
/// corrected through new connections, then ready.
async fn frozen(lab: &Lab, proxy: &Proxy) -> anyhow::Result<Measured> {
    let status = lab.controller_status("/readyz").await?;
    ensure!(status == 200, tr!("/readyz {status} before the freeze", status));
    let bound = controller::connect::read_timeout(WATCH_TIMEOUT);
    let at = Instant::now();
    let frozen = proxy.freeze();
    drift(lab, "env=during-the-silence").await?;
    until_status(lab, &tr!("the controller to say not ready"), "/readyz", 503, bound + SLACK)
        .await?;
    let not_ready = at.elapsed();
    // The LIST may go out on another frozen connection (an idle one of the
    // pool) and fail after the same bound; then the backoff's pauses.
    let within = bound * 2 + Duration::from_secs(5) + HEAL_WITHIN;
    let api = lab.config_maps();
    let corrected = eventually(&tr!("the drift to be corrected"), within, || async {
        let live = api.get(lab.desired().name()).await?;
        let right = lab.desired().is_satisfied_by(&live);
        Ok(Check::done_if(right, at.elapsed(), format!("data {:?}", live.data)))
    })
    .await?;
    until_status(lab, &tr!("the controller to be ready again"), "/readyz", 200, HEAL_WITHIN)
        .await?;
    let ready = at.elapsed();
    let (fresh, bytes) = (proxy.accepted() - frozen, proxy.fresh_bytes());
    ensure!(
        fresh >= 1 && bytes > 0,
        tr!("{fresh} new connections, {bytes} bytes through them", fresh, bytes)
    );
    Ok(Measured::took(
        not_ready,
        tr!(
            "proxy froze {frozen} connections, my-config drifted: /readyz 503 {not_ready} after \
             (bound: --watch-timeout {timeout} + 3 s), drift corrected {corrected} after through {fresh} new \
             connections ({bytes} bytes), ready {ready} after",
            frozen,
            not_ready = ms(not_ready),
            timeout = secs(WATCH_TIMEOUT),
            corrected = secs(corrected),
            fresh,
            bytes,
            ready = secs(ready)
        ),
    ))
}

/// A TCP proxy to one address whose connections can be frozen: no byte
/// forwarded either way any more, nothing closed. Dropping it closes all.
struct Proxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
}

#[derive(Default)]
struct Shared {
    /// Connections accepted so far; each is numbered in that order.
    accepted: AtomicUsize,
    /// Connections numbered below this are frozen (0: none).
    frozen_below: AtomicUsize,
    /// Bytes forwarded on connections accepted after the freeze.
    fresh_bytes: AtomicU64,
    /// The accept loop and every pump, aborted when the proxy goes.
    tasks: Mutex<Vec<AbortHandle>>,
}

impl Proxy {
    async fn start(upstream: SocketAddr) -> anyhow::Result<Proxy> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared::default());
        let accept = tokio::spawn(accept(listener, upstream, shared.clone()));
        shared.tasks.lock().unwrap().push(accept.abort_handle());
        Ok(Proxy { addr, shared })
    }

    /// Freezes every connection accepted so far; returns how many.
    fn freeze(&self) -> usize {
        let accepted = self.shared.accepted.load(Ordering::Acquire);
        self.shared.frozen_below.store(accepted, Ordering::Release);
        accepted
    }

    fn accepted(&self) -> usize {
        self.shared.accepted.load(Ordering::Acquire)
    }

    fn fresh_bytes(&self) -> u64 {
        self.shared.fresh_bytes.load(Ordering::Acquire)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        for task in self.shared.tasks.lock().unwrap().drain(..) {
            task.abort();
        }
    }
}

async fn accept(listener: TcpListener, upstream: SocketAddr, shared: Arc<Shared>) {
    while let Ok((client, _)) = listener.accept().await {
        let number = shared.accepted.fetch_add(1, Ordering::AcqRel);
        let Ok(server) = TcpStream::connect(upstream).await else { continue };
        let (from_client, to_client) = client.into_split();
        let (from_server, to_server) = server.into_split();
        let pumps = [
            tokio::spawn(pump(from_client, to_server, number, shared.clone())),
            tokio::spawn(pump(from_server, to_client, number, shared.clone())),
        ];
        shared.tasks.lock().unwrap().extend(pumps.iter().map(|p| p.abort_handle()));
    }
}

/// Copies one direction of connection `number` until it ends — or, once the
/// connection is frozen, holds whatever came next (data, its end or an
/// error) for ever, both sockets open.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    number: usize,
    shared: Arc<Shared>,
) {
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        let read = from.read(&mut buffer).await;
        let frozen_below = shared.frozen_below.load(Ordering::Acquire);
        if number < frozen_below {
            let _held = (from, to);
            return std::future::pending().await;
        }
        let n = match read {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if frozen_below > 0 {
            shared.fresh_bytes.fetch_add(n as u64, Ordering::AcqRel);
        }
        if to.write_all(&buffer[..n]).await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An upstream that answers what it reads in capitals.
    async fn shout() -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut buffer = [0u8; 1024];
                    while let Ok(n @ 1..) = stream.read(&mut buffer).await {
                        if stream.write_all(&buffer[..n].to_ascii_uppercase()).await.is_err() {
                            break;
                        }
                    }
                });
            }
        });
        addr
    }

    /// What comes back for `text`, or `None` when nothing does.
    async fn round_trip(stream: &mut TcpStream, text: &[u8]) -> Option<Vec<u8>> {
        stream.write_all(text).await.unwrap();
        let mut buffer = vec![0u8; text.len()];
        let read = tokio::time::timeout(Duration::from_millis(300), stream.read_exact(&mut buffer));
        read.await.ok().map(|r| r.map(|_| buffer).unwrap())
    }

    #[tokio::test]
    async fn a_frozen_connection_forwards_nothing_and_stays_open_new_ones_work() {
        let proxy = Proxy::start(shout().await).await.unwrap();
        let mut old = TcpStream::connect(proxy.addr).await.unwrap();
        assert_eq!(round_trip(&mut old, b"before").await.as_deref(), Some(&b"BEFORE"[..]));
        assert_eq!(proxy.freeze(), 1);
        assert_eq!(round_trip(&mut old, b"during").await, None, "forwarded after the freeze");
        let mut new = TcpStream::connect(proxy.addr).await.unwrap();
        assert_eq!(round_trip(&mut new, b"fresh").await.as_deref(), Some(&b"FRESH"[..]));
        assert_eq!((proxy.accepted(), proxy.fresh_bytes()), (2, 10));
        // Still open: a read waits, it does not see the end.
        let mut byte = [0u8; 1];
        let read = tokio::time::timeout(Duration::from_millis(300), old.read(&mut byte)).await;
        assert!(read.is_err(), "{read:?}");
    }
}
