//! What the lab tests share: the lab under test, and `cargo xtask` run as a
//! person runs it.

#![allow(dead_code)] // Each test file uses its own part.

use std::{
    path::Path,
    process::{Child, ExitStatus},
    time::Duration,
};

use labkit::lab::Lab;

pub mod browser;
/// A cluster's objects, to compare before and after (maint's, whose room test uses it too).
#[path = "../../../maint/src/cluster.rs"]
pub mod cluster;

use labkit::{
    command::{Cmd, cargo},
    eventually::{Check, eventually},
};

/// The lab under test: `$LAB_NAME` (`cargo maint test` sets it). No lab,
/// no test: it fails.
pub async fn lab() -> Lab {
    Lab::find().await.unwrap_or_else(|e| panic!("these tests need a running lab: {e:#}"))
}

/// `cargo xtask ARGS`.
pub fn xtask(args: &[&str]) -> Cmd {
    cargo(["xtask"]).args(args)
}

/// `cargo maint ARGS`: the maintainers' verbs (`bench`).
pub fn maint(args: &[&str]) -> Cmd {
    cargo(["maint"]).args(args)
}

/// The kit's command for `args`, whichever binary holds its verb.
pub fn kit(args: &[&str]) -> Cmd {
    match args.first() {
        Some(&"bench" | &"test" | &"pictures") => maint(args),
        _ => xtask(args),
    }
}

/// [`labkit::project::write_sample`], failing the test when it cannot write.
pub fn write_sample(name: &str, text: &str) {
    labkit::project::write_sample(name, text).unwrap_or_else(|e| panic!("{e:#}"));
}

/// What `cargo xtask` printed, without cargo's own lines (`Compiling`,
/// `Finished`, `Running`, `Blocking`): what a person reads of the verb.
pub fn without_cargo(text: &str) -> String {
    const CARGO: [&str; 4] = ["Compiling ", "Finished ", "Running ", "Blocking "];
    text.lines()
        .filter(|l| !CARGO.iter().any(|c| l.trim_start().starts_with(c)))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// `text`, what a verb run with `--lang zh` printed, holds no English
/// sentence ([`labkit::english::english_in`]): the narration's "by hand"
/// commands, the experiments' names, command lines, the program's own lines
/// and identifiers aside.
pub fn assert_chinese(verb: &str, text: &str) {
    let narration: toml::Value = toml::from_str(include_str!("../../exp/zh-CN.toml")).unwrap();
    let by_hand = narration["labels"]["by_hand"].as_str().expect("[labels] by_hand");
    let experiments = narration["experiment"].as_array().expect("[[experiment]]");
    let names: Vec<&str> = experiments.iter().filter_map(|e| e["short"].as_str()).collect();
    let allowed = labkit::english::Allowed { commands_after: &[by_hand], names: &names };
    let english = labkit::english::english_in(text, allowed);
    assert!(
        english.is_empty(),
        "`{verb}` in Chinese printed English:\n{}\n\nall of it:\n{text}",
        english.join("\n")
    );
}

/// What a command printed, and whether it succeeded.
pub struct Ran {
    pub ok: bool,
    pub stdout: String,
    pub stderr: String,
}

pub fn run(cmd: &Cmd) -> Ran {
    let out = cmd.output().unwrap_or_else(|e| panic!("cannot run `{cmd}`: {e:#}"));
    Ran {
        ok: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Runs `cmd` with the terminal's output; panics unless it succeeds.
pub fn succeeds(cmd: &Cmd) {
    cmd.run().unwrap_or_else(|e| panic!("{e:#}"));
}

/// The ConfigMap the other-target tests make a lab for: not the default
/// namespace, not the default name.
pub const OTHER_TARGET: &str = "lab-target/other-config";

/// `lab up --target OTHER_TARGET` (`up` is the lab's own `lab up`): the Role
/// is made for exactly that one, and the controller keeps it; then the lab
/// is put back on the default ConfigMap.
pub fn another_target(up: &[&str]) {
    succeeds(&xtask(up).args(["--target", OTHER_TARGET]));
    let name = std::env::var(labkit::lab::NAME_ENV).unwrap_or(labkit::lab::DEFAULT_NAME.into());
    for experiment in ["rbac", "create", "heal"] {
        succeeds(&xtask(&["e2e", "--exp", experiment, "--name", &name]));
    }
    succeeds(&xtask(up));
}

/// SIGINT to `target` (a pid, or a process group as its negative), as a
/// terminal's Ctrl-C; then waits (2 min at most) for `child` to exit and
/// returns how it exited and what it printed to `log`.
pub async fn interrupt(child: &mut Child, target: libc::pid_t, log: &Path) -> (ExitStatus, String) {
    // SAFETY: kill with a pid or group the test started.
    unsafe { libc::kill(target, libc::SIGINT) };
    let status = eventually("it to exit", Duration::from_secs(120), || {
        let status = child.try_wait().unwrap();
        async move { Ok(status.map_or(Check::NotYet("running".into()), Check::Done)) }
    })
    .await
    .unwrap();
    (status, std::fs::read_to_string(log).unwrap_or_default())
}

/// The names of the ConfigMaps, Roles and RoleBindings in the namespace of
/// `lab`'s my-config, as the lab's admin sees them.
pub async fn objects_in_namespace(lab: &Lab) -> Vec<String> {
    use k8s_openapi::api::{
        core::v1::ConfigMap,
        rbac::v1::{Role, RoleBinding},
    };
    use kube::{Api, api::ListParams};
    let (client, namespace, list) =
        (lab.client(), lab.desired().namespace(), ListParams::default());
    let mut names = Vec::new();
    for cm in Api::<ConfigMap>::namespaced(client.clone(), namespace).list(&list).await.unwrap() {
        names.push(format!("ConfigMap {}", cm.metadata.name.unwrap_or_default()));
    }
    for role in Api::<Role>::namespaced(client.clone(), namespace).list(&list).await.unwrap() {
        names.push(format!("Role {}", role.metadata.name.unwrap_or_default()));
    }
    for binding in Api::<RoleBinding>::namespaced(client, namespace).list(&list).await.unwrap() {
        names.push(format!("RoleBinding {}", binding.metadata.name.unwrap_or_default()));
    }
    names.sort();
    names
}

/// A short `cargo maint bench` on `lab` whose controller is a Deployment,
/// with `peers` (`--peer …` flags) and its report in a folder of its own:
/// my-controller's and each peer's rounds all measured, the namespace's
/// ConfigMaps, Roles and RoleBindings as before, the Deployment back and
/// keeping my-config.
pub async fn short_bench_on_a_deployment(lab: &Lab, peers: &[&str], labels: &[&str]) {
    let before = objects_in_namespace(lab).await;
    let name = lab.file().name.clone();
    let out = labkit::project::target_dir().join("bench-tests").join(&name);
    let _ = std::fs::remove_dir_all(&out);
    let short = ["--rounds", "6", "--steady", "2s", "--burst", "5", "--unrelated", "30"];
    let bench = maint(&["bench", "--name", &name]).args(peers).arg("--out").path(&out);
    succeeds(&bench.args(short));
    let text = std::fs::read_to_string(out.join("latest.json")).expect("latest.json");
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(json["floor"]["self_heal"]["n"], 6, "{text}");
    let subjects = json["subjects"].as_array().expect("subjects");
    let measured: Vec<&str> = subjects.iter().filter_map(|s| s["label"].as_str()).collect();
    assert_eq!(measured.len(), labels.len(), "{measured:?}");
    for (label, start) in measured.iter().zip(labels) {
        assert!(label.starts_with(start), "{measured:?}");
    }
    for s in subjects {
        assert_eq!(s["self_heal"]["n"], 6, "{}", s["label"]);
        assert_eq!(s["correction"]["n"], 6, "{}", s["label"]);
    }
    let namespace = lab.desired().namespace();
    assert_eq!(objects_in_namespace(lab).await, before, "the bench left objects in {namespace}");
    assert!(lab.controller_running().await.unwrap(), "the lab's controller is not back");
    let config_maps = lab.config_maps();
    config_maps.delete(lab.desired().name(), &Default::default()).await.unwrap();
    labkit::converge::wait_desired(lab).await.unwrap();
}

/// The lines of a plan: `$ command` and `# what xtask does`, as `--dry-run`
/// prints them and as a run announces each step it carries out.
pub fn plan_lines(text: &str) -> Vec<String> {
    let step = |l: &&str| l.starts_with("$ ") || l.starts_with("# ");
    text.lines().filter(step).map(String::from).collect()
}

/// `lab down --dry-run --name NAME` prints the plan that `lab down --name
/// NAME`, run next, carries out step by step; the lab's folder is gone after.
pub fn lab_down_runs_what_its_dry_run_prints(name: &str) {
    let planned = run(&xtask(&["lab", "down", "--dry-run", "--name", name]));
    assert!(planned.ok && !planned.stdout.is_empty(), "{}{}", planned.stdout, planned.stderr);
    let done = run(&xtask(&["lab", "down", "--name", name]));
    assert!(done.ok, "lab down:\n{}", done.stderr);
    assert_eq!(
        plan_lines(&done.stderr),
        plan_lines(&planned.stdout),
        "what ran is not what --dry-run printed:\n{}",
        done.stderr
    );
    assert!(!labkit::project::lab_dir(name).exists(), "lab down left its folder");
}

/// The processes whose command line names `dir` (a lab's folder).
pub fn processes_naming(dir: &Path) -> Vec<String> {
    let dir = dir.display().to_string();
    let entries = std::fs::read_dir("/proc").unwrap().flatten();
    let lines = entries.filter_map(|e| std::fs::read(e.path().join("cmdline")).ok());
    let lines = lines.map(|l| String::from_utf8_lossy(&l).replace('\0', " "));
    lines.filter(|l| l.contains(&dir)).collect()
}

/// The pid of the command that holds the lock of the lab or room in `dir`, once
/// it has stopped itself at a test hook (`PHASE=SIGSTOP`); `SIGCONT` lets it go on.
pub async fn stopped_holder(dir: &std::path::Path) -> u32 {
    let lock = labkit::lock::path_of(dir);
    let what = "the command to stop at its hook, holding the lock";
    let within = std::time::Duration::from_secs(600);
    labkit::eventually::eventually(what, within, || {
        let lock = lock.clone();
        async move {
            let text = std::fs::read_to_string(&lock).unwrap_or_default();
            let pid: Option<u32> = text.split('\t').next().and_then(|p| p.trim().parse().ok());
            let stopped = |&pid: &u32| {
                labkit::process::is_alive(pid) && labkit::process::stopped_or_gone(pid)
            };
            Ok(match pid.filter(stopped) {
                Some(pid) => labkit::eventually::Check::Done(pid),
                None => labkit::eventually::Check::NotYet(format!("{}: {text:?}", lock.display())),
            })
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e:#}"))
}

/// Lets a command stopped at a test hook go on.
pub fn go_on(pid: u32) {
    // SAFETY: kill(2) with SIGCONT to the process the lock names; no memory is involved.
    unsafe { libc::kill(pid as libc::pid_t, libc::SIGCONT) };
}
