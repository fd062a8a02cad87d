//! `/healthz`, `/readyz` and `/metrics` on one port: what a Deployment's
//! probes and a Prometheus scrape expect of a deployed controller.

use std::sync::{
    Arc,
    atomic::{AtomicBool, AtomicUsize, Ordering},
};

use crate::metrics::Metrics;
use axum::{
    Router,
    extract::State,
    http::{StatusCode, header},
    response::IntoResponse,
    routing::get,
};

/// What the endpoints report on.
#[derive(Clone)]
pub struct Status {
    /// Set once the informer's cache has synced (the first full list arrived).
    pub ready: Arc<AtomicBool>,
    pub metrics: Arc<Metrics>,
    /// `/healthz` fails when a worker has died: a liveness probe then restarts the pod.
    pub workers: Arc<Workers>,
}

pub fn router(status: Status) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .with_state(status)
}

async fn healthz(State(status): State<Status>) -> impl IntoResponse {
    match status.workers.problem() {
        None => (StatusCode::OK, "ok\n".to_string()),
        Some(problem) => (StatusCode::SERVICE_UNAVAILABLE, format!("{problem}\n")),
    }
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
        [(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")],
        status.metrics.encode(),
    )
}

/// Whether the workers live: `/healthz` fails when one has died (so a
/// liveness probe restarts the pod), except while shutting down. Before the
/// cache has synced no worker runs yet, and that is healthy.
#[derive(Debug, Default)]
pub struct Workers {
    started: AtomicUsize,
    alive: AtomicUsize,
    stopping: AtomicBool,
}

impl Workers {
    /// Counts a worker alive until the guard is dropped (its task ended).
    pub fn alive(self: &Arc<Self>) -> impl Sized + use<> {
        self.started.fetch_add(1, Ordering::AcqRel);
        self.alive.fetch_add(1, Ordering::AcqRel);
        scopeguard::guard(self.clone(), |workers| {
            workers.alive.fetch_sub(1, Ordering::AcqRel);
        })
    }

    /// From now on a stopped worker is expected: the controller is shutting down.
    pub fn stopping(&self) {
        self.stopping.store(true, Ordering::Release);
    }

    /// `None` when healthy, else what is wrong.
    pub fn problem(&self) -> Option<String> {
        let (started, alive) =
            (self.started.load(Ordering::Acquire), self.alive.load(Ordering::Acquire));
        (!self.stopping.load(Ordering::Acquire) && alive < started)
            .then(|| format!("{} of {started} workers stopped", started - alive))
    }
}
