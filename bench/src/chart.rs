//! The kit's one drawing module: SVG written as plain text, each element on a line of its
//! own and every text through [`text`], so that the tests' layout check (`crate::layout`)
//! finds every text's box in any picture drawn here (the bench's chart, the room bench's
//! timeline) and in step 3's. No plotting crate (docs/maintainers.md says why).
//!
//! The bench's latency chart: one panel per measure, the cumulative distribution (CDF) of
//! each series on a log time axis. A CDF shows every sample (no binning): how far the
//! controller's curve sits right of the floor's is its own cost, and the top of each curve
//! is its tail.

use std::fmt::Write as _;

use super::{kept::Run, report::Report, stats::percentile};

/// One curve.
pub struct Line<'a> {
    pub label: &'a str,
    pub color: &'a str,
    pub dashed: bool,
    pub samples_ms: &'a [f64],
}

/// One panel: a measure and its curves.
pub struct Panel<'a> {
    pub title: &'a str,
    pub lines: Vec<Line<'a>>,
}

/// The floor's look; each subject's colour, and its lighter twin for the
/// series among the unrelated ConfigMaps.
pub const FLOOR: &str = "#6b7280";
pub const SUBJECTS: &[&str] = &["#2563eb", "#059669", "#9333ea", "#dc2626"];
pub const EXTRA: &[&str] = &["#93c5fd", "#6ee7b7", "#d8b4fe", "#fca5a5"];

const PANEL_W: f64 = 470.0;
const GAP: f64 = 10.0;
const LEFT: f64 = 58.0;
const RIGHT: f64 = 22.0;
const PLOT_H: f64 = 260.0;
/// Text styles: bold, dark, and grey centred or right-aligned.
const BOLD: &str = r##" font-weight="bold" fill="#111827""##;
const DARK: &str = r##" fill="#111827""##;
const MIDDLE: &str = r##" text-anchor="middle" fill="#374151""##;
const END: &str = r##" text-anchor="end" fill="#374151""##;

/// `text` (escaped) at `(x, y)`, `size` px, with more attributes (`attrs`, each after a space).
pub fn text(svg: &mut String, (x, y): (f64, f64), size: f64, attrs: &str, text: &str) {
    let text = escape(text);
    let _ = writeln!(svg, r#"<text x="{x:.1}" y="{y:.1}" font-size="{size}"{attrs}>{text}</text>"#);
}

/// A rectangle: `(x, y)` its top left corner, `w` × `h` its size.
pub fn rect(svg: &mut String, (x, y, w, h): (f64, f64, f64, f64), attrs: &str) {
    let _ = writeln!(svg, r#"<rect x="{x:.1}" y="{y:.1}" width="{w:.1}" height="{h:.1}"{attrs}/>"#);
}

/// A picture of `width` × `height` px on a white ground, `body` its elements.
pub fn document(width: f64, height: f64, body: &str) -> String {
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" viewBox=\"0 0 {width} {height}\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n\
         <rect width=\"{width}\" height=\"{height}\" fill=\"#ffffff\"/>\n{body}</svg>\n"
    )
}

/// About how wide `text` is at `size` px in a sans-serif font (DejaVu Sans
/// averages 0.6 em per character, a CJK character is 1 em): what places the
/// texts here, and what the tests' layout check measures them with.
pub fn text_width(text: &str, size: f64) -> f64 {
    let ems: f64 = text.chars().map(|c| if c >= '\u{2e80}' { 1.0 } else { 0.6 }).sum();
    ems * size
}

/// `text` broken at spaces into lines no wider than `width` at `size` px.
pub fn wrap(text: &str, size: f64, width: f64) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for word in text.split(' ') {
        match lines.last_mut() {
            Some(line) if text_width(&format!("{line} {word}"), size) <= width => {
                line.push(' ');
                line.push_str(word);
            }
            _ => lines.push(word.to_string()),
        }
    }
    lines
}

/// The chart, as an SVG document. Every panel shares one time axis, so
/// curves can be compared across panels too; the document is as tall as the
/// longest legend needs.
pub fn cdf(title: &str, subtitle: &str, panels: &[Panel]) -> String {
    let width = GAP + panels.len().max(1) as f64 * (PANEL_W + GAP);
    let axis = LogAxis::spanning(
        panels.iter().flat_map(|p| &p.lines).flat_map(|l| l.samples_ms.iter().copied()),
    );
    let mut body = String::new();
    // Title and subtitle wrap to the chart's width; the panels start below them.
    let mut y = 6.0;
    for (line, (size, height), style) in
        [(title, (18.0, 24.0), BOLD), (subtitle, (13.0, 17.0), r##" fill="#4b5563""##)]
    {
        for line in wrap(line, size, width - 2.0 * GAP) {
            y += height;
            text(&mut body, (GAP, y), size, style, &line);
        }
        y += 4.0;
    }
    let top = y + 42.0;
    let mut bottom = top + PLOT_H;
    for (i, panel) in panels.iter().enumerate() {
        let left = GAP + i as f64 * (PANEL_W + GAP);
        let f = Frame { x0: left + LEFT, x1: left + PANEL_W - RIGHT, y0: top, axis: &axis };
        text(&mut body, (f.x0, top - 14.0), 14.0, BOLD, panel.title);
        draw_grid(&mut body, &f);
        for line in &panel.lines {
            draw_curve(&mut body, line, &f);
        }
        bottom = bottom.max(draw_legend(&mut body, panel, &f));
    }
    document(width, (bottom + 20.0).ceil(), &body)
}

/// Where a panel's plot sits, and where a time and a share land in it.
struct Frame<'a> {
    x0: f64,
    x1: f64,
    y0: f64,
    axis: &'a LogAxis,
}

impl Frame<'_> {
    fn x(&self, ms: f64) -> f64 {
        self.x0 + self.axis.fraction(ms) * (self.x1 - self.x0)
    }

    fn y(&self, share: f64) -> f64 {
        self.y0 + (1.0 - share) * PLOT_H
    }
}

/// The time and share grids and the frame around them.
fn draw_grid(svg: &mut String, f: &Frame) {
    let (x0, x1, y0, y1) = (f.x0, f.x1, f.y0, f.y(0.0));
    let grid = |svg: &mut String, (a, b): ((f64, f64), (f64, f64)), strong: bool| {
        let (stroke, dash) =
            if strong { ("#9ca3af", r#" stroke-dasharray="2 3""#) } else { ("#e5e7eb", "") };
        let _ = writeln!(
            svg,
            r#"<line x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="{stroke}"{dash}/>"#,
            a.0, a.1, b.0, b.1
        );
    };
    // Time grid: 1-2-5 steps of each decade.
    for tick in f.axis.ticks() {
        let tx = f.x(tick);
        grid(svg, ((tx, y0), (tx, y1)), false);
        text(svg, (tx, y1 + 16.0), 11.0, MIDDLE, &format_ms(tick));
    }
    text(svg, ((x0 + x1) / 2.0, y1 + 34.0), 11.0, MIDDLE, "latency (ms, log scale)");
    // Share grid, with the percentiles the table reports; 100 % unlabelled (it would sit on p99's).
    for (share, label, strong) in [
        (0.0, "0%", false),
        (0.25, "25%", false),
        (0.5, "p50", true),
        (0.75, "75%", false),
        (0.9, "p90", true),
        (0.99, "p99", true),
        (1.0, "", false),
    ] {
        let ty = f.y(share);
        grid(svg, ((x0, ty), (x1, ty)), strong);
        if !label.is_empty() {
            text(svg, (x0 - 6.0, ty + 4.0), 11.0, END, label);
        }
    }
    rect(svg, (x0, y0, x1 - x0, PLOT_H), r##" fill="none" stroke="#6b7280""##);
}

/// A curve: a step function through every sample.
fn draw_curve(svg: &mut String, line: &Line, f: &Frame) {
    let mut sorted = line.samples_ms.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len() as f64;
    let mut d = String::new();
    for (i, ms) in sorted.iter().enumerate() {
        let (sx, below, above) = (f.x(*ms), f.y(i as f64 / n), f.y((i + 1) as f64 / n));
        let _ = match i {
            0 => write!(d, "M{sx:.1},{below:.1}V{above:.1}"),
            _ => write!(d, "H{sx:.1}V{above:.1}"),
        };
    }
    let _ = writeln!(
        svg,
        r#"<path class="cdf" data-series="{}" d="{d}" fill="none" stroke="{}" stroke-width="2"{}/>"#,
        escape(line.label),
        line.color,
        dash(line)
    );
}

fn dash(line: &Line) -> &'static str {
    if line.dashed { r#" stroke-dasharray="6 3""# } else { "" }
}

/// The legend below the plot, with the figures a reader looks for first: one entry per
/// curve, its label wrapped to the panel's width, the figures below it. Returns where it ends.
fn draw_legend(svg: &mut String, panel: &Panel, f: &Frame) -> f64 {
    let width = f.x1 - (f.x0 + 30.0);
    let mut ly = f.y(0.0) + 58.0;
    for line in &panel.lines {
        let _ = writeln!(
            svg,
            r#"<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="{}" stroke-width="2"{}/>"#,
            f.x0,
            ly - 4.0,
            f.x0 + 24.0,
            ly - 4.0,
            line.color,
            dash(line)
        );
        let mut sorted = line.samples_ms.to_vec();
        sorted.sort_by(f64::total_cmp);
        let figures = match (percentile(&sorted, 50.0), percentile(&sorted, 99.0)) {
            (Some(p50), Some(p99)) => {
                let n = sorted.len();
                format!("p50 {} ms · p99 {} ms · n={n}", format_ms(p50), format_ms(p99))
            }
            _ => "no samples".to_string(),
        };
        for (words, size) in [(line.label, 12.0), (figures.as_str(), 11.0)] {
            for part in wrap(words, size, width) {
                text(svg, (f.x0 + 30.0, ly), size, DARK, &part);
                ly += size + 4.0;
            }
        }
        ly += 6.0;
    }
    ly
}

/// A log10 axis over whole decades covering every sample.
struct LogAxis {
    low: f64,
    high: f64,
}

impl LogAxis {
    fn spanning(samples: impl Iterator<Item = f64>) -> LogAxis {
        let (mut min, mut max) = (f64::INFINITY, f64::NEG_INFINITY);
        for ms in samples.filter(|ms| ms.is_finite() && *ms > 0.0) {
            min = min.min(ms);
            max = max.max(ms);
        }
        if !min.is_finite() {
            (min, max) = (1.0, 10.0);
        }
        let low = 10f64.powf(min.log10().floor());
        let mut high = 10f64.powf(max.log10().ceil());
        if high <= low {
            high = low * 10.0;
        }
        LogAxis { low, high }
    }

    /// Where `ms` sits, 0 at the left edge, 1 at the right.
    fn fraction(&self, ms: f64) -> f64 {
        let ms = ms.clamp(self.low, self.high);
        (ms / self.low).log10() / (self.high / self.low).log10()
    }

    /// 1, 2, 5 × each power of ten in range, and the top.
    fn ticks(&self) -> Vec<f64> {
        let mut ticks = Vec::new();
        let mut decade = self.low;
        while decade < self.high * 0.999 {
            ticks.extend([decade, 2.0 * decade, 5.0 * decade]);
            decade *= 10.0;
        }
        ticks.push(self.high);
        ticks
    }
}

/// `0.5`, `2`, `20`, `2.3`: short, without trailing zeros.
fn format_ms(ms: f64) -> String {
    let text = if ms >= 10.0 {
        format!("{ms:.0}")
    } else if ms >= 1.0 {
        format!("{ms:.1}")
    } else {
        format!("{ms:.2}")
    };
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    }
}

/// Text and attribute values escaped for XML.
pub fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// The CDF chart of the run: self-heal and correction, floor next to the controller.
pub fn of(report: &Report) -> String {
    draw(&Run::of(report))
}

/// The chart of a run as it was kept ([`crate::kept`]): the same picture the
/// run drew.
pub fn draw(run: &Run) -> String {
    let subtitle = format!(
        "lab {} · Kubernetes {} · {} CPUs · {} rounds per series, taking turns one by one, sides restarted {} times · floor: the harness's own watch → write loop",
        run.lab, run.kubernetes_version, run.cpus, run.rounds, run.blocks
    );
    let unrelated: Vec<String> = run
        .subjects
        .iter()
        .map(|s| format!("{}, {} unrelated ConfigMaps", s.label, run.unrelated))
        .collect();
    let floor = |samples_ms| Line { label: "floor", color: FLOOR, dashed: true, samples_ms };
    let mut heal = vec![floor(&run.floor.self_heal)];
    let mut correct = vec![floor(&run.floor.correction)];
    for (i, s) in run.subjects.iter().enumerate() {
        let color = SUBJECTS[i % SUBJECTS.len()];
        let line = |samples_ms| Line { label: &s.label, color, dashed: false, samples_ms };
        heal.push(line(&s.latencies.self_heal));
        correct.push(line(&s.latencies.correction));
        heal.push(Line {
            label: &unrelated[i],
            color: EXTRA[i % EXTRA.len()],
            dashed: false,
            samples_ms: &s.self_heal_with_unrelated,
        });
    }
    let labels: Vec<&str> = run.subjects.iter().map(|s| s.label.as_str()).collect();
    cdf(
        &format!("How fast they heal: {} · {}", labels.join(" vs "), utc(run.unix_time)),
        &subtitle,
        &[
            Panel { title: "self-heal: delete → recreated", lines: heal },
            Panel { title: "correction: patch → data put back", lines: correct },
        ],
    )
}

/// `2026-11-29 15:59 UTC` for a Unix time.
fn utc(unix: u64) -> String {
    let time =
        i64::try_from(unix).ok().and_then(|s| k8s_openapi::jiff::Timestamp::from_second(s).ok());
    time.map_or_else(|| format!("{unix} s"), |t| t.strftime("%Y-%m-%d %H:%M UTC").to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::layout;

    /// A strict little XML check: tags balance, attribute values are quoted,
    /// `&` only starts an entity, text holds no `<`. Returns the element names.
    fn well_formed(doc: &str) -> Result<Vec<String>, String> {
        let mut stack: Vec<String> = Vec::new();
        let mut names = Vec::new();
        let mut rest = doc;
        while let Some(open) = rest.find('<') {
            check_text(&rest[..open])?;
            let close = rest[open..].find('>').ok_or("unclosed tag")? + open;
            let tag = &rest[open + 1..close];
            rest = &rest[close + 1..];
            if let Some(name) = tag.strip_prefix('/') {
                let top = stack.pop().ok_or(format!("</{name}> closes nothing"))?;
                if top != name.trim() {
                    return Err(format!("<{top}> closed by </{name}>"));
                }
            } else {
                let self_closing = tag.ends_with('/');
                let body = tag.trim_end_matches('/');
                let name = body.split_whitespace().next().ok_or("empty tag")?.to_string();
                check_attributes(&body[name.len()..])?;
                names.push(name.clone());
                if !self_closing {
                    stack.push(name);
                }
            }
            if stack.is_empty() && !rest.trim().is_empty() {
                return Err("content after the root element".into());
            }
        }
        check_text(rest)?;
        match stack.pop() {
            Some(open) => Err(format!("<{open}> never closed")),
            None => Ok(names),
        }
    }

    fn check_text(text: &str) -> Result<(), String> {
        for (i, _) in text.match_indices('&') {
            let entity = &text[i..text[i..].find(';').map_or(text.len(), |e| i + e + 1)];
            if !["&amp;", "&lt;", "&gt;", "&quot;", "&apos;"].contains(&entity) {
                return Err(format!("bare & in {text:?}"));
            }
        }
        Ok(())
    }

    fn check_attributes(mut attrs: &str) -> Result<(), String> {
        loop {
            attrs = attrs.trim_start();
            if attrs.is_empty() {
                return Ok(());
            }
            let eq = attrs.find('=').ok_or(format!("attribute without value: {attrs}"))?;
            let value =
                attrs[eq + 1..].strip_prefix('"').ok_or(format!("unquoted attribute: {attrs}"))?;
            let end = value.find('"').ok_or("unterminated attribute")?;
            check_text(&value[..end])?;
            attrs = &value[end + 1..];
        }
    }

    #[test]
    fn the_chart_is_well_formed_svg_with_every_series() {
        let floor = [3.9, 4.2, 4.4, 5.0, 12.0];
        let ours = [4.5, 5.1, 5.3, 6.0, 48.0];
        let svg = cdf(
            "bench <lab> & co",
            "2 CPUs",
            &[
                Panel {
                    title: "self-heal: delete → recreated",
                    lines: vec![
                        Line { label: "floor", color: FLOOR, dashed: true, samples_ms: &floor },
                        Line {
                            label: "my-controller (release)",
                            color: SUBJECTS[0],
                            dashed: false,
                            samples_ms: &ours,
                        },
                    ],
                },
                Panel {
                    title: "correction",
                    lines: vec![Line {
                        label: "a \"quoted\" <one>",
                        color: EXTRA[0],
                        dashed: false,
                        samples_ms: &[],
                    }],
                },
            ],
        );
        let names = well_formed(&svg).unwrap_or_else(|e| panic!("{e}\n{svg}"));
        assert_eq!(names.first().map(String::as_str), Some("svg"));
        assert!(svg.starts_with(r#"<svg xmlns="http://www.w3.org/2000/svg""#));
        assert_eq!(svg.matches(r#"<path class="cdf""#).count(), 3);
        for series in ["floor", "my-controller (release)", "a &quot;quoted&quot; &lt;one&gt;"] {
            assert!(svg.contains(&format!(r#"data-series="{series}""#)), "{series}");
        }
        assert!(svg.contains("bench &lt;lab&gt; &amp; co"));
        assert!(svg.contains("p50 4.4 ms · p99 12 ms · n=5"), "{svg}");
        assert!(svg.contains("no samples"));
        // The axis covers every sample: 1 ms to 100 ms here.
        assert!(svg.contains(">1</text>") && svg.contains(">100</text>"));
    }

    #[test]
    fn the_report_chart_shows_every_subject() {
        let report = crate::report::tests::sample();
        let svg = of(&report);
        well_formed(&svg).unwrap_or_else(|e| panic!("{e}\n{svg}"));
        for s in &report.subjects {
            assert!(svg.contains(&format!(r#"data-series="{}""#, s.label)), "{}", s.label);
        }
        // Floor, then each subject and its series among the unrelated; floor and each subject.
        assert_eq!(svg.matches(r#"<path class="cdf""#).count(), 5 + 3);
    }

    #[test]
    fn no_text_overlaps_another_or_leaves_the_chart() {
        let mut report = crate::report::tests::sample();
        let long =
            ["kube-runtime Controller (stage 2)", "controller-runtime v0.24.1 (a long label)"];
        for label in long {
            let mut peer = report.subjects[1].clone();
            peer.label = label.into();
            report.subjects.push(peer);
        }
        report.settings.unrelated = 10_000;
        let svg = of(&report);
        let laid_out = layout(&svg).unwrap();
        assert_eq!(laid_out.faults, Vec::<String>::new(), "{svg}");
        let head =
            svg.matches(r#"font-size="18""#).count() + svg.matches(r#"font-size="13""#).count();
        assert!(head >= 3, "the subtitle wraps: {svg}");
        for (l, _, r, _, text) in &laid_out.texts[head..] {
            let panel = ((l - GAP) / (PANEL_W + GAP)).floor();
            let right_edge = GAP + panel * (PANEL_W + GAP) + PANEL_W;
            assert!(*r <= right_edge, "{text:?} runs into the next panel");
        }
        // Each subject's series among the unrelated ConfigMaps is in the legend.
        assert!(svg.matches("unrelated").count() >= 4, "{svg}");
    }

    #[test]
    fn the_layout_finds_what_leaves_overlaps_or_is_too_small() {
        let mut body = String::new();
        text(&mut body, (0.0, 14.0), 12.0, "", "a");
        text(&mut body, (0.0, 30.0), 12.0, "", "b <&>");
        let fine = layout(&document(1024.0, 500.0, &body)).unwrap();
        assert_eq!((fine.faults.len(), fine.texts.len(), fine.smallest), (0, 2, 12.0));
        assert_eq!(fine.texts[1].2, text_width("b <&>", 12.0));
        text(&mut body, (5.0, 18.0), 12.0, "", "over");
        text(&mut body, (1010.0, 100.0), 12.0, "", "cut");
        text(&mut body, (500.0, 200.0), 9.0, r#" text-anchor="middle""#, "tiny");
        let faults = layout(&document(1024.0, 500.0, &body)).unwrap().faults.join("\n");
        assert!(faults.contains(r#""a" overlaps "over""#), "{faults}");
        assert!(faults.contains(r#""cut" leaves the picture"#), "{faults}");
        assert!(faults.contains(r#""tiny" is 9.0 px, below 11"#), "{faults}");
        // Shown at 1024 px, a picture 2048 wide halves its texts.
        assert_eq!(layout(&document(2048.0, 500.0, &body)).unwrap().smallest, 4.5);
    }

    #[test]
    fn the_checker_catches_broken_documents() {
        assert!(well_formed("<svg><g></svg>").is_err());
        assert!(well_formed("<svg a=1/>").is_err());
        assert!(well_formed("<svg>a & b</svg>").is_err());
        assert!(well_formed("<svg/><svg/>").is_err());
        assert!(well_formed(r#"<svg a="x"><g/>t &amp; u</svg>"#).is_ok());
    }

    #[test]
    fn log_axis_spans_whole_decades() {
        let axis = LogAxis::spanning([2.5, 40.0].into_iter());
        assert_eq!((axis.low, axis.high), (1.0, 100.0));
        assert_eq!(axis.fraction(10.0), 0.5);
        assert_eq!(axis.ticks(), vec![1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0]);
        assert_eq!(format_ms(0.5), "0.5");
        assert_eq!(format_ms(2.0), "2");
        assert_eq!(format_ms(12.34), "12");
    }

    #[test]
    fn unix_times_read_as_utc_dates() {
        assert_eq!(utc(0), "1970-01-01 00:00 UTC");
        assert_eq!(utc(951_782_400), "2000-02-29 00:00 UTC");
        assert_eq!(utc(1_795_967_966), "2026-11-29 15:59 UTC");
    }

    #[test]
    fn an_svg_it_cannot_read_is_an_error_not_a_fine_picture() {
        assert!(layout("<?xml version=\"1.0\"?>\n<svg width=\"9\" height=\"9\">\n</svg>").is_err());
        let indented = "<svg width=\"9\" height=\"9\">\n  <text x=\"1\" y=\"5\">a</text>\n</svg>";
        assert!(layout(indented).is_err());
    }
}
