//! `cargo maint pictures`: the bench's charts in docs/pictures/, each drawn by code from the
//! run it shows (a sample), never edited by hand; step 3's picture, which never changes, is a
//! committed file. `--check` draws the charts again, fails on a committed file that differs,
//! and looks at every picture in headless Chromium ([`browser`]).

mod browser;

use std::{
    path::{Path, PathBuf},
    process::ExitCode,
};

use anyhow::{Context, Result};
use clap::Args;
use labkit::project;

#[derive(Args)]
pub struct PicturesArgs {
    /// Write nothing: fail when a committed picture is not what its source draws, then render
    /// each in headless Chromium at 1024 px (screenshots in target/pictures/) and fail on a text
    /// outside the picture, two texts on each other, or a text below 11 px.
    #[arg(long)]
    check: bool,
    /// Look at other SVG files the same way (e.g. target/bench/latest.svg after a bench run); repeatable.
    #[arg(long, value_name = "SVG", requires = "check")]
    look: Vec<PathBuf>,
}

/// A picture and what it is drawn from.
pub struct Picture {
    /// Where it is committed, from the repository's root.
    pub path: &'static str,
    /// What it shows, from the repository's root.
    pub source: &'static str,
    draw: fn(&str) -> Result<String>,
}

impl Picture {
    /// The SVG its source draws today.
    pub fn drawn(&self) -> Result<String> {
        (self.draw)(&read(self.source)?)
            .with_context(|| format!("drawing {} from {}", self.path, self.source))
    }

    /// The file's name without `.svg`.
    fn name(&self) -> &str {
        let file = self.path.rsplit('/').next().unwrap_or(self.path);
        file.trim_end_matches(".svg")
    }
}

fn read(relative: &str) -> Result<String> {
    let path = project::root().join(relative);
    std::fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))
}

/// Step 3's picture in each language: committed files, looked at with the charts.
const STEP3: [&str; 2] = ["docs/pictures/workqueue.en.svg", "docs/pictures/workqueue.zh-CN.svg"];

/// Every chart the docs show.
pub fn all() -> Vec<Picture> {
    vec![
        Picture {
            path: "docs/pictures/bench.svg",
            source: "docs/samples/bench.chart.json",
            draw: |text| Ok(bench::chart::draw(&bench::kept::Run::parse(text)?)),
        },
        Picture {
            path: "docs/pictures/bench-short.svg",
            source: "docs/samples/bench-short.chart.json",
            draw: |text| Ok(bench::chart::draw(&bench::kept::Run::parse(text)?)),
        },
    ]
}

pub fn run(args: PicturesArgs) -> Result<ExitCode> {
    let root = project::root();
    let mut failed = false;
    if !args.check {
        for picture in all() {
            let path = root.join(picture.path);
            std::fs::create_dir_all(path.parent().context("a folder")?)?;
            std::fs::write(&path, picture.drawn()?)
                .with_context(|| format!("cannot write {}", path.display()))?;
            eprintln!("wrote {} from {}", picture.path, picture.source);
        }
        return Ok(ExitCode::SUCCESS);
    }
    let shots = project::target_dir().join("pictures");
    for picture in all() {
        let drawn = picture.drawn()?;
        if read(picture.path).ok().as_deref() != Some(drawn.as_str()) {
            println!(
                "{}: not what {} draws (run `cargo maint pictures`)",
                picture.path, picture.source
            );
            failed = true;
        }
        failed |= !look(&drawn, picture.path, picture.name(), &shots)?;
    }
    let committed = STEP3.iter().map(|p| root.join(p));
    for file in committed.chain(args.look.iter().cloned()) {
        let svg = std::fs::read_to_string(&file)
            .with_context(|| format!("cannot read {}", file.display()))?;
        let name = file.file_stem().map_or("picture".into(), |s| s.to_string_lossy());
        failed |= !look(&svg, &file.display().to_string(), &name, &shots)?;
    }
    Ok(if failed { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

/// Renders `svg` in Chromium and prints what it measured; whether it is fine.
fn look(svg: &str, shown_as: &str, name: &str, shots: &Path) -> Result<bool> {
    let (measured, png) = browser::look(svg, name, shots)?;
    let faults = browser::faults(&measured);
    let root = project::root();
    println!(
        "{shown_as}: {} {:.0} × {:.0} px, {} texts, smallest {:.1} px; screenshot {}",
        if faults.is_empty() { "fine at" } else { "FAULTY at" },
        measured.width,
        measured.height,
        measured.texts.len(),
        browser::smallest(&measured),
        png.strip_prefix(&root).unwrap_or(&png).display()
    );
    for fault in &faults {
        println!("  {fault}");
    }
    Ok(faults.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A bench chart is drawn from the run its table is: every latency
    /// series of the kept run has the n and p50 of a row of the table the
    /// run printed (`<name>.md` beside `<name>.chart.json`).
    #[test]
    fn each_bench_chart_is_its_tables_run() {
        for picture in all().iter().filter(|p| p.source.ends_with(".chart.json")) {
            let run = bench::kept::Run::parse(&read(picture.source).unwrap()).unwrap();
            let table_file = picture.source.replace(".chart.json", ".md");
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
                    "{table_file} has no row {row}: {} is not its run's chart",
                    picture.path
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

    /// The committed charts are what their sources draw today.
    #[test]
    fn every_committed_picture_is_what_its_source_draws() {
        for picture in all() {
            let committed = read(picture.path).unwrap();
            assert!(
                committed == picture.drawn().unwrap(),
                "{} is not what {} draws: run `cargo maint pictures`",
                picture.path,
                picture.source
            );
        }
    }
}
