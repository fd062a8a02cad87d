//! labkit's test support — modules behind `cfg(any(test, feature = "test-support"))`: which of
//! them code that is not a test calls. Those count as code, the others as tests (issue 52's
//! rule): a module only tests use is test code wherever it lives.

use std::collections::BTreeSet;
use std::path::Path;

use syn::visit::Visit;

use super::read;

const SUPPORT: &str = r#"#[cfg(any(test, feature = "test-support"))]"#;

/// A test-support module: its file, and the words by which other code calls it
/// (`name::` for its path, which a free function's caller names in a path or a `use`;
/// `method(` for each method it defines on a type from elsewhere).
struct Module {
    file: String,
    marks: Vec<String>,
}

/// Of `files` (the workspace's non-test sources), the test-support modules that no code
/// calls, through other code only: `code(file)` is a file's text besides its tests.
pub fn test_only(files: &[&str], code: impl Fn(&str) -> String) -> BTreeSet<String> {
    let modules: Vec<Module> = files.iter().flat_map(|f| declared_in(f, files)).collect();
    let mut unused: BTreeSet<String> = modules.iter().map(|m| m.file.clone()).collect();
    let texts: Vec<(&str, String)> = files.iter().map(|f| (*f, code(f))).collect();
    // Until no module changes side: one that only unused ones call is unused too.
    while let Some(called) = modules.iter().find(|m| {
        unused.contains(&m.file)
            && texts.iter().any(|(f, text)| {
                *f != m.file && !unused.contains(*f) && m.marks.iter().any(|mark| calls(text, mark))
            })
    }) {
        unused.remove(&called.file);
    }
    unused
}

/// The test-support modules `file` declares (`#[cfg(any(test, …))]` then `mod name;`).
fn declared_in(file: &str, files: &[&str]) -> Vec<Module> {
    let text = read(file);
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    let path = Path::new(file);
    let dir = match path.file_name().and_then(|n| n.to_str()) {
        Some("lib.rs" | "main.rs" | "mod.rs") => path.parent().unwrap_or(path).to_path_buf(),
        _ => path.with_extension(""),
    };
    lines
        .windows(2)
        .filter(|w| w[0] == SUPPORT)
        .filter_map(|w| w[1].strip_suffix(';')?.rsplit_once("mod ").map(|(_, name)| name))
        .filter_map(|name| {
            let candidates = [dir.join(format!("{name}.rs")), dir.join(name).join("mod.rs")];
            let found = candidates.iter().map(|p| p.to_string_lossy().into_owned());
            let file = found.into_iter().find(|p| files.contains(&p.as_str()))?;
            let mut methods = Methods::default();
            methods.visit_file(&syn::parse_file(&read(&file)).ok()?);
            let marks = methods.0.into_iter().map(|f| format!("{f}("));
            Some(Module { marks: marks.chain([format!("{name}::")]).collect(), file })
        })
        .collect()
}

/// Whether `text` holds `mark` as a word of its own (not the end of a longer name).
fn calls(text: &str, mark: &str) -> bool {
    text.match_indices(mark).any(|(at, _)| {
        !text[..at].chars().next_back().is_some_and(|c| c.is_alphanumeric() || c == '_')
    })
}

/// The names of the methods a file defines.
#[derive(Default)]
struct Methods(Vec<String>);

impl<'ast> Visit<'ast> for Methods {
    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        self.0.push(f.sig.ident.to_string());
    }
}

#[test]
fn a_mark_is_a_call_only_as_a_word_of_its_own() {
    assert!(calls("let x = labkit::cluster::snapshot()", "cluster::"));
    assert!(calls("lab.stop_api_server(x)", "stop_api_server("));
    assert!(!calls("kind::node_cluster::x()", "cluster::"));
    assert!(!calls("restop_api_server(x)", "stop_api_server("));
}
