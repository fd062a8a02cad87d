//! What a verb prints as its result, and in which format: `-o, --output
//! text|json`, spelt as kubectl spells it. The JSON documents, their fields
//! and types, are docs/output.md; each carries its `schema` name, and the
//! tests hold each against the page ([`labkit::json_doc`]).

use std::io::Write;

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Lines for a person.
    #[default]
    Text,
    /// One JSON document (docs/output.md), for a script or an instructor's checks.
    Json,
}

#[derive(Args, Clone, Copy, Debug)]
pub struct OutputArg {
    /// The result's format: text, or one JSON document on stdout (docs/output.md).
    #[arg(short, long = "output", value_enum, default_value_t = Format::Text)]
    pub output: Format,
}

/// Writes `document` to `out` as pretty JSON, one document and a newline.
pub fn json(out: &mut dyn Write, document: &serde_json::Value) -> Result<()> {
    let text = serde_json::to_string_pretty(document)?;
    writeln!(out, "{text}").with_context(|| labkit::tr!("cannot write the JSON"))
}

/// Writes `document` on stdout.
pub fn print_json(document: &serde_json::Value) -> Result<()> {
    json(&mut std::io::stdout().lock(), document)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn writes_one_document_and_a_newline() {
        let mut out = Vec::new();
        json(&mut out, &json!({"schema": "x"})).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.ends_with("}\n"));
        assert_eq!(serde_json::from_str::<serde_json::Value>(&text).unwrap()["schema"], "x");
    }
}
