//! The controller's flags (each also read from an environment variable), and
//! the checked [`Desired`] they name. Everything here is validated before any
//! connection is made: bad input ends with one line and exit 2.

use std::{net::SocketAddr, path::PathBuf, time::Duration};

use clap::{Parser, ValueEnum};

use crate::{
    desired::{self, Desired, InvalidDesired},
    version,
};

#[derive(Debug, Parser)]
#[command(
    name = "my-controller",
    // A flag given twice takes its last value, so a harness can append overrides.
    args_override_self = true,
    version = version::LONG_VERSION,
    about = "Keeps a ConfigMap (by default default/my-config) at its desired data: \
             creates it when missing, puts its data back when changed, writes nothing when it is right."
)]
pub struct Cli {
    /// Kubeconfig to use. Without it: $KUBECONFIG, ~/.kube/config, then the in-cluster ServiceAccount.
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,

    /// Namespace of the ConfigMap to keep.
    #[arg(long, env = "MY_CONTROLLER_NAMESPACE", default_value = desired::DEFAULT_NAMESPACE)]
    pub namespace: String,

    /// Name of the ConfigMap to keep.
    #[arg(long, env = "MY_CONTROLLER_NAME", default_value = desired::DEFAULT_NAME)]
    pub name: String,

    /// Desired data as a YAML or JSON file mapping keys to string values (at most 1 MiB).
    /// Default: the course's {"app.conf": "env=prod\nreplicas=3"}.
    #[arg(long, env = "MY_CONTROLLER_DATA_FILE", value_name = "PATH")]
    pub data_file: Option<PathBuf>,

    /// Desired data entry KEY=VALUE; repeat for several keys. Replaces the default data; adds to --data-file's entries.
    #[arg(long = "data", value_name = "KEY=VALUE")]
    pub data: Vec<String>,

    /// How often to reconcile even without events (level-triggered safety net),
    /// 100ms to 24h; 0 turns it off (events only).
    #[arg(long, env = "MY_CONTROLLER_RESYNC", default_value = "30s", value_parser = resync)]
    pub resync: Duration,

    /// Retries of a failing key before it is given up (the course's NumRequeues(key) < 5),
    /// 0 to 100; 0 gives up after the first failure.
    #[arg(long, env = "MY_CONTROLLER_MAX_RETRIES", default_value_t = 5,
          value_parser = clap::value_parser!(u32).range(0..=100))]
    pub max_retries: u32,

    /// Pause at the start of every reconcile, to watch events coalesce (course step 3),
    /// up to 5m; 0 (the default) is none. Not for production.
    #[arg(long, env = "MY_CONTROLLER_RECONCILE_DELAY", default_value = "0s", value_parser = up_to_5m)]
    pub reconcile_delay: Duration,

    /// How long one reconcile's requests may take (after --reconcile-delay), 1s to 5m: a
    /// request the API server never answers is abandoned, counted as a failure and retried.
    #[arg(long, env = "MY_CONTROLLER_RECONCILE_TIMEOUT", default_value = "30s", value_parser = reconcile_timeout)]
    pub reconcile_timeout: Duration,

    /// On SIGTERM/SIGINT, how long a running reconcile and pending Events get to finish,
    /// up to 5m (keep it below the pod's terminationGracePeriodSeconds, 30s); 0 waits for
    /// nothing. Whatever is cut off is named, and the exit status is then 1.
    #[arg(long, env = "MY_CONTROLLER_SHUTDOWN_GRACE", default_value = "10s", value_parser = up_to_5m)]
    pub shutdown_grace: Duration,

    #[arg(long, env = "MY_CONTROLLER_NO_PACING", help = no_pacing_help())]
    pub no_pacing: bool,

    /// How long each watch request lasts before the API server ends it and a new one
    /// starts (its timeoutSeconds), 1s to 1h. A connection that brings no byte for 3s
    /// longer is taken for dead (HTTP/1.1 has no pings): not ready, listed again.
    #[arg(long, env = "MY_CONTROLLER_WATCH_TIMEOUT", default_value = "290s", value_parser = watch_timeout)]
    pub watch_timeout: Duration,

    /// Address for /healthz, /readyz and /metrics.
    #[arg(long, env = "MY_CONTROLLER_LISTEN", default_value = "0.0.0.0:8080")]
    pub listen: SocketAddr,

    /// Log format; the level comes from RUST_LOG (default info).
    #[arg(long, env = "MY_CONTROLLER_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

impl Cli {
    /// The ConfigMap to keep, reading the data file if one is given.
    pub fn desired(&self) -> Result<Desired, InvalidDesired> {
        let mut data = match &self.data_file {
            Some(path) => desired::read_data_file(path)?,
            None if self.data.is_empty() => desired::default_data(),
            None => Default::default(),
        };
        for (key, value) in desired::parse_pairs(&self.data)? {
            if data.insert(key.clone(), value).is_some() {
                return Err(InvalidDesired::DuplicateKey(key));
            }
        }
        Desired::new(&self.namespace, &self.name, data)
    }
}

/// A duration no longer than `max`, and, unless zero, at least `min`.
fn bounded(s: &str, min: Duration, max: Duration) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    if d > max || (!d.is_zero() && d < min) {
        let min = if min.is_zero() { "0".to_string() } else { format!("0 or {min:?}") };
        return Err(format!("{s} is out of range: use {min} to {max:?}"));
    }
    Ok(d)
}

fn resync(s: &str) -> Result<Duration, String> {
    bounded(s, Duration::from_millis(100), Duration::from_secs(24 * 3600))
}

/// `--reconcile-delay` and `--shutdown-grace`.
fn up_to_5m(s: &str) -> Result<Duration, String> {
    bounded(s, Duration::ZERO, Duration::from_secs(300))
}

/// `--no-pacing`: what it turns off, as the pacing does it ([`crate::pace::SUMMARY`]).
fn no_pacing_help() -> String {
    format!(
        "Write every correction at once, however many come in a row. By default {}; a \
         Warning Event Contended names the other writer's field manager. For a benchmark, whose \
         correction rounds are such a writer by design.",
        crate::pace::SUMMARY
    )
}

/// Whole seconds: the API server takes timeoutSeconds.
fn watch_timeout(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    if d < Duration::from_secs(1) || d > Duration::from_secs(3600) || d.subsec_nanos() != 0 {
        return Err(format!("{s} is out of range: use whole seconds, 1s to 1h"));
    }
    Ok(d)
}

fn reconcile_timeout(s: &str) -> Result<Duration, String> {
    let d = bounded(s, Duration::from_secs(1), Duration::from_secs(300))?;
    if d.is_zero() {
        return Err(format!("{s}: a reconcile needs at least 1s"));
    }
    Ok(d)
}

/// Parses a duration as kubectl and Go write them — `250ms`, `30s`, `5m`,
/// `1h`, `1m30s`, `1.5h` — and a bare number as seconds (jiff's friendly
/// format: `1h 30m` and `PT1M30S` are taken too).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let text = s.trim();
    let parsed = match text.parse::<f64>() {
        Ok(seconds) => Duration::try_from_secs_f64(seconds).map_err(|e| e.to_string()),
        // The units `--help` names and no others: jiff alone would also read `8 hours`.
        Err(_) if !text.chars().all(|c| c.is_ascii_digit() || ".msh".contains(c)) => {
            Err("a unit other than ms, s, m and h".to_string())
        }
        Err(_) => text
            .parse::<k8s_openapi::jiff::SignedDuration>()
            .and_then(Duration::try_from)
            .map_err(|e| e.to_string()),
    };
    parsed.map_err(|e| {
        format!("{text:?} is not a duration ({e}): use ms, s, m or h, e.g. 500ms, 30s, 1m30s")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("my-controller").chain(args.iter().copied()))
    }

    #[test]
    fn defaults_are_the_course() {
        let s = parse(&[]).unwrap();
        assert_eq!(s.desired().unwrap(), Desired::default());
        assert_eq!(s.resync, Duration::from_secs(30));
        assert_eq!(s.max_retries, 5);
        assert_eq!(s.shutdown_grace, Duration::from_secs(10));
        assert_eq!(s.listen.port(), 8080);
        assert!(s.reconcile_delay.is_zero());
    }

    #[test]
    fn data_pairs_replace_the_default_data() {
        let s = parse(&["--data", "a=1", "--data", "b=x=y", "--name", "other"])
            .unwrap()
            .desired()
            .unwrap();
        assert_eq!(s.name(), "other");
        assert_eq!(s.data().len(), 2);
        assert_eq!(s.data()["b"], "x=y");
    }

    #[test]
    fn bad_values_are_refused() {
        assert!(parse(&["--unknown-flag"]).is_err());
        assert!(parse(&["--resync", "soon"]).is_err());
        assert!(parse(&["--workers", "2"]).is_err(), "one key needs one worker: no such flag");
        assert!(parse(&["--listen", "nowhere"]).is_err());
        let bad_ns = parse(&["--namespace", "Not_OK"]).unwrap().desired();
        assert!(matches!(bad_ns, Err(InvalidDesired::Namespace(_))));
    }

    #[test]
    fn every_number_and_duration_is_bounded() {
        for (flag, bad) in [
            ("--resync", "50ms"),
            ("--resync", "25h"),
            ("--max-retries", "101"),
            ("--max-retries", "-1"),
            ("--reconcile-delay", "6m"),
            ("--shutdown-grace", "301s"),
            ("--watch-timeout", "0"),
            ("--watch-timeout", "1.5s"),
            ("--watch-timeout", "2h"),
        ] {
            let error = parse(&[flag, bad]).unwrap_err().to_string();
            assert!(error.lines().next().unwrap().contains(bad), "{flag} {bad}: {error}");
        }
        assert!(
            parse(&["--resync", "100ms", "--max-retries", "100", "--shutdown-grace", "5m"]).is_ok()
        );
    }

    #[test]
    fn what_zero_means() {
        let s = parse(&["--resync", "0", "--max-retries", "0", "--shutdown-grace", "0s"]).unwrap();
        assert!(s.resync.is_zero(), "0: no periodic resync (see runner::run)");
        assert_eq!(s.max_retries, 0, "0: given up after the first failure");
        assert!(s.shutdown_grace.is_zero(), "0: nothing waited for");
    }

    #[test]
    fn the_help_says_what_the_pacing_does() {
        let help = <Cli as clap::CommandFactory>::command().render_long_help().to_string();
        let help = help.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(help.contains(crate::pace::SUMMARY), "--help lacks the pacing:\n{help}");
        assert!(!help.contains("not fought"), "{help}");
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("2"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("1.5m"), Ok(Duration::from_secs(90)));
        // kubectl's and Go's form.
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("1h2m3s"), Ok(Duration::from_secs(3723)));
        assert_eq!(parse_duration("2s500ms"), Ok(Duration::from_millis(2500)));
        assert!(parse_duration("1m30").is_err());
        assert!(parse_duration("1x").unwrap_err().contains("use ms, s, m or h"));
        assert!(
            parse_duration("8 hours").unwrap_err().contains("a unit other than ms, s, m and h")
        );
        assert!(parse_duration("PT1M").is_err(), "ISO 8601 is not a unit the help names");
        assert!(parse_duration("-1s").is_err());
        assert!(parse_duration("1d").is_err());
        assert!(parse_duration("").is_err());
    }

    #[test]
    fn every_flag_documents_its_default() {
        let help = <Cli as clap::CommandFactory>::command().render_long_help().to_string();
        for default in [
            "[default: default]",
            "[default: my-config]",
            "[default: 30s]",
            "[default: 5]",
            "[default: 0s]",
            "[default: 10s]",
            "[default: 290s]",
            "[default: 0.0.0.0:8080]",
            "[default: text]",
        ] {
            assert!(help.contains(default), "--help lacks {default}:\n{help}");
        }
    }
}
