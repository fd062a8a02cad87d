//! Rust source split into its code and its comments, by where the tokens
//! are: what no token covers is a comment (proc-macro2 drops `//` and
//! `/* */` comments and makes `///` and `//!` into `doc` attributes, whose
//! tokens stand where the comment is written, so they are left out too).

use std::str::FromStr as _;

use proc_macro2::{LineColumn, TokenStream, TokenTree};

/// A source, each line's characters and which of them are code.
pub struct Source {
    lines: Vec<Vec<char>>,
    code: Vec<Vec<bool>>,
}

impl Source {
    pub fn parse(text: &str) -> Result<Source, proc_macro2::LexError> {
        let lines: Vec<Vec<char>> = text.lines().map(|l| l.chars().collect()).collect();
        let code = lines.iter().map(|l| vec![false; l.len()]).collect();
        let mut source = Source { lines, code };
        source.mark(TokenStream::from_str(text)?);
        Ok(source)
    }

    /// Marks where each token of `tokens` is written, but for the comments'.
    fn mark(&mut self, tokens: TokenStream) {
        for token in tokens {
            match token {
                TokenTree::Group(group) => {
                    let (open, close) = (group.span_open(), group.span_close());
                    if self.is_comment(open.start()) {
                        continue;
                    }
                    self.cover(open.start(), open.end());
                    self.cover(close.start(), close.end());
                    self.mark(group.stream());
                }
                other => {
                    let span = other.span();
                    if !self.is_comment(span.start()) {
                        self.cover(span.start(), span.end());
                    }
                }
            }
        }
    }

    /// A token that a doc comment became: it stands where `//` or `/*` is.
    fn is_comment(&self, at: LineColumn) -> bool {
        let rest: String = self.lines[at.line - 1].iter().skip(at.column).take(2).collect();
        rest == "//" || rest == "/*"
    }

    /// `from..to` (lines from 1, columns from 0) is code.
    fn cover(&mut self, from: LineColumn, to: LineColumn) {
        for line in from.line..=to.line {
            let marks = &mut self.code[line - 1];
            let start = if line == from.line { from.column } else { 0 };
            let end = if line == to.line { to.column } else { marks.len() };
            for mark in &mut marks[start.min(end)..end] {
                *mark = true;
            }
        }
    }

    /// Each line's code, as written up to its last token (indentation
    /// kept), the lines without code left out.
    pub fn code(&self) -> Vec<String> {
        self.split().filter_map(|(code, _)| (!code.is_empty()).then_some(code)).collect()
    }

    /// The comments, one per run of lines that hold one (a comment that
    /// goes on over several lines is one).
    pub fn comments(&self) -> Vec<String> {
        let mut comments: Vec<String> = Vec::new();
        let mut open = false;
        for (_, comment) in self.split() {
            match (comment.is_empty(), open) {
                (true, _) => open = false,
                (false, true) => {
                    let last = comments.last_mut().expect("open");
                    last.push('\n');
                    last.push_str(&comment);
                }
                (false, false) => {
                    comments.push(comment);
                    open = true;
                }
            }
        }
        comments
    }

    /// Each line as (its code, its comment), both trimmed.
    fn split(&self) -> impl Iterator<Item = (String, String)> + '_ {
        self.lines.iter().zip(&self.code).map(|(chars, marks)| {
            let end = marks.iter().rposition(|m| *m).map_or(0, |i| i + 1);
            let code: String = chars[..end].iter().collect();
            let rest: String = chars[end..].iter().collect();
            (code.trim_end().to_string(), rest.trim().to_string())
        })
    }
}

/// Whether `text` is written in Chinese: it has Chinese characters.
pub fn is_chinese(text: &str) -> bool {
    text.chars().any(|c| ('\u{4e00}'..='\u{9fff}').contains(&c))
}

#[test]
fn comments_are_told_from_code_and_strings() {
    let source = Source::parse(
        "//! The header,\n//! two lines.\n\n/// A doc.\nfn f() -> &'static str {\n    \
         // a whole line\n    let url = \"https://x\"; // after code\n    /* a block */ url\n}\n",
    )
    .unwrap();
    assert_eq!(
        source.code(),
        ["fn f() -> &'static str {", "    let url = \"https://x\";", "    /* a block */ url", "}"]
    );
    assert_eq!(
        source.comments(),
        ["//! The header,\n//! two lines.", "/// A doc.", "// a whole line\n// after code"]
    );
    assert!(is_chinese("// 注释即讲解") && !is_chinese("// a comment"));
}
