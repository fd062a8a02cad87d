//! The controller's Prometheus metrics, served on `/metrics`.
//!
//! The e2e suite reads them to prove what the course asks to observe by hand:
//! how many reconciles ran (step 3's coalescing), how many writes they made
//! (none when the object is already right), and when a key was given up.

use std::time::Duration;

use prometheus_client::{
    encoding::{EncodeLabelSet, EncodeLabelValue, text::encode},
    metrics::{counter::Counter, family::Family, gauge::Gauge, histogram::Histogram},
    registry::Registry,
};

/// How a reconcile ended.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, EncodeLabelValue)]
#[allow(non_camel_case_types)] // the label values are the variant names
pub enum ReconcileResult {
    created,
    updated,
    unchanged,
    /// The object is being deleted (a finalizer holds it): left alone.
    deleting,
    /// `immutable: true` with other data: reported, not updated, not retried.
    immutable,
    /// 409 on an update: someone else wrote first; the newer version's event
    /// brings the key back.
    conflict,
    /// 409 AlreadyExists on a create: the cache is behind the API server;
    /// retried with backoff, like a failure.
    behind,
    error,
    /// The reconcile panicked; the key was released and is retried with backoff.
    panicked,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    result: ReconcileResult,
}

/// The API verb of a write to the watched ConfigMap.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, EncodeLabelValue)]
#[allow(non_camel_case_types)]
pub enum WriteVerb {
    create,
    update,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VerbLabels {
    verb: WriteVerb,
}

pub struct Metrics {
    registry: Registry,
    reconciles: Family<ResultLabels, Counter>,
    duration: Histogram,
    writes: Family<VerbLabels, Counter>,
    give_ups: Counter,
    panics: Counter,
    events_dropped: Counter,
    in_flight: Gauge,
    queue_depth: Gauge,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::default();
        let reconciles = Family::<ResultLabels, Counter>::default();
        // 1 ms .. ~16 s: a reconcile is one cache read and at most one write.
        let duration = Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
            0.001, 2.0, 15,
        ));
        let writes = Family::<VerbLabels, Counter>::default();
        let give_ups = Counter::default();
        registry.register("reconcile", "Reconciles run, by result", reconciles.clone());
        registry.register(
            "reconcile_duration_seconds",
            "Time spent in reconcile, including its API writes",
            duration.clone(),
        );
        registry.register(
            "api_writes",
            "Writes sent to the API server for the watched ConfigMap, by verb",
            writes.clone(),
        );
        registry.register(
            "reconcile_give_ups",
            "Keys given up after the retry limit (the next event or resync tries again)",
            give_ups.clone(),
        );
        let panics = Counter::default();
        registry.register(
            "reconcile_panics",
            "Reconciles that panicked (each logged at error level; its worker goes on)",
            panics.clone(),
        );
        let events_dropped = Counter::default();
        registry.register(
            "events_dropped",
            "Kubernetes Events not sent: over the per-object rate limit, or the queue full",
            events_dropped.clone(),
        );
        let in_flight = Gauge::default();
        registry.register("reconciles_in_flight", "Reconciles running now", in_flight.clone());
        let queue_depth = Gauge::default();
        registry.register(
            "workqueue_depth",
            "Keys waiting in the work queue, including retries waiting for their delay",
            queue_depth.clone(),
        );
        Self {
            registry,
            reconciles,
            duration,
            writes,
            give_ups,
            panics,
            events_dropped,
            in_flight,
            queue_depth,
        }
    }
}

impl Metrics {
    pub fn reconciled(&self, result: ReconcileResult, took: Duration) {
        self.reconciles.get_or_create(&ResultLabels { result }).inc();
        self.duration.observe(took.as_secs_f64());
    }

    pub fn wrote(&self, verb: WriteVerb) {
        self.writes.get_or_create(&VerbLabels { verb }).inc();
    }

    pub fn gave_up(&self) {
        self.give_ups.inc();
    }

    pub fn panicked(&self) {
        self.panics.inc();
    }

    pub fn panics(&self) -> u64 {
        self.panics.get()
    }

    /// The counter of Events not sent (shared with the Event publisher).
    pub fn events_dropped_counter(&self) -> Counter {
        self.events_dropped.clone()
    }

    /// Counts a running reconcile until the guard is dropped.
    pub fn in_flight(&self) -> InFlight<'_> {
        self.in_flight.inc();
        InFlight(&self.in_flight)
    }

    /// Reconciles running now.
    pub fn running(&self) -> i64 {
        self.in_flight.get()
    }

    /// The gauge the work queue keeps at its depth.
    pub fn queue_depth_gauge(&self) -> Gauge {
        self.queue_depth.clone()
    }

    pub fn reconciles(&self, result: ReconcileResult) -> u64 {
        self.reconciles.get_or_create(&ResultLabels { result }).get()
    }

    pub fn writes(&self, verb: WriteVerb) -> u64 {
        self.writes.get_or_create(&VerbLabels { verb }).get()
    }

    pub fn give_ups(&self) -> u64 {
        self.give_ups.get()
    }

    /// The Prometheus/OpenMetrics text exposition.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        encode(&mut out, &self.registry).expect("writing to a String cannot fail");
        out
    }
}

/// See [`Metrics::in_flight`].
pub struct InFlight<'a>(&'a Gauge);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.dec();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exposition_has_the_documented_names() {
        let m = Metrics::default();
        m.reconciled(ReconcileResult::created, Duration::from_millis(3));
        m.reconciled(ReconcileResult::unchanged, Duration::from_millis(1));
        m.wrote(WriteVerb::create);
        m.gave_up();
        let text = m.encode();
        for line in [
            r#"reconcile_total{result="created"} 1"#,
            r#"reconcile_total{result="unchanged"} 1"#,
            r#"api_writes_total{verb="create"} 1"#,
            "reconcile_give_ups_total 1",
            "reconcile_duration_seconds_count 2",
            "reconciles_in_flight 0",
            "workqueue_depth 0",
        ] {
            assert!(text.lines().any(|l| l == line), "missing {line:?} in\n{text}");
        }
    }
}
