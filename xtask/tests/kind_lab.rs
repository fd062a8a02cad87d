//! Tests of a running kind lab (`cargo maint test` makes one): what only a
//! reused lab and the lab verbs show, the offline bundle, and the refusals
//! of a bad `lab up`.

mod common;

use common::{lab, run, succeeds, xtask};
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, Patch, PatchParams};
use labkit::command::Cmd;
use labkit::{
    deployment::{DeploymentHost, NAME as DEPLOYMENT},
    lab::Lab,
};
use serial_test::serial;
use std::time::Duration;

use labkit::eventually::Check;

/// `lab up` as this lab was made: the same name and node image.
fn up_again(lab: &Lab) -> Vec<String> {
    let kind = lab.file().kind.as_ref().expect("a kind lab");
    [
        "lab",
        "up",
        "--provider",
        "kind",
        "--name",
        &lab.file().name,
        "--node-image",
        &kind.node_image,
    ]
    .map(String::from)
    .to_vec()
}

fn args(words: &[String]) -> Vec<&str> {
    words.iter().map(String::as_str).collect()
}

async fn ready_pod(lab: &Lab) -> String {
    DeploymentHost::new(lab.client(), labkit::deployment::NAMESPACE)
        .ready_pod()
        .await
        .unwrap()
        .expect("a ready controller pod")
}

#[tokio::test]
#[serial]
async fn a_second_up_changes_nothing() {
    let lab = lab().await;
    let pod = ready_pod(&lab).await;
    succeeds(&xtask(&args(&up_again(&lab))));
    assert_eq!(ready_pod(&lab).await, pod, "a second `lab up` replaced the controller's pod");
}

#[tokio::test]
#[serial]
async fn up_clears_a_tests_leftover_arguments() {
    let lab = lab().await;
    let deployments: Api<Deployment> = Api::namespaced(lab.client(), labkit::deployment::NAMESPACE);
    let leftover = serde_json::json!({"spec": {"template": {"spec": {"containers": [
        {"name": "controller", "args": ["--resync", "7s"]}]}}}});
    let patch = Patch::Strategic(&leftover);
    deployments.patch(DEPLOYMENT, &PatchParams::default(), &patch).await.unwrap();
    succeeds(&xtask(&args(&up_again(&lab))));
    let args = deployments
        .get(DEPLOYMENT)
        .await
        .unwrap()
        .spec
        .and_then(|s| s.template.spec)
        .and_then(|s| s.containers.into_iter().next())
        .and_then(|c| c.args);
    assert!(args.as_ref().is_none_or(|a| a.is_empty()), "lab up left the arguments {args:?}");
}

#[tokio::test]
#[serial]
async fn up_refuses_the_cluster_with_another_node_image() {
    let lab = lab().await;
    let node = &lab.file().kind.as_ref().unwrap().node_image;
    let other = "lab-kit/kind-node:another-tag";
    succeeds(&Cmd::argv(["docker", "tag", node, other]));
    let mut up = up_again(&lab);
    *up.last_mut().unwrap() = other.into();
    let refused = run(&xtask(&args(&up)));
    let _ = Cmd::argv(["docker", "rmi", other]).output();
    assert!(
        !refused.ok && refused.stderr.contains(&format!("runs node image {node}, not {other}")),
        "lab up with another node image did not refuse the existing cluster:\n{}",
        refused.stderr
    );
}

#[tokio::test]
#[serial]
async fn status_and_logs_show_the_pod() {
    let lab = lab().await;
    let (name, pod) = (&lab.file().name, ready_pod(&lab).await);
    let status = run(&xtask(&["lab", "status", "--name", name]));
    assert!(
        status.ok
            && status.stdout.contains(&format!("pod {pod}: Running, ready true, 0 restarts"))
            && status.stdout.trim_end().ends_with("healthy"),
        "`lab status` does not show pod {pod} healthy:\n{}",
        status.stdout
    );
    let logs = run(&xtask(&["lab", "logs", "--name", name]));
    assert!(
        logs.ok && logs.stdout.contains(controller::runner::LOG_STARTING),
        "`lab logs` shows no start line of pod {pod}:\n{}",
        logs.stdout
    );
}

#[tokio::test]
#[serial]
async fn a_lab_for_another_config_map_keeps_that_one() {
    let lab = lab().await;
    common::another_target(&args(&up_again(&lab)));
}

/// The instructor's bundle brings an attendee's lab up without the
/// controller image in Docker: it comes back from the archive; and step 2's nginx,
/// gone from the node, comes back from it too and runs without a pull.
#[tokio::test]
#[serial]
async fn the_offline_bundle_brings_the_lab_up() {
    let lab = lab().await;
    let kind = lab.file().kind.as_ref().cloned().unwrap();
    let bundle = labkit::project::target_dir().join("lab-bundle-test.tar");
    let bundle_arg = bundle.display().to_string();
    let image_id = |image: &str| {
        Cmd::argv(["docker", "image", "inspect", "--format", "{{.Id}}", image]).read().ok()
    };
    let before = image_id(&kind.controller_image);
    succeeds(&xtask(&["lab", "bundle", "-f", &bundle_arg, "--node-image", &kind.node_image]));
    succeeds(&Cmd::argv(["docker", "rmi", &kind.controller_image]));
    let rmi = ["docker", "exec", &kind.node, "crictl", "rmi", "docker.io/library/nginx:latest"];
    let _ = Cmd::argv(rmi).read();
    let pod = ready_pod(&lab).await;
    let up = run(&xtask(&["lab", "up", "--provider", "kind", "--name", &lab.file().name])
        .args(["--bundle", &bundle_arg]));
    let _ = std::fs::remove_file(&bundle);
    assert!(up.ok, "lab up --bundle failed:\n{}", up.stderr);
    assert_eq!(image_id(&kind.controller_image), before, "the bundle held another image");
    assert_eq!(ready_pod(&lab).await, pod, "the same image must not restart the pod");
    let mirror = mirror_container(&lab);
    let pulls = || mirror_log(&mirror).matches("nginx/manifests").count();
    let before = pulls();
    nginx_runs(&lab, Some("IfNotPresent")).await;
    assert_eq!(pulls(), before, "nginx was pulled, not taken from the bundle");
}

/// Step 2's pod, `kubectl run nginx --image=nginx` as the pages run it (`pull_policy`: the
/// default, Always for `latest`, or IfNotPresent), Running; then deleted.
async fn nginx_runs(lab: &Lab, pull_policy: Option<&str>) {
    use k8s_openapi::api::core::v1::Pod;
    let pods: Api<Pod> = Api::namespaced(lab.client(), "default");
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "nginx", "labels": {"run": "nginx"}},
        "spec": {"containers": [{"name": "nginx", "image": "nginx", "imagePullPolicy": pull_policy}]},
    }))
    .unwrap();
    let _ = pods.delete("nginx", &Default::default()).await;
    labkit::eventually::eventually("no pod nginx", Duration::from_secs(60), || async {
        let left = pods.get_opt("nginx").await?;
        Ok(Check::done_if(left.is_none(), (), "pod nginx still there"))
    })
    .await
    .unwrap();
    pods.create(&Default::default(), &pod).await.expect("create pod nginx");
    let running =
        labkit::eventually::eventually("pod nginx Running", Duration::from_secs(180), || async {
            let pod = pods.get("nginx").await?;
            let status = pod.status.unwrap_or_default();
            let phase = status.phase.clone().unwrap_or_default();
            let waiting = status.container_statuses.iter().flatten().filter_map(|c| {
                c.state
                    .as_ref()?
                    .waiting
                    .as_ref()
                    .map(|w| format!("{:?}: {:?}", w.reason, w.message))
            });
            let seen = format!("{phase} {}", waiting.collect::<Vec<_>>().join(" "));
            Ok(Check::done_if(phase == "Running", (), seen))
        })
        .await;
    let _ = pods.delete("nginx", &Default::default()).await;
    running.unwrap_or_else(|e| panic!("{e:#}"));
}

/// The registry mirror the lab's node pulls Docker Hub through (its containerd's
/// `hosts.toml`), by its container's name: `lab up --registry-mirror` wrote it.
fn mirror_container(lab: &Lab) -> String {
    let node = &lab.file().kind.as_ref().expect("a kind lab").node;
    let hosts = Cmd::argv(["docker", "exec", node, "cat"])
        .arg("/etc/containerd/certs.d/docker.io/hosts.toml")
        .read()
        .expect("this lab comes up with --registry-mirror (cargo maint test names one)");
    let host = hosts.lines().find_map(|l| l.strip_prefix("[host.\"http://")).expect(&hosts);
    host.split([':', '"']).next().unwrap().to_string()
}

/// What the mirror's registry logged (its requests), both streams.
fn mirror_log(container: &str) -> String {
    let log = Cmd::argv(["docker", "logs", container]).output().unwrap();
    String::from_utf8_lossy(&log.stderr).into_owned() + &String::from_utf8_lossy(&log.stdout)
}

/// Behind a firewall, as here: Docker Hub through the mirror `lab up --registry-mirror`
/// wrote into the node's containerd. Step 2's nginx comes from the mirror.
#[tokio::test]
#[serial]
async fn step_2s_nginx_is_pulled_through_the_registry_mirror() {
    let lab = lab().await;
    let mirror = mirror_container(&lab);
    let node = &lab.file().kind.as_ref().unwrap().node;
    let _ = Cmd::argv(["docker", "exec", node, "crictl", "rmi", "docker.io/library/nginx:latest"])
        .read();
    nginx_runs(&lab, None).await;
    let log = Cmd::argv(["docker", "logs", &mirror]).output().unwrap();
    let log =
        String::from_utf8_lossy(&log.stderr).into_owned() + &String::from_utf8_lossy(&log.stdout);
    assert!(
        log.contains("/v2/library/nginx/manifests/latest"),
        "the mirror served no nginx:\n{log}"
    );
}

/// Behind a firewall, before `lab up`: doctor probes Docker Hub and says what it found, as
/// this machine's own lookup does; unreachable, it names the mirror setting, the offline
/// bundle, and whether building the node image here works (Go modules and Debian reached).
/// In Chinese, every line of it (docs/samples/doctor-kind.zh-CN.txt).
#[tokio::test]
#[serial]
async fn doctor_knows_the_network_and_the_routes_that_work_here() {
    let lab = lab().await;
    let name = &lab.file().name;
    let ran = run(&xtask(&[
        "doctor",
        "--provider",
        "kind",
        "--name",
        name,
        "-o",
        "json",
        "--lang",
        "en",
    ]));
    let document: serde_json::Value = serde_json::from_str(&ran.stdout).expect(&ran.stdout);
    let row = |name: &str| {
        let rows = document["checks"].as_array().unwrap();
        rows.iter().find(|c| c["name"] == name).cloned().unwrap_or_else(|| panic!("no {name} row"))
    };
    let node = row("kind node image");
    let resolved = std::net::ToSocketAddrs::to_socket_addrs("registry-1.docker.io:443").is_ok();
    if resolved {
        assert_ne!(node["status"], "fail", "Docker Hub resolves here: {node}");
    } else {
        assert_eq!(node["status"], "fail", "Docker Hub does not resolve here: {node}");
        let fix = node["fix"].as_str().unwrap();
        let reached = |source: &str| row(source)["status"] == "pass";
        let built = match reached("Go modules") && reached("Debian packages") {
            true => "`--node-image built` works here",
            false => "`--node-image built` needs Go modules and Debian packages",
        };
        for route in ["--registry-mirror https://", "--bundle FILE", built] {
            assert!(fix.contains(route), "no {route:?} in the fix:\n{fix}");
        }
    }
    let zh = run(&xtask(&["doctor", "--provider", "kind", "--name", name, "--lang", "zh"]));
    common::assert_chinese("cargo xtask doctor --lang zh", &zh.stdout);
    common::write_sample("doctor-kind.zh-CN.txt", &zh.stdout);
}

/// One bad `lab up`: what is wrong, how, and what its error must say.
struct Refusal {
    what: &'static str,
    args: Vec<String>,
    env: Vec<(&'static str, String)>,
    says: &'static str,
}

/// A lab that cannot be made is refused before anything is: one line naming
/// the fix, a non-zero exit, no cluster and no state left.
#[tokio::test]
#[serial]
async fn bad_input_is_refused_and_leaves_nothing_behind() {
    const NAME: &str = "my-controller-refused";
    let lab = lab().await;
    // A node image of another minor: this lab's, relabelled.
    let node = &lab.file().kind.as_ref().unwrap().node_image;
    let other_minor = "lab-kit/kind-node:another-minor";
    let context = labkit::project::target_dir().join("refusals");
    std::fs::create_dir_all(context.join("bin")).unwrap();
    let dockerfile = format!("FROM {node}\nRUN echo v1.30.0 > /kind/version\n");
    std::fs::write(context.join("Dockerfile"), dockerfile).unwrap();
    succeeds(&Cmd::argv(["docker", "build", "-q", "-t", other_minor]).path(&context));
    let fake_kind = context.join("bin/kind");
    std::fs::write(&fake_kind, "#!/bin/sh\necho 'kind v0.29.0 go1.24.2 linux/amd64'\n").unwrap();
    std::fs::set_permissions(&fake_kind, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .unwrap();
    let path = format!("{}/bin:{}", context.display(), std::env::var("PATH").unwrap_or_default());
    let node_image = |image: &str| vec!["--node-image".to_string(), image.to_string()];
    let cases = [
        Refusal {
            what: "an unknown node image",
            args: node_image("no-such/node:v1.36.0"),
            env: vec![],
            says: "`--node-image built` runs one built on this machine",
        },
        Refusal {
            what: "a node image of another minor",
            args: node_image(other_minor),
            env: vec![],
            says: "built for 1.36",
        },
        Refusal {
            what: "no Docker daemon",
            args: node_image(node),
            env: vec![("DOCKER_HOST", "unix:///nonexistent/docker.sock".into())],
            says: "fix: start Docker",
        },
        Refusal {
            what: "kind of another release",
            args: vec![],
            env: vec![("PATH", path)],
            says: "has no node image in kind/node-images.toml (supported: ",
        },
    ];
    let state_dir = labkit::project::lab_dir(NAME);
    for Refusal { what, args, env, says } in cases {
        let mut up = xtask(&["lab", "up", "--provider", "kind", "--name", NAME]).args(&args);
        for (key, value) in &env {
            up = up.env(key, value);
        }
        let refused = run(&up);
        let last = refused.stderr.lines().last().unwrap_or_default();
        assert!(!refused.ok, "lab up with {what} succeeded:\n{}", refused.stderr);
        assert!(
            refused.stderr.contains(says) && last.starts_with("error: "),
            "lab up with {what}: expected an error line and {says:?}, got:\n{}",
            refused.stderr
        );
        assert!(!refused.stderr.contains("panicked"), "{}", refused.stderr);
        assert!(!state_dir.exists(), "lab up with {what} left {}", state_dir.display());
        let clusters = Cmd::argv(["kind", "get", "clusters"]).read().unwrap();
        assert!(!clusters.lines().any(|c| c == NAME), "lab up with {what} left cluster {NAME}");
    }
    let _ = Cmd::argv(["docker", "rmi", other_minor]).output();
    let _ = std::fs::remove_dir_all(&context);
}

/// `cargo maint bench` on the kind lab: the sides here, in the lab's
/// namespace (a ConfigMap each), the Deployment back after.
#[tokio::test]
#[serial]
async fn a_short_benchmark_runs_against_the_kind_lab() {
    common::short_bench_on_a_deployment(&lab().await, &[], &["my-controller"]).await;
}
