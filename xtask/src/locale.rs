//! The language of what a person reads (`--lang`, else the locale's), and
//! text tables, one TOML file per language, with `{name}` placeholders.

/// `--lang`: the language of the narration (`exp`) or the table (`grade`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Lang {
    En,
    Zh,
}

impl Lang {
    /// The locale's language, as `LC_ALL`, then `LC_MESSAGES`, then `LANG`
    /// say (the first one set wins, as in POSIX): `zh…` is Chinese.
    pub fn from_locale(var: impl Fn(&str) -> Option<String>) -> Lang {
        let locale = ["LC_ALL", "LC_MESSAGES", "LANG"]
            .into_iter()
            .find_map(|name| var(name).filter(|v| !v.is_empty()))
            .unwrap_or_default();
        if locale.starts_with("zh") { Lang::Zh } else { Lang::En }
    }

    /// `--lang` when given, else the process's locale.
    pub fn or_locale(lang: Option<Lang>) -> Lang {
        lang.unwrap_or_else(|| Lang::from_locale(|v| std::env::var(v).ok()))
    }

    /// The file name part of a text table: `en`, `zh-CN`.
    pub fn file_stem(self) -> &'static str {
        match self {
            Lang::En => "en",
            Lang::Zh => "zh-CN",
        }
    }
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
    fn the_locale_picks_the_language() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| pairs.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string())
        };
        assert_eq!(Lang::from_locale(env(&[])), Lang::En);
        assert_eq!(Lang::from_locale(env(&[("LANG", "zh_CN.UTF-8")])), Lang::Zh);
        assert_eq!(Lang::from_locale(env(&[("LANG", "zh_CN.UTF-8"), ("LC_ALL", "C")])), Lang::En);
        assert_eq!(Lang::from_locale(env(&[("LC_ALL", ""), ("LANG", "zh_TW")])), Lang::Zh);
        assert_eq!(
            Lang::from_locale(env(&[("LC_MESSAGES", "zh_CN"), ("LANG", "en_US")])),
            Lang::Zh
        );
    }

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
