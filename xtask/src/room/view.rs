//! The room as the instructor's page shows it, kept by informers: one LIST, then WATCH, of
//! each kind the page needs, cluster-wide, into kube's reflector stores (a relist replaces
//! what a store holds), and each seat read from them when the page asks. Kept here is only
//! what no store can say: the experiments the page saw happen, and each namespace's last
//! change. Each change bumps a version that the page's streams wait on.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use futures::StreamExt as _;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Event, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::runtime::WatchStreamExt as _;
use kube::runtime::reflector::{self, ObjectRef, Store, store::Writer};
use kube::runtime::watcher::{self, Event as Change};
use kube::{Api, Client, Resource, ResourceExt as _};
use serde::{Serialize, de::DeserializeOwned};

use controller::desired::DEFAULT_NAME;
use labkit::deployment::{NAME as DEPLOYMENT, SELECTOR};
use labkit::tr;
use workqueue::WatchBackoff;

/// The ConfigMap `grade --room` hands a result in as, in the attendee's namespace.
pub const GRADE: &str = "lab-kit-grade";
/// Its one key: the result as JSON (docs/grade.md).
pub const GRADE_KEY: &str = "grade.json";
/// How many Warning Events a seat shows, newest last.
const WARNINGS_KEPT: usize = 5;

/// my-config as the course wants it, or not.
#[derive(Clone, Copy, Default, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
enum Config {
    #[default]
    Absent,
    Right,
    Wrong,
}

impl Config {
    fn of(config_map: Option<&ConfigMap>) -> Config {
        match config_map.map(|c| c.data.clone().unwrap_or_default()) {
            None => Config::Absent,
            Some(data) if data == controller::desired::default_data() => Config::Right,
            Some(_) => Config::Wrong,
        }
    }
}

/// What only the watch's events tell of a namespace: the course's experiments as the page
/// saw them happen (my-config created, brought back after a delete, its data put back after
/// a change), and when anything there last changed.
#[derive(Clone, Default, Serialize)]
struct Seen {
    /// my-config as its last event left it, to tell what the next one did.
    #[serde(skip)]
    config: Config,
    created: bool,
    healed: bool,
    restored: bool,
    activity: Option<String>,
}

/// One attendee's namespace, as the page shows it.
#[derive(Serialize)]
pub struct Seat {
    namespace: String,
    /// `lab up` made the controller's Deployment.
    lab_up: bool,
    /// The controller's pods: ready or not, and their restarts.
    pods: Vec<(bool, i32)>,
    config: Config,
    #[serde(flatten)]
    seen: Seen,
    /// The result handed in by `grade --room` (self-reported).
    grade: Option<serde_json::Value>,
    /// The newest Warning Events, newest last: reason and message.
    warnings: Vec<(String, String)>,
}

/// The room: the informers' stores, what they cannot say, and a version bumped on every change.
#[derive(Clone)]
pub struct View {
    namespaces: Arc<Vec<String>>,
    deployments: Store<Deployment>,
    pods: Store<Pod>,
    configs: Store<ConfigMap>,
    grades: Store<ConfigMap>,
    warnings: Store<Event>,
    seen: Arc<Mutex<BTreeMap<String, Seen>>>,
    pub changed: Arc<tokio::sync::watch::Sender<u64>>,
}

impl View {
    /// The view, and its informers to run for as long as the page is served: an error is
    /// said, and the watch retried with growing gaps, as the controller's own are
    /// ([`WatchBackoff`]).
    pub fn new(client: &Client, namespaces: &[String]) -> (View, impl Future<Output = ()> + use<>) {
        let (deployments, d) = reflector::store();
        let (pods, p) = reflector::store();
        let (configs, c) = reflector::store();
        let (grades, g) = reflector::store();
        let (warnings, w) = reflector::store();
        let seen = namespaces.iter().map(|n| (n.clone(), Seen::default())).collect();
        let view = View {
            namespaces: Arc::new(namespaces.to_vec()),
            deployments,
            pods,
            configs,
            grades,
            warnings,
            seen: Arc::new(Mutex::new(seen)),
            changed: Arc::new(tokio::sync::watch::channel(0).0),
        };
        let (me, client) = (view.clone(), client.clone());
        let named =
            |name: &str| watcher::Config::default().fields(&format!("metadata.name={name}"));
        let all = watcher::Config::default;
        let informers = async move {
            tokio::join!(
                me.follow(&client, named(DEPLOYMENT), d, |_, _| {}),
                me.follow(&client, all().labels(SELECTOR), p, |_, _| {}),
                me.follow(&client, named(DEFAULT_NAME), c, experiments),
                me.follow(&client, named(GRADE), g, |_, _| {}),
                me.follow(&client, all().fields("type=Warning"), w, |_, _| {}),
            );
        };
        (view, informers)
    }

    /// Every seat, in namespace order, read from the stores now.
    pub fn seats(&self) -> Vec<Seat> {
        let seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        let (events, pods) = (self.warnings.state(), self.pods.state());
        let seat = |ns: &String| {
            let config_map = |name: &str| ObjectRef::<ConfigMap>::new(name).within(ns);
            let here = |namespace: Option<String>| namespace.as_deref() == Some(ns.as_str());
            let pods = pods.iter().filter(|p| here(p.namespace()));
            let mut warnings: Vec<_> = events.iter().filter(|e| here(e.namespace())).collect();
            warnings.sort_by_key(|e| happened(e));
            let newest = &warnings[warnings.len().saturating_sub(WARNINGS_KEPT)..];
            let text = |t: &Option<String>| t.clone().unwrap_or_default();
            Seat {
                namespace: ns.clone(),
                lab_up: self.deployments.get(&ObjectRef::new(DEPLOYMENT).within(ns)).is_some(),
                pods: pods.map(|p| pod(p)).collect(),
                config: Config::of(self.configs.get(&config_map(DEFAULT_NAME)).as_deref()),
                seen: seen.get(ns).cloned().unwrap_or_default(),
                grade: self.grades.get(&config_map(GRADE)).and_then(|c| grade(&c)),
                warnings: newest.iter().map(|e| (text(&e.reason), text(&e.message))).collect(),
            }
        };
        self.namespaces.iter().map(seat).collect()
    }

    /// One informer into its store; each change of the room's namespaces given to `saw` too.
    async fn follow<K>(
        &self,
        client: &Client,
        config: watcher::Config,
        writer: Writer<K>,
        saw: fn(&mut Seen, &Change<K>),
    ) where
        K: Resource<DynamicType = ()>
            + Clone
            + std::fmt::Debug
            + DeserializeOwned
            + Send
            + Sync
            + 'static,
    {
        let changes = watcher::watcher(Api::<K>::all(client.clone()), config);
        let mut changes =
            reflector::reflector(writer, changes.backoff(WatchBackoff::default())).boxed();
        while let Some(change) = changes.next().await {
            let change = match change {
                Ok(change) => change,
                Err(error) => {
                    eprintln!("{}", tr!("room serve: a watch failed, retried: {error}", error));
                    continue;
                }
            };
            if let Change::Apply(o) | Change::InitApply(o) | Change::Delete(o) = &change {
                let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
                if let Some(seen) = seen.get_mut(&o.namespace().unwrap_or_default()) {
                    saw(seen, &change);
                    if !matches!(change, Change::InitApply(_)) {
                        seen.activity = Some(Timestamp::now().to_string());
                    }
                }
            }
            // A relist is shown once it is whole.
            if !matches!(change, Change::Init | Change::InitApply(_)) {
                self.changed.send_modify(|v| *v += 1);
            }
        }
    }
}

/// When an Event happened: kube's and client-go's newer ones carry eventTime, the older
/// lastTimestamp.
pub fn happened(event: &Event) -> Option<Timestamp> {
    event.last_timestamp.as_ref().map(|t| t.0).or(event.event_time.as_ref().map(|t| t.0))
}

/// A controller pod: ready or not, and its containers' restarts.
fn pod(pod: &Pod) -> (bool, i32) {
    let status = pod.status.clone().unwrap_or_default();
    let conditions = status.conditions.unwrap_or_default();
    let ready = conditions.iter().any(|c| c.type_ == "Ready" && c.status == "True");
    (ready, status.container_statuses.unwrap_or_default().iter().map(|c| c.restart_count).sum())
}

/// my-config's change, as the course's experiments make one: a LIST is none.
fn experiments(seen: &mut Seen, change: &Change<ConfigMap>) {
    let (now, live) = match change {
        Change::Apply(c) => (Config::of(Some(c)), true),
        Change::InitApply(c) => (Config::of(Some(c)), false),
        Change::Delete(_) => (Config::Absent, true),
        Change::Init | Change::InitDone => return,
    };
    if live && now == Config::Right {
        seen.healed |= seen.config == Config::Absent && seen.created;
        seen.restored |= seen.config == Config::Wrong;
    }
    seen.created |= now == Config::Right;
    seen.config = now;
}

/// A result handed in, if it reads as one: the page reads `graduated` and `rows` (a grade
/// written by hand without them is none).
fn grade(config_map: &ConfigMap) -> Option<serde_json::Value> {
    let text = config_map.data.as_ref()?.get(GRADE_KEY)?;
    let read: serde_json::Value = serde_json::from_str(text).ok()?;
    (read["graduated"].is_boolean() && read["rows"].is_array()).then_some(read)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn my_config(data: &[(&str, &str)]) -> ConfigMap {
        let data = data.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        ConfigMap { data: Some(data), ..ConfigMap::default() }
    }

    #[test]
    fn the_experiments_are_seen_as_they_happen_not_as_listed() {
        let (key, value) = controller::desired::default_data().pop_first().unwrap();
        let (right, changed) = (my_config(&[(&key, &value)]), my_config(&[(&key, "x")]));
        let mut seen = Seen::default();
        experiments(&mut seen, &Change::InitApply(changed.clone()));
        experiments(&mut seen, &Change::InitApply(right.clone()));
        assert!(seen.created && !seen.restored, "a LIST is no experiment seen");
        experiments(&mut seen, &Change::Delete(right.clone()));
        assert!(seen.config == Config::Absent && !seen.healed);
        experiments(&mut seen, &Change::Apply(right.clone()));
        assert!(seen.healed && !seen.restored, "brought back after a delete");
        experiments(&mut seen, &Change::Apply(changed));
        assert!(seen.config == Config::Wrong);
        experiments(&mut seen, &Change::Apply(right));
        assert!(seen.restored, "its data put back after a change");
    }

    #[test]
    fn a_grade_written_by_hand_without_what_the_page_reads_is_none() {
        let handed = |text: &str| {
            let data = [(GRADE_KEY.to_string(), text.to_string())].into();
            grade(&ConfigMap { data: Some(data), ..ConfigMap::default() })
        };
        assert!(handed(r#"{"graduated": true, "rows": []}"#).is_some());
        for bad in [r#"{"graduated": true}"#, r#"{"graduated": "false", "rows": []}"#, "no"] {
            assert!(handed(bad).is_none(), "{bad}");
        }
    }
}
