#![cfg(test)]
//! The bench's charts in docs/pictures/, each drawn by code from the run it shows (a sample),
//! never edited by hand, and step 3's picture, which never changes: checked here, and the
//! charts written again with `E2E_WRITE_SAMPLES=1` (as the samples are) after the drawing
//! changed. Every picture's layout is checked as the drawing module placed it
//! (`bench::layout`). Tests only.

use labkit::files::read_in_repo as read;

/// Every chart the docs show: where it is committed, and the run it is drawn from (from the
/// repository's root).
const CHARTS: [(&str, &str); 2] = [
    ("docs/pictures/bench.svg", "docs/samples/bench.chart.json"),
    ("docs/pictures/bench-short.svg", "docs/samples/bench-short.chart.json"),
];

/// The chart the run kept in `source` draws today.
fn drawn(source: &str) -> String {
    bench::chart::draw(&bench::kept::Run::parse(&read(source).unwrap()).unwrap())
}

/// Step 3's picture in each language: committed files, checked with the charts.
const STEP3: [&str; 2] = ["docs/pictures/workqueue.en.svg", "docs/pictures/workqueue.zh-CN.svg"];

/// A bench chart is drawn from the run its table is: every latency
/// series of the kept run has the n and p50 of a row of the table the
/// run printed (`<name>.md` beside `<name>.chart.json`).
#[test]
fn each_bench_chart_is_its_tables_run() {
    for (picture, source) in CHARTS {
        let run = bench::kept::Run::parse(&read(source).unwrap()).unwrap();
        let table_file = source.replace(".chart.json", ".md");
        let table = read(&table_file).unwrap();
        let mut series = vec![
            ("self-heal", "floor", &run.floor.self_heal),
            ("correction", "floor", &run.floor.correction),
        ];
        for side in &run.subjects {
            series.push(("self-heal", &side.label, &side.latencies.self_heal));
            series.push(("correction", &side.label, &side.latencies.correction));
        }
        for (measure, who, samples) in series {
            let mut sorted = samples.clone();
            sorted.sort_by(f64::total_cmp);
            let p50 = bench::stats::percentile(&sorted, 50.0).unwrap();
            let row = format!("| {measure} | {who} | {} | {p50:.1} ms |", sorted.len());
            assert!(
                table.lines().any(|l| l.starts_with(&row)),
                "{table_file} has no row {row}: {picture} is not its run's chart",
            );
        }
    }
}

/// Step 3's picture says each language's words: the page's, not the other's.
#[test]
fn step_3s_picture_speaks_its_pages_language() {
    let (en, zh) = (read(STEP3[0]).unwrap(), read(STEP3[1]).unwrap());
    assert!(zh.contains("工作队列") && !zh.contains("work queue"));
    assert!(en.contains("work queue") && !en.contains("工作队列"));
}

/// The committed charts are what their sources draw today (written so with
/// `E2E_WRITE_SAMPLES=1`), and every picture's layout is fine.
#[test]
fn every_committed_picture_is_what_its_source_draws() {
    for (picture, source) in CHARTS {
        if std::env::var("E2E_WRITE_SAMPLES").as_deref() == Ok("1") {
            std::fs::write(labkit::project::root().join(picture), drawn(source)).unwrap();
        }
        assert!(
            read(picture).unwrap() == drawn(source),
            "{picture} is not what {source} draws: E2E_WRITE_SAMPLES=1 cargo test -p maint pictures"
        );
    }
    for picture in CHARTS.map(|(p, _)| p).into_iter().chain(STEP3) {
        let faults = bench::layout::layout(&read(picture).unwrap()).unwrap().faults;
        assert_eq!(faults, Vec::<String>::new(), "{picture}");
    }
}
