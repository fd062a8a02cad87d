//! Kubernetes Events, published a moment after the write they report.
//!
//! Why deferred: an Event reports a write that the API server is, at that
//! moment, sending to every watcher of my-config; published at once, its POST
//! competes with that fan-out and with the next reconcile's requests
//! (measured: docs/bench.md, "What the bench found before"). So Events wait
//! [`DEFER`], then until no reconcile has started for [`QUIET`] (at most
//! [`HOLD`]); while reconciles never pause, one goes out per [`HOLD`]. client-go's
//! recorder is asynchronous for the same kind of reason; a person reading
//! `kubectl describe` cannot tell.
//!
//! The calls are kube's `Recorder`'s (`new(client, reporter)`,
//! `publish(&event, &reference)`), so a reconcile reads the same; Events keep
//! kube's series (a repeat within minutes patches the same Event). A failed
//! Event is logged here; it never failed a reconcile. [`Recorder::flush`]
//! publishes what is pending at once (shutdown).
//!
//! Bounded, whatever a writer fighting the controller does (client-go's
//! EventCorrelator does the same for Go controllers):
//! * repeats fold into one series: kube's Recorder keys a series on the whole
//!   reference, resourceVersion included, which changes with every write, so
//!   a repeat is handed over with the version its series began at; but not
//!   on the note, and a series keeps its first note — so a new note (another
//!   writer named) is handed over with its own version, and is a new Event
//!   ([`Notes`]);
//! * a rate limit per object and reason: a burst of [`BURST`], then one per
//!   [`REFILL`]; the rest are counted in `events_dropped_total`;
//! * a bounded queue to the publisher ([`QUEUE`] Events): when the API server
//!   is slow to take Events, new ones are dropped and counted, not piled up.

use std::{
    collections::HashMap,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use k8s_openapi::api::core::v1::ObjectReference;
use kube::{
    Client,
    runtime::events::{self, Event, Reporter},
};
use prometheus_client::metrics::counter::Counter;
use tokio::{
    sync::{mpsc, oneshot},
    time::Instant,
};
use tracing::{debug, warn};

/// How long an Event waits before it is published.
pub const DEFER: Duration = Duration::from_millis(100);
/// An Event is published only once no reconcile has started for this long…
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
/// Events waiting for the publisher, at most.
pub const QUEUE: usize = 64;

/// Hands Events to a publisher task that sends them [`DEFER`] later.
#[derive(Clone)]
pub struct Recorder {
    queue: mpsc::Sender<Command>,
    /// Events handed over and not yet sent (or dropped by the rate limit).
    pending: Arc<AtomicUsize>,
    dropped: Counter,
    /// When the last reconcile started ([`Recorder::busy`]).
    activity: Activity,
    notes: Notes,
}

/// Per object and reason, the note of its current series and the version of
/// the object that series began at (see the module's notes on series).
#[derive(Clone, Default)]
struct Notes(Arc<std::sync::Mutex<HashMap<(String, String), Began>>>);

/// A series' note, and the resourceVersion of its first Event.
type Began = (Option<String>, Option<String>);

impl Notes {
    /// Series kept at most; past it they start over (a new Event each).
    const MAX: usize = 1024;

    /// `reference` as kube's Recorder must see it to fold `event` into its
    /// series: with the version the series began at, a new one for a new note.
    fn series(&self, event: &Event, reference: &ObjectReference) -> ObjectReference {
        let key = (object_key(reference), event.reason.clone());
        let mut notes = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if notes.len() >= Self::MAX && !notes.contains_key(&key) {
            notes.clear();
        }
        let version = match notes.get(&key) {
            Some((note, version)) if *note == event.note => version.clone(),
            _ => {
                let version = reference.resource_version.clone();
                notes.insert(key, (event.note.clone(), version.clone()));
                version
            }
        };
        ObjectReference { resource_version: version, ..reference.clone() }
    }
}

/// `namespace/name/uid` of the object an Event is about.
fn object_key(reference: &ObjectReference) -> String {
    format!(
        "{}/{}/{}",
        reference.namespace.as_deref().unwrap_or_default(),
        reference.name.as_deref().unwrap_or_default(),
        reference.uid.as_deref().unwrap_or_default()
    )
}

/// The start of the last reconcile, shared with the publisher.
#[derive(Clone, Default)]
struct Activity(Arc<std::sync::Mutex<Option<Instant>>>);

impl Activity {
    fn mark(&self, now: Instant) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = Some(now);
    }

    /// Whether a reconcile started less than [`QUIET`] before `now`.
    fn busy_at(&self, now: Instant) -> bool {
        let last = *self.0.lock().unwrap_or_else(|p| p.into_inner());
        last.is_some_and(|last| now < last + QUIET)
    }

    /// When Events may go out: at once if the last reconcile started
    /// [`QUIET`] ago, else that much after it — but never after `deadline`.
    fn quiet_from(&self, now: Instant, deadline: Instant) -> Instant {
        let last = *self.0.lock().unwrap_or_else(|p| p.into_inner());
        match last {
            Some(last) if now < last + QUIET => (last + QUIET).min(deadline),
            _ => now,
        }
    }
}

enum Command {
    /// Boxed: an Event is large next to a flush.
    Publish(Box<(Event, ObjectReference)>),
    Flush(oneshot::Sender<()>),
}

impl Recorder {
    /// Starts the publisher task (it ends when every clone is dropped, after
    /// publishing what is pending). Events not sent are counted on `dropped`.
    pub fn new(client: Client, reporter: Reporter, dropped: Counter) -> Self {
        let (queue, commands) = mpsc::channel(QUEUE);
        let pending = Arc::new(AtomicUsize::new(0));
        let activity = Activity::default();
        tokio::spawn(publish_deferred(
            events::Recorder::new(client, reporter),
            commands,
            pending.clone(),
            dropped.clone(),
            activity.clone(),
        ));
        Recorder { queue, pending, dropped, activity, notes: Notes::default() }
    }

    /// A reconcile starts now: Events wait until none has started for
    /// [`QUIET`] (at most [`HOLD`]), so their POSTs do not compete with the
    /// reconcile's own requests for the API server.
    pub fn busy(&self) {
        self.activity.mark(Instant::now());
    }

    /// Queues `event` about `reference`; it is published [`DEFER`] from now.
    /// Returns at once and does not fail (the `Result` is kube's signature):
    /// a publishing error is logged by the publisher, a full queue drops it.
    pub async fn publish(
        &self,
        event: &Event,
        reference: &ObjectReference,
    ) -> Result<(), kube::Error> {
        // One series per object, reason and note, whatever version it is about.
        let reference = self.notes.series(event, reference);
        let command = Command::Publish(Box::new((copy(event), reference)));
        // Counted before it is handed over: the publisher may take it (and
        // count it off) before `try_send` even returns.
        self.pending.fetch_add(1, Ordering::AcqRel);
        match self.queue.try_send(command) {
            Ok(()) => {}
            Err(_) => {
                self.pending.fetch_sub(1, Ordering::AcqRel);
                self.dropped.inc();
                debug!(reason = %event.reason, "Event dropped: the publisher's queue is full");
            }
        }
        Ok(())
    }

    /// Publishes every pending Event now; returns when they are sent.
    pub async fn flush(&self) {
        let (done, flushed) = oneshot::channel();
        if self.queue.send(Command::Flush(done)).await.is_ok() {
            let _ = flushed.await;
        }
    }

    /// Events handed over and not sent yet.
    pub fn pending(&self) -> usize {
        self.pending.load(Ordering::Acquire)
    }
}

/// client-go's EventSourceObjectSpamFilter: per object and reason, a bucket
/// of [`BURST`] tokens refilled by one every [`REFILL`].
#[derive(Default)]
struct SpamFilter {
    buckets: HashMap<(String, String), (f64, Instant)>,
}

impl SpamFilter {
    /// Buckets kept at most; full ones (objects quiet for long) go first.
    const MAX_BUCKETS: usize = 1024;

    fn allow(&mut self, event: &Event, reference: &ObjectReference, now: Instant) -> bool {
        let object = object_key(reference);
        let refill = |tokens: f64, since: Instant| {
            let earned = now.saturating_duration_since(since).as_secs_f64() / REFILL.as_secs_f64();
            (tokens + earned).min(f64::from(BURST))
        };
        if self.buckets.len() >= Self::MAX_BUCKETS {
            self.buckets.retain(|_, (tokens, since)| refill(*tokens, *since) < f64::from(BURST));
        }
        let (tokens, since) =
            self.buckets.entry((object, event.reason.clone())).or_insert((f64::from(BURST), now));
        *tokens = refill(*tokens, *since);
        *since = now;
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// The publisher: collects Events for [`DEFER`] after the first one of a
/// batch, then publishes the batch in order.
async fn publish_deferred(
    recorder: events::Recorder,
    mut commands: mpsc::Receiver<Command>,
    count: Arc<AtomicUsize>,
    dropped: Counter,
    activity: Activity,
) {
    let mut pending: Vec<(Event, ObjectReference)> = Vec::new();
    let mut filter = SpamFilter::default();
    // The batch's first Event: when it is due, and when it must go out.
    let (mut due, mut deadline) = (Instant::now(), Instant::now());
    loop {
        let command = if pending.is_empty() {
            commands.recv().await
        } else {
            match tokio::time::timeout_at(due, commands.recv()).await {
                Ok(command) => command,
                Err(_elapsed) => {
                    let now = Instant::now();
                    let quiet = activity.quiet_from(now, deadline);
                    if quiet > now {
                        due = quiet;
                    } else if activity.busy_at(now) {
                        // Held for HOLD while reconciles keep coming: the oldest
                        // goes now, the next HOLD later — one Event request in a
                        // busy stretch, not the whole batch back to back.
                        publish(&recorder, pending.remove(0), &count).await;
                        (due, deadline) = (now + HOLD, now + HOLD);
                    } else {
                        publish_all(&recorder, &mut pending, &count).await;
                    }
                    continue;
                }
            }
        };
        match command {
            Some(Command::Publish(item)) => {
                let (event, reference) = *item;
                if !filter.allow(&event, &reference, Instant::now()) {
                    dropped.inc();
                    count.fetch_sub(1, Ordering::AcqRel);
                    debug!(reason = %event.reason, "Event dropped: over the rate limit for this object");
                    continue;
                }
                if pending.is_empty() {
                    due = Instant::now() + DEFER;
                    deadline = due + HOLD;
                }
                pending.push((event, reference));
            }
            Some(Command::Flush(done)) => {
                publish_all(&recorder, &mut pending, &count).await;
                let _ = done.send(());
            }
            None => {
                // Every Recorder is gone: what is pending still goes out.
                publish_all(&recorder, &mut pending, &count).await;
                return;
            }
        }
    }
}

async fn publish_all(
    recorder: &events::Recorder,
    pending: &mut Vec<(Event, ObjectReference)>,
    count: &AtomicUsize,
) {
    for item in pending.drain(..) {
        publish(recorder, item, count).await;
    }
}

async fn publish(
    recorder: &events::Recorder,
    (event, reference): (Event, ObjectReference),
    count: &AtomicUsize,
) {
    if let Err(e) = recorder.publish(&event, &reference).await {
        warn!(error = %crate::connect::one_line(&e), reason = %event.reason, "could not record the Event");
    }
    count.fetch_sub(1, Ordering::AcqRel);
}

/// kube's `Event` is not `Clone`.
fn copy(event: &Event) -> Event {
    Event {
        type_: event.type_,
        reason: event.reason.clone(),
        note: event.note.clone(),
        action: event.action.clone(),
        secondary: event.secondary.clone(),
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
    async fn events_go_out_after_the_deferral_in_order() {
        let (client, api) = MockApi::start(Scenario::Accept);
        let recorder = Recorder::new(client, reporter(), Counter::default());
        let queued = Instant::now();
        recorder.publish(&event("Created"), &reference("a")).await.unwrap();
        recorder.publish(&event("Corrected"), &reference("b")).await.unwrap();
        // Nothing is sent while the reconcile that queued them goes on.
        tokio::time::sleep(DEFER / 2).await;
        assert!(api.seen.lock().unwrap().is_empty());
        tokio::time::sleep(DEFER).await;
        let seen = api.seen.lock().unwrap().clone();
        assert_eq!(seen.len(), 2, "{seen:#?}");
        assert!(seen.iter().all(|s| s.is_event() && s.method == Method::POST));
        assert_eq!(seen[0].body["reason"], "Created");
        assert_eq!(seen[1].body["regarding"]["name"], "b");
        assert!(seen[0].at - queued >= DEFER, "sent {:?} after", seen[0].at - queued);
    }

    #[tokio::test(start_paused = true)]
    async fn events_wait_for_a_quiet_moment_but_not_for_ever() {
        let (client, api) = MockApi::start(Scenario::Accept);
        let recorder = Recorder::new(client, reporter(), Counter::default());
        let queued = Instant::now();
        recorder.publish(&event("Corrected"), &reference("a")).await.unwrap();
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
        recorder.publish(&event("Corrected"), &reference("b")).await.unwrap();
        while api.seen.lock().unwrap().len() < 2 {
            recorder.busy();
            tokio::time::sleep(Duration::from_millis(10)).await;
            assert!(queued.elapsed() <= DEFER + HOLD + Duration::from_millis(20));
        }
        assert!(queued.elapsed() >= DEFER + HOLD);
    }

    #[tokio::test(start_paused = true)]
    async fn reconciles_that_never_stop_let_one_event_out_per_hold() {
        let (client, api) = MockApi::start(Scenario::Accept);
        let recorder = Recorder::new(client, reporter(), Counter::default());
        for name in ["a", "b", "c"] {
            recorder.publish(&event("Corrected"), &reference(name)).await.unwrap();
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
        assert!(sent_at[0] >= DEFER + HOLD, "{sent_at:?}");
        assert!(sent_at[1] - sent_at[0] >= HOLD, "{sent_at:?}");
        assert!(sent_at[2] - sent_at[1] >= HOLD, "{sent_at:?}");
        // Quiet again: the rest would go at once (flush sends none left).
        assert_eq!(recorder.pending(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn dropping_the_last_recorder_sends_what_is_pending() {
        let (client, api) = MockApi::start(Scenario::Accept);
        let recorder = Recorder::new(client, reporter(), Counter::default());
        recorder.publish(&event("Created"), &reference("a")).await.unwrap();
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
            recorder.publish(&event("Corrected"), &version(n)).await.unwrap();
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
            recorder.publish(&contended(writer), &version(n)).await.unwrap();
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
            recorder
                .publish(&event("Corrected"), &reference(&format!("object-{n}")))
                .await
                .unwrap();
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        // The publisher is stuck on its first request; the queue holds QUEUE at most.
        assert_eq!(api.event_requests().len(), 1);
        assert!(recorder.pending() <= QUEUE + 1, "{} pending", recorder.pending());
        assert!(dropped.get() as usize >= 1000 - QUEUE - 1, "{} dropped", dropped.get());
    }

    #[tokio::test(start_paused = true)]
    async fn flush_sends_what_is_pending_at_once() {
        let (client, api) = MockApi::start(Scenario::Accept);
        let recorder = Recorder::new(client, reporter(), Counter::default());
        let queued = Instant::now();
        recorder.publish(&event("Created"), &reference("a")).await.unwrap();
        recorder.flush().await;
        let seen = api.seen.lock().unwrap().clone();
        assert_eq!(seen.len(), 1, "{seen:#?}");
        assert!(seen[0].at - queued < DEFER);
    }
}
