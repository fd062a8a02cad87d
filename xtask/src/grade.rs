//! `cargo xtask grade -- <command…>`: grades a controller program a learner
//! typed (any language) against the current lab, the rows of `grader`,
//! as a table in the reader's language (`xtask/grade/*.toml`), and with `--room` as JSON
//! handed in to the room ([`collect`]: `--collect --room NAME` reads them).
//!
//! The lab is borrowed for the grade ([`crate::borrow`]): its own controller
//! stopped, and put back afterwards whatever happens — a result, a failure,
//! Ctrl-C, SIGTERM, SIGHUP, further signals, a failed stop; a grade killed
//! outright is put back by the next command.

mod code_lang;
mod collect;
mod role;
mod words;

use crate::room::GRADE;
use code_lang::CodeLang;
use collect::{HandIn, collect};
use words::{Words, heading, refused_text, role_text, table};

use std::{
    collections::BTreeMap,
    fmt::Write as _,
    path::{Path, PathBuf},
    process::ExitCode,
    sync::OnceLock,
    time::Duration,
};

use anyhow::{Context as _, Result, bail};
use controller::cli::parse_duration;
use grader::{self as grade, Hint, Options, Refused, Report, RowId};
use labkit::lab::Lab;
use serde::{Deserialize, Serialize};

use labkit::tr;

use crate::{
    borrow::Borrow,
    interrupt::Interrupts,
    lab::LabName,
    locale::{self, Lang},
};

#[derive(clap::Args)]
pub struct GradeArgs {
    #[command(flatten)]
    lab: LabName,
    /// Hand the result in to the room: the attendee's kubeconfig from `room up` (it is
    /// written into their namespace); with `--collect`, the room's name.
    #[arg(long, value_name = "KUBECONFIG|NAME")]
    room: Option<String>,
    /// Who is graded, in the result [default: $USER].
    #[arg(long)]
    attendee: Option<String>,
    /// Desired data entry KEY=VALUE, for a variant of the course's program;
    /// repeat for several keys [default: the course's app.conf].
    #[arg(long = "data", value_name = "KEY=VALUE")]
    data: Vec<String>,
    /// The program's resync period: "no hot loop" watches one, and 3 s more.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    resync: Duration,
    /// How long the program (and its restart) gets to make its first request.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    connect_within: Duration,
    /// How long it gets to exit after SIGINT or SIGTERM.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    exit_within: Duration,
    /// How many of the program's writes the conflict row makes conflict, one
    /// after another (the grader's tests make 20: its steadiness).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
    conflicts: u32,
    /// A Role of your own instead of the course's (a YAML file holding one
    /// Role): for a program that writes with patch or server-side apply. The
    /// grade then says that the Role is not the course's.
    #[arg(long, value_name = "FILE")]
    role: Option<PathBuf>,
    /// The language whose way each hint shows [default: the command's, from
    /// `go run`, `cargo run`, `python`, a file's extension or contents; else all]
    #[arg(long, value_enum)]
    hint_lang: Option<CodeLang>,
    /// Print the room's table from the grades its attendees handed in (`--room NAME`, read
    /// with the instructor's kubeconfig) instead of grading.
    #[arg(long, requires = "room", conflicts_with = "command")]
    collect: bool,
    /// The program and its arguments; {kubeconfig} becomes the path of its kubeconfig.
    #[arg(last = true, value_name = "COMMAND", required_unless_present = "collect")]
    command: Vec<String>,
}

/// One language's words (`xtask/grade/<lang>.toml`; its header says what each table holds).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Texts {
    rows: BTreeMap<String, String>,
    seen: BTreeMap<String, String>,
    hints: BTreeMap<String, String>,
    /// Each hint's way in a language of code.
    go: BTreeMap<String, String>,
    rust: BTreeMap<String, String>,
    python: BTreeMap<String, String>,
    texts: BTreeMap<String, String>,
    refused: BTreeMap<String, String>,
    /// How a stop went, by kind: one phrase from a row's `<name>.kind` values.
    stops: BTreeMap<String, String>,
}

impl Texts {
    fn of(lang: Lang) -> &'static Texts {
        static TEXTS: [OnceLock<Texts>; 2] = [OnceLock::new(), OnceLock::new()];
        let files = [include_str!("../grade/en.toml"), include_str!("../grade/zh-CN.toml")];
        locale::table(lang, &TEXTS, files, "grade")
    }

    fn text(&self, key: &str, values: &[(&str, &str)]) -> String {
        locale::fill(&self.texts[key], values)
    }

    /// Each hint's way in `lang` (one of [`CodeLang::EACH`]).
    fn ways(&self, lang: CodeLang) -> &BTreeMap<String, String> {
        match lang {
            CodeLang::Go | CodeLang::All => &self.go,
            CodeLang::Rust => &self.rust,
            CodeLang::Python => &self.python,
        }
    }
}

/// The JSON an instructor collects: who, what, where, and every row. What a
/// file of format 1 lacks (the verdicts, the Role, the hints' language) reads as default.
#[derive(Default, Serialize, Deserialize)]
#[serde(default)]
struct GradeFile {
    format: u32,
    attendee: String,
    host: String,
    graded_at: String,
    command: String,
    lab: String,
    provider: String,
    kubernetes_version: String,
    target: String,
    /// Every row passed.
    passed: bool,
    /// The course's graduation: every row of the course passed.
    graduated: bool,
    /// Every row beyond the course passed.
    beyond_passed: bool,
    /// The Role it ran with, in the file's language.
    role: String,
    /// The language of code the hints show.
    hint_lang: CodeLang,
    /// Why it could not be graded at all, in the file's language.
    refused: Option<String>,
    lang: String,
    rows: Vec<GradedRow>,
}

/// A row as the table shows it, and as `grader` reported it.
#[derive(Serialize, Deserialize)]
struct GradedRow {
    id: RowId,
    title: String,
    passed: bool,
    seen: String,
    reread: Option<String>,
    seen_key: String,
    values: BTreeMap<String, String>,
    hint: Option<Hint>,
    /// What the API server answered 403 while the row ran (`kubectl auth can-i` words, how often).
    #[serde(default)]
    forbidden: Vec<grade::Denied>,
    /// How many 409 Conflicts it answered while the row ran.
    #[serde(default)]
    conflicts: u64,
}

const FORMAT: u32 = 2;

/// The exit status of a grade whose program graduated but failed a row beyond the course.
const BEYOND_FAILED: u8 = 3;

pub async fn run(args: GradeArgs) -> Result<ExitCode> {
    let lang = Lang::chosen();
    let texts = Texts::of(lang);
    if let (true, Some(room)) = (args.collect, &args.room) {
        print!("{}", collect(room, texts).await?);
        return Ok(ExitCode::SUCCESS);
    }
    // Bad input is refused before anything in the lab is touched.
    if let Some(why) = not_a_program(&args.command[0]) {
        let reason = locale::fill(
            &texts.refused["not_a_program"],
            &[("program", &args.command[0]), ("why", &why)],
        );
        eprintln!("{}", texts.text("refused", &[("reason", &reason)]));
        return Ok(ExitCode::from(2));
    }
    let mut options = options(&args, texts)?;
    if let Some(file) = &args.role {
        options.role = role::read(file)?;
    }
    let hand_in = match &args.room {
        Some(kubeconfig) => Some(HandIn::open(Path::new(kubeconfig)).await?),
        None => None,
    };
    let mut signals =
        Interrupts::catch(&labkit::project::lab_dir(&args.lab.name).join("hangup.log"))?;
    let program = tr!("the program");
    let mut lab = Lab::find_named(&args.lab.name).await?;
    cluster_wide(lab.file())?;
    let command = labkit::command::Cmd::argv(&args.command).to_string();
    announce(texts, &lab, &options, &command)?;
    labkit::progress!(texts.text("controller_stopped", &[]));

    let mut borrow = Borrow::begin(&mut lab, "grade").await?;
    let result = match borrow.stopped().and_then(|()| labkit::test_hook::at("stopped")) {
        Ok(()) => grade::run(&lab, &options, borrow.record.clone(), signals.first(&program)).await,
        Err(error) => Err(error),
    };
    labkit::progress!("== {}", texts.text("restoring", &[]));
    let interrupted = signals.seen.is_some();
    let restored = borrow.put_back(&mut lab, signals).await;

    // Graded, or refused: anything else is an error.
    let outcome = match result.map_err(|error| error.downcast::<Refused>()) {
        Ok(report) => Ok(report),
        Err(Ok(refused)) => Err(refused),
        // A lab not put back is said first (its error says how to make it anew).
        Err(Err(error)) => return restored.and(Err(error)),
    };
    restored?;
    if interrupted {
        bail!(tr!("interrupted: the program was stopped and the lab put back as it was"));
    }
    let words = Words::new(texts, &options.role, &lab, &args);
    let graded = GradeFile::new(&args, &outcome, &words, lang, &lab, &command);
    show(&outcome, &graded, texts);
    if let Some(hand_in) = hand_in {
        hand_in.write(&graded, false).await?;
        let said = texts.text("handed_in", &[("namespace", &hand_in.namespace), ("name", GRADE)]);
        eprintln!("{said}");
    }
    Ok(match &outcome {
        Ok(report) if report.passed(true) && report.passed(false) => ExitCode::SUCCESS,
        Ok(report) if report.passed(true) => ExitCode::from(BEYOND_FAILED),
        Ok(_) => ExitCode::FAILURE,
        Err(_) => ExitCode::from(2),
    })
}

/// The grading's options from the flags (`--data` checked as the controller checks it).
fn options(args: &GradeArgs, texts: &'static Texts) -> Result<Options> {
    let mut data = controller::desired::parse_pairs(&args.data)
        .map_err(|error| anyhow::anyhow!(tr!("--data: {error}", error)))?;
    if data.is_empty() {
        data = controller::desired::default_data();
    }
    Ok(Options {
        data,
        resync: args.resync,
        connect_within: args.connect_within,
        exit_within: args.exit_within,
        conflicts: args.conflicts,
        shown: true,
        progress: progress(texts),
        ..Options::new(args.command.clone())
    })
}

/// What is about to be graded, where, as whom.
fn announce(texts: &Texts, lab: &Lab, options: &Options, command: &str) -> Result<()> {
    let (file, desired) = (lab.file(), lab.desired());
    labkit::progress!(texts.text(
        "header",
        &[
            ("command", command),
            ("lab", &file.name),
            ("provider", &file.provider),
            ("version", &file.kubernetes_version),
        ]
    ));
    let data_json = serde_json::to_string(&options.data)?;
    let user = format!("system:serviceaccount:{}:{}", desired.namespace(), grade::IDENTITY);
    let target = desired.to_string();
    let role = role_text(texts, &options.role, desired.namespace());
    labkit::progress!(texts.text(
        "keeps",
        &[("target", &target), ("data", &data_json), ("user", &user), ("role", &role)]
    ));
    Ok(())
}

/// The table, or the refusal.
fn show(outcome: &Outcome, graded: &GradeFile, texts: &Texts) {
    match outcome {
        Ok(report) => {
            print!("{}", table(graded, texts));
            eprintln!(
                "{}",
                texts.text("program_log", &[("log", &labkit::project::shown(&report.log))])
            );
        }
        Err(_) => {
            eprintln!("{}", graded.refused.as_deref().unwrap_or_default());
        }
    }
}

/// A grade's outcome: its report, or why the program could not be graded.
type Outcome = Result<Report, Refused>;

/// A line per finished row, and one before the long watch for writes.
fn progress(texts: &'static Texts) -> grade::Progress {
    Some(std::sync::Arc::new(move |step: grade::Step<'_>| match step {
        grade::Step::Row(row) => {
            let result = if row.passed { "pass" } else { "fail" };
            let row_title = &texts.rows[row.id.key()];
            labkit::progress!(
                texts.text("row_done", &[("result", &texts.text(result, &[])), ("row", row_title)])
            );
        }
        grade::Step::Watching { window } => {
            let window = format!("{:.0} s", window.as_secs_f64());
            labkit::progress!(texts.text("watching", &[("window", &window)]));
        }
    }))
}

/// Why `program` cannot be started, if it cannot: neither a file (a path
/// with a `/`) nor a program on PATH.
fn not_a_program(program: &str) -> Option<String> {
    if program.contains('/') {
        let path = Path::new(program);
        return (!path.is_file()).then(|| tr!("no such file"));
    }
    labkit::tools::on_path(program).is_none().then(|| tr!("no such program on PATH"))
}

impl GradeFile {
    fn new(
        args: &GradeArgs,
        outcome: &Outcome,
        words: &Words<'_>,
        lang: Lang,
        lab: &Lab,
        command: &str,
    ) -> GradeFile {
        let (rows, refused) = match outcome {
            Ok(report) => {
                let row = |r| GradedRow::new(r, words, report.group_read);
                (report.rows.iter().map(row).collect(), None)
            }
            Err(refused) => (Vec::new(), Some(refused_text(refused, words.texts))),
        };
        let graduated = matches!(outcome, Ok(r) if r.passed(true));
        let beyond_passed = matches!(outcome, Ok(r) if r.passed(false));
        GradeFile {
            format: FORMAT,
            attendee: args
                .attendee
                .clone()
                .or_else(|| std::env::var("USER").ok())
                .unwrap_or_else(|| "unknown".into()),
            host: rustix::system::uname().nodename().to_string_lossy().into_owned(),
            graded_at: k8s_openapi::jiff::Timestamp::now().to_string(),
            command: command.to_string(),
            lab: lab.file().name.clone(),
            provider: lab.file().provider.clone(),
            kubernetes_version: lab.file().kubernetes_version.clone(),
            target: lab.desired().to_string(),
            passed: graduated && beyond_passed,
            graduated,
            beyond_passed,
            role: words.role.clone(),
            hint_lang: words.code,
            refused,
            lang: lang.file_stem().to_string(),
            rows,
        }
    }
}

/// Refused on a lab whose user lacks cluster-wide rights (a room attendee's).
fn cluster_wide(file: &labkit::lab_file::LabFile) -> Result<()> {
    if file.offers.cluster_wide {
        return Ok(());
    }
    let namespace = file.deployment_namespace();
    bail!(tr!(
        "grading runs the program as a ServiceAccount of its own ({identity}) with a token \
         the grade makes for it, which {namespace}'s user may not make (a room's attendee gets \
         tokens for the lab's my-controller only): the instructor grades, from a lab of their \
         own context (`cargo xtask lab up --provider existing --context …`)",
        identity = grader::IDENTITY,
        namespace
    ));
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::words::{phrases, program_lines};
    use super::*;

    /// Every `seen` key `grader::run` can report, with the values each carries: the
    /// texts of every language have exactly these.
    const SEEN: &[(&str, &[&str])] = &[
        ("starts.pass", &["after", "creates"]),
        ("starts.absent", &["within", "creates"]),
        ("starts.wrong_data", &["creates", "last"]),
        ("self_heal.pass", &["after", "creates"]),
        ("self_heal.absent", &["within", "creates"]),
        ("self_heal.wrong_data", &["creates", "last"]),
        ("correction.pass", &["key", "after", "updates"]),
        ("correction.not_back", &["key", "within", "updates", "last"]),
        ("failed_write.pass", &["updates", "after"]),
        ("failed_write.not_recreated", &["updates", "within", "last"]),
        ("conflict.pass", &["conflicts", "after"]),
        ("conflict.cannot_conflict", &["method", "status"]),
        ("conflict.not_back", &["conflicts", "updates", "within", "last"]),
        ("rerun.pass", &["stopped", "connected", "quiet", "version"]),
        ("rerun.wrote", &["quiet", "creates", "updates", "deletes", "before", "now"]),
        ("rerun.never_connected", &["within"]),
        ("hot_loop.pass", &["window", "resync", "relists"]),
        ("hot_loop.wrote", &["window", "resync", "relists", "writes", "before", "now"]),
        ("watches.pass", &["window", "reads", "most", "gets"]),
        ("watches.polled", &["window", "reads", "most", "gets"]),
        ("watches.per_event", &["window", "reads", "most", "gets"]),
        ("clean_exit.pass", &["sigint", "sigterm"]),
        ("clean_exit.fail", &["sigint", "sigterm"]),
        ("exited", &["status", "last_line"]),
        ("not_run", &[]),
    ];

    fn keys(table: &BTreeMap<String, String>) -> BTreeSet<&str> {
        table.keys().map(String::as_str).collect()
    }

    #[test]
    fn every_language_has_every_text_with_the_same_placeholders() {
        let (en, zh) = (Texts::of(Lang::En), Texts::of(Lang::Zh));
        for (name, a, b) in [
            ("rows", &en.rows, &zh.rows),
            ("seen", &en.seen, &zh.seen),
            ("hints", &en.hints, &zh.hints),
            ("texts", &en.texts, &zh.texts),
            ("refused", &en.refused, &zh.refused),
            ("stops", &en.stops, &zh.stops),
            ("go", &en.go, &zh.go),
            ("rust", &en.rust, &zh.rust),
            ("python", &en.python, &zh.python),
        ] {
            assert_eq!(keys(a), keys(b), "[{name}] differs between en.toml and zh-CN.toml");
            for (key, text) in a {
                assert_eq!(
                    locale::placeholders(text),
                    locale::placeholders(&b[key]),
                    "[{name}] {key}: the placeholders differ"
                );
            }
        }
    }

    #[test]
    fn the_texts_cover_every_row_outcome_and_hint_the_grade_reports() {
        let en = Texts::of(Lang::En);
        let rows: BTreeSet<&str> = RowId::ALL.iter().map(|r| r.key()).collect();
        assert_eq!(keys(&en.rows), rows);
        let seen: BTreeSet<&str> = SEEN.iter().map(|(k, _)| *k).collect();
        assert_eq!(keys(&en.seen), seen);
        for (key, values) in SEEN {
            let mut values: Vec<String> = values.iter().map(|v| v.to_string()).collect();
            values.sort();
            assert_eq!(locale::placeholders(&en.seen[*key]), values, "[seen] {key}");
        }
        let hints: BTreeSet<&str> = Hint::ALL.iter().map(|h| h.key()).collect();
        assert_eq!(keys(&en.hints), hints);
        // Each hint has its way in every language of code the hints know.
        for lang in CodeLang::EACH {
            assert_eq!(keys(en.ways(lang)), hints, "[{}]", lang.key());
        }
    }

    #[test]
    fn a_stop_is_one_phrase_in_the_readers_language() {
        let values: BTreeMap<String, String> = [
            ("quiet", "5 s"),
            ("sigterm.kind", "exited"),
            ("sigterm.status", "exit 0"),
            ("sigterm.after", "3 ms"),
            ("sigint.kind", "killed"),
            ("sigint.within", "5 s"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let en: BTreeMap<String, String> =
            phrases(&values, Texts::of(Lang::En)).into_iter().collect();
        assert_eq!(en["sigterm"], "exit 0 after 3 ms");
        assert_eq!(en["sigint"], "still running after 5 s, killed");
        assert_eq!(en["quiet"], "5 s");
        assert_eq!(en.len(), 3);
        let zh: BTreeMap<String, String> =
            phrases(&values, Texts::of(Lang::Zh)).into_iter().collect();
        assert_eq!(zh["sigterm"], "3 ms 后exit 0");
    }

    #[test]
    fn chinese_texts_are_chinese() {
        let zh = Texts::of(Lang::Zh);
        for (key, text) in zh.rows.iter().chain(&zh.hints).chain(&zh.refused) {
            assert!(text.chars().any(|c| ('\u{4e00}'..='\u{9fff}').contains(&c)), "{key}: {text}");
        }
        let tables = [&zh.rows, &zh.seen, &zh.hints, &zh.texts, &zh.refused, &zh.stops];
        for (key, text) in tables.into_iter().chain(CodeLang::EACH.map(|l| zh.ways(l))).flatten() {
            let english = labkit::english::english_words(text, Default::default());
            assert!(english.is_empty(), "zh-CN.toml {key}: English {english:?} in {text}");
        }
    }

    #[test]
    fn the_programs_lines_are_set_off_under_their_heading() {
        assert_eq!(
            program_lines("last lines of p:\n=== run 1 ===\noops"),
            "last lines of p:\n  | === run 1 ===\n  | oops"
        );
        assert_eq!(program_lines("(p is empty)"), "(p is empty)");
    }

    #[test]
    fn bad_programs_are_named_before_anything_runs() {
        assert!(not_a_program("sh").is_none());
        assert!(not_a_program("/bin/sh").is_none());
        assert!(not_a_program("no-such-program-here").is_some());
        assert!(not_a_program("./target/no/such/file").unwrap().contains("no such file"));
    }

    fn row(
        id: RowId,
        passed: bool,
        seen: &str,
        values: &[(&str, &str)],
        hint: Option<Hint>,
    ) -> grade::Row {
        grade::Row {
            id,
            passed,
            seen: seen.into(),
            values: values.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            hint,
            forbidden: Vec::new(),
            conflicts: 0,
        }
    }

    fn words(lang: Lang, code: CodeLang) -> Words<'static> {
        let texts = Texts::of(lang);
        Words { texts, role: role_text(texts, &grade::Role::course(), "default"), code }
    }

    fn graded(rows: &[grade::Row], attendee: &str, at: &str, lang: Lang) -> GradeFile {
        let words = words(lang, CodeLang::All);
        let in_course = |course: bool| {
            RowId::ALL
                .iter()
                .filter(|id| id.in_course() == course)
                .all(|id| rows.iter().any(|r| r.id == *id && r.passed))
        };
        GradeFile {
            format: FORMAT,
            attendee: attendee.into(),
            host: "h".into(),
            graded_at: at.into(),
            command: "prog".into(),
            lab: "lab".into(),
            provider: "envtest".into(),
            kubernetes_version: "v1.36.3".into(),
            target: "default/my-config".into(),
            passed: in_course(true) && in_course(false),
            graduated: in_course(true),
            beyond_passed: in_course(false),
            role: words.role.clone(),
            hint_lang: words.code,
            refused: None,
            lang: lang.file_stem().into(),
            rows: rows.iter().map(|r| GradedRow::new(r, &words, true)).collect(),
        }
    }

    #[test]
    fn a_failed_row_says_what_it_saw_and_what_to_reread() {
        let rows = [row(
            RowId::Starts,
            false,
            "starts.absent",
            &[("within", "20 s"), ("creates", "0"), ("last", "absent")],
            Some(Hint::Kick),
        )];
        for lang in [Lang::En, Lang::Zh] {
            let texts = Texts::of(lang);
            let text = table(&graded(&rows, "a", "t", lang), texts);
            assert!(text.contains(&locale::fill(
                &texts.seen["starts.absent"],
                &[("within", "20 s"), ("creates", "0")]
            )));
            assert!(text.contains(&texts.hints["kick"]), "{text}");
            assert!(text.contains(&texts.text("fail", &[])));
        }
    }

    #[test]
    fn the_courses_verdict_stands_apart_from_the_rows_beyond_it() {
        let mut rows: Vec<grade::Row> =
            RowId::ALL.iter().map(|id| row(*id, true, "not_run", &[], None)).collect();
        let last = rows.len() - 1;
        assert_eq!(rows[last].id, RowId::CleanExit);
        rows[last] = row(RowId::CleanExit, false, "not_run", &[], Some(Hint::Signals));
        let file = graded(&rows, "a", "t", Lang::En);
        assert!(file.graduated && !file.beyond_passed && !file.passed);
        let text = table(&file, Texts::of(Lang::En));
        assert!(text.contains("all 6 rows pass — stage 1, graduated"), "{text}");
        assert!(text.contains("beyond the course: 2 of 3 rows pass"), "{text}");
        // The course's rows first, numbered as shown; the clean exit is the 9th.
        assert!(text.contains("| 9 clean exit | FAIL |"), "{text}");
        assert!(text.find("| 4 idempotent rerun").unwrap() < text.find("| 7 survives").unwrap());
    }

    #[test]
    fn a_refusal_is_named_with_the_role_and_hints_speak_the_learners_code() {
        let values = [("within", "20 s"), ("creates", "0")];
        let mut refused =
            row(RowId::Starts, false, "starts.absent", &values, Some(Hint::Forbidden));
        let asked = "patch configmaps/my-config -n default".to_string();
        refused.forbidden = vec![grade::Denied { asked, times: 3 }];
        for lang in [Lang::En, Lang::Zh] {
            let texts = Texts::of(lang);
            let shown = GradedRow::new(&refused, &words(lang, CodeLang::Go), true);
            assert!(
                shown.seen.contains("`patch configmaps/my-config -n default` ×3"),
                "{}",
                shown.seen
            );
            assert!(
                shown.seen.contains("get, list, watch, create, update configmaps"),
                "{}",
                shown.seen
            );
            let reread = shown.reread.unwrap();
            assert!(reread.contains(&texts.ways(CodeLang::Go)["forbidden"]), "{reread}");
            assert!(!reread.contains(&texts.ways(CodeLang::Rust)["forbidden"]), "{reread}");
        }
        // A second row with the same hint names the first instead of saying it again.
        let again = row(RowId::SelfHeal, false, "self_heal.absent", &values, Some(Hint::Forbidden));
        let text =
            table(&graded(&[refused.clone(), again], "a", "t", Lang::En), Texts::of(Lang::En));
        assert!(text.contains("  2 self-heal (experiment 2): as 1 above\n"), "{text}");
        let all = GradedRow::new(&refused, &words(Lang::En, CodeLang::All), true).reread.unwrap();
        for lang in CodeLang::EACH {
            assert!(all.contains(&Texts::of(Lang::En).ways(lang)["forbidden"]), "{all}");
        }
    }
}
