//! The language the kit talks to a person in while it works: English, or
//! Chinese once a verb run with `--lang zh` chose it (`cargo xtask grade`,
//! `cargo xtask exp`: their own texts are tables, `xtask/*/zh-CN.toml`; the
//! lines that the layers under them print — what they apply, what they wait
//! for, how a program exited — are [`pick`]ed here). Process-wide: one
//! terminal, one reader, one language.
//!
//! Progress lines (what the kit is doing, the commands it runs) go through
//! [`progress!`](crate::progress) to stderr, and not at all once `-q` chose
//! [`set_quiet`]; results go to stdout, errors to stderr, whatever `-q` says.
//!
//! [`english_in`](crate::english::english_in) is the check that a Chinese
//! output holds no English sentence, for the tests that run those verbs.

use std::sync::atomic::{AtomicBool, Ordering};

static CHINESE: AtomicBool = AtomicBool::new(false);
static QUIET: AtomicBool = AtomicBool::new(false);

/// From now on this process prints no progress lines (`cargo xtask -q`).
pub fn set_quiet(quiet: bool) {
    QUIET.store(quiet, Ordering::Relaxed);
}

/// Whether progress lines are off.
pub fn quiet() -> bool {
    QUIET.load(Ordering::Relaxed)
}

/// A progress line on stderr (`eprintln!`'s arguments), unless `-q` chose
/// [`set_quiet`].
#[macro_export]
macro_rules! progress {
    ($($arg:tt)*) => {
        if !$crate::say::quiet() {
            eprintln!($($arg)*);
        }
    };
}

/// From now on this process talks Chinese (`true`) or English.
pub fn choose_chinese(chinese: bool) {
    CHINESE.store(chinese, Ordering::Relaxed);
}

/// Whether this process talks Chinese.
pub fn chinese() -> bool {
    CHINESE.load(Ordering::Relaxed)
}

/// `en` or `zh`, in the language chosen.
pub fn pick<T>(en: T, zh: T) -> T {
    if chinese() { zh } else { en }
}
