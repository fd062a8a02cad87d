//! client-go's backoff for a watch that keeps failing, for kube's watcher:
//! `.backoff(WatchBackoff::default())` where kube offers `.default_backoff()`.
//!
//! kube's stream backoff resets its delay on every item the watcher yields,
//! and a watcher that lists again yields `Init` before the LIST is even sent,
//! so a LIST that keeps failing (401 from an expired token, 403, 429, 5xx)
//! is retried after the first delay forever. client-go's reflector instead
//! doubles the delay from 800 ms up to 30 s (jittered) and starts again only
//! after 2 minutes without a failure. This does the same: `reset` is ignored,
//! and the quiet period alone resets it.

use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBackoff, ExponentialBuilder};
use tokio::time::Instant;

/// The delays between attempts of a failing watch (client-go's reflector:
/// `NewExponentialBackoffManager(800ms, 30s, 2m, 2.0, 1.0)`).
pub struct WatchBackoff {
    builder: ExponentialBuilder,
    delays: ExponentialBackoff,
    last_failure: Option<Instant>,
    quiet: Duration,
}

impl Default for WatchBackoff {
    /// Delays from 800 ms, doubling up to 30 s (each up to twice that with
    /// jitter), back to 800 ms after 2 minutes without a failure.
    fn default() -> Self {
        let builder = ExponentialBuilder::default()
            .with_min_delay(Duration::from_millis(800))
            .with_max_delay(Duration::from_secs(30))
            .with_factor(2.0)
            .with_jitter()
            .without_max_times();
        let quiet = Duration::from_secs(120);
        WatchBackoff { builder, delays: builder.build(), last_failure: None, quiet }
    }
}

impl Iterator for WatchBackoff {
    type Item = Duration;

    /// The delay before the next attempt, after a failure now.
    fn next(&mut self) -> Option<Duration> {
        let now = Instant::now();
        if self.last_failure.is_some_and(|last| now.duration_since(last) > self.quiet) {
            self.delays = self.builder.build();
        }
        self.last_failure = Some(now);
        self.delays.next()
    }
}

impl kube::runtime::utils::Backoff for WatchBackoff {
    /// Ignored: the stream calls it for every item, `Init` included (see the
    /// module's header); only a quiet period starts the delays again.
    fn reset(&mut self) {}
}

#[cfg(test)]
mod tests {
    use kube::runtime::utils::Backoff as _;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn delays_double_to_the_cap_and_items_do_not_reset_them() {
        let mut backoff = WatchBackoff::default();
        let mut delays = Vec::new();
        for _ in 0..8 {
            delays.push(backoff.next().unwrap());
            // What kube's stream does on the `Init` that precedes each re-list.
            backoff.reset();
            tokio::time::advance(Duration::from_secs(1)).await;
        }
        let floors = [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0];
        for (delay, floor) in delays.iter().zip(floors) {
            let s = delay.as_secs_f64();
            // Jitter adds up to the delay itself.
            assert!(s >= floor * 0.999 && s <= floor * 2.0 + 1e-3, "{delays:?}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn two_quiet_minutes_start_the_delays_again() {
        let mut backoff = WatchBackoff::default();
        for _ in 0..5 {
            backoff.next();
        }
        tokio::time::advance(Duration::from_secs(119)).await;
        assert!(backoff.next().unwrap() >= Duration::from_secs(25), "not quiet long enough");
        tokio::time::advance(Duration::from_secs(121)).await;
        assert!(backoff.next().unwrap() < Duration::from_millis(1600));
    }
}

/// kube's watcher against an API server whose LIST always answers 401.
#[cfg(test)]
mod against_a_watcher {
    use futures::StreamExt;
    use http::{Request, Response};
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::{
        Api, Client,
        client::Body,
        runtime::{WatchStreamExt as _, watcher},
    };

    use super::*;

    /// The times of the first `lists` LISTs of a watcher with this crate's
    /// backoff (`ours`) or kube's default one.
    async fn list_times(lists: usize, ours: bool) -> Vec<Duration> {
        let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let client = Client::new(service, "default");
        let start = Instant::now();
        let server = tokio::spawn(async move {
            let mut times = Vec::new();
            while let Some((request, reply)) = handle.next_request().await {
                assert!(request.uri().path().ends_with("/configmaps"), "{}", request.uri());
                times.push(start.elapsed());
                let status = serde_json::json!({"kind": "Status", "apiVersion": "v1",
                    "status": "Failure", "reason": "Unauthorized", "code": 401});
                let body = Body::from(serde_json::to_vec(&status).unwrap());
                reply.send_response(Response::builder().status(401).body(body).unwrap());
                if times.len() == lists {
                    return times;
                }
            }
            times
        });
        let events = watcher(Api::<ConfigMap>::namespaced(client, "default"), Default::default());
        let stream = if ours {
            events.backoff(WatchBackoff::default()).map(drop).boxed()
        } else {
            events.default_backoff().map(drop).boxed()
        };
        let drive = tokio::spawn(stream.for_each(|()| async {}));
        let times = server.await.unwrap();
        drive.abort();
        times
    }

    fn gaps(times: &[Duration]) -> Vec<f64> {
        times.windows(2).map(|w| (w[1] - w[0]).as_secs_f64()).collect()
    }

    #[tokio::test(start_paused = true)]
    async fn a_list_that_keeps_failing_is_retried_at_growing_gaps() {
        let times = list_times(8, true).await;
        let gaps = gaps(&times);
        for (gap, floor) in gaps.iter().zip([0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0]) {
            assert!(*gap >= floor * 0.999, "gaps {gaps:?}");
        }
    }

    /// Why `WatchBackoff` exists: kube's own default resets on the `Init`
    /// before each LIST, so its gaps never grow. Should kube change that,
    /// this fails, and `WatchBackoff` can go.
    #[tokio::test(start_paused = true)]
    async fn kubes_default_backoff_does_not_grow_across_relists() {
        let times = list_times(8, false).await;
        let gaps = gaps(&times);
        assert!(gaps.iter().all(|g| *g < 3.2), "kube's default grew: {gaps:?}");
    }
}
