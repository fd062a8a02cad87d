//! The queue's contract, through its public API only.

use std::{
    collections::HashSet,
    sync::{Arc, Mutex},
    time::Duration,
};

use tokio::time::Instant;
use workqueue::{Depth, RateLimit, WorkQueue};

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

/// A queue, and how many keys wait in it to be taken now (its depth observer's `queued`).
fn observed() -> (WorkQueue<&'static str>, impl Fn() -> usize) {
    let depth = Arc::new(Mutex::new(Depth::default()));
    let q = queue().on_depth({
        let depth = depth.clone();
        move |d| *depth.lock().unwrap() = d
    });
    (q, move || depth.lock().unwrap().queued)
}

#[tokio::test]
async fn a_key_is_queued_once() {
    let (q, queued) = observed();
    assert!(q.add("a"));
    assert!(!q.add("a"));
    assert!(q.add("b"));
    assert_eq!(queued(), 2);
    assert_eq!(q.get().await, Some("a"));
    assert_eq!(q.get().await, Some("b"));
    assert_eq!(queued(), 0);
}

#[tokio::test]
async fn adds_during_processing_come_back_once_after_done() {
    let (q, queued) = observed();
    q.add("a");
    let key = q.get().await.unwrap();
    // A burst of events while "a" is processed...
    for _ in 0..5 {
        q.add("a");
    }
    // ...is not handed to a second worker meanwhile...
    assert_eq!(queued(), 0);
    q.done(&key);
    // ...and yields exactly one more processing.
    assert_eq!(queued(), 1);
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
    let (q, queued) = observed();
    let start = Instant::now();
    q.add_rate_limited("a");
    q.add_rate_limited("a");
    assert!(!q.is_idle(), "a scheduled retry keeps the queue busy");
    assert_eq!(q.get().await, Some("a"));
    assert_eq!(start.elapsed(), Duration::from_millis(5));
    q.done(&"a");
    // The second retry (10 ms) was later than the pending one: dropped.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(q.is_idle() && queued() == 0);
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
    let (q, queued) = observed();
    // A failure schedules a retry; then the key succeeds (or is given up).
    q.add_rate_limited("a");
    q.forget(&"a");
    assert!(q.is_idle());
    // The stale timer fires and must not bring the key back.
    tokio::time::sleep(Duration::from_secs(3600)).await;
    assert!(queued() == 0 && q.is_idle());
    assert_eq!(q.num_requeues(&"a"), 0);
}

#[tokio::test(start_paused = true)]
async fn the_depth_observer_follows_queued_and_delayed_keys() {
    let depth = Arc::new(Mutex::new(Depth::default()));
    let q = queue().on_depth({
        let depth = depth.clone();
        move |d| *depth.lock().unwrap() = d
    });
    let depth = || *depth.lock().unwrap();
    let at = |queued, delayed| Depth { queued, delayed };
    q.add("a");
    q.add("b");
    assert_eq!(depth(), at(2, 0));
    let a = q.get().await.unwrap();
    assert_eq!(depth(), at(1, 0));
    q.add(a);
    assert_eq!(depth(), at(1, 0), "added again while processing: not queued until done");
    q.done(&a);
    assert_eq!(depth(), at(2, 0));
    let a = q.get().await.unwrap();
    q.add_rate_limited(a);
    assert_eq!(depth(), at(1, 1), "a retry waiting for its delay is delayed, not queued");
    q.done(&a);
    let _b = q.get().await.unwrap();
    let _a = q.get().await.unwrap();
    assert_eq!(depth(), at(0, 0));
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
        assert!(Instant::now() < deadline, "queue never drained");
        tokio::task::yield_now().await;
    }
    q.shut_down();
    let processed: u32 =
        futures::future::join_all(workers).await.into_iter().map(|r| r.unwrap()).sum();
    assert!((3..2000).contains(&processed), "processed {processed}");
}
