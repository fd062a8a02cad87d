//! The README and `docs/` cite commands, files, symbols and log lines; each is
//! checked against the code here, so a rename that forgets the docs fails:
//!
//! * every `cargo xtask …` and `cargo maint …` (in a shell block or in backticks) parses with the
//!   real clap definition, and every `cargo run -p controller --example X -- …`
//!   names an example that exists and flags it declares;
//! * every backticked path exists (relative to the repository or the page);
//! * every backticked `Type::item` whose type is the kit's names an item of it;
//! * every backticked snake_case name of three words or more (tests,
//!   functions, metrics) and every backticked sentence (log lines, doctor
//!   lines) occurs in the sources;
//! * every relative link points at a file that exists.

use std::{collections::BTreeSet, path::Path, sync::LazyLock};

use clap::Parser as _;
use labkit::project;

/// The repository's files (super::tree: git's list, without needing git).
pub(super) static TRACKED: LazyLock<Vec<String>> =
    LazyLock::new(|| super::tree::files(&project::root()));

/// All Rust and TOML sources, and the manifests, as one text to search.
static SOURCES: LazyLock<String> = LazyLock::new(|| {
    const KINDS: &[&str] = &[".rs", ".toml", ".yaml", ".sh", ".nix", ".envrc"];
    let mut text = String::new();
    // This file's own examples of what does not exist must not count.
    let sources = TRACKED
        .iter()
        .filter(|f| f.as_str() != "maint/src/tidy/docs.rs")
        .filter(|f| KINDS.iter().any(|e| f.ends_with(e)) || f.starts_with(".ci/"));
    for file in sources {
        text.push_str(&std::fs::read_to_string(project::root().join(file)).unwrap_or_default());
        text.push('\n');
    }
    text
});

/// The pages: README.md, ARCHITECTURE.md and everything under docs/ but the samples.
fn pages() -> Vec<String> {
    TRACKED
        .iter()
        .filter(|f| {
            ["README.md", "ARCHITECTURE.md"].contains(&f.as_str())
                || (f.starts_with("docs/") && f.ends_with(".md"))
        })
        .cloned()
        .collect()
}

/// A page's shell blocks (```sh, ```bash) as lines, and its backticked spans.
struct Cited {
    shell: Vec<String>,
    spans: Vec<String>,
    links: Vec<String>,
}

fn cited(page: &str) -> Cited {
    let mut cited = Cited { shell: Vec::new(), spans: Vec::new(), links: Vec::new() };
    let mut fence: Option<bool> = None; // Some(is_shell) inside a fence
    for line in page.lines() {
        if let Some(lang) = line.trim_start().strip_prefix("```") {
            fence = match fence {
                Some(_) => None,
                None => Some(matches!(lang.trim(), "sh" | "bash" | "shell")),
            };
            continue;
        }
        match fence {
            Some(true) => cited.shell.push(line.to_string()),
            Some(false) => {}
            None => {
                // `a`, ``a `b` c``: the text between single backticks.
                let mut parts = line.split('`');
                parts.next();
                while let (Some(span), Some(_)) = (parts.next(), parts.next()) {
                    cited.spans.push(span.to_string());
                }
                let mut rest = line;
                while let Some(at) = rest.find("](") {
                    let after = &rest[at + 2..];
                    let end = after.find(')').unwrap_or(after.len());
                    cited.links.push(after[..end].to_string());
                    rest = &after[end..];
                }
            }
        }
    }
    cited
}

/// The commands of a shell line: comments dropped, split at `&&`, `;`, `|`;
/// a command substitution's too (`eval "$(cargo xtask lab env)"`).
fn commands(line: &str) -> Vec<Vec<String>> {
    let code = strip_comment(line);
    let words = shlex::split(&code).unwrap_or_default();
    let substituted = words.iter().filter_map(|w| {
        let inner = w.split_once("$(")?.1;
        Some(commands(&inner[..inner.rfind(')')?]))
    });
    let substituted: Vec<Vec<String>> = substituted.flatten().collect();
    words
        .split(|w| matches!(w.as_str(), "&&" | ";" | "|" | "||"))
        .map(|c| {
            // `VAR=value cmd … > file`: the command without its environment and redirections.
            c.iter()
                .skip_while(|w| w.contains('=') && !w.starts_with('-'))
                .take_while(|w| !w.starts_with(['>', '<']) && !w.starts_with("2>"))
                .cloned()
                .collect()
        })
        .filter(|c: &Vec<String>| !c.is_empty())
        .chain(substituted)
        .collect()
}

/// `cmd   # why` → `cmd`, leaving `#` inside quotes alone.
fn strip_comment(line: &str) -> String {
    let (mut single, mut double) = (false, false);
    for (i, c) in line.char_indices() {
        match c {
            '\'' if !double => single = !single,
            '"' if !single => double = !double,
            '#' if !single && !double && (i == 0 || line[..i].ends_with(' ')) => {
                return line[..i].to_string();
            }
            _ => {}
        }
    }
    line.to_string()
}

/// What is wrong with one command, if it is one the kit defines.
fn check_command(words: &[String]) -> Option<String> {
    let words: Vec<&str> = words.iter().map(String::as_str).collect();
    match words.as_slice() {
        ["cargo", tool @ ("xtask" | "maint"), rest @ ..] => {
            let name = format!("cargo {tool}");
            let argv = std::iter::once(name.as_str()).chain(rest.iter().copied());
            // `cargo xtask grade` in prose names the verb: missing arguments are fine there;
            // `cargo xtask` alone or `--help` asks for the help, which is no error either.
            let named = |e: &clap::Error| {
                use clap::error::ErrorKind::*;
                matches!(
                    e.kind(),
                    MissingRequiredArgument
                        | DisplayHelp
                        | DisplayHelpOnMissingArgumentOrSubcommand
                )
            };
            let parsed = match *tool {
                "xtask" => xtask::Cli::try_parse_from(argv).err(),
                _ => crate::Cli::try_parse_from(argv).err(),
            };
            parsed.filter(|e| !named(e)).map(|e| {
                let first = e.to_string().lines().next().unwrap_or_default().to_string();
                format!("`{name} {}`: {first}", rest.join(" "))
            })
        }
        ["cargo", "run", rest @ ..] => check_cargo_run(rest),
        _ => None,
    }
}

/// `cargo run -p controller --example X -- --flag …` / `--bin my-controller`.
fn check_cargo_run(args: &[&str]) -> Option<String> {
    let (cargo_args, program_args) = match args.iter().position(|a| *a == "--") {
        Some(at) => (&args[..at], &args[at + 1..]),
        None => (args, &[][..]),
    };
    let after = |flag: &str| cargo_args.iter().position(|a| *a == flag).map(|i| cargo_args[i + 1]);
    // A plain `cargo run` is the learner's own project (docs/*/00-prepare.md makes it): a
    // step program, and those parse no flags.
    let ours = ["-p", "--example", "--bin", "--manifest-path"];
    if !cargo_args.iter().any(|a| ours.contains(a)) {
        return program_args.first().map(|flag| {
            format!("`cargo run {}`: a step program parses no flags ({flag})", args.join(" "))
        });
    }
    if after("-p") != Some("controller") {
        return Some(format!("`cargo run {}`: the docs only run -p controller", args.join(" ")));
    }
    let source = match (after("--example"), after("--bin")) {
        (Some(example), None) => format!("controller/examples/{example}.rs"),
        (None, Some("my-controller")) => "controller/src/cli.rs".to_string(),
        _ => return Some(format!("`cargo run {}`: no such example or binary", args.join(" "))),
    };
    let Ok(text) = std::fs::read_to_string(project::root().join(&source)) else {
        return Some(format!("`cargo run {}`: {source} does not exist", args.join(" ")));
    };
    // A program without a parser (the step examples) has no flags at all.
    let parses = text.contains("clap::");
    program_args
        .iter()
        .filter_map(|a| a.strip_prefix("--"))
        .filter(|flag| !flag.is_empty() && *flag != "help" && *flag != "version")
        .find(|flag| {
            !parses
                || !text.contains(&format!("pub {}:", flag.replace('-', "_")))
                    && !text.contains(&format!("    {}:", flag.replace('-', "_")))
        })
        .map(|flag| format!("`cargo run {}`: {source} has no flag --{flag}", args.join(" ")))
}

/// A backticked span that names a file or directory of the repository.
fn as_path(span: &str) -> Option<&str> {
    const ENDS: &[&str] = &[".rs", ".toml", ".yaml", ".md", ".txt", ".snap", ".nix", ".json", "/"];
    let plain = !span.contains([' ', '<', '*', '{', '$', '…']) && !span.starts_with("http");
    (plain && span.contains('/') && ENDS.iter().any(|e| span.ends_with(e))).then_some(span)
}

fn path_exists(page: &str, path: &str) -> bool {
    // Files a lab or a build writes are cited as where to look, not as sources;
    // `src/main.rs` is the learner's own project's (docs/*/00-prepare.md).
    if path.starts_with("target/")
        || path.starts_with("~/")
        || path.starts_with('/')
        || path == "src/main.rs"
    {
        return true;
    }
    let trimmed = path.trim_end_matches('/');
    let here = Path::new(page).parent().unwrap_or(Path::new("")).join(trimmed);
    let is_tracked = |p: &Path| {
        let p = normalize(p);
        TRACKED.iter().any(|f| f == &p || f.starts_with(&format!("{p}/")))
    };
    is_tracked(Path::new(trimmed)) || is_tracked(&here)
}

/// `docs/zh-CN/../lab.md` → `docs/lab.md`.
fn normalize(path: &Path) -> String {
    let mut parts: Vec<String> = Vec::new();
    for part in path.components() {
        match part {
            std::path::Component::ParentDir => {
                parts.pop();
            }
            std::path::Component::Normal(p) => parts.push(p.to_string_lossy().into_owned()),
            _ => {}
        }
    }
    parts.join("/")
}

/// `WorkQueue::add`: when `WorkQueue` is one of the kit's types, `add` must
/// be one of its items. Other crates' paths (`watcher::Event::Apply`) are left
/// to the compiler of the code that uses them.
fn check_symbol(span: &str) -> Option<String> {
    let segments: Vec<&str> = span.trim_end_matches("()").split("::").collect();
    let valid = segments.len() >= 2
        && segments
            .iter()
            .all(|s| !s.is_empty() && s.chars().all(|c| c.is_alphanumeric() || c == '_'));
    if !valid {
        return None;
    }
    let (item, owner) = (segments[segments.len() - 1], segments[segments.len() - 2]);
    let ours = ["controller", "e2e", "xtask", "experiments", "examples", "runner", "reconcile"]
        .contains(&segments[0])
        || ["struct ", "enum ", "trait "].iter().any(|k| defines(k, owner));
    if !ours {
        return None;
    }
    let defined = ["fn ", "const ", "struct ", "enum ", "static ", "mod ", "type ", "    "]
        .iter()
        .any(|k| defines(k, item)); // `    Item(`, `    Item,`: an enum variant
    (!defined).then(|| format!("`{span}`: no item {item} in the sources"))
}

/// Whether the sources hold `keyword` + `name` as a whole word.
fn defines(keyword: &str, name: &str) -> bool {
    let needle = format!("{keyword}{name}");
    SOURCES.match_indices(&needle).any(|(at, _)| {
        let next = SOURCES[at + needle.len()..].chars().next().unwrap_or(' ');
        let ident = next.is_alphanumeric() || next == '_';
        // `    name` must be a variant: followed by `(`, `,` or ` {`.
        !ident && (keyword != "    " || matches!(next, '(' | ',' | ' '))
    })
}

/// Three-word snake_case names (tests, functions, metrics) must occur in the
/// sources; so must a backticked sentence that is not a command — the log
/// and doctor lines the pages quote.
fn check_words(span: &str) -> Option<String> {
    let snake = span.split('_').count() >= 3
        && span.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    // Code (`f(x)`, `"…"`) and lists (`get, list`) are not lines the kit prints.
    let sentence = span.contains(' ')
        && span.starts_with(|c: char| c.is_ascii_lowercase())
        && !span.contains(['$', '|', '=', '/', '`', '{', '<', '…', '(', '"'])
        && !span.contains(", ")
        && !span.contains(" --")
        && !COMMANDS.iter().any(|c| span.starts_with(&format!("{c} ")));
    ((snake || sentence) && !printed_by_the_sources(span))
        .then(|| format!("`{span}`: not found in the sources"))
}

/// `giving up after 5 retries` is printed by `"giving up after {} retries"`:
/// the text between the numbers must occur, the numbers are the run's.
fn printed_by_the_sources(line: &str) -> bool {
    line.split(|c: char| c.is_ascii_digit())
        .filter(|piece| piece.trim().len() >= 6)
        .all(|piece| SOURCES.contains(piece))
}

/// First words of commands the pages show in backticks (not log lines).
const COMMANDS: &[&str] = &[
    "cargo", "kubectl", "kind", "docker", "nix", "sudo", "export", "go", "ss", "curl", "git",
    "direnv", "rustup", "kill", "for", "lab", "jq", "df", "mkdir", "cd",
];

#[test]
fn every_command_file_symbol_and_line_the_docs_cite_exists() {
    let mut problems = BTreeSet::new();
    for page in pages() {
        let text = std::fs::read_to_string(project::root().join(&page)).unwrap();
        let cited = cited(&text);
        // A synopsis (`cargo xtask exp <NAME> [--name LAB]`) is not a command to run.
        let inline = cited
            .spans
            .iter()
            .filter(|s| s.starts_with("cargo ") && !s.contains(['<', '[', '…']))
            .cloned();
        for line in cited.shell.iter().cloned().chain(inline) {
            for command in commands(&line) {
                if let Some(problem) = check_command(&command) {
                    problems.insert(format!("{page}: {problem}"));
                }
            }
        }
        for span in &cited.spans {
            let problem = match as_path(span) {
                Some(path) => {
                    (!path_exists(&page, path)).then(|| format!("`{path}` does not exist"))
                }
                None => check_symbol(span).or_else(|| check_words(span)),
            };
            if let Some(problem) = problem {
                problems.insert(format!("{page}: {problem}"));
            }
        }
        for link in &cited.links {
            let file = link.split('#').next().unwrap_or_default();
            let external = file.is_empty() || file.contains("://") || file.starts_with("mailto:");
            if !external && !path_exists(&page, file) {
                problems.insert(format!("{page}: link ({link}) points at nothing"));
            }
        }
    }
    let problems: Vec<_> = problems.into_iter().collect();
    assert!(
        problems.is_empty(),
        "{} cited things do not exist:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

/// `path` followed by its number of lines (`` `a.rs` | 88 | ``, `` `a.rs`（88 行 ``,
/// `` `a.rs` (88 lines ``): each (path, claimed, actual) that disagrees.
fn wrong_line_counts(page: &str) -> Vec<(String, usize, usize)> {
    let mut wrong = Vec::new();
    for line in page.lines() {
        let mut parts = line.split('`');
        parts.next();
        while let (Some(span), Some(after)) = (parts.next(), parts.next()) {
            let Some(path) = as_path(span).filter(|p| p.ends_with(".rs")) else { continue };
            let lead: String = after.chars().take_while(|c| !c.is_ascii_digit()).collect();
            let number: String =
                after[lead.len()..].chars().take_while(char::is_ascii_digit).collect();
            let rest = after[lead.len() + number.len()..].trim_start();
            let counted = matches!(lead.trim(), "|" | "（" | "(")
                && (rest.starts_with('|') || rest.starts_with('行') || rest.starts_with("lines"));
            let Ok(text) = std::fs::read_to_string(project::root().join(path)) else { continue };
            if let (true, Ok(claimed)) = (counted, number.parse::<usize>()) {
                let actual = text.lines().count();
                if claimed != actual {
                    wrong.push((path.to_string(), claimed, actual));
                }
            }
        }
    }
    wrong
}

#[test]
fn every_line_count_the_docs_give_is_the_files() {
    let mut wrong = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(project::root().join(&page)).unwrap();
        for (path, claimed, actual) in wrong_line_counts(&text) {
            wrong.push(format!("{page}: `{path}` has {actual} lines, not {claimed}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    let sample = "| x | `controller/src/template.rs` | 1 |\n`controller/src/template.rs`（2 行";
    assert_eq!(wrong_line_counts(sample).len(), 2, "the check finds a wrong count");
}

/// docs/controller.md names every metric family `/metrics` serves and
/// every result a reconcile is counted under.
#[test]
fn the_controller_page_lists_every_metric_and_result() {
    let page = std::fs::read_to_string(project::root().join("docs/controller.md")).unwrap();
    let text = controller::metrics::Metrics::default().encode();
    let families: Vec<&str> =
        text.lines().filter_map(|l| l.strip_prefix("# TYPE ")?.split_whitespace().next()).collect();
    assert!(families.len() >= 8, "{families:?}");
    for family in families {
        let served = match family.strip_suffix("_info") {
            Some(_) => family.to_string(),
            None if text.contains(&format!("{family}_total")) => format!("{family}_total"),
            None => family.to_string(),
        };
        assert!(page.contains(&served), "docs/controller.md does not name {served}");
    }
    for result in controller::metrics::ReconcileResult::ALL {
        let label = format!("{result:?}");
        assert!(
            page.contains(&format!("|{label}|"))
                || page.contains(&format!("\"{label}|"))
                || page.contains(&format!("|{label}\"")),
            "docs/controller.md does not list the result {label}"
        );
    }
}

#[test]
fn the_checks_catch_what_they_are_for() {
    let words = |s: &str| commands(s).remove(0);
    assert!(check_command(&words("cargo xtask lab up --provider kind")).is_none());
    assert!(check_command(&words("cargo xtask lab up --provider nope")).is_some());
    assert!(check_command(&words("cargo xtask lab upp")).is_some());
    assert!(
        check_command(&words("RUST_LOG=debug cargo xtask exp heal --lang zh  # why")).is_none()
    );
    assert!(
        check_command(&words("cargo run -p controller --example stage2_crd -- --resync 5s"))
            .is_none()
    );
    assert!(
        check_command(&words("cargo run -p controller --example step3_queue -- --no-such 2s"))
            .is_some()
    );
    assert!(check_command(&words("cargo run -p controller --example step9")).is_some());
    assert!(
        check_command(&words(
            "cargo run -p controller --example step1_list_pods -- --kubeconfig x"
        ))
        .is_some()
    );
    assert!(check_command(&words("RUST_LOG=debug cargo run")).is_none());
    assert!(check_command(&words("cargo run -- --kubeconfig x")).is_some());
    assert_eq!(commands("kubectl get cm && cargo xtask e2e").len(), 2);
    assert!(check_command(&commands(r#"eval "$(cargo xtask lab env --name x)""#)[1]).is_none());
    assert!(check_command(&commands(r#"eval "$(cargo xtask lab envv)""#)[1]).is_some());
    assert!(check_command(&words("cargo maint bench --peer go > docs/samples/bench.md")).is_none());
    assert!(check_command(&words("cargo xtask --help")).is_none());
    assert!(check_command(&words("cargo xtask")).is_none());
    assert!(check_command(&words("cargo xtask --halp")).is_some());
    assert!(check_command(&words("cargo maint bench --rounds 20")).is_none());
    assert!(check_command(&words("cargo maint bench -n 20")).is_some());
    assert!(check_command(&words("cargo xtask bench")).is_some());
    assert!(path_exists("docs/zh-CN/01.md", "../lab.md"));
    assert!(!path_exists("README.md", "docs/no-such-page.md"));
    assert!(check_symbol("WorkQueue::add").is_none());
    assert!(check_symbol("WorkQueue::add_twice").is_some());
    assert!(check_symbol("watcher::Event::InitApply").is_none(), "another crate's");
    assert!(check_words("a_key_is_queued_once").is_none());
    assert!(check_words("a_key_is_queued_twice").is_some());
    assert!(check_words("cache synced").is_none());
    assert!(check_words("cache synced twice over").is_some());
}

/// The latest run's tables in docs/bench.md are a real run's: the section names which of the
/// runs saved in docs/samples/bench.md (`run N of M`), and every row and its
/// startup figures are in that run's output.
#[test]
fn the_latest_bench_tables_are_a_saved_run() {
    let read = |f: &str| std::fs::read_to_string(project::root().join(f)).unwrap();
    let (page, saved) = (read("docs/bench.md"), read("docs/samples/bench.md"));
    let section = page.split("### The latest run").nth(1).expect("the section");
    let section = section.split("\n#").next().unwrap_or_default();
    let named = section
        .split("run ")
        .skip(1)
        .find_map(|w| w.split_once(" of ").map(|(n, _)| n.to_string()))
        .expect("the section names the run its tables come from: `run N of M`");
    let run = saved
        .split(&format!("# run {named} of "))
        .nth(1)
        .expect("docs/samples/bench.md holds the run the section names")
        .split("\n# run ")
        .next()
        .unwrap_or_default();
    let rows: Vec<&str> = section.lines().filter(|l| l.starts_with('|')).collect();
    assert!(rows.len() >= 8, "{rows:?}");
    for row in rows {
        assert!(run.lines().any(|l| l == row), "docs/bench.md row not in run {named}: {row}");
    }
    let startup = |who: &str| {
        let row = run.lines().find(|l| l.starts_with(&format!("| startup | {who}"))).unwrap();
        row.split(" | ").nth(3).unwrap().to_string()
    };
    let said = format!("{} against {}", startup("my-controller"), startup("course-go"));
    assert!(section.contains(&said), "docs/bench.md's startup figures are not the run's: {said}");
}

/// The README is a first page (tables of figures live in docs/), and no page or sample
/// names the machine it was written on: its home, its checkout, its build output.
#[test]
fn the_readme_is_short_and_no_page_names_a_machine() {
    let readme = std::fs::read_to_string(project::root().join("README.md")).unwrap();
    assert!(readme.lines().count() <= 200, "README.md: {} lines", readme.lines().count());
    let home = std::env::var("HOME").unwrap_or_default();
    let here = [project::root().display().to_string(), format!("{home}/")];
    let marks = ["/root/", "/home/", "/Users/", "/work/"];
    let named: Vec<String> = TRACKED
        .iter()
        .filter(|f| *f == "README.md" || f.starts_with("docs/"))
        .filter(|f| !f.ends_with(".svg") && !f.ends_with(".png"))
        .filter_map(|f| {
            let text = std::fs::read_to_string(project::root().join(f)).ok()?;
            let mark = marks.iter().copied().chain(here.iter().map(String::as_str));
            mark.filter(|m| m.len() > 1).find(|m| text.contains(m)).map(|m| format!("{f}: {m}"))
        })
        .collect();
    assert!(named.is_empty(), "a machine's path (project::machine_neutral): {named:?}");
}

/// The README's first-run table is the one `.ci/first-run` wrote into
/// docs/samples/first-run.md, row for row.
#[test]
fn the_readme_first_run_table_is_a_recorded_run() {
    let read = |f: &str| std::fs::read_to_string(project::root().join(f)).unwrap();
    let (readme, saved) = (read("README.md"), read("docs/samples/first-run.md"));
    let rows = |text: &str, from: &str| -> Vec<String> {
        let section = text.split(from).nth(1).expect(from).split("\n#").next().unwrap_or_default();
        section.lines().filter(|l| l.starts_with('|')).map(str::to_string).collect()
    };
    let (shown, recorded) = (rows(&readme, "### The first run"), rows(&saved, "# A first run"));
    assert!(recorded.len() >= 7, "{recorded:?}");
    assert_eq!(shown, recorded, "README's first-run table is not docs/samples/first-run.md's");
}

/// The first table after `heading`, without its header and separator: each row's cells, trimmed.
fn table(text: &str, heading: &str) -> Vec<Vec<String>> {
    let section = text.split(heading).nth(1).unwrap_or_else(|| panic!("no {heading:?}"));
    section
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .filter(|l| !l.starts_with("|---"))
        .skip(1)
        .map(|l| l.trim().trim_matches('|').split('|').map(|c| c.trim().to_string()).collect())
        .collect()
}

/// The doctor checks a prerequisites table names in its last column (`Go, envtest programs`).
fn doctor_checks(rows: &[Vec<String>]) -> BTreeSet<String> {
    rows.iter()
        .filter_map(|row| row.last())
        .flat_map(|cell| cell.split(", ").map(|name| name.trim_matches('`').to_string()))
        .collect()
}

/// The Chinese page 00 gives the README's prerequisites as a table of its own: it names the
/// same doctor checks (the README's are held to doctor by xtask's
/// `the_readme_prerequisites_are_doctor_checks`).
#[test]
fn page_00_prerequisites_name_the_readmes_doctor_checks() {
    let read = |f: &str| std::fs::read_to_string(project::root().join(f)).unwrap();
    let readme = table(&read("README.md"), "## Prerequisites");
    let page = table(&read("docs/zh-CN/00-prepare.md"), "### 不用 Nix 时");
    assert!(page.iter().all(|row| row.len() == 4), "page 00's prerequisites: {page:?}");
    let (named, shown) = (doctor_checks(&readme), doctor_checks(&page));
    assert!(named.len() >= 9, "{named:?}");
    assert_eq!(shown, named, "page 00's prerequisites name other doctor checks than the README's");
}

/// Page 00's first-run table is docs/samples/first-run.md's, row for row: the steps in
/// Chinese, the commands and times as recorded (a step not timed says so, with the run's
/// figures).
#[test]
fn page_00_first_run_table_is_a_recorded_run() {
    let read = |f: &str| std::fs::read_to_string(project::root().join(f)).unwrap();
    let recorded = table(&read("docs/samples/first-run.md"), "# A first run");
    let shown = table(&read("docs/zh-CN/00-prepare.md"), "### 第一次要多久");
    assert!(recorded.len() >= 6, "{recorded:?}");
    assert_eq!(shown.len(), recorded.len(), "page 00's first-run table: {shown:?}");
    let figures = |cell: &str| -> Vec<String> {
        cell.split(|c: char| !c.is_ascii_alphanumeric() && c != '.')
            .filter(|w| w.contains(|c: char| c.is_ascii_digit()))
            .map(str::to_string)
            .collect()
    };
    for (row, saved) in shown.iter().zip(&recorded) {
        assert!(row.len() == 3 && !row[0].is_empty(), "page 00's first-run row {row:?}");
        assert_eq!(row[1], saved[1], "page 00's first-run command is not the recorded one");
        let untimed = saved[2].starts_with("not timed")
            && row[2].starts_with("没有计时")
            && figures(&saved[2]).iter().all(|f| row[2].contains(f.as_str()));
        assert!(
            row[2] == saved[2] || untimed,
            "page 00 says {:?} took {:?}; docs/samples/first-run.md: {:?}",
            row[1],
            row[2],
            saved[2]
        );
    }
}

/// docs/e2e.md has a row for every test of the suite, marked `(envtest)`,
/// `(kind)`, `(own cluster)` or `(cluster-wide)` exactly when it runs only there.
#[test]
fn the_e2e_page_has_a_row_for_every_test() {
    let page = std::fs::read_to_string(project::root().join("docs/e2e.md")).unwrap();
    let first_cells: Vec<&str> =
        page.lines().filter_map(|l| l.strip_prefix("| ")?.split(" | ").next()).collect();
    for test in e2e::all() {
        let name = format!("`{}`", test.name);
        let Some(cell) = first_cells.iter().find(|c| c.contains(&name)) else {
            panic!("docs/e2e.md has no row for {}", test.name);
        };
        let marker = match test.runs_on {
            labkit::suite::RunsOn::Any => None,
            labkit::suite::RunsOn::Envtest(_) => Some("(envtest)"),
            labkit::suite::RunsOn::Kind(_) => Some("(kind)"),
            labkit::suite::RunsOn::OwnCluster(_) => Some("(own cluster)"),
            labkit::suite::RunsOn::ClusterWide(_) => Some("(cluster-wide)"),
        };
        for said in ["(envtest)", "(kind)", "(own cluster)", "(cluster-wide)"] {
            assert_eq!(
                cell.contains(said),
                marker == Some(said),
                "docs/e2e.md's row {cell:?} and where {} runs ({:?}) disagree",
                test.name,
                marker
            );
        }
    }
}
