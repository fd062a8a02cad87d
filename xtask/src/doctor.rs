//! `cargo xtask doctor`: is this laptop ready for the workshop? One line per
//! check (pass / WARN / FAIL), each non-pass with its fix; exit status 1 when
//! any check fails. It checks what the lab it would make needs: `--provider`
//! chosen as `lab up` chooses it (kind: Docker, kind, cgroups, inotify, an
//! existing cluster; envtest: kube-apiserver and etcd, or Go to build them).
//! The checks themselves live in `preflight` as pure functions of what these
//! probes print.

use std::net::{Ipv4Addr, TcpListener};
use std::process::ExitCode;

use anyhow::Result;

use crate::lab::{
    binaries,
    provider::{self, ProviderChoice},
};
use crate::preflight::{self, Check, Status};
use labkit::lab_file::ProviderKind;
use labkit::{
    command::{Cmd, is_not_found},
    project,
};

/// The controller's default `--listen` port, used when it runs by hand.
const CONTROLLER_PORT: u16 = 8080;

pub fn run(name: &str, choice: ProviderChoice) -> Result<ExitCode> {
    let provider = provider::resolve(choice)?;
    println!("checking this machine for the {provider} lab (`--provider` picks the other)");
    let checks = gather(name, provider)?;
    for check in &checks {
        println!("{check}");
    }
    let failed = checks.iter().filter(|c| c.status == Status::Fail).count();
    let warned = checks.iter().filter(|c| c.status == Status::Warn).count();
    println!("{} checks: {failed} failed, {warned} warnings", checks.len());
    if failed == 0 && warned == 0 {
        println!("ready: `cargo xtask lab up --provider {provider}`");
    }
    Ok(if failed > 0 { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

fn gather(name: &str, provider: ProviderKind) -> Result<Vec<Check>> {
    // Each check's command is echoed like any other; its failure is the
    // check's finding, not an error.
    let quiet = |argv: &[&str]| Cmd::argv(argv).read().ok();
    let mut checks = vec![
        preflight::rustc(quiet(&["rustc", "--version"]).as_deref(), &pinned_toolchain()?),
        preflight::kubectl(
            e2e::experiments::kubectl_client_minor(),
            controller::version::target_minor(),
        ),
    ];
    match provider {
        ProviderKind::Kind => checks.extend(kind_checks(name, &quiet)?),
        // The image is built and pushed here; the cluster is someone else's.
        ProviderKind::Existing => checks
            .push(preflight::docker_daemon(docker_version().as_deref().map_err(String::as_str))),
        ProviderKind::Envtest => {
            let located: Vec<(&str, Option<String>)> = binaries::located()?
                .into_iter()
                .map(|(n, b)| (n, b.map(|b| format!("{} from {}", b.version, b.source))))
                .collect();
            checks
                .push(preflight::envtest_programs(&located, quiet(&["go", "version"]).as_deref()));
        }
    }
    checks.extend([
        preflight::architecture(std::env::consts::ARCH),
        preflight::free_disk(free_bytes(&project::root())),
        preflight::port("controller port", CONTROLLER_PORT, port_taken(CONTROLLER_PORT)),
    ]);
    Ok(checks)
}

/// The Docker daemon's version, or why there is none.
fn docker_version() -> std::result::Result<String, String> {
    match Cmd::argv(["docker", "info", "--format", "{{.ServerVersion}}"]).read() {
        Ok(v) => Ok(v),
        Err(e) if is_not_found(&e) => Err("docker: command not found".to_string()),
        Err(_) => Err("Cannot connect to the Docker daemon (`docker info` failed)".to_string()),
    }
}

/// What a kind lab needs of the machine.
fn kind_checks(name: &str, quiet: &dyn Fn(&[&str]) -> Option<String>) -> Result<Vec<Check>> {
    let table = labkit::kind_releases::table()?;
    let docker = docker_version();
    let mut checks = vec![
        preflight::kind_version(quiet(&["kind", "version"]).as_deref(), &table),
        preflight::docker_daemon(docker.as_deref().map_err(String::as_str)),
    ];
    if docker.is_ok() {
        let store =
            quiet(&["docker", "info", "--format", "{{json .DriverStatus}}"]).unwrap_or_default();
        checks.push(preflight::image_store(&store));
    }
    checks.extend([
        preflight::inotify(
            labkit::files::read_number("/proc/sys/fs/inotify/max_user_watches"),
            labkit::files::read_number("/proc/sys/fs/inotify/max_user_instances"),
        ),
        preflight::cgroups(
            docker
                .is_ok()
                .then(|| quiet(&["docker", "info", "--format", "{{.CgroupVersion}}"]))
                .flatten()
                .as_deref(),
        ),
        preflight::existing_cluster(&quiet(&["kind", "get", "clusters"]).unwrap_or_default(), name),
    ]);
    Ok(checks)
}

/// The channel `rust-toolchain.toml` pins.
fn pinned_toolchain() -> Result<String> {
    let text = std::fs::read_to_string(project::root().join("rust-toolchain.toml"))?;
    Ok(text
        .lines()
        .find_map(|l| l.trim().strip_prefix("channel"))
        .map(|v| v.trim_start_matches([' ', '=']).trim().trim_matches('"').to_string())
        .unwrap_or_default())
}

fn port_taken(port: u16) -> bool {
    TcpListener::bind((Ipv4Addr::UNSPECIFIED, port)).is_err()
}

/// Free bytes on the filesystem holding `path` (statvfs).
fn free_bytes(path: &std::path::Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: c_path is NUL-terminated and stat is a valid out-pointer.
    if unsafe { libc::statvfs(c_path.as_ptr(), &mut stat) } != 0 {
        return None;
    }
    Some(stat.f_bavail as u64 * stat.f_frsize as u64)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn reads_the_pinned_toolchain() {
        assert_eq!(pinned_toolchain().unwrap(), "1.95.0");
    }

    /// xtask/doctor-tools.toml names exactly the programs these checks run: flake.nix
    /// reads it to give the dev shell each one (checks.<system>.devshell-tools).
    #[test]
    fn the_tool_list_is_what_doctor_runs() {
        let list: toml::Table = toml::from_str(include_str!("../doctor-tools.toml")).unwrap();
        let listed: BTreeSet<String> =
            list["programs"].as_table().unwrap().keys().cloned().collect();
        // By name: each argument list's first word here and in kubectl's probe (e2e);
        // kube-apiserver and etcd by path, found as lab::binaries finds them.
        let quote = '"';
        let openings = [format!("&[{quote}"), format!("argv([{quote}")];
        let sources =
            [include_str!("doctor.rs"), include_str!("../../e2e/src/experiments/version_check.rs")];
        let mut run: BTreeSet<String> = sources
            .iter()
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
