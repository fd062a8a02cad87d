//! What the chart draws of a run, as the run keeps it: every latency sample
//! (to the microsecond) and the few words of its subtitle. A run writes it
//! beside its report (`latest.chart.json`); kept in docs/samples/, it is
//! what the pictures' test (maint/src/pictures.rs) redraws the docs' chart from, so the chart
//! drawn then is the one the run drew.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use super::report::{Report, Series};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Run {
    pub unix_time: u64,
    pub lab: String,
    pub kubernetes_version: String,
    pub cpus: usize,
    pub rounds: usize,
    pub blocks: usize,
    pub unrelated: usize,
    /// The floor's self-heal and correction samples (ms).
    pub floor: Latencies,
    /// my-controller first, then each peer, as measured.
    pub subjects: Vec<Side>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Latencies {
    pub self_heal: Vec<f64>,
    pub correction: Vec<f64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Side {
    pub label: String,
    #[serde(flatten)]
    pub latencies: Latencies,
    pub self_heal_with_unrelated: Vec<f64>,
}

/// Milliseconds to the microsecond: what the rounds resolve, and a third
/// of the digits.
fn to_us(series: &Series) -> Vec<f64> {
    series.samples_ms.iter().map(|ms| (ms * 1000.0).round() / 1000.0).collect()
}

impl Run {
    pub fn of(report: &Report) -> Run {
        Run {
            unix_time: report.unix_time,
            lab: report.lab.clone(),
            kubernetes_version: report.kubernetes_version.clone(),
            cpus: report.cpus,
            rounds: report.settings.rounds,
            blocks: report.settings.blocks,
            unrelated: report.settings.unrelated,
            floor: Latencies {
                self_heal: to_us(&report.floor.self_heal),
                correction: to_us(&report.floor.correction),
            },
            subjects: report
                .subjects
                .iter()
                .map(|s| Side {
                    label: s.label.clone(),
                    latencies: Latencies {
                        self_heal: to_us(&s.self_heal.series),
                        correction: to_us(&s.correction.series),
                    },
                    self_heal_with_unrelated: to_us(&s.self_heal_with_unrelated),
                })
                .collect(),
        }
    }

    /// A kept run, as [`Run::text`] wrote it.
    pub fn parse(text: &str) -> Result<Run> {
        serde_json::from_str(text).context("not a bench run's chart data (latest.chart.json)")
    }

    /// JSON with each series on one line: a 3000-round run stays a few
    /// hundred kilobytes and a diff shows which series changed.
    pub fn text(&self) -> String {
        let pretty = serde_json::to_string_pretty(self).expect("plain data serializes");
        let mut text = String::with_capacity(pretty.len() / 2);
        for line in pretty.lines() {
            let item = line.trim();
            let number = item.trim_end_matches(',').parse::<f64>().is_ok();
            if number || (item.starts_with(']') && text.ends_with(|c: char| c.is_ascii_digit())) {
                text.push_str(item);
                if number && item.ends_with(',') {
                    text.push(' ');
                }
            } else {
                text.push('\n');
                text.push_str(line);
            }
        }
        text.trim_start().to_string() + "\n"
    }
}

/// Writes `bench-<unix time>.json`, `.svg` and `.chart.json` (what the chart
/// draws, [`Run`]) into `dir`, and the same as `latest.json`,
/// `latest.svg`, `latest.chart.json`. Returns the paths written.
pub fn write(dir: &Path, report: &Report, svg: &str) -> Result<Vec<PathBuf>> {
    labkit::files::create_dir(dir)?;
    let json = serde_json::to_string_pretty(report)? + "\n";
    let kept = Run::of(report).text();
    let stamp = report.unix_time;
    let mut written = Vec::new();
    for (ext, text) in [("json", json.as_str()), ("svg", svg), ("chart.json", &kept)] {
        for name in [format!("bench-{stamp}"), "latest".into()] {
            let path = dir.join(format!("{name}.{ext}"));
            std::fs::write(&path, text)
                .with_context(|| format!("cannot write {}", path.display()))?;
            written.push(path);
        }
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_run_reads_back_as_it_was_with_a_line_per_series() {
        let mut report = crate::report::tests::sample();
        report.floor.self_heal.samples_ms = vec![4.123_456_7, 5.0, 0.000_4];
        let run = Run::of(&report);
        assert_eq!(run.floor.self_heal, vec![4.123, 5.0, 0.0]);
        let text = run.text();
        assert_eq!(Run::parse(&text).unwrap(), run);
        assert!(text.contains(r#""self_heal": [4.123, 5.0, 0.0]"#), "{text}");
        assert!(text.contains("\"self_heal\": [4.123, 5.0, 0.0],\n"), "{text}");
        assert!(Run::parse("{}").is_err());
    }
}
