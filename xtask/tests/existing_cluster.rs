//! Tests of a room on a cluster the kit did not make (`cargo maint test`
//! makes it: three nodes, three attendees; `$LAB_NAME` is attendee 01's lab,
//! `$LAB_ROOM_DIR` holds the attendees' kubeconfigs): what one attendee may
//! do to another, the controller moving to another node, the grader as an
//! attendee.

mod common;

use std::path::PathBuf;
use std::time::Duration;

use common::browser::Browser;
use common::{lab, maint, run, xtask};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use labkit::eventually::{Check, eventually};
use labkit::lab::Lab;
use serial_test::serial;

/// The room cluster's registry (`cargo maint test` starts it).
const REGISTRY: &str = "localhost:5001";

fn room_dir() -> PathBuf {
    PathBuf::from(
        std::env::var("LAB_ROOM_DIR")
            .expect("LAB_ROOM_DIR: these tests need a room (`cargo maint test` makes one)"),
    )
}

/// A client as attendee `n` (their kubeconfig from `room up`).
async fn attendee(n: u32) -> kube::Client {
    let path = room_dir().join(format!("attendee-{n:02}.kubeconfig"));
    controller::connect::client(Some(&path)).await.unwrap()
}

/// A client as the instructor (kind's kubeconfig of the room cluster).
async fn instructor() -> kube::Client {
    let path = labkit::project::target_dir().join("room-cluster/kubeconfig");
    controller::connect::client(Some(&path)).await.unwrap()
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
        lab.file().deployment_namespace()
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
    labkit::converge::wait_desired(&lab).await.unwrap();
}

#[tokio::test]
#[serial]
async fn the_grader_refuses_an_attendee_in_one_line_and_leaves_the_lab_running() {
    let lab = lab().await;
    let ran = run(&xtask(&["grade", "--name", &lab.file().name, "--", "true"]));
    assert!(!ran.ok, "the grade of an attendee's lab succeeded");
    let last = ran.stderr.lines().last().unwrap_or_default();
    assert!(last.starts_with("error: grading runs the program as"), "{}", ran.stderr);
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
fn grade_my_controller(
    name: &str,
    namespace: &str,
    program: &str,
    extra: &[&str],
) -> labkit::command::Cmd {
    let grade = ["grade", "--name", name, "--lang", "en", "--resync", "1s"];
    xtask(&grade)
        .args(extra)
        .args(["--", program])
        .args(["--kubeconfig", "{kubeconfig}", "--namespace", namespace])
        .args(["--resync", "1s", "--listen", "127.0.0.1:0"])
}

/// The instructor grades on the same cluster, in namespaces of their own:
/// two programs at once, each graded as it would be alone (every row
/// passes): each counts its own program's requests in its own proxy. Each
/// result is handed in to an attendee's namespace (`--room`, as attendees 02
/// and 03), and the room's page, open in headless Chromium from the start,
/// shows what a person would see: the three attendees, attendee 01's
/// my-config deleted and healed, the grades appearing; `grade --collect`
/// reads them from the cluster.
#[tokio::test]
#[serial]
async fn two_grades_at_once_on_the_instructors_labs_each_pass() {
    let admin = instructor().await;
    // Attendee 01's controller is scaled down and up on the way: a new pod, by design.
    let before = kit_objects(&admin).await;
    let (page, url) = room_serve().await;
    let browser = Browser::start("en").await.unwrap();
    browser.open(&url).await.unwrap();
    let rows = "return [...document.querySelectorAll('tbody tr')].map(r => r.id + ':' + r.dataset.stage + ':' + r.dataset.config + ':' + r.dataset.graded)";
    let seats = "return ['01','02','03'].every(n => document.getElementById('seat-attendee-' + n))";
    browser.until("the page to show the three attendees", seats, rows).await.unwrap();
    healed_on_the_page(&browser, rows).await;
    for (name, namespace) in INSTRUCTOR_LABS {
        instructor_lab_up(name, namespace);
    }
    let made = kit_objects(&admin).await;
    let program = my_controller();
    let dir = labkit::project::target_dir().join("room-logs");
    std::fs::create_dir_all(&dir).unwrap();
    let grades: Vec<_> = INSTRUCTOR_LABS
        .iter()
        .map(|(name, namespace)| {
            let log = dir.join(format!("grade-{name}.log"));
            // This run's lines only: spawn_to_log appends, and an older run's "all rows pass" would count.
            let _ = std::fs::remove_file(&log);
            let hand_in = attendee_kubeconfig(if name.ends_with('a') { 2 } else { 3 });
            let grade = grade_my_controller(name, namespace, &program, &["--room", &hand_in]);
            (grade.spawn_to_log(&log).unwrap(), log)
        })
        .collect();
    let mut failed = Vec::new();
    for (mut child, log) in grades {
        let status = child.wait().unwrap();
        let printed = std::fs::read_to_string(&log).unwrap_or_default();
        eprintln!("---- {} ({status}):\n{printed}", log.display());
        // Exit status 0: both verdicts, every row; and said so.
        let course = grader::RowId::ALL.iter().filter(|r| r.in_course()).count();
        let said = [
            format!("the course: all {course} rows pass"),
            format!("beyond the course: {0} of {0} rows pass", grader::RowId::ALL.len() - course),
        ];
        if !status.success() || !said.iter().all(|line| printed.contains(line)) {
            failed.push(log);
        }
    }
    let graded = "return ['02','03'].every(n => document.getElementById('seat-attendee-' + n).dataset.graded === 'true')";
    browser.until("the page to show the two grades handed in", graded, rows).await.unwrap();
    // The docs' screenshots when samples are written, else beside the test's logs.
    let samples = match std::env::var("E2E_WRITE_SAMPLES").as_deref() {
        Ok("1") => labkit::project::root().join("docs/samples"),
        _ => labkit::project::target_dir().join("room-logs"),
    };
    browser.screenshot(&samples.join("room-page-en.png")).await.unwrap();
    let chinese = Browser::start("zh-CN").await.unwrap();
    chinese.open(&url).await.unwrap();
    chinese
        .until(
            "the page in Chinese with the grades",
            &graded.replace("return ", "return document.documentElement.lang === 'zh-CN' && "),
            rows,
        )
        .await
        .unwrap();
    chinese.screenshot(&samples.join("room-page-zh-CN.png")).await.unwrap();
    let collected = run(&xtask(&["grade", "--collect", "--room", ROOM, "--lang", "en"])
        .env("KUBECONFIG", instructor_kubeconfig()));
    eprintln!("{}", collected.stdout);
    assert!(collected.ok, "grade --collect:\n{}", collected.stderr);
    for n in ["02", "03"] {
        let line = format!("| attendee-{n} (");
        let row = collected.stdout.lines().find(|l| l.starts_with(&line)).unwrap_or_default();
        assert!(row.contains("| yes |"), "attendee-{n}'s grade:\n{}", collected.stdout);
    }
    assert!(
        collected.stdout.contains("no grade handed in yet: attendee-01"),
        "{}",
        collected.stdout
    );
    drop(page);
    // What the hand-ins added, and only that, taken out again as the attendees.
    let after_grades = kit_objects(&admin).await;
    let handed_in: std::collections::BTreeSet<String> =
        after_grades.difference(&made).cloned().collect();
    let expected = ["/ConfigMap attendee-02/lab-kit-grade", "/ConfigMap attendee-03/lab-kit-grade"];
    assert_eq!(handed_in, expected.map(String::from).into(), "the grades handed in");
    for n in [2, 3] {
        let grades: Api<ConfigMap> =
            Api::namespaced(attendee(n).await, &format!("attendee-{n:02}"));
        grades.delete("lab-kit-grade", &DeleteParams::default()).await.unwrap();
    }
    let after_grades = kit_objects(&admin).await;
    let downs: Vec<_> = INSTRUCTOR_LABS
        .iter()
        .map(|(name, _)| run(&xtask(&["lab", "down", "--name", name])))
        .collect();
    assert!(failed.is_empty(), "graded at once, not every row passed: {failed:?}");
    common::cluster::difference(&made, &after_grades).unwrap();
    for down in downs {
        assert!(down.ok, "lab down failed:\n{}", down.stderr);
    }
    common::cluster::difference(&before, &kit_objects(&admin).await).unwrap();
}

/// The room's name (maint/src/test/existing.rs).
const ROOM: &str = "test-room";

/// `cargo xtask room serve` of the room, listening beyond loopback: its URL, with the
/// secret it printed; a request without it is refused.
async fn room_serve() -> (Killed, String) {
    let log = labkit::project::target_dir().join("room-logs/room-serve.log");
    let _ = std::fs::remove_file(&log);
    let serve = ["room", "serve", "--name", ROOM, "--listen", "0.0.0.0:0", "--kubeconfig"];
    let child = Killed(xtask(&serve).args([instructor_kubeconfig()]).spawn_to_log(&log).unwrap());
    let url = eventually("room serve's URL", Duration::from_secs(120), || async {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let url = text.split_whitespace().find(|w| w.starts_with("http://"));
        Ok(Check::done_if(url.is_some(), url.unwrap_or_default().to_string(), text.clone()))
    })
    .await
    .unwrap();
    let (origin, token) = url.split_once("/?token=").expect("a token beyond loopback");
    let origin = origin.replace("0.0.0.0", "127.0.0.1");
    let refused =
        labkit::http_probe::get_url(&origin, "/events", Duration::from_secs(10)).await.unwrap();
    assert_eq!(refused.status, 403, "the page answered without its token: {}", refused.body);
    (child, format!("{origin}/?token={token}"))
}

/// A process killed when the test ends, however it ends (`cargo run` execs the program).
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Attendee 01's my-config deleted with their controller stopped: the page shows it absent;
/// the controller started again, the page shows it healed.
async fn healed_on_the_page(browser: &Browser, rows: &str) {
    let one = "document.getElementById('seat-attendee-01')";
    let right = format!("return {one}.dataset.stage === 'config_right'");
    browser.until("attendee 01's lab and my-config to be right", &right, rows).await.unwrap();
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> =
        Api::namespaced(instructor().await, "attendee-01");
    let scale = |n: i32| serde_json::json!({"spec": {"replicas": n}});
    deployments
        .patch("my-controller", &PatchParams::default(), &Patch::Merge(scale(0)))
        .await
        .unwrap();
    // Gone, not only unready: a pod still terminating could put my-config back at once.
    let pods: Api<Pod> = Api::namespaced(instructor().await, "attendee-01");
    let selector = ListParams::default().labels(labkit::deployment::SELECTOR);
    eventually("attendee 01's controller pods gone", Duration::from_secs(120), || async {
        let left = pods.list(&selector).await?.items.len();
        Ok(Check::done_if(left == 0, (), format!("{left} pods")))
    })
    .await
    .unwrap();
    let stopped = format!("return {one}.dataset.stage === 'lab_up'");
    browser.until("attendee 01's controller shown stopped", &stopped, rows).await.unwrap();
    let config_maps: Api<ConfigMap> = Api::namespaced(attendee(1).await, "attendee-01");
    config_maps.delete("my-config", &DeleteParams::default()).await.unwrap();
    let absent = format!("return {one}.dataset.config === 'absent'");
    browser.until("attendee 01's my-config shown absent", &absent, rows).await.unwrap();
    deployments
        .patch("my-controller", &PatchParams::default(), &Patch::Merge(scale(1)))
        .await
        .unwrap();
    let healed = format!(
        "return {one}.dataset.config === 'right' && {one}.querySelector('[data-key=seen]').textContent.includes('healed after delete')"
    );
    browser.until("attendee 01's my-config shown healed", &healed, rows).await.unwrap();
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
    let before = kit_objects(&admin).await;
    let program = my_controller();
    let grade = grade_my_controller(name, namespace, &program, &[])
        .env(labkit::test_hook::VARIABLE, "grade:row:self_heal=SIGHUP");
    let ran = run(&grade);
    let hangup = labkit::project::lab_dir(name).join("hangup.log");
    let printed = format!("{}{}", ran.stderr, std::fs::read_to_string(&hangup).unwrap_or_default());
    let after = kit_objects(&admin).await;
    let instructors = Lab::find_named(name).await.unwrap();
    controller_node(&instructors).await;
    let down = run(&xtask(&["lab", "down", "--name", name]));
    assert!(!ran.ok && printed.contains("SIGHUP: the terminal went away"), "{printed}");
    common::cluster::difference(&before, &after).unwrap();
    assert!(down.ok, "lab down failed:\n{}", down.stderr);

    let attendees = lab().await;
    let before = kit_objects(&admin).await;
    let out = labkit::project::target_dir().join("bench-tests").join("interrupted");
    let bench = ["bench", "--name", &attendees.file().name, "--rounds", "4", "--steady", "1s"];
    let bench = maint(&bench).args(["--burst", "3", "--unrelated", "20", "--out"]).path(&out);
    let ran = run(&bench.env(labkit::test_hook::VARIABLE, "bench:block:1=SIGINT,put_back=SIGTERM"));
    assert!(!ran.ok && ran.stderr.contains("still putting the lab back"), "{}", ran.stderr);
    common::cluster::difference(&before, &kit_objects(&admin).await).unwrap();
    controller_node(&attendees).await;
}

/// The cluster's objects but the controllers' Pods and ReplicaSets: a lab's
/// controller started again after a grade or a bench is a new pod (of a new
/// ReplicaSet, where its arguments were put back), by design.
async fn kit_objects(admin: &kube::Client) -> std::collections::BTreeSet<String> {
    let all = common::cluster::snapshot(admin).await.unwrap();
    all.into_iter()
        .filter(|o| !o.starts_with("/Pod ") && !o.starts_with("apps/ReplicaSet "))
        .collect()
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

/// `cargo maint bench` on attendee 01's lab, as attendee 01: the sides run
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
        let ran = run(&maint(&["bench", "--name", &name]).args(flags));
        assert!(!ran.ok, "bench {flags:?} succeeded");
        let last = ran.stderr.lines().last().unwrap_or_default();
        assert!(
            last.starts_with("error: ") && last.contains(said) && last.contains("existing cluster"),
            "expected {said:?} in the last line of:\n{}",
            ran.stderr
        );
    }
}

/// The room's name (maint/src/test/existing.rs) and the policy `room up` installs for it.
const ROOM_POLICY: &str = "ValidatingAdmissionPolicy 'lab-kit-room-test-room'";

/// One escalation attempt's outcome, printed as one line; `Err` when it was allowed
/// or refused for another reason than `by`.
fn denied<T>(what: &str, by: &str, answer: Result<T, kube::Error>) -> Result<(), String> {
    match answer {
        Ok(_) => {
            eprintln!("ALLOWED  {what}");
            Err(format!("allowed: {what}"))
        }
        Err(kube::Error::Api(s)) if s.message.contains(by) => {
            // The policy's own words, without the API server's preamble naming it.
            let why = s.message.split_once("denied request: ").map_or(s.message.as_str(), |w| w.1);
            eprintln!("denied   {what}: {} {why}", s.code);
            Ok(())
        }
        Err(e) => {
            eprintln!("REFUSED OTHERWISE  {what}: {e}");
            Err(format!("{what}: refused, but not by {by:?}: {e}"))
        }
    }
}

fn binding(name: &str, role: &str, subject: serde_json::Value) -> RoleBinding {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role},
        "subjects": [subject],
    }))
    .unwrap()
}

/// Every escalation attendee 01 might try through the API, as attendee 01:
/// each must be refused, by the room's policy, RBAC or the quota.
#[tokio::test]
#[serial]
async fn an_attendee_can_escalate_nothing_through_the_api() {
    let a = attendee(1).await;
    let mut failures = Vec::new();
    let bindings: Api<RoleBinding> = Api::namespaced(a.clone(), "attendee-01");
    let group = |name: &str| serde_json::json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": name});
    let account = |ns: &str, name: &str| serde_json::json!({"kind": "ServiceAccount", "name": name, "namespace": ns});
    let attempts = [
        (
            "a RoleBinding of Role attendee to every anonymous caller",
            binding("x-anonymous", "attendee", group("system:unauthenticated")),
        ),
        (
            "a RoleBinding of Role my-controller to every authenticated user",
            binding("x-authenticated", "my-controller", group("system:authenticated")),
        ),
        (
            "a RoleBinding of Role my-controller to attendee-02's ServiceAccount",
            binding("x-neighbour", "my-controller", account("attendee-02", "attendee")),
        ),
        (
            "a RoleBinding of Role attendee (it mints tokens) to the lab's own my-controller",
            binding("x-renewal", "attendee", account("attendee-01", "my-controller")),
        ),
    ];
    for (what, attempt) in attempts {
        let name = attempt.metadata.name.clone().unwrap();
        let answer = bindings.create(&PostParams::default(), &attempt).await;
        if answer.is_ok() {
            let _ = bindings.delete(&name, &DeleteParams::default()).await;
        }
        failures.extend(denied(what, ROOM_POLICY, answer).err());
    }
    let roles: Api<Role> = Api::namespaced(a.clone(), "attendee-01");
    let minting: Role = serde_json::from_value(serde_json::json!({"metadata": {"name": "x-minting"},
        "rules": [{"apiGroups": [""], "resources": ["serviceaccounts/token"], "verbs": ["create"], "resourceNames": ["my-controller"]}]}))
    .unwrap();
    let answer = roles.create(&PostParams::default(), &minting).await;
    if answer.is_ok() {
        let _ = roles.delete("x-minting", &DeleteParams::default()).await;
    }
    failures.extend(
        denied("a Role that mints my-controller's tokens, to bind elsewhere", ROOM_POLICY, answer)
            .err(),
    );
    failures.extend(tokens(&a).await);
    failures.extend(legacy_token(&a).await);
    failures.extend(pod_as_attendee(&a).await);
    failures.extend(beyond_the_quota(&a).await);
    failures.extend(too_big(&a).await);
    assert!(failures.is_empty(), "an attendee escalated:\n{}", failures.join("\n"));
}

/// A token for a year, for the attendee itself (renewed for ever), for a neighbour's account.
async fn tokens(a: &kube::Client) -> Vec<String> {
    let request = |ns: &str, name: &str, seconds: i64| {
        let accounts: Api<ServiceAccount> = Api::namespaced(a.clone(), ns);
        let spec = TokenRequestSpec { expiration_seconds: Some(seconds), ..Default::default() };
        let request = TokenRequest { spec: Some(spec), ..Default::default() };
        let name = name.to_string();
        async move { accounts.create_token_request(&name, &PostParams::default(), &request).await }
    };
    let rbac = "cannot create resource \"serviceaccounts/token\"";
    let pods: Api<Pod> = Api::namespaced(a.clone(), "attendee-01");
    let controller = ListParams::default().labels("app.kubernetes.io/name=my-controller");
    let listed = pods.list(&controller).await.unwrap();
    let pod = listed.items.into_iter().next().expect("attendee-01's controller pod");
    let bound = serde_json::json!({"kind": "Pod", "apiVersion": "v1", "name": pod.metadata.name, "uid": pod.metadata.uid});
    let accounts: Api<ServiceAccount> = Api::namespaced(a.clone(), "attendee-01");
    let spec =
        serde_json::json!({"audiences": [], "expirationSeconds": 3607, "boundObjectRef": bound});
    let pod_bound: TokenRequest =
        serde_json::from_value(serde_json::json!({"spec": spec})).unwrap();
    let post = PostParams::default();
    let pod_bound = accounts.create_token_request("my-controller", &post, &pod_bound);
    let answers = [
        (
            "a token for my-controller of 3607 s bound to its pod (the API server makes it a year)",
            ROOM_POLICY,
            pod_bound.await,
        ),
        (
            "a token for my-controller lasting a year",
            ROOM_POLICY,
            request("attendee-01", "my-controller", 365 * 24 * 3600).await,
        ),
        (
            "a token for the attendee itself (it would renew itself)",
            rbac,
            request("attendee-01", "attendee", 3600).await,
        ),
        (
            "a token for attendee-02's my-controller",
            rbac,
            request("attendee-02", "my-controller", 3600).await,
        ),
    ];
    answers.into_iter().filter_map(|(what, by, answer)| denied(what, by, answer).err()).collect()
}

/// A Secret the API server would fill with a token of the attendee's that never expires.
async fn legacy_token(a: &kube::Client) -> Vec<String> {
    let secrets: Api<Secret> = Api::namespaced(a.clone(), "attendee-01");
    let secret: Secret = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "x-legacy-token", "annotations": {"kubernetes.io/service-account.name": "attendee"}},
        "type": "kubernetes.io/service-account-token"}))
    .unwrap();
    let answer = secrets.create(&PostParams::default(), &secret).await;
    if answer.is_ok() {
        let _ = secrets.delete("x-legacy-token", &DeleteParams::default()).await;
    }
    let what = "a Secret of type kubernetes.io/service-account-token for the attendee (a token that never expires)";
    denied(what, ROOM_POLICY, answer).err().into_iter().collect()
}

/// A Pod as the restricted Pod Security Standard wants it, running `script` on Debian.
fn probe_pod(name: &str, account: &str, script: &str) -> Pod {
    let image = std::env::var("LAB_ROOM_DEBIAN_IMAGE")
        .expect("LAB_ROOM_DEBIAN_IMAGE (`cargo maint test` sets it)");
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name},
        "spec": {"restartPolicy": "Never", "serviceAccountName": account, "automountServiceAccountToken": false,
            "securityContext": {"runAsNonRoot": true, "runAsUser": 65534, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{"name": "probe", "image": image, "command": ["sh", "-c", script],
                "securityContext": {"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}}}]},
    }))
    .unwrap()
}

/// Pods whose tokens would outlive the room: one running as the attendee (the
/// kubelet renews its token for as long as it lives), one as my-controller
/// projecting a token for a year, one automounting its token (3607 s: a year).
async fn pod_as_attendee(a: &kube::Client) -> Vec<String> {
    let pods: Api<Pod> = Api::namespaced(a.clone(), "attendee-01");
    let projected = |seconds: i64| {
        let mut pod = probe_pod("x-long-token", "my-controller", "true");
        let volume = serde_json::json!({"name": "token", "projected": {"sources": [
            {"serviceAccountToken": {"path": "token", "expirationSeconds": seconds}}]}});
        pod.spec.as_mut().unwrap().volumes = Some(vec![serde_json::from_value(volume).unwrap()]);
        pod
    };
    let mut automounting = probe_pod("x-automount", "my-controller", "true");
    automounting.spec.as_mut().unwrap().automount_service_account_token = Some(true);
    let attempts = [
        (
            "a pod running as the attendee (a token renewed for as long as it runs)",
            probe_pod("x-as-attendee", "attendee", "true"),
        ),
        ("a pod of my-controller projecting a token for a year", projected(365 * 24 * 3600)),
        (
            "a pod of my-controller automounting its token (3607 s, which lasts a year)",
            automounting,
        ),
    ];
    let mut failures = Vec::new();
    for (what, pod) in attempts {
        let name = pod.metadata.name.clone().unwrap();
        let answer = pods.create(&PostParams::default(), &pod).await;
        if answer.is_ok() {
            let _ = pods.delete(&name, &DeleteParams::default()).await;
        }
        failures.extend(denied(what, ROOM_POLICY, answer).err());
    }
    failures
}

/// What would fill etcd: a ConfigMap of 70 kB, an Event of a 2 kB message, an
/// object with 20 kB of annotations.
async fn too_big(a: &kube::Client) -> Vec<String> {
    let config_maps: Api<ConfigMap> = Api::namespaced(a.clone(), "attendee-01");
    let big = |name: &str, data: usize, annotation: usize| -> ConfigMap {
        serde_json::from_value(serde_json::json!({"metadata": {"name": name, "annotations": {"x": "a".repeat(annotation)}},
            "data": {"x": "a".repeat(data)}})).unwrap()
    };
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(a.clone(), "attendee-01");
    let event = |name: &str, message: usize| -> k8s_openapi::api::core::v1::Event {
        serde_json::from_value(serde_json::json!({"metadata": {"name": name},
            "involvedObject": {"kind": "ConfigMap", "name": "my-config", "namespace": "attendee-01"},
            "reason": "Test", "message": "a".repeat(message)})).unwrap()
    };
    let mut failures = Vec::new();
    for (what, by, answer) in [
        (
            "a ConfigMap of 70 kB",
            ROOM_POLICY,
            config_maps.create(&PostParams::default(), &big("x-big", 70_000, 1)).await.map(drop),
        ),
        (
            "a ConfigMap with 20 kB of annotations",
            ROOM_POLICY,
            config_maps
                .create(&PostParams::default(), &big("x-annotated", 1, 20_000))
                .await
                .map(drop),
        ),
        (
            "an Event of a 2 kB message",
            ROOM_POLICY,
            events.create(&PostParams::default(), &event("x-big", 2000)).await.map(drop),
        ),
    ] {
        failures.extend(denied(what, by, answer).err());
    }
    let _ = config_maps.delete("x-big", &DeleteParams::default()).await;
    let _ = config_maps.delete("x-annotated", &DeleteParams::default()).await;
    failures
}

/// The bench's unrelated ConfigMaps, 10 000 asked: only what fits the quota
/// is made (bench/src/load.rs); then ConfigMaps one by one until the quota refuses one.
async fn beyond_the_quota(a: &kube::Client) -> Vec<String> {
    let api: Api<ConfigMap> = Api::namespaced(a.clone(), "attendee-01");
    let unrelated = bench::load::Unrelated::in_namespace(api.clone());
    let made = unrelated.create(10_000, 8).await.unwrap();
    assert!(made < 100, "the bench made {made} ConfigMaps, more than the room's quota holds");
    let label = "e2e.lab/quota-test";
    let mut answer = Ok(());
    for i in 0..100 {
        let cm: ConfigMap = serde_json::from_value(serde_json::json!({
            "metadata": {"name": format!("x-quota-{i:03}"), "labels": {label: "true"}}}))
        .unwrap();
        if let Err(e) = api.create(&PostParams::default(), &cm).await {
            answer = Err(e);
            break;
        }
    }
    let what = format!("ConfigMaps beyond the quota (the bench made {made} of the 10000 it asked)");
    let outcome = denied(&what, "exceeded quota", answer).err();
    let selector = ListParams::default().labels(&format!("{label}=true"));
    api.delete_collection(&DeleteParams::default(), &selector).await.unwrap();
    unrelated.delete_all().await.unwrap();
    outcome.into_iter().collect()
}

/// The IP of the ready controller pod in `namespace`, as the instructor sees it.
async fn controller_ip(namespace: &str) -> String {
    let pods: Api<Pod> = Api::namespaced(instructor().await, namespace);
    let listed = pods
        .list(&ListParams::default().labels("app.kubernetes.io/name=my-controller"))
        .await
        .unwrap();
    listed
        .items
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .find_map(|p| p.status.as_ref()?.pod_ip.clone())
        .unwrap_or_else(|| panic!("no controller pod with an IP in {namespace}"))
}

/// A pod of attendee 01 connects to its own controller and to the API server
/// by its Service's name (the controls: DNS, the network and the policy's
/// openings work), and to nothing else: attendee 02's controller (refused by
/// attendee 02's NetworkPolicy), a node's kubelet and the cluster DNS's
/// metrics port (refused by attendee 01's own: egress to DNS on 53 only).
#[tokio::test]
#[serial]
async fn an_attendees_pod_reaches_its_own_dns_and_the_api_server_only() {
    let (own, theirs) = (controller_ip("attendee-01").await, controller_ip("attendee-02").await);
    let admin = instructor().await;
    let nodes = Api::<Node>::all(admin.clone()).list(&ListParams::default()).await.unwrap();
    let node_ip = nodes.items[0]
        .status
        .as_ref()
        .unwrap()
        .addresses
        .as_ref()
        .unwrap()
        .iter()
        .find(|a| a.type_ == "InternalIP")
        .unwrap()
        .address
        .clone();
    let dns_pods = Api::<Pod>::namespaced(admin, "kube-system")
        .list(&ListParams::default().labels("k8s-app=kube-dns"))
        .await
        .unwrap();
    let dns_ip = dns_pods.items[0].status.as_ref().unwrap().pod_ip.clone().unwrap();
    let curl = |url: &str| format!("$(curl -sk -m 5 -o /dev/null -w '%{{http_code}}' {url})");
    // Until its own controller answers: a new pod is admitted once the enforcer has seen it.
    let script = format!(
        "for i in $(seq 1 30); do curl -sf -m 5 -o /dev/null http://{own}:8080/healthz && break; sleep 1; done; \
         echo \"own {}\"; echo \"api {}\"; echo \"neighbour {}\"; echo \"kubelet {}\"; echo \"dns-metrics {}\"",
        curl(&format!("http://{own}:8080/healthz")),
        curl("https://kubernetes.default.svc/version"),
        curl(&format!("http://{theirs}:8080/healthz")),
        curl(&format!("https://{node_ip}:10250/healthz")),
        curl(&format!("http://{dns_ip}:9153/metrics")),
    );
    let pods: Api<Pod> = Api::namespaced(attendee(1).await, "attendee-01");
    pods.create(&PostParams::default(), &probe_pod("x-reach", "default", &script)).await.unwrap();
    let ended = eventually("the probe pod to end", Duration::from_secs(180), || async {
        let phase = pods.get("x-reach").await?.status.and_then(|s| s.phase).unwrap_or_default();
        Ok(Check::done_if(["Succeeded", "Failed"].contains(&phase.as_str()), phase.clone(), phase))
    })
    .await;
    let log = pods.logs("x-reach", &Default::default()).await.unwrap_or_default();
    pods.delete("x-reach", &DeleteParams::default()).await.unwrap();
    assert_eq!(ended.unwrap(), "Succeeded", "{log}");
    let code = |what: &str| {
        log.lines()
            .find_map(|l| l.strip_prefix(&format!("{what} ")).map(String::from))
            .unwrap_or_default()
    };
    assert_eq!(code("own"), "200", "the probe did not reach its own controller at {own}: {log}");
    assert_ne!(code("api"), "000", "the probe did not reach the API server: {log}");
    let mut reached = Vec::new();
    for (what, whom) in [
        ("neighbour", format!("attendee-02's controller at {theirs}:8080")),
        ("kubelet", format!("the kubelet at {node_ip}:10250")),
        ("dns-metrics", format!("the cluster DNS's metrics at {dns_ip}:9153")),
    ] {
        match code(what).as_str() {
            "000" => eprintln!("denied   a connection from attendee-01's pod to {whom}"),
            other => {
                eprintln!("ALLOWED  a connection from attendee-01's pod to {whom}: HTTP {other}");
                reached.push(whom);
            }
        }
    }
    assert!(reached.is_empty(), "attendee-01's pod reached {reached:?}: {log}");
}

/// Attendee 01's requests are served at the room's own priority level (API
/// Priority and Fairness names it in every response), not the cluster's
/// `workload-low` shared with every other ServiceAccount.
#[tokio::test]
#[serial]
async fn an_attendees_requests_are_served_at_the_rooms_own_priority_level() {
    let levels: Api<k8s_openapi::api::flowcontrol::v1::PriorityLevelConfiguration> =
        Api::all(instructor().await);
    let level = levels.get("lab-kit-room-test-room").await.unwrap();
    let request =
        http::Request::get("/api/v1/namespaces/attendee-01/configmaps").body(Vec::new()).unwrap();
    let response = attendee(1).await.send(request.map(kube::client::Body::from)).await.unwrap();
    let served_at =
        response.headers().get("X-Kubernetes-PF-PriorityLevel-UID").and_then(|v| v.to_str().ok());
    assert_eq!(served_at, level.metadata.uid.as_deref(), "{:?}", response.headers());
}

/// Attendee 01's kubeconfig works from another folder with the instructor's
/// CA file gone: it carries the CA inline (the instructor's names a file).
#[tokio::test]
#[serial]
async fn an_attendees_kubeconfig_carries_its_ca_and_works_from_another_folder() {
    let instructor = labkit::project::target_dir().join("room-cluster/instructor");
    let text = std::fs::read_to_string(instructor.join("kubeconfig")).unwrap();
    assert!(
        text.contains("certificate-authority: ca.crt"),
        "the instructor's CA is not a file:\n{text}"
    );
    let attendee = std::fs::read_to_string(room_dir().join("attendee-01.kubeconfig")).unwrap();
    assert!(attendee.contains("certificate-authority-data:"), "no CA inline");
    assert!(!attendee.contains("certificate-authority:"), "a CA file named");
    let elsewhere = std::env::temp_dir().join(format!("attendee-laptop-{}", std::process::id()));
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::fs::write(elsewhere.join("attendee-01.kubeconfig"), &attendee).unwrap();
    let (ca, away) = (instructor.join("ca.crt"), instructor.join("ca.crt.away"));
    std::fs::rename(&ca, &away).unwrap();
    let listed = async {
        let path = elsewhere.join("attendee-01.kubeconfig");
        let client = controller::connect::client(Some(&path)).await.map_err(anyhow::Error::msg)?;
        let own: Api<ConfigMap> = Api::namespaced(client, "attendee-01");
        anyhow::Ok(own.list(&ListParams::default()).await?.items.len())
    }
    .await;
    std::fs::rename(&away, &ca).unwrap();
    let _ = std::fs::remove_dir_all(&elsewhere);
    let listed = listed.unwrap();
    eprintln!(
        "attendee-01's kubeconfig, copied elsewhere, the instructor's CA file gone: {listed} ConfigMaps listed"
    );
}

/// A my-config someone makes while `lab up` builds and pushes (the test stops it
/// right after its checks) stops the up in one line: that my-config is left as
/// it was, and nothing of the lab stays.
#[tokio::test]
#[serial]
async fn a_my_config_made_during_lab_up_stops_it_and_is_left_as_it_was() {
    let (name, namespace) = ("raced", "room-raced");
    let admin = instructor().await;
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(admin.clone());
    let made: k8s_openapi::api::core::v1::Namespace =
        serde_json::from_value(serde_json::json!({"metadata": {"name": namespace}})).unwrap();
    namespaces.create(&PostParams::default(), &made).await.unwrap();
    let kubeconfig = instructor_kubeconfig();
    let up = ["lab", "up", "--provider", "existing", "--name", name, "--kubeconfig", &kubeconfig];
    let up = xtask(&up).args(["--namespace", namespace, "--registry", REGISTRY]);
    let dir = labkit::project::lab_dir(name);
    let log = labkit::project::target_dir().join(format!("{name}-up.log"));
    let up = up.env(labkit::test_hook::VARIABLE, "lab up:checked=SIGSTOP");
    let mut child = up.spawn_to_log(&log).unwrap();
    let pid = common::stopped_holder(&dir).await;
    let config_maps: Api<ConfigMap> = Api::namespaced(admin.clone(), namespace);
    let theirs: ConfigMap = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "my-config"}, "data": {"theirs": "yes"}
    }))
    .unwrap();
    let theirs = config_maps.create(&PostParams::default(), &theirs).await.unwrap();
    common::go_on(pid);
    let ok = child.wait().unwrap().success();
    let said = std::fs::read_to_string(&log).unwrap_or_default();
    let now = config_maps.get("my-config").await.unwrap();
    nothing_applied_in(namespace).await;
    namespaces.delete(namespace, &DeleteParams::default()).await.unwrap();
    assert!(!ok, "lab up took a my-config made meanwhile:\n{said}");
    let last = said.lines().last().unwrap_or_default();
    let refusal =
        format!("ConfigMap {namespace}/my-config is there already and this lab did not make it");
    assert!(last.starts_with("error: ") && last.contains(&refusal), "{said}");
    assert_eq!((now.metadata.uid, now.data), (theirs.metadata.uid, theirs.data));
    assert!(!dir.exists(), "the stopped lab up left {}", dir.display());
}

/// `room up` interrupted (SIGINT) right after it made its policy takes down
/// what it made: no policy, no priority level, no namespace, no folder left.
#[tokio::test]
#[serial]
async fn an_interrupted_room_up_leaves_nothing() {
    let kubeconfig = instructor_kubeconfig();
    let up = ["room", "up", "--name", "cut-short", "--attendees", "1", "--prefix", "cut-short"];
    let up = xtask(&up).args(["--kubeconfig", &kubeconfig]);
    let ran = run(&up.env(labkit::test_hook::VARIABLE, "room up:policy=SIGINT"));
    assert!(!ran.ok && ran.stderr.contains("SIGINT: stopping room up"), "{}", ran.stderr);
    let admin = instructor().await;
    let policies: Api<k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicy> =
        Api::all(admin.clone());
    assert!(policies.get_opt("lab-kit-room-cut-short").await.unwrap().is_none(), "{}", ran.stderr);
    let levels: Api<k8s_openapi::api::flowcontrol::v1::PriorityLevelConfiguration> =
        Api::all(admin.clone());
    assert!(levels.get_opt("lab-kit-room-cut-short").await.unwrap().is_none(), "{}", ran.stderr);
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(admin);
    assert!(namespaces.get_opt("cut-short-01").await.unwrap().is_none(), "{}", ran.stderr);
    let dir = labkit::project::target_dir().join("room/cut-short");
    assert!(!dir.exists(), "{} is left:\n{}", dir.display(), ran.stderr);
}

/// An object attendee 03 leaves with a finalizer nothing removes: `room down`
/// (maint/src/test/existing.rs, after these tests) must still empty and
/// delete that namespace, and the cluster must end as it began.
#[tokio::test]
#[serial]
async fn an_attendee_leaves_a_finalizer_for_room_down() {
    let config_maps: Api<ConfigMap> = Api::namespaced(attendee(3).await, "attendee-03");
    let held: ConfigMap = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "x-held", "finalizers": ["example.com/never-removed"]}}))
    .unwrap();
    config_maps.create(&PostParams::default(), &held).await.unwrap();
}
