//! Sizes, measured and printed: no source file over [`MAX_FILE_LINES`] lines
//! (its tests apart), so that a module stays something a person reads whole.

use std::path::Path;

use super::{docs::TRACKED, read};

/// The most lines a source file may have before its `#[cfg(test)]` module.
const MAX_FILE_LINES: usize = 500;

/// A file that is tests only: under a `tests/` folder, a `tests.rs`, or a
/// module that is `#![cfg(test)]` (itself, or the folder's `mod.rs`).
fn tests_only(file: &str) -> bool {
    let test_module = |f: &str| read(f).contains("#![cfg(test)]");
    let folder_module = Path::new(file).parent().map(|d| d.join("mod.rs"));
    file.contains("/tests/")
        || file.ends_with("/tests.rs")
        || test_module(file)
        || folder_module.is_some_and(|m| {
            let m = m.to_string_lossy();
            TRACKED.iter().any(|f| f == m.as_ref()) && test_module(&m)
        })
}

/// Lines before the file's `#[cfg(test)]` module (all of them without one).
fn code_lines(text: &str) -> usize {
    text.lines().take_while(|line| !line.starts_with("#[cfg(test)]")).count()
}

#[test]
fn no_source_file_is_over_the_limit() {
    let mut sizes: Vec<(usize, &str)> = TRACKED
        .iter()
        .filter(|f| f.ends_with(".rs") && !tests_only(f))
        .map(|f| (code_lines(&read(f)), f.as_str()))
        .collect();
    sizes.sort_unstable_by(|a, b| b.cmp(a));
    let total: usize = sizes.iter().map(|(n, _)| n).sum();
    println!("{} source files, {total} lines besides tests; the largest:", sizes.len());
    for (n, file) in sizes.iter().take(5) {
        println!("  {n:>5}  {file}");
    }
    let over: Vec<String> = sizes
        .iter()
        .filter(|(n, _)| *n > MAX_FILE_LINES)
        .map(|(n, f)| format!("{f} ({n})"))
        .collect();
    assert!(over.is_empty(), "over {MAX_FILE_LINES} lines besides tests: {over:?}");
}

#[test]
fn code_lines_stop_at_the_test_module() {
    assert_eq!(code_lines("a\nb\n#[cfg(test)]\nmod tests {}\n"), 2);
    assert_eq!(code_lines("a\nb\n"), 2);
    assert!(tests_only("e2e/tests/suite.rs"));
    assert!(tests_only("xtask/src/tidy/sizes.rs"));
    assert!(!tests_only("labkit/src/command.rs"));
}
