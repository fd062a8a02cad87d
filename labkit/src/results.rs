//! Each experiment's outcome as one JSON line in the file named by
//! `$E2E_RESULTS` (when set; the e2e suite writes it), so `cargo xtask e2e`
//! can print a summary table of a `cargo test` run.

use serde::{Deserialize, Serialize};

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

/// Reads a results file the e2e suite wrote (`run_test` in e2e/tests/suite.rs).
pub fn read(path: &std::path::Path) -> anyhow::Result<Vec<Outcome>> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines().filter(|l| !l.trim().is_empty()).map(|l| Ok(serde_json::from_str(l)?)).collect()
}
