//! Waiting for a state by polling with a deadline: never a fixed sleep that hopes the state
//! has arrived. Progress is shown as it changes, and a timeout says what was seen last.

use std::future::Future;
use std::time::{Duration, Instant};

use anyhow::{Result, anyhow};

/// How often a probe runs: short, because the lab's cold start is counted in seconds.
const POLL_INTERVAL: Duration = Duration::from_millis(100);
/// An unchanged state is repeated this often, so a long wait visibly is one.
const HEARTBEAT: Duration = Duration::from_secs(3);

/// What one probe saw.
pub enum Seen<T> {
    /// The awaited state, with whatever the probe learned on the way.
    Ready(T),
    /// Not yet; the text says what was seen instead.
    NotYet(String),
    /// It will never get there (the process died): stop waiting.
    Failed(anyhow::Error),
}

/// Probe until `Ready`, `Failed`, or `timeout`; the error of a timeout names the last state seen.
pub async fn until<T, F, Fut>(what: &str, timeout: Duration, mut probe: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Seen<T>>,
{
    let start = Instant::now();
    let mut last_seen: Option<String> = None;
    let mut last_shown = start;
    loop {
        match probe().await {
            Seen::Ready(value) => {
                eprintln!("  {what}: ready after {:.1}s", start.elapsed().as_secs_f64());
                return Ok(value);
            }
            Seen::Failed(error) => {
                return Err(error.context(format!(
                    "{what} failed after {:.1}s",
                    start.elapsed().as_secs_f64()
                )));
            }
            Seen::NotYet(seen) => {
                let changed = last_seen.as_deref() != Some(seen.as_str());
                if changed || last_shown.elapsed() >= HEARTBEAT {
                    eprintln!(
                        "  {what}: waiting ({:.1}s) - {}",
                        start.elapsed().as_secs_f64(),
                        one_line(&seen)
                    );
                    last_shown = Instant::now();
                }
                last_seen = Some(seen);
            }
        }
        if start.elapsed() >= timeout {
            return Err(anyhow!(
                "{what} not ready after {timeout:?}; last seen: {}",
                last_seen.as_deref().map(one_line).unwrap_or_default()
            ));
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

/// Progress lines stay one line long.
fn one_line(text: &str) -> String {
    const MAX: usize = 160;
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() > MAX {
        let cut: String = flat.chars().take(MAX).collect();
        format!("{cut}...")
    } else {
        flat
    }
}
