//! The pages a learner types from cannot drift from what the kit tests:
//! each step's ```rust blocks are its example file, whole — the English
//! pages as it is, the Chinese ones with their comments in Chinese (the
//! course's "注释即讲解") and otherwise the same code, line for line; each
//! block is whole items (no `impl` opened in one block and closed in the
//! next); page 00's `cargo add` lines pin the versions of `Cargo.lock` and
//! the Kubernetes minor of the kit. (xtask/tests/grade.rs builds the pages'
//! code in a fresh project and grades step 4.)

mod comments;

use comments::{Source, is_chinese};
use e2e::pages::{self, LANGUAGES, STEPS};

/// The pages whose code blocks keep the example's comments as they are.
const VERBATIM: &str = "en";

fn example(example: &str) -> String {
    std::fs::read_to_string(pages::example(example)).unwrap()
}

#[test]
fn every_english_step_page_shows_its_example_whole() {
    for (page, example_name) in STEPS {
        let shown = pages::main_rs(VERBATIM, page).unwrap_or_else(|e| panic!("{e:#}"));
        assert!(
            shown == example(example_name),
            "docs/{VERBATIM}/{page}: its ```rust blocks, joined by a blank line, must be \
             controller/examples/{example_name}.rs as it is"
        );
    }
}

#[test]
fn every_other_step_page_shows_its_example_with_chinese_comments() {
    for language in LANGUAGES.into_iter().filter(|l| *l != VERBATIM) {
        for (page, example_name) in STEPS {
            let shown = pages::main_rs(language, page).unwrap_or_else(|e| panic!("{e:#}"));
            let parse = |text: &str| {
                Source::parse(text).unwrap_or_else(|e| panic!("docs/{language}/{page}: {e}"))
            };
            let (shown, file) = (parse(&shown), parse(&example(example_name)));
            let (code, expected) = (shown.code(), file.code());
            let differs = code.iter().zip(&expected).position(|(a, b)| a != b);
            assert!(
                code == expected,
                "docs/{language}/{page}: its code without comments must be \
                 controller/examples/{example_name}.rs's; the first line that differs \
                 ({}):\n  page:    {:?}\n  example: {:?}",
                differs
                    .map_or("one has more lines".to_string(), |n| format!("code line {}", n + 1)),
                differs.and_then(|n| code.get(n)).or(code.get(expected.len())),
                differs.and_then(|n| expected.get(n)).or(expected.get(code.len())),
            );
            let english: Vec<String> =
                shown.comments().into_iter().filter(|c| !is_chinese(c)).collect();
            assert!(
                english.is_empty(),
                "docs/{language}/{page}: comments not in Chinese: {english:#?}"
            );
        }
    }
}

#[test]
fn every_rust_block_of_a_step_page_is_whole_items() {
    for language in LANGUAGES {
        for (page, _) in STEPS {
            let text = std::fs::read_to_string(pages::page(language, page)).unwrap();
            for (n, block) in pages::blocks(&text, "rust").iter().enumerate() {
                let parsed = syn::parse_file(block);
                assert!(
                    parsed.is_ok(),
                    "docs/{language}/{page}: ```rust block {} is not whole items (a learner \
                     reads each block as one piece): {}",
                    n + 1,
                    parsed.err().map(|e| e.to_string()).unwrap_or_default()
                );
            }
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
