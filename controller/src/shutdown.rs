//! What a shutdown waits for, within `--shutdown-grace` from the signal:
//! the running reconciles, the pending Events, then the requests the HTTP
//! server is in. The end of the grace, or a second signal, cuts them off,
//! and what was cut off is named.

use std::{sync::Arc, time::Duration};

use anyhow::Context as _;
use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::runtime::reflector::ObjectRef;
use tokio::{sync::oneshot, task::JoinHandle};
use tracing::error;
use workqueue::WorkQueue;

use crate::reconcile::{Context, show};

type Key = ObjectRef<ConfigMap>;

/// How `run` ended when it did not end cleanly.
#[derive(Debug, thiserror::Error)]
pub enum Stopped {
    /// The grace period ran out: what was cut off.
    #[error("shutdown grace of {grace:?} ran out: cut off {what}")]
    CutOff { grace: Duration, what: String },
    /// A second signal during the shutdown: exit at once.
    #[error("second signal: exiting at once, cutting off {what}")]
    Interrupted { what: String },
    #[error(transparent)]
    Failed(#[from] anyhow::Error),
}

/// `--shutdown-grace`, from the signal on.
#[derive(Clone, Copy)]
pub struct Grace {
    pub of: Duration,
    ends: tokio::time::Instant,
}

impl Grace {
    pub fn from_now(of: Duration) -> Grace {
        Grace { of, ends: tokio::time::Instant::now() + of }
    }
}

/// The running reconciles finish and pending Events go out, within `grace`;
/// the end of it, or a second signal, cuts them off.
pub async fn finish_work(
    tasks: Vec<JoinHandle<()>>,
    ctx: &Arc<Context>,
    queue: &WorkQueue<Key>,
    grace: Grace,
    signals: &mut (impl Stream<Item = ()> + Unpin),
) -> Result<(), Stopped> {
    let finish = async {
        for task in tasks {
            if let Err(e) = task.await {
                error!(error = %e, "a worker ended abnormally");
            }
        }
        // Events wait for a quiet moment (see crate::events): send them now.
        ctx.recorder.flush().await;
    };
    let cut_off = || cut_off(queue, ctx);
    tokio::select! {
        _ = finish => {}
        _ = tokio::time::sleep_until(grace.ends) => {
            return Err(Stopped::CutOff { grace: grace.of, what: cut_off() });
        }
        _ = signals.next() => return Err(Stopped::Interrupted { what: cut_off() }),
    }
    Ok(())
}

/// The HTTP server stops taking connections and finishes the requests it is
/// in, within what is left of `grace`, or until a second signal: axum waits
/// for every open connection, and a client holding a request half-sent
/// would otherwise hold the exit for ever.
pub async fn stop_serving(
    server: JoinHandle<std::io::Result<()>>,
    stop: oneshot::Sender<()>,
    grace: Grace,
    listen: std::net::SocketAddr,
    signals: &mut (impl Stream<Item = ()> + Unpin),
) -> Result<(), Stopped> {
    let _ = stop.send(());
    let abort = server.abort_handle();
    let open = || format!("a request still open on {listen} (/healthz, /readyz, /metrics)");
    tokio::select! {
        served = server => {
            if let Ok(served) = served {
                served.context("the HTTP server failed")?;
            }
        }
        _ = tokio::time::sleep_until(grace.ends) => {
            abort.abort();
            return Err(Stopped::CutOff { grace: grace.of, what: open() });
        }
        _ = signals.next() => {
            abort.abort();
            return Err(Stopped::Interrupted { what: open() });
        }
    }
    Ok(())
}

/// What a shutdown cut short: the reconciles still running, the Events not sent.
fn cut_off(queue: &WorkQueue<Key>, ctx: &Context) -> String {
    let mut parts: Vec<String> =
        queue.processing().iter().map(|k| format!("the reconcile of {}", show(k))).collect();
    let events = ctx.recorder.pending();
    if events > 0 {
        parts.push(format!("{events} Events not sent"));
    }
    if parts.is_empty() { "nothing (it was about to end)".into() } else { parts.join(" and ") }
}
