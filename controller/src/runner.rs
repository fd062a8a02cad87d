//! Wires the pieces together: informer → keys → queue → workers → reconcile.
//!
//! Why not kube-runtime's `Controller`: it looks every scheduled key up in its
//! store and, when the object is absent, yields `ObjectNotFound` instead of
//! calling reconcile. This controller's main job is the absent case (create on
//! start, recreate after delete), so it reconciles *keys*, the way the course's
//! client-go controller does: a reflector (informer + cache) turns every watch
//! event into the one key it concerns, a work queue coalesces the keys, and
//! the worker reconciles a key whether or not its object exists.
//!
//! Nothing is reconciled before the informer's first list is complete (the
//! course's `WaitForCacheSync`): the worker and the resync start after it.
//! Shutdown is bounded by `--shutdown-grace`.

use std::{
    future::Future,
    panic::AssertUnwindSafe,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::Context as _;
use backon::{ExponentialBuilder, Retryable};
use futures::{FutureExt, Stream, StreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    Api, Client,
    runtime::{
        events::Reporter,
        reflector::{self, store::Writer},
        watcher,
    },
};
use tokio::{net::TcpListener, sync::oneshot, task::JoinHandle};
use tracing::{debug, error, info, warn};
use workqueue::{RateLimit, WatchBackoff, WorkQueue};

use crate::{
    cli::Cli,
    connect,
    desired::Desired,
    http::{self, Workers},
    metrics::{Metrics, ReconcileResult},
    pace::Pace,
    reconcile::{self, Context, Error, Key, key_of, result_label, show},
    shutdown::{Grace, Stopped, finish_work, stop_serving},
    telemetry,
    version::{self, Skew},
};

/// The controller's name in Events and logs.
pub const CONTROLLER_NAME: &str = "my-controller";
/// Workers taking keys from the queue. One: the controller has one key, and
/// the queue never hands a key to two workers at once, so more would idle.
pub const WORKERS: usize = 1;

/// Log lines the e2e suite looks for (messages only; fields follow them).
pub const LOG_STARTING: &str = "starting";
pub const LOG_SYNCED: &str = "cache synced";
/// The watch had to list again (e.g. after a 410 Gone: its resourceVersion
/// was too old for the API server).
pub const LOG_RELISTED: &str = "watch re-listed; cache in sync again";
pub const LOG_WATCH_FAILED: &str = "watch failed; not ready; listing again after a pause";
/// A response (the watch's, or the LIST's) brought no byte within the read
/// timeout: its connection is taken for dead.
pub const LOG_WATCH_SILENT: &str = "no byte from the API server within --watch-timeout + 3s: connection taken for dead; not ready; listing again after a pause";

pub const LOG_UNREACHABLE: &str = "API server not reachable yet";
/// A 409 on an update: the newer version's watch event brings the key back.
pub const LOG_CONFLICT: &str = "conflict; the newer version's event brings the key back";
/// A 409 AlreadyExists on a create: the cache is behind; retried with backoff.
pub const LOG_BEHIND: &str = "create found it there already: the cache is behind; retrying";
pub const LOG_PANICKED: &str = "reconcile panicked; key released, retried with backoff";
pub const LOG_SHUTTING_DOWN: &str = "shutting down: no new work; running reconciles finish first";
/// Before the exec plugin's client certificate expires (kube does not renew it).
pub const LOG_CREDENTIALS_EXPIRE: &str = "the kubeconfig's exec plugin handed out a client certificate that is about to expire: stopping, so that a restart runs the plugin again";

/// Runs the controller until the first item of `signals` (SIGINT/SIGTERM),
/// then stops taking work and lets a running reconcile finish and pending
/// Events go out, within `--shutdown-grace`; a second item ends it at once.
pub async fn run(
    client: Client,
    cli: Cli,
    desired: Desired,
    mut signals: impl Stream<Item = ()> + Unpin,
) -> Result<(), Stopped> {
    let listener = TcpListener::bind(cli.listen).await.with_context(|| {
        format!("cannot listen on {}: choose another address with --listen", cli.listen)
    })?;
    log_starting(&cli, &desired);
    let metrics = Arc::new(Metrics::default());
    let ready = Arc::new(AtomicBool::new(false));
    let workers = Arc::<Workers>::default();
    let (cache, writer) = reflector::store();
    let ctx = Arc::new(context(&client, &cli, &desired, &metrics, cache));
    let queue = {
        let metrics = metrics.clone();
        WorkQueue::new(RateLimit::default()).on_depth(move |d| metrics.set_queue_depth(d))
    };
    let key = key_of(&desired);

    let (http_stop, http_stopped) = oneshot::channel::<()>();
    let status = http::Status { ready: ready.clone(), metrics, workers: workers.clone() };
    let server = axum::serve(listener, http::router(status)).with_graceful_shutdown(async {
        let _ = http_stopped.await;
    });
    let server = tokio::spawn(server.into_future());
    let (synced, first_sync) = oneshot::channel();
    let mut background: Vec<JoinHandle<()>> = vec![
        tokio::spawn(log_server_version(client.clone())),
        tokio::spawn(inform(
            Api::namespaced(client, desired.namespace()),
            watch_config(desired.name(), cli.watch_timeout),
            writer,
            queue.clone(),
            key.clone(),
            ready,
            synced,
        )),
    ];
    // WaitForCacheSync: the worker and the resync start once the cache is complete.
    let mut tasks = Vec::new();
    tokio::select! {
        _ = first_sync => {
            // 0: no periodic resync.
            if !cli.resync.is_zero() {
                background.push(tokio::spawn(resync(queue.clone(), key, cli.resync)));
            }
            tasks = (0..WORKERS)
                .map(|_| tokio::spawn(work(ctx.clone(), queue.clone(), cli.max_retries, workers.clone())))
                .collect();
            signals.next().await;
        }
        _ = signals.next() => {}
    }

    let grace =
        Grace { of: cli.shutdown_grace, ends: tokio::time::Instant::now() + cli.shutdown_grace };
    info!(grace = ?grace.of, "{LOG_SHUTTING_DOWN}");
    workers.stopping();
    queue.shut_down();
    // The watch keeps the cache current until the running reconciles are
    // done, so they act on the latest state (a change that arrived just
    // before the signal included); the shut-down queue takes no new keys.
    let finished = finish_work(tasks, &ctx, &queue, grace, &mut signals).await;
    for task in &background {
        task.abort();
    }
    finished?;
    let started = Instant::now();
    stop_serving(server, http_stop, grace, cli.listen, &mut signals).await?;
    info!(took = ?started.elapsed(), "stopped");
    Ok(())
}

/// What every reconcile shares: the client, the cache, the desired object,
/// Events, metrics and the pacing of corrections.
fn context(
    client: &Client,
    cli: &Cli,
    desired: &Desired,
    metrics: &Arc<Metrics>,
    cache: reflector::Store<ConfigMap>,
) -> Context {
    let reporter = Reporter {
        controller: CONTROLLER_NAME.into(),
        // Set from the pod name in the Deployment; absent when run as a process.
        instance: std::env::var("POD_NAME").ok(),
    };
    Context {
        client: client.clone(),
        cache,
        desired: desired.clone(),
        recorder: crate::events::Recorder::new(
            client.clone(),
            reporter,
            metrics.events_dropped.clone(),
        ),
        metrics: metrics.clone(),
        reconcile_delay: cli.reconcile_delay,
        reconcile_timeout: cli.reconcile_timeout,
        pace: std::sync::Mutex::new(if cli.no_pacing { Pace::off() } else { Pace::default() }),
    }
}

/// The first line: what it keeps, where it listens, what it was built for.
/// (`configmap`, not `target`: a JSON log has a `target` key of its own.)
fn log_starting(cli: &Cli, desired: &Desired) {
    info!(
        configmap = %desired,
        listen = %cli.listen,
        built_for = %version::target(),
        "{LOG_STARTING}"
    );
}

/// The watch of `name` alone, each request lasting `timeout` (the API server
/// ends it then; the watcher starts the next from where it was).
pub fn watch_config(name: &str, timeout: Duration) -> watcher::Config {
    let seconds = u32::try_from(timeout.as_secs()).unwrap_or(u32::MAX);
    watcher::Config::default().fields(&format!("metadata.name={name}")).timeout(seconds)
}

/// The informer (course step 2): list, then watch, the one object we care
/// about. The field selector keeps the cache at one object however many
/// ConfigMaps the namespace holds. Every event only enqueues the key.
///
/// A failed LIST or WATCH makes the controller not ready, waits (client-go's
/// growing delays: [`WatchBackoff`]) and lists again from scratch, as
/// client-go's reflector does when a watch cannot be established: a 403
/// once `watch` is revoked, or a 401 once a token has expired, would
/// otherwise be retried against a cache that no longer changes, while the
/// resync reconciles that stale copy. Ready again once a list has completed.
/// Where client-go would first resume a dropped watch from its
/// resourceVersion, this lists again at once: one object by name costs one
/// small LIST, and a compacted revision (410 Gone) is never asked for.
///
/// A watch whose connection stays open but brings nothing fails too: the
/// client's read timeout ([`crate::connect::read_timeout`]) is above the
/// watch's timeoutSeconds ([`watch_config`]), which the API server
/// always ends in time, so a silence past it is a dead connection.
async fn inform(
    api: Api<ConfigMap>,
    config: watcher::Config,
    mut writer: Writer<ConfigMap>,
    queue: WorkQueue<Key>,
    key: Key,
    ready: Arc<AtomicBool>,
    synced: oneshot::Sender<()>,
) {
    let mut synced = Some(synced);
    let mut backoff = WatchBackoff::default();
    loop {
        let events = watcher(api.clone(), config.clone());
        futures::pin_mut!(events);
        while let Some(event) = events.next().await {
            let event = match event {
                Ok(event) => event,
                Err(e) => {
                    ready.store(false, Ordering::Release);
                    let delay = backoff.next().unwrap_or(Duration::from_secs(30));
                    let (error, retry_in) = (connect::one_line(&e), telemetry::rounded(delay));
                    let silent = connect::is_silence(&e);
                    let message = if silent { LOG_WATCH_SILENT } else { LOG_WATCH_FAILED };
                    warn!(%error, %retry_in, "{message}");
                    tokio::time::sleep(delay).await;
                    break;
                }
            };
            writer.apply_watcher_event(&event);
            match event {
                // The initial list (or a relist) is complete. Always enqueue
                // here: this is the startup kick, and after a relist it covers
                // an object deleted while the watch was down, for which no
                // Delete event ever arrives. Enqueued before reporting ready: a
                // ready controller has its reconcile queued already.
                watcher::Event::InitDone => {
                    queue.add(key.clone());
                    info!("{}", if synced.is_none() { LOG_RELISTED } else { LOG_SYNCED });
                    ready.store(true, Ordering::Release);
                    if let Some(synced) = synced.take() {
                        let _ = synced.send(());
                    }
                }
                // The field selector means every object here is ours: one key.
                watcher::Event::Apply(_) | watcher::Event::Delete(_) => {
                    queue.add(key.clone());
                }
                watcher::Event::Init | watcher::Event::InitApply(_) => {}
            }
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
pub async fn work(
    ctx: Arc<Context>,
    queue: WorkQueue<Key>,
    max_retries: u32,
    workers: Arc<Workers>,
) {
    let _alive = workers.alive();
    serve_keys(&queue, &ctx.metrics, |key| {
        let (ctx, queue) = (ctx.clone(), queue.clone());
        async move { process(&ctx, &queue, &key, max_retries).await }
    })
    .await;
}

/// The worker's loop around `each`: the key is released on every way out
/// (a guard calls `done`, a panic included), and a panicking `each` is
/// logged at error level, counted, and its key retried with backoff; the
/// loop goes on.
pub async fn serve_keys<F, Fut>(queue: &WorkQueue<Key>, metrics: &Metrics, mut each: F)
where
    F: FnMut(Key) -> Fut,
    Fut: Future<Output = ()>,
{
    while let Some(key) = queue.get().await {
        let _release = scopeguard::guard(&key, |key| queue.done(key));
        if AssertUnwindSafe(each(key.clone())).catch_unwind().await.is_err() {
            metrics.panics.inc();
            metrics.reconciled(ReconcileResult::panicked, None);
            error!(key = %show(&key), "{LOG_PANICKED}");
            queue.add_rate_limited(key.clone());
        }
    }
}

/// One reconcile of `key` and the course's failure policy (the switch in its `processNextItem`):
/// forget on success; on failure retry with backoff while
/// `NumRequeues(key) < max_retries`; then give up with one error line.
/// A conflict is the exception: see [`LOG_CONFLICT`].
pub async fn process(ctx: &Context, queue: &WorkQueue<Key>, key: &Key, max_retries: u32) {
    let started = Instant::now();
    ctx.recorder.busy();
    let result = {
        let _running = ctx.metrics.in_flight();
        // Bounded: kube's client has no read timeout, and a request an API
        // server never answers would hold the key for ever.
        let bound = ctx.reconcile_delay + ctx.reconcile_timeout;
        match tokio::time::timeout(bound, reconcile::reconcile(ctx, key)).await {
            Ok(result) => result,
            Err(_) => Err(Error::TimedOut { key: show(key), after: ctx.reconcile_timeout }),
        }
    };
    ctx.metrics.reconciled(result_label(&result), Some(started.elapsed()));
    let err = match result {
        Ok(outcome) => {
            queue.forget(key);
            if let reconcile::Outcome::Paced(wait) = outcome {
                queue.add_after(key.clone(), wait);
            }
            return;
        }
        Err(err) => err,
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
        if matches!(err, Error::AlreadyExists { .. }) {
            // No event is sure to come (the watch may be what lags): a timed retry.
            info!(key = %show(key), attempt, retry_in = %telemetry::rounded(delay), "{LOG_BEHIND}");
        } else {
            let (retry_in, error) = (telemetry::rounded(delay), connect::one_line(&err));
            warn!(key = %show(key), attempt, %retry_in, %error, "reconcile failed; retrying");
        }
    } else {
        queue.forget(key);
        ctx.metrics.give_ups.inc();
        error!(
            key = %show(key),
            attempts = requeues + 1,
            error = %connect::one_line(&err),
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
        .notify(|e, next| {
            warn!(error = %connect::one_line(e), retry_in = %telemetry::rounded(next), "{LOG_UNREACHABLE}")
        })
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

/// One item per SIGINT (Ctrl-C) or SIGTERM: the first asks for a graceful
/// shutdown, the second for an immediate one.
pub fn signals() -> std::io::Result<impl Stream<Item = ()> + Unpin> {
    use tokio::signal::unix::{SignalKind, signal};
    let (mut interrupt, mut terminate) =
        (signal(SignalKind::interrupt())?, signal(SignalKind::terminate())?);
    Ok(futures::stream::poll_fn(move |cx| {
        let signalled = interrupt.poll_recv(cx).is_ready() || terminate.poll_recv(cx).is_ready();
        if signalled { std::task::Poll::Ready(Some(())) } else { std::task::Poll::Pending }
    }))
}

#[cfg(test)]
mod tests {
    use ::http::Method;

    use std::sync::atomic::AtomicUsize;

    use super::*;
    use crate::{
        fixtures::{MockApi, Scenario, context, drifted},
        metrics::ReconcileResult,
    };

    /// Polls `done` in (paused, auto-advancing) tokio time; fails with `what`
    /// after a virtual minute.
    async fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        while !done() {
            assert!(tokio::time::Instant::now() < deadline, "timed out waiting for {what}");
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
        let worker = tokio::spawn(work(ctx.clone(), queue.clone(), 5, Arc::default()));
        wait_for("the conflict", || ctx.metrics.reconciles(ReconcileResult::conflict) == 1).await;
        // No timed retry, no failure counted: an hour of (virtual) quiet sends nothing.
        tokio::time::sleep(Duration::from_secs(3600)).await;
        assert!(queue.is_idle());
        assert_eq!(queue.num_requeues(&key), 0);
        assert_eq!(api.config_map_requests().len(), 1);

        // The newer version's watch event (the informer adds the key): it is corrected.
        queue.add(key);
        wait_for("the corrected update", || ctx.metrics.reconciles(ReconcileResult::updated) == 1)
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
        let worker = tokio::spawn(work(ctx.clone(), queue.clone(), 5, Arc::default()));
        wait_for("the give-up", || ctx.metrics.give_ups() == 1).await;

        let attempts = api.config_map_requests();
        assert_eq!(attempts.len(), 6, "1 attempt + 5 retries: {attempts:#?}");
        assert!(attempts.iter().all(|s| s.method == Method::POST));
        let gaps: Vec<Duration> = attempts.windows(2).map(|w| w[1].at - w[0].at).collect();
        assert!(gaps.windows(2).all(|g| g[1] > g[0]), "delays must grow: {gaps:?}");
        assert!(gaps[0] >= Duration::from_millis(5), "{gaps:?}");
        assert_eq!(ctx.metrics.reconciles(ReconcileResult::error), 6);

        // Given up: nothing is scheduled, and an hour of (virtual) quiet sends nothing.
        assert!(queue.is_idle());
        tokio::time::sleep(Duration::from_secs(3600)).await;
        assert_eq!(api.config_map_requests().len(), 6);

        // A new trigger (event or resync) starts a fresh round.
        queue.add(key);
        wait_for("the new attempt", || ctx.metrics.reconciles(ReconcileResult::error) == 7).await;
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
        let worker = tokio::spawn(work(ctx.clone(), queue.clone(), 5, Arc::default()));
        wait_for("the report", || ctx.metrics.reconciles(ReconcileResult::immutable) == 1).await;
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
    async fn a_panicking_reconcile_releases_its_key_and_the_worker_goes_on() {
        let metrics = Metrics::default();
        let queue = WorkQueue::new(RateLimit::default());
        let key = key_of(&crate::desired::Desired::default());
        queue.add(key.clone());
        let calls = Arc::new(AtomicUsize::new(0));
        let worker = {
            let (queue, calls) = (queue.clone(), calls.clone());
            tokio::spawn(async move {
                let metrics = Metrics::default();
                serve_keys(&queue, &metrics, |_key| {
                    let n = calls.fetch_add(1, Ordering::AcqRel);
                    async move {
                        assert!(n > 0, "the first reconcile panics");
                    }
                })
                .await;
                metrics.panics()
            })
        };
        wait_for("the retry after the panic", || calls.load(Ordering::Acquire) == 2).await;
        wait_for("the queue to be idle", || queue.is_idle()).await;
        // Released: an event for the key is processed again, not stuck in "processing".
        queue.add(key);
        wait_for("the next processing", || calls.load(Ordering::Acquire) == 3).await;
        queue.shut_down();
        assert_eq!(worker.await.unwrap(), 1, "the panic was counted");
        assert_eq!(metrics.panics(), 0);
    }

    #[tokio::test]
    async fn healthz_fails_when_a_worker_died() {
        use tower::ServiceExt as _;
        let workers = Arc::<Workers>::default();
        let status = |workers: &Arc<Workers>| http::Status {
            ready: Arc::new(AtomicBool::new(true)),
            metrics: Arc::new(Metrics::default()),
            workers: workers.clone(),
        };
        let healthz = |workers: &Arc<Workers>| {
            http::router(status(workers))
                .oneshot(::http::Request::get("/healthz").body(axum::body::Body::empty()).unwrap())
        };
        let alive = workers.alive();
        assert_eq!(healthz(&workers).await.unwrap().status(), 200);
        // The worker's task ends (a panic outside the reconcile, say).
        let dead = tokio::spawn(async move {
            let _alive = alive;
            panic!("a worker bug");
        });
        assert!(dead.await.is_err());
        assert_eq!(healthz(&workers).await.unwrap().status(), 503);
        assert_eq!(workers.problem().as_deref(), Some("1 of 1 workers stopped"));
        // While shutting down, workers ending is expected.
        workers.stopping();
        assert_eq!(healthz(&workers).await.unwrap().status(), 200);
    }

    /// The flags of a test's run: `grace`, and `resync` (`None`: off).
    fn cli(grace: Duration, resync: Option<Duration>) -> Cli {
        let ms = |d: Duration| format!("{}ms", d.as_millis());
        let resync = resync.map_or("0".into(), ms);
        let args = ["--shutdown-grace", &ms(grace), "--resync", &resync, "--listen", "127.0.0.1:0"];
        <Cli as clap::Parser>::parse_from(std::iter::once("my-controller").chain(args))
    }

    #[tokio::test(start_paused = true)]
    async fn nothing_is_reconciled_before_the_first_list_is_complete() {
        // The list takes 5 s to answer; the resync would fire every 100 ms.
        let (client, api) = MockApi::start_with(Scenario::Accept, Duration::from_secs(5));
        let (stop, signals) = futures::channel::mpsc::unbounded();
        let started = tokio::time::Instant::now();
        let run = tokio::spawn(run(
            client,
            cli(Duration::from_secs(10), Some(Duration::from_millis(100))),
            Desired::default(),
            signals,
        ));
        wait_for("the create", || !api.config_map_requests().is_empty()).await;
        let create = &api.config_map_requests()[0];
        assert_eq!(create.method, Method::POST);
        assert!(
            create.at - started >= Duration::from_secs(5),
            "a write {:?} after the start, before the list was complete",
            create.at - started
        );
        stop.unbounded_send(()).unwrap();
        run.await.unwrap().unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn shutdown_is_bounded_by_the_grace_period_when_the_api_server_hangs() {
        let (client, api) = MockApi::start_with(Scenario::Unanswered, Duration::ZERO);
        let (stop, signals) = futures::channel::mpsc::unbounded();
        let run = tokio::spawn(run(
            client,
            cli(Duration::from_secs(2), None),
            Desired::default(),
            signals,
        ));
        // The startup reconcile's create is sent, and never answered.
        wait_for("the create", || !api.config_map_requests().is_empty()).await;
        let asked = tokio::time::Instant::now();
        stop.unbounded_send(()).unwrap();
        let stopped = run.await.unwrap().unwrap_err();
        assert_eq!(asked.elapsed(), Duration::from_secs(2), "exactly the grace period");
        let text = stopped.to_string();
        assert!(
            matches!(stopped, Stopped::CutOff { .. })
                && text.contains("the reconcile of default/my-config"),
            "{text}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_second_signal_exits_at_once() {
        let (client, api) = MockApi::start_with(Scenario::Unanswered, Duration::ZERO);
        let (stop, signals) = futures::channel::mpsc::unbounded();
        let run = tokio::spawn(run(
            client,
            cli(Duration::from_secs(60), None),
            Desired::default(),
            signals,
        ));
        wait_for("the create", || !api.config_map_requests().is_empty()).await;
        let asked = tokio::time::Instant::now();
        stop.unbounded_send(()).unwrap();
        tokio::time::sleep(Duration::from_millis(10)).await;
        stop.unbounded_send(()).unwrap();
        let stopped = run.await.unwrap().unwrap_err();
        assert!(matches!(stopped, Stopped::Interrupted { .. }), "{stopped}");
        assert!(asked.elapsed() < Duration::from_secs(1));
    }

    #[tokio::test(start_paused = true)]
    async fn already_exists_is_the_cache_behind_retried_with_backoff() {
        let (client, api) = MockApi::start(Scenario::AlreadyExists);
        let (ctx, _writer) = context(client, None);
        let ctx = Arc::new(ctx);
        let queue = WorkQueue::new(RateLimit::default());
        queue.add(key_of(&ctx.desired));
        let worker = tokio::spawn(work(ctx.clone(), queue.clone(), 5, Arc::default()));
        wait_for("the give-up", || ctx.metrics.give_ups() == 1).await;
        queue.shut_down();
        worker.await.unwrap();
        // Not a conflict (no event is sure to come): timed retries, then a give-up.
        assert_eq!(ctx.metrics.reconciles(ReconcileResult::behind), 6);
        assert_eq!(ctx.metrics.reconciles(ReconcileResult::conflict), 0);
        let posts = api.config_map_requests();
        assert_eq!(posts.len(), 6);
        let gaps: Vec<Duration> = posts.windows(2).map(|w| w[1].at - w[0].at).collect();
        assert!(gaps.windows(2).all(|g| g[1] > g[0]), "growing delays: {gaps:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn shutdown_waits_for_the_running_reconcile() {
        let (client, api) = MockApi::start(Scenario::Accept);
        let (mut ctx, _writer) = context(client, None);
        ctx.reconcile_delay = Duration::from_secs(2);
        let ctx = Arc::new(ctx);
        let queue = WorkQueue::new(RateLimit::default());
        queue.add(key_of(&ctx.desired));
        let worker = tokio::spawn(work(ctx.clone(), queue.clone(), 5, Arc::default()));
        wait_for("the reconcile to run", || ctx.metrics.running() == 1).await;
        queue.shut_down();
        worker.await.unwrap();
        // The slow reconcile was finished, not cut off.
        assert_eq!(ctx.metrics.reconciles(ReconcileResult::created), 1);
        assert_eq!(ctx.metrics.running(), 0);
        assert_eq!(api.config_map_requests().len(), 1);
    }

    /// `inform` against `informer` for `run` of paused time: the informer's
    /// requests (watch?, when) and whether it ended ready.
    async fn inform_against(
        informer: crate::fixtures::Informer,
        run: Duration,
    ) -> (Vec<(bool, tokio::time::Instant)>, bool) {
        let (client, mock) = MockApi::informer(informer);
        let (_cache, writer) = reflector::store();
        let ready = Arc::new(AtomicBool::new(false));
        let (synced, _first_sync) = oneshot::channel();
        let desired = crate::desired::Desired::default();
        let task = tokio::spawn(inform(
            Api::namespaced(client, "default"),
            watch_config("my-config", Duration::from_secs(290)),
            writer,
            WorkQueue::new(RateLimit::default()),
            key_of(&desired),
            ready.clone(),
            synced,
        ));
        tokio::time::sleep(run).await;
        task.abort();
        (mock.informer_requests(), ready.load(Ordering::Acquire))
    }

    fn gaps(times: &[tokio::time::Instant]) -> Vec<f64> {
        times.windows(2).map(|w| (w[1] - w[0]).as_secs_f64()).collect()
    }

    /// client-go's reflector: 0.8 s doubling to 30 s; kube's stream backoff
    /// would restart at every re-list and retry every second or so for ever.
    #[tokio::test(start_paused = true)]
    async fn a_list_that_keeps_failing_is_retried_at_growing_gaps_and_never_ready() {
        let (requests, ready) =
            inform_against(crate::fixtures::Informer::ListRefused(401), Duration::from_secs(120))
                .await;
        assert!(!ready);
        let lists: Vec<_> = requests.iter().map(|(_, at)| *at).collect();
        let gaps = gaps(&lists);
        assert!(lists.len() <= 9, "{} LISTs in 2 minutes: {gaps:?}", lists.len());
        for (gap, floor) in gaps.iter().zip([0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0]) {
            assert!(*gap >= floor * 0.999, "gaps {gaps:?}");
        }
    }

    /// A watch that cannot be established (403 once `watch` is revoked): not
    /// ready, and each failure is followed by a new LIST after a growing
    /// pause, never by a retried watch on the old cache.
    #[tokio::test(start_paused = true)]
    async fn a_watch_that_cannot_start_is_not_ready_and_lists_again() {
        let (requests, ready) =
            inform_against(crate::fixtures::Informer::WatchRefused(403), Duration::from_secs(60))
                .await;
        assert!(!ready, "not ready while no watch can be established");
        let kinds: Vec<bool> = requests.iter().map(|(watch, _)| *watch).collect();
        assert!(kinds.len() >= 6, "{kinds:?}");
        for (i, watch) in kinds.iter().enumerate() {
            assert_eq!(*watch, i % 2 == 1, "LIST, WATCH, LIST, WATCH, …: {kinds:?}");
        }
        let relists: Vec<_> = requests.iter().filter(|(w, _)| !w).map(|(_, at)| *at).collect();
        let gaps = gaps(&relists);
        for (gap, floor) in gaps.iter().zip([0.8, 1.6, 3.2, 6.4]) {
            assert!(*gap >= floor * 0.999, "gaps {gaps:?}");
        }
    }

    /// Each watch asks the API server to end it after `--watch-timeout`, and
    /// for bookmarks: the read timeout above it never trips on a healthy watch.
    #[tokio::test(start_paused = true)]
    async fn each_watch_asks_to_end_after_the_watch_timeout() {
        let (client, mock) = MockApi::informer(crate::fixtures::Informer::WatchRefused(403));
        let (_cache, writer) = reflector::store();
        let (synced, _first_sync) = oneshot::channel();
        let task = tokio::spawn(inform(
            Api::namespaced(client, "default"),
            watch_config("my-config", Duration::from_secs(7)),
            writer,
            WorkQueue::new(RateLimit::default()),
            key_of(&crate::desired::Desired::default()),
            Arc::new(AtomicBool::new(false)),
            synced,
        ));
        tokio::time::sleep(Duration::from_secs(1)).await;
        task.abort();
        let seen = mock.seen.lock().unwrap().clone();
        let watch = seen.iter().find(|s| s.uri.contains("watch=true")).expect("a WATCH");
        for part in ["timeoutSeconds=7", "allowWatchBookmarks=true", "metadata.name%3Dmy-config"] {
            assert!(watch.uri.contains(part), "{part} not in {}", watch.uri);
        }
    }

    /// An API server that never answers the write (a stopped process whose
    /// kernel still holds the connection): the reconcile is abandoned after
    /// `--reconcile-timeout`, counted, and retried with backoff.
    #[tokio::test(start_paused = true)]
    async fn a_write_that_is_never_answered_times_out_and_is_retried() {
        let (client, _api) = MockApi::start(Scenario::Unanswered);
        let (mut ctx, _writer) = context(client, Some(drifted()));
        ctx.reconcile_timeout = Duration::from_secs(5);
        let queue = WorkQueue::new(RateLimit::default());
        let key = key_of(&ctx.desired);
        let started = tokio::time::Instant::now();
        let processed =
            tokio::time::timeout(Duration::from_secs(600), process(&ctx, &queue, &key, 5)).await;
        assert!(processed.is_ok(), "the reconcile hung");
        assert_eq!(started.elapsed(), Duration::from_secs(5));
        assert_eq!(ctx.metrics.reconciles(ReconcileResult::timeout), 1);
        assert_eq!(queue.num_requeues(&key), 1, "retried with backoff");
    }

    /// A JSON log line is one object with each key once: a reader that keeps
    /// the last of two `target` keys would lose the ConfigMap.
    #[test]
    fn the_json_starting_line_has_each_key_once() {
        let buffer = Arc::new(std::sync::Mutex::new(Vec::<u8>::new()));
        let writer = {
            let buffer = buffer.clone();
            move || Writer(buffer.clone())
        };
        let subscriber =
            tracing_subscriber::fmt().json().flatten_event(true).with_writer(writer).finish();
        tracing::subscriber::with_default(subscriber, || {
            log_starting(&cli(Duration::from_secs(1), None), &Desired::default());
        });
        let line = String::from_utf8(buffer.lock().unwrap().clone()).unwrap();
        let keys: Vec<&str> = line
            .trim_matches(['{', '}', '\n'])
            .split(",\"")
            .filter_map(|pair| pair.trim_start_matches('"').split_once("\":").map(|(k, _)| k))
            .collect();
        let mut unique = keys.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(keys.len(), unique.len(), "a key twice in {line}");
        assert!(line.contains("\"configmap\":\"default/my-config\""), "{line}");
    }

    struct Writer(Arc<std::sync::Mutex<Vec<u8>>>);

    impl std::io::Write for Writer {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
}
