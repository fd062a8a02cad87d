//! Tests of a running envtest lab (`cargo maint test` makes one): the
//! workshop's narrated experiments, a short benchmark, and a lab made for
//! another ConfigMap.

mod common;

use std::time::Duration;

use common::{lab, maint, run, succeeds, xtask};
use labkit::eventually::{Check, eventually};
use serial_test::serial;

#[tokio::test]
#[serial]
async fn every_narrated_experiment_tells_its_story_and_passes() {
    let name = lab().await.file().name.clone();
    let listing = run(&xtask(&["exp", "--lang", "en"]));
    assert!(listing.ok, "{}", listing.stderr);
    // `  create   course experiment 1   …`: one line per experiment.
    let names: Vec<&str> = listing
        .stdout
        .lines()
        .filter(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(names.len(), 5, "{}", listing.stdout);
    for exp in names {
        // A narration that lacks one of its key lines fails by itself.
        let told = run(&xtask(&["exp", exp, "--name", &name, "--lang", "en"]));
        assert!(told.ok, "cargo xtask exp {exp} failed:\n{}\n{}", told.stdout, told.stderr);
        assert!(told.stdout.lines().any(|l| l.starts_with("result:") && l.ends_with("pass")));
        if exp == "heal" {
            common::write_sample("exp-heal.txt", &told.stdout);
        }
        // Each narration in Chinese too: no English sentence left (heal: below, by the locale).
        if exp != "heal" {
            let told = run(&xtask(&["exp", exp, "--name", &name, "--lang", "zh"]));
            assert!(
                told.ok,
                "cargo xtask exp {exp} --lang zh failed:\n{}\n{}",
                told.stdout, told.stderr
            );
            let printed = told.stdout + &common::without_cargo(&told.stderr);
            common::assert_chinese(&format!("cargo xtask exp {exp} --lang zh"), &printed);
        }
    }
}

#[tokio::test]
#[serial]
async fn a_chinese_locale_narrates_in_chinese() {
    let name = lab().await.file().name.clone();
    let told = run(&xtask(&["exp", "heal", "--name", &name])
        .env_remove("LC_ALL")
        .env_remove("LC_MESSAGES")
        .env("LANG", "zh_CN.UTF-8"));
    assert!(told.ok, "cargo xtask exp heal failed:\n{}\n{}", told.stdout, told.stderr);
    for label in ["要做什么：", "手动命令：", "控制器日志：", "注意："] {
        assert!(told.stdout.lines().any(|l| l.starts_with(label)), "no {label}:\n{}", told.stdout);
    }
    assert!(told.stdout.lines().any(|l| l.starts_with("结果：") && l.ends_with("通过")));
    common::assert_chinese("cargo xtask exp heal", &told.stdout);
    common::assert_chinese("cargo xtask exp heal", &common::without_cargo(&told.stderr));
    let listing = run(&xtask(&["exp", "--lang", "zh"]));
    assert!(listing.ok, "{}", listing.stderr);
    common::assert_chinese("cargo xtask exp", &listing.stdout);
    common::write_sample("exp-heal.zh-CN.txt", &told.stdout);
}

/// With `--lang zh`, every verb on this lab speaks Chinese, errors and refusals included:
/// another program's lines are marked `  | `, commands are `$ …`, and shell code (`lab env`'s
/// stdout, which `eval` reads) is code.
#[tokio::test]
#[serial]
async fn every_verb_speaks_chinese_errors_included() {
    let name = lab().await.file().name.clone();
    let verbs: Vec<Vec<&str>> = vec![
        vec!["lab", "status", "--name", &name],
        vec!["lab", "env", "--name", &name],
        vec!["lab", "up", "--provider", "envtest", "--name", &name],
        vec!["lab", "up", "--provider", "envtest", "--name", "zh-plan", "--dry-run"],
        vec!["lab", "down", "--name", &name, "--dry-run"],
        vec!["e2e", "--exp", "version", "--name", &name],
        vec!["doctor", "--provider", "envtest", "--name", &name],
        vec!["lab", "status", "--name", "no-such-lab"],
        vec!["lab", "up", "--provider", "envtest", "--name", "zh-bad", "--node-image", "built"],
        vec!["lab", "up", "--provider", "kind", "--registry-mirror", "docker.m.daocloud.io"],
        vec!["room", "up", "--attendees", "many"],
    ];
    for args in verbs {
        let ran = run(&xtask(&args).args(["--lang", "zh"]));
        let code = args[..2] == ["lab", "env"];
        let printed =
            if code { String::new() } else { ran.stdout } + &common::without_cargo(&ran.stderr);
        common::assert_chinese(&format!("cargo xtask {} --lang zh", args.join(" ")), &printed);
    }
}

#[tokio::test]
#[serial]
async fn a_short_benchmark_with_every_peer_completes_and_writes_its_report() {
    // Enough for every side's figures to exist; the figures themselves are `cargo maint bench`'s.
    const ROUNDS: u64 = 8;
    let lab = lab().await;
    let name = lab.file().name.clone();
    let report = labkit::project::target_dir().join("bench/latest.json");
    let _ = std::fs::remove_file(&report);
    succeeds(&maint(&[
        "bench",
        "--name",
        &name,
        "--rounds",
        &ROUNDS.to_string(),
        "--steady",
        "2s",
        "--unrelated",
        "500",
        "--peer",
        "go",
        "--peer",
        "controller-runtime",
        "--peer",
        "kube-runtime",
        "--phases",
    ]));
    let text = std::fs::read_to_string(&report).expect("the benchmark writes latest.json");
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(json["floor"]["self_heal"]["n"], ROUNDS, "{text}");
    let subjects = json["subjects"].as_array().expect("subjects");
    let labels: Vec<&str> = subjects.iter().filter_map(|s| s["label"].as_str()).collect();
    let expected = ["my-controller (release)", "course-go", "controller-runtime", "kube-runtime"];
    assert_eq!(labels.len(), expected.len(), "{labels:?}");
    for (label, start) in labels.iter().zip(expected) {
        assert!(label.starts_with(start), "{labels:?}");
    }
    for s in subjects {
        for measure in ["self_heal", "correction"] {
            assert_eq!(s[measure]["n"], ROUNDS, "{}: {measure}", s["label"]);
        }
        assert_eq!(s["self_heal_with_unrelated"]["n"], ROUNDS, "{}", s["label"]);
        assert!(s["cost"]["with_unrelated"]["rss_kib"].as_u64() > Some(0), "{}", s["label"]);
    }
    // Every side's rounds cut into phases from the audit log.
    let phases = json["phases"].as_array().expect("phases");
    for side in std::iter::once("floor").chain(labels.iter().copied()) {
        for kind in ["self-heal", "correction"] {
            let row = phases.iter().find(|r| r["side"] == side && r["kind"] == kind);
            let rounds = row.and_then(|r| r["rounds"].as_u64()).unwrap_or(0);
            // Three in four, as 15 of 20 was.
            assert!(
                4 * rounds >= 3 * ROUNDS,
                "{side} {kind}: {rounds} of {ROUNDS} rounds cut into phases"
            );
        }
    }
    assert_bench_left_nothing(&lab).await;
}

#[tokio::test]
#[serial]
async fn an_interrupted_benchmark_stops_its_controllers_and_puts_the_lab_back() {
    let lab = lab().await;
    let name = lab.file().name.clone();
    // As a terminal's Ctrl-C: the signal to xtask's process group.
    let log = labkit::project::target_dir().join("bench-tests/interrupted.log");
    std::fs::create_dir_all(log.parent().unwrap()).unwrap();
    let _ = std::fs::remove_file(&log);
    let mut child = maint(&["bench", "--name", &name, "--rounds", "3000", "--peer", "go"])
        .spawn_to_log(&log)
        .unwrap();
    // Interrupted once the rounds are under way: every side is running.
    eventually("the rounds to be under way", Duration::from_secs(600), || async {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let under_way = text.contains("rounds of") && bench_processes(&lab).len() >= 2;
        Ok(if under_way { Check::Done(()) } else { Check::NotYet(tail(&text)) })
    })
    .await
    .unwrap();
    // The process group spawn_to_log started it in.
    let group = -(child.id() as libc::pid_t);
    let (status, printed) = common::interrupt(&mut child, group, &log).await;
    assert!(!status.success(), "an interrupted bench must not succeed:\n{printed}");
    assert!(printed.contains("interrupted"), "{printed}");
    assert_eq!(bench_processes(&lab), Vec::<String>::new(), "left running:\n{printed}");
    // Read anew: the lab's controller is a new process.
    let lab = common::lab().await;
    assert!(lab.controller_running().await.unwrap(), "the lab's controller is not back");
    labkit::converge::wait_desired(&lab).await.unwrap();
    assert_bench_left_nothing(&lab).await;
}

/// The command lines of the bench's sides still running against `lab`: the
/// floor, and the course's Go controller (both only ever started by the
/// bench), with a kubeconfig of `lab`'s (in its command line or
/// environment): a bench on another lab may run at the same time.
fn bench_processes(lab: &labkit::lab::Lab) -> Vec<String> {
    // With its slash: lab `x`'s folder is a prefix of lab `x-docker`'s, whose bench may run now.
    let state_dir = format!("{}/", lab.file().state_dir.display());
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let read = |file: &str| {
            let bytes = std::fs::read(entry.path().join(file)).unwrap_or_default();
            String::from_utf8_lossy(&bytes).replace('\0', " ")
        };
        let cmdline = read("cmdline");
        let program = cmdline.split(' ').next().unwrap_or_default();
        let program = program.rsplit('/').next().unwrap_or_default();
        // The Go peer's binary is named course-go-<hash of its sources>.
        let side = program == "bench-floor" || program.starts_with("course-go-");
        if side && (cmdline.contains(&state_dir) || read("environ").contains(&state_dir)) {
            found.push(cmdline);
        }
    }
    found
}

fn tail(text: &str) -> String {
    text.lines().rev().take(5).collect::<Vec<_>>().join(" | ")
}

/// Nothing of a benchmark's is left: the peers' CRD, the sides' Role and
/// their my-configs, the audit log's flags.
async fn assert_bench_left_nothing(lab: &labkit::lab::Lab) {
    let crds: kube::Api<
        k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    > = kube::Api::all(lab.client());
    assert!(crds.get_opt("configmaptemplates.lab.my-controller.dev").await.unwrap().is_none());
    // The sides' Role and their own my-configs are gone from every namespace.
    let by_name =
        |name: &str| kube::api::ListParams::default().fields(&format!("metadata.name={name}"));
    let roles: kube::Api<k8s_openapi::api::rbac::v1::Role> = kube::Api::all(lab.client());
    let left = roles.list(&by_name(bench::places::ROLE)).await.unwrap();
    assert!(
        left.items.is_empty(),
        "{:?}",
        left.items.iter().map(|r| &r.metadata).collect::<Vec<_>>()
    );
    let config_maps: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::all(lab.client());
    let kept = config_maps.list(&by_name(lab.desired().name())).await.unwrap();
    let namespaces: Vec<_> =
        kept.items.iter().filter_map(|c| c.metadata.namespace.clone()).collect();
    assert!(namespaces.iter().all(|n| !n.starts_with("bench-")), "left: {namespaces:?}");
    let args =
        std::fs::read_to_string(format!("/proc/{}/cmdline", lab.pid("kube-apiserver").unwrap()));
    assert!(!args.unwrap_or_default().contains("--audit-log-path"), "the audit log is still on");
}

#[tokio::test]
#[serial]
async fn a_lab_for_another_config_map_keeps_that_one() {
    let name = lab().await.file().name.clone();
    common::another_target(&["lab", "up", "--provider", "envtest", "--name", &name]);
}

/// A kube-apiserver two minors behind the kit's client, for real: the lab's
/// own, linked again from the same Go module with that minor stamped into
/// its version (every package comes from Go's build cache: only the link is
/// new; kept next to the lab's binary for the next run), serving the lab's
/// etcd under a prefix of its own, so it is a fresh cluster that says it is
/// 1.(n-2). `lab up --provider existing` on it is refused by the version
/// rule in one line, and nothing is applied.
#[tokio::test]
#[serial]
async fn lab_up_refuses_a_cluster_two_minors_behind_in_one_line() {
    use kube::config::Kubeconfig;
    let lab = lab().await;
    let minor = controller::version::target_minor() - 2;
    let ours = lab.file().processes.iter().find(|p| p.role == "kube-apiserver").unwrap().clone();
    let binary = ours.binary.with_file_name(format!("kube-apiserver-as-1.{minor}"));
    let stamps = [
        format!("k8s.io/component-base/version.gitVersion=v1.{minor}.0"),
        "k8s.io/component-base/version.gitMajor=1".into(),
        format!("k8s.io/component-base/version.gitMinor={minor}"),
        "k8s.io/component-base/version.gitTreeState=clean".into(),
    ];
    let ldflags = std::iter::once("-s -w".to_string())
        .chain(stamps.iter().map(|s| format!("-X {s}")))
        .collect::<Vec<_>>()
        .join(" ");
    // The lab's own build command (its workspace, its flags) with these stamps.
    let envtest = xtask::lab::binaries::ENVTEST;
    let mut kubernetes = labkit::go_build::components(envtest).unwrap().remove(0);
    assert_eq!(kubernetes.name, "kubernetes");
    kubernetes.ldflags = ldflags;
    labkit::go_build::build_once("kube-apiserver", &binary, |partial| {
        kubernetes.build_cmd(partial, &["k8s.io/kubernetes/cmd/kube-apiserver"])
    })
    .unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut args: Vec<String> =
        ours.args.iter().filter(|a| !a.starts_with("--secure-port=")).cloned().collect();
    args.extend([format!("--secure-port={port}"), "--etcd-prefix=/other-minor".into()]);
    let dir = labkit::project::target_dir().join("other-minor");
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("kube-apiserver.log");
    let server = labkit::command::Cmd::new(binary.display().to_string()).args(&args);
    let mut server = Stopped(server.spawn_to_log(&log).unwrap());
    let mut config = Kubeconfig::read_from(&lab.file().admin_kubeconfig).unwrap();
    for named in &mut config.clusters {
        named.cluster.as_mut().unwrap().server = Some(format!("https://127.0.0.1:{port}"));
    }
    let kubeconfig = dir.join("kubeconfig");
    labkit::files::write_private(&kubeconfig, serde_saphyr::to_string(&config).unwrap()).unwrap();
    let client = labkit::lab::client_of(config, |_| ()).await.unwrap();
    eventually("the other kube-apiserver to answer", Duration::from_secs(120), || {
        let (client, exited) = (client.clone(), server.0.try_wait().ok().flatten());
        async move {
            if let Some(status) = exited {
                return Ok(Check::Stop(anyhow::anyhow!("it exited: {status}")));
            }
            Ok(match client.apiserver_version().await {
                Ok(info) if info.minor == minor.to_string() => Check::Done(()),
                Ok(info) => Check::Stop(anyhow::anyhow!("it says {}", info.git_version)),
                Err(e) => Check::NotYet(e.to_string()),
            })
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e:#}\n{}", labkit::files::tail(&log, 20)));

    let name = "other-minor";
    let up = ["lab", "up", "--provider", "existing", "--name", name, "--registry", "localhost:9"];
    let ran = run(&xtask(&up).arg("--kubeconfig").path(&kubeconfig));
    assert!(!ran.ok, "lab up on a 1.{minor} cluster succeeded");
    let last = ran.stderr.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("error: ")
            && last.contains(&format!("runs v1.{minor}.0"))
            && last.contains("more than one minor apart"),
        "{}",
        ran.stderr
    );
    eprintln!("refused: {last}");
    assert!(!labkit::project::lab_dir(name).exists(), "the refused lab up left its state");
    let accounts: kube::Api<k8s_openapi::api::core::v1::ServiceAccount> =
        kube::Api::namespaced(client, "default");
    assert!(accounts.get_opt("my-controller").await.unwrap().is_none(), "it applied the RBAC");
    server.0.kill().unwrap();
    server.0.wait().unwrap();
}

/// A child process killed when the test ends, failed or not.
struct Stopped(std::process::Child);

impl Drop for Stopped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `lab status` and `e2e` put their result on stdout — as text, or as one
/// JSON document with the fields docs/output.md lists — and the commands they
/// run, with what those print, on stderr.
#[tokio::test]
#[serial]
async fn status_and_e2e_print_their_result_on_stdout_as_text_or_json() {
    let name = lab().await.file().name.clone();
    let status = run(&xtask(&["lab", "status", "--name", &name, "-o", "json"]));
    assert!(status.ok, "lab status -o json:\n{}\n{}", status.stdout, status.stderr);
    let document: serde_json::Value = serde_json::from_str(&status.stdout)
        .unwrap_or_else(|e| panic!("lab status -o json is not JSON ({e}):\n{}", status.stdout));
    labkit::json_doc::assert_documented(&document);
    assert_eq!(
        (document["state"].as_str(), document["healthy"].as_bool()),
        (Some("up"), Some(true))
    );
    assert_eq!(document["provider"], "envtest");

    let table = run(&xtask(&["e2e", "--name", &name, "--exp", "self-heal"]));
    assert!(table.ok, "e2e --exp self-heal:\n{}\n{}", table.stdout, table.stderr);
    assert!(
        table.stdout.contains("| experiment | result | latency | measured |")
            && table.stdout.contains("e2e: 1 passed, 0 not run, 0 failed"),
        "the table is not on stdout:\n{}",
        table.stdout
    );
    for progress in ["$ cargo test", "test result:"] {
        assert!(!table.stdout.contains(progress), "{progress:?} on stdout:\n{}", table.stdout);
        assert!(table.stderr.contains(progress), "{progress:?} not on stderr:\n{}", table.stderr);
    }

    let json = run(&xtask(&["e2e", "--name", &name, "--exp", "self-heal", "-o", "json"]));
    assert!(json.ok, "e2e -o json:\n{}\n{}", json.stdout, json.stderr);
    let document: serde_json::Value = serde_json::from_str(&json.stdout)
        .unwrap_or_else(|e| panic!("e2e -o json is not JSON ({e}):\n{}", json.stdout));
    labkit::json_doc::assert_documented(&document);
    assert_eq!(document["results"][0]["result"], "pass", "{document:#}");
    assert_eq!(document["lab"], name.as_str());
}

/// A `lab up` that fails at its last step (the test hook, before lab.json
/// is written) is undone by the down plan of what it made: no process of
/// that lab is left, nor its folder.
#[tokio::test]
#[serial]
async fn a_failed_envtest_up_leaves_nothing_behind() {
    let name = format!("{}-up-fails", lab().await.file().name);
    let up = xtask(&["lab", "up", "--provider", "envtest", "--name", &name]);
    let ran = run(&up.env(labkit::test_hook::VARIABLE, "lab up:lab.json=fail"));
    assert!(!ran.ok, "lab up succeeded:\n{}", ran.stderr);
    for said in ["lab up:lab.json fails", "undoing what it made", "stop controller (pid"] {
        assert!(ran.stderr.contains(said), "{said:?} in:\n{}", ran.stderr);
    }
    let dir = labkit::project::lab_dir(&name);
    assert!(!dir.exists(), "the failed lab up left {}:\n{}", dir.display(), ran.stderr);
    let left = common::processes_naming(&dir);
    assert!(left.is_empty(), "the failed lab up left {left:?}:\n{}", ran.stderr);
}

/// `lab down --dry-run` of an envtest lab prints the plan `lab down` runs.
#[tokio::test]
#[serial]
async fn envtest_lab_down_runs_what_its_dry_run_prints() {
    let name = format!("{}-down-plan", lab().await.file().name);
    succeeds(&xtask(&["lab", "up", "--provider", "envtest", "--name", &name]));
    common::lab_down_runs_what_its_dry_run_prints(&name);
    let left = common::processes_naming(&labkit::project::lab_dir(&name));
    assert!(left.is_empty(), "lab down left {left:?}");
}

/// Two `lab up`s of one lab: the second, started while the first holds the
/// lab's lock (stopped there by the test), says in one line which command holds
/// it and exits having run nothing; the first, let go on, brings the lab up.
#[tokio::test]
#[serial]
async fn a_second_lab_up_is_refused_while_the_first_runs() {
    let name = format!("{}-locked", lab().await.file().name);
    let up = xtask(&["lab", "up", "--provider", "envtest", "--name", &name]);
    let dir = labkit::project::lab_dir(&name);
    let log = labkit::project::target_dir().join(format!("{name}-first-up.log"));
    let _ = std::fs::remove_file(labkit::lock::path_of(&dir));
    let held = up.clone().env(labkit::test_hook::VARIABLE, "lab up:locked=SIGSTOP");
    let mut first = held.spawn_to_log(&log).unwrap();
    let pid = common::stopped_holder(&dir).await;
    let second = run(&up);
    common::go_on(pid);
    let first_ok = first.wait().unwrap().success();
    let first_said = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(!second.ok, "the second lab up ran:\n{}", second.stderr);
    let said = format!(
        "lab {name} is in use: `cargo xtask lab up --provider envtest --name {name}` (pid {pid}) holds it since "
    );
    assert!(second.stderr.contains(&said), "{said:?} in:\n{}", second.stderr);
    let ran: Vec<&str> = second.stderr.lines().filter(|l| l.starts_with("$ ")).collect();
    assert!(ran.is_empty(), "the refused lab up ran {ran:?}");
    assert!(first_ok, "the first lab up failed:\n{first_said}");
    assert!(first_said.contains(&format!("lab {name} is up in")), "{first_said}");
    common::lab_down_runs_what_its_dry_run_prints(&name);
}

/// The lab's etcd answers only a certificate of the lab's CA (the API server's,
/// the admin's): not plain HTTP, not TLS without a client certificate.
#[tokio::test]
#[serial]
async fn the_labs_etcd_answers_only_certificates_of_the_labs_ca() {
    let lab = lab().await;
    let path = lab.file().state_dir.join(labkit::lab::ETCD_KUBECONFIG);
    let mut config = kube::config::Kubeconfig::read_from(&path).unwrap();
    let health = || http::Request::get("/health").body(Vec::new()).unwrap();
    let answered = lab.etcd().await.unwrap().request_text(health()).await.unwrap();
    assert!(answered.contains("\"true\""), "with the admin's certificate: {answered}");
    let server = config.clusters[0].cluster.as_ref().unwrap().server.clone().unwrap();
    let plain = server.replacen("https://", "http://", 1);
    let reply = labkit::http_probe::get_url(&plain, "/health", Duration::from_secs(5)).await;
    let body = reply.map(|r| format!("{} {}", r.status, r.body)).unwrap_or_else(|e| e.to_string());
    assert!(!body.contains("\"true\""), "plain HTTP: {body}");
    for user in config.auth_infos.iter_mut().filter_map(|u| u.auth_info.as_mut()) {
        (user.client_certificate_data, user.client_key_data) = (None, None);
    }
    let anonymous = labkit::lab::client_of(config, |_| ()).await.unwrap();
    let refused = anonymous.request_text(health()).await;
    assert!(refused.is_err(), "without a client certificate: {refused:?}");
}

/// Ctrl-C during the e2e suite's RBAC fault, right after it took `create` from
/// the controller's Role, to the whole process group as a terminal sends it:
/// the fault finishes and puts the Role back, the lab is restored, and the
/// suite stops (exit 130); `cargo xtask e2e` ends only then, the Role as before.
#[tokio::test]
#[serial]
async fn a_signal_during_a_fault_lets_it_put_the_role_back_then_stops_the_suite() {
    let lab = lab().await;
    let (namespace, name) = lab.controller_service_account().split_once('/').unwrap();
    let roles: kube::Api<k8s_openapi::api::rbac::v1::Role> =
        kube::Api::namespaced(lab.client(), namespace);
    let before = roles.get(name).await.unwrap().rules;
    let fault = "create_denied_gives_up_then_heals";
    let e2e = xtask(&["e2e", "--exp", fault, "--name", &lab.file().name]);
    let e2e = e2e.env(labkit::test_hook::VARIABLE, "e2e:role edited=SIGINT-group");
    let log = labkit::project::target_dir().join("e2e-interrupted.log");
    let _ = std::fs::remove_file(&log);
    // In a process group of its own, as a terminal's foreground job is.
    let ok = e2e.spawn_to_log(&log).unwrap().wait().unwrap().success();
    let after = roles.get(name).await.unwrap().rules;
    let printed = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(!ok, "the suite went on:\n{printed}");
    let said = format!("{fault}: finished, the lab restored; the suite stops");
    assert!(printed.contains(&said), "{said:?} in:\n{printed}");
    assert_eq!(after, before, "the Role is not as it was when e2e ended:\n{printed}");
    // lab.json names the controller the restore started.
    let lab = common::lab().await;
    assert!(lab.controller_running().await.unwrap(), "the lab's controller is not running");
    labkit::converge::wait_desired(&lab).await.unwrap();
}
