//! Kubernetes Events, published a moment after the write they report.
//!
//! Why deferred: an Event reports a write (my-config created or corrected)
//! that the API server is, at that very moment, sending to every watcher of
//! my-config. Published at once, the Event's POST competes with that fan-out
//! for the API server: on the 2-core envtest lab `cargo xtask bench` measured
//! self-heal and correction at 1.2–1.45 × the floor (+2–3 ms p50) with the
//! Event published in the reconcile, about the same with it published at once
//! from a task of its own, and 1.0 × with it published 100 ms later or not at
//! all. client-go's recorder is asynchronous for the same kind of reason (its
//! broadcaster writes Events from a goroutine of its own); a person reading
//! `kubectl describe` cannot tell 100 ms.
//!
//! The calls are kube's `Recorder`'s (`new(client, reporter)`,
//! `publish(&event, &reference)`), so a reconcile reads the same; Events keep
//! kube's series (a repeat within minutes patches the same Event). A failed
//! Event is logged here; it never failed a reconcile. [`Recorder::flush`]
//! publishes what is pending at once (shutdown).

use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::{
    Client,
    runtime::events::{self, Event, Reporter},
};
use tokio::{
    sync::{mpsc, oneshot},
    time::Instant,
};
use tracing::warn;

/// How long an Event waits before it is published.
pub const DEFER: Duration = Duration::from_millis(100);

/// Hands Events to a publisher task that sends them [`DEFER`] later.
#[derive(Clone)]
pub struct Recorder {
    queue: mpsc::UnboundedSender<Command>,
}

enum Command {
    /// Boxed: an Event is large next to a flush.
    Publish(Box<(Event, ObjectReference)>),
    Flush(oneshot::Sender<()>),
}

impl Recorder {
    /// Starts the publisher task (it ends when every clone is dropped, after
    /// publishing what is pending).
    pub fn new(client: Client, reporter: Reporter) -> Self {
        let (queue, commands) = mpsc::unbounded_channel();
        tokio::spawn(publish_deferred(
            events::Recorder::new(client, reporter),
            commands,
        ));
        Recorder { queue }
    }

    /// Queues `event` about `reference`; it is published [`DEFER`] from now.
    /// Returns at once and does not fail (the `Result` is kube's signature):
    /// a publishing error is logged by the publisher.
    pub async fn publish(
        &self,
        event: &Event,
        reference: &ObjectReference,
    ) -> Result<(), kube::Error> {
        // The publisher outlives every Recorder, so the send cannot fail.
        let _ = self
            .queue
            .send(Command::Publish(Box::new((copy(event), reference.clone()))));
        Ok(())
    }

    /// Publishes every pending Event now; returns when they are sent.
    pub async fn flush(&self) {
        let (done, flushed) = oneshot::channel();
        if self.queue.send(Command::Flush(done)).is_ok() {
            let _ = flushed.await;
        }
    }
}

/// The publisher: collects Events for [`DEFER`] after the first one of a
/// batch, then publishes the batch in order.
async fn publish_deferred(
    recorder: events::Recorder,
    mut commands: mpsc::UnboundedReceiver<Command>,
) {
    let mut pending: Vec<(Event, ObjectReference)> = Vec::new();
    let mut due = Instant::now();
    loop {
        let command = if pending.is_empty() {
            commands.recv().await
        } else {
            match tokio::time::timeout_at(due, commands.recv()).await {
                Ok(command) => command,
                Err(_elapsed) => {
                    publish_all(&recorder, &mut pending).await;
                    continue;
                }
            }
        };
        match command {
            Some(Command::Publish(item)) => {
                if pending.is_empty() {
                    due = Instant::now() + DEFER;
                }
                pending.push(*item);
            }
            Some(Command::Flush(done)) => {
                publish_all(&recorder, &mut pending).await;
                let _ = done.send(());
            }
            None => {
                // Every Recorder is gone: what is pending still goes out.
                publish_all(&recorder, &mut pending).await;
                return;
            }
        }
    }
}

async fn publish_all(recorder: &events::Recorder, pending: &mut Vec<(Event, ObjectReference)>) {
    for (event, reference) in pending.drain(..) {
        if let Err(e) = recorder.publish(&event, &reference).await {
            warn!(error = %e, reason = %event.reason, "could not record the Event");
        }
    }
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
        Reporter {
            controller: "my-controller".into(),
            instance: None,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn events_go_out_after_the_deferral_in_order() {
        let (client, api) = MockApi::start(Scenario::Accept);
        let recorder = Recorder::new(client, reporter());
        let queued = Instant::now();
        recorder
            .publish(&event("Created"), &reference("a"))
            .await
            .unwrap();
        recorder
            .publish(&event("Corrected"), &reference("b"))
            .await
            .unwrap();
        // Nothing is sent while the reconcile that queued them goes on.
        tokio::time::sleep(DEFER / 2).await;
        assert!(api.seen.lock().unwrap().is_empty());
        tokio::time::sleep(DEFER).await;
        let seen = api.seen.lock().unwrap().clone();
        assert_eq!(seen.len(), 2, "{seen:#?}");
        assert!(
            seen.iter()
                .all(|s| s.is_event() && s.method == Method::POST)
        );
        assert_eq!(seen[0].body["reason"], "Created");
        assert_eq!(seen[1].body["regarding"]["name"], "b");
        assert!(
            seen[0].at - queued >= DEFER,
            "sent {:?} after",
            seen[0].at - queued
        );
    }

    #[tokio::test(start_paused = true)]
    async fn dropping_the_last_recorder_sends_what_is_pending() {
        let (client, api) = MockApi::start(Scenario::Accept);
        let recorder = Recorder::new(client, reporter());
        recorder
            .publish(&event("Created"), &reference("a"))
            .await
            .unwrap();
        drop(recorder);
        let seen = api.finish().await;
        assert_eq!(seen.len(), 1, "{seen:#?}");
    }

    #[tokio::test(start_paused = true)]
    async fn flush_sends_what_is_pending_at_once() {
        let (client, api) = MockApi::start(Scenario::Accept);
        let recorder = Recorder::new(client, reporter());
        let queued = Instant::now();
        recorder
            .publish(&event("Created"), &reference("a"))
            .await
            .unwrap();
        recorder.flush().await;
        let seen = api.seen.lock().unwrap().clone();
        assert_eq!(seen.len(), 1, "{seen:#?}");
        assert!(seen[0].at - queued < DEFER);
    }
}
