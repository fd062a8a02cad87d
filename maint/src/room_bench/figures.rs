//! The room's figures beside the issue's goals: as Markdown a person reads,
//! as JSON, and each attendee's timeline as a picture.

use std::fmt::Write as _;
use std::time::Duration;

use anyhow::Result;
use bench::{chart, stats::percentile};
use serde::Serialize;

use super::attendees::{Phase, Timeline};
use super::cluster_metrics::{ApiFigures, ControllersMemory};

#[derive(Default, Serialize)]
pub struct Report {
    pub attendees: usize,
    /// How many `lab up`s started together.
    pub wave: u32,
    pub graders: u32,
    pub machine: String,
    pub cluster: String,
    pub room_up: Duration,
    pub room_down: Duration,
    /// With all running, one namespace's heal at a time.
    pub heal_all: Vec<Duration>,
    /// With all running, every namespace's heal at the same moment.
    pub heal_lockstep: Vec<Duration>,
    pub heal_alone: Vec<Duration>,
    pub storm: Storm,
    pub api_server: ApiFigures,
    pub controllers_idle: ControllersMemory,
    pub controllers_busy: ControllersMemory,
    pub grading: Duration,
    #[serde(skip)]
    pub room_table: String,
    pub timeline: Timeline,
    /// The cluster's objects after, the same as before.
    pub objects: usize,
    pub failures: Vec<String>,
}

/// Attendee 02's self-heals and the instructor's LISTs of the room's namespaces, in a
/// quiet room and while attendee 01 storms its namespace with LISTs (how many it made).
#[derive(Default, Serialize)]
pub struct Storm {
    pub quiet: (Vec<Duration>, Vec<Duration>),
    pub stormed: (Vec<Duration>, Vec<Duration>),
    pub lists: usize,
}

/// The issue's goals for a room of thirty (docs/room-bench.md).
const ROOM_UP_WITHIN: f64 = 60.0;
const LABS_READY_WITHIN: f64 = 300.0;
const HEAL_P99_RATIO: f64 = 2.0;
const GRADED_WITHIN: f64 = 15.0 * 60.0;

impl Report {
    pub async fn new(
        attendees: usize,
        wave: u32,
        graders: u32,
        admin: &kube::Client,
    ) -> Result<Report> {
        let version = admin.apiserver_version().await?.git_version;
        let nodes = kube::Api::<k8s_openapi::api::core::v1::Node>::all(admin.clone())
            .list(&Default::default())
            .await?
            .items
            .len();
        let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let kib = bench::usage::status_kib(&meminfo, "MemTotal").unwrap_or(0) as f64;
        Ok(Report {
            attendees,
            wave,
            graders,
            machine: format!("{cpus} CPUs, {:.0} GiB", kib / (1 << 20) as f64),
            cluster: format!("Kubernetes {version}, {nodes} nodes"),
            ..Report::default()
        })
    }

    pub fn json(&self) -> Result<String> {
        Ok(serde_json::to_string_pretty(self)? + "\n")
    }

    pub fn markdown(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "# A room of {} on one cluster\n\n`cargo maint room-bench --attendees {} --wave {} --graders {}` on {} ({}); \
             the cluster's {} objects the same before and after.\n",
            self.attendees,
            self.attendees,
            self.wave,
            self.graders,
            self.cluster,
            self.machine,
            self.objects
        );
        out += &self.table();
        if !self.failures.is_empty() {
            let _ = writeln!(out, "\nWhat failed:\n\n```\n{}\n```", self.failures.join("\n"));
        }
        let _ = writeln!(
            out,
            "\nThe room's grades, handed in (`cargo xtask grade --collect --room NAME`):\n\n```\n{}\n```",
            self.room_table.trim_end()
        );
        out
    }

    /// The figures beside the goals.
    fn table(&self) -> String {
        let seconds = |phase: Phase| {
            let (mut each, whole) = self.timeline.of(phase);
            each.sort_by(f64::total_cmp);
            let p = |q| percentile(&each, q).unwrap_or(f64::NAN);
            (p(50.0), p(90.0), p(100.0), whole)
        };
        let (up50, up90, upmax, up_whole) = seconds(Phase::Up);
        let (ex50, _, exmax, ex_whole) = seconds(Phase::Experiments);
        let (gr50, _, grmax, _) = seconds(Phase::Graded);
        let (dn50, _, dnmax, _) = seconds(Phase::Down);
        let (room_up, grading) = (self.room_up.as_secs_f64(), self.grading.as_secs_f64());
        let api = &self.api_server;
        let memory = |m: &ControllersMemory| format!("{:.0} MiB in {} pods", m.total_mib, m.pods);
        format!(
            "| figure | measured | goal (a room of 30) |\n|---|---|---|\n\
             | `room up` | {room_up:.1} s | within {ROOM_UP_WITHIN} s: {} |\n\
             | each `lab up` | p50 {up50:.1} s, p90 {up90:.1} s, max {upmax:.1} s | |\n\
             | every lab ready, from the first `lab up` | {up_whole:.1} s | within {LABS_READY_WITHIN} s: {} |\n\
             | the four experiments, per namespace | p50 {ex50:.1} s, max {exmax:.1} s; all namespaces {ex_whole:.1} s | |\n\
             {}\
             | API server, whole run | {} requests (watches apart), p99 ≤ {} s; {:.0} MiB resident at the end | |\n\
             | controllers' memory, after lab up | {} | |\n\
             | controllers' memory, after self-heal | {} | |\n\
             | grading the room | {grading:.0} s; per attendee p50 {gr50:.0} s, max {grmax:.0} s | within {GRADED_WITHIN} s: {} |\n\
             | each `lab down` | p50 {dn50:.1} s, max {dnmax:.1} s | |\n\
             | `room down` | {:.1} s | |\n",
            goal(room_up <= ROOM_UP_WITHIN),
            goal(up_whole <= LABS_READY_WITHIN),
            self.heal_rows(),
            api.requests,
            api.p99_at_most,
            api.memory_mib,
            memory(&self.controllers_idle),
            memory(&self.controllers_busy),
            goal(grading <= GRADED_WITHIN),
            self.room_down.as_secs_f64()
        )
    }

    /// Self-heal alone, with all running one at a time (the goal), in lockstep.
    fn heal_rows(&self) -> String {
        let alone99 = ms(&self.heal_alone, 99.0);
        // The figures of `samples`, and their p99's ratio to one alone's.
        let heal = |samples: &[Duration]| {
            let (p50, p99) = (ms(samples, 50.0), ms(samples, 99.0));
            let ratio = p99 / alone99;
            let figures = format!("p50 {p50:.1} ms, p99 {p99:.1} ms ({} rounds)", samples.len());
            (figures, format!("{ratio:.2}× {}", goal(ratio <= HEAL_P99_RATIO)))
        };
        let n = self.attendees;
        let ((alone, _), (all, all_ratio)) = (heal(&self.heal_alone), heal(&self.heal_all));
        let (lockstep, lockstep_ratio) = heal(&self.heal_lockstep);
        format!(
            "| self-heal, one alone | {alone} | |\n\
             | self-heal, all {n} running, one namespace at a time | {all} | p99 within {HEAL_P99_RATIO}× one alone's: {all_ratio} |\n\
             | self-heal, all {n} running, every namespace at the same moment | {lockstep} | (the worst case; the same ratio: {lockstep_ratio}) |\n{}",
            self.storm_rows()
        )
    }

    /// Attendee 02's self-heal and the instructor's LIST, with attendee 01's storm and without.
    fn storm_rows(&self) -> String {
        let row = |what: &str, quiet: &[Duration], stormed: &[Duration]| {
            let (q99, s99) = (ms(quiet, 99.0), ms(stormed, 99.0));
            let ratio = s99 / q99;
            format!(
                "| {what}, attendee 01 storming ({} LISTs) | p50 {:.1} ms, p99 {s99:.1} ms; quiet p99 {q99:.1} ms ({} rounds) | p99 within {HEAL_P99_RATIO}× the quiet room's: {ratio:.2}× {} |\n",
                self.storm.lists,
                ms(stormed, 50.0),
                stormed.len(),
                goal(ratio <= HEAL_P99_RATIO)
            )
        };
        let (quiet, stormed) = (&self.storm.quiet, &self.storm.stormed);
        row("self-heal in attendee-02", &quiet.0, &stormed.0)
            + &row("the instructor's LIST of the room's namespaces", &quiet.1, &stormed.1)
    }

    /// Per attendee a row, per phase a bar: up → experiments → graded → down; drawn
    /// with the bench's chart's module.
    pub fn timeline_svg(&self) -> String {
        let end = self.timeline.spans.iter().map(|s| s.end).fold(1.0, f64::max);
        let (left, width, row) = (90.0, 800.0, 14.0);
        let x = |t: f64| left + t / end * width;
        let colours = [
            (Phase::Up, "#4e79a7"),
            (Phase::Experiments, "#f28e2b"),
            (Phase::Graded, "#59a14f"),
            (Phase::Down, "#9c755f"),
        ];
        let mut svg = String::new();
        for (k, (phase, colour)) in colours.iter().enumerate() {
            let at = left + 110.0 * k as f64;
            chart::rect(&mut svg, (at, 4.0, 10.0, 10.0), &format!(r#" fill="{colour}""#));
            chart::text(&mut svg, (at + 14.0, 13.0), 11.0, "", &format!("{phase:?}"));
        }
        chart::text(&mut svg, (left + 460.0, 13.0), 11.0, "", &format!("0 – {end:.0} s"));
        for i in 0..self.attendees {
            let y = 24.0 + row * i as f64;
            chart::text(&mut svg, (4.0, y + 10.0), 11.0, "", &format!("attendee-{:02}", i + 1));
            for span in self.timeline.spans.iter().filter(|s| s.attendee == i) {
                let colour = colours.iter().find(|(p, _)| *p == span.phase).map_or("#999", |c| c.1);
                let stroke = if span.ok { "" } else { r##" stroke="#e15759" stroke-width="2""## };
                let w = (x(span.end) - x(span.start)).max(1.0);
                let style = format!(r#" fill="{colour}"{stroke}"#);
                chart::rect(&mut svg, (x(span.start), y, w, row - 3.0), &style);
            }
        }
        chart::document(left + width + 10.0, 40.0 + row * self.attendees as f64, &svg)
    }
}

/// The `p`th percentile of `samples`, in milliseconds.
fn ms(samples: &[Duration], p: f64) -> f64 {
    let mut sorted: Vec<f64> = samples.iter().map(|d| d.as_secs_f64() * 1e3).collect();
    sorted.sort_by(f64::total_cmp);
    percentile(&sorted, p).unwrap_or(f64::NAN)
}

fn goal(met: bool) -> &'static str {
    if met { "met" } else { "**missed**" }
}
