//! The kit's own checks of the lab, beside the course's experiments
//! (`grader::experiments`) and run by the same suite: the version rule,
//! no hot loop, least privilege, the metrics' series, the pod's contract.
//! Nothing to watch live in them, so `cargo xtask exp` narrates none.

pub(crate) mod least_privilege;
mod pod;
mod security;
mod version_check;

use std::time::Duration;

use anyhow::{bail, ensure};
use controller::{
    metrics::{RECONCILES, WRITES},
    version,
};
use tokio::time::Instant;

use labkit::{
    converge::{HEAL_WITHIN, wait_desired},
    eventually::{Check, eventually},
    lab::Lab,
    suite::{Experiment, Measured, RunsOn, entry},
    tr,
};

use least_privilege::least_privilege;
use pod::pod_ready_non_root_read_only;
use version_check::version_matching;

/// Every check, in the order the suite runs them (after the course's experiments).
pub const ALL: &[Experiment] = &[
    entry!(
        version_matching,
        ["version"],
        "client built for 1.X ↔ cluster 1.X (±1 allowed); kubectl; kind node image"
    ),
    entry!(no_hot_loop, ["hot-loop"], "1 s resync for 5 s → reconciles run, nothing is written"),
    entry!(
        least_privilege,
        ["rbac"],
        "the ServiceAccount may do exactly what the Role grants",
        RunsOn::ClusterWide("it asks SubjectAccessReviews about the controller's ServiceAccount")
    ),
    entry!(
        metrics_series_present_from_start,
        ["metrics_complete", "metrics"],
        "/metrics: every family prefixed my_controller_, every result and verb from the start, build_info"
    ),
    entry!(
        pod_ready_non_root_read_only,
        ["pod_contract", "pod"],
        "the pod as the kubelet runs it: probes, image, user, read-only root, no capabilities, projected token",
        RunsOn::Kind("the kubelet and the node's container runtime")
    ),
];

/// With a 1 s resync, over 5 s reconciles keep running and nothing is written. The suite
/// puts the lab's own flags back after it (`run_test`, e2e/tests/suite.rs), as after every test.
pub async fn no_hot_loop(lab: &mut Lab) -> anyhow::Result<Measured> {
    lab.restart_controller(&["--resync", "1s"]).await?;
    wait_desired(lab).await?;
    let start = lab.metrics().await?;
    let (writes0, reconciles0) = (start.sum(WRITES), start.sum(RECONCILES));
    let began = Instant::now();
    let window = Duration::from_secs(5);
    let reconciles = eventually(&tr!("5 s of resyncs"), window + HEAL_WITHIN, || async {
        let m = lab.metrics().await?;
        let writes = m.sum(WRITES) - writes0;
        if writes > 0.0 {
            // A write here is a failure, not a state to wait out.
            bail!(tr!("the controller wrote {writes} times while my-config was right", writes));
        }
        let reconciles = m.sum(RECONCILES) - reconciles0;
        Ok(Check::done_if(
            began.elapsed() >= window && reconciles >= 4.0,
            reconciles,
            tr!(
                "{reconciles} reconciles after {elapsed}",
                reconciles,
                elapsed = format!("{:?}", began.elapsed())
            ),
        ))
    })
    .await;
    // eventually() retries errors; a write must fail at once, so re-check.
    let writes = lab.metrics().await?.sum(WRITES) - writes0;
    ensure!(
        writes == 0.0,
        tr!("the controller wrote {writes} times while my-config was right", writes)
    );
    let reconciles = reconciles?;
    Ok(Measured::said(tr!(
        "{reconciles} reconciles in {secs} s, 0 writes",
        reconciles,
        secs = format!("{:.1}", began.elapsed().as_secs_f64())
    )))
}

/// The controller's `/metrics` as a Prometheus user finds them: every family
/// named `my_controller_…`, every labelled series there before it first
/// moves (a rate over a series that appears later starts wrong), and
/// `build_info` with the Kubernetes version it was built for.
pub async fn metrics_series_present_from_start(lab: &mut Lab) -> anyhow::Result<Measured> {
    use controller::metrics::{self as names, ReconcileResult, WriteVerb};
    let text = lab.metrics_text().await?;
    let scrape = labkit::scrape::Scrape::parse(&text);
    let families: Vec<&str> =
        text.lines().filter_map(|l| l.strip_prefix("# TYPE ")?.split_whitespace().next()).collect();
    let stray: Vec<&&str> = families.iter().filter(|f| !f.starts_with("my_controller_")).collect();
    ensure!(
        stray.is_empty(),
        tr!("families without the prefix: {stray}", stray = format!("{stray:?}"))
    );
    let mut missing = Vec::new();
    for result in ReconcileResult::ALL {
        let label = format!("{result:?}");
        if !text.contains(&format!("{}{{result=\"{label}\"}}", names::RECONCILES)) {
            missing.push(format!("{}{{result={label}}}", names::RECONCILES));
        }
    }
    for verb in WriteVerb::ALL {
        let label = format!("{verb:?}");
        if !text.contains(&format!("{}{{verb=\"{label}\"}}", names::WRITES)) {
            missing.push(format!("{}{{verb={label}}}", names::WRITES));
        }
    }
    for name in [
        names::GIVE_UPS,
        names::PANICS,
        names::EVENTS_DROPPED,
        names::IN_FLIGHT,
        names::QUEUE_DEPTH,
        names::QUEUE_DELAYED,
    ] {
        if !text.lines().any(|l| l.starts_with(name)) {
            missing.push(name.to_string());
        }
    }
    ensure!(
        missing.is_empty(),
        tr!("series missing before they moved: {missing}", missing = format!("{missing:?}"))
    );
    let built_for = version::target();
    ensure!(
        text.lines().any(|l| l.starts_with(names::BUILD_INFO)
            && l.contains(&format!("kubernetes=\"{built_for}\""))),
        tr!("no {series} naming Kubernetes {built_for}", series = names::BUILD_INFO, built_for)
    );
    let series = scrape.series();
    Ok(Measured::said(tr!(
        "{families} families, {series} series, all my_controller_…; every result and verb from the start; build_info kubernetes={built_for}",
        families = families.len(),
        series,
        built_for
    )))
}
