//! The room as the instructor's page shows it, kept by informers: one LIST, then WATCH, of
//! each kind the page needs, cluster-wide and narrowed to the room's namespaces (the course's
//! own pattern, no polling). Each change bumps a version that the page's streams wait on.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use futures::StreamExt as _;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Event, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::runtime::WatchStreamExt as _;
use kube::runtime::watcher::{self, Event as Change};
use kube::{Api, Client, Resource, ResourceExt as _};
use serde::{Serialize, de::DeserializeOwned};

use controller::desired::DEFAULT_NAME;
use labkit::deployment::{NAME as DEPLOYMENT, SELECTOR};
use labkit::tr;

/// The ConfigMap `grade --room` hands a result in as, in the attendee's namespace.
pub const GRADE: &str = "lab-kit-grade";
/// Its one key: the result as `grade --json` writes it.
pub const GRADE_KEY: &str = "grade.json";
/// How many Warning Events a seat keeps, newest last.
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

/// One attendee's namespace, as last seen.
#[derive(Clone, Default, Serialize)]
pub struct Seat {
    namespace: String,
    /// `lab up` made the controller's Deployment.
    lab_up: bool,
    /// The controller's pods: ready or not, and their restarts.
    pods: BTreeMap<String, (bool, i32)>,
    config: Config,
    /// The course's experiments, as the informer saw them happen: my-config created, brought
    /// back after a delete, its data put back after a change.
    created: bool,
    healed: bool,
    restored: bool,
    /// The result handed in by `grade --room` (self-reported); one that does not read as a
    /// grade's is none.
    grade: Option<serde_json::Value>,
    warnings: Vec<Warning>,
    /// When anything of this namespace last changed while the page watched.
    activity: Option<String>,
}

#[derive(Clone, Serialize)]
struct Warning {
    /// The Event's name: a repeat updates it in place.
    name: String,
    reason: String,
    message: String,
}

/// The room: its seats by namespace, and a version bumped on every change.
#[derive(Clone)]
pub struct View {
    seats: Arc<Mutex<BTreeMap<String, Seat>>>,
    pub changed: Arc<tokio::sync::watch::Sender<u64>>,
}

impl View {
    pub fn new(namespaces: &[String]) -> View {
        let seat = |n: &String| (n.clone(), Seat { namespace: n.clone(), ..Seat::default() });
        View {
            seats: Arc::new(Mutex::new(namespaces.iter().map(seat).collect())),
            changed: Arc::new(tokio::sync::watch::channel(0).0),
        }
    }

    /// Every seat, in namespace order.
    pub fn seats(&self) -> Vec<Seat> {
        self.seats.lock().unwrap_or_else(|p| p.into_inner()).values().cloned().collect()
    }

    /// The informers, for as long as the page is served: an error is said, and the watch
    /// retried with growing gaps (kube's default backoff), as the controller's own are.
    pub async fn watch(&self, client: &Client) {
        let named =
            |name: &str| watcher::Config::default().fields(&format!("metadata.name={name}"));
        let all = watcher::Config::default;
        tokio::join!(
            self.follow(client, named(DEPLOYMENT), deployment),
            self.follow(client, all().labels(SELECTOR), pod),
            self.follow(client, named(GRADE), grade),
            self.follow(client, named(DEFAULT_NAME), config),
            self.follow(client, all().fields("type=Warning"), warning),
        );
    }

    /// One informer: each object of the room's namespaces given to `apply`, with how it came.
    /// A relist (after a 410) has no Delete for what vanished meanwhile: what it did not list
    /// again is deleted then.
    async fn follow<K>(
        &self,
        client: &Client,
        config: watcher::Config,
        apply: fn(&mut Seat, &K, Seen),
    ) where
        K: Resource<DynamicType = ()> + Clone + std::fmt::Debug + DeserializeOwned + Send + 'static,
    {
        let api = Api::<K>::all(client.clone());
        let mut changes = watcher::watcher(api, config).default_backoff().boxed();
        let (mut known, mut listed) = (BTreeMap::new(), BTreeMap::new());
        while let Some(change) = changes.next().await {
            let (object, seen) = match change {
                Ok(Change::Apply(o)) => (o, Seen::Live),
                Ok(Change::InitApply(o)) => (o, Seen::Listed),
                Ok(Change::Delete(o)) => (o, Seen::Deleted),
                Ok(Change::Init) => {
                    listed.clear();
                    continue;
                }
                Ok(Change::InitDone) => {
                    let gone = std::mem::replace(&mut known, std::mem::take(&mut listed));
                    let gone = gone.into_iter().filter(|(key, _)| !known.contains_key(key));
                    gone.for_each(|(_, object)| self.seen(&object, Seen::Deleted, apply));
                    continue;
                }
                Err(error) => {
                    eprintln!("{}", tr!("room serve: a watch failed, retried: {error}", error));
                    continue;
                }
            };
            let key = (object.namespace().unwrap_or_default(), object.name_any());
            match seen {
                Seen::Listed => listed.insert(key, object.clone()),
                Seen::Live => known.insert(key, object.clone()),
                Seen::Deleted => known.remove(&key),
            };
            self.seen(&object, seen, apply);
        }
    }

    /// `object` given to `apply` in its seat, if it is in one; the page told of the change.
    fn seen<K: Resource>(&self, object: &K, seen: Seen, apply: fn(&mut Seat, &K, Seen)) {
        let mut seats = self.seats.lock().unwrap_or_else(|p| p.into_inner());
        let Some(seat) = seats.get_mut(&object.namespace().unwrap_or_default()) else { return };
        apply(seat, object, seen);
        if seen != Seen::Listed {
            seat.activity = Some(Timestamp::now().to_string());
        }
        drop(seats);
        self.changed.send_modify(|v| *v += 1);
    }
}

/// How an object came: with the first LIST, changed since, or deleted.
#[derive(Clone, Copy, PartialEq)]
enum Seen {
    Listed,
    Live,
    Deleted,
}

fn deployment(seat: &mut Seat, _: &Deployment, seen: Seen) {
    seat.lab_up = seen != Seen::Deleted;
}

fn pod(seat: &mut Seat, pod: &Pod, seen: Seen) {
    if seen == Seen::Deleted {
        seat.pods.remove(&pod.name_any());
        return;
    }
    let status = pod.status.clone().unwrap_or_default();
    let ready = status
        .conditions
        .unwrap_or_default()
        .iter()
        .any(|c| c.type_ == "Ready" && c.status == "True");
    let restarts =
        status.container_statuses.unwrap_or_default().iter().map(|c| c.restart_count).sum();
    seat.pods.insert(pod.name_any(), (ready, restarts));
}

fn config(seat: &mut Seat, config_map: &ConfigMap, seen: Seen) {
    let now = match seen {
        Seen::Deleted => Config::Absent,
        _ if config_map.data.clone().unwrap_or_default() == controller::desired::default_data() => {
            Config::Right
        }
        _ => Config::Wrong,
    };
    if seen == Seen::Live && now == Config::Right {
        seat.healed |= seat.config == Config::Absent && seat.created;
        seat.restored |= seat.config == Config::Wrong;
    }
    seat.created |= now == Config::Right;
    seat.config = now;
}

fn grade(seat: &mut Seat, config_map: &ConfigMap, seen: Seen) {
    let text = config_map.data.as_ref().and_then(|d| d.get(GRADE_KEY));
    let read = text.filter(|_| seen != Seen::Deleted).and_then(|t| serde_json::from_str(t).ok());
    // The page reads these two: a grade without them (written by hand) is none.
    seat.grade =
        read.filter(|g: &serde_json::Value| g["graduated"].is_boolean() && g["rows"].is_array());
}

fn warning(seat: &mut Seat, event: &Event, seen: Seen) {
    if seen == Seen::Deleted {
        return;
    }
    seat.warnings.retain(|w| w.name != event.name_any());
    seat.warnings.push(Warning {
        name: event.name_any(),
        reason: event.reason.clone().unwrap_or_default(),
        message: event.message.clone().unwrap_or_default(),
    });
    let extra = seat.warnings.len().saturating_sub(WARNINGS_KEPT);
    seat.warnings.drain(..extra);
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
        let mut seat = Seat::default();
        config(&mut seat, &changed, Seen::Listed);
        config(&mut seat, &right, Seen::Listed);
        assert!(seat.created && !seat.restored, "a LIST is no experiment seen");
        config(&mut seat, &right, Seen::Deleted);
        assert!(seat.config == Config::Absent && !seat.healed);
        config(&mut seat, &right, Seen::Live);
        assert!(seat.healed && !seat.restored, "brought back after a delete");
        config(&mut seat, &changed, Seen::Live);
        assert!(seat.config == Config::Wrong);
        config(&mut seat, &right, Seen::Live);
        assert!(seat.restored, "its data put back after a change");
    }

    #[test]
    fn a_repeated_warning_is_updated_in_place_and_only_the_newest_are_kept() {
        let mut seat = Seat::default();
        for (name, message) in
            [("a", "1"), ("a", "2"), ("b", "3"), ("c", "4"), ("d", "5"), ("e", "6"), ("f", "7")]
        {
            let event = Event {
                metadata: kube::api::ObjectMeta { name: Some(name.into()), ..Default::default() },
                message: Some(message.into()),
                ..Event::default()
            };
            warning(&mut seat, &event, Seen::Live);
        }
        let kept: Vec<&str> = seat.warnings.iter().map(|w| w.message.as_str()).collect();
        assert_eq!(kept, ["3", "4", "5", "6", "7"]);
    }
}
