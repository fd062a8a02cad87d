//! Test support: a picture's layout as [`chart`](crate::chart) placed it, shown
//! [`SHOWN_AT`] px wide (a projector's width): each text's box, and what is wrong — a text
//! outside the picture, two on each other, one below [`SMALLEST_PX`]. The drawing module's
//! tests and the check of the committed pictures (maint's tidy) use it.

use crate::chart::text_width;

/// How wide a picture is shown (a projector's width), and the smallest text allowed there (px).
pub const SHOWN_AT: f64 = 1024.0;
pub const SMALLEST_PX: f64 = 11.0;

/// A picture's layout as shown [`SHOWN_AT`] px wide.
#[derive(Debug)]
pub struct Layout {
    pub height: f64,
    /// Each text's box (left, top, right, bottom, in the picture's own units) and its text.
    pub texts: Vec<(f64, f64, f64, f64, String)>,
    /// The smallest text, in px as shown.
    pub smallest: f64,
    /// A text outside the picture, two texts on each other, a text below [`SMALLEST_PX`]: one line each.
    pub faults: Vec<String>,
}

/// The layout of `svg`, a picture with each `<text>` on a line of its own (as [`text`](crate::chart::text)
/// writes them): every text's box estimated as [`text_width`] placed it.
pub fn layout(svg: &str) -> anyhow::Result<Layout> {
    let attr = |line: &str, name: &str| {
        let value = line.split(&format!(" {name}=\"")).nth(1).unwrap_or_default();
        value.split('"').next().unwrap_or_default().to_string()
    };
    let number = |line: &str, name: &str| attr(line, name).parse::<f64>().unwrap_or(f64::NAN);
    let head = svg.lines().next().unwrap_or_default();
    let (width, height) = (number(head, "width"), number(head, "height"));
    let texts_in = svg.matches("<text").count();
    if !(width > 0.0 && height > 0.0)
        || svg.lines().filter(|l| l.starts_with("<text ")).count() != texts_in
    {
        anyhow::bail!(
            "not a picture this check reads: its first line must be <svg … width=… height=…>, each <text> at the start of a line of its own"
        );
    }
    let scale = SHOWN_AT / width;
    let mut texts = Vec::new();
    let mut smallest = f64::INFINITY;
    let mut faults = Vec::new();
    for line in svg.lines().filter(|l| l.starts_with("<text ")) {
        let (x, y, size) = (number(line, "x"), number(line, "y"), number(line, "font-size"));
        let inner = &line[line.find('>').map_or(0, |i| i + 1)..line.rfind("</text>").unwrap_or(0)];
        let shown = inner.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", "\"");
        let shown = shown.replace("&amp;", "&");
        let w = text_width(&shown, size);
        let left = match attr(line, "text-anchor").as_str() {
            "middle" => x - w / 2.0,
            "end" => x - w,
            _ => x,
        };
        let (top, right, bottom) = (y - size, left + w, y + size * 0.25);
        if left < 0.0 || top < 0.0 || right > width || bottom > height {
            faults.push(format!("{shown:?} leaves the picture"));
        }
        smallest = smallest.min(size * scale);
        if size * scale < SMALLEST_PX {
            faults.push(format!("{shown:?} is {:.1} px, below {SMALLEST_PX}", size * scale));
        }
        texts.push((left, top, right, bottom, shown));
    }
    for (i, a) in texts.iter().enumerate() {
        for b in &texts[i + 1..] {
            if a.0 < b.2 && b.0 < a.2 && a.1 < b.3 && b.1 < a.3 {
                faults.push(format!("{:?} overlaps {:?}", a.4, b.4));
            }
        }
    }
    Ok(Layout { height: height * scale, texts, smallest, faults })
}
