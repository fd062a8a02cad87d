//! The rows themselves, in the course's order: the four experiments, a
//! write that fails, (a write that conflicts: [`super::conflict`]), a quiet
//! resync, a clean exit ([`super`] holds what
//! they share: the program, the waits, the record).

use super::*;

impl Grading<'_> {
    /// Row 1, experiment 1: my-config absent, the program starts → it
    /// appears. An `Err` holding [`Refused`]: the program never got going.
    pub(super) async fn starts(&mut self) -> anyhow::Result<()> {
        delete_and_wait_gone(&self.api, self.desired.name()).await?;
        let before = self.proxy().counts();
        let (program, options) = (&mut self.program, self.options);
        let proxy = self.proxy.as_ref().expect("alive");
        let start = || async move {
            let refused = |program: &Program, reason, value| Refused {
                command: program.cmd.to_string(),
                reason,
                value,
                detail: labkit::files::tail(&program.log, 10),
            };
            let started = program.start().await;
            started.map_err(|e| refused(program, "cannot_start", format!("{e:#}")))?;
            let reason = match connect(program, proxy, before, options).await {
                Ok(_) => None,
                Err(Some(status)) => Some(("exited_at_once", exit_status(status))),
                Err(None) => Some(("never_connected", secs(options.connect_within))),
            };
            if let Some((reason, value)) = reason {
                return Err(refused(program, reason, value).into());
            }
            labkit::test_hook::at(&format!("grade:row:{}", RowId::Starts.key()))?;
            Ok(exit_of(program))
        };
        let until = until_desired(&self.api, &self.desired, start).await?;
        self.until_created(RowId::Starts, before, until).await
    }

    /// Row 2, experiment 2: delete my-config → it is back.
    pub(super) async fn self_heal(&mut self) -> anyhow::Result<()> {
        if !self.scene_is_set(RowId::SelfHeal).await? {
            return Ok(());
        }
        let before = self.proxy().counts();
        let until = self.put_back(None).await?;
        self.until_created(RowId::SelfHeal, before, until).await
    }

    /// Experiments 2 and 3 as a person does them (rows 2 to 5): my-config
    /// deleted (no `patch`) or `kubectl patch`ed, then until the program
    /// has put it back.
    pub(super) async fn put_back(
        &mut self,
        patch: Option<serde_json::Value>,
    ) -> anyhow::Result<Until<ExitStatus>> {
        let (api, name) = (&self.api, self.desired.name());
        until_desired(api, &self.desired, || async {
            match &patch {
                None => drop(api.delete(name, &DeleteParams::default()).await?),
                Some(patch) => drop(api.patch(name, &kubectl(), &Patch::Merge(patch)).await?),
            }
            Ok(exit_of(&mut self.program))
        })
        .await
    }

    /// Records a row that waited for my-config to be put back: passed with
    /// the time it took, or `failed` with the time waited and what was last
    /// seen; `values` go with either.
    pub(super) fn push_until(
        &mut self,
        id: RowId,
        until: Until<ExitStatus>,
        failed: &str,
        mut values: Vec<(&str, String)>,
    ) {
        let (passed, seen) = match until {
            Until::Reached { after } => {
                values.push(("after", ms(after)));
                (true, format!("{}.pass", id.key()))
            }
            Until::TimedOut { last } => {
                values.extend([("within", secs(HEAL_WITHIN)), ("last", describe(last.as_deref()))]);
                (false, failed.to_string())
            }
            Until::Ended(status) => return self.push_exited(id, status),
        };
        self.push(id, passed, &seen, values);
    }

    /// Rows 1 and 2 (experiments 1 and 2): my-config was absent; the row
    /// passes when the program has put it back with the desired data.
    pub(super) async fn until_created(
        &mut self,
        id: RowId,
        before: Counts,
        until: Until<ExitStatus>,
    ) -> anyhow::Result<()> {
        let creates = self.proxy().counts().since(&before).creates.to_string();
        let seen = |outcome: &str| format!("{}.{outcome}", id.key());
        match until {
            Until::Reached { after } => {
                self.push(id, true, &seen("pass"), [("after", ms(after)), ("creates", creates)]);
            }
            Until::TimedOut { last: None } => {
                let values = [("creates", creates), ("within", secs(HEAL_WITHIN))];
                self.push(id, false, &seen("absent"), values);
            }
            Until::TimedOut { last } => {
                let values = [("creates", creates), ("last", describe(last.as_deref()))];
                self.push(id, false, &seen("wrong_data"), values);
            }
            Until::Ended(status) => self.push_exited(id, status),
        }
        Ok(())
    }

    /// Row 3, experiment 3: `kubectl patch` the first key to `env=dev` → put back.
    pub(super) async fn correction(&mut self) -> anyhow::Result<()> {
        if !self.scene_is_set(RowId::Correction).await? {
            return Ok(());
        }
        let key = first_key(&self.desired);
        let before = self.proxy().counts();
        let until = self.put_back(Some(json!({"data": {key.clone(): DRIFTED}}))).await?;
        let updates = self.proxy().counts().since(&before).updates.to_string();
        let values = vec![("key", key), ("updates", updates)];
        self.push_until(RowId::Correction, until, "correction.not_back", values);
        Ok(())
    }

    /// Row 4: a write the API server refuses (my-config made immutable with
    /// other data) → the program keeps running; deleted → recreated.
    pub(super) async fn failed_write(&mut self) -> anyhow::Result<()> {
        if !self.scene_is_set(RowId::FailedWrite).await? {
            return Ok(());
        }
        let before = self.proxy().counts();
        let frozen = json!({"immutable": true, "data": {first_key(&self.desired): DRIFTED}});
        self.api.patch(self.desired.name(), &kubectl(), &Patch::Merge(&frozen)).await?;
        labkit::test_hook::at("grade:immutable")?;
        // Until it has tried (and been refused), or had the time to.
        let (program, proxy) = (&mut self.program, self.proxy.as_ref().expect("alive"));
        let what = tr!("an update of the immutable object");
        let _ = poll(&what, REFUSAL_WITHIN, false, || {
            let exited = program.exited().is_some();
            async move {
                let tried = proxy.counts().since(&before).updates >= 1;
                Ok(Check::done_if(tried || exited, (), tr!("no update yet")))
            }
        })
        .await;
        let until = self.put_back(None).await?;
        let updates = self.proxy().counts().since(&before).updates.to_string();
        let values = vec![("updates", updates)];
        self.push_until(RowId::FailedWrite, until, "failed_write.not_recreated", values);
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
        let before = self.proxy().counts();
        self.program.start().await?;
        let proxy = self.proxy.as_ref().expect("alive");
        let connected = match connect(&mut self.program, proxy, before, self.options).await {
            Ok(after) => after,
            Err(Some(status)) => {
                self.push_exited(RowId::Rerun, status);
                self.push_not_run(RowId::HotLoop);
                return Ok(());
            }
            Err(None) => {
                let within = secs(self.options.connect_within);
                self.push(RowId::Rerun, false, "rerun.never_connected", [("within", within)]);
                self.push_not_run(RowId::HotLoop);
                return Ok(());
            }
        };
        self.quiet_begins();
        if let Some(status) = observe(&mut self.program, self.options.quiet).await {
            self.push_exited(RowId::Rerun, status);
            self.push_not_run(RowId::HotLoop);
            return Ok(());
        }
        let quiet = self.proxy().counts().since(&before);
        let version_quiet = self.version().await?;
        if quiet.writes() == 0 && version_quiet == version_before {
            let values = [
                ("connected", ms(connected)),
                ("quiet", secs(self.options.quiet)),
                ("version", version_quiet),
            ];
            let values = values.map(|(k, v)| (k.to_string(), v));
            let stopped = stop_values("stopped", self.sigint.as_ref());
            self.push(RowId::Rerun, true, "rerun.pass", values.into_iter().chain(stopped));
        } else {
            self.push(
                RowId::Rerun,
                false,
                "rerun.wrote",
                [
                    ("quiet", secs(self.options.quiet)),
                    ("creates", quiet.creates.to_string()),
                    ("updates", quiet.updates.to_string()),
                    ("deletes", quiet.deletes.to_string()),
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
        self.options.tell(Step::Watching { window });
        let after_quiet = self.proxy().counts();
        let started = Instant::now();
        let provoked = self.provoke().await?;
        let left = rest.saturating_sub(started.elapsed()).max(SETTLE);
        if let Some(status) = observe(&mut self.program, left).await {
            self.push_exited(RowId::HotLoop, status);
            return Ok(());
        }
        self.quiet_ends();
        let writes = self.proxy().counts().since(&after_quiet).writes();
        let version_end = self.version().await?;
        let values = [
            ("window", secs(window)),
            ("resync", secs(self.options.resync)),
            ("relists", self.reads.provoked.to_string()),
        ];
        if writes == 0 && version_end == provoked {
            self.push(RowId::HotLoop, true, "hot_loop.pass", values);
        } else {
            let wrote =
                [("writes", writes.to_string()), ("before", provoked), ("now", version_end)];
            self.push(RowId::HotLoop, false, "hot_loop.wrote", values.into_iter().chain(wrote));
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
        let mut values = stop_values("sigint", self.sigint.as_ref());
        values.extend(stop_values("sigterm", Some(&sigterm)));
        let seen = if passed { "clean_exit.pass" } else { "clean_exit.fail" };
        self.push(RowId::CleanExit, passed, seen, values);
        Ok(())
    }
}
