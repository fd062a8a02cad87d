//! The pages a learner types from cannot drift from what the kit tests:
//! each step's ```rust blocks are its example file, whole, in every
//! language; page 00's `cargo add` lines pin the versions of `Cargo.lock`
//! and the Kubernetes minor of the kit. (xtask/tests/grade.rs builds the
//! pages' code in a fresh project and grades step 4.)

use e2e::pages::{self, LANGUAGES, STEPS};

#[test]
fn every_step_page_shows_its_example_whole_in_every_language() {
    for language in LANGUAGES {
        for (page, example) in STEPS {
            let shown = pages::main_rs(language, page).unwrap_or_else(|e| panic!("{e:#}"));
            let file = std::fs::read_to_string(pages::example(example)).unwrap();
            assert!(
                shown == file,
                "docs/{language}/{page}: its ```rust blocks, joined by a blank line, must be \
                 controller/examples/{example}.rs as it is"
            );
        }
    }
}

#[test]
fn every_language_makes_the_same_project() {
    let [first, rest @ ..] = LANGUAGES;
    let expected = pages::project_commands(first).unwrap();
    for language in rest {
        assert_eq!(pages::project_commands(language).unwrap(), expected, "docs/{language}/00");
    }
}

#[test]
fn the_cargo_add_lines_pin_the_versions_the_kit_is_built_with() {
    let lock = super::read("Cargo.lock");
    let commands = pages::project_commands("en").unwrap();
    let pinned = pages::pinned_versions(&commands);
    assert!(pinned.len() >= 7, "{commands:?}");
    for (name, version) in pinned {
        let entry = format!("[[package]]\nname = \"{name}\"\nversion = \"{version}\"\n");
        assert!(
            lock.contains(&entry),
            "cargo add {name}@{version}: Cargo.lock has another version"
        );
    }
    let feature = format!("--features v1_{}", controller::version::target_minor());
    assert!(
        commands.iter().any(|c| c.starts_with("cargo add k8s-openapi@") && c.ends_with(&feature)),
        "k8s-openapi must be added with {feature}: {commands:?}"
    );
}
