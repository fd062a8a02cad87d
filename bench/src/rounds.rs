//! One round of a latency measure: disturb my-config, time until a watch
//! shows the desired data again. The timing is the e2e experiments' own
//! ([`measure_until_desired`]): one definition, used by the suite and the bench.

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    Api,
    api::{DeleteParams, Patch, PatchParams},
};
use serde_json::json;

use labkit::{converge::measure_until_desired, lab::Lab};

/// The field manager of the bench's own writes ("someone else").
pub const FIELD_MANAGER: &str = "bench";

/// What a round does to my-config.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Disturbance {
    /// Delete it: measures self-heal (delete → recreated).
    Delete,
    /// Merge-patch its first data key to a new value each round: measures
    /// drift correction (patch → data put back).
    Patch,
}

/// Runs rounds against one lab, with a client of its own for the disturbing
/// writes.
///
/// Why a client of its own: [`measure_until_desired`] opens a watch per
/// round, and a watch holds its HTTP/1.1 connection for as long as it runs.
/// Sharing one client, every round's disturbing write would find the pooled
/// connection busy and open (and TLS-handshake) a new one inside the timed
/// window. With its own client the write reuses the warm connection of the
/// previous round, so the figure is the API server's and the controller's
/// time, not the harness's connection setup.
pub struct Rounds {
    writer: Api<ConfigMap>,
    name: String,
    key: String,
    seq: u64,
}

impl Rounds {
    pub async fn new(lab: &Lab) -> anyhow::Result<Self> {
        let client = controller::connect::client(Some(&lab.file().admin_kubeconfig))
            .await
            .map_err(anyhow::Error::msg)?;
        let desired = lab.desired();
        let key = labkit::suite::first_key(desired);
        Ok(Rounds {
            writer: Api::namespaced(client, desired.namespace()),
            name: desired.name().to_string(),
            key,
            seq: 0,
        })
    }

    /// The client the disturbing writes use (also for bursts).
    pub fn writer(&self) -> &Api<ConfigMap> {
        &self.writer
    }

    /// One unrecorded round of each kind: whoever keeps my-config and the
    /// harness have their connections open before the timing.
    pub async fn warm_up(&mut self, lab: &Lab) -> anyhow::Result<()> {
        self.once(lab, Disturbance::Delete).await?;
        self.once(lab, Disturbance::Patch).await?;
        Ok(())
    }

    /// One round: `what` to my-config → the desired data seen again.
    pub async fn once(&mut self, lab: &Lab, what: Disturbance) -> anyhow::Result<Duration> {
        self.seq += 1;
        let (api, name) = (&self.writer, self.name.as_str());
        let drift = Patch::Merge(json!({"data": {&self.key: format!("env=bench-{}", self.seq)}}));
        measure_until_desired(lab, || async {
            match what {
                Disturbance::Delete => drop(api.delete(name, &DeleteParams::default()).await?),
                Disturbance::Patch => drop(api.patch(name, &bench_writes(), &drift).await?),
            }
            Ok(())
        })
        .await
    }
}

/// Patch parameters of the bench's own writes.
pub fn bench_writes() -> PatchParams {
    PatchParams { field_manager: Some(FIELD_MANAGER.into()), ..PatchParams::default() }
}
