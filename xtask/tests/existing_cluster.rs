//! Tests of a room on a cluster the kit did not make (`cargo xtask test`
//! makes it: three nodes, three attendees; `$LAB_NAME` is attendee 01's lab,
//! `$LAB_ROOM_DIR` holds the attendees' kubeconfigs): what one attendee may
//! do to another, the controller moving to another node, the grader as an
//! attendee.

mod common;

use std::path::PathBuf;
use std::time::Duration;

use common::{lab, run, xtask};
use e2e::lab::Lab;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::{ConfigMap, Node};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use labkit::eventually::{Check, eventually};
use serial_test::serial;

/// The room cluster's registry (`cargo xtask test` starts it).
const REGISTRY: &str = "localhost:5001";

fn room_dir() -> PathBuf {
    PathBuf::from(
        std::env::var("LAB_ROOM_DIR")
            .expect("LAB_ROOM_DIR: these tests need a room (`cargo xtask test` makes one)"),
    )
}

/// A client as attendee `n` (their kubeconfig from `room up`).
async fn attendee(n: u32) -> kube::Client {
    let path = room_dir().join(format!("attendee-{n:02}.kubeconfig"));
    let config = kube::config::Kubeconfig::read_from(&path).unwrap();
    let config = kube::Config::from_custom_kubeconfig(config, &Default::default()).await.unwrap();
    kube::Client::try_from(config).unwrap()
}

/// A client as the instructor (kind's kubeconfig of the room cluster).
async fn instructor() -> kube::Client {
    let path = labkit::project::target_dir().join("room-cluster/kubeconfig");
    let config = kube::config::Kubeconfig::read_from(&path).unwrap();
    let config = kube::Config::from_custom_kubeconfig(config, &Default::default()).await.unwrap();
    kube::Client::try_from(config).unwrap()
}

fn status_of(error: kube::Error) -> u16 {
    match error {
        kube::Error::Api(status) => status.code,
        other => panic!("not an API answer: {other}"),
    }
}

#[tokio::test]
#[serial]
async fn an_attendee_can_read_and_write_nothing_in_another_attendees_namespace() {
    let a = attendee(1).await;
    let theirs: Api<ConfigMap> = Api::namespaced(a.clone(), "attendee-02");
    assert_eq!(status_of(theirs.list(&ListParams::default()).await.unwrap_err()), 403);
    assert_eq!(status_of(theirs.get("my-config").await.unwrap_err()), 403);
    let patch = serde_json::json!({"data": {"app.conf": "env=attendee-01"}});
    let answer = theirs.patch("my-config", &PatchParams::default(), &Patch::Merge(&patch)).await;
    assert_eq!(status_of(answer.unwrap_err()), 403);
    // Nor may attendee 01's controller: its ServiceAccount, asked about every verb on attendee 02's ConfigMaps.
    let reviews: Api<SubjectAccessReview> = Api::all(instructor().await);
    for verb in ["get", "list", "watch", "create", "update", "patch", "delete"] {
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some("system:serviceaccount:attendee-01:my-controller".into()),
                groups: Some(vec![
                    "system:serviceaccounts".into(),
                    "system:serviceaccounts:attendee-01".into(),
                    "system:authenticated".into(),
                ]),
                resource_attributes: Some(ResourceAttributes {
                    namespace: Some("attendee-02".into()),
                    resource: Some("configmaps".into()),
                    verb: Some(verb.into()),
                    ..Default::default()
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        let answer = reviews.create(&PostParams::default(), &review).await.unwrap();
        assert!(
            !answer.status.unwrap().allowed,
            "attendee-01's controller may {verb} configmaps in attendee-02"
        );
    }
    // Attendee 02's my-config is theirs: written by their controller only, as they see it.
    let own: Api<ConfigMap> = Api::namespaced(attendee(2).await, "attendee-02");
    let theirs = own.get("my-config").await.unwrap();
    let managers: Vec<String> =
        theirs.metadata.managed_fields.iter().flatten().filter_map(|m| m.manager.clone()).collect();
    assert!(
        managers.iter().all(|m| m == "my-controller"),
        "attendee-02/my-config managed by {managers:?}"
    );
}

/// The node the lab's controller pod runs on, once a single ready pod runs.
async fn controller_node(lab: &Lab) -> (String, String) {
    let host = lab.deployment().expect("a Deployment");
    eventually("one ready controller pod", Duration::from_secs(120), || async {
        let pods = host
            .pods()
            .list(&ListParams::default().labels("app.kubernetes.io/name=my-controller"))
            .await?
            .items;
        let live: Vec<_> =
            pods.iter().filter(|p| p.metadata.deletion_timestamp.is_none()).collect();
        let ready = host.ready_pod().await?;
        Ok(match (live.as_slice(), ready) {
            ([pod], Some(name)) if pod.metadata.name.as_deref() == Some(&name) => {
                let node = pod.spec.as_ref().and_then(|s| s.node_name.clone()).unwrap_or_default();
                Check::Done((name, node))
            }
            _ => Check::NotYet(format!("{} pods", live.len())),
        })
    })
    .await
    .unwrap()
}

async fn cordon(nodes: &Api<Node>, node: &str, unschedulable: bool) {
    let patch = serde_json::json!({"spec": {"unschedulable": unschedulable}});
    nodes.patch(node, &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
}

#[tokio::test]
#[serial]
async fn the_controller_moves_to_another_node_when_its_node_is_cordoned_and_still_heals() {
    let lab = lab().await;
    let (pod, node) = controller_node(&lab).await;
    let nodes: Api<Node> = Api::all(instructor().await);
    eprintln!(
        "$ kubectl cordon {node} && kubectl -n {} delete pod {pod}",
        lab.deployment_namespace()
    );
    cordon(&nodes, &node, true).await;
    let moved = async {
        lab.deployment().unwrap().pods().delete(&pod, &DeleteParams::default()).await.unwrap();
        eventually(
            "a new controller pod, ready, on another node",
            Duration::from_secs(120),
            || async {
                let (now, on) = controller_node(&lab).await;
                Ok(Check::done_if(
                    now != pod && on != node,
                    on.clone(),
                    format!("pod {now} on {on}"),
                ))
            },
        )
        .await
    }
    .await;
    cordon(&nodes, &node, false).await;
    let on = moved.unwrap();
    eprintln!("the controller moved from {node} to {on}");
    let config_maps = lab.config_maps();
    config_maps.delete(lab.desired().name(), &DeleteParams::default()).await.unwrap();
    e2e::converge::wait_desired(&lab).await.unwrap();
}

#[tokio::test]
#[serial]
async fn the_grader_refuses_an_attendee_in_one_line_and_leaves_the_lab_running() {
    let lab = lab().await;
    let ran = run(&xtask(&["grade", "--name", &lab.file().name, "--", "true"]));
    assert!(!ran.ok, "the grade of an attendee's lab succeeded");
    let last = ran.stderr.lines().last().unwrap_or_default();
    assert!(last.starts_with("error: grading needs cluster-wide rights"), "{}", ran.stderr);
    assert!(lab.controller_running().await.unwrap(), "the lab's controller is not running");
}

/// The instructor's labs: two, in namespaces of their own, to grade two
/// programs at once.
const INSTRUCTOR_LABS: [(&str, &str); 2] =
    [("room-instructor-a", "room-grading-a"), ("room-instructor-b", "room-grading-b")];

/// `lab up` of an instructor's lab (`name` in `namespace`, made for it).
fn instructor_lab_up(name: &str, namespace: &str) {
    let kubeconfig = instructor_kubeconfig();
    let up = ["lab", "up", "--provider", "existing", "--name", name, "--kubeconfig", &kubeconfig];
    common::succeeds(
        &xtask(&up)
            .args(["--namespace", namespace, "--create-namespace"])
            .args(["--registry", REGISTRY]),
    );
}

/// The `my-controller` binary, built (the program the instructor grades).
fn my_controller() -> String {
    let build = ["build", "-p", "controller", "--bin", "my-controller"];
    common::succeeds(&labkit::command::cargo(build));
    labkit::project::target_dir().join("debug/my-controller").display().to_string()
}

/// `cargo xtask grade` of my-controller on lab `name`, keeping `namespace`'s my-config.
fn grade_my_controller(name: &str, namespace: &str, program: &str) -> labkit::command::Cmd {
    let grade = ["grade", "--name", name, "--lang", "en", "--resync", "1s", "--", program];
    xtask(&grade).args(["--kubeconfig", "{kubeconfig}", "--namespace", namespace]).args([
        "--resync",
        "1s",
        "--listen",
        "127.0.0.1:0",
    ])
}

/// The instructor grades on the same cluster, in namespaces of their own:
/// two programs at once, each graded as it would be alone (every row
/// passes), the FlowSchemas of each named after its lab.
#[tokio::test]
#[serial]
async fn two_grades_at_once_on_the_instructors_labs_each_pass() {
    let admin = instructor().await;
    let before = e2e::cluster::snapshot(&admin).await.unwrap();
    for (name, namespace) in INSTRUCTOR_LABS {
        instructor_lab_up(name, namespace);
    }
    let made = e2e::cluster::snapshot(&admin).await.unwrap();
    let program = my_controller();
    let dir = labkit::project::target_dir().join("room-logs");
    std::fs::create_dir_all(&dir).unwrap();
    let grades: Vec<_> = INSTRUCTOR_LABS
        .iter()
        .map(|(name, namespace)| {
            let log = dir.join(format!("grade-{name}.log"));
            let child = grade_my_controller(name, namespace, &program).spawn_to_log(&log).unwrap();
            (child, log)
        })
        .collect();
    let mut failed = Vec::new();
    for (mut child, log) in grades {
        let status = child.wait().unwrap();
        let printed = std::fs::read_to_string(&log).unwrap_or_default();
        eprintln!("---- {} ({status}):\n{printed}", log.display());
        if !status.success() || !printed.contains("all 7 rows pass") {
            failed.push(log);
        }
    }
    let after_grades = e2e::cluster::snapshot(&admin).await.unwrap();
    let downs: Vec<_> = INSTRUCTOR_LABS
        .iter()
        .map(|(name, _)| run(&xtask(&["lab", "down", "--name", name])))
        .collect();
    assert!(failed.is_empty(), "graded at once, not every row passed: {failed:?}");
    e2e::cluster::difference(&made, &after_grades).unwrap();
    for down in downs {
        assert!(down.ok, "lab down failed:\n{}", down.stderr);
    }
    e2e::cluster::difference(&before, &e2e::cluster::snapshot(&admin).await.unwrap()).unwrap();
}

/// What the lab tests on the envtest lab prove at each phase, here once on
/// a cluster the kit did not make: a grade on the instructor's lab hung up
/// (SIGHUP) while its program runs, a bench on attendee 01's lab (as
/// attendee 01) interrupted with a second signal during the put-back —
/// each time the cluster's objects as before, the Deployment running.
#[tokio::test]
#[serial]
async fn an_interrupted_grade_and_bench_leave_the_cluster_as_it_was() {
    let admin = instructor().await;
    let (name, namespace) = INSTRUCTOR_LABS[0];
    instructor_lab_up(name, namespace);
    let before = e2e::cluster::snapshot(&admin).await.unwrap();
    let program = my_controller();
    let grade = grade_my_controller(name, namespace, &program)
        .env(labkit::test_hook::VARIABLE, "grade:row:self_heal=SIGHUP");
    let ran = run(&grade);
    let hangup = labkit::project::lab_dir(name).join("hangup.log");
    let printed = format!("{}{}", ran.stderr, std::fs::read_to_string(&hangup).unwrap_or_default());
    assert!(!ran.ok && printed.contains("SIGHUP: the terminal went away"), "{printed}");
    e2e::cluster::difference(&before, &e2e::cluster::snapshot(&admin).await.unwrap()).unwrap();
    let instructors = Lab::find_named(name).await.unwrap();
    controller_node(&instructors).await;
    let down = run(&xtask(&["lab", "down", "--name", name]));
    assert!(down.ok, "lab down failed:\n{}", down.stderr);

    let attendees = lab().await;
    let before = e2e::cluster::snapshot(&admin).await.unwrap();
    let out = labkit::project::target_dir().join("bench-tests").join("interrupted");
    let bench = ["bench", "--name", &attendees.file().name, "-n", "4", "--steady", "1s"];
    let bench = xtask(&bench).args(["--burst", "3", "--unrelated", "20", "--out"]).path(&out);
    let ran = run(&bench.env(labkit::test_hook::VARIABLE, "bench:block:1=SIGINT,put_back=SIGTERM"));
    assert!(!ran.ok && ran.stderr.contains("still putting the lab back"), "{}", ran.stderr);
    e2e::cluster::difference(&before, &e2e::cluster::snapshot(&admin).await.unwrap()).unwrap();
    controller_node(&attendees).await;
}

/// `lab up --provider existing ARGS` under a lab name of its own: it must
/// fail with one line containing `said`, and leave no lab behind.
fn refused(args: &[&str], said: &str) {
    let name = "room-refused";
    let up = ["lab", "up", "--provider", "existing", "--name", name];
    let ran = run(&xtask(&up).args(args));
    assert!(!ran.ok, "lab up {args:?} succeeded");
    let last = ran.stderr.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("error: ") && last.contains(said),
        "expected {said:?} in the last line of:\n{}",
        ran.stderr
    );
    assert!(!labkit::project::lab_dir(name).exists(), "lab up {args:?} left its state behind");
}

fn instructor_kubeconfig() -> String {
    labkit::project::target_dir().join("room-cluster/kubeconfig").display().to_string()
}

fn attendee_kubeconfig(n: u32) -> String {
    room_dir().join(format!("attendee-{n:02}.kubeconfig")).display().to_string()
}

/// Nothing of the controller's in `namespace`, as the instructor sees it.
async fn nothing_applied_in(namespace: &str) {
    let accounts: Api<k8s_openapi::api::core::v1::ServiceAccount> =
        Api::namespaced(instructor().await, namespace);
    let left = accounts.get_opt("my-controller").await.unwrap();
    assert!(left.is_none(), "a ServiceAccount my-controller was left in {namespace}");
}

#[tokio::test]
#[serial]
async fn lab_up_refuses_bad_input_in_one_line_and_applies_nothing() {
    let (admin, attendee) = (instructor_kubeconfig(), attendee_kubeconfig(1));
    refused(
        &["--kubeconfig", &attendee, "--context", "no-such-context", "--registry", REGISTRY],
        "context no-such-context is not in",
    );
    refused(
        &["--kubeconfig", &admin, "--namespace", "no-such-namespace", "--registry", REGISTRY],
        "namespace no-such-namespace does not exist",
    );
    // Attendee 01 in the instructor's default namespace: no right to make the Role there.
    refused(
        &["--kubeconfig", &attendee, "--namespace", "default", "--registry", REGISTRY],
        "may not create serviceaccounts",
    );
    nothing_applied_in("default").await;
    // Port 9 on loopback: nothing listens, the push is refused.
    refused(
        &[
            "--kubeconfig",
            &admin,
            "--namespace",
            "room-push",
            "--create-namespace",
            "--registry",
            "localhost:9",
        ],
        "registry localhost:9 refused the push",
    );
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(instructor().await);
    assert!(
        namespaces.get_opt("room-push").await.unwrap().is_none(),
        "the refused lab up created its namespace"
    );
    refused(&["--kubeconfig", &admin, "--registry", "http://localhost:5001"], "is not HOST[:PORT]");
}

/// `cargo xtask bench` on attendee 01's lab, as attendee 01: the sides run
/// on this machine as the lab's controller ServiceAccount, in the
/// attendee's namespace (a ConfigMap each), the Go peer among them.
#[tokio::test]
#[serial]
async fn a_short_benchmark_runs_in_an_attendees_namespace_and_leaves_nothing() {
    let lab = lab().await;
    common::short_bench_on_a_deployment(&lab, &["--peer", "go"], &["my-controller", "course-go"])
        .await;
}

/// What only an envtest lab allows: one line each, nothing started.
#[tokio::test]
#[serial]
async fn the_bench_refuses_what_needs_a_lab_the_kit_made_in_one_line() {
    let name = lab().await.file().name.clone();
    let refusals: [(&[&str], &str); 2] = [
        (&["--phases"], "--phases restarts kube-apiserver"),
        (&["--peer", "kube-runtime"], "--peer kube-runtime installs"),
    ];
    for (flags, said) in refusals {
        let ran = run(&xtask(&["bench", "--name", &name]).args(flags));
        assert!(!ran.ok, "bench {flags:?} succeeded");
        let last = ran.stderr.lines().last().unwrap_or_default();
        assert!(
            last.starts_with("error: ") && last.contains(said) && last.contains("existing cluster"),
            "expected {said:?} in the last line of:\n{}",
            ran.stderr
        );
    }
}
