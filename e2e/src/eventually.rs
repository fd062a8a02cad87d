//! Polling with a deadline: the suite never sleeps a fixed time waiting for a
//! state. Fast first tries (a controller heals in milliseconds), then slower
//! ones, a bounded total, and on timeout a message with the last state seen.

use std::{future::Future, time::Duration};

use backon::{BackoffBuilder, ExponentialBuilder};
use tokio::time::Instant;

/// What one look found.
pub enum Check<T> {
    Done(T),
    /// Not there yet: what was seen instead.
    NotYet(String),
}

/// Polls `probe` until it returns `Check::Done`, for at most `within`. An
/// `Err` from the probe is retried too; the last state or error seen is in
/// the timeout message.
pub async fn eventually<T, F, Fut>(what: &str, within: Duration, mut probe: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<Check<T>>>,
{
    let deadline = Instant::now() + within;
    let mut delays = ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(2))
        .with_max_delay(Duration::from_millis(250))
        .with_factor(2.0)
        .without_max_times()
        .build();
    loop {
        let last = match probe().await {
            Ok(Check::Done(value)) => return Ok(value),
            Ok(Check::NotYet(state)) => state,
            Err(e) => format!("error: {e:#}"),
        };
        let now = Instant::now();
        if now >= deadline {
            anyhow::bail!("timed out after {within:?} waiting for {what}; last seen: {last}");
        }
        let delay = delays.next().unwrap_or(Duration::from_millis(250));
        tokio::time::sleep(delay.min(deadline - now)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn returns_the_value_once_ready() {
        let mut n = 0;
        let v = eventually("n to reach 3", Duration::from_secs(1), || {
            n += 1;
            let n = n;
            async move {
                Ok(if n >= 3 {
                    Check::Done(n)
                } else {
                    Check::NotYet(format!("n={n}"))
                })
            }
        })
        .await
        .unwrap();
        assert_eq!(v, 3);
    }

    #[tokio::test(start_paused = true)]
    async fn times_out_with_the_last_state() {
        let err = eventually::<(), _, _>("never", Duration::from_secs(1), || async {
            Ok(Check::NotYet("still red".into()))
        })
        .await
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("waiting for never") && err.contains("still red"),
            "{err}"
        );
    }
}
