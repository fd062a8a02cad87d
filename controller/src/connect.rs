//! From `--kubeconfig` (or the default chain) to a `Client` (course step 1:
//! the Clientset). Loading and parsing happen here, before anything else, so
//! a missing or garbled kubeconfig is reported as bad input in one line.
//! Reaching the API server is *not* checked here: a server that is down is
//! waited for, not an error.

use std::{path::Path, time::Duration};

use kube::{
    Client, Config,
    config::{KubeConfigOptions, Kubeconfig},
};

/// Builds a client from `path`, or from `$KUBECONFIG`, `~/.kube/config` and
/// the in-cluster ServiceAccount, in that order.
pub async fn client(path: Option<&Path>) -> Result<Client, String> {
    build(config(path).await?).map_err(|e| format!("cannot build a client: {}", one_line(&e)))
}

/// [`client`], each response bounded: one that brings no byte for
/// `read_timeout` (a watch's body included) fails with a timeout
/// ([`is_silence`]). kube sets no read timeout: its watcher's own idle timeout
/// (timeoutSeconds + 5 s) watches again quietly, and that new request has no
/// bound, so a connection that stays open but delivers nothing went
/// unnoticed. The timer counts from the request's last write, not from when
/// its pooled connection went idle.
pub async fn client_reading_within(
    path: Option<&Path>,
    read_timeout: Duration,
) -> Result<Client, String> {
    let mut config = config(path).await?;
    config.read_timeout = Some(read_timeout);
    config.reset_reader_on_write = true;
    build(config).map_err(|e| format!("cannot build a client: {}", one_line(&e)))
}

/// How much longer than a watch's timeoutSeconds its connection may bring no
/// byte. The API server ends a watch at exactly its timeoutSeconds (and its
/// watch cache sends a BOOKMARK every minute before that, and 2 s before the
/// end), so a healthy watch never trips it; and it is under the 5 s kube's
/// watcher adds for its own idle timeout, which would watch again without a
/// word.
pub const SILENCE_MARGIN: Duration = Duration::from_secs(3);

/// The read timeout for a controller whose watches last `watch_timeout`.
pub fn read_timeout(watch_timeout: Duration) -> Duration {
    watch_timeout + SILENCE_MARGIN
}

/// Whether `e` is a response that brought no byte within the read timeout
/// (an I/O timeout somewhere in its causes, and not one of connecting:
/// the connect timeout's error is a timeout too).
pub fn is_silence(e: &(dyn std::error::Error + 'static)) -> bool {
    for e in std::iter::successors(Some(e), |e| e.source()) {
        let client = e.downcast_ref::<hyper_util::client::legacy::Error>();
        if client.is_some_and(|client| client.is_connect()) {
            return false;
        }
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            // An io::Error's `source` skips the error it wraps: look at it too.
            let inner = io.get_ref().is_some_and(|inner| is_silence(inner));
            if io.kind() == std::io::ErrorKind::TimedOut || inner {
                return true;
            }
        }
    }
    false
}

/// The configuration [`client`] builds from (see there).
async fn config(path: Option<&Path>) -> Result<Config, String> {
    let config = match path {
        Some(path) => {
            let options = KubeConfigOptions::default();
            let read = async {
                Config::from_custom_kubeconfig(Kubeconfig::read_from(path)?, &options).await
            };
            read.await.map_err(|e| {
                format!("cannot use kubeconfig {}: {}", path.display(), one_line(&e))
            })?
        }
        None => Config::infer().await.map_err(|e| {
            format!(
                "no usable Kubernetes configuration ({}): pass --kubeconfig PATH or set KUBECONFIG",
                one_line(&e)
            )
        })?,
    };
    refuse_proxy(&config, |name| std::env::var(name).ok())?;
    Ok(config)
}

/// The client stack below dials the API server directly: a proxy the
/// kubeconfig or the environment asks for is refused at start, in one line,
/// rather than bypassed (the connection would then loop on "not reachable").
/// The environment's proxy: HTTPS_PROXY (or ALL_PROXY), except for what
/// NO_PROXY names (hyper-util's matcher, curl's rules) and, as in Go,
/// localhost and loopback addresses.
pub fn refuse_proxy(config: &Config, env: impl Fn(&str) -> Option<String>) -> Result<(), String> {
    if let Some(proxy) = &config.proxy_url {
        return Err(format!(
            "the kubeconfig names proxy-url {proxy}: my-controller connects to the API server \
             directly and does not support proxies; use a kubeconfig without proxy-url"
        ));
    }
    let lookup = |names: &[&'static str]| {
        names.iter().find_map(|n| env(n).filter(|v| !v.is_empty()).map(|v| (*n, v)))
    };
    let Some((name, proxy)) = lookup(&["HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"])
    else {
        return Ok(());
    };
    let no_proxy = lookup(&["NO_PROXY", "no_proxy"]).map(|(_, v)| v).unwrap_or_default();
    let matcher = hyper_util::client::proxy::matcher::Matcher::builder()
        .all(proxy.clone())
        .no(format!("{no_proxy},localhost,127.0.0.0/8,::1"))
        .build();
    if matcher.intercept(&config.cluster_url).is_none() {
        return Ok(());
    }
    let host = config.cluster_url.host().unwrap_or_default().trim_matches(['[', ']']);
    Err(format!(
        "{name}={proxy} applies to the API server {}: my-controller connects directly and \
         does not support proxies; add {host} to NO_PROXY, or unset {name}",
        config.cluster_url
    ))
}

/// kube's default client stack (`Client::try_from`), rebuilt with one change:
/// `TCP_NODELAY` on its connections, which kube-client 5 leaves off.
///
/// Why it matters: a new connection resumes its TLS session, and the client's
/// first request then goes out right behind its TLS `Finished` message. Nagle's
/// algorithm holds the request until that message is acknowledged, and the API
/// server (it has nothing to send back yet) delays its ACK by Linux's 40 ms
/// minimum. Every write on a fresh connection — the first one after the pool's
/// idle timeout, or any request while the pooled connection is busy with a
/// watch — paid those 40 ms; `cargo maint bench` showed it as a 50 ms
/// self-heal (see its README section). Go's client sets `TCP_NODELAY` too.
///
/// Kept from kube's stack: the base URI, the authentication layer, extra and
/// impersonation headers, the retry of 429/503/504, the connect/read/write
/// timeouts, a debug span per request. An exec plugin that
/// hands out expiring client certificates needs kube's own bookkeeping of the
/// expiry (`Client::valid_until`), so such a kubeconfig keeps kube's default
/// stack.
pub fn build(config: Config) -> kube::Result<Client> {
    use kube::client::ConfigExt as _;

    if config.auth_info.exec.is_some() {
        return Client::try_from(config);
    }
    let https = config.rustls_https_connector_with_connector(tcp_connector())?;
    let mut timeouts = hyper_timeout::TimeoutConnector::new(https);
    timeouts.set_connect_timeout(config.connect_timeout);
    timeouts.set_read_timeout(config.read_timeout);
    timeouts.set_write_timeout(config.write_timeout);
    timeouts.set_reset_reader_on_write(config.reset_reader_on_write);
    let hyper: hyper_util::client::legacy::Client<_, kube::client::Body> =
        hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
            .build(timeouts);
    let retry = config
        .default_retry
        .then(|| tower::retry::RetryLayer::new(kube::client::retry::RetryPolicy::server_retry()));
    let service = tower::ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(retry)
        .option_layer(config.auth_layer()?)
        .layer(config.extra_headers_layer()?)
        // A debug span per request and a line per answer, under the target
        // `kube::client`, as kube's own stack traces them (`RUST_LOG=kube=debug`).
        .layer(
            tower_http::trace::TraceLayer::new_for_http()
                .make_span_with(|request: &http::Request<kube::client::Body>| {
                    tracing::debug_span!(target: "kube::client", "HTTP", method = %request.method(), url = %request.uri())
                })
                .on_request(())
                .on_response(
                    |response: &http::Response<_>,
                     took: std::time::Duration,
                     _: &tracing::Span| {
                        tracing::debug!(target: "kube::client", status = response.status().as_u16(), ?took, "answered");
                    },
                )
                .on_body_chunk(())
                .on_eos(())
                .on_failure(()),
        )
        .map_err(tower::BoxError::from)
        .service(hyper);
    Ok(Client::new(service, config.default_namespace))
}

/// The TCP connector of the stack: `TCP_NODELAY` (see [`build`]), and TCP
/// keepalive as Go's client has it (15 s idle, then 9 probes 15 s apart), so
/// a dead peer behind a silent network path is noticed in about 2.5 minutes
/// rather than hours, and a watch reconnects.
fn tcp_connector() -> hyper_util::client::legacy::connect::HttpConnector {
    let mut http = hyper_util::client::legacy::connect::HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    http.set_keepalive(Some(KEEPALIVE));
    http.set_keepalive_interval(Some(KEEPALIVE));
    http.set_keepalive_retries(Some(9));
    http
}

/// Go's `net.Dialer` keepalive idle time and probe interval.
const KEEPALIVE: std::time::Duration = std::time::Duration::from_secs(15);

/// When the controller must stop because its credentials expire: kube runs
/// a kubeconfig's exec plugin once, and a client certificate it hands out is
/// never renewed (`Client::valid_until`, which kube leaves to its user), so
/// every request would fail after it. Stopping shortly before — a tenth of
/// the time left, at least 1 s, at most a minute — lets a restart (the pod's,
/// or a supervisor's) run the plugin again. `None`: nothing expires.
pub fn stop_before_expiry(
    valid_until: Option<&k8s_openapi::jiff::Timestamp>,
    now: k8s_openapi::jiff::Timestamp,
) -> Option<std::time::Duration> {
    let left = valid_until?.duration_since(now);
    let left = std::time::Duration::try_from(left).unwrap_or_default();
    let margin =
        (left / 10).clamp(std::time::Duration::from_secs(1), std::time::Duration::from_secs(60));
    Some(left.saturating_sub(margin))
}

/// An error and its causes on one line.
pub fn one_line(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    for cause in std::iter::successors(e.source(), |cause| cause.source()) {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
    }
    // Multi-line messages (a YAML parser's caret diagram) become one line.
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(server: &str, proxy: Option<&str>) -> Config {
        let mut config = Config::new(server.parse().unwrap());
        config.proxy_url = proxy.map(|p| p.parse().unwrap());
        config
    }

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| vars.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string())
    }

    #[test]
    fn a_proxy_in_the_kubeconfig_is_refused_in_one_line() {
        let error =
            refuse_proxy(&config("https://10.0.0.1:6443", Some("http://proxy:3128")), env(&[]))
                .unwrap_err();
        assert!(error.contains("proxy-url http://proxy:3128/") && !error.contains('\n'), "{error}");
        assert!(refuse_proxy(&config("https://10.0.0.1:6443", None), env(&[])).is_ok());
    }

    #[test]
    fn https_proxy_is_refused_unless_no_proxy_or_loopback_exempts_the_server() {
        let proxy = ("HTTPS_PROXY", "http://proxy:3128");
        let api = config("https://api.lab.example:6443", None);
        let error = refuse_proxy(&api, env(&[proxy])).unwrap_err();
        assert!(error.contains("add api.lab.example to NO_PROXY"), "{error}");
        for no_proxy in ["*", "api.lab.example", ".example", "example", "other, lab.example"] {
            assert!(
                refuse_proxy(&api, env(&[proxy, ("NO_PROXY", no_proxy)])).is_ok(),
                "{no_proxy}"
            );
        }
        assert!(refuse_proxy(&api, env(&[proxy, ("NO_PROXY", "xample")])).is_err());
        let ip = config("https://10.96.0.1:443", None);
        assert!(refuse_proxy(&ip, env(&[proxy, ("no_proxy", "10.96.0.0/12")])).is_ok());
        assert!(refuse_proxy(&ip, env(&[proxy, ("no_proxy", "10.0.0.0/16")])).is_err());
        let ipv6 = config("https://[fd00::1]:443", None);
        assert!(refuse_proxy(&ipv6, env(&[proxy, ("NO_PROXY", "fd00::/8")])).is_ok());
        assert!(refuse_proxy(&ip, env(&[("all_proxy", "socks5://p:1080")])).is_err());
        // As Go: loopback and localhost are never proxied (the envtest lab).
        for local in ["https://127.0.0.1:6443", "https://localhost:6443", "https://[::1]:6443"] {
            assert!(refuse_proxy(&config(local, None), env(&[proxy])).is_ok(), "{local}");
        }
    }

    #[test]
    fn expiring_credentials_stop_the_controller_a_tenth_before_at_most_a_minute() {
        use k8s_openapi::jiff::{SignedDuration, Timestamp};
        let now: Timestamp = "2026-12-01T12:00:00Z".parse().unwrap();
        let at = |secs: i64| now.checked_add(SignedDuration::from_secs(secs)).unwrap();
        let s = std::time::Duration::from_secs;
        assert_eq!(stop_before_expiry(None, now), None);
        assert_eq!(stop_before_expiry(Some(&at(100)), now), Some(s(90)));
        assert_eq!(stop_before_expiry(Some(&at(3600)), now), Some(s(3540)));
        assert_eq!(stop_before_expiry(Some(&at(5)), now), Some(s(4)));
        assert_eq!(stop_before_expiry(Some(&at(-5)), now), Some(s(0)), "expired: at once");
    }

    #[test]
    fn a_timeout_anywhere_in_the_causes_is_silence() {
        use std::io::{Error, ErrorKind};
        let read = Error::other(Error::from(ErrorKind::TimedOut));
        assert!(is_silence(&kube::Error::ReadEvents(read)));
        let refused = Error::from(ErrorKind::ConnectionRefused);
        assert!(!is_silence(&kube::Error::ReadEvents(refused)));
        assert!(!is_silence(&kube::Error::LinesCodecMaxLineLengthExceeded));
        assert_eq!(read_timeout(Duration::from_secs(290)), Duration::from_secs(293));
    }

    /// A connect that fails (here refused; a connect timeout the same way) is
    /// not a silent connection, whatever its causes say.
    #[tokio::test]
    async fn a_connect_error_is_not_silence() {
        let mut config = Config::new("http://127.0.0.1:1".parse().unwrap());
        config.read_timeout = Some(Duration::from_secs(1));
        let client = build(config).unwrap();
        let api: kube::Api<k8s_openapi::api::core::v1::ConfigMap> = kube::Api::all(client);
        let e = api.list(&Default::default()).await.unwrap_err();
        assert!(!is_silence(&e), "{e}");
        let mut source: Option<&(dyn std::error::Error + 'static)> = Some(&e);
        let mut connect = false;
        while let Some(e) = source {
            connect |= e
                .downcast_ref::<hyper_util::client::legacy::Error>()
                .is_some_and(|c| c.is_connect());
            source = e.source();
        }
        assert!(connect, "the stack's connect error is in the causes: {e}");
    }

    #[tokio::test]
    async fn connections_have_nodelay_and_keepalive_like_gos() {
        use tower::Service as _;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let uri: http::Uri = format!("http://{}", listener.local_addr().unwrap()).parse().unwrap();
        let mut connector = tcp_connector();
        let stream = connector.call(uri).await.unwrap();
        let socket = socket2::SockRef::from(stream.inner());
        assert!(socket.tcp_nodelay().unwrap());
        assert!(socket.keepalive().unwrap());
        assert_eq!(socket.tcp_keepalive_time().unwrap(), KEEPALIVE);
        assert_eq!(socket.tcp_keepalive_interval().unwrap(), KEEPALIVE);
        assert_eq!(socket.tcp_keepalive_retries().unwrap(), 9);
    }
}
