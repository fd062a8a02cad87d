//! Kubernetes Events, sent by kube's `Recorder` from a task of its own.
//!
//! A reconcile hands an Event over a bounded channel and goes on: it never
//! waits for an Event's write. The task sends it once no reconcile has
//! started for [`QUIET`] (at most [`HOLD`] after it was taken): an Event's
//! POST sent while the API server fans out the write it reports, or in the
//! middle of the next heal, slowed that heal (docs/bench.md, "The Events POST
//! after a write"). A failed Event is logged; it never fails a reconcile.
//! [`Recorder::flush`] sends what is pending at once (shutdown).
//!
//! Bounded, whatever a writer fighting the controller does (client-go's
//! EventCorrelator does the same for Go controllers):
//! * repeats fold into one series: kube's Recorder keys a series on the whole
//!   reference, resourceVersion included, which changes with every write, so
//!   a repeat is handed over with the version its series began at; but not
//!   on the note, and a series keeps its first note — so a new note (another
//!   writer named) is handed over with its own version, and is a new Event;
//! * a rate limit per object and reason: a burst of [`BURST`], then one per
//!   [`REFILL`]; the rest are counted in `events_dropped_total`;
//! * a bounded channel ([`QUEUE`] Events): when the API server is slow to
//!   take Events, new ones are dropped and counted, not piled up.

use std::{collections::HashMap, time::Duration};

use k8s_openapi::api::core::v1::ObjectReference;
use kube::{
    Client,
    runtime::events::{self, Event, Reporter},
};
use prometheus_client::metrics::counter::Counter;
use tokio::{
    sync::{mpsc, watch},
    time::Instant,
};
use tracing::{debug, warn};

/// An Event is sent only once no reconcile has started for this long…
/// A second, not less: with heals tens of milliseconds apart (a fight, a
/// burst, the bench's rounds) a 50 ms gap let an Event's POST meet the next
/// heal in 4–14 % of them (docs/bench.md, "Where the milliseconds go").
pub const QUIET: Duration = Duration::from_secs(1);
/// …or, while reconciles keep coming, once it has waited this long.
pub const HOLD: Duration = Duration::from_secs(5);
/// Events of one reason on one object sent at once before the rate limit bites.
pub const BURST: u32 = 25;
/// After the burst, one Event of that reason on that object per this period.
pub const REFILL: Duration = Duration::from_secs(300);
/// Events waiting for the sending task, at most.
pub const QUEUE: usize = 64;

/// Hands Events to the task that sends them.
#[derive(Clone)]
pub struct Recorder {
    queue: mpsc::Sender<(Event, ObjectReference)>,
    /// When the last reconcile started; `None`: send at once (none yet, or a flush).
    last_start: watch::Sender<Option<Instant>>,
    /// Events handed over and not sent yet (nor dropped by the rate limit).
    pending: watch::Sender<usize>,
    dropped: Counter,
}

impl Recorder {
    /// Starts the sending task (it ends when every clone is dropped, after
    /// sending what is pending). Events not sent are counted on `dropped`.
    pub fn new(client: Client, reporter: Reporter, dropped: Counter) -> Self {
        let (queue, events) = mpsc::channel(QUEUE);
        let recorder = Recorder {
            queue,
            last_start: watch::Sender::new(None),
            pending: watch::Sender::new(0),
            dropped,
        };
        let task = Task {
            recorder: events::Recorder::new(client, reporter),
            last_start: recorder.last_start.subscribe(),
            pending: recorder.pending.clone(),
            dropped: recorder.dropped.clone(),
            kept: HashMap::new(),
        };
        tokio::spawn(task.run(events));
        recorder
    }

    /// A reconcile starts now: Events wait until none has started for [`QUIET`].
    pub fn busy(&self) {
        self.last_start.send_replace(Some(Instant::now()));
    }

    /// Hands `event` about `reference` over; returns at once. A full channel
    /// drops it (counted); a failed write is logged by the task.
    pub fn publish(&self, event: Event, reference: ObjectReference) {
        // Counted before it is handed over: the task may count it off first.
        self.pending.send_modify(|n| *n += 1);
        if self.queue.try_send((event, reference)).is_err() {
            self.pending.send_modify(|n| *n -= 1);
            self.dropped.inc();
            debug!("Event dropped: the channel to its sending task is full");
        }
    }

    /// Sends every pending Event now; returns when they are sent.
    pub async fn flush(&self) {
        self.last_start.send_replace(None);
        let _ = self.pending.subscribe().wait_for(|n| *n == 0).await;
    }

    /// Events handed over and not sent yet.
    pub fn pending(&self) -> usize {
        *self.pending.borrow()
    }
}

/// The sending task: kube's Recorder, and what keeps its Events bounded.
struct Task {
    recorder: events::Recorder,
    last_start: watch::Receiver<Option<Instant>>,
    pending: watch::Sender<usize>,
    dropped: Counter,
    /// Per object (`namespace/name/uid`) and reason: its rate limit and its series.
    kept: HashMap<(String, String), Kept>,
}

/// What is kept per object and reason: client-go's
/// EventSourceObjectSpamFilter, a bucket of [`BURST`] tokens refilled by one
/// every [`REFILL`]; and the note of the current series with the
/// resourceVersion of the series' first Event.
struct Kept {
    tokens: f64,
    since: Instant,
    series: Option<(Option<String>, Option<String>)>,
}

impl Task {
    /// Objects and reasons kept at most; past it the full buckets (objects
    /// quiet for long) go first, and their series start over.
    const MAX_KEPT: usize = 1024;

    async fn run(mut self, mut events: mpsc::Receiver<(Event, ObjectReference)>) {
        while let Some((event, reference)) = events.recv().await {
            if let Some(reference) = self.allow(&event, &reference, Instant::now()) {
                self.quiet(Instant::now() + HOLD).await;
                if let Err(e) = self.recorder.publish(&event, &reference).await {
                    let error = crate::connect::one_line(&e);
                    warn!(%error, reason = %event.reason, "could not record the Event");
                }
            } else {
                self.dropped.inc();
                debug!(reason = %event.reason, "Event dropped: over the rate limit for this object");
            }
            self.pending.send_modify(|n| *n -= 1);
        }
    }

    /// Returns once no reconcile has started for [`QUIET`], or at `held`, or
    /// at once when flushed or when every [`Recorder`] is gone.
    async fn quiet(&mut self, held: Instant) {
        loop {
            let Some(last_start) = *self.last_start.borrow_and_update() else { return };
            let at = (last_start + QUIET).min(held);
            if at <= Instant::now() {
                return;
            }
            tokio::select! {
                () = tokio::time::sleep_until(at) => {}
                changed = self.last_start.changed() => {
                    if changed.is_err() {
                        return;
                    }
                }
            }
        }
    }

    /// `None` over the rate limit; else `reference` as kube's Recorder must
    /// see it to fold `event` into its series: with the version the series
    /// began at, a new one for a new note.
    fn allow(
        &mut self,
        event: &Event,
        reference: &ObjectReference,
        now: Instant,
    ) -> Option<ObjectReference> {
        let refill = |tokens: f64, since: Instant| {
            let earned = now.saturating_duration_since(since).as_secs_f64() / REFILL.as_secs_f64();
            (tokens + earned).min(f64::from(BURST))
        };
        if self.kept.len() >= Self::MAX_KEPT {
            self.kept.retain(|_, kept| refill(kept.tokens, kept.since) < f64::from(BURST));
        }
        let object = [&reference.namespace, &reference.name, &reference.uid]
            .map(|part| part.as_deref().unwrap_or_default())
            .join("/");
        let fresh = Kept { tokens: f64::from(BURST), since: now, series: None };
        let kept = self.kept.entry((object, event.reason.clone())).or_insert(fresh);
        kept.tokens = refill(kept.tokens, kept.since) - 1.0;
        kept.since = now;
        if kept.tokens < 0.0 {
            kept.tokens += 1.0;
            return None;
        }
        let version = match &kept.series {
            Some((note, version)) if *note == event.note => version.clone(),
            _ => {
                let version = reference.resource_version.clone();
                kept.series = Some((event.note.clone(), version.clone()));
                version
            }
        };
        Some(ObjectReference { resource_version: version, ..reference.clone() })
    }
}

#[cfg(test)]
mod tests {
    use http::Method;
    use kube::runtime::events::EventType;

    use super::*;
    use crate::fixtures::{MockApi, Scenario};

    fn event(reason: &str) -> Event {
        Event {
            type_: EventType::Normal,
            reason: reason.into(),
            note: Some("note".into()),
            action: "Update".into(),
            secondary: None,
        }
    }

    fn reference(name: &str) -> ObjectReference {
        ObjectReference {
            kind: Some("ConfigMap".into()),
            namespace: Some("default".into()),
            name: Some(name.into()),
            ..ObjectReference::default()
        }
    }

    fn reporter() -> Reporter {
        Reporter { controller: "my-controller".into(), instance: None }
    }

    #[tokio::test(start_paused = true)]
    async fn events_wait_for_a_quiet_second_then_go_out_in_order() {
        let (client, api) = MockApi::start(Scenario::Accept);
        let recorder = Recorder::new(client, reporter(), Counter::default());
        let started = Instant::now();
        recorder.busy();
        recorder.publish(event("Created"), reference("a"));
        recorder.publish(event("Corrected"), reference("b"));
        // Nothing is sent while the reconcile that handed them over goes on.
        tokio::time::sleep(QUIET / 2).await;
        assert!(api.seen.lock().unwrap().is_empty());
        tokio::time::sleep(QUIET).await;
        let seen = api.seen.lock().unwrap().clone();
        assert_eq!(seen.len(), 2, "{seen:#?}");
        assert!(seen.iter().all(|s| s.is_event() && s.method == Method::POST));
        assert_eq!(seen[0].body["reason"], "Created");
        assert_eq!(seen[1].body["regarding"]["name"], "b");
        assert!(seen[0].at - started >= QUIET, "sent {:?} after", seen[0].at - started);
    }

    #[tokio::test(start_paused = true)]
    async fn events_wait_for_a_quiet_moment_but_not_for_ever() {
        let (client, api) = MockApi::start(Scenario::Accept);
        let recorder = Recorder::new(client, reporter(), Counter::default());
        let queued = Instant::now();
        recorder.busy();
        recorder.publish(event("Corrected"), reference("a"));
        // Reconciles start every 10 ms for 300 ms: the Event waits them out…
        for _ in 0..30 {
            recorder.busy();
            tokio::time::sleep(Duration::from_millis(10)).await;
            assert!(api.seen.lock().unwrap().is_empty(), "sent while reconciles ran");
        }
        tokio::time::sleep(QUIET * 2).await;
        let seen = api.seen.lock().unwrap().clone();
        assert_eq!(seen.len(), 1, "{seen:#?}");
        assert!(seen[0].at - queued >= Duration::from_millis(290) + QUIET);
        // …and reconciles that never stop hold the next one for HOLD at most.
        let queued = Instant::now();
        recorder.publish(event("Corrected"), reference("b"));
        while api.seen.lock().unwrap().len() < 2 {
            recorder.busy();
            tokio::time::sleep(Duration::from_millis(10)).await;
            assert!(queued.elapsed() <= HOLD + Duration::from_millis(20));
        }
        assert!(queued.elapsed() >= HOLD);
    }

    #[tokio::test(start_paused = true)]
    async fn reconciles_that_never_stop_let_one_event_out_per_hold() {
        let (client, api) = MockApi::start(Scenario::Accept);
        let recorder = Recorder::new(client, reporter(), Counter::default());
        recorder.busy();
        for name in ["a", "b", "c"] {
            recorder.publish(event("Corrected"), reference(name));
        }
        // Reconciles every 10 ms: after HOLD one Event, HOLD later the next.
        let queued = Instant::now();
        let mut sent_at = Vec::new();
        while sent_at.len() < 3 {
            recorder.busy();
            tokio::time::sleep(Duration::from_millis(10)).await;
            let seen = api.seen.lock().unwrap().len();
            while sent_at.len() < seen {
                sent_at.push(queued.elapsed());
            }
        }
        assert!(sent_at[0] >= HOLD, "{sent_at:?}");
        assert!(sent_at[1] - sent_at[0] >= HOLD, "{sent_at:?}");
        assert!(sent_at[2] - sent_at[1] >= HOLD, "{sent_at:?}");
        assert_eq!(recorder.pending(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn dropping_the_last_recorder_sends_what_is_pending() {
        let (client, api) = MockApi::start(Scenario::Accept);
        let recorder = Recorder::new(client, reporter(), Counter::default());
        recorder.publish(event("Created"), reference("a"));
        drop(recorder);
        let seen = api.finish().await;
        assert_eq!(seen.len(), 1, "{seen:#?}");
    }

    /// my-config as each write leaves it: same object, a new resourceVersion.
    fn version(n: u32) -> ObjectReference {
        ObjectReference {
            resource_version: Some(n.to_string()),
            uid: Some("5e6f0a6c-0000-4000-8000-000000000001".into()),
            ..reference("my-config")
        }
    }

    #[tokio::test(start_paused = true)]
    async fn an_hour_of_reverts_leaves_one_event_and_few_requests() {
        let (client, api) = MockApi::start(Scenario::Accept);
        let dropped = Counter::default();
        let recorder = Recorder::new(client, reporter(), dropped.clone());
        // Someone reverts my-config every 2 s for an hour; each correction reports.
        let reports = 1800;
        for n in 0..reports {
            recorder.publish(event("Corrected"), version(n));
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
        recorder.flush().await;
        let sent = api.event_requests();
        let posts: Vec<_> = sent.iter().filter(|s| s.method == Method::POST).collect();
        // One Event: every repeat patches its series, whatever the version.
        assert_eq!(posts.len(), 1, "{posts:#?}");
        let name = posts[0].body["metadata"]["name"].as_str().unwrap().to_string();
        assert!(sent.iter().skip(1).all(|s| s.method == Method::PATCH && s.uri.contains(&name)));
        // A burst, then one per 5 minutes: 25 + 12 over the hour, not 1800.
        let limit = BURST as usize + 3600 / REFILL.as_secs() as usize;
        assert!(
            sent.len() <= limit,
            "{} requests for {reports} reports (limit {limit})",
            sent.len()
        );
        assert_eq!(dropped.get() as usize, reports as usize - sent.len());
        assert_eq!(recorder.pending(), 0);
    }

    /// kube keeps a series' first note: a new note (another writer named)
    /// is a new Event, and its repeats join that one.
    #[tokio::test(start_paused = true)]
    async fn a_new_note_is_a_new_event_and_its_repeats_join_it() {
        let (client, api) = MockApi::start(Scenario::Accept);
        let recorder = Recorder::new(client, reporter(), Counter::default());
        let contended = |writer: &str| Event {
            type_: EventType::Warning,
            note: Some(format!("field manager {writer:?} keeps putting other data back")),
            ..event("Contended")
        };
        for (n, writer) in [(1, "ci-job"), (2, "ci-job"), (3, "operator"), (4, "operator")] {
            recorder.publish(contended(writer), version(n));
        }
        recorder.flush().await;
        let sent = api.event_requests();
        let methods: Vec<&Method> = sent.iter().map(|s| &s.method).collect();
        assert_eq!(methods, [Method::POST, Method::PATCH, Method::POST, Method::PATCH]);
        let notes: Vec<&str> = sent.iter().map(|s| s.body["note"].as_str().unwrap()).collect();
        assert!(notes[..2].iter().all(|n| n.contains("\"ci-job\"")), "{notes:?}");
        assert!(notes[2..].iter().all(|n| n.contains("\"operator\"")), "{notes:?}");
        let name = |i: usize| sent[i].body["metadata"]["name"].as_str().unwrap().to_string();
        assert!(sent[1].uri.contains(&name(0)) && sent[3].uri.contains(&name(2)));
        assert_ne!(name(0), name(2));
    }

    #[tokio::test(start_paused = true)]
    async fn a_hanging_api_server_bounds_the_queue_not_memory() {
        let (client, api) = MockApi::start(Scenario::Unanswered);
        let dropped = Counter::default();
        let recorder = Recorder::new(client, reporter(), dropped.clone());
        for n in 0..1000 {
            recorder.publish(event("Corrected"), reference(&format!("object-{n}")));
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        // The task is stuck on its first request; the channel holds QUEUE at most.
        assert_eq!(api.event_requests().len(), 1);
        assert!(recorder.pending() <= QUEUE + 1, "{} pending", recorder.pending());
        assert!(dropped.get() as usize >= 1000 - QUEUE - 1, "{} dropped", dropped.get());
    }

    #[tokio::test(start_paused = true)]
    async fn flush_sends_what_is_pending_at_once() {
        let (client, api) = MockApi::start(Scenario::Accept);
        let recorder = Recorder::new(client, reporter(), Counter::default());
        let queued = Instant::now();
        recorder.busy();
        recorder.publish(event("Created"), reference("a"));
        recorder.flush().await;
        let seen = api.seen.lock().unwrap().clone();
        assert_eq!(seen.len(), 1, "{seen:#?}");
        assert!(seen[0].at - queued < QUIET);
        assert_eq!(recorder.pending(), 0);
    }
}
