//! `cargo xtask exp <create|heal|correct|rerun|dedup>`: one of the course's
//! experiments, live against the current lab, narrated for a workshop attendee.
//!
//! The experiment itself is the e2e suite's function (`grader::experiments::…`):
//! one definition, two uses. This module only wraps it, and each narration is
//! an entry of [`narrated`]: what is about to happen, the kubectl commands that
//! repeat it by hand, what the controller logged meanwhile, the reaction time
//! and what the suite measured, and what to notice. Every part starts its line
//! with a fixed label (`[labels]` of [`Narrations`]), so the output can be checked by grep
//! (and is, for every narration, by a unit test). The texts are tables, one file per
//! language: `xtask/exp/en.toml` and `xtask/exp/zh-CN.toml` (`--lang`, by
//! default the locale's).

mod hand;

use hand::Hand;

use std::{collections::BTreeMap, fmt::Write as _, process::ExitCode, sync::OnceLock};

use anyhow::{Result, bail};
use controller::desired::Desired;
use grader::experiments::{self, DEDUP_FLAGS, DRIFT_LABEL};
use labkit::{
    command::Cmd,
    lab_file::{ControllerRuns, LabFile},
};
use labkit::{
    converge::wait_idle,
    deployment::{NAME as DEPLOYMENT, PORT, SELECTOR},
    lab::Lab,
    suite::{Experiment, Measured, first_key},
};
use serde::Deserialize;

use labkit::tr;

use crate::locale::{Lang, fill};

/// Labels are padded to one width (terminal columns) so the texts line up.
const LABEL_WIDTH: usize = 20;
/// The controller's log during an experiment is short; a flood (say, a
/// retry storm) is cut to its end, where the outcome is.
const MAX_LOG_LINES: usize = 30;

/// One narrated experiment, a table of xtask/exp/en.toml (its header says
/// what the fields hold): every one of `grader::experiments::ALL`. The
/// suite's other tests have nothing to watch live; `cargo xtask e2e --exp
/// NAME` runs them.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Narrated {
    /// The name a person types, an alias in the suite.
    short: String,
    /// The header's one line; without it the suite's own (English) words.
    #[serde(default)]
    about: Option<String>,
    /// The suite's name: the function in `grader::experiments` and its test.
    test_name: String,
    course: String,
    /// What the suite measured, in this language: `{name}`s are the
    /// experiment's `Measured::values`.
    measured: String,
    about_to: String,
    #[serde(flatten)]
    reaction: Reaction,
    by_hand: Vec<HandStep>,
    notice: Vec<String>,
}

/// What the measured latency spans, or why there is none.
#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum Reaction {
    Timed(String),
    NotTimed(String),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HandStep {
    #[serde(rename = "do")]
    action: Do,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    why: String,
}

#[derive(Clone, Copy, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum Do {
    Kubectl,
    Stop,
    Start,
    StartSlow,
    StartOwn,
    Metrics,
    DriftPatch,
    DriftUnlabel,
    DedupLoop,
}

/// One language's file: `[labels]`, the fixed label each kind of line starts
/// with; `[texts]`, the narration's own sentences (both files have the same
/// keys, a unit test checks); the experiments.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Narrations {
    labels: BTreeMap<String, String>,
    texts: BTreeMap<String, String>,
    experiment: Vec<Narrated>,
}

impl Lang {
    /// The narrations in this language.
    fn narrations(self) -> &'static Narrations {
        static NARRATIONS: [OnceLock<Narrations>; 2] = [OnceLock::new(), OnceLock::new()];
        let files = [include_str!("../exp/en.toml"), include_str!("../exp/zh-CN.toml")];
        crate::locale::table(self, &NARRATIONS, files, "exp")
    }
}

/// The narrated experiments, in the course's order (names and suite
/// functions are the same in every language; a unit test checks).
fn narrated() -> &'static [Narrated] {
    &Lang::En.narrations().experiment
}

/// The names this verb narrates, as a person types them.
pub fn names() -> impl Iterator<Item = &'static str> {
    narrated().iter().map(|n| n.short.as_str())
}

/// `cargo xtask exp [NAME] [--by-hand] [--name LAB]`: without NAME, the list; with it, the
/// experiment against lab `lab_name` (put back first if a borrower left it), failing when it
/// fails; with `--by-hand`, only its by-hand commands for that lab, one per line and nothing
/// else (a lab test runs each of them).
pub async fn run(lab_name: &str, exp: Option<&str>, by_hand: bool, lang: Lang) -> Result<ExitCode> {
    // Only a run holds the lab's lock ([`crate::changes`]): the list and `--by-hand` touch nothing.
    if exp.is_some() && !by_hand {
        crate::borrow::put_back_if_left(lab_name).await?;
    }
    match exp {
        None => print!("{}", listing(lang)),
        Some(exp) if by_hand => {
            let exp = resolve(exp, lang.narrations())?;
            let lab = Lab::find_named(lab_name).await?;
            let hand = Hand::new(lab.file(), lab.desired(), lang.narrations());
            println!("{}", hand.commands(&exp.by_hand).join("\n"));
        }
        Some(exp) => return narrated_run(lab_name, exp, lang).await,
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs experiment `exp` against lab `lab_name`, printing the narration as it
/// goes (every narration of a passed experiment has every key line: a unit
/// test checks); its exit code.
async fn narrated_run(lab_name: &str, exp: &str, lang: Lang) -> Result<ExitCode> {
    let words = lang.narrations();
    let exp = resolve(exp, words)?;
    let mut lab = Lab::find_named(lab_name).await?;
    // A person may have stopped the controller to try something by hand.
    lab.restore().await?;
    let hand = Hand::new(lab.file(), lab.desired(), words);
    println!("{}", before(exp, &hand, words).join("\n"));

    // The log is a file on an envtest lab, the pod's log on kind.
    let mark = lab.log_mark().ok();
    let result = (exp.entry().run)(&mut lab).await;
    let log = match &mark {
        Some(mark) => {
            // The experiment is done once a watch shows the result, which can
            // be before the controller got its own answer and logged it; idle
            // (nothing queued, nothing in flight) means its lines are written.
            // Best effort: a controller that cannot say still has a log.
            let _ = wait_idle(&lab).await;
            lab.controller_log(mark).await.ok()
        }
        None => None,
    };
    let restored = lab.restore().await;
    println!("{}", after(exp, &result, log.as_deref(), words).join("\n"));

    let code = match (&result, restored) {
        (Ok(_), Ok(())) => ExitCode::SUCCESS,
        (result, restored) => {
            // The error itself is in the narration ("error:"); what a person
            // needs to find the cause goes to stderr.
            if result.is_err() {
                eprintln!("{}", lab.diagnostics().await);
            }
            if let Err(e) = restored {
                eprintln!(
                    "{}",
                    tr!(
                        "error: could not put the lab back as it was: {error}\n\
                         `cargo xtask lab reset --name {name}` starts it anew",
                        error = format!("{e:#}"),
                        name = lab_name
                    )
                );
            }
            ExitCode::FAILURE
        }
    };
    Ok(code)
}

/// An experiment by any name the suite accepts for it (`heal`, `self-heal`,
/// `self_heal_on_delete`, …), in the language of `words`.
fn resolve(word: &str, words: &'static Narrations) -> Result<&'static Narrated> {
    let narrated = grader::experiments::find(word)
        .and_then(|entry| words.experiment.iter().find(|n| n.test_name == entry.name));
    let Some(exp) = narrated else {
        let known = names().collect::<Vec<_>>().join(", ");
        bail!(tr!(
            "no narrated experiment {quoted}; narrated: {known}; the suite's other tests \
             (the kit's checks, the faults) run with `cargo xtask e2e --exp {word}`",
            quoted = format!("{word:?}"),
            known,
            word
        ));
    };
    Ok(exp)
}

impl Narrated {
    /// The suite's entry: its aliases and its one-line description.
    fn entry(&self) -> &'static Experiment {
        grader::experiments::find(&self.test_name)
            .expect("every narrated experiment is in grader::experiments::ALL (a unit test checks)")
    }

    /// The header's line: this language's, else the suite's.
    fn about(&self) -> &str {
        self.about.as_deref().unwrap_or(self.entry().about)
    }
}

/// What `cargo xtask exp` alone prints: one line per experiment.
fn listing(lang: Lang) -> String {
    let words = lang.narrations();
    let mut text = format!("{}\n\n", words.texts["listing_head"]);
    for exp in &words.experiment {
        let course = labelled(&exp.course, "");
        let _ = writeln!(text, "  {:<8} {course} {}", exp.short, exp.about());
    }
    let _ = writeln!(text, "\n{}", words.texts["listing_foot"]);
    text
}

/// `label` padded to [`LABEL_WIDTH`] terminal columns, then `text`.
fn labelled(label: &str, text: &str) -> String {
    format!("{}{text}", labkit::say::padded(label, LABEL_WIDTH))
}

/// The narration before the experiment runs.
fn before(exp: &Narrated, hand: &Hand, words: &Narrations) -> Vec<String> {
    let l = |key: &str| words.labels[key].as_str();
    let mut lines = vec![
        fill(
            &words.texts["header"],
            &[("short", &exp.short), ("course", &exp.course), ("about", exp.about())],
        ),
        labelled(l("about_to"), &hand.fill(&exp.about_to)),
    ];
    lines.extend(hand.commands(&exp.by_hand).iter().map(|step| labelled(l("by_hand"), step)));
    let running =
        words.texts["running"].replace("{test}", &exp.test_name).replace("{short}", &exp.short);
    lines.push(labelled(l("running"), &running));
    lines
}

/// The narration once the experiment is over: the controller's log, then
/// what was measured and what to notice, or the error.
fn after(
    exp: &Narrated,
    result: &Result<Measured>,
    log: Option<&str>,
    words: &Narrations,
) -> Vec<String> {
    let (l, t) = (|key: &str| words.labels[key].as_str(), |key: &str| words.texts[key].as_str());
    let logged: Vec<&str> =
        log.iter().flat_map(|log| log.lines()).filter(|l| !l.trim().is_empty()).collect();
    let skipped = logged.len().saturating_sub(MAX_LOG_LINES);
    let summary = match (log, logged.len(), skipped) {
        (None, ..) => t("log_unreadable").replace("{deployment}", DEPLOYMENT),
        (_, 0, _) => t("log_none").to_string(),
        (_, 1, _) => t("log_one").to_string(),
        (_, n, 0) => t("log_many").replace("{n}", &n.to_string()),
        (_, n, _) => {
            t("log_cut").replace("{n}", &n.to_string()).replace("{max}", &MAX_LOG_LINES.to_string())
        }
    };
    let mut lines = vec![labelled(l("controller_logged"), &summary)];
    lines.extend(logged[skipped..].iter().map(|l| format!("  | {l}")));
    match result {
        Ok(measured) => {
            let reaction = match (&exp.reaction, measured.latency) {
                (Reaction::Timed(span), Some(latency)) => {
                    let ms = format!("{:.1}", latency.as_secs_f64() * 1000.0);
                    fill(t("reaction"), &[("ms", &ms), ("span", span)])
                }
                (Reaction::NotTimed(why), _) => t("not_timed").replace("{why}", why),
                (Reaction::Timed(span), None) => t("not_reported").replace("{span}", span),
            };
            lines.push(labelled(l("reaction_time"), &reaction));
            let values: Vec<(&str, &str)> =
                measured.values.iter().map(|(k, v)| (*k, v.as_str())).collect();
            lines.push(labelled(l("measured"), &fill(&exp.measured, &values)));
            lines.extend(measured.warnings.iter().map(|w| labelled(l("warning"), w)));
            lines.extend(exp.notice.iter().map(|n| labelled(l("notice"), n)));
            lines.push(labelled(l("result"), t("pass")));
        }
        Err(e) => {
            lines.push(labelled(l("result"), t("fail")));
            lines.push(labelled(l("error"), &format!("{e:#}")));
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use std::{path::PathBuf, time::Duration};

    use labkit::lab;
    use labkit::lab_file::{Controller, Process};

    use super::*;

    /// The course's my-config.
    fn course() -> Desired {
        labkit::lab_file::Target::default().desired().unwrap()
    }

    /// The labels every narration of a passed experiment starts at least one
    /// line with, in this order.
    const KEY_LABELS: [&str; 8] = [
        "about_to",
        "by_hand",
        "running",
        "controller_logged",
        "reaction_time",
        "measured",
        "notice",
        "result",
    ];

    /// The key lines' labels that no line of `transcript` starts with.
    fn missing_key_lines<'a>(transcript: &str, words: &'a Narrations) -> Vec<&'a str> {
        let key_lines = KEY_LABELS.iter().map(|k| words.labels[*k].as_str());
        key_lines.filter(|key| !transcript.lines().any(|line| line.starts_with(key))).collect()
    }

    /// Where a test lab's controller runs.
    #[derive(Clone, Copy)]
    enum Runs {
        Process,
        Deployment,
    }

    fn lab_file(runs: Runs) -> LabFile {
        let dir = PathBuf::from("/kit/target/lab/ws-lab");
        let controller = Controller {
            url: "http://127.0.0.1:8080".into(),
            kubeconfig: dir.join("controller.kubeconfig"),
            service_account: "default/my-controller".into(),
            token_expires: String::new(),
            log: dir.join("controller.log"),
        };
        let provider = crate::lab::providers::named(match runs {
            Runs::Process => "envtest",
            Runs::Deployment => "kind",
        })
        .unwrap();
        LabFile {
            kubernetes_version: "v1.36.3".into(),
            api_server_url: "https://127.0.0.1:6443".into(),
            // A kind lab's controller is a Deployment: its lab.json lists no process.
            processes: match runs {
                Runs::Deployment => Vec::new(),
                Runs::Process => vec![Process {
                    role: lab::CONTROLLER.into(),
                    pid: 42,
                    pid_file: dir.join("controller.pid"),
                    binary: "/kit/target/debug/my-controller".into(),
                    args: vec![
                        "--kubeconfig".into(),
                        dir.join("controller.kubeconfig").display().to_string(),
                        "--listen".into(),
                        "127.0.0.1:8080".into(),
                    ],
                    version: None,
                    source: "cargo build".into(),
                    log: dir.join("controller.log"),
                    ports: Default::default(),
                }],
            },
            ..LabFile::ready(
                "ws-lab",
                &dir,
                (provider.name(), provider.offers()),
                Default::default(),
                controller,
            )
        }
    }

    fn hand(runs: Runs) -> Hand {
        Hand::new(&lab_file(runs), &course(), Lang::En.narrations())
    }

    fn measured(latency: Option<Duration>) -> Measured {
        Measured {
            latency,
            detail: "what the suite measured".into(),
            values: vec![("reconciles", "3".into()), ("version", "42".into())],
            ..Measured::default()
        }
    }

    fn narration(short: &str) -> &'static Narrated {
        narrated().iter().find(|n| n.short == short).unwrap()
    }

    #[test]
    fn every_narrated_experiment_is_a_suite_experiment() {
        assert_eq!(names().collect::<Vec<_>>(), ["create", "heal", "correct", "rerun", "dedup"]);
        for exp in narrated() {
            let entry = grader::experiments::find(&exp.test_name)
                .unwrap_or_else(|| panic!("{} is not in the suite", exp.test_name));
            assert_eq!(entry.name, exp.test_name);
            assert!(
                entry.aliases.contains(&exp.short.as_str()),
                "{} must be an alias of {}, so `cargo xtask e2e --exp` takes it too",
                exp.short,
                entry.name
            );
        }
    }

    #[test]
    fn names_and_aliases_resolve() {
        for (word, exp) in [
            ("create", "create"),
            ("create_on_start", "create"),
            ("heal", "heal"),
            ("self-heal", "heal"),
            ("self_heal_on_delete", "heal"),
            ("correct", "correct"),
            ("rerun", "rerun"),
            ("idempotent_rerun", "rerun"),
            ("dedup", "dedup"),
        ] {
            assert_eq!(resolve(word, Lang::En.narrations()).unwrap().short, exp, "{word}");
        }
    }

    #[test]
    fn a_suite_experiment_without_narration_points_to_e2e() {
        let error = resolve("version", Lang::En.narrations()).err().unwrap().to_string();
        assert!(error.contains("cargo xtask e2e --exp version"), "{error}");
    }

    #[test]
    fn an_unknown_name_lists_the_narrated_ones() {
        let error = resolve("explode", Lang::En.narrations()).err().unwrap().to_string();
        assert!(error.contains("create, heal, correct, rerun, dedup"), "{error}");
    }

    #[test]
    fn the_listing_has_one_line_per_experiment_with_the_suites_words() {
        let text = listing(Lang::En);
        for exp in narrated() {
            let lines: Vec<_> = text
                .lines()
                .filter(|l| l.trim_start().starts_with(&format!("{} ", exp.short)))
                .collect();
            assert_eq!(lines.len(), 1, "{text}");
            assert!(lines[0].contains(exp.entry().about), "{text}");
        }
    }

    #[test]
    fn every_narration_has_every_key_line() {
        for lang in [Lang::En, Lang::Zh] {
            let words = lang.narrations();
            for exp in &words.experiment {
                let text = narrate(exp, words);
                assert_eq!(missing_key_lines(&text, words), Vec::<&str>::new(), "{text}");
                assert!(
                    text.contains(&format!("grader::experiments::{}", exp.test_name)),
                    "{text}"
                );
                for hole in ["{cm}", "{key}", "{label}", "{flags}", "{test}", "{short}"] {
                    assert!(!text.contains(hole), "{hole} left unfilled: {text}");
                }
            }
        }
    }

    /// A passed experiment's whole narration, with a one-line log.
    fn narrate(exp: &Narrated, words: &'static Narrations) -> String {
        let latency =
            matches!(exp.reaction, Reaction::Timed(_)).then_some(Duration::from_millis(56));
        let hand = Hand::new(&lab_file(Runs::Process), &course(), words);
        let mut lines = before(exp, &hand, words);
        lines.extend(after(
            exp,
            &Ok(measured(latency)),
            Some("2026-01-01T00:00:00Z  INFO controller::reconcile: created\n"),
            words,
        ));
        lines.join("\n")
    }

    #[test]
    fn the_chinese_file_mirrors_the_english_one() {
        let (en, zh) = (Lang::En.narrations(), Lang::Zh.narrations());
        assert_eq!(en.experiment.len(), zh.experiment.len());
        for (e, z) in en.experiment.iter().zip(&zh.experiment) {
            assert_eq!((&e.short, &e.test_name), (&z.short, &z.test_name));
            assert!(z.about.is_some(), "{}: the header needs its Chinese line", z.short);
            assert_eq!(
                std::mem::discriminant(&e.reaction),
                std::mem::discriminant(&z.reaction),
                "{}: timed in one language, not in the other",
                e.short
            );
            let steps = |n: &Narrated| {
                n.by_hand.iter().map(|h| (h.action as u8, h.args.clone())).collect::<Vec<_>>()
            };
            assert_eq!(steps(e), steps(z), "{}: the same commands in both", e.short);
            assert_eq!(e.notice.len(), z.notice.len(), "{}: one notice for each", e.short);
            assert_eq!(
                crate::locale::placeholders(&e.measured),
                crate::locale::placeholders(&z.measured),
                "{}: what was measured takes the same values in both",
                e.short
            );
        }
        let keys = |m: &BTreeMap<String, String>| m.keys().cloned().collect::<Vec<_>>();
        assert_eq!(keys(&en.labels), keys(&zh.labels), "the same labels in both");
        assert_eq!(keys(&en.texts), keys(&zh.texts), "the same texts in both");
        let key_lines: Vec<&str> = KEY_LABELS.iter().map(|k| zh.labels[*k].as_str()).collect();
        assert!(key_lines.iter().all(|l| !l.is_ascii()), "{key_lines:?}");
        for key in ["warning", "error"].iter().chain(&KEY_LABELS) {
            assert!(!en.labels[*key].is_empty() && !zh.labels[*key].is_empty(), "{key}");
        }
    }

    #[test]
    fn what_was_measured_is_said_in_the_narrations_language() {
        for (lang, expected) in [
            (Lang::En, "2 restarts, 3 reconciles, 0 writes, resourceVersion 42 unchanged"),
            (Lang::Zh, "重启 2 次，对账 3 次，写 0 次，resourceVersion 42 没变"),
        ] {
            let words = lang.narrations();
            let rerun = resolve("rerun", words).unwrap();
            let text = after(rerun, &Ok(measured(None)), None, words).join("\n");
            let line = text.lines().find(|l| l.starts_with(&words.labels["measured"])).unwrap();
            assert!(line.ends_with(expected), "{line}");
        }
    }

    #[test]
    fn labels_line_up_in_columns_whatever_the_script() {
        let en = labelled("result:", "pass");
        let zh = labelled("结果：", "通过");
        assert_eq!(en.find("pass"), Some(LABEL_WIDTH));
        // Three CJK characters take six columns, so 14 spaces follow.
        assert_eq!(zh, format!("结果：{}通过", " ".repeat(LABEL_WIDTH - 6)));
    }

    #[test]
    fn chinese_lines_take_full_width_brackets() {
        let zh = Lang::Zh.narrations();
        let text = narrate(resolve("heal", zh).unwrap(), zh);
        assert!(text.starts_with("== heal（课程实验 2）："), "{text}");
        let reaction = text.lines().find(|l| l.starts_with(&zh.labels["reaction_time"])).unwrap();
        assert!(
            reaction.ends_with("56.0 ms（删除 → watch 看到它带着期望的数据回来）"),
            "{reaction}"
        );
    }

    #[test]
    fn the_chinese_file_has_no_english_sentence() {
        let zh = Lang::Zh.narrations();
        let names: Vec<&str> = names().collect();
        let allowed = labkit::english::Allowed { names: &names, ..Default::default() };
        let mut texts: Vec<&String> = zh.labels.values().chain(zh.texts.values()).collect();
        for exp in &zh.experiment {
            let reaction = match &exp.reaction {
                Reaction::Timed(text) | Reaction::NotTimed(text) => text,
            };
            texts.extend([&exp.course, &exp.measured, &exp.about_to, reaction]);
            texts.extend(exp.about.iter().chain(&exp.notice));
            texts.extend(exp.by_hand.iter().map(|h| &h.why));
        }
        for text in texts {
            let english = labkit::english::english_words(text, allowed);
            assert!(english.is_empty(), "xtask/exp/zh-CN.toml: English {english:?} in {text}");
        }
    }

    #[test]
    fn chinese_narration_is_chinese() {
        let zh = Lang::Zh.narrations();
        let text = narrate(resolve("heal", zh).unwrap(), zh);
        assert!(text.contains("手动"), "{text}");
        assert!(text.contains("kubectl delete configmap my-config -n default"), "{text}");
        assert!(text.contains("电平触发") || text.contains("watch"), "{text}");
    }

    #[test]
    fn the_course_sentences_are_there() {
        let notice = |exp: &str| narration(exp).notice.join(" ");
        assert!(notice("heal").contains("the controller did not poll: the watch told it"));
        assert!(notice("rerun").contains(
            "resourceVersion unchanged: level-triggered and idempotent, no write when already right"
        ));
        assert!(
            notice("dedup")
                .contains("five changes, fewer reconciles: the queue holds each key once")
        );
        assert!(notice("create").contains("startup kick"));
        assert!(notice("correct").contains("DeepCopy"));
    }

    #[test]
    fn by_hand_gives_the_course_commands() {
        let h = hand(Runs::Process);
        let all = |exp: &Narrated| h.commands(&exp.by_hand).join("\n");
        assert!(all(narration("heal")).contains("kubectl delete configmap my-config -n default"));
        assert!(
            all(narration("heal")).contains("kubectl get configmap my-config -n default -o yaml")
        );
        assert!(all(narration("correct")).contains(
            r#"kubectl patch configmap my-config -n default --type merge -p '{"data":{"app.conf":"env=dev","e2e-extra":"added by hand"},"metadata":{"labels":{"e2e.lab/added-by":"someone"}}}'"#
        ));
        assert!(all(narration("correct")).contains("# app.conf back, e2e-extra gone"));
        for exp in narrated() {
            assert!(
                all(exp).starts_with("export KUBECONFIG=/kit/target/lab/ws-lab/kubeconfig"),
                "{}",
                all(exp)
            );
        }
    }

    #[test]
    fn the_controller_is_restarted_by_hand_with_the_labs_command_line() {
        let h = hand(Runs::Process);
        assert_eq!(h.stop(), "kill $(cat /kit/target/lab/ws-lab/controller.pid)");
        assert_eq!(
            h.start(experiments::DEDUP_FLAGS),
            "/kit/target/debug/my-controller --kubeconfig /kit/target/lab/ws-lab/controller.kubeconfig \
             --listen 127.0.0.1:8080 --reconcile-delay 2s"
        );
        assert_eq!(h.start_without(experiments::DEDUP_FLAGS), h.start(&[]));
        let kind = hand(Runs::Deployment);
        assert_eq!(
            kind.start(experiments::DEDUP_FLAGS),
            "kubectl set env deployment my-controller -n default MY_CONTROLLER_RECONCILE_DELAY=2s \
             && kubectl scale deployment my-controller -n default --replicas=1"
        );
        assert_eq!(
            kind.start_without(experiments::DEDUP_FLAGS),
            "kubectl set env deployment my-controller -n default MY_CONTROLLER_RECONCILE_DELAY- \
             && kubectl scale deployment my-controller -n default --replicas=1"
        );
    }

    #[test]
    fn the_metrics_command_greps_names_the_controller_serves() {
        for provider in [Runs::Process, Runs::Deployment] {
            let line = hand(provider).command(&HandStep {
                action: Do::Metrics,
                args: Vec::new(),
                why: String::new(),
            });
            let names =
                line.split_once("'^(").and_then(|(_, r)| r.split_once(")'")).expect(&line).0;
            let served = controller::metrics::Metrics::default().encode();
            for name in names.split('|') {
                assert!(
                    served.lines().any(|l| l.starts_with(name)),
                    "{name} not served:\n{served}"
                );
            }
            assert_eq!(names.split('|').count(), 2, "{line}");
        }
    }

    #[test]
    fn on_kind_the_metrics_come_through_the_api_servers_pod_proxy() {
        let line = hand(Runs::Deployment).command(&HandStep {
            action: Do::Metrics,
            args: Vec::new(),
            why: String::new(),
        });
        assert!(
            line.starts_with(
                "kubectl get --raw \"/api/v1/namespaces/default/pods/$(kubectl get pods -n default \
                 -l app.kubernetes.io/name=my-controller -o jsonpath='{.items[0].metadata.name}'):8080/proxy/metrics\" | grep -E '^("
            ),
            "{line}"
        );
    }

    #[test]
    fn a_controller_started_by_hand_is_stopped_with_ctrl_c_in_its_terminal() {
        let lines = hand(Runs::Process).commands(&narration("dedup").by_hand);
        let stops: Vec<&String> =
            lines.iter().filter(|l| l.starts_with("kill ") || l.starts_with("# Ctrl-C")).collect();
        assert_eq!(stops.len(), 2, "{lines:#?}");
        assert!(stops[0].starts_with("kill $(cat "), "the lab's own, by its pid file: {lines:#?}");
        assert!(stops[1].starts_with("# Ctrl-C in the controller's terminal"), "{lines:#?}");
        let starts = lines.iter().filter(|l| l.starts_with("/kit/target/debug/my-controller"));
        assert!(
            starts.clone().count() == 2
                && starts.clone().all(|l| l.contains("terminal of its own"))
        );
        // A Deployment is scaled, whoever started it.
        let kind = hand(Runs::Deployment).commands(&narration("dedup").by_hand);
        assert_eq!(kind.iter().filter(|l| l.contains("--replicas=0")).count(), 2, "{kind:#?}");
        assert!(!kind.iter().any(|l| l.contains("Ctrl-C")), "{kind:#?}");
    }

    #[test]
    fn the_dedup_loop_sends_the_experiments_changes() {
        let line = hand(Runs::Process).dedup_loop();
        // What bash makes of the loop body for i=3.
        let body = line
            .split_once("-p '")
            .and_then(|(_, rest)| rest.rsplit_once("'; done"))
            .map(|(patch, _)| patch.replace("'$i'", "3"))
            .expect(&line);
        let sent: serde_json::Value = serde_json::from_str(&body).expect(&body);
        assert_eq!(sent, experiments::dedup_change(&course(), 3));
    }

    #[test]
    fn a_failure_says_fail_and_why() {
        let lines = after(
            narration("heal"),
            &Err(anyhow::anyhow!("boom")),
            Some(""),
            Lang::En.narrations(),
        );
        assert!(lines.iter().any(|l| l == &labelled("result:", "FAIL")));
        assert!(lines.iter().any(|l| l.starts_with("error:") && l.ends_with("boom")));
        assert!(!lines.iter().any(|l| l.starts_with("notice:")));
    }

    #[test]
    fn a_long_log_is_cut_to_its_end() {
        let log: String = (1..=40).map(|i| format!("line {i}\n")).collect();
        let lines =
            after(narration("heal"), &Ok(measured(None)), Some(&log), Lang::En.narrations());
        let shown: Vec<_> = lines.iter().filter(|l| l.starts_with("  | ")).collect();
        assert_eq!(shown.len(), MAX_LOG_LINES);
        assert_eq!(shown.last().unwrap().as_str(), "  | line 40");
    }
}
