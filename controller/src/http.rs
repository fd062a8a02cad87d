//! `/healthz`, `/readyz` and `/metrics` on one port: what a Deployment's
//! probes and a Prometheus scrape expect of a deployed controller.

use std::{
    future::Future,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
};

use axum::{
    Router,
    extract::State,
    http::{StatusCode, header},
    response::IntoResponse,
    routing::get,
};
use tokio::net::TcpListener;

use crate::metrics::Metrics;

/// What the endpoints report on.
#[derive(Clone)]
pub struct Status {
    /// Set once the informer's cache has synced (the first full list arrived).
    pub ready: Arc<AtomicBool>,
    pub metrics: Arc<Metrics>,
}

pub fn router(status: Status) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .with_state(status)
}

async fn readyz(State(status): State<Status>) -> impl IntoResponse {
    if status.ready.load(Ordering::Acquire) {
        (StatusCode::OK, "ok\n")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "cache not synced yet\n")
    }
}

async fn metrics(State(status): State<Status>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        status.metrics.encode(),
    )
}

/// Serves until `shutdown` completes.
pub async fn serve(
    listener: TcpListener,
    status: Status,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router(status))
        .with_graceful_shutdown(shutdown)
        .await
}
