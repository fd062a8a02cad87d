//! The language of what a person reads (`--lang`, else the locale's), and
//! text tables, one TOML file per language, with `{name}` placeholders.

use std::sync::OnceLock;

/// `--lang`: the language of the narration (`exp`) or the table (`grade`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Lang {
    En,
    Zh,
}

impl Lang {
    /// The language this process talks (`--lang`, else the locale's: `labkit::say`).
    pub fn chosen() -> Lang {
        if labkit::say::chinese() { Lang::Zh } else { Lang::En }
    }

    /// The file name part of a text table: `en`, `zh-CN`.
    pub fn file_stem(self) -> &'static str {
        match self {
            Lang::En => "en",
            Lang::Zh => "zh-CN",
        }
    }
}

/// `lang`'s table of `xtask/<dir>/` (`files`: en.toml's text and zh-CN.toml's), parsed once
/// into its cell of `cells`.
pub fn table<T: serde::de::DeserializeOwned>(
    lang: Lang,
    cells: &'static [OnceLock<T>; 2],
    files: [&str; 2],
    dir: &str,
) -> &'static T {
    cells[lang as usize].get_or_init(|| {
        toml::from_str(files[lang as usize])
            .unwrap_or_else(|e| panic!("xtask/{dir}/{}.toml (unit-tested): {e}", lang.file_stem()))
    })
}

/// `template` with each `{name}` replaced by its value.
pub fn fill(template: &str, values: &[(&str, &str)]) -> String {
    values.iter().fold(template.to_string(), |text, (name, value)| {
        text.replace(&format!("{{{name}}}"), value)
    })
}

/// The `{name}` placeholders of `template`, sorted.
#[cfg(test)]
pub fn placeholders(template: &str) -> Vec<String> {
    let mut names: Vec<String> = template
        .split('{')
        .skip(1)
        .filter_map(|part| part.split_once('}').map(|(name, _)| name))
        .filter(|name| !name.is_empty() && name.chars().all(|c| c.is_ascii_lowercase() || c == '_'))
        .map(str::to_string)
        .collect();
    names.sort();
    names.dedup();
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_are_filled_and_their_placeholders_listed() {
        let template = "{a} took {after}; {a} again, a JSON {\"x\": 1}";
        assert_eq!(
            fill(template, &[("a", "it"), ("after", "3 ms")]),
            "it took 3 ms; it again, a JSON {\"x\": 1}"
        );
        assert_eq!(placeholders(template), ["a", "after"]);
    }
}
