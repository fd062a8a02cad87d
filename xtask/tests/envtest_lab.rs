//! Tests of a running envtest lab (`cargo xtask test` makes one): the
//! workshop's narrated experiments, a short benchmark, and a lab made for
//! another ConfigMap.

mod common;

use common::{lab, run, succeeds, xtask};
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
    common::write_sample("exp-heal.zh-CN.txt", &told.stdout);
}

#[tokio::test]
#[serial]
async fn a_short_benchmark_with_every_peer_completes_and_writes_its_report() {
    let lab = lab().await;
    let name = lab.file().name.clone();
    let report = labkit::project::target_dir().join("bench/latest.json");
    let _ = std::fs::remove_file(&report);
    succeeds(&xtask(&[
        "bench",
        "--name",
        &name,
        "-n",
        "20",
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
    assert_eq!(json["floor"]["self_heal"]["n"], 20, "{text}");
    let subjects = json["subjects"].as_array().expect("subjects");
    let labels: Vec<&str> = subjects.iter().filter_map(|s| s["label"].as_str()).collect();
    let expected = ["my-controller (release)", "course-go", "controller-runtime", "kube-runtime"];
    assert_eq!(labels.len(), expected.len(), "{labels:?}");
    for (label, start) in labels.iter().zip(expected) {
        assert!(label.starts_with(start), "{labels:?}");
    }
    for s in subjects {
        for measure in ["self_heal", "correction"] {
            assert_eq!(s[measure]["n"], 20, "{}: {measure}", s["label"]);
        }
        assert_eq!(s["self_heal_with_unrelated"]["n"], 20, "{}", s["label"]);
        assert!(s["cost"]["with_unrelated"]["rss_kib"].as_u64() > Some(0), "{}", s["label"]);
    }
    // Every side's rounds cut into phases from the audit log.
    let phases = json["phases"].as_array().expect("phases");
    for side in std::iter::once("floor").chain(labels.iter().copied()) {
        for kind in ["self-heal", "correction"] {
            let row = phases.iter().find(|r| r["side"] == side && r["kind"] == kind);
            let rounds = row.and_then(|r| r["rounds"].as_u64()).unwrap_or(0);
            assert!(rounds >= 15, "{side} {kind}: {rounds} of 20 rounds cut into phases");
        }
    }
    // Nothing of the peers' is left, and the API server is on its own flags again.
    let crds: kube::Api<
        k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    > = kube::Api::all(lab.client());
    assert!(crds.get_opt("configmaptemplates.lab.my-controller.dev").await.unwrap().is_none());
    // The sides' Role and their own my-configs are gone from every namespace.
    let by_name =
        |name: &str| kube::api::ListParams::default().fields(&format!("metadata.name={name}"));
    let roles: kube::Api<k8s_openapi::api::rbac::v1::Role> = kube::Api::all(lab.client());
    let left = roles.list(&by_name(bench::namespaces::ROLE)).await.unwrap();
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
