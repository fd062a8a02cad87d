//! The envtest provider's two programs, kube-apiserver and etcd: found, or built with Go.
//!
//! Search order, for each program on its own:
//! 1. `KUBE_APISERVER` / `ETCD`: an explicit path (an error when it does not exist);
//! 2. `KUBEBUILDER_ASSETS`: a directory holding both (what `setup-envtest` prints);
//! 3. `PATH`;
//! 4. the project cache `target/envtest/<kubernetes>/kube-apiserver` and
//!    `target/envtest/<kubernetes>/etcd-<etcd>/etcd`, keyed by the versions the Go modules pin;
//! 5. a `go build` of the modules in `xtask/envtest/`, written into that cache.
//!
//! The versions are read from the go.mod files, so they are written down once.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use xshell::{Shell, cmd};

use crate::cmdline;
use e2e::process;
use e2e::project;

/// The Go modules that pin both programs; included so the versions cannot drift from them.
const KUBE_APISERVER_GO_MOD: &str = include_str!("../../envtest/kube-apiserver/go.mod");
const ETCD_GO_MOD: &str = include_str!("../../envtest/etcd/go.mod");
/// The module whose version is the Kubernetes version, and the package that is kube-apiserver.
const KUBERNETES_MODULE: &str = "k8s.io/kubernetes";
const KUBE_APISERVER_PACKAGE: &str = "k8s.io/kubernetes/cmd/kube-apiserver";
const ETCD_MODULE: &str = "go.etcd.io/etcd/server/v3";

/// The versions the Go modules pin, e.g. `v1.36.3` and `v3.6.16`.
#[derive(Clone, Debug)]
pub struct Pins {
    pub kubernetes: String,
    pub etcd: String,
}

impl Pins {
    pub fn from_go_mods() -> Result<Pins> {
        Ok(Pins {
            kubernetes: required_version(KUBE_APISERVER_GO_MOD, KUBERNETES_MODULE)
                .context("xtask/envtest/kube-apiserver/go.mod")?,
            etcd: required_version(ETCD_GO_MOD, ETCD_MODULE)
                .context("xtask/envtest/etcd/go.mod")?,
        })
    }

    /// `v1.36.3` → `v1.36.`: any patch release of the pinned minor is fine to use.
    fn kubernetes_minor_prefix(&self) -> String {
        minor_prefix(&self.kubernetes)
    }

    fn cache_dir(&self) -> PathBuf {
        project::target_dir().join("envtest").join(&self.kubernetes)
    }
}

/// Where a program was found; shown to the person and recorded in lab.json.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    Env(&'static str),
    KubebuilderAssets,
    Path,
    Cache,
    Built,
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Env(var) => write!(f, "${var}"),
            Source::KubebuilderAssets => write!(f, "$KUBEBUILDER_ASSETS"),
            Source::Path => write!(f, "PATH"),
            Source::Cache => write!(f, "project cache"),
            Source::Built => write!(f, "built with go"),
        }
    }
}

/// One program, ready to run.
#[derive(Clone, Debug)]
pub struct Binary {
    pub path: PathBuf,
    /// As the program reports it (`--version`), e.g. `v1.36.3` or `3.6.16`.
    pub version: String,
    pub source: Source,
}

#[derive(Clone, Debug)]
pub struct EnvtestBinaries {
    pub kube_apiserver: Binary,
    pub etcd: Binary,
}

/// Find both programs (building what is missing); see the module docs for the order.
pub async fn find(sh: &Shell) -> Result<EnvtestBinaries> {
    let pins = Pins::from_go_mods()?;
    let kube_apiserver = find_one(sh, &Program::kube_apiserver(&pins)).await?;
    let etcd = find_one(sh, &Program::etcd(&pins)).await?;
    Ok(EnvtestBinaries {
        kube_apiserver,
        etcd,
    })
}

/// What differs between the two programs.
struct Program {
    name: &'static str,
    env: &'static str,
    /// The version the pinned module builds, as the program prints it.
    pinned_version: String,
    /// A version starting with this is close enough not to warn about.
    accepted_prefix: String,
    cache_path: PathBuf,
    go_module_dir: PathBuf,
    /// `go build` arguments after `-o OUT`.
    go_package: &'static str,
    ldflags: String,
}

impl Program {
    fn kube_apiserver(pins: &Pins) -> Program {
        let minor = pins
            .kubernetes_minor_prefix()
            .trim_start_matches("v1.")
            .trim_end_matches('.')
            .to_string();
        Program {
            name: "kube-apiserver",
            env: "KUBE_APISERVER",
            pinned_version: pins.kubernetes.clone(),
            accepted_prefix: pins.kubernetes_minor_prefix(),
            cache_path: pins.cache_dir().join("kube-apiserver"),
            go_module_dir: project::root().join("xtask/envtest/kube-apiserver"),
            go_package: KUBE_APISERVER_PACKAGE,
            // Built from a module, kube-apiserver does not know its version: stamp it, or
            // `/version` says v0.0.0 and clients warn about skew.
            ldflags: format!(
                "-s -w -X k8s.io/component-base/version.gitVersion={} \
                 -X k8s.io/component-base/version.gitMajor=1 \
                 -X k8s.io/component-base/version.gitMinor={minor}",
                pins.kubernetes
            ),
        }
    }

    fn etcd(pins: &Pins) -> Program {
        Program {
            name: "etcd",
            env: "ETCD",
            // etcd prints its version without the module's `v`.
            pinned_version: pins.etcd.trim_start_matches('v').to_string(),
            accepted_prefix: minor_prefix(&pins.etcd).trim_start_matches('v').to_string(),
            cache_path: pins
                .cache_dir()
                .join(format!("etcd-{}", pins.etcd))
                .join("etcd"),
            go_module_dir: project::root().join("xtask/envtest/etcd"),
            go_package: ".",
            ldflags: "-s -w".to_string(),
        }
    }

    /// `kube-apiserver --version` → `Kubernetes v1.36.3`; `etcd --version` → `etcd Version: 3.6.16`.
    fn version_of(&self, sh: &Shell, path: &Path) -> Result<String> {
        let output = cmdline::read(&cmd!(sh, "{path} --version"))
            .with_context(|| format!("`{} --version` failed", path.display()))?;
        let version = match self.name {
            "kube-apiserver" => output
                .split_whitespace()
                .find(|word| word.starts_with('v'))
                .map(str::to_string),
            _ => output
                .lines()
                .find_map(|line| line.strip_prefix("etcd Version:"))
                .map(|version| version.trim().to_string()),
        };
        version.ok_or_else(|| {
            anyhow!(
                "`{} --version` printed no version: {output:?}",
                path.display()
            )
        })
    }
}

async fn find_one(sh: &Shell, program: &Program) -> Result<Binary> {
    // 1. An explicit path: the person asked for this one, so a wrong path is an error.
    if let Some(path) = env_path(program.env) {
        if !path.is_file() {
            bail!(
                "{}={} does not exist (unset it to let xtask look elsewhere)",
                program.env,
                path.display()
            );
        }
        return checked(sh, program, path, Source::Env(program.env));
    }
    // 2. A kubebuilder-style assets directory.
    if let Some(dir) = env_path("KUBEBUILDER_ASSETS") {
        let path = dir.join(program.name);
        if path.is_file() {
            return checked(sh, program, path, Source::KubebuilderAssets);
        }
        eprintln!(
            "note: KUBEBUILDER_ASSETS={} has no {}; looking further",
            dir.display(),
            program.name
        );
    }
    // 3. PATH. A program there that does not even run is skipped, not fatal.
    if let Some(path) = on_path(program.name) {
        match checked(sh, program, path.clone(), Source::Path) {
            Ok(binary) => return Ok(binary),
            Err(error) => eprintln!("warning: skipping {}: {error:#}", path.display()),
        }
    }
    // 4. The project cache: only complete builds are ever renamed into it.
    if program.cache_path.is_file() {
        return checked(sh, program, program.cache_path.clone(), Source::Cache);
    }
    // 5. Build it.
    if on_path("go").is_some() {
        build(sh, program).await?;
        return checked(sh, program, program.cache_path.clone(), Source::Built);
    }
    Err(anyhow!(
        "{name} {version} not found. Any one of these provides it:\n  \
         - {env}=/path/to/{name}\n  \
         - KUBEBUILDER_ASSETS=/dir/with/kube-apiserver/and/etcd (what setup-envtest prints)\n  \
         - {name} on PATH\n  \
         - a copy at {cache}\n  \
         - Go (see xtask/envtest/{name}/go.mod for the version) on PATH: xtask then builds it into the cache\n  \
         Downloading the official release binaries is not possible from here: this machine reaches package registries only.",
        name = program.name,
        version = program.pinned_version,
        env = program.env,
        cache = program.cache_path.display(),
    ))
}

/// Run `--version`, warn when it is not the pinned minor.
fn checked(sh: &Shell, program: &Program, path: PathBuf, source: Source) -> Result<Binary> {
    let path = std::path::absolute(&path).unwrap_or(path);
    let version = program.version_of(sh, &path)?;
    if !version.starts_with(&program.accepted_prefix) {
        eprintln!(
            "warning: {} ({source}) is {version}; this kit pins {} ({}*)",
            path.display(),
            program.pinned_version,
            program.accepted_prefix
        );
    }
    Ok(Binary {
        path,
        version,
        source,
    })
}

/// `go build` into a temporary file next to the cache entry, renamed when complete: an
/// interrupted build never looks like a cached one.
async fn build(sh: &Shell, program: &Program) -> Result<()> {
    let cache_dir = program
        .cache_path
        .parent()
        .context("cache path has no parent")?;
    std::fs::create_dir_all(cache_dir)
        .with_context(|| format!("cannot create {}", cache_dir.display()))?;
    remove_abandoned_partials(cache_dir, program.name);
    let partial = cache_dir.join(format!(".{}.partial-{}", program.name, std::process::id()));
    let ldflags = &program.ldflags;
    let package = program.go_package;
    let _dir = sh.push_dir(&program.go_module_dir);
    let build = cmd!(
        sh,
        "go build -trimpath -ldflags {ldflags} -o {partial} {package}"
    );
    eprintln!(
        "{} {} is not available: building it with Go{}",
        program.name,
        program.pinned_version,
        if program.name == "kube-apiserver" {
            " (the first build takes many minutes on a small machine)"
        } else {
            ""
        }
    );
    cmdline::echo_in(&program.go_module_dir, &build);
    let start = Instant::now();
    let mut child = tokio::process::Command::from(std::process::Command::from(build))
        .kill_on_drop(true)
        .spawn()
        .context("cannot start go")?;
    let mut heartbeat = tokio::time::interval(Duration::from_secs(30));
    heartbeat.tick().await;
    let status = loop {
        tokio::select! {
            status = child.wait() => break status.context("waiting for go build")?,
            _ = heartbeat.tick() => eprintln!(
                "  still building {} ({}s)", program.name, start.elapsed().as_secs()
            ),
        }
    };
    if !status.success() {
        let _ = std::fs::remove_file(&partial);
        bail!(
            "go build of {} failed ({status}); the command is shown above",
            program.name
        );
    }
    std::fs::rename(&partial, &program.cache_path).with_context(|| {
        format!(
            "cannot move {} to {}",
            partial.display(),
            program.cache_path.display()
        )
    })?;
    eprintln!(
        "  built {} in {}s: {}",
        program.name,
        start.elapsed().as_secs(),
        program.cache_path.display()
    );
    Ok(())
}

/// Leftovers of builds that were interrupted (their xtask is gone); a build still running
/// in another terminal keeps its file.
fn remove_abandoned_partials(cache_dir: &Path, name: &str) {
    let prefix = format!(".{name}.partial-");
    let Ok(entries) = std::fs::read_dir(cache_dir) else {
        return;
    };
    for entry in entries.flatten() {
        let file_name = entry.file_name();
        let Some(pid) = file_name
            .to_str()
            .and_then(|file_name| file_name.strip_prefix(&prefix))
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if !process::is_alive(pid) {
            eprintln!(
                "  removing {} (an interrupted build)",
                entry.path().display()
            );
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

fn env_path(var: &str) -> Option<PathBuf> {
    std::env::var_os(var)
        .filter(|value| !value.is_empty())
        .map(PathBuf::from)
}

/// The first executable file called `name` in `PATH`.
pub fn on_path(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| {
            candidate
                .metadata()
                .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
        })
}

/// The version a go.mod requires `module` at (`require` line or block; not `replace`).
fn required_version(go_mod: &str, module: &str) -> Result<String> {
    go_mod
        .lines()
        .map(|line| line.split("//").next().unwrap_or_default().trim())
        .map(|line| line.strip_prefix("require ").unwrap_or(line).trim())
        .find_map(|line| {
            let mut words = line.split_whitespace();
            let (name, version) = (words.next()?, words.next()?);
            (name == module && version.starts_with('v')).then(|| version.to_string())
        })
        .ok_or_else(|| anyhow!("no `require {module} vX.Y.Z`"))
}

/// `v1.36.3` → `v1.36.`
fn minor_prefix(version: &str) -> String {
    let mut parts = version.splitn(3, '.');
    match (parts.next(), parts.next()) {
        (Some(major), Some(minor)) => format!("{major}.{minor}."),
        _ => version.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_come_from_the_go_modules() {
        let pins = Pins::from_go_mods().unwrap();
        assert!(pins.kubernetes.starts_with("v1."), "{pins:?}");
        assert!(pins.etcd.starts_with("v3."), "{pins:?}");
    }

    #[test]
    fn require_block_and_line_are_read_but_replace_is_not() {
        let go_mod = "module x\n\nreplace k8s.io/api => k8s.io/api v0.36.3\n\
                      require go.etcd.io/etcd/server/v3 v3.6.16\n\
                      require (\n\tk8s.io/api v0.0.0\n\tk8s.io/kubernetes v1.36.3 // indirect\n)\n";
        assert_eq!(
            required_version(go_mod, "k8s.io/kubernetes").unwrap(),
            "v1.36.3"
        );
        assert_eq!(
            required_version(go_mod, "go.etcd.io/etcd/server/v3").unwrap(),
            "v3.6.16"
        );
        assert_eq!(required_version(go_mod, "k8s.io/api").unwrap(), "v0.0.0");
        assert!(required_version(go_mod, "example.com/none").is_err());
    }

    #[test]
    fn only_partials_of_dead_builds_are_removed() {
        let dir = std::env::temp_dir().join(format!("xtask-partials-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // Above any pid_max, so never a running process.
        let dead = dir.join(".etcd.partial-4294967295");
        let running = dir.join(format!(".etcd.partial-{}", std::process::id()));
        let other = dir.join(".kube-apiserver.partial-4294967295");
        for file in [&dead, &running, &other] {
            std::fs::write(file, b"").unwrap();
        }
        remove_abandoned_partials(&dir, "etcd");
        assert!(!dead.exists());
        assert!(running.exists());
        assert!(other.exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn minor_prefix_keeps_major_and_minor() {
        assert_eq!(minor_prefix("v1.36.3"), "v1.36.");
        assert_eq!(minor_prefix("v3.6.16"), "v3.6.");
    }
}
