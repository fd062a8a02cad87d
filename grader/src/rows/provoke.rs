//! What "no hot loop" does to the restarted program, so that a write on an
//! event that changes nothing it owns shows within the course's resync:
//! another manager's label on my-config (put on, later taken off), a
//! ConfigMap of the namespace made and changed, and a relist — its watches
//! ended by the proxy and answered 410 Gone, as a compacted etcd does. A
//! relist hands client-go's update handler every object with old and new
//! alike (as a resync does: during the first resync period, and always
//! without one), and kube's watcher an `InitApply` of each.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use labkit::{lab_file::Applied, record::How};

use super::*;

/// A ConfigMap of the namespace that is none of the program's business.
const UNRELATED: &str = "my-controller-grade-unrelated";
/// The label a person's `kubectl label` puts on my-config, and takes off.
const LABEL: &str = "lab-kit.grade/touched";
/// How long the program gets to list again once its watches were ended.
const RELIST_WITHIN: Duration = Duration::from_secs(10);

impl Grading<'_> {
    /// The events, one after another; the lists the relist took go to the
    /// read window ([`super::watches::ReadWindow`]). Returns my-config's
    /// resourceVersion after the last of them.
    pub(super) async fn provoke(&mut self) -> anyhow::Result<String> {
        let name = self.desired.name().to_string();
        let label = |value: serde_json::Value| json!({"metadata": {"labels": {LABEL: value}}});
        self.api.patch(&name, &kubectl_label(), &Patch::Merge(&label(json!("1")))).await?;
        self.unrelated().await?;
        self.reads.provoked = self.relist().await?;
        let cm =
            self.api.patch(&name, &kubectl_label(), &Patch::Merge(&label(json!(null)))).await?;
        Ok(cm.metadata.resource_version.unwrap_or_default())
    }

    /// Makes [`UNRELATED`] (in the lab's record first: the grade takes it
    /// away at its end), then changes it.
    async fn unrelated(&self) -> anyhow::Result<()> {
        let namespace = self.desired.namespace().to_string();
        let object = Applied {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            namespace: Some(namespace),
            name: UNRELATED.into(),
        };
        let mut record = self.record.lock().await;
        record.intend(&object, crate::identity::BY, How::Created)?;
        let cm = ConfigMap {
            metadata: ObjectMeta {
                name: Some(UNRELATED.into()),
                labels: Some(record.labels()),
                ..ObjectMeta::default()
            },
            data: Some([("note".to_string(), "made".to_string())].into()),
            ..ConfigMap::default()
        };
        let params =
            PostParams { field_manager: Some("kubectl-create".into()), ..PostParams::default() };
        match self.api.create(&params, &cm).await {
            Ok(made) => record.made(&object, &made.metadata.uid.unwrap_or_default())?,
            Err(kube::Error::Api(e)) if e.code == 409 => {
                record.forget(&object)?;
                anyhow::bail!(tr!(
                    "{object} is in the way: the grade makes one of that name",
                    object
                ));
            }
            Err(e) => return Err(e.into()),
        }
        drop(record);
        let change = json!({"data": {"note": "changed"}});
        self.api.patch(UNRELATED, &kubectl(), &Patch::Merge(&change)).await?;
        Ok(())
    }

    /// Ends the program's watches and waits until it has listed again;
    /// returns how many lists that took (0: it had no watch to end, or did
    /// not list again within [`RELIST_WITHIN`]).
    async fn relist(&self) -> anyhow::Result<u64> {
        let proxy = self.proxy();
        let before = proxy.counts().lists;
        let what = tr!("the program to list ConfigMaps again after a 410 Gone");
        let mut ended = 0;
        let listed = poll(&what, RELIST_WITHIN, false, || {
            // A watch to end (a client may be between two).
            if ended == 0 {
                ended = proxy.relist();
            }
            let lists = proxy.counts().lists - before;
            async move {
                Ok(Check::done_if(
                    ended > 0 && lists > 0,
                    lists,
                    tr!("{ended} watches ended, {lists} lists", ended, lists),
                ))
            }
        })
        .await;
        Ok(listed.unwrap_or(0))
    }
}

/// A person's `kubectl label`.
fn kubectl_label() -> PatchParams {
    PatchParams { field_manager: Some("kubectl-label".into()), ..PatchParams::default() }
}
