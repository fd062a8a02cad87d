//! The kit as a guest, on the envtest lab `cargo maint test` made
//! (`LAB_NAME`), whose API server stands in for a cluster the kit did not
//! make: `lab up --provider existing` refuses someone's my-config (or
//! another lab's objects) before anything is built; what the kit makes is
//! made and deleted only as its record says; and `grade` and `bench` put
//! the lab back however they end — a signal at each phase, a second signal,
//! a failed stop, a program that will not die, a failure in a row or a
//! round, a kill of xtask itself — the cluster's objects the same before
//! and after. The phases are reached through the test-only hook
//! `LAB_KIT_TEST_AT` (labkit/src/test_hook.rs).

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{kit, lab, maint, run, succeeds, xtask};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, ServiceAccount};
use kube::api::{Api, DeleteParams, PostParams};
use labkit::eventually::{Check, eventually};
use labkit::lab::Lab;
use labkit::lab_file::Applied;
use labkit::owned::{self, Deleted};
use labkit::record::{How, Record};
use serde_json::json;
use serial_test::serial;

/// A namespace of the lab's cluster with `objects` made in it by "someone".
async fn someone_s(lab: &Lab, namespace: &str, objects: Vec<serde_json::Value>) {
    let client = lab.client();
    let spaces: Api<Namespace> = Api::all(client.clone());
    if spaces.get_opt(namespace).await.unwrap().is_none() {
        let made = serde_json::from_value(json!({"metadata": {"name": namespace}})).unwrap();
        spaces.create(&PostParams::default(), &made).await.unwrap();
    }
    for object in objects {
        let (applied, api) = labkit::apply::identify(&client, &object).await.unwrap();
        if api.get_opt(&applied.name).await.unwrap().is_none() {
            let typed = serde_json::from_value(object).unwrap();
            let params = PostParams { field_manager: Some("someone".into()), ..Default::default() };
            api.create(&params, &typed).await.unwrap();
        }
    }
}

/// `lab up --provider existing` on the lab's own API server in `namespace`:
/// refused with one line containing each of `said`, before the push
/// (`localhost:9` would refuse it), nothing left behind.
fn refused_before_the_push(lab: &Lab, namespace: &str, said: &[&str]) {
    let name = "guest-refused";
    let up = ["lab", "up", "--provider", "existing", "--name", name, "--namespace", namespace];
    let kubeconfig = lab.file().admin_kubeconfig.clone();
    let ran =
        run(&xtask(&up).args(["--registry", "localhost:9", "--kubeconfig"]).path(&kubeconfig));
    assert!(!ran.ok, "lab up in {namespace} succeeded");
    let last = ran.stderr.lines().last().unwrap_or_default();
    for said in said {
        assert!(last.starts_with("error: ") && last.contains(said), "{said:?} in:\n{}", ran.stderr);
    }
    assert!(!ran.stderr.contains("docker push"), "it went on to push:\n{}", ran.stderr);
    assert!(!labkit::project::lab_dir(name).exists(), "the refused lab up left its state");
    eprintln!("refused: {last}");
}

#[tokio::test]
#[serial]
async fn lab_up_on_an_existing_cluster_refuses_someones_my_config_before_building() {
    let lab = lab().await;
    let mine = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "my-config", "namespace": "guest-taken"},
        "data": {"app.conf": "env=theirs", "other": "kept"}, "binaryData": {"blob": "AAEC"}});
    someone_s(&lab, "guest-taken", vec![mine]).await;
    let theirs: Api<ConfigMap> = Api::namespaced(lab.client(), "guest-taken");
    let before = theirs.get("my-config").await.unwrap();
    refused_before_the_push(
        &lab,
        "guest-taken",
        &[
            "ConfigMap guest-taken/my-config is there already and this lab did not make it (managed by someone)",
            "use another --namespace, or remove it",
        ],
    );
    let after = theirs.get("my-config").await.unwrap();
    assert_eq!(after.metadata.resource_version, before.metadata.resource_version, "touched");
    let accounts: Api<ServiceAccount> = Api::namespaced(lab.client(), "guest-taken");
    assert!(accounts.get_opt("my-controller").await.unwrap().is_none(), "it applied the RBAC");
}

#[tokio::test]
#[serial]
async fn lab_up_refuses_the_objects_of_another_lab_naming_it() {
    let lab = lab().await;
    let account = json!({"apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": "my-controller", "namespace": "guest-other",
                     "labels": {labkit::record::OWNER_LABEL: "another-lab-0badcafe"}}});
    someone_s(&lab, "guest-other", vec![account]).await;
    refused_before_the_push(
        &lab,
        "guest-other",
        &[
            "ServiceAccount guest-other/my-controller",
            "it belongs to another-lab-0badcafe, by its label lab-kit.dev/owner",
        ],
    );
}

/// A scratch record for the owned-object test.
fn scratch_record(test: &str) -> Record {
    let dir = labkit::project::target_dir().join("guest-tests").join(test);
    let _ = std::fs::remove_dir_all(&dir);
    Record::open(&dir, test, None).unwrap()
}

fn config_map(namespace: &str, name: &str) -> (serde_json::Value, Applied) {
    let document = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace}, "data": {"k": "v"}});
    let object = Applied {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        namespace: Some(namespace.into()),
        name: name.into(),
    };
    (document, object)
}

#[tokio::test]
#[serial]
async fn what_the_kit_makes_is_deleted_by_its_uid_and_someone_elses_is_never_touched() {
    let lab = lab().await;
    let client = lab.client();
    someone_s(&lab, "guest-owned", Vec::new()).await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "guest-owned");
    let mut record = scratch_record("owned");
    // Made, recorded with its uid, labelled with the owner.
    let (document, object) = config_map("guest-owned", "made");
    owned::apply(&client, &mut record, "test", "lab-kit-test", document.clone()).await.unwrap();
    let made = api.get("made").await.unwrap();
    let entry = record.find(&object).unwrap().clone();
    assert_eq!(entry.uid, made.metadata.uid, "recorded with its uid");
    assert_eq!(made.metadata.labels.unwrap()[labkit::record::OWNER_LABEL], record.owner);
    // Applied again: updated in place (the uid in the update), not made anew.
    owned::apply(&client, &mut record, "test", "lab-kit-test", document).await.unwrap();
    assert_eq!(api.get("made").await.unwrap().metadata.uid, made.metadata.uid);
    // Deleted and made again by someone under the same name: not ours.
    api.delete("made", &DeleteParams::default()).await.unwrap();
    someone_s(&lab, "guest-owned", vec![config_map("guest-owned", "made").0]).await;
    let deleted = owned::delete(&client, &mut record, &entry, Duration::from_secs(30)).await;
    match deleted.unwrap() {
        Deleted::LeftAlone(why) => assert!(why.contains("someone made it again"), "{why}"),
        other => panic!("someone's object: {other:?}"),
    }
    assert!(api.get_opt("made").await.unwrap().is_some(), "someone's object was deleted");
    assert!(record.find(&object).is_none(), "forgotten once left alone");
    // Someone's object is never updated: refused, naming it.
    let (theirs, _) = config_map("guest-owned", "made");
    let refused = owned::apply(&client, &mut record, "test", "m", theirs).await.unwrap_err();
    assert!(format!("{refused:#}").contains("this lab did not make it (managed by someone)"));
    // Recorded but never made (a create cut short): gone is fine.
    let (_, never) = config_map("guest-owned", "never-made");
    record.intend(&never, "test", How::Created).unwrap();
    let entry = record.find(&never).unwrap().clone();
    let gone = owned::delete(&client, &mut record, &entry, Duration::from_secs(30)).await;
    assert_eq!(gone.unwrap(), Deleted::Gone);
    api.delete("made", &DeleteParams::default()).await.unwrap();
}

/// The grade's program: my-controller under a name of its own, so a
/// leftover process of it can be found.
fn program() -> String {
    let built = labkit::project::target_dir().join("debug").join("my-controller");
    succeeds(&labkit::command::cargo(["build", "-p", "controller", "--bin", "my-controller"]));
    let dir = labkit::project::target_dir().join("guest-tests");
    std::fs::create_dir_all(&dir).unwrap();
    let copy = dir.join(PROGRAM);
    std::fs::copy(&built, &copy).unwrap();
    copy.display().to_string()
}

/// The program's file name: how its processes are found.
const PROGRAM: &str = "guest-graded-program";

/// Processes whose command line names the program.
fn programs_running() -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(PROGRAM))
                && labkit::process::is_alive(*pid)
        })
        .collect()
}

/// The cluster's objects, but for the namespaces the bench keeps with the
/// lab (made once, by design) and the tests' own.
async fn objects(lab: &Lab) -> BTreeSet<String> {
    let all = common::cluster::snapshot(&lab.client()).await.unwrap();
    all.into_iter().filter(|o| !o.contains(" bench-") && !o.contains("guest-")).collect()
}

/// The lab put back: the same objects as `before`, the controller running
/// and ready, my-config as desired and writable, no borrow in the record,
/// no token files, no program left running. (The lab is found anew: its
/// controller was started again under another pid.)
async fn assert_put_back(before: &BTreeSet<String>, printed: &str) {
    let lab = &lab().await;
    let after = objects(lab).await;
    common::cluster::difference(before, &after).unwrap_or_else(|e| panic!("{e:#}\n{printed}"));
    assert!(lab.controller_running().await.unwrap(), "the controller is not back:\n{printed}");
    let my_config = lab.config_maps().get(lab.desired().name()).await.unwrap();
    assert!(lab.desired().is_satisfied_by(&my_config), "my-config: {my_config:?}\n{printed}");
    assert_ne!(my_config.immutable, Some(true), "left immutable:\n{printed}");
    let record = Record::load(&lab.file().state_dir).unwrap().expect("the lab's record");
    assert!(record.borrow.is_none(), "still borrowed: {:?}\n{printed}", record.borrow);
    let only_kept = record.entries.iter().all(|e| e.by == "lab up" || e.by.contains("kept"));
    assert!(only_kept, "left in the record: {:?}\n{printed}", record.entries);
    assert!(!lab.borrowed_dir().exists(), "token files left:\n{printed}");
    let running = programs_running();
    assert!(running.is_empty(), "the program still runs: pids {running:?}\n{printed}");
}

/// What a command printed, its hang-up log included.
fn printed(ran: &common::Ran, lab: &Lab) -> String {
    let hangup = std::fs::read_to_string(lab.file().state_dir.join("hangup.log"));
    format!("{}{}{}", ran.stdout, ran.stderr, hangup.unwrap_or_default())
}

/// `cargo xtask ARGS` with the hook set to `at`: it must fail (its output
/// containing `said`), and the lab must be as it was.
async fn interrupted(args: &[&str], at: &str, said: &str) {
    let lab = lab().await;
    let before = objects(&lab).await;
    let _ = std::fs::remove_file(lab.file().state_dir.join("hangup.log"));
    let ran = run(&kit(args).env(labkit::test_hook::VARIABLE, at));
    let printed = printed(&ran, &lab);
    assert!(!ran.ok, "{args:?} with {at} succeeded:\n{printed}");
    assert!(printed.contains(said), "{said:?} in:\n{printed}");
    assert_put_back(&before, &printed).await;
    eprintln!("{at}: put back");
}

fn grade_args(name: &str, program: &str) -> Vec<String> {
    ["grade", "--name", name, "--lang", "en", "--resync", "1s", "--exit-within", "2s", "--"]
        .into_iter()
        .map(String::from)
        .chain([program.to_string(), "--kubeconfig".into(), "{kubeconfig}".into()])
        .chain(["--resync", "1s", "--listen", "127.0.0.1:0"].map(String::from))
        .collect()
}

#[tokio::test]
#[serial]
async fn grade_puts_the_lab_back_whatever_ends_it() {
    let (name, program) = (lab().await.file().name.clone(), program());
    let args = grade_args(&name, &program);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    for (at, said) in [
        ("stopped=SIGINT", "SIGINT: stopping the program"),
        ("grade:identity=SIGTERM", "SIGTERM: stopping the program"),
        ("grade:row:self_heal=SIGHUP", "SIGHUP: the terminal went away"),
        ("grade:immutable=SIGINT", "was left immutable"),
        ("grade:row:correction=SIGINT,put_back=SIGTERM", "still putting the lab back"),
        ("stopped=fail", "stopped fails (a test)"),
        ("grade:row:rerun=fail", "row:rerun fails (a test)"),
    ] {
        interrupted(&args, at, said).await;
    }
}

#[tokio::test]
#[serial]
async fn grade_puts_back_a_program_that_will_not_die() {
    let (name, program) = (lab().await.file().name.clone(), program());
    // The controller in the background of a shell that ignores every signal but SIGKILL.
    let script = format!(
        "trap '' INT TERM HUP; {program} --kubeconfig \"$KUBECONFIG\" --resync 1s --listen 127.0.0.1:0 & while :; do sleep 1; done"
    );
    let args = ["grade", "--name", &name, "--lang", "en", "--", "sh", "-c", &script];
    interrupted(&args, "grade:row:self_heal=SIGINT", "SIGINT: stopping the program").await;
}

#[tokio::test]
#[serial]
async fn a_grade_killed_outright_is_put_back_by_its_watchdog() {
    let lab = lab().await;
    let (name, program) = (lab.file().name.clone(), program());
    let before = objects(&lab).await;
    let args = grade_args(&name, &program);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let ran = run(&xtask(&args).env(labkit::test_hook::VARIABLE, "grade:row:correction=SIGKILL"));
    assert!(!ran.ok, "a killed grade succeeded");
    let printed = put_back_by_the_watchdog(&lab).await;
    assert!(printed.contains("left borrowed by `cargo xtask grade`"), "{printed}");
    assert_put_back(&before, &printed).await;
}

/// Once the borrower was killed: until its watchdog has put the lab back (the
/// record without the borrow, the controller ready); what the watchdog printed.
async fn put_back_by_the_watchdog(lab: &Lab) -> String {
    let killed = std::time::Instant::now();
    let dir = lab.file().state_dir.clone();
    eventually("the watchdog to put the lab back", Duration::from_secs(120), || async {
        let borrowed = Record::load(&dir)?.and_then(|r| r.borrow).map(|b| b.by);
        let watched = std::fs::read_to_string(dir.join("watchdog.log")).unwrap_or_default();
        let back = borrowed.is_none() && watched.contains("runs with its own flags and is ready");
        Ok(Check::done_if(
            back,
            (),
            format!("borrowed by {borrowed:?}; the watchdog said: {watched}"),
        ))
    })
    .await
    .unwrap();
    eprintln!("put back {:.1} s after the borrower was killed", killed.elapsed().as_secs_f64());
    std::fs::read_to_string(dir.join("watchdog.log")).unwrap_or_default()
}

fn bench_args(name: &str, out: &Path) -> Vec<String> {
    let out = out.display().to_string();
    [
        "bench",
        "--name",
        name,
        "--rounds",
        "4",
        "--steady",
        "1s",
        "--burst",
        "3",
        "--unrelated",
        "20",
    ]
    .into_iter()
    .map(String::from)
    .chain(["--out".to_string(), out])
    .collect()
}

fn bench_out() -> PathBuf {
    labkit::project::target_dir().join("guest-tests").join("bench")
}

#[tokio::test]
#[serial]
async fn bench_puts_the_lab_back_whatever_ends_it() {
    let name = lab().await.file().name.clone();
    let args = bench_args(&name, &bench_out());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    for (at, said) in [
        ("stopped=SIGTERM", "SIGTERM: stopping the controllers under test"),
        ("bench:granted=SIGHUP", "SIGHUP: the terminal went away"),
        ("bench:block:1=SIGINT", "SIGINT: stopping the controllers under test"),
        ("bench:unrelated=SIGINT,put_back=SIGINT", "still putting the lab back"),
        ("stopped=fail", "stopped fails (a test)"),
        ("bench:block:1=fail", "block:1 fails (a test)"),
    ] {
        interrupted(&args, at, said).await;
    }
}

#[tokio::test]
#[serial]
async fn a_bench_killed_outright_is_put_back_by_its_watchdog() {
    let lab = lab().await;
    let name = lab.file().name.clone();
    let before = objects(&lab).await;
    let args = bench_args(&name, &bench_out());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let ran = run(&maint(&args).env(labkit::test_hook::VARIABLE, "bench:block:1:running=SIGKILL"));
    assert!(!ran.ok, "a killed bench succeeded");
    // The sides it started, unless the watchdog was quicker than this read.
    let record = Record::load(&lab.file().state_dir).unwrap().unwrap();
    let sides = record.borrow.map(|b| b.groups).unwrap_or_default();
    let printed = put_back_by_the_watchdog(&lab).await;
    assert!(printed.contains("left borrowed by `cargo maint bench`"), "{printed}");
    wait_ready(&lab).await;
    assert_put_back(&before, &printed).await;
    // A process of the group still runs (a zombie does not).
    let alive = |g: &labkit::process::Group| {
        labkit::process::group_members(g.pgid).iter().any(|m| !m.zombie)
    };
    assert!(!sides.iter().any(alive), "a side still runs: {sides:?}\n{printed}");
}

/// The controller ready again after a command that restarted it.
async fn wait_ready(lab: &Lab) {
    eventually("the lab's controller to be ready", Duration::from_secs(60), || async {
        let status = lab.controller_status("/readyz").await?;
        Ok(Check::done_if(status == 200, (), format!("/readyz {status}")))
    })
    .await
    .unwrap();
}

/// A `lab up --provider existing` that fails after its checks (the test
/// hook), its kubeconfig written, is undone: the cluster's objects are the
/// same before and after, and its folder is gone.
#[tokio::test]
#[serial]
async fn a_failed_existing_up_leaves_the_cluster_as_it_was() {
    let lab = lab().await;
    let before = common::cluster::snapshot(&lab.client()).await.unwrap();
    let name = format!("{}-up-fails", lab.file().name);
    let up = ["lab", "up", "--provider", "existing", "--name", &name, "--create-namespace"];
    let flags = ["--namespace", "up-fails", "--registry", "localhost:9", "--kubeconfig"];
    let up = xtask(&up).args(flags).path(&lab.file().admin_kubeconfig);
    let ran = run(&up.env(labkit::test_hook::VARIABLE, "lab up:checked=fail"));
    assert!(!ran.ok, "lab up succeeded:\n{}", ran.stderr);
    for said in ["lab up:checked fails", "undoing what it made"] {
        assert!(ran.stderr.contains(said), "{said:?} in:\n{}", ran.stderr);
    }
    assert!(!labkit::project::lab_dir(&name).exists(), "its folder is left:\n{}", ran.stderr);
    let after = common::cluster::snapshot(&lab.client()).await.unwrap();
    common::cluster::difference(&before, &after)
        .unwrap_or_else(|e| panic!("{e:#}\n{}", ran.stderr));
}

/// `lab down --dry-run` of a lab on an existing cluster prints the plan
/// `lab down` runs: each object of its record deleted, newest first, then
/// its record and folder. The lab is the record of two ConfigMaps made as
/// `lab up` makes them ([`owned::apply`]), on the lab's own API server.
#[tokio::test]
#[serial]
async fn existing_lab_down_runs_what_its_dry_run_prints() {
    let lab = lab().await;
    let client = lab.client();
    let name = format!("{}-down-plan", lab.file().name);
    let dir = labkit::project::lab_dir(&name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(&lab.file().admin_kubeconfig, dir.join("kubeconfig")).unwrap();
    let existing = Some("existing");
    let mut record = Record::open(&dir, &name, existing).unwrap();
    someone_s(&lab, "guest-down-plan", Vec::new()).await;
    for made in ["first", "second"] {
        let (document, _) = config_map("guest-down-plan", made);
        owned::apply(&client, &mut record, "lab up", "lab-kit-test", document).await.unwrap();
    }
    common::lab_down_runs_what_its_dry_run_prints(&name);
    let api: Api<ConfigMap> = Api::namespaced(client, "guest-down-plan");
    for made in ["first", "second"] {
        assert!(api.get_opt(made).await.unwrap().is_none(), "{made} is left");
    }
}
