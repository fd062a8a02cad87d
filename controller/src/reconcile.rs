//! One reconcile of one key: read from the cache → compare → create, update or nothing.
//!
//! Course, stage 1, step 4 (`syncHandler`): level-triggered, so it does not care
//! which event woke it up; it looks at what is there now and makes it right.

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use k8s_openapi::{
    api::core::v1::ConfigMap, apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry,
};
use kube::{
    Api, Client, Resource,
    api::PostParams,
    runtime::{
        events::{Event, EventType},
        reflector::{ObjectRef, Store},
    },
};
use tokio::time::Instant;
use tracing::{debug, info, warn};

use crate::{
    desired::Desired,
    metrics::{Metrics, ReconcileResult, WriteVerb},
};

/// The log line of a create; the e2e suite looks for it.
pub const LOG_CREATED: &str = "created ConfigMap with the desired data";
/// The log line of a correction; the e2e suite looks for it.
pub const LOG_CORRECTED: &str = "corrected drifted data";
/// The log line when the object is immutable and drifted; the e2e suite looks for it.
pub const LOG_IMMUTABLE: &str =
    "immutable with other data: not updated, not retried (delete it to have it recreated)";
/// The reason of the Warning Event for an immutable, drifted object.
pub const REASON_IMMUTABLE: &str = "Immutable";
/// The log line when another controller owns the object; the e2e suite looks for it.
pub const LOG_OWNED: &str =
    "controlled by another owner with other data: not updated (it is theirs to keep)";
/// The log line when corrections come too often in a row; the e2e suite looks for it.
pub const LOG_PACED: &str = "corrected again and again: another writer? the next correction waits";
/// The reason of the Warning Event for both: someone else keeps other data there.
pub const REASON_CONTENDED: &str = "Contended";

/// The key of the one object a reconcile is about: the queue's item.
pub type Key = ObjectRef<ConfigMap>;

/// The field manager recorded in `managedFields` for this controller's writes.
pub const FIELD_MANAGER: &str = "my-controller";

/// Everything a reconcile needs, shared by the workers.
pub struct Context {
    pub client: Client,
    /// The informer's cache (the course's lister): reads come from here.
    pub cache: Store<ConfigMap>,
    pub desired: Desired,
    pub metrics: Arc<Metrics>,
    /// Sends Events from a task of its own (see [`crate::events`]).
    pub recorder: crate::events::Recorder,
    /// A pause at the start of each reconcile, for the course's step 3
    /// experiment (events arriving while a reconcile runs). Zero normally.
    pub reconcile_delay: Duration,
    /// How long a reconcile's requests may take (`--reconcile-timeout`).
    pub reconcile_timeout: Duration,
    /// The pace of corrections (one key: one pace).
    pub pace: Mutex<crate::pace::Pace>,
}

/// What a successful reconcile did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Created,
    Corrected,
    Unchanged,
    /// A finalizer holds the object while it is deleted: the controller does
    /// not fight the deletion; the Delete event brings it back here.
    Deleting,
    /// Someone set `immutable: true` and other data: no update can succeed
    /// (the API server answers 422 to any change of `data`), so none is sent
    /// and nothing is retried; one warning line and a Warning Event say so.
    /// Taking the object over (delete + create) would need `delete` in the
    /// Role; whoever froze it decides instead — deleting it is enough, the
    /// controller then recreates it. The next event or resync looks again.
    Immutable,
    /// Another controller owns it (an ownerReference with `controller: true`)
    /// and keeps other data there: not written, reported. Whatever owns it
    /// decides; the controller does not fight over it.
    OwnedElsewhere,
    /// Corrected too often in a row (another writer puts other data back):
    /// the next correction waits this long ([`crate::pace`]).
    Paced(Duration),
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// 409: the object changed (or appeared) since the cache saw it. The retry
    /// reads the newer version; it is not worth an error line.
    #[error("conflict writing {key}: {source}")]
    Conflict {
        key: String,
        #[source]
        source: kube::Error,
    },
    /// 409 AlreadyExists on a create: the object exists though the cache
    /// says it does not — the cache is behind. No event is sure to follow
    /// (the watch may be what is behind), so it is retried with backoff.
    #[error("create of {key} answered AlreadyExists: the cache is behind the API server")]
    AlreadyExists {
        key: String,
        #[source]
        source: kube::Error,
    },
    /// The API server did not answer within `--reconcile-timeout`.
    #[error("no answer from the API server within {after:?}: the reconcile of {key} was abandoned")]
    TimedOut { key: String, after: Duration },
    #[error("cannot {verb} ConfigMap {key}: {source}")]
    Write {
        verb: &'static str,
        key: String,
        #[source]
        source: kube::Error,
    },
}

impl Error {
    pub fn is_conflict(&self) -> bool {
        matches!(self, Error::Conflict { .. })
    }

    fn from_write(verb: &'static str, key: &Key, source: kube::Error) -> Self {
        let key = show(key);
        match &source {
            kube::Error::Api(status) if status.code == 409 && verb == "create" => {
                Error::AlreadyExists { key, source }
            }
            kube::Error::Api(status) if status.code == 409 => Error::Conflict { key, source },
            _ => Error::Write { verb, key, source },
        }
    }
}

/// `namespace/name` of a key, for logs and errors (`ObjectRef`'s own
/// Display also names the kind and version).
pub fn show(key: &Key) -> String {
    match &key.namespace {
        Some(ns) => format!("{ns}/{}", key.name),
        None => key.name.clone(),
    }
}

/// The cache key of the desired object.
pub fn key_of(desired: &Desired) -> Key {
    ObjectRef::new(desired.name()).within(desired.namespace())
}

/// Reconciles `key`. It reads the object from the cache — it may be absent,
/// which is exactly the case kube-runtime's `Controller` never reconciles —
/// and writes only when the live data differs from the desired data.
pub async fn reconcile(ctx: &Context, key: &Key) -> Result<Outcome, Error> {
    if !ctx.reconcile_delay.is_zero() {
        tokio::time::sleep(ctx.reconcile_delay).await;
    }
    let desired = &ctx.desired;
    let api: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), desired.namespace());
    let params = PostParams { field_manager: Some(FIELD_MANAGER.into()), ..PostParams::default() };
    // Read the latest state at processing time, not the state the event carried.
    match ctx.cache.get(key) {
        None => {
            let created = api
                .create(&params, &desired.to_config_map())
                .await
                .map_err(|e| Error::from_write("create", key, e))?;
            ctx.metrics.wrote(WriteVerb::create);
            info!(key = %show(key), "{LOG_CREATED}");
            publish(
                ctx,
                &created,
                EventType::Normal,
                "Created",
                "Create",
                "created with the desired data",
            );
            Ok(Outcome::Created)
        }
        Some(live) if live.metadata.deletion_timestamp.is_some() => {
            debug!(key = %show(key), "being deleted; it will be recreated once it is gone");
            Ok(Outcome::Deleting)
        }
        Some(live) if desired.is_satisfied_by(&live) => {
            debug!(key = %show(key), "in sync, nothing to do");
            Ok(Outcome::Unchanged)
        }
        Some(live) if controller_owner(&live).is_some() => Ok(report_owned(ctx, key, &live)),
        // Checked before writing, so the 422 is not even provoked.
        Some(live) if live.immutable == Some(true) => Ok(report_immutable(ctx, key, &live)),
        Some(live) => {
            let wait = ctx.pace.lock().unwrap_or_else(|p| p.into_inner()).wait(Instant::now());
            if let Some(wait) = wait {
                return Ok(report_paced(ctx, key, &live, wait));
            }
            // `live` is an `Arc` shared with the cache: `corrected` works on an
            // owned clone (the course's DeepCopy). Replace sends the cached
            // resourceVersion, so a concurrent change yields 409 and a retry
            // instead of overwriting it.
            let corrected =
                match api.replace(desired.name(), &params, &desired.corrected(&live)).await {
                    Ok(corrected) => corrected,
                    // Frozen after the cache's copy was taken (a race with the
                    // person setting `immutable`): the same report, no retry.
                    Err(e) if is_immutable_rejection(&e) => {
                        return Ok(report_immutable(ctx, key, &live));
                    }
                    Err(e) => return Err(Error::from_write("update", key, e)),
                };
            ctx.metrics.wrote(WriteVerb::update);
            ctx.pace.lock().unwrap_or_else(|p| p.into_inner()).corrected(Instant::now());
            info!(key = %show(key), "{LOG_CORRECTED}");
            publish(
                ctx,
                &corrected,
                EventType::Normal,
                "Corrected",
                "Update",
                "data put back to the desired state",
            );
            Ok(Outcome::Corrected)
        }
    }
}

/// The API server's 422 for a change of an immutable ConfigMap's data
/// ("data: Forbidden: field is immutable when `immutable` is set").
fn is_immutable_rejection(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(status) if status.code == 422 && status.message.contains("immutable"))
}

/// One warning line and one Warning Event (the Recorder folds repeats into
/// the same Event's series), then [`Outcome::Immutable`]: a success for the
/// failure policy, so a request that cannot succeed is not retried.
fn report_immutable(ctx: &Context, key: &Key, live: &ConfigMap) -> Outcome {
    warn!(key = %show(key), "{LOG_IMMUTABLE}");
    publish(
        ctx,
        live,
        EventType::Warning,
        REASON_IMMUTABLE,
        "Update",
        "immutable is set and data differs from the desired data: not updated; \
         delete the ConfigMap to have it recreated with the desired data",
    );
    Outcome::Immutable
}

/// The owner with `controller: true`, if another controller owns `live`
/// (this one never sets ownerReferences on what it keeps).
fn controller_owner(live: &ConfigMap) -> Option<String> {
    let owners = live.metadata.owner_references.as_ref()?;
    let owner = owners.iter().find(|o| o.controller == Some(true))?;
    Some(format!("{}/{}", owner.kind, owner.name))
}

/// The field manager that last wrote a key of `data`, from managedFields: who
/// keeps putting other data back. A write moves the keys it changes to its
/// manager, so the drifted keys belong to the writer; if that is this
/// controller's own manager, it was another instance of it.
fn last_data_writer(live: &ConfigMap) -> String {
    let writes_data = |f: &&ManagedFieldsEntry| {
        let data = f.fields_v1.as_ref().and_then(|v| v.0.get("f:data")?.as_object().cloned());
        data.is_some_and(|keys| keys.keys().any(|k| k.starts_with("f:")))
    };
    let fields = live.metadata.managed_fields.iter().flatten();
    match fields.filter(writes_data).max_by_key(|f| f.time.as_ref().map(|t| t.0)) {
        Some(f) if f.manager.as_deref() == Some(FIELD_MANAGER) => {
            format!("another {FIELD_MANAGER} (same field manager)")
        }
        Some(f) => match &f.manager {
            Some(manager) => format!("field manager {manager:?}"),
            None => "someone".into(),
        },
        None => "someone".into(),
    }
}

/// One warning line and one Warning Event; no write, no retry.
fn report_owned(ctx: &Context, key: &Key, live: &ConfigMap) -> Outcome {
    let owner = controller_owner(live).unwrap_or_default();
    warn!(key = %show(key), %owner, "{LOG_OWNED}");
    let note = format!("controlled by {owner} with other data: not updated");
    publish(ctx, live, EventType::Warning, REASON_CONTENDED, "Update", &note);
    Outcome::OwnedElsewhere
}

/// One warning line and one Warning Event; the correction comes after `wait`.
fn report_paced(ctx: &Context, key: &Key, live: &ConfigMap, wait: Duration) -> Outcome {
    let (row, news) = {
        let mut pace = ctx.pace.lock().unwrap_or_else(|p| p.into_inner());
        (pace.row(), pace.news())
    };
    let retry_in = crate::telemetry::rounded(wait);
    if !news {
        debug!(key = %show(key), %retry_in, "still waiting before the next correction");
        return Outcome::Paced(wait);
    }
    let writer = last_data_writer(live);
    warn!(key = %show(key), corrections_in_a_row = row, %writer, %retry_in, "{LOG_PACED}");
    // The same words for every wait while the same writer goes on, so the
    // Recorder folds them into one Event; another writer gets an Event of its own.
    let note = format!(
        "{writer} keeps putting other data back; corrections are paced: {}",
        crate::pace::SUMMARY
    );
    publish(ctx, live, EventType::Warning, REASON_CONTENDED, "Update", &note);
    Outcome::Paced(wait)
}

/// The metric label of a reconcile's result.
pub fn result_label(result: &Result<Outcome, Error>) -> ReconcileResult {
    match result {
        Ok(Outcome::Created) => ReconcileResult::created,
        Ok(Outcome::Corrected) => ReconcileResult::updated,
        Ok(Outcome::Unchanged) => ReconcileResult::unchanged,
        Ok(Outcome::Deleting) => ReconcileResult::deleting,
        Ok(Outcome::Immutable) => ReconcileResult::immutable,
        Ok(Outcome::OwnedElsewhere | Outcome::Paced(_)) => ReconcileResult::contended,
        Err(Error::TimedOut { .. }) => ReconcileResult::timeout,
        Err(e) if e.is_conflict() => ReconcileResult::conflict,
        Err(Error::AlreadyExists { .. }) => ReconcileResult::behind,
        Err(_) => ReconcileResult::error,
    }
}

/// Records a Kubernetes Event on the object so `kubectl describe` tells the
/// story. Handed to the Event task ([`crate::events`]): the reconcile does not
/// wait for it, and an Event that cannot be written does not fail it.
fn publish(
    ctx: &Context,
    obj: &ConfigMap,
    type_: EventType,
    reason: &str,
    action: &str,
    note: &str,
) {
    let event = Event {
        type_,
        reason: reason.into(),
        note: Some(note.into()),
        action: action.into(),
        secondary: None,
    };
    ctx.recorder.publish(event, obj.object_ref(&()));
}

#[cfg(test)]
mod tests {
    use http::Method;
    use serde_json::json;

    use super::*;
    use crate::fixtures::{MockApi, Scenario, context, drifted, frozen, in_sync};

    const CONFIG_MAPS: &str = "/api/v1/namespaces/default/configmaps";

    #[tokio::test]
    async fn missing_sends_exactly_one_create_with_the_desired_object() {
        let (client, api) = MockApi::start(Scenario::Accept);
        let (ctx, _writer) = context(client, None);
        let key = key_of(&ctx.desired);
        assert_eq!(reconcile(&ctx, &key).await.unwrap(), Outcome::Created);
        assert_eq!(ctx.metrics.writes(WriteVerb::create), 1);
        drop(ctx);
        let seen = api.finish().await;
        let writes: Vec<_> = seen.iter().filter(|s| !s.is_event()).collect();
        assert_eq!(writes.len(), 1, "{writes:#?}");
        assert_eq!(writes[0].method, Method::POST);
        assert_eq!(writes[0].uri, format!("{CONFIG_MAPS}?&fieldManager=my-controller"));
        let body = &writes[0].body;
        assert_eq!(body["metadata"]["name"], "my-config");
        assert_eq!(body["metadata"]["namespace"], "default");
        assert_eq!(body["data"], json!({"app.conf": "env=prod\nreplicas=3"}));
        let events: Vec<_> = seen.iter().filter(|s| s.is_event()).collect();
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].body["reason"], "Created");
        assert_eq!(events[0].body["regarding"]["name"], "my-config");
    }

    #[tokio::test]
    async fn drifted_sends_exactly_one_update_keeping_labels_and_version() {
        let (client, api) = MockApi::start(Scenario::Accept);
        let (ctx, _writer) = context(client, Some(drifted()));
        let key = key_of(&ctx.desired);
        assert_eq!(reconcile(&ctx, &key).await.unwrap(), Outcome::Corrected);
        drop(ctx);
        let seen = api.finish().await;
        let writes: Vec<_> = seen.iter().filter(|s| !s.is_event()).collect();
        assert_eq!(writes.len(), 1, "{writes:#?}");
        assert_eq!(writes[0].method, Method::PUT);
        assert_eq!(writes[0].uri, format!("{CONFIG_MAPS}/my-config?&fieldManager=my-controller"));
        let body = &writes[0].body;
        // The whole desired data, and nothing else: "extra" is gone.
        assert_eq!(body["data"], json!({"app.conf": "env=prod\nreplicas=3"}));
        assert_eq!(body["metadata"]["labels"], json!({"team": "payments"}));
        // Optimistic concurrency: the version the cache saw.
        assert_eq!(body["metadata"]["resourceVersion"], "42");
        let events: Vec<_> = seen.iter().filter(|s| s.is_event()).collect();
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].body["reason"], "Corrected");
    }

    /// Another controller's object (a controller ownerReference) with other
    /// data: reported once as a Warning Event, never written.
    #[tokio::test]
    async fn another_controllers_object_is_not_fought_over() {
        let (client, api) = MockApi::start(Scenario::Accept);
        let mut owned = drifted();
        owned.metadata.owner_references =
            Some(vec![k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                api_version: "apps/v1".into(),
                kind: "ReplicaSet".into(),
                name: "theirs".into(),
                uid: "1".into(),
                controller: Some(true),
                ..Default::default()
            }]);
        let (ctx, _writer) = context(client, Some(owned));
        let key = key_of(&ctx.desired);
        for _ in 0..3 {
            assert_eq!(reconcile(&ctx, &key).await.unwrap(), Outcome::OwnedElsewhere);
        }
        drop(ctx);
        let seen = api.finish().await;
        assert!(seen.iter().all(|s| s.is_event()), "no ConfigMap write: {seen:#?}");
        assert!(seen.iter().all(|s| s.body["reason"] == REASON_CONTENDED), "{seen:#?}");
    }

    /// A writer that undoes every correction (the cache keeps showing other
    /// data): three corrections at once, then the next one waits.
    #[tokio::test(start_paused = true)]
    async fn corrections_in_a_row_are_paced() {
        let (client, api) = MockApi::start(Scenario::Accept);
        let (ctx, _writer) = context(client, Some(drifted()));
        let key = key_of(&ctx.desired);
        let mut outcomes = Vec::new();
        for _ in 0..5 {
            outcomes.push(reconcile(&ctx, &key).await.unwrap());
        }
        let wait = Duration::from_secs(1);
        assert_eq!(outcomes[..3], [Outcome::Corrected; 3]);
        assert_eq!(outcomes[3..], [Outcome::Paced(wait); 2]);
        tokio::time::advance(wait).await;
        assert_eq!(reconcile(&ctx, &key).await.unwrap(), Outcome::Corrected);
        drop(ctx);
        let puts = api.finish().await.iter().filter(|s| s.method == Method::PUT).count();
        assert_eq!(puts, 4);
    }

    /// Beside a writer that keeps putting its data back, the wait is reported
    /// in a Warning Event naming that writer's field manager (from managedFields).
    #[tokio::test(start_paused = true)]
    async fn a_paced_correction_names_the_other_field_manager_in_a_warning() {
        let (client, api) = MockApi::start(Scenario::Accept);
        let mut theirs = drifted();
        theirs.metadata.managed_fields = written_by(&[(
            "ci-job",
            "2026-12-01T10:00:02Z",
            serde_json::json!({"f:data": {"f:app.conf": {}, "f:extra": {}}}),
        )])
        .metadata
        .managed_fields;
        let (ctx, _writer) = context(client, Some(theirs));
        let key = key_of(&ctx.desired);
        for _ in 0..crate::pace::FREE {
            assert_eq!(reconcile(&ctx, &key).await.unwrap(), Outcome::Corrected);
        }
        assert!(matches!(reconcile(&ctx, &key).await.unwrap(), Outcome::Paced(_)));
        drop(ctx);
        let seen = api.finish().await;
        let warnings: Vec<_> =
            seen.iter().filter(|s| s.is_event() && s.body["type"] == "Warning").collect();
        assert_eq!(warnings.len(), 1, "{warnings:#?}");
        let warning = &warnings[0];
        assert_eq!(warning.method, Method::POST);
        assert_eq!(warning.body["reason"], REASON_CONTENDED);
        assert_eq!(warning.body["regarding"]["name"], "my-config");
        let note = warning.body["note"].as_str().unwrap();
        assert!(note.starts_with("field manager \"ci-job\" keeps putting"), "{note}");
        assert!(note.ends_with(crate::pace::SUMMARY), "{note}");
        let puts = seen.iter().filter(|s| s.method == Method::PUT).count();
        assert_eq!(puts, crate::pace::FREE as usize);
    }

    #[tokio::test]
    async fn in_sync_sends_nothing() {
        let (client, api) = MockApi::start(Scenario::Accept);
        let (ctx, _writer) = context(client, Some(in_sync()));
        let key = key_of(&ctx.desired);
        for _ in 0..3 {
            assert_eq!(reconcile(&ctx, &key).await.unwrap(), Outcome::Unchanged);
        }
        drop(ctx);
        let seen = api.finish().await;
        assert!(seen.is_empty(), "{seen:#?}");
    }

    #[tokio::test]
    async fn an_object_being_deleted_is_left_alone() {
        let (client, api) = MockApi::start(Scenario::Accept);
        let mut terminating = drifted();
        terminating.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
            ));
        terminating.metadata.finalizers = Some(vec!["example.com/hold".into()]);
        let (ctx, _writer) = context(client, Some(terminating));
        let key = key_of(&ctx.desired);
        assert_eq!(reconcile(&ctx, &key).await.unwrap(), Outcome::Deleting);
        drop(ctx);
        assert!(api.finish().await.is_empty());
    }

    #[tokio::test]
    async fn immutable_and_drifted_is_reported_without_a_write() {
        let (client, api) = MockApi::start(Scenario::Accept);
        let (ctx, _writer) = context(client, Some(frozen()));
        let key = key_of(&ctx.desired);
        let result = reconcile(&ctx, &key).await;
        assert_eq!(result.as_ref().unwrap(), &Outcome::Immutable);
        assert_eq!(result_label(&result), ReconcileResult::immutable);
        drop(ctx);
        let seen = api.finish().await;
        let writes: Vec<_> = seen.iter().filter(|s| !s.is_event()).collect();
        assert!(writes.is_empty(), "no request can change it: {writes:#?}");
        let events: Vec<_> = seen.iter().filter(|s| s.is_event()).collect();
        assert_eq!(events.len(), 1, "{events:#?}");
        assert_eq!(events[0].method, Method::POST);
        assert_eq!(events[0].body["reason"], REASON_IMMUTABLE);
        assert_eq!(events[0].body["type"], "Warning");
        assert_eq!(events[0].body["regarding"]["name"], "my-config");
    }

    #[tokio::test]
    async fn immutable_and_in_sync_is_unchanged() {
        let (client, api) = MockApi::start(Scenario::Accept);
        let frozen_in_sync = ConfigMap { immutable: Some(true), ..in_sync() };
        let (ctx, _writer) = context(client, Some(frozen_in_sync));
        let key = key_of(&ctx.desired);
        assert_eq!(reconcile(&ctx, &key).await.unwrap(), Outcome::Unchanged);
        drop(ctx);
        assert!(api.finish().await.is_empty());
    }

    #[tokio::test]
    async fn a_422_for_immutable_data_is_reported_like_the_cached_flag() {
        let (client, api) = MockApi::start(Scenario::Immutable);
        let (ctx, _writer) = context(client, Some(drifted()));
        let key = key_of(&ctx.desired);
        assert_eq!(reconcile(&ctx, &key).await.unwrap(), Outcome::Immutable);
        assert_eq!(ctx.metrics.writes(WriteVerb::update), 0);
        drop(ctx);
        let seen = api.finish().await;
        let writes: Vec<_> = seen.iter().filter(|s| !s.is_event()).collect();
        assert_eq!(writes.len(), 1, "the one refused update: {writes:#?}");
        assert_eq!(writes[0].method, Method::PUT);
        let events: Vec<_> = seen.iter().filter(|s| s.is_event()).collect();
        assert_eq!(events.len(), 1, "{events:#?}");
        assert_eq!(events[0].body["reason"], REASON_IMMUTABLE);
    }

    #[tokio::test]
    async fn a_409_is_a_conflict_not_an_error() {
        let (client, _api) = MockApi::start(Scenario::ConflictOnce);
        let (ctx, _writer) = context(client, Some(drifted()));
        let key = key_of(&ctx.desired);
        let result = reconcile(&ctx, &key).await;
        assert!(result.as_ref().unwrap_err().is_conflict(), "{result:?}");
        assert_eq!(result_label(&result), ReconcileResult::conflict);
        assert_eq!(ctx.metrics.writes(WriteVerb::update), 0);
    }

    /// managedFields as the API server writes them after an Update: the
    /// creator keeps `f:data`'s `.`, the keys belong to whoever changed them.
    fn written_by(entries: &[(&str, &str, serde_json::Value)]) -> ConfigMap {
        let mut cm = ConfigMap::default();
        cm.metadata.managed_fields = Some(
            entries
                .iter()
                .map(|(manager, time, fields)| ManagedFieldsEntry {
                    manager: Some((*manager).into()),
                    operation: Some("Update".into()),
                    time: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                        time.parse().unwrap(),
                    )),
                    fields_v1: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::FieldsV1(
                        fields.clone(),
                    )),
                    ..ManagedFieldsEntry::default()
                })
                .collect(),
        );
        cm
    }

    #[test]
    fn the_writer_named_is_the_one_owning_the_drifted_keys() {
        let created = serde_json::json!({"f:data": {".": {}}, "f:metadata": {"f:labels": {}}});
        let key = serde_json::json!({"f:data": {"f:app.conf": {}}});
        let edited = written_by(&[
            ("e2e-fault", "2026-12-01T10:00:00Z", created.clone()),
            (FIELD_MANAGER, "2026-12-01T10:00:01Z", serde_json::json!({"f:metadata": {}})),
            ("kubectl-edit", "2026-12-01T10:00:02Z", key.clone()),
        ]);
        assert_eq!(last_data_writer(&edited), "field manager \"kubectl-edit\"");
        // The creator holds only `f:data`'s `.`: not a writer of the data.
        let twin = written_by(&[
            ("e2e-fault", "2026-12-01T10:00:09Z", created),
            (FIELD_MANAGER, "2026-12-01T10:00:01Z", key),
        ]);
        assert_eq!(last_data_writer(&twin), "another my-controller (same field manager)");
        assert_eq!(last_data_writer(&ConfigMap::default()), "someone");
    }
}
