//! The rows themselves, in the course's order: the four experiments, a
//! write that fails, (a write that conflicts: [`super::conflict`]), a quiet
//! resync, a clean exit ([`super`] holds what
//! they share: the program, the waits, the record).

use super::*;

impl Grading<'_> {
    /// Row 1, the course's experiment 1: my-config absent, the program starts → it appears.
    pub(super) async fn starts(&mut self, before: Counts, started: Instant) -> anyhow::Result<()> {
        self.until_created(RowId::Starts, before, Some(started)).await
    }

    /// Row 2, experiment 2: delete my-config → it is back.
    pub(super) async fn self_heal(&mut self) -> anyhow::Result<()> {
        if !self.scene_is_set(RowId::SelfHeal).await? {
            return Ok(());
        }
        let before = self.observer().counts().await?;
        self.api.delete(self.desired.name(), &DeleteParams::default()).await?;
        self.until_created(RowId::SelfHeal, before, None).await
    }

    /// Rows 1 and 2: my-config is absent; the row passes when it is there
    /// with the desired data. `started`: time it from the program's start.
    async fn until_created(
        &mut self,
        id: RowId,
        before: Counts,
        started: Option<Instant>,
    ) -> anyhow::Result<()> {
        let until = self.until_desired(HEAL_WITHIN).await?;
        let creates = count(self.observer().counts().await?.since(&before).creates);
        let seen = |outcome: &str| format!("{}.{outcome}", id.key());
        match until {
            Until::Reached { after } => {
                let after = started.map_or(after, |s| s.elapsed());
                let values = [("after", ms(after)), ("creates", creates)];
                self.push(id, true, &seen("pass"), &values);
            }
            Until::TimedOut { last } if last == absent() => {
                let values = [("creates", creates), ("within", secs(HEAL_WITHIN))];
                self.push(id, false, &seen("absent"), &values);
            }
            Until::TimedOut { last } => {
                self.push(id, false, &seen("wrong_data"), &[("creates", creates), ("last", last)]);
            }
            Until::Exited(status) => self.push_exited(id, status),
        }
        Ok(())
    }

    /// Row 3, experiment 3: `kubectl patch` the first key to `env=dev` → put back.
    pub(super) async fn correction(&mut self) -> anyhow::Result<()> {
        if !self.scene_is_set(RowId::Correction).await? {
            return Ok(());
        }
        let key = self.first_key();
        let before = self.observer().counts().await?;
        let drift = json!({"data": {key.clone(): DRIFTED}});
        self.api.patch(self.desired.name(), &kubectl(), &Patch::Merge(&drift)).await?;
        let until = self.until_desired(HEAL_WITHIN).await?;
        let updates = self.observer().counts().await?.since(&before).updates;
        match until {
            Until::Reached { after } => self.push(
                RowId::Correction,
                true,
                "correction.pass",
                &[("key", key), ("after", ms(after)), ("updates", count(updates))],
            ),
            Until::TimedOut { last } => self.push(
                RowId::Correction,
                false,
                "correction.not_back",
                &[
                    ("key", key),
                    ("within", secs(HEAL_WITHIN)),
                    ("updates", count(updates)),
                    ("last", last),
                ],
            ),
            Until::Exited(status) => self.push_exited(RowId::Correction, status),
        }
        Ok(())
    }

    /// Row 4: a write the API server refuses (my-config made immutable with
    /// other data) → the program keeps running; deleted → recreated.
    pub(super) async fn failed_write(&mut self) -> anyhow::Result<()> {
        if !self.scene_is_set(RowId::FailedWrite).await? {
            return Ok(());
        }
        let before = self.observer().counts().await?;
        let frozen = json!({"immutable": true, "data": {self.first_key(): DRIFTED}});
        self.api.patch(self.desired.name(), &kubectl(), &Patch::Merge(&frozen)).await?;
        labkit::test_hook::at("grade:immutable")?;
        // Until it has tried (and been refused), or had the time to.
        let (program, observer) = (&mut self.program, self.observer.as_ref().expect("alive"));
        let _ = poll("an update of the immutable object", REFUSAL_WITHIN, false, || {
            let exited = program.exited().is_some();
            async move {
                let tried = observer.counts().await?.since(&before).updates >= 1.0;
                Ok(Check::done_if(tried || exited, (), "no update yet"))
            }
        })
        .await;
        self.api.delete(self.desired.name(), &DeleteParams::default()).await?;
        let until = self.until_desired(HEAL_WITHIN).await?;
        let updates = count(self.observer().counts().await?.since(&before).updates);
        match until {
            Until::Reached { after } => self.push(
                RowId::FailedWrite,
                true,
                "failed_write.pass",
                &[("updates", updates), ("after", ms(after))],
            ),
            Until::TimedOut { last } => self.push(
                RowId::FailedWrite,
                false,
                "failed_write.not_recreated",
                &[("updates", updates), ("within", secs(HEAL_WITHIN)), ("last", last)],
            ),
            Until::Exited(status) => self.push_exited(RowId::FailedWrite, status),
        }
        Ok(())
    }

    /// Rows 6 and 7, experiment 4: stopped with SIGINT (Ctrl-C) and started
    /// again while my-config is right → no write within the quiet window;
    /// then none through a resync either.
    pub(super) async fn rerun_and_hot_loop(&mut self) -> anyhow::Result<()> {
        self.ensure_desired().await?;
        let first = self.program.stop(libc::SIGINT, self.options.exit_within).await?;
        self.sigint = Some(first);
        self.exited = None;
        let version_before = self.version().await?;
        let before = self.observer().counts().await?;
        self.program.start().await?;
        let connected = match self.connect(before, self.options.connect_within).await? {
            Ok(after) => after,
            Err(Some(status)) => {
                self.push_exited(RowId::Rerun, status);
                self.push_not_run(RowId::HotLoop);
                return Ok(());
            }
            Err(None) => {
                let within = secs(self.options.connect_within);
                self.push(RowId::Rerun, false, "rerun.never_connected", &[("within", within)]);
                self.push_not_run(RowId::HotLoop);
                return Ok(());
            }
        };
        self.quiet_begins().await?;
        if let Some(status) = self.observe(self.options.quiet).await {
            self.push_exited(RowId::Rerun, status);
            self.push_not_run(RowId::HotLoop);
            return Ok(());
        }
        let quiet = self.observer().counts().await?.since(&before);
        let version_quiet = self.version().await?;
        if quiet.writes() == 0.0 && version_quiet == version_before {
            let mut values: BTreeMap<String, String> = [
                ("connected", ms(connected)),
                ("quiet", secs(self.options.quiet)),
                ("version", version_quiet),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
            values.extend(stop_values("stopped", self.sigint.as_ref()));
            self.push_values(RowId::Rerun, true, "rerun.pass", values);
        } else {
            self.push(
                RowId::Rerun,
                false,
                "rerun.wrote",
                &[
                    ("quiet", secs(self.options.quiet)),
                    ("creates", count(quiet.creates)),
                    ("updates", count(quiet.updates)),
                    ("deletes", count(quiet.deletes)),
                    ("before", version_before),
                    ("now", version_quiet),
                ],
            );
        }

        self.hot_loop().await
    }

    /// Row 7: no hot loop — events that change nothing it owns and a relist
    /// ([`super::provoke`]), then on through the first resync after the quiet
    /// window (and a margin, at least [`SETTLE`] past the last event): no
    /// write; my-config's version as the grader's last write left it.
    async fn hot_loop(&mut self) -> anyhow::Result<()> {
        let window = hot_loop_window(self.options.resync, self.options.quiet);
        let rest = window.saturating_sub(self.options.quiet);
        self.options.progress.tell(Step::Watching { window });
        let after_quiet = self.observer().counts().await?;
        let started = Instant::now();
        let provoked = self.provoke().await?;
        self.reads.provoked = provoked.relists as f64;
        let left = rest.saturating_sub(started.elapsed()).max(SETTLE);
        if let Some(status) = self.observe(left).await {
            self.push_exited(RowId::HotLoop, status);
            return Ok(());
        }
        self.quiet_ends().await?;
        let writes = self.observer().counts().await?.since(&after_quiet).writes();
        let version_end = self.version().await?;
        let values = [
            ("window", secs(window)),
            ("resync", secs(self.options.resync)),
            ("relists", provoked.relists.to_string()),
        ];
        if writes == 0.0 && version_end == provoked.version {
            self.push(RowId::HotLoop, true, "hot_loop.pass", &values);
        } else {
            let mut values = values.to_vec();
            values.extend([
                ("writes", count(writes)),
                ("before", provoked.version),
                ("now", version_end),
            ]);
            self.push(RowId::HotLoop, false, "hot_loop.wrote", &values);
        }
        Ok(())
    }

    /// Row 8: SIGTERM → exit 0 promptly (and SIGINT did the same, when measured).
    pub(super) async fn clean_exit(&mut self) -> anyhow::Result<()> {
        let sigterm = self.program.stop(libc::SIGTERM, self.options.exit_within).await?;
        if matches!(sigterm, Stopped::AlreadyGone { .. }) && self.exited.is_some() {
            self.push_not_run(RowId::CleanExit);
            return Ok(());
        }
        // SIGINT counts when the first run was still there to take it.
        let sigint_clean = match &self.sigint {
            Some(Stopped::AlreadyGone { .. }) | None => true,
            Some(stop) => stop.is_clean(),
        };
        let passed = sigterm.is_clean() && sigint_clean;
        let values = stop_values("sigint", self.sigint.as_ref())
            .into_iter()
            .chain(stop_values("sigterm", Some(&sigterm)))
            .collect();
        let seen = if passed { "clean_exit.pass" } else { "clean_exit.fail" };
        self.push_values(RowId::CleanExit, passed, seen, values);
        Ok(())
    }
}
