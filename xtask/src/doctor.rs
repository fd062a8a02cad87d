//! `cargo xtask doctor`: is this laptop ready for the workshop? One line per
//! check (pass / WARN / FAIL), each non-pass with its fix; exit status 1 when
//! any check fails. It checks what the lab it would make needs: `--provider`
//! chosen as `lab up` chooses it (kind: Docker, kind, cgroups, inotify, an
//! existing cluster; envtest: kube-apiserver and etcd, or Go to build them), and
//! the network that lab fetches from ([`reachability`]: each source, and its mirror).
//! The checks themselves live in `preflight` as pure functions of what these
//! probes print.

mod reachability;

use std::net::{Ipv4Addr, TcpListener};
use std::process::ExitCode;

use anyhow::Result;

use crate::lab::{
    binaries,
    provider::{Machine, Provider, probe},
    providers,
};
use crate::mirrors::RegistryMirror;
use crate::output::{self, Format};
use crate::preflight::{self, Check, Status};
use labkit::{command::Cmd, project, tr};
use serde_json::json;

/// The controller's default `--listen` port, used when it runs by hand.
const CONTROLLER_PORT: u16 = 8080;

/// The JSON document's name and version (docs/output.md).
const SCHEMA: &str = "lab-kit/doctor/v1";

#[derive(clap::Args)]
#[command(mut_arg("provider", providers::choice))]
pub struct DoctorArgs {
    #[command(flatten)]
    lab: crate::lab::LabName,
    /// The lab to check the machine for, chosen as `lab up` chooses.
    #[arg(long, default_value = "auto")]
    provider: String,
    /// kind only: the node image `lab up` would run (`built`: built here), as `lab up`'s.
    #[arg(long, value_name = "IMAGE")]
    node_image: Option<String>,
    #[command(flatten)]
    mirror: RegistryMirror,
    #[command(flatten)]
    output: output::OutputArg,
}

pub fn run(args: DoctorArgs) -> Result<ExitCode> {
    let chosen = providers::resolve(&args.provider)?;
    let provider = chosen.name();
    let header = tr!(
        "checking this machine for the {provider} lab (`--provider` picks the other)",
        provider
    );
    let checks = gather(&args, chosen)?;
    let failed = count(&checks, Status::Fail);
    let warned = count(&checks, Status::Warn);
    match args.output.output {
        Format::Json => {
            labkit::progress!("{header}");
            output::print_json(&document(provider, &checks))?;
        }
        Format::Text => {
            println!("{header}");
            for check in &checks {
                println!("{check}");
            }
            let all = checks.len();
            println!(
                "{}",
                tr!("{all} checks: {failed} failed, {warned} warnings", all, failed, warned)
            );
            if failed == 0 && warned == 0 {
                println!("{}", tr!("ready: `cargo xtask lab up --provider {provider}`", provider));
            }
        }
    }
    Ok(if failed > 0 { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

fn count(checks: &[Check], status: Status) -> usize {
    checks.iter().filter(|c| c.status == status).count()
}

/// `doctor -o json`: docs/output.md.
fn document(provider: &str, checks: &[Check]) -> serde_json::Value {
    let (failed, warned) = (count(checks, Status::Fail), count(checks, Status::Warn));
    json!({
        "schema": SCHEMA,
        "provider": provider,
        "ready": failed == 0 && warned == 0,
        "failed": failed,
        "warnings": warned,
        "checks": checks,
    })
}

/// The checks for a lab of `provider`, from what it offers and its own checks.
pub(crate) fn gather(args: &DoctorArgs, provider: &dyn Provider) -> Result<Vec<Check>> {
    let offers = provider.offers();
    let machine = Machine {
        go: probe(&["go", "version"]),
        go_required: go_required()?,
        located: binaries::located()?,
    };
    let pinned = pinned_toolchain()?;
    let rustc = probe(&["rustc", "--version"]);
    // rustup fetches the pinned toolchain (it is not installed when rustc does not answer here).
    let toolchain_missing = rustc.is_none() && labkit::tools::on_path("rustup").is_some();
    let mut checks = vec![
        preflight::rustc(rustc.as_deref(), &pinned),
        preflight::c_compiler(probe(&["cc", "--version"]).as_deref()),
        preflight::git(probe(&["git", "--version"]).as_deref()),
        preflight::go(machine.go.as_deref(), machine.go_required),
    ];
    checks.extend(provider.machine_checks(&args.lab.name, &machine)?);
    // On a cluster of their own a learner types the course by hand: kubectl at every step, and a
    // project of their own built with rustup's default toolchain (outside the kit's folder,
    // which pins its own).
    if offers.own_cluster {
        checks.push(preflight::kubectl(
            labkit::tools::kubectl_client_minor(),
            controller::version::target_minor(),
        ));
        let outside = Cmd::argv(["rustc", "--version"]).dir(std::env::temp_dir()).read().ok();
        checks.push(preflight::learners_rustc(outside.as_deref(), workqueue::RUST_VERSION));
    }
    // Where the control plane is not this machine's the controller runs as an image built
    // here: on Linux outside the dev shell, a static binary (crate::image, `host`).
    let builds_static_binary = !offers.local_control_plane
        && cfg!(target_os = "linux")
        && std::env::var_os("LAB_KIT_NIX_SHELL").is_none();
    if builds_static_binary {
        let musl = crate::image::StaticTarget::detect()?.rustflags.is_none();
        checks.push(preflight::static_c_library(
            musl,
            probe(&["gcc", "-print-file-name=libc.a"]).as_deref(),
        ));
    }
    checks.extend([
        preflight::architecture(std::env::consts::ARCH),
        preflight::free_disk(free_bytes(&project::root())),
        preflight::port("controller port", CONTROLLER_PORT, port_taken(CONTROLLER_PORT)),
    ]);
    let envtest_missing = machine.located.iter().any(|(_, b)| b.is_none());
    checks.extend(reachability::checks(
        args,
        &offers,
        (&pinned, toolchain_missing),
        envtest_missing,
    ));
    Ok(checks)
}

/// The newest `go` line among the kit's Go modules (under xtask/, maint/ and
/// bench/peers/): the Go its builds ask for.
pub fn go_required() -> Result<(u32, u32)> {
    let mut newest = None;
    for dir in ["xtask", "maint", "bench/peers"] {
        for entry in walkdir::WalkDir::new(project::root().join(dir)).max_depth(3) {
            let entry = entry?;
            if entry.file_name() == "go.mod" {
                let text = std::fs::read_to_string(entry.path())?;
                let line = text.lines().find(|l| l.starts_with("go "));
                newest = newest.max(line.and_then(preflight::go_version));
            }
        }
    }
    newest.ok_or_else(|| anyhow::anyhow!(tr!("no go.mod with a `go` line in the kit's Go modules")))
}

/// The channel `rust-toolchain.toml` pins.
fn pinned_toolchain() -> Result<String> {
    let file: toml::Table = toml::from_str(&labkit::files::read_in_repo("rust-toolchain.toml")?)?;
    let channel = file.get("toolchain").and_then(|t| t.get("channel")?.as_str());
    Ok(channel.unwrap_or_default().to_string())
}

fn port_taken(port: u16) -> bool {
    TcpListener::bind((Ipv4Addr::UNSPECIFIED, port)).is_err()
}

/// Free bytes on the filesystem holding `path`.
fn free_bytes(path: &std::path::Path) -> Option<u64> {
    let stat = rustix::fs::statvfs(path).ok()?;
    Some(stat.f_bavail * stat.f_frsize)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn reads_the_pinned_toolchain() {
        assert_eq!(pinned_toolchain().unwrap(), "1.95.0");
    }

    /// The README's Go row says the version the kit's modules ask for.
    #[test]
    fn the_readme_names_the_go_the_modules_ask_for() {
        let (minor, patch) = go_required().unwrap();
        let readme = std::fs::read_to_string(project::root().join("README.md")).unwrap();
        let row = readme.lines().find(|l| l.starts_with("| Go ")).expect("a Go row");
        assert!(row.contains(&format!("1.{minor}.{patch} or newer")), "{row}");
    }

    /// Every prerequisite the README's table lists names the doctor checks
    /// that find it, and every check of a tool has its row.
    #[test]
    fn the_readme_prerequisites_are_doctor_checks() {
        let tools = [
            preflight::rustc(None, ""),
            preflight::c_compiler(None),
            preflight::git(None),
            preflight::go(None, (0, 0)),
            preflight::envtest_programs(&[("etcd", None)], None, (0, 0)),
            preflight::docker_daemon(Err("")),
            preflight::kind_version(None, &[]),
            preflight::static_c_library(false, None),
            preflight::kubectl(None, 0),
        ];
        let readme = std::fs::read_to_string(project::root().join("README.md")).unwrap();
        let section = readme.split("## Prerequisites").nth(1).unwrap().split("\n## ").next();
        let named: Vec<&str> = section
            .unwrap()
            .lines()
            .filter(|l| l.starts_with("| ") && l.split(" | ").count() == 4)
            .skip(1)
            .filter_map(|l| l.trim_end_matches(" |").rsplit(" | ").next())
            .flat_map(|cell| cell.split(", "))
            .collect();
        for check in &tools {
            assert!(named.contains(&check.name), "no README prerequisite names {}", check.name);
        }
        for name in named {
            assert!(
                tools.iter().any(|c| c.name == name),
                "README names a check doctor lacks: {name}"
            );
        }
    }

    #[test]
    fn the_json_document_has_the_documented_fields() {
        let checks = [
            Check::pass("rustc", "1.95.0"),
            Check::warn("free disk", "9 GB", "free some space"),
            Check::fail("go", "not found", "install Go"),
        ];
        let document = document("envtest", &checks);
        labkit::json_doc::assert_documented(&document);
        assert_eq!(document["schema"], SCHEMA);
        assert_eq!(
            (document["failed"].as_u64(), document["warnings"].as_u64()),
            (Some(1), Some(1))
        );
        assert_eq!(document["checks"][2]["status"], "fail");
        assert_eq!(document["ready"], false);
    }

    /// xtask/doctor-tools.toml names exactly the programs these checks run: flake.nix
    /// reads it to give the dev shell each one (checks.<system>.devshell-tools).
    #[test]
    fn the_tool_list_is_what_doctor_runs() {
        let list: toml::Table = toml::from_str(include_str!("../doctor-tools.toml")).unwrap();
        let listed: BTreeSet<String> =
            list["programs"].as_table().unwrap().keys().cloned().collect();
        // By name: each argument list's first word here and in kubectl's probe (labkit);
        // kube-apiserver and etcd by path, found as lab::binaries finds them.
        let quote = '"';
        let openings = [format!("&[{quote}"), format!("argv([{quote}")];
        // The providers' checks: their functions only.
        let function = |source: &'static str, name: &str| -> &'static str {
            let from = source.split(name).nth(1).unwrap_or_default();
            from.split("\n    }\n").next().unwrap_or_default().split("\n}\n").next().unwrap()
        };
        let sources = [
            include_str!("doctor.rs"),
            include_str!("doctor/reachability.rs"),
            include_str!("../../labkit/src/tools.rs"),
            include_str!("lab/provider.rs"),
            function(include_str!("lab/kind/mod.rs"), "fn machine_checks"),
            function(include_str!("lab/envtest/mod.rs"), "fn machine_checks"),
            function(include_str!("lab/existing/mod.rs"), "fn machine_checks"),
        ];
        let mut run: BTreeSet<String> = sources
            .iter()
            .map(|s| s.split("#[cfg(test)]").next().unwrap_or_default())
            .flat_map(|s| openings.iter().flat_map(move |o| s.split(o.as_str()).skip(1)))
            .filter_map(|rest| rest.split_once(quote).map(|(word, _)| word.to_string()))
            .collect();
        run.extend(binaries::located().unwrap().into_iter().map(|(name, _)| name.to_string()));
        assert_eq!(run, listed, "the programs doctor runs, and xtask/doctor-tools.toml's");
    }

    #[test]
    fn probes_answer_on_this_machine() {
        assert!(free_bytes(&project::root()).is_some_and(|b| b > 0));
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let port = listener.local_addr().unwrap().port();
        // Bound on loopback only; the check binds the wildcard address, which conflicts.
        assert!(port_taken(port));
    }
}
