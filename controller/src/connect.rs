//! From `--kubeconfig` (or the default chain) to a `Client` (course step 1:
//! the Clientset). Loading and parsing happen here, before anything else, so
//! a missing or garbled kubeconfig is reported as bad input in one line.
//! Reaching the API server is *not* checked here: a server that is down is
//! waited for, not an error.

use std::path::Path;

use kube::{
    Client, Config,
    config::{KubeConfigOptions, Kubeconfig},
};

/// Builds a client from `path`, or from `$KUBECONFIG`, `~/.kube/config` and
/// the in-cluster ServiceAccount, in that order.
pub async fn client(path: Option<&Path>) -> Result<Client, String> {
    let config = match path {
        Some(path) => {
            let kubeconfig = Kubeconfig::read_from(path).map_err(|e| {
                format!("cannot use kubeconfig {}: {}", path.display(), one_line(&e))
            })?;
            Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                .await
                .map_err(|e| {
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
    build(config).map_err(|e| format!("cannot build a client: {}", one_line(&e)))
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
/// watch — paid those 40 ms; `cargo xtask bench` showed it as a 50 ms
/// self-heal (see its README section). Go's client sets `TCP_NODELAY` too.
///
/// Kept from kube's stack: the base URI, the authentication layer, extra and
/// impersonation headers, the retry of 429/503/504, the connect/read/write
/// timeouts. Left out: kube's HTTP trace spans. An exec plugin that hands out
/// expiring client certificates needs kube's own bookkeeping of the expiry
/// (not public), so such a kubeconfig keeps kube's default stack.
pub fn build(config: Config) -> kube::Result<Client> {
    use kube::client::ConfigExt as _;

    if config.auth_info.exec.is_some() {
        return Client::try_from(config);
    }
    let mut http = hyper_util::client::legacy::connect::HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    let https = config.rustls_https_connector_with_connector(http)?;
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
        .map_err(tower::BoxError::from)
        .service(hyper);
    Ok(Client::new(service, config.default_namespace))
}

/// An error and its causes on one line.
pub fn one_line(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    // Multi-line messages (a YAML parser's caret diagram) become one line.
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}
