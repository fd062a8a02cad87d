//! Faults of the watch itself: the Role loses `list`, or `watch`, and the
//! API server restarts, so that the controller's next LIST or WATCH is
//! refused (as after a token expires: 401, or a Role edit: 403). It must
//! retry at growing gaps (client-go's 0.8 s doubling to 30 s), say not ready
//! meanwhile, list again rather than trust a frozen cache, and recover once
//! the Role is back.

use std::time::Duration;

use anyhow::ensure;
use controller::runner::{LOG_RELISTED, LOG_WATCH_FAILED};
use tokio::time::Instant;

use super::{
    ensure_not_restarted, heal_after_delete, lines_with, ms, rbac, secs, then_restore, until_status,
};
use labkit::eventually::{Check, eventually};
use labkit::{converge::HEAL_WITHIN, lab::Lab, suite::Measured, tr};

/// The first delay of the watch's backoff; each next one is at least twice.
const FIRST_DELAY_MS: f64 = 800.0;
/// The controller's longest pause between attempts (30 s, twice with jitter).
const MAX_GAP: Duration = Duration::from_secs(60);

/// `list` refused: the LIST fails again and again → retried at growing
/// gaps, not ready; `list` back → ready within the last gap, heals.
pub async fn list_refused_backs_off(lab: &mut Lab) -> anyhow::Result<Measured> {
    let result = refused(lab, "list", 3).await;
    then_restore(lab, result).await
}

/// `watch` refused: the LIST works, the WATCH cannot start → not ready (not a
/// frozen cache that looks ready), and each failure is followed by a new
/// LIST; `watch` back → ready, heals.
pub async fn watch_refused_not_ready(lab: &mut Lab) -> anyhow::Result<Measured> {
    let result = refused(lab, "watch", 3).await;
    then_restore(lab, result).await
}

/// Takes `verb` on my-config out of the controller's Role, restarts the API
/// server (every connection starts anew), waits for `failures` refused
/// attempts, then gives the verb back.
async fn refused(lab: &mut Lab, verb: &str, failures: usize) -> anyhow::Result<Measured> {
    // Its backoff starts at the first delay.
    super::control_plane::fresh_controller(lab).await?;
    let (was, mark) = (lab.controller_identity().await?, lab.log_mark()?);
    let original = rbac::edit_rules(lab, |rules| {
        for rule in rules.iter_mut().filter(|r| r.resource_names.is_some()) {
            rule.verbs.retain(|v| v != verb);
        }
    })
    .await?;
    let target = lab.desired().name().to_string();
    rbac::wait_until_allowed(lab, verb, Some(&target), false).await?;
    let result = observe(lab, verb, failures, &mark).await;
    rbac::edit_rules(lab, |rules| *rules = original).await?;
    rbac::wait_until_allowed(lab, verb, Some(&target), true).await?;
    let (gaps, not_ready_after, relists) = result?;
    let back = Instant::now();
    let what = tr!("the controller to be ready again");
    until_status(lab, &what, "/readyz", 200, MAX_GAP + HEAL_WITHIN).await?;
    let ready_after = back.elapsed();
    let last_gap = Duration::from_secs_f64(gaps.last().copied().unwrap_or_default() / 1000.0);
    ensure!(
        ready_after <= last_gap.mul_f64(2.0) + Duration::from_secs(3),
        tr!(
            "ready {after} after {verb} was given back: more than the controller's next retry ({gap}, jitter up to twice)",
            after = secs(ready_after),
            verb,
            gap = ms(last_gap)
        )
    );
    let healed = heal_after_delete(lab).await?;
    ensure_not_restarted(lab, &was, &mark).await?;
    let gaps: Vec<String> = gaps.iter().map(|g| format!("{:.1}", g / 1000.0)).collect();
    Ok(Measured::took(
        ready_after,
        tr!(
            "{verb} refused: retries {gaps} s apart, /readyz 503 {not_ready} after the API server was back{lists}; \
             {verb} given back → ready in {ready}; delete → healed in {healed}",
            verb,
            gaps = gaps.join(", "),
            not_ready = secs(not_ready_after),
            lists = match relists {
                0 => String::new(),
                _ => tr!(", {relists} LISTs in between", relists),
            },
            ready = secs(ready_after),
            healed = ms(healed)
        ),
    ))
}

/// Restarts the API server and watches the controller fail `failures`
/// times: the retry delays it logged (they must grow), how soon it said not
/// ready, and how many times it listed again meanwhile.
async fn observe(
    lab: &mut Lab,
    verb: &str,
    failures: usize,
    mark: &labkit::lab::ControllerRun,
) -> anyhow::Result<(Vec<f64>, Duration, usize)> {
    lab.restart_api_server(&[]).await?;
    let back = Instant::now();
    until_status(lab, &tr!("the controller to say not ready"), "/readyz", 503, HEAL_WITHIN).await?;
    let not_ready = back.elapsed();
    // The backoff (800 ms doubling to 30 s, each up to twice with jitter) may
    // already be at its cap: on kind the kubelet brings a killed API server
    // back only after its own growing pause, and the controller failed
    // meanwhile. So each attempt may come up to a minute after the last.
    let within = MAX_GAP * u32::try_from(failures)? + Duration::from_secs(10);
    let log = eventually(&tr!("{failures} refused attempts", failures), within, || async {
        let log = lab.controller_log(mark).await?;
        let refused = refusals(&log, verb).len();
        Ok(Check::done_if(refused >= failures, log, tr!("{refused} refused so far", refused)))
    })
    .await?;
    let gaps: Vec<f64> =
        refusals(&log, verb).into_iter().filter_map(rbac::retry_delay_ms).collect();
    for (i, gap) in gaps.iter().enumerate() {
        let floor = FIRST_DELAY_MS * f64::from(1u32 << i.min(5));
        ensure!(
            *gap >= floor.min(30_000.0) * 0.999,
            tr!("the retry gaps do not grow: {gaps} ms", gaps = format!("{gaps:?}"))
        );
    }
    ensure!(
        gaps.len() >= failures,
        tr!(
            "{count} retries logged with a delay: {gaps}",
            count = gaps.len(),
            gaps = format!("{gaps:?}")
        )
    );
    // Every failure is followed by a new LIST: after a refused WATCH, the LIST works.
    let relists = if verb == "watch" {
        let relists = lines_with(&log, LOG_RELISTED).len();
        ensure!(
            relists + 1 >= failures,
            tr!("{failures} watches refused but only {relists} re-lists", failures, relists)
        );
        relists
    } else {
        0
    };
    Ok((gaps, not_ready, relists))
}

/// The watch failure lines that are RBAC refusing `verb` (403 Forbidden).
fn refusals<'a>(log: &'a str, verb: &str) -> Vec<&'a str> {
    let refused = |l: &&str| l.contains("forbidden") && l.contains(&format!("cannot {verb}"));
    lines_with(log, LOG_WATCH_FAILED).into_iter().filter(refused).collect()
}
