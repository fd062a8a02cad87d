//! What a bench run found: the JSON file (its shape is tested), the tables a
//! person reads, and the bar it is held to. Every subject — my-controller
//! and each `--peer` — has the same measures, each next to the floor of the
//! same run and to my-controller.

use crate::{
    quiet::{Burst, Steady},
    usage::Usage,
};
use serde::Serialize;

use super::stats::Summary;

/// Bumped when a reader of an older file would misread this one.
pub const FORMAT: u32 = 2;

/// A subject whose p50 is below this fraction of the floor's beat the floor
/// beyond noise: the floor is then no lower bound, and bars against it are
/// not proven.
pub const BEATS_FLOOR_BELOW: f64 = 0.95;

#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub format: u32,
    /// Seconds since the Unix epoch when the run ended; also in the file name.
    pub unix_time: u64,
    pub lab: String,
    /// `envtest`, `kind` or `existing`: the bars are set for an envtest lab.
    pub provider: String,
    pub kubernetes_version: String,
    /// CPUs of this machine: the figures depend on it.
    pub cpus: usize,
    pub settings: Settings,
    /// The harness's own loop in the controller's place.
    pub floor: Floor,
    /// my-controller first, then each peer, in the order measured.
    pub subjects: Vec<Subject>,
    pub bars: Vec<Bar>,
    /// One line per subject and measure whose p50 beat the floor's.
    pub floor_beaten: Vec<String>,
    /// Where the rounds' milliseconds went (`--phases`; empty without).
    pub phases: Vec<super::phases::Row>,
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
pub struct Floor {
    pub self_heal: Series,
    pub correction: Series,
}

/// Everything measured of one controller.
#[derive(Clone, Debug, Serialize)]
pub struct Subject {
    /// `my-controller (release)`, `course-go (client-go v0.36.3)`, or a
    /// `--peer` command's program.
    pub label: String,
    /// Whether this is my-controller (the one the others are compared with).
    pub ours: bool,
    /// The command line it ran with.
    pub command: String,
    /// Whether it serves our /metrics (reconcile and write counts).
    pub metrics: bool,
    /// Delete → recreated.
    pub self_heal: Versus,
    /// Patch → data put back.
    pub correction: Versus,
    /// Self-heal while the unrelated ConfigMaps exist (no floor).
    pub self_heal_with_unrelated: Series,
    /// Start → my-config created, once per start (ms).
    pub startup: Versus,
    pub steady: Steady,
    pub burst: Burst,
    pub cost: Cost,
}

/// A series with its ratios to the floor and to my-controller (p50, p99).
#[derive(Clone, Debug, Serialize)]
pub struct Versus {
    #[serde(flatten)]
    pub series: Series,
    pub to_floor: Ratios,
    pub to_ours: Ratios,
}

impl Versus {
    /// A series, its ratios still to come ([`Report::new`] adds them).
    pub fn new(samples_ms: Vec<f64>) -> Versus {
        let series = Series::new(samples_ms);
        Versus { series, to_floor: Ratios::default(), to_ours: Ratios::default() }
    }
}

#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Ratios {
    pub p50: Option<f64>,
    pub p99: Option<f64>,
}

impl Ratios {
    fn of(series: &Series, to: Option<&Series>) -> Ratios {
        let ratio = |pick: fn(&Summary) -> f64| {
            Some(pick(series.summary.as_ref()?) / pick(to?.summary.as_ref()?))
        };
        Ratios { p50: ratio(|s| s.p50), p99: ratio(|s| s.p99) }
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

    pub(crate) fn p50(&self) -> Option<f64> {
        self.summary.as_ref().map(|s| s.p50)
    }

    pub(crate) fn p90(&self) -> Option<f64> {
        self.summary.as_ref().map(|s| s.p90)
    }

    pub(crate) fn p99(&self) -> Option<f64> {
        self.summary.as_ref().map(|s| s.p99)
    }
}

/// What a controller cost, from /proc (its whole process group).
#[derive(Clone, Debug, Serialize)]
pub struct Cost {
    /// Started, my-config created, nothing happening.
    pub idle: Usage,
    /// Started while the unrelated ConfigMaps exist, after its self-heal
    /// rounds with them (its initial list would carry them all without a
    /// field selector).
    pub with_unrelated: Usage,
    /// CPU it used during its timed latency rounds, summed over blocks.
    pub latency_cpu_ms: f64,
    /// The rounds it served in that time.
    pub latency_rounds: usize,
    /// CPU used over the steady window.
    pub steady_cpu_ms: f64,
}

impl Cost {
    pub fn cpu_per_round_ms(&self) -> Option<f64> {
        (self.latency_rounds > 0).then(|| self.latency_cpu_ms / self.latency_rounds as f64)
    }
}

/// One line of the bar.
#[derive(Clone, Debug, Serialize)]
pub struct Bar {
    pub name: String,
    /// What was measured; `None` when it does not apply.
    pub value: Option<f64>,
    pub limit: f64,
    pub unit: String,
    /// `value ≤ limit`; `None` when it does not apply or is not proven (a
    /// bar against a floor that some subject beat).
    pub met: Option<bool>,
}

impl Bar {
    fn at_most(name: impl Into<String>, value: Option<f64>, limit: Option<f64>, unit: &str) -> Bar {
        let limit_or_nan = limit.unwrap_or(f64::NAN);
        let met = value.zip(limit).map(|(v, l)| v <= l);
        Bar { name: name.into(), met, value, limit: limit_or_nan, unit: unit.into() }
    }
}

impl Report {
    /// The report of a run, each subject's ratios to the floor and to my-controller added.
    pub fn new(
        meta: (u64, (String, String), String, usize),
        settings: Settings,
        floor: Floor,
        mut subjects: Vec<Subject>,
    ) -> Report {
        let (unix_time, (lab, provider), kubernetes_version, cpus) = meta;
        let ours = subjects
            .iter()
            .find(|s| s.ours)
            .map(|o| [&o.self_heal, &o.correction, &o.startup].map(|v| v.series.clone()));
        for s in &mut subjects {
            let floors = [Some(&floor.self_heal), Some(&floor.correction), None];
            for (i, v) in
                [&mut s.self_heal, &mut s.correction, &mut s.startup].into_iter().enumerate()
            {
                v.to_floor = Ratios::of(&v.series, floors[i]);
                v.to_ours = Ratios::of(&v.series, ours.as_ref().map(|o| &o[i]));
            }
        }
        let floor_beaten = floor_beaten(&subjects);
        let bars = bars(&subjects, !floor_beaten.is_empty());
        Report {
            format: FORMAT,
            unix_time,
            lab,
            provider,
            kubernetes_version,
            cpus,
            settings,
            floor,
            subjects,
            bars,
            floor_beaten,
            phases: Vec::new(),
        }
    }

    pub(crate) fn ours(&self) -> Option<&Subject> {
        self.subjects.iter().find(|s| s.ours)
    }
}

/// A line for each subject and measure whose p50 is below the floor's
/// beyond noise.
fn floor_beaten(subjects: &[Subject]) -> Vec<String> {
    let mut lines = Vec::new();
    for s in subjects {
        for (what, v) in [("self-heal", &s.self_heal), ("correction", &s.correction)] {
            if let Some(r) = v.to_floor.p50.filter(|r| *r < BEATS_FLOOR_BELOW) {
                lines.push(format!(
                    "{}'s {what} p50 is {r:.2} × the floor's: the floor is no lower bound in this run, \
                     so the bars against it are not proven",
                    s.label
                ));
            }
        }
    }
    lines
}

/// The bar (envtest lab, 2 cores), for my-controller: latencies within
/// 1.10 × the floor's p50, 10 ms at p50 and 50 ms at p99, and at or below
/// every peer's p50 and p99; no writes in steady state; RSS within 20 MiB
/// and 1/5 of each peer's with the unrelated ConfigMaps present; startup
/// within 1/10 of each peer's.
pub fn bars(subjects: &[Subject], floor_beaten: bool) -> Vec<Bar> {
    let Some(ours) = subjects.iter().find(|s| s.ours) else {
        return Vec::new();
    };
    let peers: Vec<&Subject> = subjects.iter().filter(|s| !s.ours).collect();
    let mut bars = Vec::new();
    for (what, pick) in [
        ("self-heal", (|s: &Subject| &s.self_heal) as fn(&Subject) -> &Versus),
        ("correction", |s: &Subject| &s.correction),
    ] {
        let mine = pick(ours);
        let mut to_floor = Bar::at_most(
            format!("{what} p50 ≤ 1.10 × floor p50"),
            mine.to_floor.p50,
            Some(1.10),
            "× floor",
        );
        if floor_beaten {
            to_floor.met = None;
        }
        bars.push(to_floor);
        bars.push(Bar::at_most(format!("{what} p50 ≤ 10 ms"), mine.series.p50(), Some(10.0), "ms"));
        bars.push(Bar::at_most(format!("{what} p99 ≤ 50 ms"), mine.series.p99(), Some(50.0), "ms"));
        for peer in &peers {
            let theirs = &pick(peer).series;
            for (p, at) in [
                ("p50", Series::p50 as fn(&Series) -> Option<f64>),
                ("p90", Series::p90),
                ("p99", Series::p99),
            ] {
                bars.push(Bar::at_most(
                    format!("{what} {p} ≤ {}'s", peer.label),
                    at(&mine.series),
                    at(theirs),
                    "ms",
                ));
            }
        }
    }
    // The API server's count covers any controller; ours also counts its own
    // (a no-op update would not show in a watch).
    let writes = (ours.steady.changes_seen as f64).max(ours.steady.writes.unwrap_or(0.0));
    bars.push(Bar::at_most("steady-state writes = 0", Some(writes), Some(0.0), ""));
    let rss = ours.cost.with_unrelated.rss_mib();
    bars.push(Bar::at_most(
        "RSS with the unrelated ConfigMaps ≤ 20 MiB",
        Some(rss),
        Some(20.0),
        "MiB",
    ));
    for peer in &peers {
        // Against the course's Go program, the margins the README states;
        // against any other peer, no worse.
        let (rss_share, startup_share) = if peer.label.starts_with(super::peers::COURSE_LABEL) {
            (5.0, 6.0)
        } else {
            (1.0, 1.0)
        };
        let of = |share: f64| if share == 1.0 { String::new() } else { format!("1/{share} of ") };
        let theirs = peer.cost.with_unrelated.rss_mib();
        bars.push(Bar::at_most(
            format!("RSS with the unrelated ConfigMaps ≤ {}{}'s", of(rss_share), peer.label),
            Some(rss),
            Some(theirs / rss_share),
            "MiB",
        ));
        bars.push(Bar::at_most(
            format!("startup p50 ≤ {}{}'s", of(startup_share), peer.label),
            ours.startup.series.p50(),
            peer.startup.series.p50().map(|p| p / startup_share),
            "ms",
        ));
    }
    bars
}

#[cfg(test)]
pub mod tests {
    use super::*;
    use crate::render::render;

    fn usage(mib: u64) -> Usage {
        Usage { rss_kib: mib * 1024, peak_rss_kib: mib * 1024, cpu_ms: 120.0, processes: 1 }
    }

    fn measured(label: &str, ours: bool, heal: Vec<f64>, rss: u64, startup: f64) -> Subject {
        Subject {
            label: label.into(),
            ours,
            command: format!("/bin/{label}"),
            metrics: ours,
            self_heal: Versus::new(heal),
            correction: Versus::new(vec![4.0, 5.0]),
            self_heal_with_unrelated: Series::new(vec![6.0]),
            startup: Versus::new(vec![startup]),
            steady: Steady {
                seconds: 2.0,
                reconciles: ours.then_some(2.0),
                writes: ours.then_some(0.0),
                changes_seen: 0,
            },
            burst: Burst {
                patches: 5,
                events: 7,
                reconciles: None,
                writes: None,
                settled_ms: 12.0,
            },
            cost: Cost {
                idle: usage(rss),
                with_unrelated: usage(rss),
                latency_cpu_ms: 50.0,
                latency_rounds: 5,
                steady_cpu_ms: 1.0,
            },
        }
    }

    /// A short run's settings.
    fn settings() -> Settings {
        Settings { rounds: 3, blocks: 1, steady_seconds: 2.0, burst: 5, unrelated: 10, parallel: 4 }
    }

    /// A report as a short run with one peer would make it.
    pub fn sample() -> Report {
        let floor = Floor {
            self_heal: Series::new(vec![4.0, 5.0, 6.0]),
            correction: Series::new(vec![3.0, 4.0]),
        };
        Report::new(
            (1_700_000_000, ("bench-lab".into(), "envtest".into()), "v1.36.3".into(), 2),
            settings(),
            floor,
            vec![
                measured("my-controller (release)", true, vec![5.0, 5.0, 6.0], 9, 12.0),
                measured("course-go", false, vec![6.0, 7.0, 9.0], 60, 100.0),
            ],
        )
    }

    #[test]
    fn the_json_has_the_documented_shape() {
        let json = serde_json::to_value(sample()).unwrap();
        assert_eq!(json["format"], FORMAT);
        for key in [
            "unix_time",
            "lab",
            "provider",
            "kubernetes_version",
            "cpus",
            "settings",
            "floor",
            "subjects",
            "bars",
            "floor_beaten",
        ] {
            assert!(json.get(key).is_some(), "no {key} in {json:#}");
        }
        for measure in ["self_heal", "correction"] {
            for stat in ["n", "min", "p50", "p90", "p99", "max", "mean"] {
                assert!(json["floor"][measure][stat].is_number(), "floor.{measure}.{stat}");
            }
        }
        let subjects = json["subjects"].as_array().unwrap();
        assert_eq!(subjects.len(), 2);
        for s in subjects {
            for measure in ["self_heal", "correction", "startup"] {
                assert!(s[measure]["p50"].is_number(), "{measure}: {s}");
                assert!(s[measure]["samples_ms"].is_array());
                assert!(s[measure]["to_ours"]["p50"].is_number(), "{measure}: {s}");
            }
            assert!(s["self_heal"]["to_floor"]["p50"].is_number());
            assert!(s["cost"]["with_unrelated"]["rss_kib"].is_number());
            assert!(s["label"].is_string() && s["command"].is_string());
        }
        let (ours, go) = (&subjects[0], &subjects[1]);
        assert_eq!(ours["self_heal"]["to_floor"]["p50"], 1.0);
        assert_eq!(ours["self_heal"]["to_ours"]["p50"], 1.0);
        assert_eq!(go["self_heal"]["to_ours"]["p50"], 7.0 / 5.0);
        // Metrics-based measures of a foreign controller are null, not 0.
        assert!(go["steady"]["reconciles"].is_null());
        assert!(json["floor_beaten"].as_array().unwrap().is_empty());
    }

    #[test]
    fn bars_compare_with_the_floor_and_each_peer() {
        let report = sample();
        let bar = |name: &str| {
            report
                .bars
                .iter()
                .find(|b| b.name == name)
                .unwrap_or_else(|| panic!("no bar {name}: {:?}", report.bars))
        };
        assert_eq!(bar("self-heal p50 ≤ 1.10 × floor p50").met, Some(true));
        assert_eq!(bar("self-heal p50 ≤ course-go's").met, Some(true));
        assert_eq!(bar("self-heal p99 ≤ course-go's").met, Some(true));
        assert_eq!(bar("RSS with the unrelated ConfigMaps ≤ 1/5 of course-go's").met, Some(true));
        assert_eq!(bar("startup p50 ≤ 1/6 of course-go's").met, Some(true), "12 ms vs 100 ms / 6");
        assert_eq!(bar("self-heal p90 ≤ course-go's").met, Some(true));
        assert_eq!(bar("steady-state writes = 0").met, Some(true));
        let text = render(&report);
        assert!(text.contains("| self-heal | floor | 3 | 5.0 ms |"), "{text}");
        assert!(
            text.contains(
                "| self-heal | course-go | 3 | 7.0 ms | 9.0 ms | 9.0 ms [7.0–beyond the max] | 9.0 ms | 1.40 | 1.40 |"
            ),
            "{text}"
        );
        assert!(text.contains("MISSED correction p50 ≤ 1.10 × floor p50"), "{text}");
        assert!(!text.contains("this run is on a"), "{text}");
        let on_kind = Report { provider: "kind".into(), ..sample() };
        assert!(render(&on_kind).contains("this run is on a kind lab"));
        // Any other peer: no worse than it.
        let mut other = sample();
        other.subjects[1].label = "their-controller (--peer)".into();
        let bars = bars(&other.subjects, false);
        let named = |name: &str| bars.iter().find(|b| b.name == name).map(|b| b.met);
        assert_eq!(named("startup p50 ≤ their-controller (--peer)'s"), Some(Some(true)));
        assert_eq!(
            named("RSS with the unrelated ConfigMaps ≤ their-controller (--peer)'s"),
            Some(Some(true))
        );
    }

    #[test]
    fn a_subject_below_the_floor_leaves_the_floor_bars_unproven() {
        let floor = Floor {
            self_heal: Series::new(vec![10.0; 3]),
            correction: Series::new(vec![3.0, 4.0]),
        };
        let report = Report::new(
            (0, ("l".into(), "envtest".into()), "v1.36.3".into(), 2),
            settings(),
            floor,
            vec![
                measured("my-controller (release)", true, vec![10.0; 3], 9, 12.0),
                measured("fast", false, vec![8.0; 3], 60, 200.0),
            ],
        );
        assert_eq!(report.floor_beaten.len(), 1, "{:?}", report.floor_beaten);
        assert!(report.floor_beaten[0].starts_with("fast's self-heal p50 is 0.80 × the floor's"));
        let bar =
            report.bars.iter().find(|b| b.name == "self-heal p50 ≤ 1.10 × floor p50").unwrap();
        assert_eq!(bar.met, None);
        assert!(render(&report).contains("not proven self-heal p50 ≤ 1.10 × floor p50"));
    }

    #[test]
    fn an_empty_series_has_no_summary_and_no_ratio() {
        let empty = Series::new(vec![]);
        let json = serde_json::to_value(&empty).unwrap();
        assert!(json.get("p50").is_none());
        assert_eq!(json["samples_ms"], serde_json::json!([]));
        assert_eq!(Ratios::of(&empty, Some(&Series::new(vec![1.0]))).p50, None);
    }
}
