//! Each experiment's outcome as one JSON line in the file named by
//! `$E2E_RESULTS` (when set), so `cargo xtask e2e` can print a summary table
//! of a `cargo test` run.

use std::{io::Write, time::Duration};

use serde::{Deserialize, Serialize};

use crate::suite::Measured;

/// The variable naming the results file.
pub const RESULTS_ENV: &str = "E2E_RESULTS";

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Outcome {
    pub experiment: String,
    pub passed: bool,
    /// The controller's measured reaction time, in milliseconds.
    pub latency_ms: Option<f64>,
    /// What was measured, or why it failed (first line).
    pub detail: String,
    pub warnings: Vec<String>,
    /// The experiment's own wall time, in seconds.
    pub wall_s: f64,
    /// Why it did not run on this lab (it then counts as neither passed nor failed).
    #[serde(default)]
    pub not_run: Option<String>,
}

impl Outcome {
    pub fn new(experiment: &str, result: &anyhow::Result<Measured>, wall: Duration) -> Self {
        let base = Outcome {
            experiment: experiment.to_string(),
            wall_s: wall.as_secs_f64(),
            ..Outcome::default()
        };
        match result {
            Ok(m) => Outcome {
                passed: true,
                latency_ms: m.latency.map(|l| l.as_secs_f64() * 1000.0),
                detail: m.detail.clone(),
                warnings: m.warnings.clone(),
                ..base
            },
            Err(e) => Outcome {
                detail: format!("{e:#}").lines().next().unwrap_or_default().to_string(),
                ..base
            },
        }
    }

    /// An experiment that does not apply to this lab, and why.
    pub fn not_run(experiment: &str, why: &str) -> Self {
        let (experiment, detail) = (experiment.to_string(), why.to_string());
        Outcome { experiment, detail, not_run: Some(why.to_string()), ..Outcome::default() }
    }
}

/// Appends an outcome to `$E2E_RESULTS`; does nothing when it is unset.
pub fn append(outcome: &Outcome) {
    let Some(path) = std::env::var_os(RESULTS_ENV) else {
        return;
    };
    let line = serde_json::to_string(outcome).expect("plain data");
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut f| writeln!(f, "{line}"));
    if let Err(e) = written {
        eprintln!("cannot record the result in {}: {e}", path.to_string_lossy());
    }
}

/// Reads a results file written by [`append`].
pub fn read(path: &std::path::Path) -> anyhow::Result<Vec<Outcome>> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines().filter(|l| !l.trim().is_empty()).map(|l| Ok(serde_json::from_str(l)?)).collect()
}
