//! Bad input to the `my-controller` binary (flags, `RUST_LOG`, kubeconfig,
//! desired data): one line naming the problem, exit
//! status 2, no panic — and no request, since it fails before connecting
//! (the kubeconfig used points at a port nothing listens on).

mod common;

use common::unreachable_kubeconfig;
use std::{path::PathBuf, process::Command};

fn scratch() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("bad-input-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs the binary and returns its stderr, checking the bad-input contract.
fn refused(args: &[&str]) -> String {
    refused_with(args, &[])
}

/// [`refused`] with extra environment.
fn refused_with(args: &[&str], env: &[(&str, &str)]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_my-controller"))
        .args(args)
        .env_remove("KUBECONFIG")
        .env_remove("RUST_LOG")
        .envs(env.iter().copied())
        .output()
        .expect("the binary runs");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{args:?}: exit {:?}, stderr {stderr}", out.status);
    assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: not one line:\n{stderr}");
    assert!(!stderr.contains("panicked"), "{args:?} panicked: {stderr}");
    assert!(out.stdout.is_empty(), "{args:?} printed to stdout");
    stderr
}

#[test]
fn an_invalid_rust_log() {
    let dir = scratch();
    let kubeconfig = unreachable_kubeconfig(&dir);
    let kubeconfig = kubeconfig.to_str().unwrap();
    let stderr = refused_with(&["--kubeconfig", kubeconfig], &[("RUST_LOG", "info,kube=deebug")]);
    assert!(stderr.contains("RUST_LOG") && stderr.contains("not a log filter"), "{stderr}");
}

#[test]
fn unknown_flag() {
    assert!(refused(&["--frobnicate"]).contains("--frobnicate"));
}

#[test]
fn invalid_namespace_and_name() {
    assert!(refused(&["--namespace", "Not_A_Label"]).contains("invalid namespace"));
    assert!(refused(&["--name", "no/slashes"]).contains("invalid ConfigMap name"));
}

#[test]
fn missing_and_garbled_kubeconfig() {
    let dir = scratch();
    let missing = dir.join("nope");
    assert!(
        refused(&["--kubeconfig", missing.to_str().unwrap()]).contains("cannot use kubeconfig")
    );
    let garbled = dir.join("garbled");
    std::fs::write(&garbled, "clusters: [unclosed\n").unwrap();
    assert!(refused(&["--kubeconfig", garbled.to_str().unwrap()]).contains("garbled"));
}

#[test]
fn malformed_and_oversized_data_files() {
    let dir = scratch();
    let kubeconfig = unreachable_kubeconfig(&dir);
    let kc = kubeconfig.to_str().unwrap();
    let malformed = dir.join("malformed.yaml");
    std::fs::write(&malformed, "app.conf: [1, 2\n").unwrap();
    let msg = refused(&["--kubeconfig", kc, "--data-file", malformed.to_str().unwrap()]);
    assert!(msg.contains("malformed.yaml") && msg.contains("not valid YAML"), "{msg}");

    let big = dir.join("big.json");
    std::fs::write(&big, format!("{{\"k\": \"{}\"}}", "x".repeat(1024 * 1024))).unwrap();
    let msg = refused(&["--kubeconfig", kc, "--data-file", big.to_str().unwrap()]);
    assert!(msg.contains("1 MiB"), "{msg}");

    let msg = refused(&["--kubeconfig", kc, "--data", "no-equals-sign"]);
    assert!(msg.contains("expected key=value"), "{msg}");
}

#[test]
fn version_names_the_kubernetes_target() {
    let out = Command::new(env!("CARGO_BIN_EXE_my-controller")).arg("--version").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let expected = format!("built for Kubernetes {}", controller::version::target());
    assert!(text.contains(&expected), "{text}");
}
