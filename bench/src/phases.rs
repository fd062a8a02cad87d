//! Where a round's milliseconds go, seen from the API server for every side
//! alike (`cargo maint bench --phases`): its audit log gives, to the
//! microsecond, when each request about my-config arrived and when it was
//! answered, whoever sent it — the floor, my-controller, a Go peer.
//!
//! A round, as the audit log and the bench's clock cut it:
//!
//! | phase       | from                                   | to                                          |
//! |-------------|----------------------------------------|---------------------------------------------|
//! | `disturb`   | the bench's delete or patch arrives    | it is answered                              |
//! | `reaction`  | that answer                            | the side's first request about my-config arrives (the API server's watch fan-out to it, and all of its own work up to the request; 0 when it arrives before the answer is written) |
//! | `requests`  | that request arrives                   | the side's write is answered (a read before the write, if it makes one, included) |
//! | `back`      | that answer                            | the bench's own watch has seen the result   |
//!
//! and whether one of the side's Event requests was in flight during its
//! reaction (an Event shares the side's connections and the API server).
//! The audit log is written synchronously (`--audit-log-mode=blocking`), so
//! the API server is a little slower for every side alike while it is on;
//! the lab's own flags are put back after the run.

use std::{
    path::{Path, PathBuf},
    time::{SystemTime, UNIX_EPOCH},
};

use anyhow::{Context as _, Result};
use k8s_openapi::jiff::Timestamp;
use serde::Serialize;

use super::{rounds::Disturbance, stats::Summary};
use labkit::lab::{API_SERVER, Lab};

/// Requests about ConfigMaps and Events, at `Metadata` level (no bodies);
/// nothing else.
const POLICY: &str = "\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  resources:
  - group: \"\"
    resources: [configmaps, events]
  - group: events.k8s.io
    resources: [events]
- level: None
";

/// The lab's kube-apiserver with its audit log on, for one bench run.
pub struct Audit {
    log: PathBuf,
}

impl Audit {
    /// Restarts the lab's kube-apiserver with an audit log (envtest only).
    pub async fn enable(lab: &mut Lab) -> Result<Audit> {
        let dir = lab.file().state_dir.clone();
        let (policy, log) = (dir.join("audit-policy.yaml"), dir.join("audit.log"));
        std::fs::write(&policy, POLICY)
            .with_context(|| format!("cannot write {}", policy.display()))?;
        if log.exists() {
            std::fs::remove_file(&log)?;
        }
        let flags = [
            format!("--audit-policy-file={}", policy.display()),
            format!("--audit-log-path={}", log.display()),
            "--audit-log-format=json".into(),
            "--audit-log-mode=blocking".into(),
        ];
        lab.stop_process(API_SERVER).await?;
        lab.start_api_server(&flags.iter().map(String::as_str).collect::<Vec<_>>()).await?;
        Ok(Audit { log })
    }

    /// Every request the log holds.
    pub fn requests(&self) -> Result<Vec<Request>> {
        read(&self.log)
    }
}

/// One request as the audit log records it, times in µs since the epoch.
#[derive(Clone, Debug, PartialEq)]
pub struct Request {
    pub verb: String,
    pub user: String,
    pub resource: String,
    pub namespace: String,
    pub name: String,
    pub received: i64,
    pub answered: i64,
}

fn micros(text: &str) -> Result<i64> {
    let at: Timestamp = text.parse().with_context(|| format!("not a timestamp: {text}"))?;
    Ok(at.as_microsecond())
}

/// The completed requests of an audit log (a watch's `ResponseStarted` and
/// its end are left out: a watch is not a step of a round).
pub fn read(path: &Path) -> Result<Vec<Request>> {
    let text = labkit::files::read(path)?;
    let mut requests = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let not_audit = || format!("{}: not an audit event: {line}", path.display());
        let event: serde_json::Value = serde_json::from_str(line).with_context(not_audit)?;
        let text = |at: &str| event.pointer(at).and_then(|v| v.as_str());
        let field = |at: &str| text(at).unwrap_or_default();
        let (Some(stage), Some(verb), Some(user)) =
            (text("/stage"), text("/verb"), text("/user/username"))
        else {
            anyhow::bail!(not_audit());
        };
        if stage != "ResponseComplete" || verb == "watch" {
            continue;
        }
        requests.push(Request {
            verb: verb.into(),
            user: user.into(),
            resource: field("/objectRef/resource").into(),
            namespace: field("/objectRef/namespace").into(),
            name: field("/objectRef/name").into(),
            received: micros(field("/requestReceivedTimestamp"))?,
            answered: micros(field("/stageTimestamp"))?,
        });
    }
    requests.sort_by_key(|r| r.received);
    Ok(requests)
}

/// One timed round: who kept my-config, what was done, and when (the
/// bench's clock, the same machine's as the API server's).
#[derive(Clone, Debug)]
pub struct Span {
    pub side: String,
    /// Where the side's my-config is: every side runs as it runs, so only
    /// the namespace tells one side's requests from another's.
    pub namespace: String,
    pub what: Disturbance,
    pub start: SystemTime,
    pub end: SystemTime,
}

impl Span {
    fn micros(at: SystemTime) -> i64 {
        at.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_micros() as i64)
    }
}

/// A round cut into its phases, in ms.
#[derive(Clone, Debug, PartialEq)]
pub struct Phases {
    pub disturb: f64,
    pub reaction: f64,
    pub requests: f64,
    pub back: f64,
    /// One of the side's Event requests was in flight during its reaction.
    pub event_in_flight: bool,
}

/// The phases of `span`, from `requests` (sorted by arrival); `None` when
/// the log does not hold the round's disturbance and the side's write.
pub fn of_round(span: &Span, requests: &[Request], name: &str) -> Option<Phases> {
    let (start, end) = (Span::micros(span.start), Span::micros(span.end));
    let here = |r: &Request| r.namespace == span.namespace;
    let about = |r: &&Request| r.resource == "configmaps" && r.name == name && here(r);
    let verb = match span.what {
        Disturbance::Delete => "delete",
        Disturbance::Patch => "patch",
    };
    let within = requests.iter().filter(|r| r.received >= start && r.received <= end);
    let disturb = within.clone().filter(about).find(|r| r.verb == verb)?;
    // From the disturbance's arrival, not its answer: the watch event leaves once the change
    // is stored, and a fast side's request can arrive before the answer is written (its
    // reaction is then 0); from the answer, those rounds, the fastest, were not cut at all.
    let after = || within.clone().filter(|r| r.received > disturb.received);
    let first = after().filter(about).find(|r| r.user != disturb.user && r.verb != "list")?;
    let write = after()
        .filter(about)
        .find(|r| r.user == first.user && matches!(r.verb.as_str(), "create" | "update"))?;
    let event_in_flight = requests.iter().any(|r| {
        r.resource == "events"
            && here(r)
            && r.user == first.user
            && r.received < first.received
            && r.answered > disturb.answered
    });
    let ms = |from: i64, to: i64| (to - from) as f64 / 1000.0;
    Some(Phases {
        disturb: ms(disturb.received, disturb.answered),
        reaction: ms(disturb.answered, first.received).max(0.0),
        requests: ms(first.received, write.answered),
        back: ms(write.answered, end),
        event_in_flight,
    })
}

/// The phases of one side and one kind of round, summarised.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    pub side: String,
    pub kind: &'static str,
    /// Rounds the log held both ends of.
    pub rounds: usize,
    pub disturb: Summary,
    pub reaction: Summary,
    pub requests: Summary,
    pub back: Summary,
    /// Rounds with an Event request in flight during the reaction.
    pub with_event: usize,
    pub reaction_with_event: Option<Summary>,
    pub reaction_without_event: Option<Summary>,
}

/// Rows for every side (in the order the spans first name them) and kind.
pub fn rows(spans: &[Span], requests: &[Request], name: &str) -> Vec<Row> {
    let mut sides: Vec<&str> = Vec::new();
    for span in spans {
        if !sides.contains(&span.side.as_str()) {
            sides.push(&span.side);
        }
    }
    let mut rows = Vec::new();
    for side in sides {
        for (what, kind) in [(Disturbance::Delete, "self-heal"), (Disturbance::Patch, "correction")]
        {
            let phases: Vec<Phases> = spans
                .iter()
                .filter(|s| s.side == side && s.what == what)
                .filter_map(|s| of_round(s, requests, name))
                .collect();
            let of = |f: fn(&Phases) -> f64| Summary::of(&phases.iter().map(f).collect::<Vec<_>>());
            let (Some(disturb), Some(reaction), Some(requests_), Some(back)) =
                (of(|p| p.disturb), of(|p| p.reaction), of(|p| p.requests), of(|p| p.back))
            else {
                continue;
            };
            let reaction_when = |flag: bool| {
                let picked: Vec<f64> = phases
                    .iter()
                    .filter(|p| p.event_in_flight == flag)
                    .map(|p| p.reaction)
                    .collect();
                Summary::of(&picked)
            };
            rows.push(Row {
                side: side.to_string(),
                kind,
                rounds: phases.len(),
                disturb,
                reaction,
                requests: requests_,
                back,
                with_event: phases.iter().filter(|p| p.event_in_flight).count(),
                reaction_with_event: reaction_when(true),
                reaction_without_event: reaction_when(false),
            });
        }
    }
    rows
}

/// The phases table, p50 / p90 / p99 of each phase in ms.
pub fn render(rows: &[Row]) -> String {
    let trio = |s: &Summary| format!("{:.1} / {:.1} / {:.1}", s.p50, s.p90, s.p99);
    let mut out = String::from(
        "| side | kind | rounds | disturb | reaction | requests | back | Event in flight: rounds, reaction p50 with / without |\n\
         |---|---|---|---|---|---|---|---|\n",
    );
    for row in rows {
        let p50 =
            |s: &Option<Summary>| s.as_ref().map_or("—".into(), |s| format!("{:.1}", s.p50));
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {}, {} / {} |\n",
            row.side,
            row.kind,
            row.rounds,
            trio(&row.disturb),
            trio(&row.reaction),
            trio(&row.requests),
            trio(&row.back),
            row.with_event,
            p50(&row.reaction_with_event),
            p50(&row.reaction_without_event),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn request(verb: &str, user: &str, resource: &str, received: i64, answered: i64) -> Request {
        let name = if resource == "configmaps" { "my-config" } else { "my-config.1" };
        Request {
            verb: verb.into(),
            user: user.into(),
            resource: resource.into(),
            namespace: "bench-0".into(),
            name: name.into(),
            received,
            answered,
        }
    }

    fn span(what: Disturbance, from: i64, to: i64) -> Span {
        let at = |us: i64| UNIX_EPOCH + Duration::from_micros(us as u64);
        Span {
            side: "ours".into(),
            namespace: "bench-0".into(),
            what,
            start: at(from),
            end: at(to),
        }
    }

    #[test]
    fn a_self_heal_is_cut_at_the_requests_the_api_server_saw() {
        let log = [
            request("list", "admin", "configmaps", 1_000, 1_500),
            request("delete", "admin", "configmaps", 2_000, 4_000),
            // An Event of the previous round, still in flight.
            request("patch", "sa", "events", 3_500, 6_000),
            request("create", "sa", "configmaps", 5_000, 7_000),
        ];
        let phases = of_round(&span(Disturbance::Delete, 900, 9_000), &log, "my-config").unwrap();
        assert_eq!(
            phases,
            Phases { disturb: 2.0, reaction: 1.0, requests: 2.0, back: 2.0, event_in_flight: true }
        );
    }

    #[test]
    fn a_write_that_arrives_before_the_disturbance_is_answered_reacted_in_no_time() {
        // Seen in an audit log: the delete answered 2049 µs after it arrived, the create at 1932.
        let log = [
            request("delete", "admin", "configmaps", 1_000, 3_049),
            request("create", "sa", "configmaps", 2_932, 4_323),
        ];
        let phases = of_round(&span(Disturbance::Delete, 900, 5_000), &log, "my-config").unwrap();
        assert_eq!((phases.disturb, phases.reaction, phases.requests), (2.049, 0.0, 1.391));
    }

    #[test]
    fn a_read_before_the_write_is_part_of_the_requests() {
        let log = [
            request("patch", "admin", "configmaps", 2_000, 3_000),
            request("get", "peer", "configmaps", 4_000, 4_500),
            request("update", "peer", "configmaps", 5_000, 6_000),
        ];
        let phases = of_round(&span(Disturbance::Patch, 0, 6_500), &log, "my-config").unwrap();
        assert_eq!((phases.reaction, phases.requests, phases.back), (1.0, 2.0, 0.5));
        assert!(!phases.event_in_flight);
        // Outside the span, or no write: not a round the log can cut.
        assert_eq!(of_round(&span(Disturbance::Patch, 7_000, 9_000), &log, "my-config"), None);
        assert_eq!(of_round(&span(Disturbance::Delete, 0, 6_500), &log, "my-config"), None);
    }

    #[test]
    fn another_sides_requests_are_not_this_rounds() {
        // Every side runs as the same ServiceAccount; the namespace says whose.
        let elsewhere = |r: Request| Request { namespace: "bench-1".into(), ..r };
        let log = [
            request("patch", "admin", "configmaps", 2_000, 3_000),
            elsewhere(request("create", "sa", "events", 2_500, 3_500)),
            elsewhere(request("update", "sa", "configmaps", 3_200, 3_400)),
            request("update", "sa", "configmaps", 5_000, 6_000),
        ];
        let phases = of_round(&span(Disturbance::Patch, 0, 6_500), &log, "my-config").unwrap();
        assert_eq!((phases.reaction, phases.requests), (2.0, 1.0));
        assert!(!phases.event_in_flight);
    }

    #[test]
    fn reads_the_api_servers_json_lines() {
        let dir = std::env::temp_dir().join(format!("phases-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("audit.log");
        let line = |stage: &str, verb: &str| {
            format!(
                r#"{{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"x","stage":"{stage}","requestURI":"/api/v1/namespaces/default/configmaps/my-config","verb":"{verb}","user":{{"username":"system:serviceaccount:default:my-controller"}},"objectRef":{{"resource":"configmaps","namespace":"default","name":"my-config","apiVersion":"v1"}},"responseStatus":{{"code":200}},"requestReceivedTimestamp":"2026-12-01T10:00:00.000100Z","stageTimestamp":"2026-12-01T10:00:00.002350Z"}}"#
            )
        };
        let text =
            [line("ResponseStarted", "watch"), line("ResponseComplete", "update")].join("\n");
        std::fs::write(&path, text).unwrap();
        let requests = read(&path).unwrap();
        assert_eq!(requests.len(), 1, "{requests:?}");
        assert_eq!(requests[0].verb, "update");
        assert_eq!(requests[0].namespace, "default");
        assert_eq!(requests[0].answered - requests[0].received, 2_250);
        let no_user = line("ResponseComplete", "update").replace(r#""user""#, r#""impersonated""#);
        std::fs::write(&path, no_user).unwrap();
        assert!(read(&path).unwrap_err().to_string().contains("not an audit event"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
