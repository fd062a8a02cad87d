//! Row 5, self-check Q6: a write that conflicts. The scene is experiment 3
//! (a drift); the proxy holds the program's update until another writer has
//! written my-config, so the update's resourceVersion is stale and the API
//! server answers 409 Conflict. The program must retry with the newer object
//! and put the data back, running on.

use super::*;
use crate::proxy::{RIVAL_ANNOTATION, RIVAL_MANAGER};

/// How long the proxy's word on the contested update may lag behind the
/// data coming back (the API server commits before the proxy has its answer).
const TOLD_WITHIN: Duration = Duration::from_secs(5);

impl Grading<'_> {
    /// `options.conflicts` drifts in a row, each with its update contested.
    pub(super) async fn conflict(&mut self) -> anyhow::Result<()> {
        if !self.scene_is_set(RowId::Conflict).await? {
            return Ok(());
        }
        let result = self.conflicts().await;
        self.proxy().disarm();
        // The other writer's annotation goes again (gone already when my-config is).
        let unmark = json!({"metadata": {"annotations": {RIVAL_ANNOTATION: null}}});
        let params =
            PatchParams { field_manager: Some(RIVAL_MANAGER.into()), ..PatchParams::default() };
        match self.api.patch(self.desired.name(), &params, &Patch::Merge(&unmark)).await {
            Ok(_) | Err(kube::Error::Api(_)) => {}
            Err(e) => return Err(e.into()),
        }
        result
    }

    async fn conflicts(&mut self) -> anyhow::Result<()> {
        let key = first_key(&self.desired);
        let mut slowest = Duration::ZERO;
        for done in 0..self.options.conflicts.max(1) {
            self.ensure_desired().await?;
            let told = self.proxy().arm_conflict();
            let before = self.proxy().counts();
            let until = self.put_back(Some(json!({"data": {key.clone(): DRIFTED}}))).await?;
            let Until::Reached { after } = until else {
                let updates = self.proxy().counts().since(&before).updates.to_string();
                let values = vec![("conflicts", done.to_string()), ("updates", updates)];
                self.push_until(RowId::Conflict, until, "conflict.not_back", values);
                return Ok(());
            };
            let (method, status) = match tokio::time::timeout(TOLD_WITHIN, told).await {
                Ok(Ok(Ok(c))) if c.status == 409 => {
                    slowest = slowest.max(after);
                    continue;
                }
                // Its write carries no resourceVersion: nothing can conflict with it.
                Ok(Ok(Ok(c))) => (c.method, c.status.to_string()),
                Ok(Ok(Err(rival))) => anyhow::bail!("{rival}"),
                // Put back with no update (PUT or PATCH) of my-config.
                Ok(Err(_)) | Err(_) => ("-".to_string(), "-".to_string()),
            };
            let values = [("method", method), ("status", status)];
            self.push(RowId::Conflict, true, "conflict.cannot_conflict", values);
            return Ok(());
        }
        let conflicts = self.options.conflicts.max(1).to_string();
        self.push(
            RowId::Conflict,
            true,
            "conflict.pass",
            [("conflicts", conflicts), ("after", ms(slowest))],
        );
        Ok(())
    }
}
