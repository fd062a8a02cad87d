//! ARCHITECTURE.md against the workspace: its map names every crate and
//! top-level folder, and each crate's `Uses:` line is what its Cargo.toml
//! depends on; two of its invariants (one command runner, one poller) are
//! checked over the sources.

use std::collections::BTreeSet;

use super::{docs::TRACKED, read};

const MAP: &str = "ARCHITECTURE.md";
/// rust-analyzer's rule for its own: short enough to be read first.
const MAX_LINES: usize = 150;

/// The workspace's members, from the root Cargo.toml.
pub(super) fn members() -> Vec<String> {
    let root: toml::Table = toml::from_str(&read("Cargo.toml")).expect("Cargo.toml parses");
    root["workspace"]["members"]
        .as_array()
        .expect("workspace.members")
        .iter()
        .map(|m| m.as_str().expect("a member is a path").to_string())
        .collect()
}

/// The members `member`'s `[dependencies]` name (dev-dependencies are tests').
fn uses(member: &str, members: &[String]) -> BTreeSet<String> {
    let manifest: toml::Table =
        toml::from_str(&read(&format!("{member}/Cargo.toml"))).expect("a member's Cargo.toml");
    manifest
        .get("dependencies")
        .and_then(toml::Value::as_table)
        .map(|deps| deps.keys().filter(|d| members.contains(d)).cloned().collect())
        .unwrap_or_default()
}

/// The backticked names of the `Uses:` sentence (it may wrap) in the map's
/// section for `member`.
fn said_to_use(map: &str, member: &str) -> Option<BTreeSet<String>> {
    let section = map.split(&format!("### `{member}/`")).nth(1)?.split("\n#").next()?;
    let sentence = section.split("Uses:").nth(1)?.split(".\n").next()?;
    Some(sentence.split('`').skip(1).step_by(2).map(str::to_string).collect())
}

#[test]
fn the_architecture_map_names_every_crate_and_its_uses() {
    let map = read(MAP);
    let lines = map.lines().count();
    println!("{MAP}: {lines} lines (at most {MAX_LINES})");
    assert!(lines <= MAX_LINES, "{MAP} has {lines} lines, more than {MAX_LINES}");
    let members = members();
    for member in &members {
        let said = said_to_use(&map, member).unwrap_or_else(|| {
            panic!("{MAP} has no section \"### `{member}/`\" with a `Uses:` line")
        });
        let real = uses(member, &members);
        assert_eq!(said, real, "{MAP}: what {member} uses (left) is not its Cargo.toml's (right)");
    }
    let folders: BTreeSet<&str> = TRACKED
        .iter()
        .filter_map(|f| f.split_once('/').map(|(top, _)| top))
        .filter(|top| !top.starts_with('.') || *top == ".ci")
        .collect();
    for folder in folders {
        assert!(map.contains(&format!("`{folder}/")), "{MAP} does not name the folder {folder}/");
    }
}

/// Tracked Rust files whose lines contain `needle`, but for `allowed`.
fn found(needle: &str, allowed: &[&str]) -> Vec<String> {
    TRACKED
        .iter()
        .filter(|f| f.ends_with(".rs") && !allowed.contains(&f.as_str()))
        .filter(|f| read(f).contains(needle))
        .cloned()
        .collect()
}

#[test]
fn every_process_is_started_by_the_one_runner() {
    // Spelled in two parts so that this file does not name it.
    let needle = ["Command", "::new("].concat();
    let allowed = [
        "labkit/src/command.rs",
        // The controller's own tests of its binary: the controller cannot use
        // the harness, which depends on it.
        "controller/tests/bad_input.rs",
        "controller/tests/shutdown.rs",
    ];
    let elsewhere = found(&needle, &allowed);
    assert!(elsewhere.is_empty(), "processes started outside the runner: {elsewhere:?}");
}

#[test]
fn waits_go_through_the_one_poller() {
    let needle = ["sleep", "("].concat();
    let allowed = [
        "labkit/src/eventually.rs",
        // Samples /healthz and /readyz over a window to assert they stay as
        // they are: an invariant over time, not a wait for a state.
        "e2e/src/faults/control_plane.rs",
        // `lab logs -f` follows a growing file, as `tail -f` does.
        "xtask/src/lab/envtest/logs.rs",
    ];
    let harness = |f: &String| ["e2e/", "xtask/"].iter().any(|c| f.starts_with(c));
    let elsewhere: Vec<String> = found(&needle, &allowed).into_iter().filter(harness).collect();
    assert!(elsewhere.is_empty(), "waits outside labkit/src/eventually.rs: {elsewhere:?}");
}

#[test]
fn the_map_checks_catch_what_they_are_for() {
    let map = "### `a/`\n\nHolds a.\nUses: `b` (for x),\n`c`.\n`d` is not used.\n\n### `b/`\nUses: nothing.\n";
    assert_eq!(said_to_use(map, "a"), Some(["b".into(), "c".into()].into()));
    assert_eq!(said_to_use(map, "b"), Some(BTreeSet::new()));
    assert_eq!(said_to_use(map, "d"), None);
}
