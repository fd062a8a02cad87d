//! Step 3's picture, client-go's best-known one in the kit's terms: the
//! watcher fills the Store and hands each object to a handler that only puts
//! its key on the WorkQueue; workers take keys and reconcile from the Store.
//! One description, drawn once per language of the step-3 pages.

use std::fmt::Write as _;

use bench::chart::{escape, wrap};

use xtask::locale::Lang;

/// A box: its title in the page's language, the code a learner types, and
/// client-go's name for it.
struct Node {
    title: (&'static str, &'static str),
    code: &'static str,
    client_go: &'static str,
}

/// (column, row) of each node below, on a 4 × 2 grid.
const NODES: [((usize, usize), Node); 7] = [
    ((0, 0), Node { title: ("API server", "API server"), code: "kube-apiserver", client_go: "" }),
    (
        (1, 0),
        Node {
            title: ("watcher stream", "watcher 事件流"),
            code: "watcher(pods, …)",
            client_go: "Reflector, ListWatch",
        },
    ),
    (
        (2, 0),
        Node { title: ("handler", "回调"), code: "queue.add(key)", client_go: "event handlers" },
    ),
    (
        (3, 0),
        Node {
            title: ("work queue", "工作队列"),
            code: "WorkQueue<String>",
            client_go: "workqueue",
        },
    ),
    (
        (1, 1),
        Node {
            title: ("the cache", "缓存"),
            code: "reflector Store",
            client_go: "DeltaFIFO → Indexer",
        },
    ),
    (
        (2, 1),
        Node {
            title: ("business logic", "业务逻辑"),
            code: "business(cache, &key)",
            client_go: "reconcile",
        },
    ),
    (
        (3, 1),
        Node {
            title: ("worker ×2", "worker ×2"),
            code: "process_next_item",
            client_go: "processNextItem",
        },
    ),
];

/// An arrow from one cell to another, its label in each language, dashed
/// for a read.
struct Arrow {
    from: (usize, usize),
    to: (usize, usize),
    label: (&'static str, &'static str),
    dashed: bool,
}

const ARROWS: [Arrow; 8] = [
    Arrow { from: (0, 0), to: (1, 0), label: ("list, watch", "list、watch"), dashed: false },
    Arrow { from: (1, 0), to: (2, 0), label: ("each object", "每个对象"), dashed: false },
    Arrow { from: (2, 0), to: (3, 0), label: ("add", "add"), dashed: false },
    Arrow {
        from: (1, 0),
        to: (1, 1),
        label: ("writes every change", "写入每次变化"),
        dashed: false,
    },
    Arrow { from: (3, 0), to: (3, 1), label: ("get", "get"), dashed: false },
    Arrow {
        from: (3, 1),
        to: (3, 0),
        label: ("done, forget, add_rate_limited", "done、forget、add_rate_limited"),
        dashed: false,
    },
    Arrow { from: (3, 1), to: (2, 1), label: ("calls", "调用"), dashed: false },
    Arrow { from: (2, 1), to: (1, 1), label: ("reads", "读取"), dashed: true },
];

const WIDTH: f64 = 1000.0;
const MARGIN: f64 = 16.0;
const GAP: f64 = 96.0;
const BOX_W: f64 = (WIDTH - 2.0 * MARGIN - 3.0 * GAP) / 4.0;
const BOX_H: f64 = 116.0;
const ROW_GAP: f64 = 110.0;
const TITLE: f64 = 15.0;
const SMALL: f64 = 12.5;

pub fn svg(lang: Lang) -> String {
    let pick = |(en, zh): (&'static str, &'static str)| if lang == Lang::Zh { zh } else { en };
    let title = pick((
        "Step 3: the informer fills the cache, handlers queue keys, workers reconcile",
        "第 3 步：informer 填缓存，回调放 key，worker 处理",
    ));
    let top = 64.0;
    let cell = |(c, r): (usize, usize)| {
        (MARGIN + c as f64 * (BOX_W + GAP), top + r as f64 * (BOX_H + ROW_GAP))
    };
    let mut body = String::new();
    let _ = writeln!(
        body,
        r##"<defs><marker id="head" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="8" markerHeight="8" orient="auto-start-reverse"><path d="M0,0L10,5L0,10z" fill="#374151"/></marker></defs>"##
    );
    let _ = writeln!(
        body,
        r##"<text x="{MARGIN}" y="34" font-size="19" font-weight="bold" fill="#111827">{}</text>"##,
        escape(title)
    );
    for (at, node) in &NODES {
        let (x, y) = cell(*at);
        let fill = if at.1 == 0 { "#eff6ff" } else { "#ecfdf5" };
        let _ = writeln!(
            body,
            r##"<rect x="{x}" y="{y}" width="{BOX_W}" height="{BOX_H}" rx="8" fill="{fill}" stroke="#374151"/>"##
        );
        let mut ty = y + 8.0;
        let lines = wrap(pick(node.title), TITLE, BOX_W - 16.0);
        for line in lines {
            ty += TITLE * 1.3;
            let _ = writeln!(
                body,
                r##"<text x="{:.1}" y="{ty:.1}" font-size="{TITLE}" font-weight="bold" text-anchor="middle" fill="#111827">{}</text>"##,
                x + BOX_W / 2.0,
                escape(&line)
            );
        }
        ty += SMALL * 1.6;
        let _ = writeln!(
            body,
            r##"<text x="{:.1}" y="{ty:.1}" font-size="{SMALL}" font-family="DejaVu Sans Mono, Menlo, monospace" text-anchor="middle" fill="#1e3a8a">{}</text>"##,
            x + BOX_W / 2.0,
            escape(node.code)
        );
        if !node.client_go.is_empty() {
            let _ = writeln!(
                body,
                r##"<text x="{:.1}" y="{:.1}" font-size="{SMALL}" font-style="italic" text-anchor="middle" fill="#4b5563">{}</text>"##,
                x + BOX_W / 2.0,
                y + BOX_H - 10.0,
                escape(node.client_go)
            );
        }
    }
    for arrow in &ARROWS {
        draw_arrow(&mut body, arrow, pick(arrow.label), &cell);
    }
    let legend = pick((
        "In italics: client-go's name for the part. A key waits in the queue once, however many events bring it.",
        "斜体：client-go 里对应的名字。一个 key 在队列里只等一次，不管来了多少个事件。",
    ));
    let bottom = top + 2.0 * BOX_H + ROW_GAP;
    let _ = writeln!(
        body,
        r##"<text x="{MARGIN}" y="{:.1}" font-size="13" fill="#374151">{}</text>"##,
        bottom + 30.0,
        escape(legend)
    );
    let height = bottom + 44.0;
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{height}\" viewBox=\"0 0 {WIDTH} {height}\" font-family=\"DejaVu Sans, Noto Sans CJK SC, WenQuanYi Micro Hei, PingFang SC, Microsoft YaHei, sans-serif\">\n\
         <rect width=\"{WIDTH}\" height=\"{height}\" fill=\"#ffffff\"/>\n{body}</svg>\n"
    )
}

/// Across a gap between boxes: horizontal ones with the label above, vertical
/// ones (two between the queue and the worker, side by side) with the label
/// beside.
fn draw_arrow(
    svg: &mut String,
    arrow: &Arrow,
    label: &str,
    cell: &dyn Fn((usize, usize)) -> (f64, f64),
) {
    let ((fx, fy), (tx, ty)) = (cell(arrow.from), cell(arrow.to));
    let dash = if arrow.dashed { r#" stroke-dasharray="6 4""# } else { "" };
    let (x1, y1, x2, y2, lx, ly, anchor) = if fy == ty {
        let y = fy + BOX_H / 2.0;
        let (a, b) = if fx < tx { (fx + BOX_W, tx) } else { (fx, tx + BOX_W) };
        (a + 4.0, y, b - 4.0, y, (a + b) / 2.0, y - 8.0, "middle")
    } else {
        // Down right of the box's middle, its label on the right; up left
        // of it, its label on the left (where the gap leaves room).
        let down = fy < ty;
        let x = fx + BOX_W * if down { 0.62 } else { 0.3 };
        let (a, b) = if down { (fy + BOX_H, ty) } else { (fy, ty + BOX_H) };
        let (lx, anchor) = if down { (x + 8.0, "start") } else { (x - 8.0, "end") };
        (x, a + 4.0, x, b - 4.0, lx, (fy.min(ty) + BOX_H + ROW_GAP / 2.0 + 5.0), anchor)
    };
    let _ = writeln!(
        svg,
        r##"<line x1="{x1:.1}" y1="{y1:.1}" x2="{x2:.1}" y2="{y2:.1}" stroke="#374151" stroke-width="2" marker-end="url(#head)"{dash}/>"##
    );
    // A long label left of an up arrow goes on two lines.
    let lines = match anchor {
        "end" => wrap(label, SMALL, GAP + BOX_W * 0.3 - 16.0),
        _ => vec![label.to_string()],
    };
    let first = ly - (lines.len() as f64 - 1.0) * SMALL * 0.65;
    for (i, line) in lines.iter().enumerate() {
        let _ = writeln!(
            svg,
            r##"<text x="{lx:.1}" y="{:.1}" font-size="{SMALL}" text-anchor="{anchor}" fill="#111827">{}</text>"##,
            first + i as f64 * SMALL * 1.3,
            escape(line)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The picture speaks the page's language: what each box names — its
    /// title up to a colon, the code, client-go's term — is on the page.
    #[test]
    fn every_box_names_what_its_page_says() {
        for (lang, page) in
            [(Lang::En, "docs/en/03-workqueue.md"), (Lang::Zh, "docs/zh-CN/03-workqueue.md")]
        {
            let text = std::fs::read_to_string(labkit::project::root().join(page)).unwrap();
            let text = text.to_lowercase();
            for (_, node) in &NODES {
                let title = if lang == Lang::Zh { node.title.1 } else { node.title.0 };
                let title = title.split([':', '：']).next().unwrap().trim_end_matches(" ×2");
                let code = node.code.trim_end_matches("…)");
                let client_go = node.client_go.split([',', '→']).map(str::trim);
                for term in [title, code].into_iter().chain(client_go).filter(|t| !t.is_empty()) {
                    assert!(text.contains(&term.to_lowercase()), "{page} never says {term:?}");
                }
            }
        }
    }

    #[test]
    fn each_language_draws_its_own_labels() {
        let (en, zh) = (svg(Lang::En), svg(Lang::Zh));
        assert!(zh.contains("工作队列") && !zh.contains("work queue"));
        assert!(en.contains("work queue") && !en.contains("工作队列"));
    }
}
