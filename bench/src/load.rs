//! Unrelated ConfigMaps: many objects in my-config's namespace that the
//! controller must not pay for. It watches one object through a field
//! selector, so neither its list nor its watch carries them and its memory
//! must not grow with them. In a namespace with a ResourceQuota on
//! ConfigMaps (a room's attendee: xtask/src/room/attendee.rs) only what fits
//! is made, some kept free for the lab's own.

use std::time::Duration;

use super::Progress;
use anyhow::Context as _;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, ResourceQuota};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::{
    Api,
    api::{DeleteParams, ListParams, ObjectMeta, PostParams},
};
use labkit::eventually::{Check, eventually};
use labkit::lab::Lab;
use labkit::record::{Collection, OWNER_LABEL};
use std::collections::BTreeMap;

/// The label every unrelated ConfigMap carries: how they are found and
/// deleted together (one deletecollection).
pub const LABEL: &str = "bench.my-controller.dev/unrelated";
/// Each one's data: about 1 KiB, so a controller that did cache them would
/// show it (10 000 of them are ~10 MiB of data alone).
const PAYLOAD_BYTES: usize = 1024;
/// Of a ConfigMap quota, the share kept free for the lab's own (percent), and at least this many.
const KEEP_FREE_PERCENT: u64 = 10;
const KEEP_FREE_AT_LEAST: u64 = 5;
/// How long the deletion of all of them may take.
const DELETE_WITHIN: Duration = Duration::from_secs(600);

/// The unrelated ConfigMaps of one lab: in its namespace, with its owner's
/// label as well as [`LABEL`], so that deleting them touches nothing else.
/// While the lab is borrowed they are in its record as one collection, for
/// a put-back after a run that was killed.
pub struct Unrelated {
    api: Api<ConfigMap>,
    labels: BTreeMap<String, String>,
}

impl Unrelated {
    /// The lab's (its record's owner's, when it is borrowed: recorded then).
    pub async fn of(lab: &Lab) -> anyhow::Result<Unrelated> {
        let mut labels = BTreeMap::from([(LABEL.to_string(), "true".to_string())]);
        if let Some(record) = &lab.record {
            let mut record = record.lock().await;
            labels.insert(OWNER_LABEL.to_string(), record.owner.clone());
            let selector = selector_of(&labels);
            let namespace = lab.desired().namespace().to_string();
            let (api_version, kind) = ("v1".to_string(), "ConfigMap".to_string());
            record.collection(Collection { api_version, kind, namespace, selector })?;
        }
        Ok(Unrelated { api: lab.config_maps(), labels })
    }

    /// Those of `api`'s namespace with no owner: for a test acting as
    /// someone without a lab of their own.
    pub fn in_namespace(api: Api<ConfigMap>) -> Unrelated {
        Unrelated { api, labels: BTreeMap::from([(LABEL.to_string(), "true".to_string())]) }
    }

    fn selector(&self) -> ListParams {
        ListParams::default().labels(&selector_of(&self.labels))
    }

    /// How many of them exist. A metadata-only list of them all:
    /// `remainingItemCount` would be cheaper, but the API server leaves it out
    /// of any list with a label selector.
    pub async fn count(&self) -> anyhow::Result<usize> {
        Ok(self.api.list_metadata(&self.selector()).await?.items.len())
    }
}

fn selector_of(labels: &BTreeMap<String, String>) -> String {
    labels.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",")
}

impl Unrelated {
    /// Creates `count` unrelated ConfigMaps, or as many as fit the
    /// namespace's quota ([`fitting`]), `parallel` requests in flight;
    /// returns how many. Ones left by an interrupted run are fine (409
    /// AlreadyExists is skipped).
    pub async fn create(&self, count: usize, parallel: usize) -> anyhow::Result<usize> {
        let count = fitting(&self.api, count).await?;
        let mut progress = Progress::new("unrelated ConfigMaps created", count);
        let payload = "x".repeat(PAYLOAD_BYTES);
        let api = &self.api;
        let mut created = futures::stream::iter(0..count)
            .map(|i| {
                let cm = ConfigMap {
                    metadata: ObjectMeta {
                        name: Some(format!("bench-unrelated-{i:05}")),
                        labels: Some(self.labels.clone()),
                        ..ObjectMeta::default()
                    },
                    data: Some([("payload".to_string(), payload.clone())].into()),
                    ..ConfigMap::default()
                };
                async move {
                    match api.create(&PostParams::default(), &cm).await {
                        Ok(_) => Ok(()),
                        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
                        Err(e) => {
                            Err(e).with_context(|| format!("creating unrelated ConfigMap {i}"))
                        }
                    }
                }
            })
            .buffer_unordered(parallel.max(1));
        while created.try_next().await?.is_some() {
            progress.add(1);
        }
        Ok(count)
    }

    /// Deletes every unrelated ConfigMap (deletecollection with the label
    /// selector) and waits until none is left. The API server deletes a
    /// collection one object at a time and may end the request at its timeout
    /// before it is done, so the request is repeated until the count is 0.
    pub async fn delete_all(&self) -> anyhow::Result<()> {
        let api = &self.api;
        let left = self.count().await?;
        if left == 0 {
            return Ok(());
        }
        let progress = std::cell::RefCell::new(Progress::new("unrelated ConfigMaps deleted", left));
        let left = std::cell::Cell::new(left);
        let (progress, left) = (&progress, &left);
        eventually("the unrelated ConfigMaps to be gone", DELETE_WITHIN, || async move {
            labkit::progress!(
                "  (kubectl delete configmaps -l {}: {} left, one deletecollection request)",
                selector_of(&self.labels),
                left.get()
            );
            // A timeout here is expected for a large collection: count and repeat.
            if let Err(e) = api.delete_collection(&DeleteParams::default(), &self.selector()).await
            {
                eprintln!("  deletecollection ended early ({e}); counting and repeating");
            }
            let now = self.count().await?;
            progress.borrow_mut().add(left.get().saturating_sub(now));
            left.set(now);
            Ok(if now == 0 { Check::Done(()) } else { Check::NotYet(format!("{now} left")) })
        })
        .await?;
        Ok(())
    }
}

/// How many of `asked` ConfigMaps the namespace's ResourceQuotas leave room
/// for, keeping some free ([`Room::fits`]); said in one line when fewer.
/// Quotas that cannot be read are not known: then `asked`.
pub async fn fitting(api: &Api<ConfigMap>, asked: usize) -> anyhow::Result<usize> {
    let Some(namespace) = api.namespace() else { return Ok(asked) };
    let quotas: Api<ResourceQuota> = Api::namespaced(api.clone().into_client(), namespace);
    let listed = match quotas.list(&ListParams::default()).await {
        Ok(list) => list.items,
        Err(kube::Error::Api(s)) if s.code == 403 => return Ok(asked),
        Err(e) => return Err(e).context("reading the namespace's ResourceQuotas"),
    };
    let tightest = listed.iter().filter_map(Room::of).min_by_key(|room| room.fits(usize::MAX));
    let Some(room) = tightest else { return Ok(asked) };
    let fits = room.fits(asked);
    if fits < asked {
        labkit::progress!(
            "unrelated ConfigMaps: {fits} of the {asked} asked, to fit ResourceQuota {namespace}/{} \
             ({} of {} ConfigMaps used, {} kept free)",
            room.quota,
            room.used,
            room.hard,
            room.keep()
        );
    }
    Ok(fits)
}

/// One quota's limit on ConfigMaps, and what is used of it.
#[derive(Debug)]
struct Room {
    quota: String,
    hard: u64,
    used: u64,
}

impl Room {
    fn of(quota: &ResourceQuota) -> Option<Room> {
        let key = |map: &std::collections::BTreeMap<String, Quantity>| {
            ["count/configmaps", "configmaps"].iter().find_map(|k| map.get(*k)).and_then(objects)
        };
        let hard = key(quota.spec.as_ref()?.hard.as_ref()?)?;
        let status = quota.status.as_ref();
        let used = status.and_then(|s| s.used.as_ref()).and_then(key).unwrap_or(0);
        Some(Room { quota: quota.metadata.name.clone().unwrap_or_default(), hard, used })
    }

    fn keep(&self) -> u64 {
        (self.hard * KEEP_FREE_PERCENT / 100).max(KEEP_FREE_AT_LEAST)
    }

    fn fits(&self, asked: usize) -> usize {
        let free = self.hard.saturating_sub(self.used).saturating_sub(self.keep());
        asked.min(usize::try_from(free).unwrap_or(usize::MAX))
    }
}

/// An object count as a quota writes it: `100`, `1k`, `2Ki`.
fn objects(quantity: &Quantity) -> Option<u64> {
    let text = quantity.0.trim();
    let digits = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, suffix) = text.split_at(digits);
    let scale: u64 = match suffix {
        "" => 1,
        "k" => 1_000,
        "M" => 1_000_000,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        _ => return None,
    };
    number.parse::<u64>().ok()?.checked_mul(scale)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quota(hard: &str, used: Option<&str>) -> ResourceQuota {
        let map = |v: &str| [("count/configmaps".to_string(), Quantity(v.into()))].into();
        ResourceQuota {
            metadata: ObjectMeta { name: Some("room-limits".into()), ..Default::default() },
            spec: Some(k8s_openapi::api::core::v1::ResourceQuotaSpec {
                hard: Some(map(hard)),
                ..Default::default()
            }),
            status: used.map(|u| k8s_openapi::api::core::v1::ResourceQuotaStatus {
                used: Some(map(u)),
                ..Default::default()
            }),
        }
    }

    #[test]
    fn what_fits_a_quota_keeps_some_free() {
        let room = Room::of(&quota("100", Some("4"))).unwrap();
        assert_eq!((room.hard, room.used, room.keep()), (100, 4, 10));
        assert_eq!(room.fits(10_000), 86);
        assert_eq!(room.fits(30), 30);
        assert_eq!(Room::of(&quota("20", Some("18"))).unwrap().fits(10), 0);
        assert_eq!(Room::of(&quota("1k", None)).unwrap().fits(10_000), 900);
    }

    #[test]
    fn counts_read_as_quotas_write_them() {
        let of = |s: &str| objects(&Quantity(s.into()));
        assert_eq!((of("100"), of("2k"), of("1Ki")), (Some(100), Some(2000), Some(1024)));
        assert_eq!((of("1.5"), of("x")), (None, None));
    }
}
