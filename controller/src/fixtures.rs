#![cfg(test)]
//! A mock API server for unit tests of request shapes (tower-test), as named
//! scenarios. Every request is recorded with the (tokio) time it arrived and
//! answered by the scenario; tests then assert the exact list, so an
//! unexpected request fails them. Behaviour against a real API server is
//! tested by the e2e suite, not here.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use http::{Method, Request, Response, StatusCode};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    Client,
    client::Body,
    runtime::{
        events::Reporter,
        reflector::{self, store::Writer},
        watcher,
    },
};
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::{desired::Desired, metrics::Metrics, reconcile::Context};

/// One request the mock API server received.
#[derive(Clone, Debug)]
pub struct Seen {
    pub method: Method,
    /// Path and query.
    pub uri: String,
    pub body: Value,
    pub at: Instant,
}

impl Seen {
    pub fn is_event(&self) -> bool {
        self.uri.starts_with("/apis/events.k8s.io/")
    }
}

/// How the mock API server answers a ConfigMap request (Event writes are
/// always accepted: they are recorded and checked separately).
#[derive(Clone, Copy, Debug)]
pub enum Scenario {
    /// Every write succeeds and echoes the object back.
    Accept,
    /// The first write gets 409 Conflict, later ones succeed.
    ConflictOnce,
    /// Every write is forbidden (the Role lacks the verb).
    Forbidden,
    /// Every write is refused as the API server refuses a change of an
    /// immutable ConfigMap's data (422), as when it was frozen after the
    /// cache's copy was taken.
    Immutable,
    /// A create finds the object there already (409 AlreadyExists): the
    /// cache is behind.
    AlreadyExists,
    /// Writes and Events are never answered: an API server that hangs.
    Unanswered,
}

pub struct MockApi {
    pub seen: Arc<Mutex<Vec<Seen>>>,
    task: tokio::task::JoinHandle<()>,
}

impl MockApi {
    /// A client whose requests go to a mock API server playing `scenario`.
    pub fn start(scenario: Scenario) -> (Client, MockApi) {
        Self::start_with(scenario, Duration::ZERO)
    }

    /// As [`MockApi::start`], and it also serves the informer: a list (empty,
    /// answered after `list_after`) and a watch that sends nothing.
    pub fn start_with(scenario: Scenario, list_after: Duration) -> (Client, MockApi) {
        let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        let task = tokio::spawn(async move {
            let mut config_map_writes = 0;
            // Replies kept and never sent: a watch, or a hanging server.
            let mut held = Vec::new();
            while let Some((request, reply)) = handle.next_request().await {
                let (parts, body) = request.into_parts();
                let bytes = body.collect_bytes().await.expect("request body");
                let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
                let seen = Seen {
                    method: parts.method,
                    uri: parts.uri.to_string(),
                    body,
                    at: Instant::now(),
                };
                let watch = seen.uri.contains("watch=true");
                let list = seen.method == Method::GET && !watch;
                let hang = watch || (matches!(scenario, Scenario::Unanswered) && !list);
                log.lock().unwrap().push(seen.clone());
                if hang {
                    held.push(reply);
                    continue;
                }
                let (status, answer) = if list {
                    tokio::time::sleep(list_after).await;
                    (
                        StatusCode::OK,
                        json!({"kind": "ConfigMapList", "apiVersion": "v1",
                               "metadata": {"resourceVersion": "1"}, "items": []}),
                    )
                } else if seen.is_event() {
                    (StatusCode::CREATED, seen.body.clone())
                } else {
                    config_map_writes += 1;
                    answer(scenario, config_map_writes, &seen)
                };
                let response = Response::builder()
                    .status(status)
                    .header("content-type", "application/json")
                    .body(Body::from(serde_json::to_vec(&answer).unwrap()))
                    .unwrap();
                reply.send_response(response);
            }
        });
        (Client::new(service, "default"), MockApi { seen, task })
    }

    /// The ConfigMap writes seen so far (Events, lists and watches left out).
    pub fn config_map_requests(&self) -> Vec<Seen> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .filter(|s| !s.is_event() && s.method != Method::GET)
            .cloned()
            .collect()
    }

    /// The Event requests seen so far.
    pub fn event_requests(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().iter().filter(|s| s.is_event()).cloned().collect()
    }

    /// Waits until the client side is gone (all clones dropped) and returns
    /// every request seen, so "nothing else was sent" can be asserted.
    pub async fn finish(self) -> Vec<Seen> {
        self.task.await.expect("mock API server task");
        Arc::try_unwrap(self.seen).unwrap().into_inner().unwrap()
    }
}

/// What a mock API server answers to the informer's requests.
#[derive(Clone, Copy, Debug)]
pub enum Informer {
    /// Every LIST is refused with this code (an expired token: 401).
    ListRefused(u16),
    /// LISTs succeed (empty); every WATCH is refused with this code (`watch`
    /// revoked: 403).
    WatchRefused(u16),
}

impl MockApi {
    /// A mock API server for the informer alone, playing `informer`; every
    /// request is recorded (`seen`), nothing else is served.
    pub fn informer(informer: Informer) -> (Client, MockApi) {
        let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        let task = tokio::spawn(async move {
            while let Some((request, reply)) = handle.next_request().await {
                let seen = Seen {
                    method: request.method().clone(),
                    uri: request.uri().to_string(),
                    body: Value::Null,
                    at: Instant::now(),
                };
                let watch = seen.uri.contains("watch=true");
                log.lock().unwrap().push(seen);
                let (code, answer) = match (informer, watch) {
                    (Informer::ListRefused(code), false) | (Informer::WatchRefused(code), true) => {
                        status(code, "Refused", "refused by the mock API server")
                    }
                    (Informer::WatchRefused(_), false) => (
                        StatusCode::OK,
                        json!({"kind": "ConfigMapList", "apiVersion": "v1",
                               "metadata": {"resourceVersion": "1"}, "items": []}),
                    ),
                    (Informer::ListRefused(_), true) => unreachable!("no list, no watch"),
                };
                let response = Response::builder()
                    .status(code)
                    .header("content-type", "application/json")
                    .body(Body::from(serde_json::to_vec(&answer).unwrap()))
                    .unwrap();
                reply.send_response(response);
            }
        });
        (Client::new(service, "default"), MockApi { seen, task })
    }

    /// The informer's requests so far: whether each was a WATCH, and when.
    pub fn informer_requests(&self) -> Vec<(bool, Instant)> {
        let seen = self.seen.lock().unwrap();
        seen.iter().map(|s| (s.uri.contains("watch=true"), s.at)).collect()
    }
}

fn answer(scenario: Scenario, nth: usize, seen: &Seen) -> (StatusCode, Value) {
    match scenario {
        Scenario::Forbidden => status(
            403,
            "Forbidden",
            "configmaps is forbidden: User \"system:serviceaccount:default:my-controller\" cannot create resource",
        ),
        Scenario::Immutable => status(
            422,
            "Invalid",
            "ConfigMap \"my-config\" is invalid: data: Forbidden: field is immutable when `immutable` is set",
        ),
        Scenario::AlreadyExists => {
            status(409, "AlreadyExists", "configmaps \"my-config\" already exists")
        }
        Scenario::Unanswered => unreachable!("never answered"),
        Scenario::ConflictOnce if nth == 1 => status(
            409,
            "Conflict",
            "Operation cannot be fulfilled on configmaps \"my-config\": the object has been modified",
        ),
        Scenario::Accept | Scenario::ConflictOnce => {
            let code =
                if seen.method == Method::POST { StatusCode::CREATED } else { StatusCode::OK };
            let mut object = seen.body.clone();
            object["metadata"]["resourceVersion"] = json!("100");
            (code, object)
        }
    }
}

fn status(code: u16, reason: &str, message: &str) -> (StatusCode, Value) {
    (
        StatusCode::from_u16(code).unwrap(),
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": message, "reason": reason, "code": code}),
    )
}

/// A reconcile context on `client` whose cache holds `cached` (or nothing),
/// as the informer would have left it after its initial list.
pub fn context(client: Client, cached: Option<ConfigMap>) -> (Context, Writer<ConfigMap>) {
    let (cache, mut writer) = reflector::store();
    writer.apply_watcher_event(&watcher::Event::Init);
    if let Some(cm) = cached {
        writer.apply_watcher_event(&watcher::Event::InitApply(cm));
    }
    writer.apply_watcher_event(&watcher::Event::InitDone);
    let reporter = Reporter { controller: "my-controller".into(), instance: None };
    let metrics = Arc::new(Metrics::default());
    let ctx = Context {
        client: client.clone(),
        cache,
        desired: Desired::default(),
        recorder: crate::events::Recorder::new(client, reporter, metrics.events_dropped.clone()),
        metrics,
        reconcile_delay: Duration::ZERO,
        reconcile_timeout: Duration::from_secs(30),
        pace: Default::default(),
    };
    (ctx, writer)
}

/// my-config as someone changed it: other data, a label of theirs, version 42.
pub fn drifted() -> ConfigMap {
    let mut cm = Desired::default().to_config_map();
    cm.metadata.resource_version = Some("42".into());
    cm.metadata.uid = Some("5e6f0a6c-0000-4000-8000-000000000001".into());
    cm.metadata.labels = Some(BTreeMap::from([("team".into(), "payments".into())]));
    cm.data = Some(BTreeMap::from([
        ("app.conf".into(), "env=dev".into()),
        ("extra".into(), "added by hand".into()),
    ]));
    cm
}

/// [`drifted`], and frozen: `immutable: true`.
pub fn frozen() -> ConfigMap {
    ConfigMap { immutable: Some(true), ..drifted() }
}

/// my-config exactly as desired.
pub fn in_sync() -> ConfigMap {
    let mut cm = Desired::default().to_config_map();
    cm.metadata.resource_version = Some("43".into());
    cm
}
