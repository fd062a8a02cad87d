//! Logs: human-readable by default, JSON with `--log-format json`; the level
//! comes from `RUST_LOG` (default `info`, kube's watcher `error`).

use std::{io::IsTerminal, time::Duration};

use tracing_subscriber::{EnvFilter, fmt};

use crate::cli::LogFormat;

/// Sets up the logs: the level from `RUST_LOG` (default `info`). An
/// invalid `RUST_LOG` is bad input — refused in one line rather than
/// replaced by `info` without a word.
pub fn init(format: LogFormat) -> Result<(), String> {
    let filter = filter(std::env::var("RUST_LOG").ok().as_deref())?;
    // Colours only on a terminal (the lab writes the log to a file), and never under NO_COLOR.
    let builder = fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(colours(std::io::stderr().is_terminal(), std::env::var_os("NO_COLOR")));
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().flatten_event(true).init(),
    }
    Ok(())
}

/// Without `RUST_LOG`: `info`, but kube's watcher only at `error` — it logs
/// every failed attempt as a warning with the whole Status dumped, and the
/// runner logs each one already, on one line, with its retry delay.
const DEFAULT_FILTER: &str = "info,kube_runtime::watcher=error";

/// `RUST_LOG`'s filter; [`DEFAULT_FILTER`] when it is unset or empty.
fn filter(rust_log: Option<&str>) -> Result<EnvFilter, String> {
    match rust_log.map(str::trim).filter(|v| !v.is_empty()) {
        None => Ok(EnvFilter::new(DEFAULT_FILTER)),
        Some(directives) => EnvFilter::try_new(directives).map_err(|e| {
            format!("RUST_LOG={directives:?} is not a log filter ({e}): use e.g. info or info,kube=debug")
        }),
    }
}

/// The examples' logs: text on stdout (where the e2e suite reads them), level
/// from `RUST_LOG` (default `info`), colours only on a terminal, none under NO_COLOR.
pub fn init_for_example() {
    fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_ansi(colours(std::io::stdout().is_terminal(), std::env::var_os("NO_COLOR")))
        .init();
}

/// Whether logs written to a terminal (`terminal`) are coloured: not when
/// `NO_COLOR` is set to anything but the empty string (no-color.org).
/// `with_ansi` decides alone once called, so NO_COLOR is read here.
fn colours(terminal: bool, no_color: Option<std::ffi::OsString>) -> bool {
    terminal && no_color.is_none_or(|v| v.is_empty())
}

/// A delay as people write it: `1.3s`, `250ms` (not `1.299999998s`).
pub fn rounded(delay: Duration) -> String {
    if delay >= Duration::from_secs(1) {
        format!("{:.1}s", delay.as_secs_f64())
    } else {
        format!("{}ms", delay.as_millis())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colours_only_on_a_terminal_and_never_under_no_color() {
        assert!(colours(true, None));
        assert!(colours(true, Some("".into())));
        assert!(!colours(true, Some("1".into())));
        assert!(!colours(false, None));
        assert!(!colours(false, Some("1".into())));
    }

    #[test]
    fn an_invalid_rust_log_is_refused_not_replaced() {
        assert!(filter(None).is_ok());
        assert!(filter(Some("  ")).is_ok());
        assert!(filter(Some("info,kube=debug")).is_ok());
        let error = filter(Some("info,kube=deebug")).unwrap_err();
        assert!(
            error.contains("RUST_LOG=\"info,kube=deebug\"") && !error.contains('\n'),
            "{error}"
        );
    }
}
