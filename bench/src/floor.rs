//! The floor: the harness's own minimal loop in the controller's place, run
//! as a process of its own (`bench-floor`, bench/src/bin) like every subject,
//! so it shares no runtime with the bench's own measuring watch.
//!
//! With the controller stopped, [`keep`] watches my-config and, on each
//! event, sends the one write that puts it right — a create after a delete,
//! an update after a drift — with nothing in between: no cache, no
//! queue, no Events. It does the least a controller can: both requests are
//! serialized before any event (only their bytes are copied then), they go
//! over the client stack with TCP_NODELAY (`controller::connect`) on a
//! connection the warm-up round opened, and the answer is not decoded. Timed
//! by the same rounds as the subjects, it shows what the API server allows
//! on this machine at this moment; a subject that beats it beyond noise is
//! reported (`report::BEATS_FLOOR_BELOW`).

use std::time::Duration;

use anyhow::bail;
use backon::{ExponentialBuilder, Retryable as _};
use controller::desired::Desired;
use futures::TryStreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    Api, Client,
    api::{ListParams, WatchEvent, WatchParams},
};

/// The stand-in's field manager.
pub const FIELD_MANAGER: &str = "bench-floor";

/// The two writes, serialized once: the desired ConfigMap, POSTed after a
/// delete and PUT after a drift. The PUT carries no resourceVersion (an
/// unconditional update, which ConfigMaps allow), so nothing of the event
/// goes into it; `update` is what the controller's Role grants (no `patch`).
struct Prebuilt {
    client: Client,
    collection: String,
    object: String,
    body: Vec<u8>,
}

impl Prebuilt {
    fn new(client: Client, desired: &Desired) -> anyhow::Result<Prebuilt> {
        let collection = format!("/api/v1/namespaces/{}/configmaps", desired.namespace());
        Ok(Prebuilt {
            client,
            object: format!("{collection}/{}?fieldManager={FIELD_MANAGER}", desired.name()),
            collection: format!("{collection}?fieldManager={FIELD_MANAGER}"),
            body: serde_json::to_vec(&desired.to_config_map())?,
        })
    }

    /// Sends one of them; the answer's body is not decoded.
    async fn send(&self, create: bool) -> anyhow::Result<()> {
        let (method, uri) = if create { ("POST", &self.collection) } else { ("PUT", &self.object) };
        let request = http::Request::builder()
            .method(method)
            .uri(uri)
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(self.body.clone())?;
        self.client.request_text(request).await?;
        Ok(())
    }
}

/// The loop, until it fails: list (and put right what is there), watch, react; list again
/// when the watch ends. Run with `client` as the controller's own identity, so that
/// authentication and RBAC cost the same.
pub async fn keep(client: Client, desired: Desired) -> anyhow::Result<()> {
    let writes = Prebuilt::new(client.clone(), &desired)?;
    let api: Api<ConfigMap> = Api::namespaced(client, desired.namespace());
    let fields = format!("metadata.name={}", desired.name());
    loop {
        let list = api.list(&ListParams::default().fields(&fields)).await?;
        put_right(&writes, &desired, list.items.first()).await;
        let from = list.metadata.resource_version.unwrap_or_default();
        let params = WatchParams::default().fields(&fields).timeout(290);
        let stream = api.watch(&params, &from).await?;
        futures::pin_mut!(stream);
        while let Some(event) = stream.try_next().await? {
            match event {
                WatchEvent::Deleted(_) => put_right(&writes, &desired, None).await,
                WatchEvent::Added(cm) | WatchEvent::Modified(cm) => {
                    put_right(&writes, &desired, Some(&cm)).await
                }
                WatchEvent::Bookmark(_) => {}
                // 410 Gone: the version is too old; list again.
                WatchEvent::Error(e) if e.code == 410 => break,
                WatchEvent::Error(e) => bail!("the floor's watch failed: {e}"),
            }
        }
    }
}

/// The one write that makes `live` desired, if any. A write refused or lost (a
/// pooled connection the API server closed, a 429) is tried twice more, 20 ms
/// and 40 ms later, as a controller's queue would: a create after a delete has
/// no event after it to try again on. Then it is said, not fatal.
async fn put_right(writes: &Prebuilt, desired: &Desired, live: Option<&ConfigMap>) {
    let create = match live {
        None => true,
        Some(cm) if cm.metadata.deletion_timestamp.is_some() || desired.is_satisfied_by(cm) => {
            return;
        }
        Some(_) => false,
    };
    let again = ExponentialBuilder::default().with_min_delay(Duration::from_millis(20));
    if let Err(e) = (|| writes.send(create)).retry(again.with_max_times(2)).await {
        eprintln!("bench-floor: {e:#}");
    }
}
