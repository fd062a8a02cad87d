//! Unrelated ConfigMaps: many objects in my-config's namespace that the
//! controller must not pay for. It watches one object through a field
//! selector, so neither its list nor its watch carries them and its memory
//! must not grow with them.

use std::time::Duration;

use super::Progress;
use anyhow::Context as _;
use e2e::lab::Lab;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    Api,
    api::{DeleteParams, ListParams, ObjectMeta, PostParams},
};
use labkit::eventually::{Check, eventually};
use labkit::record::{Collection, OWNER_LABEL};
use std::collections::BTreeMap;

/// The label every unrelated ConfigMap carries: how they are found and
/// deleted together (one deletecollection).
pub const LABEL: &str = "bench.my-controller.dev/unrelated";
/// Each one's data: about 1 KiB, so a controller that did cache them would
/// show it (10 000 of them are ~10 MiB of data alone).
const PAYLOAD_BYTES: usize = 1024;
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
        if let Some(record) = lab.record() {
            let mut record = record.lock().await;
            labels.insert(OWNER_LABEL.to_string(), record.owner.clone());
            let selector = selector_of(&labels);
            let namespace = lab.desired().namespace().to_string();
            let (api_version, kind) = ("v1".to_string(), "ConfigMap".to_string());
            record.collection(Collection { api_version, kind, namespace, selector })?;
        }
        Ok(Unrelated { api: lab.config_maps(), labels })
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
    /// Creates `count` unrelated ConfigMaps, `parallel` requests in flight.
    /// Ones left by an interrupted run are fine (409 AlreadyExists is skipped).
    pub async fn create(&self, count: usize, parallel: usize) -> anyhow::Result<()> {
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
        Ok(())
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
            eprintln!(
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
