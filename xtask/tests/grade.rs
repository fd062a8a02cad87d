//! `cargo xtask grade` against the lab `cargo maint test` made (`LAB_NAME`),
//! run as a person runs it: the course's own step-4 program (verbatim, built
//! and through `go run`), the pages' step 4 typed into a fresh project (the
//! kit's step-4 example) and `my-controller` (through `cargo run` and shell
//! wrappers) pass every row; each broken variant of the course's program
//! (`grade/*.patch`) and a poller in shell fail the row they should, with the
//! hint they should; bad programs are refused in one line; Ctrl-C puts the
//! lab back.
//! A grade in Chinese prints no English sentence (`common::assert_chinese`).

mod common;

use std::{path::PathBuf, time::Duration};

use bench::peers::{go_program, module_copy};
use common::{lab, xtask};
use e2e::pages;
use labkit::{
    command::{Cmd, cargo},
    eventually::{Check, eventually},
    project,
};
use serde_json::Value;
use serial_test::serial;

/// The course's step-4 program, kept verbatim.
const COURSE: &str = "bench/peers/course-verbatim";
/// The variants' resync (their patches set it).
const VARIANT_RESYNC: &str = "2s";

/// One `cargo xtask grade` run: its exit code, what it printed, its JSON.
struct Graded {
    code: Option<i32>,
    printed: String,
    /// What a person sees in the terminal (cargo's own lines left out): a sample.
    shown: String,
    json: Value,
}

impl Graded {
    fn row(&self, id: &str) -> &Value {
        self.json["rows"]
            .as_array()
            .and_then(|rows| rows.iter().find(|r| r["id"] == id))
            .unwrap_or_else(|| panic!("no row {id}: {}", self.printed))
    }

    /// The ids of the rows that failed, in order.
    fn failed(&self) -> Vec<String> {
        let rows = self.json["rows"].as_array().cloned().unwrap_or_default();
        rows.iter()
            .filter(|r| r["passed"] == false)
            .map(|r| r["id"].as_str().unwrap_or_default().to_string())
            .collect()
    }

    fn assert_passes(&self) {
        assert_eq!(self.code, Some(0), "the grade did not pass:\n{}", self.printed);
        let rows = grader::RowId::ALL.len();
        assert_eq!(self.json["rows"].as_array().map(Vec::len), Some(rows), "{}", self.printed);
        assert!(self.failed().is_empty(), "{}", self.printed);
    }

    /// Exactly `rows` failed, each with `hint`; the verdicts and the exit
    /// status as they follow: graduated when no row of the course failed.
    fn assert_fails(&self, rows: &[&str], hint: &str) {
        assert_eq!(self.failed(), rows, "{}", self.printed);
        for id in rows {
            assert_eq!(self.row(id)["hint"], hint, "row {id}:\n{}", self.printed);
        }
        let in_course = |id: &String| {
            grader::RowId::ALL.iter().any(|r| r.key() == id.as_str() && r.in_course())
        };
        let graduated = !self.failed().iter().any(in_course);
        assert_eq!(self.json["graduated"], graduated, "{}", self.printed);
        assert_eq!(
            self.json["beyond_passed"],
            self.failed().iter().all(in_course),
            "{}",
            self.printed
        );
        // 1: not graduated; 3: graduated, a row beyond the course failed.
        assert_eq!(self.code, Some(if graduated { 3 } else { 1 }), "{}", self.printed);
    }

    /// Each failed row was answered 403 and is told so: hint, requests, the Role.
    fn assert_refused(&self, first: &str, asked: &str) {
        assert!(!self.failed().is_empty(), "{}", self.printed);
        assert!(self.failed().contains(&first.to_string()), "{}", self.printed);
        for id in self.failed() {
            let row = self.row(&id);
            let forbidden = row["forbidden"].as_array().cloned().unwrap_or_default();
            if id == first {
                assert!(
                    forbidden.iter().any(|f| f["asked"] == asked),
                    "row {id} names no `{asked}`:\n{}",
                    self.printed
                );
            }
            if !forbidden.is_empty() {
                assert_eq!(row["hint"], "forbidden", "row {id}:\n{}", self.printed);
                assert!(
                    row["seen"].as_str().unwrap_or_default().contains("403 Forbidden"),
                    "{}",
                    self.printed
                );
            }
            assert_ne!(row["hint"], "conflict", "row {id}: no 409 was answered\n{}", self.printed);
        }
    }
}

/// `cargo xtask grade --name LAB --room … ARGS -- COMMAND`: the result handed in to the lab's
/// own cluster (its admin's namespace, `default`), and read back from there.
async fn grade(test: &str, args: &[&str], command: &[&str]) -> Graded {
    grade_with(test, args, command, &[]).await
}

/// [`grade`] with `env` set for xtask.
async fn grade_with(test: &str, args: &[&str], command: &[&str], env: &[(&str, &str)]) -> Graded {
    let lab = lab().await;
    let handed_in: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::default_namespaced(lab.client());
    let _ = handed_in.delete("lab-kit-grade", &Default::default()).await;
    let lang = if args.contains(&"--lang") { &[][..] } else { &["--lang", "en"][..] };
    let cmd = xtask(&["grade", "--name", &lab.file().name])
        .args(lang)
        .arg("--room")
        .path(&lab.file().admin_kubeconfig)
        .args(args)
        .arg("--")
        .args(command);
    let cmd = env.iter().fold(cmd, |cmd, (key, value)| cmd.env(key, value));
    let out = cmd.output().unwrap_or_else(|e| panic!("cannot run `{cmd}`: {e:#}"));
    let printed = format!(
        "{test}: `{cmd}` printed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("{printed}");
    let json = handed_in.get_opt("lab-kit-grade").await.unwrap().and_then(|c| c.data);
    let json = json.and_then(|mut data| data.remove("grade.json"));
    let json = json.and_then(|text| serde_json::from_str(&text).ok()).unwrap_or(Value::Null);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let shown = common::without_cargo(&stderr) + &String::from_utf8_lossy(&out.stdout);
    let graded = Graded { code: out.status.code(), printed, shown, json };
    assert_lab_as_it_was().await;
    graded
}

/// After any grade: the lab's controller runs with its own flags and keeps
/// its ConfigMap, and nothing of the grade's identity is left.
async fn assert_lab_as_it_was() {
    let lab = lab().await;
    assert!(lab.controller_running().await.unwrap(), "the lab's controller is not running");
    labkit::converge::wait_desired(&lab).await.unwrap();
    let accounts: kube::Api<k8s_openapi::api::core::v1::ServiceAccount> =
        kube::Api::namespaced(lab.client(), lab.desired().namespace());
    let left = accounts.get_opt(grader::IDENTITY).await.unwrap();
    assert!(left.is_none(), "the grade's ServiceAccount is still there");
}

async fn course(patch: Option<&str>) -> String {
    let patch = patch.map(|p| project::root().join("xtask/tests/grade").join(format!("{p}.patch")));
    let name = match &patch {
        Some(p) => format!("course-{}", p.file_stem().unwrap().to_string_lossy()),
        None => "course-verbatim".into(),
    };
    let built = go_program(&name, COURSE, patch.as_deref()).unwrap_or_else(|e| panic!("{e:#}"));
    own_copy(&built, &name).await
}

/// This lab's folder for what its grade tests make: the other lab's tests may
/// run at the same time (`cargo maint test`), with programs of the same names.
async fn scratch() -> PathBuf {
    let dir = project::target_dir().join("grade-tests").join(&lab().await.file().name);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `binary` copied into [`scratch`] as `name`: the path a `pgrep -f` finds is this lab's.
async fn own_copy(binary: &std::path::Path, name: &str) -> String {
    let copy = scratch().await.join(name);
    let partial = copy.with_extension("partial");
    std::fs::copy(binary, &partial)
        .unwrap_or_else(|e| panic!("cannot copy {}: {e}", binary.display()));
    std::fs::rename(&partial, &copy).unwrap();
    copy.display().to_string()
}

/// A binary of this workspace, built first.
fn built(args: &[&str], path: &str) -> String {
    cargo(["build"]).args(args).run().unwrap_or_else(|e| panic!("{e:#}"));
    project::target_dir().join(path).display().to_string()
}

#[tokio::test]
#[serial]
async fn the_course_program_verbatim_passes_every_row() {
    let program = course(None).await;
    let started = std::time::Instant::now();
    // It takes -kubeconfig: BuildConfigFromFlags("", "") reads no KUBECONFIG.
    let graded = grade("course", &[], &[&program, "-kubeconfig", "{kubeconfig}"]).await;
    let took = started.elapsed().as_secs_f64();
    graded.assert_passes();
    common::write_sample("grade-course.txt", &graded.shown);
    // Where a passing grade's time goes (docs/grade.md): the hot-loop window, and the rest.
    let window =
        graded.row("hot_loop")["values"]["window"].as_str().unwrap_or_default().to_string();
    let quiet = graded.row("rerun")["values"]["quiet"].as_str().unwrap_or_default().to_string();
    let seconds: f64 = window.trim_end_matches(" s").parse().unwrap_or(0.0);
    common::write_sample(
        "grade-course-time.txt",
        &format!(
            "`cargo xtask grade` of the course's program, passing: {took:.0} s in all\n\
             - the rerun's quiet window and no hot loop's window after it: {window} \
             ({quiet} of quiet, then the provoked events and the course's 30 s resync)\n\
             - everything else: {:.0} s (cargo starting xtask, the borrow, the identity, \
             rows 1-5, the stops, the put-back)\n",
            took - seconds
        ),
    );
}

/// `go run .` in a copy of the course's module: `go run` dies of SIGTERM at
/// once and exits 1 after SIGINT, while the program inside exits 0 — the
/// grader judges the program (grader/src/program/group.rs).
#[tokio::test]
#[serial]
async fn the_course_program_through_go_run_passes_every_row() {
    let command = go_run("course-go-run").await;
    let command: Vec<&str> = command.iter().map(String::as_str).collect();
    let graded = grade("go-run", &[], &command).await;
    graded.assert_passes();
    common::write_sample("grade-go-run.txt", &graded.shown);
}

/// `go run .` in a copy (`name`) of the course's module, built first as `go run` builds it
/// (no -trimpath, as go_program's binaries, whose compiles it shares): the grade's 60 s to
/// connect are then `go run` linking, not compiling client-go on a cold machine.
async fn go_run(name: &str) -> Vec<String> {
    let module = module_copy(name, COURSE).unwrap_or_else(|e| panic!("{e:#}"));
    let module = module.display().to_string();
    Cmd::argv(["go", "-C", &module, "build", "-o"])
        .path(&scratch().await.join(name))
        .arg(".")
        .run_long("building the course's module as `go run` does")
        .unwrap_or_else(|e| panic!("{e:#}"));
    ["go", "-C", &module, "run", ".", "-kubeconfig", "{kubeconfig}"].map(String::from).to_vec()
}

/// my-controller started as a person might: `cargo run` (cargo execs it), by
/// a shell that `exec`s it, by a shell that runs it and waits (the shell dies
/// of the signal after it, or says how it exited) — every row passes each time.
#[tokio::test]
#[serial]
async fn my_controller_passes_every_row_however_it_is_started() {
    let program = built(&["-p", "controller", "--bin", "my-controller"], "debug/my-controller");
    let args = ["--kubeconfig", "{kubeconfig}", "--resync", "1s", "--listen", "127.0.0.1:0"];
    let with_args = |before: &[&str]| -> Vec<String> {
        before.iter().chain(&args).map(|w| w.to_string()).collect()
    };
    let ways = [
        (
            "cargo-run",
            with_args(&["cargo", "run", "-q", "-p", "controller", "--bin", "my-controller", "--"]),
        ),
        ("sh-exec", with_args(&["sh", "-c", r#"exec "$0" "$@""#, &program])),
        (
            "sh-waits",
            with_args(&["sh", "-c", r#""$0" "$@"; echo "my-controller: exit $?""#, &program]),
        ),
    ];
    for (name, command) in ways {
        let command: Vec<&str> = command.iter().map(String::as_str).collect();
        grade(name, &["--resync", "1s"], &command).await.assert_passes();
    }
}

/// Two programs that do everything right but read my-config by polling — the
/// course's with a 1 s ticker of Get for its informer, and curl and jq in a
/// shell loop — fail "watches, not polls" alone, pointed at the informer.
#[tokio::test]
#[serial]
async fn pollers_in_go_and_shell_fail_only_watches_and_point_at_the_informer() {
    let go = course(Some("polls-every-second")).await;
    let graded =
        grade("polls-go", &["--resync", "2s"], &[&go, "-kubeconfig", "{kubeconfig}"]).await;
    graded.assert_fails(&["watches"], "informer");
    assert_eq!(graded.row("watches")["seen_key"], "watches.polled", "{}", graded.printed);
    // A Go binary: its hints say the Go way alone.
    assert_eq!(graded.json["hint_lang"], "go", "{}", graded.printed);
    common::write_sample("grade-polls-go.txt", &graded.shown);
    let script = project::root().join("xtask/tests/grade/polls-every-second.sh");
    let graded =
        grade("polls-sh", &["--resync", "2s"], &["sh", &script.display().to_string()]).await;
    graded.assert_fails(&["watches"], "informer");
    // A shell script: every language's way.
    assert_eq!(graded.json["hint_lang"], "all", "{}", graded.printed);
    common::write_sample("grade-polls-sh.txt", &graded.shown);
}

/// A variant of the course's program, graded with its 2 s resync, in `lang`.
async fn variant(patch: &str, lang: &str) -> Graded {
    let program = course(Some(patch)).await;
    let args = ["--resync", VARIANT_RESYNC, "--lang", lang];
    grade(patch, &args, &[&program, "-kubeconfig", "{kubeconfig}"]).await
}

#[tokio::test]
#[serial]
async fn without_the_kick_only_starts_fails_and_points_at_the_kick() {
    let graded = variant("no-kick", "zh").await;
    graded.assert_fails(&["starts"], "kick");
    common::assert_chinese("cargo xtask grade --lang zh", &graded.shown);
    common::write_sample("grade-no-kick.zh-CN.txt", &graded.shown);
}

#[tokio::test]
#[serial]
async fn writing_when_right_fails_rerun_and_hot_loop() {
    variant("writes-when-right", "en")
        .await
        .assert_fails(&["rerun", "hot_loop"], "no_write_when_right");
}

#[tokio::test]
#[serial]
async fn notfound_as_an_error_fails_every_create_and_points_at_notfound() {
    variant("not-found-is-an-error", "en")
        .await
        .assert_fails(&["starts", "self_heal", "failed_write"], "not_found");
}

#[tokio::test]
#[serial]
async fn exiting_on_the_first_error_fails_the_failed_write() {
    let graded = variant("exits-on-first-error", "en").await;
    // The first run is over: the conflict row, next in it, is not run.
    assert_eq!(graded.failed(), ["failed_write", "conflict"], "{}", graded.printed);
    assert_eq!(graded.row("failed_write")["seen_key"], "exited", "{}", graded.printed);
    assert_eq!(graded.row("failed_write")["hint"], "keep_running", "{}", graded.printed);
    assert_eq!(graded.row("conflict")["seen_key"], "not_run", "{}", graded.printed);
}

/// The conflict row made 20 times in a row (`--conflicts 20`) against the
/// course's program: each of its updates answered 409, each retried.
#[tokio::test]
#[serial]
async fn the_course_program_retries_twenty_conflicts_in_a_row() {
    let program = course(None).await;
    let args = ["--conflicts", "20"];
    let graded = grade("conflicts", &args, &[&program, "-kubeconfig", "{kubeconfig}"]).await;
    graded.assert_passes();
    let row = graded.row("conflict");
    assert_eq!(row["seen_key"], "conflict.pass", "{}", graded.printed);
    assert_eq!(row["values"]["conflicts"], "20", "{}", graded.printed);
}

#[tokio::test]
#[serial]
async fn stopping_on_a_conflict_fails_the_conflict_row_and_points_at_q6() {
    let graded = variant("stops-on-conflict", "en").await;
    graded.assert_fails(&["conflict"], "conflict");
    assert_eq!(graded.row("conflict")["seen_key"], "conflict.not_back", "{}", graded.printed);
}

#[tokio::test]
#[serial]
async fn exiting_on_a_conflict_fails_the_conflict_row_and_points_at_q6() {
    let graded = variant("exits-on-conflict", "en").await;
    graded.assert_fails(&["conflict"], "conflict");
    assert_eq!(graded.row("conflict")["seen_key"], "exited", "{}", graded.printed);
}

/// An update without resourceVersion cannot conflict: the row says so and passes.
#[tokio::test]
#[serial]
async fn an_unconditional_update_cannot_conflict_and_passes() {
    let graded = variant("updates-unconditionally", "en").await;
    graded.assert_passes();
    let row = graded.row("conflict");
    assert_eq!(row["seen_key"], "conflict.cannot_conflict", "{}", graded.printed);
    assert_eq!(row["values"]["method"], "PUT", "{}", graded.printed);
    assert_eq!(row["values"]["status"], "200", "{}", graded.printed);
}

/// Writes on events only (its resync the course's 30 s, which it leaves
/// alone): the events the hot-loop row provokes catch it.
#[tokio::test]
#[serial]
async fn writing_on_every_event_fails_the_hot_loop() {
    let program = course(Some("writes-on-every-event")).await;
    let graded = grade("every-event", &[], &[&program, "-kubeconfig", "{kubeconfig}"]).await;
    graded.assert_fails(&["hot_loop"], "no_write_when_right");
}

/// Writes on resyncs only, a resync a minute — longer than the row's window
/// (the course's 30 s): the relist the row provokes catches it.
#[tokio::test]
#[serial]
async fn writing_on_a_minutely_resync_fails_the_hot_loop() {
    let program = course(Some("writes-on-resync")).await;
    let graded = grade("on-resync", &[], &[&program, "-kubeconfig", "{kubeconfig}"]).await;
    graded.assert_fails(&["hot_loop"], "no_write_when_right");
    let relists =
        graded.row("hot_loop")["values"]["relists"].as_str().unwrap_or_default().to_string();
    assert_ne!(relists, "0", "{}", graded.printed);
}

/// Reads my-config from the API server on each event (the course's ④ broken):
/// it watches, so it is told to read its cache, not to use an informer.
#[tokio::test]
#[serial]
async fn reading_my_config_on_each_event_is_told_to_read_the_cache() {
    let graded = variant("reads-per-event", "en").await;
    graded.assert_fails(&["watches"], "read_cache");
    assert_eq!(graded.row("watches")["seen_key"], "watches.per_event", "{}", graded.printed);
    common::write_sample("grade-reads-per-event.txt", &graded.shown);
}

/// The course's step-2 factory (no namespace) in step 4: its list of every
/// namespace is refused 403 under the course's Role, its cache never syncs.
#[tokio::test]
#[serial]
async fn an_informer_of_every_namespace_is_told_its_list_was_refused() {
    let graded = variant("watches-all-namespaces", "zh").await;
    graded.assert_refused("starts", "list configmaps -A");
    assert_eq!(graded.code, Some(1), "{}", graded.printed);
    common::assert_chinese("cargo xtask grade --lang zh", &graded.shown);
    common::write_sample("grade-all-namespaces.zh-CN.txt", &graded.shown);
}

/// A watch-driven shell program that writes with server-side apply: under the
/// course's Role (no patch) each apply is answered 403, and every failed row
/// says so; with a Role that allows patch (`--role`) it graduates, and the
/// grade says that the Role is not the course's.
#[tokio::test]
#[serial]
async fn server_side_apply_is_refused_by_the_courses_role_and_passes_with_its_own() {
    let script = project::root().join("xtask/tests/grade/applies-server-side.sh");
    let script = script.display().to_string();
    let graded = grade("apply", &["--resync", "2s"], &["sh", &script]).await;
    graded.assert_refused("starts", "patch configmaps/my-config -n default");
    assert_eq!(graded.code, Some(1), "{}", graded.printed);
    common::write_sample("grade-server-side-apply.txt", &graded.shown);
    let role = project::root().join("xtask/tests/grade/role-with-patch.yaml");
    let role = role.display().to_string();
    let graded = grade("apply-role", &["--resync", "2s", "--role", &role], &["sh", &script]).await;
    graded.assert_passes();
    let said = graded.json["role"].as_str().unwrap_or_default().to_string();
    assert!(said.contains(&role) && said.contains("not the course's"), "{said}");
    assert!(said.contains("patch configmaps"), "{said}");
    assert!(graded.shown.contains(&said), "{}", graded.shown);
}

/// Judged as where there is no `/proc` (macOS): `go run` stands for the
/// program, and exits 1 after SIGINT whatever the program did — the clean
/// exit, beyond the course, fails and says why; the course's graduation stands.
#[tokio::test]
#[serial]
async fn without_proc_go_run_is_judged_by_its_own_exit() {
    let command = go_run("course-go-run-no-proc").await;
    let command: Vec<&str> = command.iter().map(String::as_str).collect();
    let graded = grade_with("go-run-no-proc", &[], &command, &[(grader::WITHOUT_PROC, "1")]).await;
    graded.assert_fails(&["clean_exit"], "signals");
    let seen = graded.row("clean_exit")["seen"].as_str().unwrap_or_default().to_string();
    assert!(seen.contains("without /proc"), "{seen}");
}

#[tokio::test]
#[serial]
async fn ignoring_sigterm_fails_the_clean_exit() {
    // In Chinese: how a stop went is said in the reader's language too.
    let graded = variant("ignores-sigterm", "zh").await;
    // Beyond the course: it graduates all the same (exit status 3).
    graded.assert_fails(&["clean_exit"], "signals");
    assert!(graded.shown.contains("阶段 1 毕业"), "{}", graded.shown);
    let row = graded.row("clean_exit");
    assert_eq!(row["values"]["sigterm.kind"], "killed", "{}", graded.printed);
    let seen = row["seen"].as_str().unwrap_or_default().to_string();
    assert!(seen.contains("被强制结束"), "{seen}");
    common::assert_chinese("cargo xtask grade --lang zh", &graded.shown);
}

/// The pages as a learner follows them: page 00's `cargo new` and `cargo
/// add` lines, resolved as a learner's are ([`Network`]: the English
/// project from the registry, the Chinese one offline from the cargo cache,
/// as page 00 says for a room without a network), each step's `src/main.rs`
/// built from its ```rust blocks, in every language; step 4 graded.
#[tokio::test]
#[serial]
async fn the_pages_typed_into_a_fresh_project_pass() {
    let mut step4 = None;
    for language in pages::LANGUAGES {
        let network = if language == "en" { Network::Online } else { Network::Offline };
        let project = fresh_project(language, language, network).await;
        for (page, _) in pages::STEPS {
            let binary = build_step(&project, &pages::main_rs(language, page).unwrap(), network)
                .await
                .unwrap_or_else(|e| panic!("docs/{language}/{page}: {e:#}"));
            step4 = Some(binary);
        }
    }
    // Every language shows the same code, and it is controller/examples/
    // step4_controller.rs (tidy tests): this one grade is all of them.
    let program = step4.unwrap().display().to_string();
    grade("pages", &[], &[&program]).await.assert_passes();
    let log = std::fs::read_to_string(lab_grade_log().await).unwrap();
    common::write_sample("step4_controller.txt", &without_timestamps(&log));
}

/// Step 4 from the pages with a reconcile that panics the first time it
/// corrects (`grade/step4-panics-once.patch`): the panic is a failure like
/// any other, the key reaches `done`, the retry corrects — every row passes.
#[tokio::test]
#[serial]
async fn a_step4_whose_reconcile_panics_once_still_passes() {
    // The English page: its code is the example's, comments and all, which the patch's context is.
    let project = fresh_project("en", "panics-once", Network::Online).await;
    let main_rs = pages::main_rs("en", "04-controller.md").unwrap();
    std::fs::write(project.join("src/main.rs"), main_rs).unwrap();
    let patch = project::root().join("xtask/tests/grade/step4-panics-once.patch");
    Cmd::argv(["git", "apply"])
        .path(&patch)
        .dir(&project)
        .run()
        .unwrap_or_else(|e| panic!("{e:#}"));
    let patched = std::fs::read_to_string(project.join("src/main.rs")).unwrap();
    let binary =
        build_step(&project, &patched, Network::Online).await.unwrap_or_else(|e| panic!("{e:#}"));
    let graded = grade("panics-once", &["--resync", "2s"], &[&binary.display().to_string()]).await;
    graded.assert_passes();
    let log = std::fs::read_to_string(lab_grade_log().await).unwrap();
    assert!(log.contains("a reconcile that panics once"), "it never panicked:\n{log}");
}

/// How a learner's cargo reaches the registry: online, resolving what the
/// `cargo add` lines ask for today; or offline, page 00's way for a room
/// without a network (`--offline` on each `cargo add` and on the build,
/// from the cache the kit's own build filled).
#[derive(Clone, Copy, PartialEq)]
enum Network {
    Online,
    Offline,
}

/// A new project made by page 00's commands in `language`, in a folder of
/// its own (`name`) outside the repository: a project inside the kit's
/// workspace would be taken for a member. Its lock is what those commands
/// resolved, never the kit's; it holds no crate the pages' code has no use
/// for (the workqueue's own minimal dependencies: no kube-derive, schemars).
async fn fresh_project(language: &str, name: &str, network: Network) -> PathBuf {
    let lab = lab().await.file().name.clone();
    let parent = std::env::temp_dir().join("lab-kit-pages").join(lab).join(name);
    let _ = std::fs::remove_dir_all(&parent);
    std::fs::create_dir_all(&parent).unwrap();
    let mut project = parent.clone();
    for command in pages::project_commands(language).unwrap() {
        let new = command.strip_prefix("cargo new ").map(str::trim);
        let dir = if new.is_some() { parent.clone() } else { project.clone() };
        let command = match (network, command.starts_with("cargo add ")) {
            (Network::Offline, true) => format!("{command} --offline"),
            _ => command.clone(),
        };
        // KIT as `eval "$(cargo xtask lab env)"` sets it on page 00.
        Cmd::argv(["sh", "-c", &command])
            .env("KIT", project::root().display().to_string())
            .dir(&dir)
            .run()
            .unwrap_or_else(|e| panic!("docs/{language}/00-prepare.md: {e:#}"));
        if let Some(new) = new {
            project = parent.join(new);
        }
    }
    let lock = std::fs::read_to_string(project.join("Cargo.lock")).unwrap();
    for unneeded in ["kube-derive", "schemars"] {
        let entry = format!("name = \"{unneeded}\"");
        assert!(!lock.contains(&entry), "{}: {unneeded} is in the project", project.display());
    }
    project
}

/// `main_rs` as the project's `src/main.rs`, built (`--offline` for an
/// offline project) with a build directory that outlives the run; the
/// binary, copied into [`scratch`]. Every project's binary has the page's
/// name there, so the other lab's tests wait for the copy (a lock) before
/// they build over it.
async fn build_step(
    project: &std::path::Path,
    main_rs: &str,
    network: Network,
) -> anyhow::Result<PathBuf> {
    let target = project::target_dir().join("pages-target");
    std::fs::create_dir_all(&target)?;
    let lock = std::fs::File::create(target.join("build.lock"))?;
    let turn = tokio::task::spawn_blocking(move || lock.lock().map(|()| lock)).await??;
    std::fs::write(project.join("src/main.rs"), main_rs)?;
    let offline = (network == Network::Offline).then_some("--offline");
    Cmd::argv(["cargo", "build"])
        .args(offline)
        .env("CARGO_TARGET_DIR", target.display().to_string())
        .dir(project)
        .run()?;
    let folder = project.parent().and_then(|p| p.file_name()).unwrap().to_string_lossy();
    let binary = target.join("debug").join(project.file_name().unwrap());
    let copy = own_copy(&binary, &format!("pages-{folder}")).await;
    drop(turn);
    Ok(PathBuf::from(copy))
}

#[tokio::test]
#[serial]
async fn a_program_that_is_not_there_is_refused_before_the_lab_is_touched() {
    let graded = grade("missing", &[], &["./no/such/program"]).await;
    assert_eq!(graded.code, Some(2), "{}", graded.printed);
    assert!(graded.printed.contains("./no/such/program: no such file"), "{}", graded.printed);
    assert!(!graded.printed.contains("$ "), "nothing may run: {}", graded.printed);
}

#[tokio::test]
#[serial]
async fn a_program_that_exits_at_once_is_refused_with_what_it_printed() {
    // In Chinese: the refusal is, the program's own (English) lines are set off as its.
    let (args, program) =
        (["--lang", "zh"], ["sh", "-c", "echo cannot find my kubeconfig; exit 3"]);
    let graded = grade("exits-at-once", &args, &program).await;
    assert_eq!(graded.code, Some(2), "{}", graded.printed);
    assert!(graded.printed.contains("一启动就退出了（退出码 3）"), "{}", graded.printed);
    assert!(graded.printed.contains("  | cannot find my kubeconfig"), "{}", graded.printed);
    assert!(graded.json["refused"].is_string(), "the JSON says why: {}", graded.json);
    common::assert_chinese("cargo xtask grade --lang zh", &graded.shown);
}

#[tokio::test]
#[serial]
async fn a_program_that_never_connects_is_refused_and_stopped() {
    // A script of this lab's own, so that `pgrep -f` finds no other lab's.
    let script = scratch().await.join("never-connects.sh");
    std::fs::write(&script, "echo waiting for nothing\nsleep 600\n").unwrap();
    let script = script.display().to_string();
    let graded = grade("never-connects", &["--connect-within", "3s"], &["sh", &script]).await;
    assert_eq!(graded.code, Some(2), "{}", graded.printed);
    assert!(graded.printed.contains("nothing within 3 s"), "{}", graded.printed);
    assert!(graded.printed.contains("waiting for nothing"), "{}", graded.printed);
    assert!(!Cmd::argv(["pgrep", "-f", &script]).succeeds(), "the program was left running");
}

#[tokio::test]
#[serial]
async fn ctrl_c_stops_the_program_and_puts_the_lab_back() {
    let program = course(Some("ignores-sigterm")).await;
    let name = lab().await.file().name.clone();
    let xtask_binary = project::target_dir().join("debug/xtask");
    let cmd = Cmd::new(xtask_binary.display().to_string())
        .args(["grade", "--name", &name, "--resync", VARIANT_RESYNC, "--"])
        .args([program.as_str(), "-kubeconfig", "{kubeconfig}"]);
    let log = scratch().await.join("interrupted.log");
    let _ = std::fs::remove_file(&log);
    // An earlier test's program log would say "under way" before this grade has
    // started (and set its signal handlers): SIGINT then kills it silently.
    let program_log = lab_grade_log().await;
    let _ = std::fs::remove_file(&program_log);
    let mut child = cmd.spawn_to_log(&log).unwrap();
    // Interrupted once the rows are under way: the program has made my-config.
    let lab = lab().await;
    eventually("the grade to be under way", Duration::from_secs(120), || async {
        let text = std::fs::read_to_string(&program_log).unwrap_or_default();
        Ok(if text.contains("创建中") { Check::Done(()) } else { Check::NotYet(text) })
    })
    .await
    .unwrap();
    let pid = child.id() as libc::pid_t;
    let (status, printed) = common::interrupt(&mut child, pid, &log).await;
    assert!(!status.success(), "an interrupted grade must not pass:\n{printed}");
    assert!(printed.contains("interrupted"), "{printed}");
    assert!(!Cmd::argv(["pgrep", "-f", &program]).succeeds(), "the program was left running");
    drop(lab);
    assert_lab_as_it_was().await;
}

async fn lab_grade_log() -> PathBuf {
    lab().await.file().state_dir.join("grade/program.log")
}

/// The log without its timestamps, as docs/samples shows logs.
fn without_timestamps(log: &str) -> String {
    log.lines().map(|line| format!("{}\n", e2e::examples::without_timestamp(line))).collect()
}

/// The grade's proxy answers the graded program alone: a request without the
/// secret path of the program's kubeconfig (another process on the machine)
/// or with another Host (a web page) gets 403, the program's own 200.
#[tokio::test]
#[serial]
async fn the_proxy_answers_only_the_graded_program() {
    let script = project::root().join("xtask/tests/grade/probes-the-proxy.sh");
    let codes = scratch().await.join("proxy-codes");
    let _ = std::fs::remove_file(&codes);
    let (script, out) = (script.display().to_string(), codes.display().to_string());
    grade("probes-the-proxy", &[], &["sh", &script, &out]).await;
    let codes = std::fs::read_to_string(&codes).unwrap_or_default();
    assert_eq!(codes.trim(), "403 403 200", "outsider, another Host, the program");
}
