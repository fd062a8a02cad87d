//! A work queue of keys with client-go's semantics, on tokio.
//!
//! Course, stage 1, step 3: event handlers only *enqueue keys*; workers take a
//! key, read the latest state from the cache and process it. What the course's
//! `workqueue.NewRateLimitingQueue(DefaultControllerRateLimiter())` promises
//! holds here too:
//!
//! * coalescing: a key is at most once in the queue and at most once being
//!   processed; adds while it is processed make it come back once afterwards
//!   (a burst of events during a reconcile yields one more reconcile, not many);
//! * per-key exponential backoff (5 ms doubling, capped at 1000 s, computed by
//!   `backon`) together with an overall token bucket (10 per second, burst 100):
//!   a retry waits for the longer of the two;
//! * `forget` on success resets a key's backoff; `num_requeues` lets the caller
//!   give up after a number of failures (`NumRequeues(key) < 5`);
//! * at most one pending retry per key, the earliest kept (client-go's
//!   delaying queue): a later, longer delay is dropped, and `forget` cancels
//!   the pending one, so a stale timer never brings back a key that succeeded
//!   or was given up.

use std::{
    collections::{HashMap, HashSet, VecDeque},
    hash::Hash,
    sync::{Arc, Mutex, MutexGuard},
    time::Duration,
};

use backon::{BackoffBuilder, ExponentialBackoff, ExponentialBuilder};
use prometheus_client::metrics::gauge::Gauge;
use tokio::{sync::Notify, time::Instant};

/// The backoff and rate limit of the queue: client-go's defaults.
#[derive(Clone, Debug)]
pub struct RateLimit {
    /// First per-key retry delay; it doubles on each failure of that key.
    pub base_delay: Duration,
    /// Cap of the per-key delay.
    pub max_delay: Duration,
    /// Overall retries per second (token bucket refill rate).
    pub per_second: f64,
    /// Overall burst (token bucket size).
    pub burst: f64,
}

impl Default for RateLimit {
    fn default() -> Self {
        Self {
            base_delay: Duration::from_millis(5),
            max_delay: Duration::from_secs(1000),
            per_second: 10.0,
            burst: 100.0,
        }
    }
}

impl RateLimit {
    fn per_key_backoff(&self) -> ExponentialBackoff {
        ExponentialBuilder::default()
            .with_min_delay(self.base_delay)
            .with_max_delay(self.max_delay)
            .with_factor(2.0)
            .without_max_times()
            .build()
    }
}

/// A cloneable handle to one queue; all clones share it.
pub struct WorkQueue<K> {
    shared: Arc<Shared<K>>,
}

impl<K> Clone for WorkQueue<K> {
    fn clone(&self) -> Self {
        Self { shared: Arc::clone(&self.shared) }
    }
}

struct Shared<K> {
    state: Mutex<State<K>>,
    wakeup: Notify,
    limits: RateLimit,
    /// Kept at the number of keys waiting, when set (the `workqueue_depth` metric).
    depth: Option<Gauge>,
}

struct State<K> {
    /// Keys ready to be taken, in order.
    queue: VecDeque<K>,
    /// Keys that need processing: queued, or added again while processing.
    dirty: HashSet<K>,
    /// Keys a worker holds right now.
    processing: HashSet<K>,
    /// Per-key failure count and backoff, until `forget`.
    failures: HashMap<K, (u32, ExponentialBackoff)>,
    /// The pending retry of each key: when it is due, and the timer that owns it.
    waiting: HashMap<K, (Instant, u64)>,
    /// Numbers the timers, so a stale one recognises it was replaced.
    timers: u64,
    bucket: TokenBucket,
    shutting_down: bool,
}

impl<K> WorkQueue<K>
where
    K: Clone + Eq + Hash + Send + 'static,
{
    pub fn new(limits: RateLimit) -> Self {
        let bucket = TokenBucket::new(limits.per_second, limits.burst);
        Self {
            shared: Arc::new(Shared {
                state: Mutex::new(State {
                    queue: VecDeque::new(),
                    dirty: HashSet::new(),
                    processing: HashSet::new(),
                    failures: HashMap::new(),
                    waiting: HashMap::new(),
                    timers: 0,
                    bucket,
                    shutting_down: false,
                }),
                wakeup: Notify::new(),
                limits,
                depth: None,
            }),
        }
    }

    /// Reports the queue's depth on `gauge`: keys queued, keys added again
    /// while being processed, and retries waiting for their delay.
    pub fn with_depth_gauge(self, gauge: Gauge) -> Self {
        let mut shared = Arc::try_unwrap(self.shared)
            .unwrap_or_else(|_| panic!("with_depth_gauge is for a queue not yet shared"));
        shared.depth = Some(gauge);
        Self { shared: Arc::new(shared) }
    }

    fn lock(&self) -> Guard<'_, K> {
        // A worker that panicked while holding the lock leaves consistent
        // state behind (every update is a single step), so keep going.
        Guard {
            state: self.shared.state.lock().unwrap_or_else(|p| p.into_inner()),
            depth: self.shared.depth.as_ref(),
        }
    }

    /// Marks `key` as needing processing. Returns false when it was coalesced
    /// with a pending entry (or the queue is shutting down).
    pub fn add(&self, key: K) -> bool {
        let mut s = self.lock();
        if s.shutting_down || !s.dirty.insert(key.clone()) {
            return false;
        }
        // A key being processed comes back when its worker calls `done`.
        if !s.processing.contains(&key) {
            s.queue.push_back(key);
            drop(s);
            self.shared.wakeup.notify_one();
        }
        true
    }

    /// Adds `key` once `delay` has passed, unless a retry of it is due
    /// earlier already (the earliest is kept; a later one replaces nothing).
    pub fn add_after(&self, key: K, delay: Duration) {
        if delay.is_zero() {
            self.add(key);
            return;
        }
        let due = Instant::now() + delay;
        let timer = {
            let mut s = self.lock();
            if s.shutting_down || s.waiting.get(&key).is_some_and(|(at, _)| *at <= due) {
                return;
            }
            s.timers += 1;
            let timer = s.timers;
            s.waiting.insert(key.clone(), (due, timer));
            timer
        };
        let queue = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep_until(due).await;
            let current = {
                let mut s = queue.lock();
                let current = s.waiting.get(&key).is_some_and(|(_, t)| *t == timer);
                if current {
                    s.waiting.remove(&key);
                }
                current
            };
            // Replaced by an earlier retry, or cancelled by `forget`: nothing to do.
            if current {
                queue.add(key);
            }
        });
    }

    /// Adds `key` after its backoff: the longer of its own exponential delay
    /// and the overall token bucket's. Returns the delay chosen.
    pub fn add_rate_limited(&self, key: K) -> Duration {
        let delay = {
            let mut s = self.lock();
            let limits = &self.shared.limits;
            let entry =
                s.failures.entry(key.clone()).or_insert_with(|| (0, limits.per_key_backoff()));
            entry.0 += 1;
            let per_key = entry.1.next().unwrap_or(limits.max_delay);
            let overall = s.bucket.reserve(Instant::now());
            per_key.max(overall)
        };
        self.add_after(key, delay);
        delay
    }

    /// Clears the failure history of `key` and cancels its pending retry
    /// (call it after a success or a give-up).
    pub fn forget(&self, key: &K) {
        let mut s = self.lock();
        s.failures.remove(key);
        s.waiting.remove(key);
    }

    /// How many times `key` was re-added by `add_rate_limited` since the last `forget`.
    pub fn num_requeues(&self, key: &K) -> u32 {
        self.lock().failures.get(key).map_or(0, |(n, _)| *n)
    }

    /// Waits for a key to process; `None` once the queue shuts down. The caller
    /// owns the key until it calls [`WorkQueue::done`].
    pub async fn get(&self) -> Option<K> {
        loop {
            let notified = self.shared.wakeup.notified();
            tokio::pin!(notified);
            // Register before looking, so an add between the look and the
            // wait is not missed.
            notified.as_mut().enable();
            {
                let mut s = self.lock();
                if s.shutting_down {
                    return None;
                }
                if let Some(key) = s.queue.pop_front() {
                    s.dirty.remove(&key);
                    s.processing.insert(key.clone());
                    let more = !s.queue.is_empty();
                    drop(s);
                    if more {
                        // Another key waits: pass the wakeup on to a worker.
                        self.shared.wakeup.notify_one();
                    }
                    return Some(key);
                }
            }
            notified.await;
        }
    }

    /// Ends the processing of `key`; if it was added meanwhile, it is queued again.
    pub fn done(&self, key: &K) {
        let mut s = self.lock();
        s.processing.remove(key);
        if s.dirty.contains(key) {
            s.queue.push_back(key.clone());
            drop(s);
            self.shared.wakeup.notify_one();
        }
    }

    /// Stops handing out keys: every `get` returns `None`, adds are ignored.
    /// Keys being processed are finished by their workers.
    pub fn shut_down(&self) {
        self.lock().shutting_down = true;
        self.shared.wakeup.notify_waiters();
    }

    /// Keys waiting to be taken now.
    pub fn len(&self) -> usize {
        self.lock().queue.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Nothing queued, nothing processing, no retry scheduled.
    pub fn is_idle(&self) -> bool {
        let s = self.lock();
        s.queue.is_empty() && s.processing.is_empty() && s.waiting.is_empty()
    }

    /// The keys workers hold right now.
    pub fn processing(&self) -> Vec<K> {
        self.lock().processing.iter().cloned().collect()
    }
}

/// The queue's lock; on release it brings the depth gauge up to date, so every
/// change of the queue is reflected without each method remembering to.
struct Guard<'a, K> {
    state: MutexGuard<'a, State<K>>,
    depth: Option<&'a Gauge>,
}

impl<K> std::ops::Deref for Guard<'_, K> {
    type Target = State<K>;
    fn deref(&self) -> &State<K> {
        &self.state
    }
}

impl<K> std::ops::DerefMut for Guard<'_, K> {
    fn deref_mut(&mut self) -> &mut State<K> {
        &mut self.state
    }
}

impl<K> Drop for Guard<'_, K> {
    fn drop(&mut self) {
        if let Some(gauge) = self.depth {
            // Waiting: queued, added again while processing, or a retry on its delay.
            gauge.set((self.state.dirty.len() + self.state.waiting.len()) as i64);
        }
    }
}

/// client-go's overall limiter (`rate.NewLimiter(10, 100)`): each retry takes a
/// token; when none is left, it waits for the next one.
#[derive(Debug)]
struct TokenBucket {
    per_second: f64,
    burst: f64,
    tokens: f64,
    last: Option<Instant>,
}

impl TokenBucket {
    fn new(per_second: f64, burst: f64) -> Self {
        Self { per_second, burst, tokens: burst, last: None }
    }

    /// Takes a token and returns how long to wait for it.
    fn reserve(&mut self, now: Instant) -> Duration {
        if let Some(last) = self.last {
            let refill = now.saturating_duration_since(last).as_secs_f64() * self.per_second;
            self.tokens = (self.tokens + refill).min(self.burst);
        }
        self.last = Some(now);
        self.tokens -= 1.0;
        if self.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-self.tokens / self.per_second)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// backon computes delays in f32: 40 ms comes out as 39.999999 ms.
    fn assert_close(actual: &[Duration], expected: &[Duration]) {
        assert_eq!(actual.len(), expected.len(), "{actual:?} vs {expected:?}");
        for (a, e) in actual.iter().zip(expected) {
            let error = (a.as_secs_f64() - e.as_secs_f64()).abs() / e.as_secs_f64();
            assert!(error < 1e-6, "{actual:?} vs {expected:?}");
        }
    }

    fn queue() -> WorkQueue<&'static str> {
        WorkQueue::new(RateLimit::default())
    }

    #[tokio::test]
    async fn a_key_is_queued_once() {
        let q = queue();
        assert!(q.add("a"));
        assert!(!q.add("a"));
        assert!(q.add("b"));
        assert_eq!(q.len(), 2);
        assert_eq!(q.get().await, Some("a"));
        assert_eq!(q.get().await, Some("b"));
        assert!(q.is_empty());
    }

    #[tokio::test]
    async fn adds_during_processing_come_back_once_after_done() {
        let q = queue();
        q.add("a");
        let key = q.get().await.unwrap();
        // A burst of events while "a" is processed...
        for _ in 0..5 {
            q.add("a");
        }
        // ...is not handed to a second worker meanwhile...
        assert!(q.is_empty());
        q.done(&key);
        // ...and yields exactly one more processing.
        assert_eq!(q.len(), 1);
        assert_eq!(q.get().await, Some("a"));
        q.done(&"a");
        assert!(q.is_idle());
    }

    #[tokio::test(start_paused = true)]
    async fn per_key_backoff_doubles_from_5ms_and_forget_resets_it() {
        let q = queue();
        let delays: Vec<_> = (0..5).map(|_| q.add_rate_limited("a")).collect();
        let ms = |n| Duration::from_millis(n);
        assert_close(&delays, &[ms(5), ms(10), ms(20), ms(40), ms(80)]);
        assert_eq!(q.num_requeues(&"a"), 5);
        // Other keys have their own history.
        assert_eq!(q.add_rate_limited("b"), ms(5));
        q.forget(&"a");
        assert_eq!(q.num_requeues(&"a"), 0);
        assert_eq!(q.add_rate_limited("a"), ms(5));
    }

    #[tokio::test(start_paused = true)]
    async fn per_key_backoff_is_capped_at_1000s() {
        let q = queue();
        let delays: Vec<_> = (0..30).map(|_| q.add_rate_limited("a")).collect();
        assert_close(&delays[17..18], &[Duration::from_millis(655_360)]);
        assert_close(&delays[18..], &[Duration::from_secs(1000); 12]);
    }

    #[tokio::test(start_paused = true)]
    async fn the_overall_bucket_limits_many_keys() {
        let q: WorkQueue<u32> = WorkQueue::new(RateLimit::default());
        // 100 first failures of 100 keys use up the burst...
        for key in 0..100 {
            assert_eq!(q.add_rate_limited(key), Duration::from_millis(5));
        }
        // ...after which retries come at 10 per second, whatever the per-key delay.
        assert_eq!(q.add_rate_limited(100), Duration::from_millis(100));
        assert_eq!(q.add_rate_limited(101), Duration::from_millis(200));
    }

    #[tokio::test(start_paused = true)]
    async fn a_key_has_one_pending_retry_the_earliest() {
        let q = queue();
        let start = Instant::now();
        q.add_rate_limited("a");
        q.add_rate_limited("a");
        assert!(!q.is_idle(), "a scheduled retry keeps the queue busy");
        assert_eq!(q.get().await, Some("a"));
        assert_eq!(start.elapsed(), Duration::from_millis(5));
        q.done(&"a");
        // The second retry (10 ms) was later than the pending one: dropped.
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(q.is_idle() && q.is_empty());
        // An earlier retry replaces a later one.
        q.add_after("b", Duration::from_secs(10));
        q.add_after("b", Duration::from_secs(1));
        let start = Instant::now();
        assert_eq!(q.get().await, Some("b"));
        assert_eq!(start.elapsed(), Duration::from_secs(1));
        q.done(&"b");
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert!(q.is_idle(), "the replaced 10 s timer brings nothing back");
    }

    #[tokio::test(start_paused = true)]
    async fn forget_cancels_a_pending_retry() {
        let q = queue();
        // A failure schedules a retry; then the key succeeds (or is given up).
        q.add_rate_limited("a");
        q.forget(&"a");
        assert!(q.is_idle());
        // The stale timer fires and must not bring the key back.
        tokio::time::sleep(Duration::from_secs(3600)).await;
        assert!(q.is_empty() && q.is_idle());
        assert_eq!(q.num_requeues(&"a"), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn the_depth_gauge_follows_queued_and_delayed_keys() {
        let gauge = Gauge::default();
        let q = queue().with_depth_gauge(gauge.clone());
        q.add("a");
        q.add("b");
        assert_eq!(gauge.get(), 2);
        let a = q.get().await.unwrap();
        assert_eq!(gauge.get(), 1);
        q.add(a);
        assert_eq!(gauge.get(), 2, "added again while processing counts");
        q.done(&a);
        let a = q.get().await.unwrap();
        q.add_rate_limited(a);
        assert_eq!(gauge.get(), 2, "a retry waiting for its delay counts");
        q.done(&a);
        let _b = q.get().await.unwrap();
        let _a = q.get().await.unwrap();
        assert_eq!(gauge.get(), 0);
    }

    #[tokio::test]
    async fn shut_down_releases_waiting_workers_and_ignores_adds() {
        let q = queue();
        let waiting = tokio::spawn({
            let q = q.clone();
            async move { q.get().await }
        });
        tokio::task::yield_now().await;
        q.shut_down();
        assert_eq!(waiting.await.unwrap(), None);
        assert!(!q.add("a"));
        assert_eq!(q.get().await, None);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn two_workers_never_hold_the_same_key() {
        let q: WorkQueue<u32> = WorkQueue::new(RateLimit::default());
        let held = Arc::new(Mutex::new(HashSet::new()));
        let mut workers = Vec::new();
        for _ in 0..2 {
            let (q, held) = (q.clone(), held.clone());
            workers.push(tokio::spawn(async move {
                let mut n = 0;
                while let Some(k) = q.get().await {
                    assert!(held.lock().unwrap().insert(k), "key {k} held twice");
                    tokio::task::yield_now().await;
                    held.lock().unwrap().remove(&k);
                    q.done(&k);
                    n += 1;
                }
                n
            }));
        }
        for i in 0..2000 {
            q.add(i % 3);
            if i % 50 == 0 {
                tokio::task::yield_now().await;
            }
        }
        // Wait for the workers to drain everything, then stop them.
        let deadline = Instant::now() + Duration::from_secs(30);
        while !q.is_idle() {
            assert!(Instant::now() < deadline, "queue never drained: {} left", q.len());
            tokio::task::yield_now().await;
        }
        q.shut_down();
        let processed: u32 =
            futures::future::join_all(workers).await.into_iter().map(|r| r.unwrap()).sum();
        assert!((3..2000).contains(&processed), "processed {processed}");
    }
}
