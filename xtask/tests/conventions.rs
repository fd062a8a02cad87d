//! The CLI's conventions (docs/output.md), on the built `cargo xtask` binary
//! with its stdout and stderr apart: results on stdout, progress on stderr,
//! `-q`, `-o json`, kubectl's flag names, one line for a bad value. No lab:
//! `doctor --provider envtest` only looks at this machine.

use std::process::Output;

use labkit::command::Cmd;

fn command(args: &[&str]) -> Cmd {
    Cmd::new(env!("CARGO_BIN_EXE_xtask")).args(args).env_remove("NO_COLOR")
}

fn xtask(args: &[&str]) -> Output {
    command(args).output().expect("the xtask binary runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn doctor_puts_its_checks_on_stdout_and_the_commands_it_runs_on_stderr() {
    let ran = xtask(&["doctor", "--provider", "envtest"]);
    let (stdout, stderr) = (text(&ran.stdout), text(&ran.stderr));
    assert!(stdout.contains("checks: ") && stdout.contains("rustc"), "stdout:\n{stdout}");
    assert!(!stdout.contains("$ "), "a command echo on stdout:\n{stdout}");
    assert!(stderr.contains("$ rustc --version"), "stderr:\n{stderr}");
}

#[test]
fn quiet_leaves_the_result_and_drops_the_progress() {
    // Both runs see the same network: none (a proxy that refuses at once), so no probe's
    // timing or luck can tell them apart.
    let offline = |args: &[&str]| {
        let mut cmd = command(args);
        for var in ["no_proxy", "NO_PROXY"] {
            cmd = cmd.env_remove(var);
        }
        for var in ["http_proxy", "https_proxy", "HTTPS_PROXY", "ALL_PROXY"] {
            cmd = cmd.env(var, "http://127.0.0.1:1");
        }
        cmd.output().expect("the xtask binary runs")
    };
    let loud = offline(&["doctor", "--provider", "envtest"]);
    let quiet = offline(&["-q", "doctor", "--provider", "envtest"]);
    assert_eq!(quiet.status.code(), loud.status.code());
    let stderr = text(&quiet.stderr);
    assert!(stderr.is_empty(), "-q still printed progress:\n{stderr}");
    let (loud, quiet) = (text(&loud.stdout), text(&quiet.stdout));
    // The free disk may move between the two runs; every other line is the same.
    let lines = |s: &str| -> Vec<String> {
        s.lines().filter(|l| !l.contains("free disk")).map(str::to_string).collect()
    };
    assert_eq!(lines(&quiet), lines(&loud));
}

#[test]
fn doctor_json_is_one_documented_document_on_stdout() {
    let ran = xtask(&["doctor", "--provider", "envtest", "-o", "json"]);
    let stdout = text(&ran.stdout);
    let document: serde_json::Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("stdout is not one JSON document ({e}):\n{stdout}"));
    assert_eq!(document["schema"], "lab-kit/doctor/v1");
    labkit::json_doc::assert_documented(&document);
    // The exit status says what the document says.
    assert_eq!(ran.status.success(), document["failed"] == 0, "{stdout}");
    // The header line is progress here, not part of the document.
    assert!(text(&ran.stderr).contains("checking this machine"));
}

#[test]
fn lab_status_json_of_a_lab_that_is_not_up() {
    let ran = xtask(&["lab", "status", "--name", "no-such-lab-here", "--output", "json"]);
    assert!(!ran.status.success());
    let document: serde_json::Value = serde_json::from_slice(&ran.stdout).expect("JSON");
    assert_eq!(
        (document["state"].as_str(), document["healthy"].as_bool()),
        (Some("absent"), Some(false))
    );
    labkit::json_doc::assert_documented(&document);
}

/// A refused value: one `error:` line naming what to type instead, exit status 2 (clap's
/// usage lines may follow it), nothing on stdout.
fn refused(args: &[&str], says: &str) {
    let ran = xtask(args);
    let stderr = text(&ran.stderr);
    assert_eq!(ran.status.code(), Some(2), "{args:?}:\n{stderr}");
    assert!(ran.stdout.is_empty(), "{args:?} printed on stdout");
    let first = stderr.lines().next().unwrap_or_default();
    assert!(first.starts_with("error: ") && first.contains(says), "{args:?}: {first}");
}

#[test]
fn old_flag_names_are_refused_with_kubectls() {
    refused(&["room", "up", "--attendees", "2", "--token-hours", "8"], "--duration 8h");
    refused(&["room", "up", "--attendees", "2", "--duration", "49h"], "1h..48h");
    refused(&["room", "up", "--attendees", "2", "--duration", "8 hours"], "use ms, s, m or h");
    refused(&["doctor", "-o", "yaml"], "invalid value 'yaml'");
}

#[test]
fn help_wraps_at_the_terminals_width() {
    let ran = Cmd::new(env!("CARGO_BIN_EXE_xtask"))
        .args(["grade", "--help"])
        .env("COLUMNS", "60")
        .output()
        .unwrap();
    let help = text(&ran.stdout);
    let widest = help.lines().map(|l| l.chars().count()).max().unwrap_or(0);
    assert!(widest <= 60, "a help line of {widest} columns at COLUMNS=60:\n{help}");
}

/// `cargo xtask ARGS` on a terminal (a pseudo-terminal for its stdout and
/// stderr, openpty(3)): what it printed there.
async fn on_a_terminal(args: &[&str], no_color: Option<&str>) -> String {
    use std::io::Read;
    use std::os::fd::{FromRawFd, OwnedFd};
    let (mut leader, mut follower) = (0, 0);
    // SAFETY: two out-pointers to ints; no name, default terminal settings and size.
    let made = unsafe {
        libc::openpty(
            &mut leader,
            &mut follower,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(made, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: both descriptors were just opened for this test and are owned here only.
    let (mut leader, follower) =
        unsafe { (std::fs::File::from_raw_fd(leader), OwnedFd::from_raw_fd(follower)) };
    // A terminal that says what it is (the Nix sandbox, and CI, set no TERM, and with
    // none clap takes the terminal for a dumb one), and no colour forced either way.
    let mut cmd = Cmd::new(env!("CARGO_BIN_EXE_xtask"))
        .args(args)
        .env("TERM", "xterm-256color")
        .env_remove("NO_COLOR")
        .env_remove("CLICOLOR")
        .env_remove("CLICOLOR_FORCE");
    if let Some(v) = no_color {
        cmd = cmd.env("NO_COLOR", v);
    }
    let mut child = cmd.spawn(follower.try_clone().unwrap(), follower).unwrap();
    let status = child.wait().await.expect("the xtask binary runs");
    assert!(!status.success(), "{args:?} was meant to be refused");
    // The follower's last copy went with the spawn: the leader reads what is left, then EIO.
    let mut printed = Vec::new();
    let mut chunk = [0u8; 4096];
    while let Ok(n @ 1..) = leader.read(&mut chunk) {
        printed.extend_from_slice(&chunk[..n]);
    }
    text(&printed)
}

/// clap's error is coloured on a terminal, and not under NO_COLOR nor into a pipe
/// (the kit's own lines have no colour at all).
#[tokio::test]
async fn colour_only_on_a_terminal_and_never_under_no_color() {
    let bad = ["doctor", "--provider", "nope"];
    let escape = '\u{1b}';
    let coloured = on_a_terminal(&bad, None).await;
    assert!(
        coloured.contains(escape),
        "no colour on a terminal, so this test proves nothing: {coloured:?}"
    );
    let plain = on_a_terminal(&bad, Some("1")).await;
    assert!(plain.contains("error:") && !plain.contains(escape), "NO_COLOR=1: {plain:?}");
    let piped = xtask(&bad);
    let all = text(&piped.stdout) + &text(&piped.stderr);
    assert!(all.contains("error:") && !all.contains(escape), "into a pipe: {all:?}");
}

/// An `up` of another provider on a name whose unfinished `up` left only its
/// record (a kind cluster, objects on someone's cluster) is refused before it
/// touches the folder: cleaning it would lose what the record names.
#[test]
fn up_of_another_provider_keeps_an_unfinished_labs_record() {
    use labkit::record::Record;
    let name = "conventions-unfinished-kind";
    let dir = labkit::project::lab_dir(name);
    let _ = std::fs::remove_dir_all(&dir);
    Record::open(&dir, name, Some("kind")).unwrap().save().unwrap();
    let ran = xtask(&["lab", "up", "--provider", "envtest", "--name", name]);
    let stderr = text(&ran.stderr);
    let kept = Record::load(&dir).unwrap().and_then(|r| r.provider);
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(!ran.status.success(), "lab up succeeded:\n{stderr}");
    assert!(stderr.contains(&format!("lab {name} is on provider kind")), "{stderr}");
    assert_eq!(kept.as_deref(), Some("kind"), "the record is gone:\n{stderr}");
}
