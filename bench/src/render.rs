//! The report as a person reads it: the Markdown tables and the bar's lines
//! that `cargo maint bench` prints (and docs/samples/bench.md keeps).

use std::fmt::Write as _;

use crate::{report::*, stats::Summary};

/// `9.0 ms [7.0–9.6]`: the p99 and the samples that bound the true one with
/// 95 % confidence (`beyond the max` when the series is too short for that).
fn p99_with_interval(s: &Summary) -> String {
    let high = s.p99_high.map_or("beyond the max".into(), |h| format!("{h:.1}"));
    format!("{:.1} ms [{:.1}–{high}]", s.p99, s.p99_low)
}

/// The report as a person reads it (Markdown tables).
pub fn render(report: &Report) -> String {
    let mut out = String::new();
    let labels: Vec<&str> = report.subjects.iter().map(|s| s.label.as_str()).collect();
    let _ = writeln!(
        out,
        "\nbench on lab {} (Kubernetes {}, {} CPUs): {}; {} rounds per series, all sides at once taking turns round by round, each started {} times\n",
        report.lab,
        report.kubernetes_version,
        report.cpus,
        labels.join(", "),
        report.settings.rounds,
        report.settings.blocks,
    );
    let ours_label = report.ours().map_or("my-controller", |o| o.label.as_str()).to_string();
    latency(&mut out, report, &ours_label);
    quiet(&mut out, report);
    cost(&mut out, report, &ours_label);
    bars(&mut out, report, &ours_label);
    if !report.phases.is_empty() {
        let _ = writeln!(
            out,
            "\nphases, from the API server's audit log (ms, p50 / p90 / p99; see bench/src/phases.rs):\n"
        );
        out.push_str(&crate::phases::render(&report.phases));
    }
    out
}

fn ratio(r: Option<f64>) -> String {
    r.map_or("—".into(), |r| format!("{r:.2}"))
}

/// The latency table: every series of every subject, next to the floor.
fn latency(out: &mut String, report: &Report, ours_label: &str) {
    let _ = writeln!(
        out,
        "| measure | subject | n | p50 | p90 | p99 [95 % CI] | max | p50 ÷ floor | p50 ÷ {ours_label} |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|");
    let mut row = |measure: &str,
                   subject: &str,
                   series: &Series,
                   to_floor: Option<f64>,
                   to_ours: Option<f64>| {
        let ms = |v: f64| format!("{v:.1} ms");
        let _ = match &series.summary {
            Some(s) => writeln!(
                out,
                "| {measure} | {subject} | {} | {} | {} | {} | {} | {} | {} |",
                s.n,
                ms(s.p50),
                ms(s.p90),
                p99_with_interval(s),
                ms(s.max),
                ratio(to_floor),
                ratio(to_ours)
            ),
            None => writeln!(out, "| {measure} | {subject} | 0 | — | — | — | — | — | — |"),
        };
    };
    let unrelated = format!("self-heal, {} unrelated ConfigMaps", report.settings.unrelated);
    for (measure, floor, pick) in [
        (
            "self-heal",
            Some(&report.floor.self_heal),
            (|s: &Subject| &s.self_heal) as fn(&Subject) -> &Versus,
        ),
        ("correction", Some(&report.floor.correction), |s: &Subject| &s.correction),
        ("startup", None, |s: &Subject| &s.startup),
    ] {
        if let Some(floor) = floor {
            row(measure, "floor", floor, Some(1.0), None);
        }
        for s in &report.subjects {
            let v = pick(s);
            row(measure, &s.label, &v.series, v.to_floor.p50, v.to_ours.p50);
        }
    }
    for s in &report.subjects {
        row(&unrelated, &s.label, &s.self_heal_with_unrelated, None, None);
    }
}

/// The steady window and the burst of each subject.
fn quiet(out: &mut String, report: &Report) {
    let na = |v: Option<f64>| v.map_or("n/a".to_string(), |v| format!("{v:.0}"));
    let _ = writeln!(
        out,
        "\n| subject | steady: writes / changes seen / reconciles | burst: patches → changes seen → reconciles, writes | burst settled |"
    );
    let _ = writeln!(out, "|---|---|---|---|");
    for s in &report.subjects {
        let (st, b) = (&s.steady, &s.burst);
        let _ = writeln!(
            out,
            "| {} | {} / {} / {} in {:.1} s{} | {} → {} → {}, {} | {:.1} ms |",
            s.label,
            na(st.writes),
            st.changes_seen,
            na(st.reconciles),
            st.seconds,
            if s.metrics { " (--resync 1s)" } else { "" },
            b.patches,
            b.events,
            na(b.reconciles),
            na(b.writes),
            b.settled_ms
        );
    }
}

/// Memory and CPU of each subject.
fn cost(out: &mut String, report: &Report, ours_label: &str) {
    // utime + stime count in clock ticks (10 ms): small CPU figures are coarse.
    let rss_ours = report.ours().map(|o| o.cost.with_unrelated.rss_mib());
    let _ = writeln!(
        out,
        "\n| cost | RSS idle | RSS with {} unrelated ConfigMaps | ÷ {ours_label} | CPU per round (10 ms ticks) | CPU in steady state |",
        report.settings.unrelated
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|");
    for s in &report.subjects {
        let c = &s.cost;
        let rss = c.with_unrelated.rss_mib();
        let _ = writeln!(
            out,
            "| {} | {:.1} MiB | {rss:.1} MiB | {} | {} | {:.0} ms |",
            s.label,
            c.idle.rss_mib(),
            ratio(rss_ours.map(|o| rss / o)),
            c.cpu_per_round_ms().map_or("—".into(), |v| format!("{v:.2} ms")),
            c.steady_cpu_ms
        );
    }
}

/// The bar my-controller is held to, one line each.
fn bars(out: &mut String, report: &Report, ours_label: &str) {
    let _ = writeln!(out, "\nbar for {ours_label} (envtest lab, 2-core machine):");
    if report.provider != "envtest" {
        let _ = writeln!(
            out,
            "  (this run is on a {} lab: its rounds include the way to the cluster's API server)",
            report.provider
        );
    }
    for bar in &report.bars {
        let (mark, value) = match (bar.met, bar.value) {
            (Some(true), Some(v)) => ("met   ", format!("{v:.2} {}", bar.unit)),
            (Some(false), Some(v)) => ("MISSED", format!("{v:.2} {}", bar.unit)),
            (None, Some(v)) if bar.limit.is_finite() => {
                ("not proven", format!("{v:.2} {}", bar.unit))
            }
            _ => ("n/a   ", "n/a".to_string()),
        };
        let _ = writeln!(
            out,
            "  {mark} {}: {} (limit {:.2} {})",
            bar.name,
            value.trim(),
            bar.limit,
            bar.unit
        );
    }
    for line in &report.floor_beaten {
        let _ = writeln!(out, "  note: {line}");
    }
}
