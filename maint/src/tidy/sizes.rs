//! Sizes, measured and printed: no source file over [`MAX_FILE_LINES`] lines
//! (its tests apart), no function over [`MAX_FN_LINES`], so that a module and
//! a function stay something a person reads whole.

use std::path::Path;

use syn::spanned::Spanned as _;
use syn::visit::Visit;

use super::{docs::TRACKED, read};

/// The most lines a source file may have before its `#[cfg(test)]` module.
const MAX_FILE_LINES: usize = 500;

/// The most lines a function may have.
const MAX_FN_LINES: usize = 80;

/// A file that is tests only: under a `tests/` folder, a `tests.rs`, a
/// module that is `#![cfg(test)]` (itself, or a module it is inside), or one
/// its parent declares `#[cfg(test)]` (a mock API server). Test support
/// (`cfg(any(test, feature = "test-support"))`) is code when code calls it ([`super::support`]).
fn tests_only(file: &str) -> bool {
    let test_module = |f: &str| read(f).contains("#![cfg(test)]");
    let folder = Path::new(file).parent();
    let tracked = |p: std::path::PathBuf| {
        let p = p.to_string_lossy().into_owned();
        TRACKED.contains(&p).then_some(p)
    };
    let parents = [folder.map(|d| d.with_extension("rs")), folder.map(|d| d.join("mod.rs"))]
        .into_iter()
        .chain(["lib.rs", "main.rs"].map(|n| folder.map(|d| d.join(n))))
        .flatten()
        .filter_map(tracked);
    let name = Path::new(file).file_stem().unwrap_or_default().to_string_lossy();
    let declared_for_tests = |parent: &str| {
        let text = read(parent);
        let lines: Vec<&str> = text.lines().map(str::trim).collect();
        let declaration = format!("mod {name};");
        lines.windows(2).any(|w| w[0] == "#[cfg(test)]" && w[1].ends_with(&declaration))
    };
    file.contains("/tests/")
        || file.ends_with("/tests.rs")
        || test_module(file)
        // A module inside a `#![cfg(test)]` one, however deep (the tidy checks' own modules).
        || Path::new(file).ancestors().skip(1).any(|dir| {
            let modules = [dir.join("mod.rs"), dir.with_extension("rs")].into_iter();
            modules.filter_map(tracked).any(|m| m != file && test_module(&m))
        })
        || parents.filter(|p| p != file).any(|p| declared_for_tests(&p))
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

/// Who each part of the tree serves (the first prefix that matches): the
/// product is what learners and instructors run; the instruments are the
/// kit's own CI, benchmark and checks. ARCHITECTURE.md's crate table says the same.
const AUDIENCES: &[(&str, Audience)] = &[
    ("bench/", Audience::Instruments),
    ("e2e/", Audience::Instruments),
    ("maint/", Audience::Instruments),
    ("", Audience::Product),
];

/// Issue 52's budget for non-test code lines: the product, and everything.
const GOALS: (usize, usize) = (13_000, 22_000);

/// Ceilings that only come down: today's measure, lowered as code is removed
/// (a change that adds lines past them fails here and says the goal). Raised
/// with no honest cut left to pay for it: by issue 53's closing of the room and
/// the lab (+385, +505), by issue 54's judge (+398, +403: two verdicts, 403s
/// named, hints in three languages, `--role`, stops without `/proc`), by issue
/// 55's live room page and grades handed in (+397 product; the workspace +65,
/// paid by retiring `cargo maint hunt`, `grade --json` and the pictures verb, whose
/// check is the unit test's). Issue 52 caps this round at 24 000.
const CEILINGS: (usize, usize) = (15_088, 23_741);

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Audience {
    Product,
    Instruments,
}

fn audience(file: &str) -> Audience {
    AUDIENCES.iter().find(|(prefix, _)| file.starts_with(prefix)).map_or(Audience::Product, |a| a.1)
}

/// Lines that hold code: neither blank nor only a comment, outside every item marked
/// `#[cfg(test)]` wherever it is (a test module, a test-only function or re-export).
fn code_only_lines(text: &str) -> usize {
    code_only_text(text).lines().count()
}

/// The lines [`code_only_lines`] counts, trimmed.
fn code_only_text(text: &str) -> String {
    let file = syn::parse_file(text).unwrap_or_else(|e| panic!("not Rust: {e}"));
    let mut tests = TestItems::default();
    tests.visit_file(&file);
    let in_tests = |line: usize| tests.0.iter().any(|(from, to)| (*from..=*to).contains(&line));
    text.lines()
        .enumerate()
        .filter(|(i, _)| !in_tests(i + 1))
        .map(|(_, line)| line.trim())
        .filter(|line| !line.is_empty() && !line.starts_with("//"))
        .map(|line| format!("{line}\n"))
        .collect()
}

/// The line ranges of the items marked `#[cfg(test)]`.
#[derive(Default)]
struct TestItems(Vec<(usize, usize)>);

impl TestItems {
    /// Whether `attrs` mark a test item; then its lines are kept.
    fn marked(&mut self, attrs: &[syn::Attribute], span: proc_macro2::Span) -> bool {
        let test = attrs.iter().any(|a| {
            a.path().is_ident("cfg")
                && a.meta.require_list().is_ok_and(|l| l.tokens.to_string() == "test")
        });
        if test {
            let from =
                attrs.iter().map(|a| a.span().start().line).min().unwrap_or(span.start().line);
            self.0.push((from, span.end().line));
        }
        test
    }
}

impl<'ast> Visit<'ast> for TestItems {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        let attrs = match item {
            syn::Item::Const(i) => &i.attrs,
            syn::Item::Enum(i) => &i.attrs,
            syn::Item::Fn(i) => &i.attrs,
            syn::Item::Impl(i) => &i.attrs,
            syn::Item::Mod(i) => &i.attrs,
            syn::Item::Static(i) => &i.attrs,
            syn::Item::Struct(i) => &i.attrs,
            syn::Item::Trait(i) => &i.attrs,
            syn::Item::Type(i) => &i.attrs,
            syn::Item::Use(i) => &i.attrs,
            syn::Item::Macro(i) => &i.attrs,
            _ => return syn::visit::visit_item(self, item),
        };
        if !self.marked(attrs, syn::spanned::Spanned::span(item)) {
            syn::visit::visit_item(self, item);
        }
    }
    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        if !self.marked(&f.attrs, syn::spanned::Spanned::span(f)) {
            syn::visit::visit_impl_item_fn(self, f);
        }
    }
}

#[test]
fn lines_per_crate_and_audience() {
    let mut per: std::collections::BTreeMap<(Audience, &str), usize> = Default::default();
    let sources: Vec<&str> = TRACKED
        .iter()
        .map(String::as_str)
        .filter(|f| f.ends_with(".rs") && !tests_only(f))
        .collect();
    let support_for_tests = super::support::test_only(&sources, |f| code_only_text(&read(f)));
    println!("test support only tests use, counted as tests: {support_for_tests:?}");
    for file in sources.iter().filter(|f| !support_for_tests.contains(**f)) {
        let krate = file.split('/').next().unwrap_or_default();
        *per.entry((audience(file), krate)).or_default() += code_only_lines(&read(file));
    }
    let sum = |a: Option<Audience>| -> usize {
        per.iter().filter(|((b, _), _)| a.is_none_or(|a| a == *b)).map(|(_, n)| n).sum()
    };
    let (product, workspace) = (sum(Some(Audience::Product)), sum(None));
    println!("code lines besides tests (no blank or comment lines), per audience and crate:");
    for ((audience, krate), n) in &per {
        println!("  {n:>6}  {audience:?} {krate}");
    }
    println!("  {product:>6}  the product (goal {}, ceiling {})", GOALS.0, CEILINGS.0);
    println!("  {workspace:>6}  the workspace (goal {}, ceiling {})", GOALS.1, CEILINGS.1);
    assert!(product <= CEILINGS.0, "the product grew past its ceiling: {product}");
    assert!(workspace <= CEILINGS.1, "the workspace grew past its ceiling: {workspace}");
}

#[test]
fn code_only_lines_leave_out_comments_blanks_and_tests() {
    assert_eq!(code_only_lines("//! a\n\nfn a() {\n    // why\n}\n#[cfg(test)]\nmod t {}\n"), 2);
    // A test-only item near the top hides nothing after it.
    let text = "#[cfg(test)]\nuse x::y;\nfn a() {}\nimpl A {\n    #[cfg(test)]\n    fn t() {\n    }\n    fn b() {}\n}\n#[cfg(any(test, feature = \"test-support\"))]\nfn s() {}\n";
    assert_eq!(code_only_lines(text), 6);
    assert_eq!(audience("maint/src/tidy/sizes.rs"), Audience::Instruments);
    assert_eq!(audience("xtask/src/lab/up.rs"), Audience::Product);
}

/// Every function of a file (free, in an impl or a trait) with its length in lines.
#[derive(Default)]
struct Functions(Vec<(String, usize)>);

impl Functions {
    fn add(&mut self, name: &syn::Ident, block: &syn::Block) {
        let span = block.brace_token.span.join();
        let lines = span.end().line - name.span().start().line + 1;
        self.0.push((name.to_string(), lines));
    }
}

impl<'ast> Visit<'ast> for Functions {
    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        self.add(&f.sig.ident, &f.block);
        syn::visit::visit_item_fn(self, f);
    }
    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        self.add(&f.sig.ident, &f.block);
        syn::visit::visit_impl_item_fn(self, f);
    }
    fn visit_trait_item_fn(&mut self, f: &'ast syn::TraitItemFn) {
        if let Some(block) = &f.default {
            self.add(&f.sig.ident, block);
        }
        syn::visit::visit_trait_item_fn(self, f);
    }
}

/// `controller/examples/` is the course's programs as a learner types them:
/// step 4's `main` is one function there as in the course's `main.go`.
const AS_THE_COURSE_WRITES_IT: &str = "controller/examples/";

#[test]
fn no_function_is_over_the_limit() {
    let mut long = Vec::new();
    let mut count = 0;
    let files = TRACKED.iter().filter(|f| f.ends_with(".rs") && !tests_only(f));
    for file in files.filter(|f| !f.starts_with(AS_THE_COURSE_WRITES_IT)) {
        let mut parsed = syn::parse_file(&read(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        parsed.items.retain(|item| !super::modules::is_test_only(item));
        let mut functions = Functions::default();
        functions.visit_file(&parsed);
        count += functions.0.len();
        long.extend(functions.0.into_iter().map(|(name, n)| (n, format!("{file}: {name}"))));
    }
    long.sort_unstable_by(|a, b| b.cmp(a));
    println!("{count} functions besides tests; the longest:");
    for (n, f) in long.iter().take(5) {
        println!("  {n:>5}  {f}");
    }
    let over: Vec<String> =
        long.iter().filter(|(n, _)| *n > MAX_FN_LINES).map(|(n, f)| format!("{f} ({n})")).collect();
    assert!(over.is_empty(), "over {MAX_FN_LINES} lines: {over:?}");
}

#[test]
fn functions_are_measured_from_name_to_closing_brace() {
    let mut parsed = syn::parse_file("fn a() {\n}\nimpl X {\n    fn b(\n    ) {\n        1;\n    }\n}\n#[cfg(test)]\nmod tests { fn c() {} }\n").unwrap();
    parsed.items.retain(|item| !super::modules::is_test_only(item));
    let mut functions = Functions::default();
    functions.visit_file(&parsed);
    assert_eq!(functions.0, vec![("a".to_string(), 2), ("b".to_string(), 4)]);
}

#[test]
fn code_lines_stop_at_the_test_module() {
    assert_eq!(code_lines("a\nb\n#[cfg(test)]\nmod tests {}\n"), 2);
    assert_eq!(code_lines("a\nb\n"), 2);
    assert!(tests_only("e2e/tests/suite.rs"));
    assert!(tests_only("maint/src/tidy/sizes.rs"));
    assert!(tests_only("maint/src/tidy/course_pages/comments.rs"));
    assert!(tests_only("controller/src/fixtures.rs"));
    assert!(!tests_only("labkit/src/command.rs"));
}
