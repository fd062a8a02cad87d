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
    Client::try_from(config).map_err(|e| format!("cannot build a client: {}", one_line(&e)))
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
