//! Claims the narrations and the pages make about the kit, checked against it:
//!
//! * every metric name they quote is one the controller's registry serves
//!   (`my_controller_…` anywhere; in a narration any `…_total` too, since it
//!   only ever speaks of the controller's);
//! * every file a narration names is in the tree;
//! * a line of the pages that speaks of the step programs quotes no flag,
//!   since they parse none (`cargo run -- --flag` lines are checked in
//!   docs.rs, against the program's parser);
//! * no page's shell block sets `KUBECONFIG` or `KIT` by hand: each terminal
//!   gets them from `eval "$(cargo xtask lab env)"`.

use std::collections::BTreeSet;

use super::docs::TRACKED;
use labkit::project;

/// The narrations of `cargo xtask exp` and the grader's texts.
fn narrations() -> Vec<String> {
    TRACKED
        .iter()
        .filter(|f| {
            (f.starts_with("xtask/exp/") || f.starts_with("xtask/grade/")) && f.ends_with(".toml")
        })
        .cloned()
        .collect()
}

/// The pages: README.md, ARCHITECTURE.md and docs/ but the samples (a run's output).
fn pages() -> Vec<String> {
    TRACKED
        .iter()
        .filter(|f| {
            ["README.md", "ARCHITECTURE.md"].contains(&f.as_str())
                || (f.starts_with("docs/") && f.ends_with(".md") && !f.starts_with("docs/samples/"))
        })
        .cloned()
        .collect()
}

fn read(file: &str) -> String {
    std::fs::read_to_string(project::root().join(file)).unwrap()
}

/// What `check` finds in each of `files`, as `file: finding` lines.
fn found_in(files: Vec<String>, check: impl Fn(&str, &str) -> Vec<String>) -> Vec<String> {
    files
        .iter()
        .flat_map(|file| check(file, &read(file)).into_iter().map(move |f| format!("{file}: {f}")))
        .collect()
}

/// Runs of `[A-Za-z0-9_./-]` and where each starts: names, paths and flags
/// as a text writes them (a sentence's full stop left off).
fn words(text: &str) -> Vec<(usize, &str)> {
    let word = |c: char| c.is_ascii_alphanumeric() || "_./-".contains(c);
    let mut found = Vec::new();
    let mut start = None;
    for (i, c) in text.char_indices().chain(std::iter::once((text.len(), ' '))) {
        match (word(c), start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                found.push((s, text[s..i].trim_end_matches(['.', '/', '-'])));
                start = None;
            }
            _ => {}
        }
    }
    found
}

/// What `/metrics` serves: each series' name (`…_total`, `…_bucket`,
/// `…_info`) and each histogram's family name, and each series with its labels.
struct Served {
    names: BTreeSet<String>,
    series: Vec<String>,
}

fn served() -> Served {
    let text = controller::metrics::Metrics::default().encode();
    let mut names = BTreeSet::new();
    let mut series = Vec::new();
    for line in text.lines() {
        if let Some(typed) = line.strip_prefix("# TYPE ") {
            if let Some((family, "histogram")) = typed.split_once(' ') {
                names.insert(family.to_string());
            }
        } else if !line.starts_with('#') && !line.is_empty() {
            let name = line.split(['{', ' ']).next().unwrap_or_default();
            names.insert(name.to_string());
            series.push(line.rsplit_once(' ').map_or(line, |(s, _)| s).to_string());
        }
    }
    Served { names, series }
}

/// The metric names (with their `{labels}` when quoted) that `text` quotes
/// and the registry does not serve. `any_total`: every `…_total` is taken
/// for one of the controller's. Labels may be quoted as names
/// (`{version,kubernetes}`) or with alternatives (`{verb="create|update"}`).
fn unserved_metrics(text: &str, served: &Served, any_total: bool) -> Vec<String> {
    let text = text.replace("\\\"", "\"");
    let mut wrong = Vec::new();
    for (at, word) in words(&text) {
        let metric = word.starts_with("my_controller_") || (any_total && word.ends_with("_total"));
        // `my_controller_` alone is the prefix spoken of.
        if !metric || word == "my_controller_" || word.contains(['.', '/']) {
            continue;
        }
        let after = &text[at + word.len()..];
        let labels = after.strip_prefix('{').and_then(|a| a.split_once('}')).map(|(l, _)| l);
        let known = served.names.contains(word)
            && labels.is_none_or(|labels| served.has_labels(word, labels));
        if !known {
            wrong.push(labels.map_or(word.to_string(), |l| format!("{word}{{{l}}}")));
        }
    }
    wrong
}

impl Served {
    /// Whether some series of `name` has each label of `labels`, each value
    /// of `a|b` alternatives.
    fn has_labels(&self, name: &str, labels: &str) -> bool {
        let of_name: Vec<&String> =
            self.series.iter().filter(|s| s.starts_with(&format!("{name}{{"))).collect();
        labels.split(',').map(str::trim).all(|label| match label.split_once('=') {
            Some((key, values)) => values
                .trim_matches('"')
                .split('|')
                .all(|value| of_name.iter().any(|s| s.contains(&format!("{key}=\"{value}\"")))),
            None => of_name.iter().any(|s| s.contains(&format!("{label}=\""))),
        })
    }
}

#[test]
fn every_metric_quoted_is_one_the_controller_serves() {
    let served = served();
    assert!(served.names.len() >= 10, "{:?}", served.names);
    let mut wrong = found_in(narrations(), |file, text| {
        unserved_metrics(text, &served, file.starts_with("xtask/exp/"))
    });
    wrong.extend(found_in(pages(), |_, text| unserved_metrics(text, &served, false)));
    assert!(wrong.is_empty(), "not served by controller/src/metrics.rs:\n{}", wrong.join("\n"));
}

#[test]
fn the_metric_check_finds_a_name_the_controller_does_not_serve() {
    let served = served();
    let fine = r#"my_controller_reconciles_total{result=\"unchanged\"}, my_controller_writes_total,
        my_controller_reconcile_duration_seconds, my_controller_build_info"#;
    assert_eq!(unserved_metrics(fine, &served, true), Vec::<String>::new());
    let bad = "grep -E '^(reconcile_total|api_writes_total)'; my_controller_writes";
    assert_eq!(
        unserved_metrics(bad, &served, true),
        ["reconcile_total", "api_writes_total", "my_controller_writes"]
    );
    let label = r#"my_controller_reconciles_total{result="skipped"}"#;
    assert_eq!(unserved_metrics(label, &served, false), [label]);
    let listed = r#"my_controller_writes_total{verb="create|update"}, my_controller_build_info{version,kubernetes}"#;
    assert!(unserved_metrics(listed, &served, false).is_empty());
    let one_wrong =
        r#"my_controller_writes_total{verb="create|delete"}, my_controller_build_info{commit}"#;
    assert_eq!(unserved_metrics(one_wrong, &served, false).len(), 2);
    // A page may name another program's counter.
    assert!(unserved_metrics("controller_runtime_reconcile_total", &served, false).is_empty());
}

/// The file names (`runner.rs`, `workqueue/src/lib.rs`) `text` gives that no
/// tracked file is: a name with a `/` must be a tracked path (or end one), a
/// bare name some tracked file's name.
fn unknown_files<'a>(text: &'a str, tracked: &[String]) -> Vec<&'a str> {
    const ENDS: &[&str] = &[".rs", ".toml", ".go", ".yaml", ".md", ".patch"];
    words(text)
        .into_iter()
        .map(|(_, w)| w)
        .filter(|w| ENDS.iter().any(|e| w.ends_with(e)) && !w.starts_with(['.', '/']))
        .filter(|w| {
            !tracked.iter().any(|f| {
                f == w
                    || f.ends_with(&format!("/{w}"))
                    || (!w.contains('/') && f.rsplit('/').next() == Some(w))
            })
        })
        .collect()
}

#[test]
fn every_file_a_narration_names_is_in_the_tree() {
    let mut wrong = Vec::new();
    for file in narrations() {
        for name in unknown_files(&read(&file), &TRACKED) {
            wrong.push(format!("{file}: {name}"));
        }
    }
    assert!(wrong.is_empty(), "no such file in the tree:\n{}", wrong.join("\n"));
}

#[test]
fn the_file_check_finds_a_file_that_is_not_there() {
    let tracked = ["controller/src/runner.rs".to_string(), "workqueue/src/lib.rs".to_string()];
    let text = "runner.rs `inform`; WorkQueue::add (queue.rs); workqueue/src/lib.rs; src/lib.rs";
    assert_eq!(unknown_files(text, &tracked), ["queue.rs"]);
    assert_eq!(
        unknown_files("see controller/src/queue.rs.", &tracked),
        ["controller/src/queue.rs"]
    );
}

/// Where a line speaks of the step programs (`step1_list_pods` …
/// `step4_controller`, "the examples", 示例, your program) — and of no program
/// that has flags (`cargo xtask`, stage2_crd) — the flags it quotes
/// (backticked spans starting with `--`). The step programs parse none, so
/// each is wrong: `Client::try_default()` reads `$KUBECONFIG`, not a flag.
fn flags_quoted_for_step_programs(page: &str) -> Vec<String> {
    // "for example `--provider kind`" is not about them: "the examples", "step program".
    let steps = [
        "step1_",
        "step2_",
        "step3_",
        "step4_",
        "示例",
        "the examples",
        "step program",
        "你的程序",
        "your program",
    ];
    let others = ["cargo xtask", "stage2_crd", "--example"];
    let mut wrong = Vec::new();
    for line in page.lines() {
        let lower = line.to_lowercase();
        if !steps.iter().any(|s| lower.contains(s)) || others.iter().any(|o| line.contains(o)) {
            continue;
        }
        let spans = line.split('`').skip(1).step_by(2);
        wrong.extend(spans.filter(|s| s.starts_with("--")).map(str::to_string));
    }
    wrong
}

#[test]
fn no_page_quotes_a_flag_for_a_step_program() {
    // The step programs (controller/examples/step*.rs) parse no flags.
    for step in ["step1_list_pods", "step2_watch_pods", "step3_queue", "step4_controller"] {
        let source = read(&format!("controller/examples/{step}.rs"));
        assert!(
            !source.contains("clap") && !source.contains("std::env::args"),
            "{step} parses flags"
        );
    }
    let wrong = found_in(pages(), |_, text| {
        flags_quoted_for_step_programs(text).into_iter().map(|f| format!("`{f}`")).collect()
    });
    assert!(wrong.is_empty(), "the step programs parse no flags:\n{}", wrong.join("\n"));
}

#[test]
fn the_flag_check_finds_a_flag_given_to_a_step_program() {
    let bad = "| 示例报 `cannot use kubeconfig …` | 或给示例加 `--kubeconfig` |";
    assert_eq!(flags_quoted_for_step_programs(bad), ["--kubeconfig"]);
    let fine = "`cargo run -p controller --example stage2_crd -- --resync 5s`; \
                `cargo xtask grade --resync 2s -- step4_controller`";
    assert!(flags_quoted_for_step_programs(fine).is_empty());
    assert!(flags_quoted_for_step_programs("step 4 logs `RUST_LOG`").is_empty());
    assert!(flags_quoted_for_step_programs("for example `--provider kind`").is_empty());
    let english = "run the examples with `--kubeconfig PATH`";
    assert_eq!(flags_quoted_for_step_programs(english), ["--kubeconfig PATH"]);
}

/// The shell lines of `page` that set `KUBECONFIG` or `KIT` by hand: a path
/// typed in one terminal (`$KIT/target/lab/…`) is wrong in the next, for
/// another lab name or target directory. `eval "$(cargo xtask lab env)"`
/// gives every terminal the lab's own.
fn terminal_variables_set_by_hand(page: &str) -> Vec<String> {
    let mut fence = false;
    let mut wrong = Vec::new();
    for line in page.lines() {
        if line.trim_start().starts_with("```") {
            fence = !fence;
            continue;
        }
        let code = line.split(" #").next().unwrap_or_default();
        let sets = code
            .split_whitespace()
            .any(|w| ["KUBECONFIG=", "KIT="].iter().any(|v| w.starts_with(v)));
        if fence && sets {
            wrong.push(line.trim().to_string());
        }
    }
    wrong
}

#[test]
fn no_page_sets_a_terminals_lab_variables_by_hand() {
    let wrong = found_in(pages(), |_, text| terminal_variables_set_by_hand(text));
    assert!(wrong.is_empty(), "use eval \"$(cargo xtask lab env)\":\n{}", wrong.join("\n"));
}

#[test]
fn the_terminal_check_finds_a_variable_set_by_hand() {
    let page = "```sh\nexport KIT=$PWD\nexport KUBECONFIG=$KIT/target/lab/x/kubeconfig\n\
                KUBECONFIG=a kubectl get cm\neval \"$(cargo xtask lab env)\"   # export KIT=… KUBECONFIG=…\n```\n\
                prose: export KUBECONFIG=x\n";
    assert_eq!(terminal_variables_set_by_hand(page).len(), 3, "{page}");
}
