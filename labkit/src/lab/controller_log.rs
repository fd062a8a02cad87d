//! The controller's log as the experiments read it (from a mark on), and the
//! diagnostics a failed test prints.

use super::*;
use crate::tr;

impl Lab {
    /// The current end of the controller's log: [`Lab::controller_log`] from here.
    pub fn log_mark(&self) -> anyhow::Result<ControllerRun> {
        if self.deployment().is_some() {
            return Ok(ControllerRun {
                log_offset: 0,
                since: Some(k8s_openapi::jiff::Timestamp::now()),
            });
        }
        let path = &self.file.controller.log;
        let log_offset = std::fs::metadata(path)
            .with_context(|| tr!("cannot read {path}", path = path.display()))?
            .len();
        Ok(ControllerRun { log_offset, since: None })
    }

    /// Like [`Lab::log_mark`], from the start when there is no log yet.
    pub(super) fn log_end(&self) -> ControllerRun {
        let log_offset = std::fs::metadata(&self.file.controller.log).map_or(0, |m| m.len());
        ControllerRun { log_offset, since: None }
    }

    /// What the controller logged since `run` started.
    pub async fn controller_log(&self, run: &ControllerRun) -> anyhow::Result<String> {
        if let Some(deployment) = self.deployment() {
            let pod = deployment.current_pod().await?;
            let log = deployment.log(&pod, None, run.since).await?;
            return Ok(since(&log, run.since));
        }
        let path = &self.file.controller.log;
        let bytes = tokio::fs::read(path)
            .await
            .with_context(|| tr!("cannot read {path}", path = path.display()))?;
        let from = (run.log_offset as usize).min(bytes.len());
        Ok(String::from_utf8_lossy(&bytes[from..]).into_owned())
    }

    /// What a person needs when an experiment fails: the controller's log
    /// tail, my-config as YAML, and the recent Events of its namespace.
    pub async fn diagnostics(&self) -> String {
        let mut out = String::new();
        match self.deployment() {
            Some(deployment) => match deployment.current_pod().await {
                Ok(pod) => {
                    let tail = deployment
                        .log(&pod, Some(40), None)
                        .await
                        .unwrap_or_else(|e| format!("({e})"));
                    out.push_str(&tr!("last lines of pod {pod}:\n{tail}", pod, tail));
                }
                Err(_) => out.push_str(&tr!(
                    "(no controller pod: `kubectl describe deployment my-controller`)"
                )),
            },
            None => out.push_str(&crate::files::tail(&self.file.controller.log, 40)),
        }
        out.push_str("\n\n");
        let desired = &self.desired;
        let stored = match self.config_maps().get_opt(desired.name()).await {
            Ok(Some(mut cm)) => {
                cm.managed_fields_mut().clear();
                let yaml = serde_saphyr::to_string(&cm).unwrap_or_else(|e| format!("({e})"));
                tr!("{desired} as stored:\n{yaml}", desired, yaml)
            }
            Ok(None) => tr!("{desired} does not exist", desired),
            Err(e) => tr!("cannot read {desired}: {error}", desired, error = e),
        };
        out.push_str(&(stored + "\n"));
        let events: Api<Event> = Api::namespaced(self.client(), self.desired.namespace());
        match events.list(&ListParams::default()).await {
            Ok(list) => {
                let mut items = list.items;
                items.sort_by_key(|e| e.metadata.creation_timestamp.clone());
                out.push_str(&(tr!("recent Events:") + "\n"));
                for e in items.iter().rev().take(10).rev() {
                    out.push_str(&format!(
                        "  {} {} {}: {}\n",
                        e.reason.as_deref().unwrap_or("-"),
                        e.regarding.as_ref().and_then(|r| r.name.as_deref()).unwrap_or("-"),
                        e.reporting_controller.as_deref().unwrap_or("-"),
                        e.note.as_deref().unwrap_or("")
                    ));
                }
            }
            Err(e) => out.push_str(&(tr!("cannot list Events: {error}", error = e) + "\n")),
        }
        out
    }
}

/// The lines of `log` written at or after `from`: the API server's
/// `sinceTime` is whole seconds, the controller's own timestamps are not. A
/// line without a timestamp goes with the one before it.
fn since(log: &str, from: Option<k8s_openapi::jiff::Timestamp>) -> String {
    let Some(from) = from else {
        return log.to_string();
    };
    let mut keep = false;
    let mut out = String::new();
    for line in log.lines() {
        let stamp = line
            .split_whitespace()
            .next()
            .and_then(|w| w.parse::<k8s_openapi::jiff::Timestamp>().ok());
        if let Some(stamp) = stamp {
            keep = stamp >= from;
        }
        if keep {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_log_since_a_moment_keeps_that_moments_lines_on() {
        let log = "2026-12-01T10:00:00.400000Z  INFO starting\n\
                   2026-12-01T10:00:00.900000Z  WARN watch failed\n  a continuation\n";
        let from = "2026-12-01T10:00:00.500000Z".parse().ok();
        assert_eq!(
            super::since(log, from),
            "2026-12-01T10:00:00.900000Z  WARN watch failed\n  a continuation\n"
        );
        assert_eq!(super::since(log, None), log);
    }
}
