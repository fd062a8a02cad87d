//! Each picture as a browser shows it: headless Chromium lays the SVG out at
//! a projector's width and measures it with its own layout — every text
//! inside the picture, no two texts on each other, the smallest text still
//! legible — and takes a screenshot for a person to look at.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use labkit::command::Cmd;
use serde::Deserialize;

/// How wide the picture is shown: a projector's 1024 px.
pub const SHOWN_AT: f64 = 1024.0;
/// The smallest text allowed, in px as shown.
pub const SMALLEST_PX: f64 = 11.0;

/// What the page's script measured (px, as shown).
#[derive(Debug, Deserialize)]
pub struct Measured {
    pub width: f64,
    pub height: f64,
    pub texts: Vec<Text>,
}

#[derive(Debug, Deserialize)]
pub struct Text {
    pub text: String,
    pub left: f64,
    pub top: f64,
    pub right: f64,
    pub bottom: f64,
    pub font_px: f64,
}

/// The page: the SVG inline at [`SHOWN_AT`] px, and a script writing every
/// text's box (the browser's `getBoundingClientRect`) and shown font size
/// into `#measured`, which `--dump-dom` prints.
fn page(svg: &str) -> String {
    format!(
        r#"<!DOCTYPE html><html><head><meta charset="utf-8"><style>
body {{ margin: 0; background: #fff; }} svg {{ display: block; width: {SHOWN_AT}px; height: auto; }}
</style></head><body>
{svg}<pre id="measured"></pre>
<script>
const svg = document.querySelector('svg');
const frame = svg.getBoundingClientRect();
const scale = svg.getScreenCTM().a;
const texts = [...svg.querySelectorAll('text')].map(t => {{
  const r = t.getBoundingClientRect();
  return {{ text: t.textContent, left: r.left - frame.left, top: r.top - frame.top,
    right: r.right - frame.left, bottom: r.bottom - frame.top,
    font_px: parseFloat(getComputedStyle(t).fontSize) * scale }};
}});
document.getElementById('measured').textContent =
  JSON.stringify({{ width: frame.width, height: frame.height, texts }});
</script></body></html>
"#
    )
}

/// Chromium, headless, with a profile of its own and nothing fetched.
fn chromium(profile: &Path) -> Cmd {
    Cmd::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
}

/// Lays `svg` out in Chromium, saves `<dir>/<name>.png`, and returns what it
/// measured.
pub fn look(svg: &str, name: &str, dir: &Path) -> Result<(Measured, PathBuf)> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let html = dir.join(format!("{name}.html"));
    std::fs::write(&html, page(svg)).with_context(|| format!("cannot write {}", html.display()))?;
    let url = format!("file://{}", html.display());
    let profile = dir.join(format!("{name}.profile"));
    let _ = std::fs::remove_dir_all(&profile);
    let dom = chromium(&profile).arg("--dump-dom").arg(&url).read().map_err(|e| {
        match labkit::command::is_not_found(&e) {
            true => e.context("the check needs Chromium: `apt-get install -y chromium` on Debian"),
            false => e,
        }
    })?;
    let json = dom
        .split("<pre id=\"measured\">")
        .nth(1)
        .and_then(|rest| rest.split("</pre>").next())
        .context("Chromium's page wrote no measurements")?;
    let json = json.replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">");
    let measured: Measured = serde_json::from_str(&json).context("the page's measurements")?;
    let png = dir.join(format!("{name}.png"));
    let window = format!("--window-size={},{}", SHOWN_AT, measured.height.ceil());
    chromium(&profile)
        .arg(window)
        .arg(format!("--screenshot={}", png.display()))
        .arg(&url)
        .read()?;
    let _ = std::fs::remove_dir_all(&profile);
    Ok((measured, png))
}

/// What is wrong with a picture as shown, one line each.
pub fn faults(m: &Measured) -> Vec<String> {
    // Half a pixel: the boxes of neighbouring lines may touch.
    const SLACK: f64 = 0.5;
    let mut faults = Vec::new();
    if (m.width - SHOWN_AT).abs() > 1.0 {
        faults.push(format!("shown {:.0} px wide, not {SHOWN_AT}", m.width));
    }
    for t in &m.texts {
        if t.left < -SLACK
            || t.top < -SLACK
            || t.right > m.width + SLACK
            || t.bottom > m.height + SLACK
        {
            faults.push(format!(
                "{:?} leaves the picture: {:.0}..{:.0} × {:.0}..{:.0} in {:.0} × {:.0}",
                t.text, t.left, t.right, t.top, t.bottom, m.width, m.height
            ));
        }
        if t.font_px < SMALLEST_PX {
            faults.push(format!("{:?} is {:.1} px, below {SMALLEST_PX}", t.text, t.font_px));
        }
    }
    for (i, a) in m.texts.iter().enumerate() {
        for b in &m.texts[i + 1..] {
            let across = a.right.min(b.right) - a.left.max(b.left);
            let down = a.bottom.min(b.bottom) - a.top.max(b.top);
            if across > SLACK && down > SLACK {
                faults.push(format!("{:?} overlaps {:?}", a.text, b.text));
            }
        }
    }
    faults
}

/// The smallest text as shown, in px.
pub fn smallest(m: &Measured) -> f64 {
    m.texts.iter().map(|t| t.font_px).fold(f64::INFINITY, f64::min)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(text: &str, (left, top, right, bottom): (f64, f64, f64, f64), font_px: f64) -> Text {
        Text { text: text.into(), left, top, right, bottom, font_px }
    }

    #[test]
    fn the_faults_are_found() {
        let fine = Measured {
            width: 1024.0,
            height: 500.0,
            texts: vec![
                text("a", (0.0, 0.0, 100.0, 14.0), 12.0),
                text("b", (0.0, 14.2, 100.0, 28.0), 12.0),
            ],
        };
        assert_eq!(faults(&fine), Vec::<String>::new());
        let bad = Measured {
            width: 1024.0,
            height: 500.0,
            texts: vec![
                text("over", (0.0, 0.0, 100.0, 14.0), 12.0),
                text("lapping", (50.0, 5.0, 150.0, 19.0), 12.0),
                text("cut", (1000.0, 100.0, 1100.0, 114.0), 12.0),
                text("tiny", (0.0, 200.0, 10.0, 208.0), 9.0),
            ],
        };
        let found = faults(&bad).join("\n");
        assert!(found.contains(r#""over" overlaps "lapping""#), "{found}");
        assert!(found.contains(r#""cut" leaves the picture"#), "{found}");
        assert!(found.contains(r#""tiny" is 9.0 px"#), "{found}");
        assert_eq!(smallest(&bad), 9.0);
    }
}
