//! The envtest provider's two programs, kube-apiserver and etcd: found, or built once with
//! Go from the modules that pin them (`xtask/envtest/`, [`ENVTEST`]).
//!
//! Search order, for each program on its own:
//! 1. `KUBE_APISERVER` / `ETCD`: an explicit path (an error when it does not exist);
//! 2. `KUBEBUILDER_ASSETS`: a directory holding both (what `setup-envtest` prints; the Nix
//!    shell sets it);
//! 3. `PATH`;
//! 4. the build cache `target/envtest/<name>-<fingerprint>/`, keyed by the module's pins, or
//!    the release unpacked before ([`super::release`]);
//! 5. envtest's release tarball, downloaded and checked against its pinned sha512;
//! 6. without it (no network, no archive for this system), a `go build` into the cache.

use std::path::PathBuf;

use anyhow::{Result, anyhow, bail};

use labkit::go_build::{self, Definition, GoComponent};
use labkit::{command::Cmd, project, tools::on_path, tr};

pub const KUBERNETES_DIR: &str = "xtask/envtest/kubernetes";

/// The envtest lab's two programs' modules.
pub const ENVTEST: &[Definition] = &[
    Definition {
        name: "kubernetes",
        dir: KUBERNETES_DIR,
        module: "k8s.io/kubernetes",
        cgo: false,
        tags: "",
        // Built from a module, Kubernetes does not know its version: stamp it,
        // or every component says v0.0.0-master and kubeadm refuses it.
        stamps: |version| {
            let minor = version.split('.').nth(1).unwrap_or_default().to_string();
            vec![
                format!("k8s.io/component-base/version.gitVersion={version}"),
                "k8s.io/component-base/version.gitMajor=1".into(),
                format!("k8s.io/component-base/version.gitMinor={minor}"),
                "k8s.io/component-base/version.gitTreeState=clean".into(),
            ]
        },
    },
    Definition {
        name: "etcd",
        dir: "xtask/envtest/etcd",
        module: "go.etcd.io/etcd/server/v3",
        cgo: false,
        tags: "",
        stamps: |_| Vec::new(),
    },
];

/// Where a program was found, as lab.json holds it, in the reader's language (`lab status`):
/// the catalogue's entry for the words [`checked`] is given (`project cache`, …), else as it is.
pub fn said(source: &str) -> String {
    labkit::say::translate(source, &[])
}

/// One program, ready to run.
#[derive(Clone, Debug)]
pub struct Binary {
    pub path: PathBuf,
    /// As the program reports it (`--version`), e.g. `v1.36.3` or `3.6.16`.
    pub version: String,
    /// Where it was found: `$KUBE_APISERVER`, `PATH`, `project cache`, … ([`said`]).
    pub source: String,
}

#[derive(Clone, Debug)]
pub struct EnvtestBinaries {
    pub kube_apiserver: Binary,
    pub etcd: Binary,
}

/// What differs between the two programs.
struct Program {
    name: &'static str,
    env: &'static str,
    component: GoComponent,
    /// The package `go build` makes it from.
    package: &'static str,
    /// The version it prints when built from the pinned module.
    pinned: String,
}

impl Program {
    /// `target/envtest/<name>-<fingerprint>/<name>`.
    fn cache_path(&self) -> PathBuf {
        let dir = format!("{}-{}", self.name, self.component.fingerprint);
        project::target_dir().join("envtest").join(dir).join(self.name)
    }

    /// A version starting with this (the pinned minor) is close enough not to warn about.
    fn minor_prefix(&self) -> String {
        let mut parts = self.pinned.splitn(3, '.');
        format!("{}.{}.", parts.next().unwrap_or_default(), parts.next().unwrap_or_default())
    }
}

/// The two programs, as the Go modules of `xtask/envtest/` pin them.
fn programs() -> Result<[Program; 2]> {
    // In ENVTEST's order.
    let [kubernetes, etcd]: [GoComponent; 2] = go_build::components(ENVTEST)?
        .try_into()
        .map_err(|_| anyhow!(tr!("no such Go component")))?;
    Ok([
        Program {
            name: "kube-apiserver",
            env: "KUBE_APISERVER",
            pinned: kubernetes.version.clone(),
            component: kubernetes,
            package: "k8s.io/kubernetes/cmd/kube-apiserver",
        },
        Program {
            name: "etcd",
            env: "ETCD",
            // etcd prints its version without the module's `v`.
            pinned: etcd.version.trim_start_matches('v').to_string(),
            component: etcd,
            package: ".",
        },
    ])
}

/// Find both programs (building what is missing); see the module docs for the order.
pub async fn find() -> Result<EnvtestBinaries> {
    let [kube_apiserver, etcd] = programs()?.map(|p| find_one(&p));
    Ok(EnvtestBinaries { kube_apiserver: kube_apiserver?, etcd: etcd? })
}

/// What [`find`] would use without building (steps 1–4): each program's name
/// with its binary, or with `None` where a `go build` would be needed.
pub fn located() -> Result<Vec<(&'static str, Option<Binary>)>> {
    programs()?.iter().map(|p| Ok((p.name, locate(p)?))).collect()
}

fn find_one(program: &Program) -> Result<Binary> {
    if let Some(binary) = locate(program)? {
        return Ok(binary);
    }
    // 5. The release's archive; 6. without it, a build from the pinned module.
    if let Some(release) = super::release::Release::here()? {
        match release.fetch() {
            Ok(dir) => return checked(program, dir.join(program.name), "downloaded release"),
            Err(e) => eprintln!(
                "{}",
                tr!(
                    "warning: no release archive ({error}): building with Go instead",
                    error = format!("{e:#}")
                )
            ),
        }
    }
    let cache = program.cache_path();
    if on_path("go").is_none() {
        bail!(tr!(
            "{name} {version} not found. Any one of these provides it: {env}=/path/to/{name}; \
             KUBEBUILDER_ASSETS=/dir/with/kube-apiserver/and/etcd (what setup-envtest prints); \
             {name} on PATH; or Go 1.26+ on PATH, with which xtask builds it into {cache}",
            name = program.name,
            version = program.pinned,
            env = program.env,
            cache = cache.display(),
        ));
    }
    let (name, version) = (program.name, &program.pinned);
    labkit::progress!(
        "{}",
        tr!(
            "{name} {version} is not available: building it with Go (the first build of kube-apiserver takes many minutes on a small machine)",
            name,
            version
        )
    );
    go_build::build_once(name, &cache, |partial| {
        program.component.build_cmd(partial, &[program.package])
    })?;
    checked(program, cache, "built with go")
}

/// Steps 1–4 of the search; `None` when only a build can provide it.
fn locate(program: &Program) -> Result<Option<Binary>> {
    // 1. An explicit path: the person asked for this one, so a wrong path is an error.
    if let Some(path) = env_path(program.env) {
        if !path.is_file() {
            bail!(tr!(
                "{env}={path} does not exist (unset it to let xtask look elsewhere)",
                env = program.env,
                path = path.display()
            ));
        }
        return checked(program, path, &format!("${}", program.env)).map(Some);
    }
    // 2. A kubebuilder-style assets directory.
    if let Some(dir) = env_path("KUBEBUILDER_ASSETS") {
        let path = dir.join(program.name);
        if path.is_file() {
            return checked(program, path, "$KUBEBUILDER_ASSETS").map(Some);
        }
        labkit::progress!(
            "{}",
            tr!(
                "note: KUBEBUILDER_ASSETS={dir} has no {name}; looking further",
                dir = dir.display(),
                name = program.name
            )
        );
    }
    // 3. PATH. A program there that does not even run is skipped, not fatal.
    if let Some(path) = on_path(program.name) {
        match checked(program, path.clone(), "PATH") {
            Ok(binary) => return Ok(Some(binary)),
            Err(error) => eprintln!(
                "{}",
                tr!(
                    "warning: skipping {path}: {error}",
                    path = path.display(),
                    error = format!("{error:#}")
                )
            ),
        }
    }
    // 4. The build cache, or the release unpacked: only what is whole is ever renamed there.
    let cache = program.cache_path();
    if cache.is_file() {
        return checked(program, cache, "project cache").map(Some);
    }
    let release = super::release::Release::here()?.map(|r| r.dir().join(program.name));
    match release.filter(|path| path.is_file()) {
        Some(path) => checked(program, path, "downloaded release").map(Some),
        None => Ok(None),
    }
}

/// Runs `--version`; warns when it is not the pinned minor.
fn checked(program: &Program, path: PathBuf, source: &str) -> Result<Binary> {
    let path = std::path::absolute(&path).unwrap_or(path);
    let output = Cmd::new(path.display().to_string()).arg("--version").read()?;
    // `Kubernetes v1.36.3`; `etcd Version: 3.6.16`.
    let version = output
        .lines()
        .find_map(|l| l.strip_prefix("etcd Version:").or_else(|| l.strip_prefix("Kubernetes ")))
        .map(|v| v.trim().to_string())
        .ok_or_else(|| {
            anyhow!(tr!(
                "`{path} --version` printed no version: {output}",
                path = path.display(),
                output = format!("{output:?}")
            ))
        })?;
    if !version.starts_with(&program.minor_prefix()) {
        eprintln!(
            "{}",
            tr!(
                "warning: {path} ({source}) is {version}; this kit pins {pinned}",
                path = path.display(),
                source = said(source),
                version,
                pinned = program.pinned
            )
        );
    }
    Ok(Binary { path, version, source: source.to_string() })
}

fn env_path(var: &str) -> Option<PathBuf> {
    std::env::var_os(var).filter(|v| !v.is_empty()).map(PathBuf::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pins_come_from_the_go_modules() {
        let components = go_build::components(ENVTEST).unwrap();
        let kubernetes = components.iter().find(|c| c.name == "kubernetes").unwrap();
        let program = Program {
            name: "kube-apiserver",
            env: "KUBE_APISERVER",
            pinned: kubernetes.version.clone(),
            component: kubernetes.clone(),
            package: "k8s.io/kubernetes/cmd/kube-apiserver",
        };
        assert!(program.minor_prefix().starts_with("v1.") && program.minor_prefix().ends_with('.'));
        let cache = program.cache_path();
        assert!(cache.ends_with("kube-apiserver"), "{}", cache.display());
        assert!(cache.parent().unwrap().to_string_lossy().contains(&kubernetes.fingerprint));
    }

    #[test]
    fn the_envtest_programs_build_in_the_workspace_from_their_go_mod() {
        let modules = go_build::workspace_modules().unwrap();
        let gowork = project::root().join(go_build::WORKSPACE).display().to_string();
        let components = go_build::components(ENVTEST).unwrap();
        for component in &components {
            assert!(modules.iter().any(|m| m == component.dir), "{}", component.dir);
            assert!(component.env.contains(&("GOWORK", gowork.clone())), "{component:?}");
        }
        let kubernetes = components.iter().find(|c| c.name == "kubernetes").unwrap();
        assert!(kubernetes.version.starts_with("v1.36."), "{}", kubernetes.version);
        for program in ["kubelet", "kubeadm", "kubectl", "kube-apiserver", "kube-proxy"] {
            assert!(
                kubernetes.packages.contains(&format!("k8s.io/kubernetes/cmd/{program}")),
                "{program}"
            );
        }
        let etcd = components.iter().find(|c| c.name == "etcd").unwrap();
        assert_eq!(etcd.packages, vec!["."]);
        assert!(components.iter().all(|c| c.fingerprint.len() == 12));
    }

    #[test]
    fn finds_programs_on_path() {
        assert!(on_path("sh").is_some());
        assert!(on_path("no-such-program-here").is_none());
    }
}
