//! What a bench run found: the JSON file (its shape is tested), the table a
//! person reads, and the bars it is held to.

use std::{
    fmt::Write as _,
    path::{Path, PathBuf},
};

use crate::bench::{
    quiet::{Burst, Steady},
    usage::Usage,
};
use anyhow::{Context, Result};
use serde::Serialize;

use super::stats::Summary;

/// Bumped when a reader of an older file would misread this one.
pub const FORMAT: u32 = 1;

#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub format: u32,
    /// Seconds since the Unix epoch when the run ended; also in the file name.
    pub unix_time: u64,
    pub lab: String,
    pub kubernetes_version: String,
    /// CPUs of this machine: the figures depend on it.
    pub cpus: usize,
    pub controller: ControllerInfo,
    pub settings: Settings,
    pub latency: Latency,
    /// Controller start → my-config created, once per start (ms).
    pub startup: Series,
    pub steady: Steady,
    pub burst: Burst,
    pub cost: Cost,
    pub bars: Vec<Bar>,
}

#[derive(Clone, Debug, Serialize)]
pub struct ControllerInfo {
    /// `my-controller (release)`, or the command's program for another one.
    pub label: String,
    /// Ours: the binary run.
    pub binary: Option<String>,
    /// Another implementation: its `--controller-cmd`.
    pub command: Option<String>,
    /// Whether it serves our /metrics (reconcile and write counts).
    pub metrics: bool,
}

#[derive(Clone, Debug, Serialize)]
pub struct Settings {
    pub rounds: usize,
    pub blocks: usize,
    pub steady_seconds: f64,
    pub burst: usize,
    pub unrelated: usize,
    pub parallel: usize,
}

#[derive(Clone, Debug, Serialize)]
pub struct Latency {
    /// Delete → recreated.
    pub self_heal: Comparison,
    /// Patch → data put back.
    pub correction: Comparison,
    /// Self-heal again while the unrelated ConfigMaps exist (no floor).
    pub self_heal_with_unrelated: Series,
}

/// The controller's series next to the floor's, from the same run.
#[derive(Clone, Debug, Serialize)]
pub struct Comparison {
    pub floor: Series,
    pub controller: Series,
    /// Controller p50 / floor p50.
    pub ratio_p50: Option<f64>,
    /// Controller p99 / floor p99.
    pub ratio_p99: Option<f64>,
}

impl Comparison {
    pub fn new(floor: Vec<f64>, controller: Vec<f64>) -> Self {
        let (floor, controller) = (Series::new(floor), Series::new(controller));
        let ratio = |pick: fn(&Summary) -> f64| {
            Some(pick(controller.summary.as_ref()?) / pick(floor.summary.as_ref()?))
        };
        Comparison { ratio_p50: ratio(|s| s.p50), ratio_p99: ratio(|s| s.p99), floor, controller }
    }
}

/// A latency series in ms: its summary (absent when empty) and every sample,
/// in the order measured.
#[derive(Clone, Debug, Serialize)]
pub struct Series {
    #[serde(flatten)]
    pub summary: Option<Summary>,
    pub samples_ms: Vec<f64>,
}

impl Series {
    pub fn new(samples_ms: Vec<f64>) -> Self {
        Series { summary: Summary::of(&samples_ms), samples_ms }
    }
}

/// What the controller cost, from /proc (its whole process group).
#[derive(Clone, Debug, Serialize)]
pub struct Cost {
    /// Started, my-config created, nothing happening.
    pub idle: Usage,
    /// At the end of the last latency block.
    pub after_runs: Usage,
    /// CPU the controller used during the timed rounds, summed over blocks.
    pub latency_cpu_ms: f64,
    /// The rounds it served in that time.
    pub latency_rounds: usize,
    /// Running while the unrelated ConfigMaps were created.
    pub with_unrelated: Usage,
    /// Restarted while they exist (its initial list would carry them all
    /// without the field selector).
    pub with_unrelated_restarted: Usage,
    /// CPU used over the steady window.
    pub steady_cpu_ms: f64,
}

/// One line of the bar.
#[derive(Clone, Debug, Serialize)]
pub struct Bar {
    pub name: String,
    /// What was measured; `None` when it does not apply.
    pub value: Option<f64>,
    pub limit: f64,
    pub unit: String,
    /// `value ≤ limit`; `None` when it does not apply.
    pub met: Option<bool>,
}

impl Bar {
    fn at_most(name: impl Into<String>, value: Option<f64>, limit: f64, unit: &str) -> Bar {
        Bar { name: name.into(), met: value.map(|v| v <= limit), value, limit, unit: unit.into() }
    }
}

/// The bar (envtest lab, 2 cores): latencies within 1.5 × the floor's p50
/// and 10 ms, p99 within 50 ms; no writes in steady state; RSS within 20 MiB
/// with the unrelated ConfigMaps present.
pub fn bars(latency: &Latency, steady: &Steady, cost: &Cost) -> Vec<Bar> {
    let mut bars = Vec::new();
    for (what, c) in [("self-heal", &latency.self_heal), ("correction", &latency.correction)] {
        let ours = c.controller.summary.as_ref();
        let floor = c.floor.summary.as_ref();
        if let Some(floor) = floor {
            bars.push(Bar::at_most(
                format!("{what} p50 ≤ 1.5 × floor p50"),
                ours.map(|s| s.p50),
                1.5 * floor.p50,
                "ms",
            ));
        }
        bars.push(Bar::at_most(format!("{what} p50 ≤ 10 ms"), ours.map(|s| s.p50), 10.0, "ms"));
        bars.push(Bar::at_most(format!("{what} p99 ≤ 50 ms"), ours.map(|s| s.p99), 50.0, "ms"));
    }
    // The API server's count covers any controller; ours also counts its own
    // (a no-op update would not show in a watch).
    let writes = (steady.changes_seen as f64).max(steady.writes.unwrap_or(0.0));
    bars.push(Bar::at_most("steady-state writes = 0", Some(writes), 0.0, ""));
    let rss = cost.with_unrelated.rss_mib().max(cost.with_unrelated_restarted.rss_mib());
    bars.push(Bar::at_most("RSS with the unrelated ConfigMaps ≤ 20 MiB", Some(rss), 20.0, "MiB"));
    bars
}

/// The report as a person reads it (Markdown tables).
pub fn render(report: &Report) -> String {
    let mut out = String::new();
    let ms = |v: f64| format!("{v:.1} ms");
    let _ = writeln!(
        out,
        "\nbench of {} on lab {} (Kubernetes {}, {} CPUs), {} rounds per series in {} alternating blocks\n",
        report.controller.label,
        report.lab,
        report.kubernetes_version,
        report.cpus,
        report.settings.rounds,
        report.settings.blocks,
    );
    let _ = writeln!(out, "| measure | n | p50 | p90 | p99 | max | p50 ÷ floor |");
    let _ = writeln!(out, "|---|---|---|---|---|---|---|");
    let mut row = |name: &str, series: &Series, ratio: Option<f64>| {
        let _ = match &series.summary {
            Some(s) => writeln!(
                out,
                "| {name} | {} | {} | {} | {} | {} | {} |",
                s.n,
                ms(s.p50),
                ms(s.p90),
                ms(s.p99),
                ms(s.max),
                ratio.map_or("—".into(), |r| format!("{r:.2}"))
            ),
            None => writeln!(out, "| {name} | 0 | — | — | — | — | — |"),
        };
    };
    let label = &report.controller.label;
    let l = &report.latency;
    row("self-heal: floor", &l.self_heal.floor, Some(1.0));
    row(&format!("self-heal: {label}"), &l.self_heal.controller, l.self_heal.ratio_p50);
    row("correction: floor", &l.correction.floor, Some(1.0));
    row(&format!("correction: {label}"), &l.correction.controller, l.correction.ratio_p50);
    row(
        &format!("self-heal with {} unrelated ConfigMaps", report.settings.unrelated),
        &l.self_heal_with_unrelated,
        None,
    );
    row("startup (start → my-config created)", &report.startup, None);

    let na = |v: Option<f64>| v.map_or("n/a".to_string(), |v| format!("{v:.0}"));
    let s = &report.steady;
    let _ = writeln!(
        out,
        "\nsteady state ({:.1} s{}): {} reconciles, {} writes (its metrics), {} changes seen by a watch, CPU {:.0} ms",
        s.seconds,
        if report.controller.metrics { ", --resync 1s" } else { ", its own resync" },
        na(s.reconciles),
        na(s.writes),
        s.changes_seen,
        report.cost.steady_cpu_ms,
    );
    let b = &report.burst;
    let _ = writeln!(
        out,
        "burst: {} patches → {} changes seen → {} reconciles, {} writes; desired again {:.1} ms after the first",
        b.patches,
        b.events,
        na(b.reconciles),
        na(b.writes),
        b.settled_ms
    );

    let c = &report.cost;
    // utime + stime count in clock ticks (10 ms): small CPU figures are coarse.
    let _ = writeln!(out, "\n| cost | RSS | peak RSS | CPU (10 ms ticks) |");
    let _ = writeln!(out, "|---|---|---|---|");
    let mut cost = |name: &str, u: &Usage| {
        let _ = writeln!(
            out,
            "| {name} | {:.1} MiB | {:.1} MiB | {:.0} ms |",
            u.rss_mib(),
            u.peak_rss_mib(),
            u.cpu_ms
        );
    };
    cost("idle (started, my-config created)", &c.idle);
    cost("after the latency rounds (last block)", &c.after_runs);
    cost(
        &format!("running while {} unrelated ConfigMaps were created", report.settings.unrelated),
        &c.with_unrelated,
    );
    cost(
        &format!("restarted with {} unrelated ConfigMaps present", report.settings.unrelated),
        &c.with_unrelated_restarted,
    );
    if c.latency_rounds > 0 {
        let _ = writeln!(
            out,
            "CPU over the timed rounds: {:.0} ms for {} rounds ({:.2} ms per round)",
            c.latency_cpu_ms,
            c.latency_rounds,
            c.latency_cpu_ms / c.latency_rounds as f64
        );
    }

    let _ = writeln!(out, "\nbar (envtest lab, 2-core machine):");
    for bar in &report.bars {
        let (mark, value) = match (bar.met, bar.value) {
            (Some(true), Some(v)) => ("met   ", format!("{v:.1} {}", bar.unit)),
            (Some(false), Some(v)) => ("MISSED", format!("{v:.1} {}", bar.unit)),
            _ => ("n/a   ", "n/a".to_string()),
        };
        let _ = writeln!(
            out,
            "  {mark} {}: {} (limit {:.1} {})",
            bar.name,
            value.trim(),
            bar.limit,
            bar.unit
        );
    }
    out
}

/// Writes `bench-<unix time>.json` and `.svg` into `dir`, and the same as
/// `latest.json` / `latest.svg`. Returns the paths written.
pub fn write(dir: &Path, report: &Report, svg: &str) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let json = serde_json::to_string_pretty(report)? + "\n";
    let stamp = report.unix_time;
    let mut written = Vec::new();
    for (name, text) in [
        (format!("bench-{stamp}.json"), &json),
        ("latest.json".to_string(), &json),
        (format!("bench-{stamp}.svg"), &svg.to_string()),
        ("latest.svg".to_string(), &svg.to_string()),
    ] {
        let path = dir.join(name);
        std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
        written.push(path);
    }
    Ok(written)
}

#[cfg(test)]
pub mod tests {
    use super::*;

    /// A report as a short run against another controller would make it.
    pub fn sample() -> Report {
        let latency = Latency {
            self_heal: Comparison::new(vec![4.0, 5.0, 6.0], vec![5.0, 6.0, 9.0]),
            correction: Comparison::new(vec![3.0, 4.0], vec![4.0, 5.0]),
            self_heal_with_unrelated: Series::new(vec![6.0]),
        };
        let steady = Steady { seconds: 2.0, reconciles: None, writes: None, changes_seen: 0 };
        let usage =
            Usage { rss_kib: 9 * 1024, peak_rss_kib: 10 * 1024, cpu_ms: 120.0, processes: 1 };
        let cost = Cost {
            idle: usage,
            after_runs: usage,
            latency_cpu_ms: 50.0,
            latency_rounds: 5,
            with_unrelated: usage,
            with_unrelated_restarted: usage,
            steady_cpu_ms: 1.0,
        };
        Report {
            format: FORMAT,
            unix_time: 1_700_000_000,
            lab: "bench-lab".into(),
            kubernetes_version: "v1.36.3".into(),
            cpus: 2,
            controller: ControllerInfo {
                label: "other (--controller-cmd)".into(),
                binary: None,
                command: Some("other --fast".into()),
                metrics: false,
            },
            settings: Settings {
                rounds: 3,
                blocks: 1,
                steady_seconds: 2.0,
                burst: 5,
                unrelated: 10,
                parallel: 4,
            },
            bars: bars(&latency, &steady, &cost),
            latency,
            startup: Series::new(vec![120.0]),
            steady,
            burst: Burst {
                patches: 5,
                events: 7,
                reconciles: None,
                writes: None,
                settled_ms: 12.0,
            },
            cost,
        }
    }

    #[test]
    fn the_json_has_the_documented_shape() {
        let json = serde_json::to_value(sample()).unwrap();
        assert_eq!(json["format"], FORMAT);
        for key in [
            "unix_time",
            "lab",
            "kubernetes_version",
            "cpus",
            "controller",
            "settings",
            "latency",
            "startup",
            "steady",
            "burst",
            "cost",
            "bars",
        ] {
            assert!(json.get(key).is_some(), "no {key} in {json:#}");
        }
        for measure in ["self_heal", "correction"] {
            for side in ["floor", "controller"] {
                let series = &json["latency"][measure][side];
                for stat in ["n", "min", "p50", "p90", "p99", "max", "mean"] {
                    assert!(series[stat].is_number(), "{measure}.{side}.{stat}: {series}");
                }
                assert!(series["samples_ms"].is_array());
            }
            assert!(json["latency"][measure]["ratio_p50"].is_number());
        }
        let heal = &json["latency"]["self_heal"];
        assert_eq!(heal["floor"]["samples_ms"].as_array().unwrap().len(), 3);
        assert_eq!(heal["controller"]["p50"], 6.0);
        assert_eq!(heal["ratio_p50"], 6.0 / 5.0);
        // Metrics-based measures of a foreign controller are null, not 0.
        assert!(json["steady"]["reconciles"].is_null());
        assert!(json["burst"]["reconciles"].is_null());
        assert_eq!(json["steady"]["changes_seen"], 0);
        for usage in ["idle", "after_runs", "with_unrelated", "with_unrelated_restarted"] {
            assert_eq!(json["cost"][usage]["rss_kib"], 9 * 1024, "{usage}");
            assert!(json["cost"][usage]["cpu_ms"].is_number());
        }
        let bars = json["bars"].as_array().unwrap();
        assert!(bars.iter().all(|b| b["name"].is_string() && b["limit"].is_number()));
        assert!(
            bars.iter().any(|b| b["name"] == "self-heal p50 ≤ 1.5 × floor p50" && b["met"] == true)
        );
    }

    #[test]
    fn an_empty_series_has_no_summary_and_no_ratio() {
        let c = Comparison::new(vec![], vec![1.0]);
        let json = serde_json::to_value(&c).unwrap();
        assert!(json["floor"].get("p50").is_none());
        assert_eq!(json["floor"]["samples_ms"], serde_json::json!([]));
        assert!(json["ratio_p50"].is_null());
    }

    #[test]
    fn bars_judge_what_was_measured() {
        let report = sample();
        let bar = |name: &str| report.bars.iter().find(|b| b.name == name).unwrap();
        assert_eq!(bar("self-heal p50 ≤ 10 ms").met, Some(true));
        assert_eq!(bar("steady-state writes = 0").met, Some(true));
        assert_eq!(bar("RSS with the unrelated ConfigMaps ≤ 20 MiB").value, Some(9.0));
        let text = render(&report);
        assert!(text.contains("| self-heal: floor | 3 | 5.0 ms |"), "{text}");
        assert!(text.contains("n/a reconciles"), "{text}");
    }
}
