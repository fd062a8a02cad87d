//! The CI timeline: a `.ci/run` log's sections (docs/samples/ci-*.txt) as
//! bars on one clock, a row each, grouped by who printed them.
//!
//! A sample holds a `#` header line, then `== section (N s)` lines: `.ci/run`'s
//! own (`(Ns)`, seconds into the run), then `cargo maint test`'s (`(N s)`,
//! seconds into that section), and inside it the logs of the parts run alongside,
//! each between `---- <part>' log …` and `---- end of <part>' log …` on the test's
//! clock (a group each); `== done (Ns)` ends the run.
//! A section lasts until the next one of its group starts. One that works
//! in the background (`…, built in the background`, `…, alongside`) lasts
//! until the end of the group's `waiting for <it>`.

use std::fmt::Write as _;

use anyhow::{Context, Result, bail};
use bench::chart::{escape, text_width, wrap};

/// One bar.
#[derive(Debug, PartialEq)]
pub struct Section {
    pub group: usize,
    pub name: String,
    pub start: f64,
    pub end: f64,
}

/// What a sample says.
#[derive(Debug)]
pub struct Timeline {
    pub header: String,
    /// Who printed the sections, in the order they appear: `.ci/run`, `cargo maint test`,
    /// then each part run alongside.
    pub groups: Vec<String>,
    pub sections: Vec<Section>,
    pub done: f64,
}

const COLORS: [&str; 5] = ["#4b5563", "#2563eb", "#059669", "#b45309", "#7c3aed"];

/// `== name (12s)` or `== name (12 s)` → (name, seconds, whether spaced).
fn section_line(line: &str) -> Option<(&str, f64, bool)> {
    let rest = line.strip_prefix("== ")?.strip_suffix("s)")?;
    let open = rest.rfind(" (")?;
    let (name, time) = (&rest[..open], &rest[open + 2..]);
    let spaced = time.ends_with(' ');
    Some((name, time.trim_end().parse().ok()?, spaced))
}

pub fn parse(text: &str) -> Result<Timeline> {
    let header = text.lines().next().and_then(|l| l.strip_prefix("# ")).context("no # header")?;
    let (groups, started, done) = starts(text)?;
    let mut sections: Vec<Section> = Vec::new();
    for (i, (group, name, start)) in started.iter().enumerate() {
        let next = started[i + 1..].iter().find(|(g, ..)| g == group).map(|(_, _, s)| *s);
        sections.push(Section {
            group: *group,
            name: name.clone(),
            start: *start,
            end: next.unwrap_or(done),
        });
    }
    // Background work ends when the wait for it does.
    for i in 0..sections.len() {
        let Some(what) = background(&sections[i].name) else { continue };
        let wait = format!("waiting for {what}");
        let group = sections[i].group;
        let end = sections[i + 1..]
            .iter()
            .find(|s| s.group == group && s.name.starts_with(&wait))
            .map(|s| s.end);
        sections[i].end = end.unwrap_or(done);
    }
    if sections.iter().any(|s| s.end < s.start || s.start > done) {
        bail!("sections out of order in the sample");
    }
    Ok(Timeline { header: header.to_string(), groups, sections, done })
}

/// The groups, each section's (group, name, start on the run's clock), and when the run ended.
type Starts = (Vec<String>, Vec<(usize, String, f64)>, f64);

fn starts(text: &str) -> Result<Starts> {
    let mut groups = vec![".ci/run".to_string(), "cargo maint test".to_string()];
    let mut started: Vec<(usize, String, f64)> = Vec::new();
    // The logs of parts alongside being shown, innermost last.
    let mut shown: Vec<usize> = Vec::new();
    let (mut test_at, mut done) = (None, None);
    for line in text.lines() {
        // `---- <part>' log (<file>) ----`; other `---- ` lines head a side-by-side command's log.
        if let Some(bound) = line.strip_prefix("---- ").filter(|b| b.ends_with(" ----")) {
            match bound.strip_prefix("end of ") {
                Some(_) => drop(shown.pop()),
                None => {
                    let what = bound.split("' log").next().unwrap_or(bound);
                    groups.push(format!("{what} (alongside)"));
                    shown.push(groups.len() - 1);
                }
            }
            continue;
        }
        if !line.starts_with("== ") {
            continue;
        }
        let (name, at, spaced) =
            section_line(line).with_context(|| format!("not a section: {line}"))?;
        if name == "done" {
            done = Some(at);
            break;
        }
        let group = match (spaced, shown.last()) {
            (false, _) => 0,
            (true, Some(g)) => *g,
            (true, None) => 1,
        };
        let offset = match group {
            0 => 0.0,
            _ => test_at.context("a section of `cargo maint test` before it started")?,
        };
        if group == 0 && name == "cargo maint test" {
            test_at = Some(at);
        }
        started.push((group, name.to_string(), offset + at));
    }
    let done = done.context("no `== done (Ns)` line")?;
    Ok((groups, started, done))
}

/// `the kind node image, built in the background …` → `the kind node image`.
fn background(name: &str) -> Option<&str> {
    if !(name.contains("in the background") || name.contains("alongside")) {
        return None;
    }
    name.split([',', '(']).next().map(str::trim)
}

/// The row's label: the section's name without its parenthesis, and before a
/// colon or comma when still long.
fn label(name: &str) -> String {
    let mut label = name.split(" (").next().unwrap_or(name).to_string();
    for cut in [':', ','] {
        if label.chars().count() > 52 {
            label = label.split(cut).next().unwrap_or(&label).to_string();
        }
    }
    match background(name) {
        Some(_) => format!("{label} (background)"),
        None => label,
    }
}

const WIDTH: f64 = 1000.0;
const LABELS: f64 = 380.0;
const ROW: f64 = 19.0;
const FONT: f64 = 12.5;

/// The timeline as SVG: a row per section, minutes along the top.
pub fn svg(timeline: &Timeline, title: &str) -> String {
    let mut body = String::new();
    let mut y = 8.0;
    for (text, size, style) in [
        (title, 18.0, r##"font-weight="bold" fill="#111827""##),
        (
            timeline.header.split(", as printed").next().unwrap_or_default(),
            12.5,
            r##"fill="#4b5563""##,
        ),
    ] {
        for line in wrap(&text.replace('`', ""), size, WIDTH - 24.0) {
            y += size * 1.35;
            let _ = writeln!(
                body,
                r##"<text x="12" y="{y:.1}" font-size="{size}" {style}>{}</text>"##,
                escape(&line)
            );
        }
    }
    let (x0, x1) = (LABELS + 20.0, WIDTH - 60.0);
    let minutes = timeline.done / 60.0;
    let x = |seconds: f64| x0 + seconds / timeline.done * (x1 - x0);
    let axis = y + 28.0;
    let top = axis + 8.0;
    let rows = timeline.sections.len() + timeline.groups.len();
    let bottom = top + rows as f64 * ROW;
    let step = if minutes > 30.0 { 10.0 } else { 5.0 };
    let mut tick = 0.0;
    while tick <= minutes {
        let tx = x(tick * 60.0);
        let _ = writeln!(
            body,
            r##"<line x1="{tx:.1}" y1="{top}" x2="{tx:.1}" y2="{bottom}" stroke="#e5e7eb"/>"##
        );
        let _ = writeln!(
            body,
            r##"<text x="{tx:.1}" y="{:.1}" font-size="{FONT}" text-anchor="middle" fill="#374151">{tick} min</text>"##,
            axis - 4.0
        );
        tick += step;
    }
    draw_rows(&mut body, timeline, &x, top);
    let height = (bottom + 12.0).ceil();
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{height}\" viewBox=\"0 0 {WIDTH} {height}\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n\
         <rect width=\"{WIDTH}\" height=\"{height}\" fill=\"#ffffff\"/>\n{body}</svg>\n"
    )
}

/// A row per section, under a row naming its group, from `top` down.
fn draw_rows(body: &mut String, timeline: &Timeline, x: &dyn Fn(f64) -> f64, top: f64) {
    let mut row = top;
    for (g, group) in timeline.groups.iter().enumerate() {
        let sections: Vec<&Section> = timeline.sections.iter().filter(|s| s.group == g).collect();
        if sections.is_empty() {
            continue;
        }
        let _ = writeln!(
            body,
            r##"<text x="12" y="{:.1}" font-size="13" font-weight="bold" fill="{}">{}</text>"##,
            row + 14.0,
            COLORS[g % COLORS.len()],
            escape(group)
        );
        row += ROW;
        for s in sections {
            let (bx, bw) = (x(s.start), (x(s.end) - x(s.start)).max(1.5));
            let _ = writeln!(
                body,
                r##"<text x="24" y="{:.1}" font-size="{FONT}" fill="#111827">{}</text>"##,
                row + 13.5,
                escape(&label(&s.name))
            );
            let _ = writeln!(
                body,
                r##"<rect x="{bx:.1}" y="{:.1}" width="{bw:.1}" height="{}" rx="2" fill="{}"/>"##,
                row + 3.0,
                ROW - 6.0,
                COLORS[g % COLORS.len()]
            );
            let took = duration(s.end - s.start);
            let inside = text_width(&took, FONT) + 8.0 < bw;
            let (tx, anchor, fill) = match inside {
                true => (bx + bw - 4.0, "end", "#ffffff"),
                false => (bx + bw + 4.0, "start", "#111827"),
            };
            let _ = writeln!(
                body,
                r##"<text x="{tx:.1}" y="{:.1}" font-size="{FONT}" text-anchor="{anchor}" fill="{fill}">{took}</text>"##,
                row + 13.5
            );
            row += ROW;
        }
    }
}

/// `45 s`, `3.1 min`.
fn duration(seconds: f64) -> String {
    match seconds < 100.0 {
        true => format!("{seconds:.0} s"),
        false => format!("{:.1} min", seconds / 60.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "# a run\n\
        == tools (0s)\n\
        == cargo maint test (100s)\n\
        == the kind node image, built in the background at the lowest CPU priority (0 s)\n\
        == unit tests (0 s)\n\
        == waiting for the kind node image (log: x) (50 s)\n\
        == the Docker labs (d), alongside; their log is shown when they end (60 s)\n\
        == e2e suite (60 s)\n\
        == waiting for the Docker labs (log: y) (200 s)\n\
        ---- the Docker labs' log (y) ----\n\
        == a kind lab (d) (61 s)\n\
        == lab down (150 s)\n\
        ---- end of the Docker labs' log (exit status: 0) ----\n\
        == done (320s)\n\
        real\t5m20s\n";

    #[test]
    fn sections_last_until_the_next_of_their_group_and_background_until_its_wait() {
        let t = parse(SAMPLE).unwrap();
        let got: Vec<(usize, &str, f64, f64)> =
            t.sections.iter().map(|s| (s.group, s.name.as_str(), s.start, s.end)).collect();
        assert_eq!(got[0], (0, "tools", 0.0, 100.0));
        assert_eq!(got[1], (0, "cargo maint test", 100.0, 320.0));
        assert_eq!(got[2].2..got[2].3, 100.0..160.0, "the image until its wait ends");
        assert_eq!(got[3], (1, "unit tests", 100.0, 150.0));
        assert_eq!(got[5].3, 320.0, "the Docker labs until the wait for them ends");
        assert_eq!(got[8], (2, "a kind lab (d)", 161.0, 250.0));
        assert_eq!(got[9], (2, "lab down", 250.0, 320.0));
        assert_eq!(label(got[2].1), "the kind node image (background)");
        assert!(parse("# x\n== tools (0s)\n").is_err(), "no done line");
        assert!(
            parse("# x\n== unit tests (0 s)\n== done (1s)\n").is_err(),
            "test before its start"
        );
    }

    #[test]
    fn each_log_shown_whole_is_a_group_of_its_own_nested_ones_too() {
        let t = parse(
            "# a run\n\
            == cargo maint test (10s)\n\
            == the grader's tests, alongside; their log is shown when they end (0 s)\n\
            == e2e suite (1 s)\n\
            == waiting for the grader's tests (log: g) (50 s)\n\
            ---- the grader's tests' log (g) ----\n\
            == xtask/tests/grade.rs in two halves (2 s)\n\
            ---- grade-tests-on-a (ok), a.log:\n\
            ---- end of the grader's tests' log (exit status: 0) ----\n\
            == waiting for the Docker labs (log: d) (60 s)\n\
            ---- the Docker labs' log (d) ----\n\
            == a kind lab (d) (3 s)\n\
            == waiting for the room's labs (log: r) (40 s)\n\
            ---- the room's labs' log (r) ----\n\
            == room up --attendees 3 (20 s)\n\
            ---- end of the room's labs' log (exit status: 0) ----\n\
            ---- end of the Docker labs' log (exit status: 0) ----\n\
            == done (80s)\n",
        )
        .unwrap();
        let groups = [".ci/run", "cargo maint test", "the grader's tests (alongside)"];
        assert_eq!(t.groups[..3], groups);
        assert_eq!(t.groups[3..], ["the Docker labs (alongside)", "the room's labs (alongside)"]);
        let at = |name: &str| {
            let s = t.sections.iter().find(|s| s.name == name).unwrap();
            (s.group, s.start, s.end)
        };
        assert_eq!(at("xtask/tests/grade.rs in two halves"), (2, 12.0, 80.0));
        assert_eq!(at("a kind lab (d)"), (3, 13.0, 50.0));
        assert_eq!(at("room up --attendees 3"), (4, 30.0, 80.0));
        assert_eq!(at("waiting for the Docker labs (log: d)"), (1, 70.0, 80.0));
        let alongside = "the grader's tests, alongside; their log is shown when they end";
        assert_eq!(at(alongside), (1, 10.0, 70.0), "until the wait for it ends");
    }
}
