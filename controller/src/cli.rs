//! The controller's flags (each also read from an environment variable), and
//! their translation into checked [`Settings`]. Everything here is validated
//! before any connection is made: bad input ends with one line and exit 2.

use std::{net::SocketAddr, path::PathBuf, time::Duration};

use clap::{Parser, ValueEnum};

use crate::{
    desired::{self, Desired, InvalidDesired},
    queue::RateLimit,
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

    /// How often to reconcile even without events (level-triggered safety net).
    #[arg(long, env = "MY_CONTROLLER_RESYNC", default_value = "30s", value_parser = parse_duration)]
    pub resync: Duration,

    /// Workers taking keys from the queue (a key is never processed by two at once).
    #[arg(long, env = "MY_CONTROLLER_WORKERS", default_value_t = 2,
          value_parser = clap::value_parser!(u16).range(1..=64))]
    pub workers: u16,

    /// Retries of a failing key before it is given up (the course's NumRequeues(key) < 5).
    #[arg(long, env = "MY_CONTROLLER_MAX_RETRIES", default_value_t = 5)]
    pub max_retries: u32,

    /// Pause at the start of every reconcile, to watch events coalesce (course step 3). Not for production.
    #[arg(long, env = "MY_CONTROLLER_RECONCILE_DELAY", default_value = "0s", value_parser = parse_duration)]
    pub reconcile_delay: Duration,

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

/// The checked configuration the controller runs with.
#[derive(Clone, Debug)]
pub struct Settings {
    pub desired: Desired,
    pub resync: Duration,
    pub workers: usize,
    pub max_retries: u32,
    pub reconcile_delay: Duration,
    pub listen: SocketAddr,
    pub rate_limit: RateLimit,
}

impl Cli {
    /// Builds [`Settings`], reading the data file if one is given.
    pub fn settings(&self) -> Result<Settings, InvalidDesired> {
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
        Ok(Settings {
            desired: Desired::new(&self.namespace, &self.name, data)?,
            resync: self.resync,
            workers: self.workers.into(),
            max_retries: self.max_retries,
            reconcile_delay: self.reconcile_delay,
            listen: self.listen,
            rate_limit: RateLimit::default(),
        })
    }
}

/// Parses `250ms`, `30s`, `5m`, `1h` (a bare number means seconds).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (number, unit) = s.split_at(split);
    let number: f64 = number
        .parse()
        .map_err(|_| format!("{s:?} is not a duration: use e.g. 500ms, 30s, 5m"))?;
    let seconds = match unit {
        "ms" => number / 1000.0,
        "" | "s" => number,
        "m" => number * 60.0,
        "h" => number * 3600.0,
        _ => return Err(format!("unknown unit {unit:?} in {s:?}: use ms, s, m or h")),
    };
    Duration::try_from_secs_f64(seconds).map_err(|e| format!("{s:?}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("my-controller").chain(args.iter().copied()))
    }

    #[test]
    fn defaults_are_the_course() {
        let s = parse(&[]).unwrap().settings().unwrap();
        assert_eq!(s.desired, Desired::default());
        assert_eq!(s.resync, Duration::from_secs(30));
        assert_eq!(s.max_retries, 5);
        assert_eq!(s.listen.port(), 8080);
        assert!(s.reconcile_delay.is_zero());
    }

    #[test]
    fn data_pairs_replace_the_default_data() {
        let s = parse(&["--data", "a=1", "--data", "b=x=y", "--name", "other"])
            .unwrap()
            .settings()
            .unwrap();
        assert_eq!(s.desired.name(), "other");
        assert_eq!(s.desired.data().len(), 2);
        assert_eq!(s.desired.data()["b"], "x=y");
    }

    #[test]
    fn bad_values_are_refused() {
        assert!(parse(&["--unknown-flag"]).is_err());
        assert!(parse(&["--resync", "soon"]).is_err());
        assert!(parse(&["--workers", "0"]).is_err());
        assert!(parse(&["--listen", "nowhere"]).is_err());
        let bad_ns = parse(&["--namespace", "Not_OK"]).unwrap().settings();
        assert!(matches!(bad_ns, Err(InvalidDesired::Namespace(_))));
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("2"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("1.5m"), Ok(Duration::from_secs(90)));
        assert!(parse_duration("1d").is_err());
        assert!(parse_duration("").is_err());
    }

    #[test]
    fn every_flag_documents_its_default() {
        let help = <Cli as clap::CommandFactory>::command()
            .render_long_help()
            .to_string();
        for default in [
            "[default: default]",
            "[default: my-config]",
            "[default: 30s]",
            "[default: 2]",
            "[default: 5]",
            "[default: 0s]",
            "[default: 0.0.0.0:8080]",
            "[default: text]",
        ] {
            assert!(help.contains(default), "--help lacks {default}:\n{help}");
        }
    }
}
