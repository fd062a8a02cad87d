//! The cold build of a learner's fresh step-4 project, with the kit's
//! `workqueue` as it is and as it was at [`BEFORE`] (the last commit where it
//! inherited the workspace's dependencies: kube with `derive`, tokio with
//! `test-util`, `process`, `net`, …). The project is page 00's (its `cargo
//! new` and `cargo add` lines, resolved as a learner's are, from the
//! registry) with docs/en/04's `src/main.rs`; cold means an empty target
//! directory, the registry's cache warm (`cargo fetch` first, not timed).
//!
//! Checked: today's workqueue makes the project compile fewer crates, and
//! neither kube-derive nor schemars. The wall times are a run's, written (not
//! asserted) with E2E_WRITE_SAMPLES=1 to docs/samples/step4-cold-build.txt.
//! Minutes of CPU, so not part of `cargo maint test`; run it as
//! `E2E_WRITE_SAMPLES=1 cargo test -p xtask --test cold_build -- --nocapture`.

use std::{
    path::{Path, PathBuf},
    time::Instant,
};

use e2e::pages;
use labkit::{command::Cmd, project};

/// The kit before workqueue got its own minimal dependencies (issue 38).
const BEFORE: &str = "6255747107e5410e05cceeee345f606140b619d3";

/// Crates a fresh project has no use for, which the old workqueue brought in.
const UNNEEDED: [&str; 3] = ["kube-derive", "schemars", "schemars_derive"];

struct Build {
    crates: Vec<String>,
    /// Wall time.
    seconds: f64,
    /// CPU time of cargo and every compiler it ran: on a machine shared with
    /// other builds, the figure that says what the build costs.
    cpu_seconds: f64,
}

#[test]
fn a_fresh_step4_project_builds_without_the_workspaces_features() {
    // Outside the kit: a project inside its workspace would be taken for a member.
    let root = std::env::temp_dir().join("lab-kit-cold-build");
    let before_kit = root.join("kit-before");
    if !before_kit.join("workqueue/Cargo.toml").is_file() {
        std::fs::create_dir_all(&before_kit).unwrap();
        let archive = format!(
            "git -C {} archive {BEFORE} | tar -x -C {}",
            project::root().display(),
            before_kit.display()
        );
        Cmd::argv(["sh", "-c", archive.as_str()]).run().unwrap_or_else(|e| panic!("{e:#}"));
    }
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let before = cold_build(&root.join("before"), &before_kit);
    let now = cold_build(&root.join("now"), &project::root());
    let line = |what: &str, build: &Build| {
        let unneeded: Vec<&str> =
            UNNEEDED.iter().copied().filter(|c| build.crates.iter().any(|b| b == c)).collect();
        format!(
            "{what}: {} crates compiled, {:.0} s of CPU, {:.0} s wall; of {UNNEEDED:?}, \
             compiled: {unneeded:?}",
            build.crates.len(),
            build.cpu_seconds,
            build.seconds
        )
    };
    let head = Cmd::argv(["git", "-C", &project::root().display().to_string(), "rev-parse"])
        .args(["--short", "HEAD"])
        .read()
        .unwrap_or_default();
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let text = format!(
        "# the cold build of a fresh step-4 project: page 00's `cargo new` and `cargo add` lines \
         (resolved from the registry), docs/en/04-controller.md's src/main.rs, `cargo build` in \
         an empty target directory with the registry's cache warm; xtask/tests/cold_build.rs on a \
         {cores}-core machine shared with other builds (load average at the start: {})\n{}\n{}\n",
        load.split_whitespace().take(3).collect::<Vec<_>>().join(" "),
        line(&format!("workqueue as of {} (the workspace's dependencies)", &BEFORE[..7]), &before),
        line(&format!("workqueue as of {} (its own minimal dependencies)", head.trim()), &now),
    );
    eprint!("{text}");
    for crate_name in UNNEEDED {
        assert!(!now.crates.iter().any(|c| c == crate_name), "{crate_name} compiled:\n{text}");
    }
    assert!(now.crates.len() < before.crates.len(), "{text}");
    labkit::project::write_sample("step4-cold-build.txt", &text).unwrap();
    // Two debug builds of kube are gigabytes.
    for variant in ["before", "now"] {
        let _ = std::fs::remove_dir_all(root.join(variant).join("target"));
    }
}

/// Page 00's project in `parent` with the workqueue of `kit`, step 4's
/// code, then `cargo build` into an empty target directory: the crates it
/// compiled and how long it took.
fn cold_build(parent: &Path, kit: &Path) -> Build {
    let _ = std::fs::remove_dir_all(parent);
    std::fs::create_dir_all(parent).unwrap();
    let mut project = parent.to_path_buf();
    for command in pages::project_commands("en").unwrap() {
        let new = command.strip_prefix("cargo new ").map(str::trim);
        let dir = if new.is_some() { parent.to_path_buf() } else { project.clone() };
        learner(Cmd::argv(["sh", "-c", command.as_str()]), &dir, kit)
            .run()
            .unwrap_or_else(|e| panic!("{e:#}"));
        if let Some(new) = new {
            project = parent.join(new);
        }
    }
    std::fs::write(project.join("src/main.rs"), pages::main_rs("en", "04-controller.md").unwrap())
        .unwrap();
    learner(Cmd::argv(["cargo", "fetch"]), &project, kit).run().unwrap_or_else(|e| panic!("{e:#}"));
    let target: PathBuf = parent.join("target");
    let (started, cpu_before) = (Instant::now(), children_cpu_seconds());
    let out = learner(Cmd::argv(["cargo", "build"]), &project, kit)
        .env("CARGO_TARGET_DIR", target.display().to_string())
        .output()
        .unwrap_or_else(|e| panic!("{e:#}"));
    let seconds = started.elapsed().as_secs_f64();
    let cpu_seconds = children_cpu_seconds() - cpu_before;
    let printed = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "cargo build in {}:\n{printed}", project.display());
    let crates = printed
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("Compiling "))
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect();
    Build { crates, seconds, cpu_seconds }
}

/// User and system time of this process's waited-for children and theirs.
fn children_cpu_seconds() -> f64 {
    // SAFETY: getrusage fills the struct it is given.
    let usage = unsafe {
        let mut usage = std::mem::zeroed::<libc::rusage>();
        libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage);
        usage
    };
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

/// `cmd` in `dir` as a learner runs it: `KIT` set (page 00's `lab env`), none
/// of the kit's build settings.
fn learner(cmd: Cmd, dir: &Path, kit: &Path) -> Cmd {
    cmd.dir(dir)
        .env("KIT", kit.display().to_string())
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("CARGO_INCREMENTAL")
        .env_remove("CARGO_PROFILE_DEV_DEBUG")
        .env_remove("CARGO_BUILD_JOBS")
}
