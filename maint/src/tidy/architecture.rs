//! ARCHITECTURE.md against the workspace: its map names every crate and
//! top-level folder, and each crate's `Uses:` line is what its Cargo.toml
//! depends on (its invariants over the sources: invariants.rs).

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

/// The suites are tests only: a crate may have `e2e` among its dev-dependencies
/// (its tests), never among its dependencies.
#[test]
fn no_crate_but_the_tests_depends_on_the_suites() {
    let members = members();
    let users: Vec<&String> =
        members.iter().filter(|m| uses(m, &members).contains("e2e")).collect();
    assert!(users.is_empty(), "these crates depend on e2e outside their tests: {users:?}");
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

#[test]
fn the_map_checks_catch_what_they_are_for() {
    let map = "### `a/`\n\nHolds a.\nUses: `b` (for x),\n`c`.\n`d` is not used.\n\n### `b/`\nUses: nothing.\n";
    assert_eq!(said_to_use(map, "a"), Some(["b".into(), "c".into()].into()));
    assert_eq!(said_to_use(map, "b"), Some(BTreeSet::new()));
    assert_eq!(said_to_use(map, "d"), None);
}

/// The modules `source` declares (`mod x;`, `pub mod x;`), tests' apart.
fn declared(source: &str) -> BTreeSet<String> {
    let parsed = syn::parse_file(source).unwrap_or_else(|e| panic!("does not parse: {e}"));
    let items = parsed.items.iter().filter(|item| !super::modules::is_test_only(item));
    items
        .filter_map(|item| match item {
            syn::Item::Mod(m) => Some(m.ident.to_string()),
            _ => None,
        })
        .collect()
}

/// The modules the `//! | module | holds |` table of `source` lists (the
/// `` [`x`] `` links of each row's first cell), if it has one.
fn tabled(source: &str) -> Option<BTreeSet<String>> {
    let rows: Vec<&str> = source.lines().filter_map(|l| l.strip_prefix("//! |")).collect();
    let header = rows.first()?;
    header.trim_start().starts_with("module").then_some(())?;
    let cells = rows.iter().skip(2).filter_map(|row| row.split('|').next());
    let names = cells.flat_map(|cell| cell.split("[`").skip(1).filter_map(|n| n.split_once("`]")));
    Some(names.map(|(name, _)| name.to_string()).collect())
}

/// What is wrong with `file`'s module table: missing while it declares
/// modules (a crate root), or not the modules it declares.
fn table_wrong(file: &str, source: &str, root: bool) -> Option<String> {
    let declared = declared(source);
    match tabled(source) {
        None if root && !declared.is_empty() => Some(format!("{file}: no module table")),
        None => None,
        Some(tabled) if tabled == declared => None,
        Some(tabled) => Some(format!(
            "{file}: declared but not in its table {:?}; in its table but not declared {:?}",
            declared.difference(&tabled).collect::<Vec<_>>(),
            tabled.difference(&declared).collect::<Vec<_>>()
        )),
    }
}

/// Each crate root (`src/lib.rs`, `src/main.rs`) has a table of the modules it
/// declares, and so does every other file with one; the map names each root's.
#[test]
fn every_module_is_in_its_crates_table_and_the_map_points_there() {
    let map = read(MAP);
    let members = members();
    let roots: Vec<String> = members
        .iter()
        .flat_map(|m| ["lib.rs", "main.rs"].map(|r| format!("{m}/src/{r}")))
        .filter(|f| TRACKED.contains(f))
        .collect();
    let mut wrong: Vec<String> = TRACKED
        .iter()
        .filter(|f| f.ends_with(".rs"))
        .filter_map(|f| table_wrong(f, &read(f), roots.contains(f)))
        .collect();
    for root in roots.iter().filter(|r| tabled(&read(r)).is_some()) {
        let member = root.split('/').next().unwrap_or_default();
        let section = map.split(&format!("### `{member}/`")).nth(1).unwrap_or_default();
        if !section.split("\n#").next().unwrap_or_default().contains(&format!("`{root}`")) {
            wrong.push(format!("{MAP}: the section of {member}/ does not name {root}"));
        }
    }
    assert!(wrong.is_empty(), "module tables:\n{}", wrong.join("\n"));
}

#[test]
fn the_table_check_finds_a_module_left_out() {
    let source = "//! Holds.\n//!\n//! | module | holds |\n//! |---|---|\n\
                  //! | [`a`], [`b`] | a and b, not [`c`] |\n//! | [`gone`] | x |\n\
                  mod a;\npub mod b;\npub mod pace;\n#[cfg(test)]\nmod tests;\n";
    let wrong = table_wrong("lib.rs", source, true).unwrap();
    assert!(
        wrong.contains(r#"table ["pace"]"#) && wrong.ends_with(r#"declared ["gone"]"#),
        "{wrong}"
    );
    assert_eq!(table_wrong("lib.rs", "mod a;", true).unwrap(), "lib.rs: no module table");
    assert_eq!(table_wrong("x.rs", "mod a;", false), None);
    let fixed = source.replace("[`gone`]", "[`pace`]");
    assert_eq!(table_wrong("lib.rs", &fixed, true), None);
}
