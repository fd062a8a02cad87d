//! The course pages a learner types from (docs/zh-CN/0N-*.md and docs/en/),
//! read as the learner reads them: page 00's `cargo new` and `cargo add`
//! lines make the project, and each step's ```rust blocks, in order, are its
//! whole `src/main.rs`. The step examples are those files (a tidy test: the
//! English pages as they are, the Chinese ones with Chinese comments), and
//! xtask/tests/grade.rs builds them from the pages and grades step 4.

use std::path::PathBuf;

use labkit::project;

/// The languages of the pages, by folder under docs/.
pub const LANGUAGES: [&str; 2] = ["zh-CN", "en"];

/// Each step: its page's file name, and the example that holds its code.
pub const STEPS: [(&str, &str); 4] = [
    ("01-list-pods.md", "step1_list_pods"),
    ("02-informer.md", "step2_watch_pods"),
    ("03-workqueue.md", "step3_queue"),
    ("04-controller.md", "step4_controller"),
];

/// The page that makes the project.
pub const PREPARE: &str = "00-prepare.md";

/// `docs/<language>/<page>`.
pub fn page(language: &str, page: &str) -> PathBuf {
    project::root().join("docs").join(language).join(page)
}

/// `controller/examples/<example>.rs`.
pub fn example(example: &str) -> PathBuf {
    project::root().join("controller/examples").join(format!("{example}.rs"))
}

/// The page's fenced blocks of `language` (the word after the fence), in order.
pub fn blocks(text: &str, language: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<(bool, String)> = None;
    for line in text.lines() {
        if let Some(info) = line.trim_start().strip_prefix("```") {
            current = match current.take() {
                Some((wanted, block)) => {
                    if wanted {
                        blocks.push(block);
                    }
                    None
                }
                None => Some((info.split_whitespace().next() == Some(language), String::new())),
            };
            continue;
        }
        if let Some((_, block)) = current.as_mut() {
            block.push_str(line);
            block.push('\n');
        }
    }
    blocks
}

/// A step's `src/main.rs`: its page's ```rust blocks, one after the other
/// with a blank line between.
pub fn main_rs(language: &str, step_page: &str) -> anyhow::Result<String> {
    let blocks = blocks(&labkit::files::read(&page(language, step_page))?, "rust");
    anyhow::ensure!(!blocks.is_empty(), "docs/{language}/{step_page} has no ```rust block");
    Ok(blocks.join("\n"))
}

/// Page 00's lines that make the project, as a learner types them:
/// `cargo new …` and `cargo add …` (from its ```sh blocks, split at `&&`).
pub fn project_commands(language: &str) -> anyhow::Result<Vec<String>> {
    let text = labkit::files::read(&page(language, PREPARE))?;
    let commands: Vec<String> = blocks(&text, "sh")
        .iter()
        .flat_map(|block| block.lines().map(str::to_string).collect::<Vec<_>>())
        .map(|line| line.split(" #").next().unwrap_or_default().trim().to_string())
        .flat_map(|line| line.split("&&").map(|c| c.trim().to_string()).collect::<Vec<_>>())
        .filter(|c| c.starts_with("cargo new ") || c.starts_with("cargo add "))
        .collect();
    anyhow::ensure!(
        commands.iter().any(|c| c.starts_with("cargo new ")),
        "docs/{language}/{PREPARE} shows no `cargo new`"
    );
    Ok(commands)
}

/// The `NAME@VERSION` pairs of `cargo add` commands.
pub fn pinned_versions(commands: &[String]) -> Vec<(String, String)> {
    commands
        .iter()
        .filter(|c| c.starts_with("cargo add "))
        .flat_map(|c| c.split_whitespace().skip(2).map(str::to_string).collect::<Vec<_>>())
        .filter(|word| !word.starts_with('-') && !word.starts_with('"'))
        .filter_map(|word| word.split_once('@').map(|(n, v)| (n.to_string(), v.to_string())))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_of_one_language_in_order() {
        let page = "text\n```rust\nfn a() {}\n```\nmore\n```sh\nls\n```\n```rust\nfn b() {}\n```\n";
        assert_eq!(blocks(page, "rust"), ["fn a() {}\n", "fn b() {}\n"]);
        assert_eq!(blocks(page, "sh"), ["ls\n"]);
    }

    #[test]
    fn versions_of_cargo_add_lines() {
        let commands = vec![
            "cargo add kube@5.0.0 --features runtime".to_string(),
            "cargo add futures@0.3.34 anyhow@1.0.105".to_string(),
            "cargo add workqueue --path \"$KIT/workqueue\"".to_string(),
        ];
        assert_eq!(
            pinned_versions(&commands),
            [("kube", "5.0.0"), ("futures", "0.3.34"), ("anyhow", "1.0.105")]
                .map(|(n, v)| (n.to_string(), v.to_string()))
        );
    }
}
