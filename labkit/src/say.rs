//! The language the kit talks to a person in: English, or Chinese under `--lang zh` or a
//! Chinese locale (`LC_ALL`, `LC_MESSAGES` or `LANG` starting with `zh`), for every verb.
//! Process-wide: one terminal, one reader, one language; a suite the kit runs is told with
//! [`LANG_ENV`]. Every sentence is English in the code, put through [`tr!`](crate::tr), and its Chinese
//! is in the catalogue, `labkit/zh-CN/*.toml` (`"English {name}" = "中文 {name}"`); the
//! narrations of `exp` and the rows of `grade` are tables of their own (`xtask/*/zh-CN.toml`).
//!
//! Progress lines (what the kit is doing, the commands it runs) go through
//! [`progress!`](crate::progress) to stderr, and not at all once `-q` chose
//! [`set_quiet`]; results go to stdout, errors to stderr, whatever `-q` says.
//!
//! [`english_in`](crate::english::english_in) is the check that a Chinese output holds no
//! English sentence, for the tests that run the verbs; `maint`'s tidy test holds every
//! [`tr!`](crate::tr) text to its catalogue entry.

use std::collections::HashMap;
use std::fmt::Display;
use std::sync::LazyLock;
use std::sync::atomic::{AtomicBool, Ordering};

/// Unset: the locale's (or [`LANG_ENV`]'s) language, read at the first question.
static CHINESE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
static QUIET: AtomicBool = AtomicBool::new(false);

/// From now on this process prints no progress lines (`cargo xtask -q`).
pub fn set_quiet(quiet: bool) {
    QUIET.store(quiet, Ordering::Relaxed);
}

/// Whether progress lines are off.
pub fn quiet() -> bool {
    QUIET.load(Ordering::Relaxed)
}

/// A progress line on stderr (`eprintln!`'s arguments, or one text such as a [`tr!`](crate::tr)'s),
/// unless `-q` chose [`set_quiet`].
#[macro_export]
macro_rules! progress {
    ($format:literal $($arg:tt)*) => {
        if !$crate::say::quiet() {
            eprintln!($format $($arg)*);
        }
    };
    ($text:expr) => {
        $crate::progress!("{}", $text)
    };
}

/// Set by the kit for the suites it runs (`zh` or `en`): their lines in the reader's language.
pub const LANG_ENV: &str = "LAB_KIT_LANG";

/// This process talks Chinese (`true`) or English from now on; the first choice stands.
pub fn choose_chinese(chinese: bool) {
    let _ = CHINESE.set(chinese);
}

/// Whether this process talks Chinese: as chosen, else [`LANG_ENV`], else the locale.
pub fn chinese() -> bool {
    *CHINESE.get_or_init(|| chinese_locale(|name| std::env::var(name).ok()))
}

/// [`LANG_ENV`], else the first of `LC_ALL`, `LC_MESSAGES` and `LANG` that is set (as in
/// POSIX), says Chinese.
pub fn chinese_locale(var: impl Fn(&str) -> Option<String>) -> bool {
    [LANG_ENV, "LC_ALL", "LC_MESSAGES", "LANG"]
        .into_iter()
        .find_map(|name| var(name).filter(|v| !v.is_empty()))
        .is_some_and(|locale| locale.starts_with("zh"))
}

/// `text` and spaces up to `width` columns (a label before its value), a Chinese
/// character taking two.
pub fn padded(text: &str, width: usize) -> String {
    let columns: usize = text.chars().map(|c| if c.is_ascii() { 1 } else { 2 }).sum();
    format!("{text}{}", " ".repeat(width.saturating_sub(columns)))
}

/// The catalogue's files: the Chinese of every [`tr!`](crate::tr) text, one file per part of the kit.
pub const CATALOGUE: &[(&str, &str)] = &[
    ("labkit.toml", include_str!("../zh-CN/labkit.toml")),
    ("lab.toml", include_str!("../zh-CN/lab.toml")),
    ("room.toml", include_str!("../zh-CN/room.toml")),
    ("doctor.toml", include_str!("../zh-CN/doctor.toml")),
    ("xtask.toml", include_str!("../zh-CN/xtask.toml")),
    ("grader.toml", include_str!("../zh-CN/grader.toml")),
    ("e2e.toml", include_str!("../zh-CN/e2e.toml")),
];

/// English text → Chinese, from every file of [`CATALOGUE`] (their syntax is unit-tested).
static ZH: LazyLock<HashMap<String, String>> = LazyLock::new(|| {
    let table = |text: &str| toml::from_str::<toml::Table>(text).unwrap_or_default();
    CATALOGUE
        .iter()
        .flat_map(|(_, text)| table(text))
        .filter_map(|(en, zh)| Some((en, zh.as_str()?.to_string())))
        .collect()
});

/// `template` in the chosen language, each `{name}` of `values` filled in; a brace that
/// names no value stays as it is (`{{.CgroupVersion}}` in a Go template). [`tr!`](crate::tr) calls it.
pub fn translate(template: &str, values: &[(&str, &dyn Display)]) -> String {
    let text = match chinese() {
        true => ZH.get(template).map_or(template, String::as_str),
        false => template,
    };
    fill(text, values)
}

/// `template` with each `{name}` of `values` replaced by its value.
pub fn fill(template: &str, values: &[(&str, &dyn Display)]) -> String {
    values.iter().fold(template.to_string(), |text, (name, value)| {
        text.replace(&format!("{{{name}}}"), &value.to_string())
    })
}

/// A sentence for a person in the chosen language: `tr!("{n} pods on {node}", n, node =
/// node.name())` — the English text is the catalogue's key; each `{name}` is a variable of
/// that name or `name = value`, anything [`Display`].
#[macro_export]
macro_rules! tr {
    (@value $name:ident) => { $name };
    (@value $name:ident = $value:expr) => { $value };
    ($template:literal $(, $name:ident $(= $value:expr)?)* $(,)?) => {{
        // A statement of its own: its borrowed values are gone before any `.await` after it.
        let text = $crate::say::translate(
            $template,
            &[$((stringify!($name), &$crate::tr!(@value $name $(= $value)?) as &dyn ::std::fmt::Display)),*],
        );
        text
    }};
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_kits_variable_then_the_locale_picks_the_language() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| pairs.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string())
        };
        let chinese = |pairs| super::chinese_locale(env(pairs));
        assert!(!chinese(&[]));
        assert!(chinese(&[("LANG", "zh_CN.UTF-8")]));
        assert!(!chinese(&[("LANG", "zh_CN.UTF-8"), ("LC_ALL", "C")]));
        assert!(chinese(&[("LC_ALL", ""), ("LANG", "zh_TW")]));
        assert!(chinese(&[("LC_MESSAGES", "zh_CN"), ("LANG", "en_US")]));
        assert!(chinese(&[(super::LANG_ENV, "zh"), ("LANG", "en_US")]));
        assert!(!chinese(&[(super::LANG_ENV, "en"), ("LANG", "zh_CN")]));
    }

    #[test]
    fn every_catalogue_file_is_a_table_of_texts() {
        for (file, text) in super::CATALOGUE {
            let table: toml::Table = toml::from_str(text).unwrap_or_else(|e| panic!("{file}: {e}"));
            for (en, zh) in table {
                assert!(zh.is_str(), "{file}: {en:?} is not a text");
            }
        }
    }

    #[test]
    fn a_template_is_filled_by_name_and_other_braces_stay() {
        let (n, node) = (3, "kind-node");
        let filled =
            super::fill("{n} pods on {node}, '{{.Id}}' {n}", &[("n", &n), ("node", &node)]);
        assert_eq!(filled, "3 pods on kind-node, '{{.Id}}' 3");
        assert_eq!(crate::tr!("{n} of {all}", n, all = 4 + 1), "3 of 5");
    }
}
