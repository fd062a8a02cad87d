//! Wires the pieces together: informer → keys → queue → workers → reconcile.
//!
//! Why not kube-runtime's `Controller`: it looks every scheduled key up in its
//! store and, when the object is absent, yields `ObjectNotFound` instead of
//! calling reconcile. This controller's main job is the absent case (create on
//! start, recreate after delete), so it reconciles *keys*, the way the course's
//! client-go controller does: a reflector (informer + cache) turns every watch
//! event into the one key it concerns, a work queue coalesces the keys, and
//! the workers reconcile a key whether or not its object exists.

use std::{
    future::Future,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::Context as _;
use backon::{ExponentialBuilder, Retryable};
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    Api, Client,
    runtime::{
        WatchStreamExt,
        events::Reporter,
        reflector::{self, ObjectRef, store::Writer},
        watcher,
    },
};
use tokio::{net::TcpListener, task::JoinHandle};
use tracing::{debug, error, info, warn};

use crate::{
    cli::Settings,
    http,
    metrics::Metrics,
    queue::WorkQueue,
    reconcile::{self, Context, key_of, result_label, show},
    version::{self, Skew},
};

/// The controller's name in Events and logs.
pub const CONTROLLER_NAME: &str = "my-controller";

/// Log lines the e2e suite looks for (messages only; fields follow them).
pub const LOG_STARTING: &str = "starting";
pub const LOG_SYNCED: &str = "cache synced";
/// The watch had to list again (e.g. after a 410 Gone: its resourceVersion
/// was too old for the API server).
pub const LOG_RELISTED: &str = "watch re-listed; cache in sync again";
pub const LOG_WATCH_FAILED: &str = "watch failed; retrying with backoff";
pub const LOG_UNREACHABLE: &str = "API server not reachable yet";
/// A 409: the newer version's watch event brings the key back.
pub const LOG_CONFLICT: &str = "conflict; the newer version's event brings the key back";
pub const LOG_SHUTTING_DOWN: &str = "shutting down: no new work; running reconciles finish first";

pub type Key = ObjectRef<ConfigMap>;

/// Runs the controller until `shutdown` completes, then stops taking work,
/// lets running reconciles finish and returns.
pub async fn run(
    client: Client,
    settings: Settings,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    let listener = TcpListener::bind(settings.listen).await.with_context(|| {
        format!(
            "cannot listen on {}: choose another address with --listen",
            settings.listen
        )
    })?;
    info!(
        target = %settings.desired,
        listen = %settings.listen,
        built_for = %version::target(),
        "{LOG_STARTING}"
    );
    let metrics = Arc::new(Metrics::default());
    let ready = Arc::new(AtomicBool::new(false));
    let (cache, writer) = reflector::store();
    let reporter = Reporter {
        controller: CONTROLLER_NAME.into(),
        // Set from the pod name in the Deployment; absent when run as a process.
        instance: std::env::var("POD_NAME").ok(),
    };
    let ctx = Arc::new(Context {
        client: client.clone(),
        cache,
        desired: settings.desired.clone(),
        metrics: metrics.clone(),
        recorder: crate::events::Recorder::new(client.clone(), reporter),
        reconcile_delay: settings.reconcile_delay,
    });
    let queue =
        WorkQueue::new(settings.rate_limit.clone()).with_depth_gauge(metrics.queue_depth_gauge());
    let key = key_of(&settings.desired);

    let (http_stop, http_stopped) = tokio::sync::oneshot::channel::<()>();
    let status = http::Status {
        ready: ready.clone(),
        metrics,
    };
    let server = tokio::spawn(http::serve(listener, status, async {
        let _ = http_stopped.await;
    }));
    let background: Vec<JoinHandle<()>> = vec![
        tokio::spawn(log_server_version(client.clone())),
        tokio::spawn(inform(
            Api::namespaced(client, settings.desired.namespace()),
            settings.desired.name().to_string(),
            writer,
            queue.clone(),
            key.clone(),
            ready,
        )),
        tokio::spawn(resync(queue.clone(), key, settings.resync)),
    ];
    let workers: Vec<_> = (0..settings.workers)
        .map(|_| tokio::spawn(work(ctx.clone(), queue.clone(), settings.max_retries)))
        .collect();

    shutdown.await;
    info!("{LOG_SHUTTING_DOWN}");
    let started = Instant::now();
    queue.shut_down();
    for task in &background {
        task.abort();
    }
    for worker in workers {
        worker.await.context("a worker panicked")?;
    }
    // Events are published a moment after their write: send what is pending.
    ctx.recorder.flush().await;
    let _ = http_stop.send(());
    server.await.context("the HTTP server panicked")??;
    info!(took = ?started.elapsed(), "stopped");
    Ok(())
}

/// The informer (course step 2): list, then watch, the one object we care
/// about. The field selector keeps the cache at one object however many
/// ConfigMaps the namespace holds. Every event only enqueues the key.
async fn inform(
    api: Api<ConfigMap>,
    name: String,
    writer: Writer<ConfigMap>,
    queue: WorkQueue<Key>,
    key: Key,
    ready: Arc<AtomicBool>,
) {
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    // Quicker than kube's default (0.8 s doubling to 30 s): one watch of one
    // object costs the API server little, and healing fast after an API server
    // restart is the point of this controller. Capped at 1 s (2 s with
    // jitter) so that, however long the outage was, the watch is back within
    // 2 s of the API server's return: a delete made then heals within 5 s.
    let backoff = ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(200))
        .with_max_delay(Duration::from_secs(1))
        .with_jitter()
        .without_max_times();
    let events = reflector::reflector(
        writer,
        watcher(api, config).backoff(watcher::ExponentialBackoff::from(backoff)),
    );
    futures::pin_mut!(events);
    while let Some(event) = events.next().await {
        match event {
            // The initial list (or a relist after the watch expired) is complete.
            // Always enqueue here: this is the startup kick, and after a
            // relist it covers an object deleted while the watch was down,
            // for which no Delete event ever arrives.
            Ok(watcher::Event::InitDone) => {
                // Enqueue before reporting ready: a ready controller has its
                // startup reconcile queued already.
                queue.add(key.clone());
                if ready.swap(true, Ordering::AcqRel) {
                    info!("{LOG_RELISTED}");
                } else {
                    info!("{LOG_SYNCED}");
                }
            }
            // The field selector means every object here is ours: one key.
            Ok(watcher::Event::Apply(_) | watcher::Event::Delete(_)) => {
                queue.add(key.clone());
            }
            Ok(watcher::Event::Init | watcher::Event::InitApply(_)) => {}
            Err(e) => warn!(error = %e, "{LOG_WATCH_FAILED}"),
        }
    }
}

/// Level-triggered safety net: reconcile every `period` even without events.
async fn resync(queue: WorkQueue<Key>, key: Key, period: Duration) {
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        debug!("resync");
        queue.add(key.clone());
    }
}

/// A worker (course step 3's `runWorker`): take a key, process it, repeat,
/// until the queue shuts down.
pub async fn work(ctx: Arc<Context>, queue: WorkQueue<Key>, max_retries: u32) {
    while let Some(key) = queue.get().await {
        process(&ctx, &queue, &key, max_retries).await;
        queue.done(&key);
    }
}

/// One reconcile of `key` and the course's failure policy (`handleErr`):
/// forget on success; on failure retry with backoff while
/// `NumRequeues(key) < max_retries`; then give up with one error line.
/// A conflict is the exception: see [`LOG_CONFLICT`].
pub async fn process(ctx: &Context, queue: &WorkQueue<Key>, key: &Key, max_retries: u32) {
    let started = Instant::now();
    let result = {
        let _running = ctx.metrics.in_flight();
        reconcile::reconcile(ctx, key).await
    };
    ctx.metrics
        .reconciled(result_label(&result), started.elapsed());
    let Err(err) = result else {
        queue.forget(key);
        return;
    };
    if err.is_conflict() {
        // Someone wrote between our cache's version and our write. Their write
        // is on its way through the watch, and its event re-adds the key (at
        // once, coalesced: if it came during this reconcile, `done` queues the
        // key again); that reconcile reads the newer version. So a conflict
        // takes no timer, no token of the overall bucket and no step towards a
        // give-up: under many writers, timed retries would pile up behind the
        // bucket and give-ups would fill the error log, for nothing the events
        // do not already do. Should the watch be down, its re-list enqueues the
        // key, and the resync is the backstop. Routine, so info level.
        info!(key = %show(key), "{LOG_CONFLICT}");
        return;
    }
    let requeues = queue.num_requeues(key);
    if requeues < max_retries {
        let delay = queue.add_rate_limited(key.clone());
        let attempt = requeues + 1;
        warn!(key = %show(key), attempt, retry_in = ?delay, error = %err, "reconcile failed; retrying");
    } else {
        queue.forget(key);
        ctx.metrics.gave_up();
        error!(
            key = %show(key),
            attempts = requeues + 1,
            error = %err,
            "giving up on this key; the next change or resync tries again"
        );
    }
}

/// Logs the API server's version next to the one this build targets, with a
/// warning when they are more than one minor apart. An API server that does not
/// answer is retried (logging each attempt); this never ends the process.
async fn log_server_version(client: Client) {
    let ask = || async { client.apiserver_version().await };
    let info = ask
        .retry(
            ExponentialBuilder::default()
                .with_min_delay(Duration::from_millis(200))
                .with_max_delay(Duration::from_secs(10))
                .without_max_times(),
        )
        .notify(|e, next| warn!(error = %e, retry_in = ?next, "{LOG_UNREACHABLE}"))
        .await;
    let Ok(info) = info else { return };
    let client_minor = version::target_minor();
    let Some(server_minor) = version::parse_minor(&info.minor) else {
        warn!(server = %info.git_version, "cannot read the API server's minor version");
        return;
    };
    let skew = Skew::between(client_minor, server_minor);
    match skew {
        Skew::Same => {
            info!(server = %info.git_version, built_for = %version::target(), "API server version")
        }
        Skew::OneApart { .. } => warn!(server = %info.git_version, "{skew}"),
        Skew::TooFar { .. } => error!(server = %info.git_version, "{skew}"),
    }
}

/// Completes on SIGINT (Ctrl-C) or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("installing a SIGTERM handler cannot fail on unix");
        tokio::select! {
            _ = ctrl_c => {},
            _ = term.recv() => {},
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}

#[cfg(test)]
mod tests {
    use ::http::Method;

    use super::*;
    use crate::{
        fixtures::{MockApi, Scenario, context, drifted},
        metrics::ReconcileResult,
        queue::RateLimit,
    };

    /// Polls `done` in (paused, auto-advancing) tokio time; fails with `what`
    /// after a virtual minute.
    async fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        while !done() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "timed out waiting for {what}"
            );
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_conflict_waits_for_the_watch_event_not_a_timer() {
        let (client, api) = MockApi::start(Scenario::ConflictOnce);
        let (ctx, _writer) = context(client, Some(drifted()));
        let ctx = Arc::new(ctx);
        let queue = WorkQueue::new(RateLimit::default());
        let key = key_of(&ctx.desired);
        queue.add(key.clone());
        let worker = tokio::spawn(work(ctx.clone(), queue.clone(), 5));
        wait_for("the conflict", || {
            ctx.metrics.reconciles(ReconcileResult::conflict) == 1
        })
        .await;
        // No timed retry, no failure counted: an hour of (virtual) quiet sends nothing.
        tokio::time::sleep(Duration::from_secs(3600)).await;
        assert!(queue.is_idle());
        assert_eq!(queue.num_requeues(&key), 0);
        assert_eq!(api.config_map_requests().len(), 1);

        // The newer version's watch event (the informer adds the key): it is corrected.
        queue.add(key);
        wait_for("the corrected update", || {
            ctx.metrics.reconciles(ReconcileResult::updated) == 1
        })
        .await;
        queue.shut_down();
        worker.await.unwrap();
        assert_eq!(ctx.metrics.give_ups(), 0);
        let puts = api.config_map_requests();
        assert_eq!(puts.len(), 2, "{puts:#?}");
        assert!(puts.iter().all(|s| s.method == Method::PUT));
    }

    #[tokio::test(start_paused = true)]
    async fn forbidden_is_tried_six_times_with_growing_delays_then_given_up() {
        let (client, api) = MockApi::start(Scenario::Forbidden);
        let (ctx, _writer) = context(client, None);
        let ctx = Arc::new(ctx);
        let queue = WorkQueue::new(RateLimit::default());
        let key = key_of(&ctx.desired);
        queue.add(key.clone());
        let worker = tokio::spawn(work(ctx.clone(), queue.clone(), 5));
        wait_for("the give-up", || ctx.metrics.give_ups() == 1).await;

        let attempts = api.config_map_requests();
        assert_eq!(attempts.len(), 6, "1 attempt + 5 retries: {attempts:#?}");
        assert!(attempts.iter().all(|s| s.method == Method::POST));
        let gaps: Vec<Duration> = attempts.windows(2).map(|w| w[1].at - w[0].at).collect();
        assert!(
            gaps.windows(2).all(|g| g[1] > g[0]),
            "delays must grow: {gaps:?}"
        );
        assert!(gaps[0] >= Duration::from_millis(5), "{gaps:?}");
        assert_eq!(ctx.metrics.reconciles(ReconcileResult::error), 6);

        // Given up: nothing is scheduled, and an hour of (virtual) quiet sends nothing.
        assert!(queue.is_idle());
        tokio::time::sleep(Duration::from_secs(3600)).await;
        assert_eq!(api.config_map_requests().len(), 6);

        // A new trigger (event or resync) starts a fresh round.
        queue.add(key);
        wait_for("the new attempt", || {
            ctx.metrics.reconciles(ReconcileResult::error) == 7
        })
        .await;
        queue.shut_down();
        worker.await.unwrap();
        assert_eq!(api.config_map_requests().len(), 7);
        assert_eq!(ctx.metrics.give_ups(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn an_immutable_object_is_not_retried() {
        let (client, api) = MockApi::start(Scenario::Immutable);
        let (ctx, _writer) = context(client, Some(drifted()));
        let ctx = Arc::new(ctx);
        let queue = WorkQueue::new(RateLimit::default());
        queue.add(key_of(&ctx.desired));
        let worker = tokio::spawn(work(ctx.clone(), queue.clone(), 5));
        wait_for("the report", || {
            ctx.metrics.reconciles(ReconcileResult::immutable) == 1
        })
        .await;
        // An hour of (virtual) quiet: no retry of a request that cannot succeed.
        tokio::time::sleep(Duration::from_secs(3600)).await;
        assert!(queue.is_idle());
        queue.shut_down();
        worker.await.unwrap();
        assert_eq!(api.config_map_requests().len(), 1);
        assert_eq!(ctx.metrics.reconciles(ReconcileResult::error), 0);
        assert_eq!(ctx.metrics.give_ups(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn shutdown_waits_for_the_running_reconcile() {
        let (client, api) = MockApi::start(Scenario::Accept);
        let (mut ctx, _writer) = context(client, None);
        ctx.reconcile_delay = Duration::from_secs(2);
        let ctx = Arc::new(ctx);
        let queue = WorkQueue::new(RateLimit::default());
        queue.add(key_of(&ctx.desired));
        let worker = tokio::spawn(work(ctx.clone(), queue.clone(), 5));
        wait_for("the reconcile to run", || ctx.metrics.running() == 1).await;
        queue.shut_down();
        worker.await.unwrap();
        // The slow reconcile was finished, not cut off.
        assert_eq!(ctx.metrics.reconciles(ReconcileResult::created), 1);
        assert_eq!(ctx.metrics.running(), 0);
        assert_eq!(api.config_map_requests().len(), 1);
    }
}
