//! What a shutdown waits for, within `--shutdown-grace` from the signal:
//! the running reconciles, the pending Events, then the requests the HTTP
//! server is in. The end of the grace, or a second signal, cuts them off,
//! and what was cut off is named.

use std::{future::Future, sync::Arc, time::Duration};

use anyhow::Context as _;
use futures::{Stream, StreamExt};
use tokio::{sync::oneshot, task::JoinHandle};
use tracing::error;
use workqueue::WorkQueue;

use crate::reconcile::{Context, Key, show};

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
    pub ends: tokio::time::Instant,
}

/// `work` within what is left of `grace`; its end, or a second signal, cuts
/// it off, and `cut_off` names what was cut off.
async fn within_grace<T>(
    work: impl Future<Output = T>,
    grace: Grace,
    signals: &mut (impl Stream<Item = ()> + Unpin),
    cut_off: impl Fn() -> String,
) -> Result<T, Stopped> {
    tokio::select! {
        done = work => Ok(done),
        _ = tokio::time::sleep_until(grace.ends) => {
            Err(Stopped::CutOff { grace: grace.of, what: cut_off() })
        }
        _ = signals.next() => Err(Stopped::Interrupted { what: cut_off() }),
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
    within_grace(finish, grace, signals, || cut_off(queue, ctx)).await
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
    let served = within_grace(server, grace, signals, open).await.inspect_err(|_| abort.abort())?;
    if let Ok(served) = served {
        served.context("the HTTP server failed")?;
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
