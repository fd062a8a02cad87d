//! The course's step examples (controller/examples/step{1,2,3}_*.rs; step 4 is
//! graded by `cargo xtask grade`, xtask/tests/grade.rs) run
//! against the lab as a person would run them, their output checked. The
//! Pods they watch carry a scheduling gate, so they sit Pending on every lab
//! (envtest has no scheduler; on kind no kubelet touches them, so no status
//! updates mix into the examples' output), and an unscheduled Pod is deleted
//! at once, so each test can reuse the names. With `E2E_WRITE_SAMPLES=1` each
//! test writes what the example printed to `docs/samples/<example>.txt`, the
//! sample outputs the guide links to.

use std::{
    path::PathBuf,
    process::Stdio,
    time::{Duration, Instant},
};

use anyhow::{Context as _, bail, ensure};
use k8s_openapi::api::core::v1::Pod;
use kube::{
    Api,
    api::{DeleteParams, Patch, PatchParams, PostParams},
};
use serde_json::json;
use tokio::{
    io::{AsyncBufReadExt, BufReader, Lines},
    process::{Child, ChildStdout},
};

use labkit::{
    lab::Lab,
    suite::{Experiment, Measured, RunsOn, entry},
};

use labkit::{command::Cmd, project, tr};

/// The course's step examples, as the suite runs them.
pub const ALL: &[Experiment] = &[
    entry!(
        step1_list_pods,
        ["step1"],
        "course step 1: the example lists the namespace's Pods by name",
        RunsOn::ClusterWide(IN_DEFAULT)
    ),
    entry!(
        step2_watch_pods,
        ["step2"],
        "course step 2: one ADD per Pod, synced, then UPDATE and DELETE; SIGTERM exits 0",
        RunsOn::ClusterWide(IN_DEFAULT)
    ),
    entry!(
        step3_queue,
        ["step3"],
        "course step 3: five quick label changes → about two processings, not five",
        RunsOn::ClusterWide(IN_DEFAULT)
    ),
    entry!(
        step4_heals_across_a_relist,
        ["step4-relist"],
        "course step 4: my-config deleted while its watch was down, then a 410 → the re-list's kick recreates it",
        RunsOn::Envtest(
            "it deletes my-config in etcd while kube-apiserver is stopped, and compacts"
        )
    ),
    entry!(
        stage2_crd,
        ["stage2"],
        "stage 2: ConfigMapTemplates kept by kube-runtime's Controller, as its own ServiceAccount",
        RunsOn::OwnCluster(
            "it installs a CustomResourceDefinition, cluster-wide, which is not the kit's to install there"
        )
    ),
];

/// Why the course's step programs need more than a namespace's rights.
const IN_DEFAULT: &str = "the course's step programs watch Pods in `default`";

/// How long an example gets to print what is expected.
const OUTPUT_WITHIN: Duration = Duration::from_secs(30);
const LABEL: &str = "e2e.lab/example";

/// A built example: `cargo test` (and so `cargo maint test`) builds them.
fn example(name: &str) -> anyhow::Result<PathBuf> {
    let path = project::target_dir().join("debug/examples").join(name);
    ensure!(
        path.is_file(),
        tr!(
            "{path} is missing: `cargo build -p controller --examples` first",
            path = path.display()
        )
    );
    Ok(path)
}

/// An example running against the lab as admin, its stdout read line by line.
struct Running {
    child: Child,
    lines: Lines<BufReader<ChildStdout>>,
    seen: Vec<String>,
}

impl Running {
    /// `name` as a learner runs it: `KUBECONFIG` is the lab's admin kubeconfig.
    fn start(lab: &Lab, name: &str) -> anyhow::Result<Running> {
        Running::start_as(&lab.file().admin_kubeconfig, name, |cmd| cmd)
    }

    /// `name` with `kubeconfig` as `--kubeconfig`, then what `more` adds.
    fn start_as(
        kubeconfig: &std::path::Path,
        name: &str,
        more: impl FnOnce(Cmd) -> Cmd,
    ) -> anyhow::Result<Running> {
        let cmd = more(
            Cmd::new(example(name)?.display().to_string())
                .env("KUBECONFIG", kubeconfig.display().to_string()),
        );
        let mut child = cmd.spawn(Stdio::piped(), Stdio::inherit())?;
        let stdout = child.stdout.take().with_context(|| tr!("stdout is piped"))?;
        Ok(Running { child, lines: BufReader::new(stdout).lines(), seen: Vec::new() })
    }

    /// Reads lines until one satisfies `wanted`; fails with what it printed.
    async fn until(&mut self, what: &str, wanted: impl Fn(&str) -> bool) -> anyhow::Result<String> {
        let deadline = Instant::now() + OUTPUT_WITHIN;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = match tokio::time::timeout(left, self.lines.next_line()).await {
                Ok(Ok(Some(line))) => line,
                Ok(Ok(None)) => bail!(tr!(
                    "the example ended before {what}; it printed:\n{printed}",
                    what,
                    printed = self.seen.join("\n")
                )),
                Ok(Err(e)) => return Err(e.into()),
                Err(_) => bail!(tr!(
                    "no {what} within {within}; it printed:\n{printed}",
                    what,
                    within = format!("{OUTPUT_WITHIN:?}"),
                    printed = self.seen.join("\n")
                )),
            };
            self.seen.push(line.clone());
            if wanted(&line) {
                return Ok(line);
            }
        }
    }

    /// Reads everything it prints until it exits by itself; its exit status.
    async fn finish(&mut self) -> anyhow::Result<std::process::ExitStatus> {
        let read_all = async {
            while let Some(line) = self.lines.next_line().await? {
                self.seen.push(line);
            }
            Ok::<_, anyhow::Error>(self.child.wait().await?)
        };
        tokio::time::timeout(OUTPUT_WITHIN, read_all).await.with_context(|| {
            tr!("still running after {within}", within = format!("{OUTPUT_WITHIN:?}"))
        })?
    }

    /// SIGTERM, then the exit status (it must be a clean exit).
    async fn terminate(mut self) -> anyhow::Result<Vec<String>> {
        let (status, _) =
            crate::faults::lifecycle::terminate(&mut self.child, OUTPUT_WITHIN).await?;
        while let Ok(Some(line)) = self.lines.next_line().await {
            self.seen.push(line);
        }
        ensure!(
            status.success(),
            tr!(
                "exited {status} after SIGTERM; it printed:\n{printed}",
                status,
                printed = self.seen.join("\n")
            )
        );
        Ok(self.seen)
    }
}

/// What an example printed, log timestamps dropped, as `docs/samples/<name>.txt`
/// ([`project::write_sample`]).
fn write_sample(name: &str, lines: &[String]) -> anyhow::Result<()> {
    let text: String = lines.iter().map(|l| format!("{}\n", without_timestamp(l))).collect();
    project::write_sample(&format!("{name}.txt"), &text)
}

/// `2026-12-01T12:00:00.123456Z  INFO step4_controller: …` → `INFO step4_controller: …`.
pub fn without_timestamp(line: &str) -> &str {
    match line.split_once(' ') {
        Some((first, rest)) if first.len() > 20 && first.as_bytes()[10] == b'T' => {
            rest.trim_start()
        }
        _ => line,
    }
}

/// Pending pods for the examples to see, deleted again by [`remove_pods`].
async fn create_pods(lab: &Lab, names: &[&str]) -> anyhow::Result<Api<Pod>> {
    let pods: Api<Pod> = Api::namespaced(lab.client(), "default");
    for name in names {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {LABEL: "yes"}},
            "spec": {
                "schedulingGates": [{"name": "e2e.lab/never-scheduled"}],
                "containers": [{"name": "c", "image": "registry.invalid/never-pulled:1"}],
            },
        }))?;
        pods.create(&PostParams::default(), &pod).await?;
    }
    Ok(pods)
}

async fn remove_pods(pods: &Api<Pod>) -> anyhow::Result<()> {
    let params = kube::api::ListParams::default().labels(&format!("{LABEL}=yes"));
    pods.delete_collection(&DeleteParams::default(), &params).await?;
    let what = tr!("the example Pods to be gone");
    labkit::eventually::eventually(&what, OUTPUT_WITHIN, || async {
        let left = pods.list(&params).await?.items.len();
        Ok(labkit::eventually::Check::done_if(left == 0, (), tr!("{left} left", left)))
    })
    .await
}

/// Step 1: the list shows the Pods of the namespace by name.
pub async fn step1_list_pods(lab: &mut Lab) -> anyhow::Result<Measured> {
    let pods = create_pods(lab, &["example-a", "example-b"]).await?;
    let result = async {
        let mut running = Running::start(lab, "step1_list_pods")?;
        let status = running.finish().await?;
        let text = running.seen.join("\n");
        ensure!(status.success(), tr!("exited {status}: {text}", status, text));
        for name in ["example-a", "example-b"] {
            ensure!(
                text.lines().any(|l| l.trim() == name),
                tr!("{name} not listed:\n{text}", name, text)
            );
        }
        write_sample("step1_list_pods", &running.seen)?;
        Ok(Measured::said(tr!("listed both Pods by name")))
    }
    .await;
    remove_pods(&pods).await?;
    result
}

/// Step 2: one ADD per Pod that existed before the start (the initial list),
/// then the synced line; later changes as UPDATE and DELETE; SIGTERM ends it
/// cleanly.
pub async fn step2_watch_pods(lab: &mut Lab) -> anyhow::Result<Measured> {
    let pods = create_pods(lab, &["example-a", "example-b", "example-c"]).await?;
    let result = async {
        let mut running = Running::start(lab, "step2_watch_pods")?;
        running.until(&tr!("the synced line"), |l| l.starts_with("=== cache synced")).await?;
        let adds: Vec<&String> =
            running.seen.iter().filter(|l| l.starts_with("[ADD] default/example-")).collect();
        ensure!(
            adds.len() == 3,
            tr!(
                "expected one [ADD] per existing Pod before the synced line: {seen}",
                seen = format!("{:?}", running.seen)
            )
        );
        let label = json!({"metadata": {"labels": {"round": "1"}}});
        pods.patch("example-a", &PatchParams::default(), &Patch::Merge(&label)).await?;
        running.until("[UPDATE] default/example-a", |l| l == "[UPDATE] default/example-a").await?;
        pods.delete("example-b", &DeleteParams::default()).await?;
        running.until("[DELETE] default/example-b", |l| l == "[DELETE] default/example-b").await?;
        let seen = running.terminate().await?;
        ensure!(
            seen.last().map(String::as_str) == Some("stopped"),
            tr!("no clean stop: {seen}", seen = format!("{seen:?}"))
        );
        write_sample("step2_watch_pods", &seen)?;
        Ok(Measured::said(tr!("3 ADDs then synced; UPDATE on a label; DELETE; SIGTERM → exit 0")))
    }
    .await;
    remove_pods(&pods).await?;
    result
}

/// Step 3: five quick label changes of one Pod while each processing takes
/// 2 s → about two processings, not five (the course's words), the last one
/// reading the latest labels.
pub async fn step3_queue(lab: &mut Lab) -> anyhow::Result<Measured> {
    let pods = create_pods(lab, &["example-a"]).await?;
    let result = async {
        let mut running = Running::start(lab, "step3_queue")?;
        running.until(&tr!("the synced line"), |l| l.starts_with("=== cache synced")).await?;
        // The initial list's own processing of the Pod.
        running
            .until(&tr!("the first processing"), |l| l.contains("processed default/example-a"))
            .await?;
        let before = running.seen.len();
        for round in 1..=5 {
            let label = json!({"metadata": {"labels": {"round": round.to_string()}}});
            pods.patch("example-a", &PatchParams::default(), &Patch::Merge(&label)).await?;
        }
        running
            .until(&tr!("a processing that reads round=5"), |l| {
                l.contains("processed default/example-a") && l.contains("\"round\": \"5\"")
            })
            .await?;
        // Everything it printed, up to its exit: every processing counts.
        let seen = running.terminate().await?;
        let processings =
            seen[before..].iter().filter(|l| l.contains("processed default/example-a")).count();
        ensure!(
            (2..=3).contains(&processings),
            tr!(
                "5 changes → {processings} processings, the course says about two: {seen}",
                processings,
                seen = format!("{:?}", &seen[before..])
            )
        );
        write_sample("step3_queue", &seen)?;
        Ok(Measured::said(tr!(
            "5 label changes → {processings} processings, the last one reading round=5",
            processings
        )))
    }
    .await;
    remove_pods(&pods).await?;
    result
}

/// Step 4 misses a delete: kube-apiserver is stopped, my-config deleted in
/// etcd behind its back and etcd compacted, so the step's watch comes back
/// to a 410 and lists again. No Delete event ever comes (kube's watcher has
/// no tombstone, unlike client-go's informer); the kick after the re-list
/// must bring the key, and my-config back. The suite puts the lab's controller and
/// kube-apiserver back after it (`run_test`, e2e/tests/suite.rs), as after every test.
pub async fn step4_heals_across_a_relist(lab: &mut Lab) -> anyhow::Result<Measured> {
    lab.stop_controller().await?;
    let mut running = Running::start(lab, "step4_controller")?;
    running.until("cache synced", |l| l.contains("cache synced")).await?;
    labkit::converge::wait_desired(lab).await?;
    crate::faults::control_plane::compact_while_down(lab).await?;
    let back = Instant::now();
    labkit::converge::wait_desired(lab).await?;
    let healed = back.elapsed();
    let seen = running.terminate().await?;
    ensure!(
        seen.iter().any(|l| l.contains("watch error")),
        tr!(
            "the step's watch never failed, so it never listed again: {seen}",
            seen = format!("{seen:?}")
        )
    );
    Ok(Measured::took(
        healed,
        tr!(
            "deleted in etcd while the API server was down, 410 on its return → recreated {ms} ms \
             after the API server was back (the re-list's kick)",
            ms = format!("{:.0}", healed.as_secs_f64() * 1000.0)
        ),
    ))
}

mod stage2_controller;
pub use stage2_controller::stage2_crd;
