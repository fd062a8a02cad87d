//! The one way the kit waits for a state: polling with a deadline, never a
//! fixed sleep. Fast first tries (a controller heals in milliseconds), then
//! slower ones, a bounded total, and on timeout the last state seen. The
//! suite polls quietly; xtask shows progress while a person waits.

use std::{future::Future, time::Duration};

use backon::{BackoffBuilder, ExponentialBuilder};
use tokio::time::Instant;

use crate::tr;

/// What one look found.
pub enum Check<T> {
    Done(T),
    /// Not there yet: what was seen instead.
    NotYet(String),
    /// It will never get there (the process died): stop waiting.
    Stop(anyhow::Error),
}

impl<T> Check<T> {
    /// `Done(value)` when `done`, else `NotYet(seen)`.
    pub fn done_if(done: bool, value: T, seen: impl Into<String>) -> Check<T> {
        if done { Check::Done(value) } else { Check::NotYet(seen.into()) }
    }
}

/// An unchanged state is repeated this often when shown, so a long wait visibly is one.
const HEARTBEAT: Duration = Duration::from_secs(3);

/// Polls `probe` until it returns `Check::Done`, for at most `within`. An
/// `Err` from the probe is retried too; the last state or error seen is in
/// the timeout message.
pub async fn eventually<T, F, Fut>(what: &str, within: Duration, probe: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<Check<T>>>,
{
    poll(what, within, false, probe).await
}

/// [`eventually`], and with `shown` also saying what it waits for as the
/// state changes (and every few seconds), and how long it took.
pub async fn poll<T, F, Fut>(
    what: &str,
    within: Duration,
    shown: bool,
    mut probe: F,
) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<Check<T>>>,
{
    let start = Instant::now();
    let deadline = start + within;
    let mut delays = ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(2))
        .with_max_delay(Duration::from_millis(250))
        .with_factor(2.0)
        .without_max_times()
        .build();
    let (mut last_shown, mut shown_at): (Option<String>, Instant) = (None, start);
    loop {
        // A probe that hangs (a pooled connection to an API server that was
        // restarted) must not outlive the deadline.
        let left = deadline.saturating_duration_since(Instant::now()).max(MIN_PROBE);
        let answer = tokio::time::timeout(left, probe()).await.unwrap_or_else(|_| {
            let left = format!("{left:.1?}");
            Ok(Check::NotYet(tr!("the last probe did not answer within {left}", left)))
        });
        let last = match answer {
            Ok(Check::Done(value)) => {
                if shown {
                    let after = start.elapsed().as_secs_f64();
                    let after = format!("{after:.1}");
                    crate::progress!("{}", tr!("  {what}: ready after {after}s", what, after));
                }
                return Ok(value);
            }
            Ok(Check::Stop(error)) => {
                let after = format!("{:.1}", start.elapsed().as_secs_f64());
                return Err(error.context(tr!("{what}: gave up after {after}s", what, after)));
            }
            Ok(Check::NotYet(state)) => state,
            Err(e) => tr!("error: {error}", error = format!("{e:#}")),
        };
        let now = Instant::now();
        let last = one_line(&last);
        if shown && (last_shown.as_deref() != Some(last.as_str()) || now - shown_at >= HEARTBEAT) {
            let waited = format!("{:.1}", (now - start).as_secs_f64());
            crate::progress!(
                "{}",
                tr!("  {what}: waiting ({waited}s) - {last}", what, waited, last)
            );
            (last_shown, shown_at) = (Some(last.clone()), now);
        }
        if now >= deadline {
            let within = format!("{within:?}");
            anyhow::bail!(tr!(
                "timed out after {within} waiting for {what}; last seen: {last}",
                within,
                what,
                last
            ));
        }
        let delay = delays.next().unwrap_or(Duration::from_millis(250));
        tokio::time::sleep(delay.min(deadline - now)).await;
    }
}

/// The other side of a wait: a state that must hold for `window` (nothing
/// recreated, nothing written, still alive) is looked at every `every` until
/// the window has passed. The first look that fails ends it with its error;
/// else it returns how many looks were taken.
pub async fn throughout<E, F, Fut>(
    window: Duration,
    every: Duration,
    mut look: F,
) -> Result<usize, E>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<(), E>>,
{
    let began = Instant::now();
    let mut pace = tokio::time::interval(every);
    let mut looks = 0;
    while began.elapsed() < window {
        pace.tick().await;
        look().await?;
        looks += 1;
    }
    Ok(looks)
}

/// Even a probe started at the deadline gets this long to answer.
const MIN_PROBE: Duration = Duration::from_secs(1);

/// States stay one line long.
fn one_line(text: &str) -> String {
    const MAX: usize = 160;
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match flat.char_indices().nth(MAX) {
        Some((at, _)) => format!("{}...", &flat[..at]),
        None => flat,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_probe_that_never_answers_times_out_at_the_deadline() {
        let error = eventually("an answer", Duration::from_secs(3), || async {
            std::future::pending::<anyhow::Result<Check<()>>>().await
        })
        .await
        .unwrap_err()
        .to_string();
        assert!(error.contains("did not answer within 3.0"), "{error}");
    }

    #[tokio::test(start_paused = true)]
    async fn returns_the_value_once_ready() {
        let mut n = 0;
        let v = poll("n to reach 3", Duration::from_secs(1), true, || {
            n += 1;
            let n = n;
            async move { Ok(if n >= 3 { Check::Done(n) } else { Check::NotYet(format!("n={n}")) }) }
        })
        .await
        .unwrap();
        assert_eq!(v, 3);
    }

    #[tokio::test(start_paused = true)]
    async fn times_out_with_the_last_state() {
        let err = eventually::<(), _, _>("never", Duration::from_secs(1), || async {
            Ok(Check::NotYet("still\nred".into()))
        })
        .await
        .unwrap_err()
        .to_string();
        assert!(err.contains("waiting for never") && err.contains("still red"), "{err}");
    }

    #[tokio::test(start_paused = true)]
    async fn stop_ends_the_wait_at_once() {
        let start = Instant::now();
        let err = eventually::<(), _, _>("a dead process", Duration::from_secs(60), || async {
            Ok(Check::Stop(anyhow::anyhow!("it exited: status 1")))
        })
        .await
        .unwrap_err();
        assert!(format!("{err:#}").contains("it exited"), "{err:#}");
        assert!(start.elapsed() < Duration::from_secs(1));
    }
}
