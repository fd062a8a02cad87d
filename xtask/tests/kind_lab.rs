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

/// `lab up` as this lab was made: the same name and node image.
fn up_again(lab: &Lab) -> Vec<String> {
    let kind = lab.file().kind().expect("a kind lab");
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
    DeploymentHost::new(lab.client()).ready_pod().await.unwrap().expect("a ready controller pod")
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
    let node = &lab.file().kind().unwrap().node_image;
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
/// controller image in Docker: it comes back from the archive.
#[tokio::test]
#[serial]
async fn the_offline_bundle_brings_the_lab_up() {
    let lab = lab().await;
    let kind = lab.file().kind().cloned().unwrap();
    let bundle = labkit::project::target_dir().join("lab-bundle-test.tar");
    let bundle_arg = bundle.display().to_string();
    let image_id = |image: &str| {
        Cmd::argv(["docker", "image", "inspect", "--format", "{{.Id}}", image]).read().ok()
    };
    let before = image_id(&kind.controller_image);
    succeeds(&xtask(&["lab", "bundle", "-f", &bundle_arg, "--node-image", &kind.node_image]));
    succeeds(&Cmd::argv(["docker", "rmi", &kind.controller_image]));
    let pod = ready_pod(&lab).await;
    let up = run(&xtask(&["lab", "up", "--provider", "kind", "--name", &lab.file().name])
        .args(["--bundle", &bundle_arg]));
    let _ = std::fs::remove_file(&bundle);
    assert!(up.ok, "lab up --bundle failed:\n{}", up.stderr);
    assert_eq!(image_id(&kind.controller_image), before, "the bundle held another image");
    assert_eq!(ready_pod(&lab).await, pod, "the same image must not restart the pod");
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
    let node = &lab.file().kind().unwrap().node_image;
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
