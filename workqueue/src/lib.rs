//! A work queue of keys for Kubernetes controllers: client-go's
//! `workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())`
//! on tokio.
//!
//! Event handlers only *add keys*; workers take a key, read the latest state
//! from the cache and reconcile it. As in client-go:
//!
//! * a key is at most once in the queue and at most once being processed; adds
//!   while it is processed bring it back once after [`WorkQueue::done`] (a
//!   burst of events during a reconcile yields one more reconcile, not many);
//! * [`WorkQueue::add_rate_limited`] waits for the longer of a per-key delay
//!   (5 ms doubling, capped at 1000 s) and an overall token bucket (10 per
//!   second, burst 100); [`WorkQueue::forget`] resets the key's delay and
//!   [`WorkQueue::num_requeues`] counts its failures (`NumRequeues(key) < 5`);
//! * a key has at most one pending delayed add, the earliest (client-go's
//!   delaying queue), and `forget` cancels it.
//!
//! One difference: after [`WorkQueue::shut_down`], `get` returns `None` at
//! once and keys still queued are dropped; client-go's `Get` hands them out
//! until the queue is empty. A controller that is stopping has no use for
//! them: the next start lists everything again.
//!
//! Also here, because kube has no equivalent: [`WatchBackoff`], client-go's
//! backoff for a watch that keeps failing.
//!
//! | module            | holds                                                  |
//! |-------------------|--------------------------------------------------------|
//! | [`watch_backoff`] | [`WatchBackoff`]                                       |

mod watch_backoff;

pub use watch_backoff::WatchBackoff;

/// The Rust this crate asks for (its `rust-version`), which a learner's own project builds.
pub const RUST_VERSION: &str = env!("CARGO_PKG_RUST_VERSION");

use std::{
    collections::{HashMap, HashSet, VecDeque},
    hash::Hash,
    ops::DerefMut,
    sync::{Arc, Mutex, MutexGuard},
    time::Duration,
};

use backon::{BackoffBuilder, ExponentialBackoff, ExponentialBuilder};
use tokio::{sync::Notify, time::Instant};

/// The backoff and rate limit of the queue; the default is client-go's.
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
#[derive(Clone)]
pub struct WorkQueue<K> {
    shared: Arc<Shared<K>>,
}

/// How deep the queue is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Depth {
    /// Keys waiting to be taken now (client-go's depth).
    pub queued: usize,
    /// Keys waiting for a delayed add (a retry's backoff).
    pub delayed: usize,
}

/// Told the queue's depth after every change (a metrics gauge, say).
type DepthObserver = Box<dyn Fn(Depth) + Send + Sync>;

struct Shared<K> {
    state: Mutex<State<K>>,
    wakeup: Notify,
    limits: RateLimit,
    on_depth: Option<DepthObserver>,
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
    /// The pending delayed add of each key: when it is due, and the timer that owns it.
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
        Self {
            shared: Arc::new(Shared {
                state: Mutex::new(State {
                    queue: VecDeque::new(),
                    dirty: HashSet::new(),
                    processing: HashSet::new(),
                    failures: HashMap::new(),
                    waiting: HashMap::new(),
                    timers: 0,
                    bucket: TokenBucket { tokens: limits.burst, last: None },
                    shutting_down: false,
                }),
                wakeup: Notify::new(),
                limits,
                on_depth: None,
            }),
        }
    }

    /// Calls `observer` with the queue's [`Depth`] after every change.
    /// Panics if the queue was cloned already (set it up first).
    pub fn on_depth(self, observer: impl Fn(Depth) + Send + Sync + 'static) -> Self {
        let mut shared = Arc::try_unwrap(self.shared)
            .unwrap_or_else(|_| panic!("on_depth is for a queue not yet shared"));
        shared.on_depth = Some(Box::new(observer));
        Self { shared: Arc::new(shared) }
    }

    /// The queue's lock; on release it tells the depth observer, so every
    /// change of the queue is reported without each method remembering to.
    fn lock(&self) -> impl DerefMut<Target = MutexGuard<'_, State<K>>> {
        // A worker that panicked while holding the lock leaves consistent
        // state behind (every update is a single step), so keep going.
        let state = self.shared.state.lock().unwrap_or_else(|p| p.into_inner());
        scopeguard::guard(state, |state| {
            if let Some(observer) = &self.shared.on_depth {
                observer(Depth { queued: state.queue.len(), delayed: state.waiting.len() });
            }
        })
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

    /// Adds `key` once `delay` has passed, unless an add of it is due
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
            // Replaced by an earlier add, or cancelled by `forget`: nothing to do.
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
            let overall = s.bucket.reserve(limits, Instant::now());
            per_key.max(overall)
        };
        self.add_after(key, delay);
        delay
    }

    /// Clears the failure history of `key` and cancels its pending delayed
    /// add (call it after a success or a give-up).
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

    /// Nothing queued, nothing processing, no delayed add pending.
    pub fn is_idle(&self) -> bool {
        let s = self.lock();
        s.queue.is_empty() && s.processing.is_empty() && s.waiting.is_empty()
    }

    /// The keys workers hold right now.
    pub fn processing(&self) -> Vec<K> {
        self.lock().processing.iter().cloned().collect()
    }
}

/// client-go's overall limiter (`rate.NewLimiter(10, 100)`): each retry takes a
/// token; when none is left, it waits for the next one.
#[derive(Debug)]
struct TokenBucket {
    tokens: f64,
    last: Option<Instant>,
}

impl TokenBucket {
    /// Takes a token and returns how long to wait for it.
    fn reserve(&mut self, limits: &RateLimit, now: Instant) -> Duration {
        if let Some(last) = self.last {
            let refill = now.saturating_duration_since(last).as_secs_f64() * limits.per_second;
            self.tokens = (self.tokens + refill).min(limits.burst);
        }
        self.last = Some(now);
        self.tokens -= 1.0;
        if self.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-self.tokens / limits.per_second)
        }
    }
}
