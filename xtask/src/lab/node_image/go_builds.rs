//! The node image's programs, built from the Go modules in the repository:
//! each module's go.mod pins one upstream module and names the packages to
//! build as `tool` lines, so versions and package lists are written once.
//! Each component is built into `target/node-image/go/<name>-<fingerprint>/`
//! and reused until its go.mod, go.sum or flags change.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, ensure};

use crate::preflight::static_libc;

use super::{Build, Recipe};
use crate::plan::Step;
use labkit::command::Cmd;
use labkit::project;
use labkit::project::shown;

pub const KUBERNETES_DIR: &str = "xtask/envtest/kubernetes";

/// One Go module of the repository and how its programs are built.
#[derive(Clone, Debug)]
pub struct GoComponent {
    /// `kubernetes`, `containerd`, …
    pub name: &'static str,
    /// The module's directory, relative to the project root.
    pub dir: &'static str,
    /// The upstream module it pins, and the version it pins.
    pub module: &'static str,
    pub version: String,
    /// The packages it builds: its go.mod's `tool` lines, or its own main package.
    pub packages: Vec<String>,
    pub env: Vec<(&'static str, String)>,
    pub tags: &'static str,
    pub ldflags: String,
    /// Whether its programs go into the image (kind's module only lends its files).
    pub in_image: bool,
    /// Of go.mod, go.sum and the flags: the output directory's name.
    pub fingerprint: String,
}

/// What differs between components.
struct Definition {
    name: &'static str,
    dir: &'static str,
    module: &'static str,
    cgo: bool,
    tags: &'static str,
    /// Extra `-X` stamps, given the pinned version.
    stamps: fn(&str) -> Vec<String>,
    in_image: bool,
}

const DEFINITIONS: &[Definition] = &[
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
        in_image: true,
    },
    Definition {
        name: "etcd",
        dir: "xtask/envtest/etcd",
        module: "go.etcd.io/etcd/server/v3",
        cgo: false,
        tags: "",
        stamps: |_| Vec::new(),
        in_image: true,
    },
    Definition {
        name: "containerd",
        dir: "xtask/node-image/containerd",
        module: "github.com/containerd/containerd/v2",
        cgo: false,
        // As kind's base image: no optional snapshotters.
        tags: "no_aufs no_zfs no_btrfs no_devmapper",
        stamps: |version| {
            vec![format!("github.com/containerd/containerd/v2/version.Version={version}")]
        },
        in_image: true,
    },
    Definition {
        name: "runc",
        dir: "xtask/node-image/runc",
        module: "github.com/opencontainers/runc",
        cgo: true,
        // seccomp: pods run with the RuntimeDefault profile (the Deployment asks for it).
        tags: "seccomp netgo osusergo",
        stamps: |version| vec![format!("main.version={}", version.trim_start_matches('v'))],
        in_image: true,
    },
    Definition {
        name: "cri-tools",
        dir: "xtask/node-image/cri-tools",
        module: "sigs.k8s.io/cri-tools",
        cgo: false,
        tags: "",
        stamps: |version| {
            vec![format!(
                "sigs.k8s.io/cri-tools/pkg/version.Version={}",
                version.trim_start_matches('v')
            )]
        },
        in_image: true,
    },
    Definition {
        name: "cni-plugins",
        dir: "xtask/node-image/cni-plugins",
        module: "github.com/containernetworking/plugins",
        cgo: false,
        tags: "",
        stamps: |_| Vec::new(),
        in_image: true,
    },
    Definition {
        name: "coredns",
        dir: "xtask/node-image/coredns",
        module: "github.com/coredns/coredns",
        cgo: false,
        tags: "",
        stamps: |_| Vec::new(),
        in_image: true,
    },
    Definition {
        name: "kind",
        dir: "xtask/node-image/kind",
        module: "sigs.k8s.io/kind",
        cgo: false,
        tags: "",
        stamps: |_| Vec::new(),
        in_image: false,
    },
];

/// Which of kind's base-image Dockerfile `ARG`s pins each component's version.
const KIND_BASE_PINS: &[(&str, &str)] = &[
    ("containerd", "CONTAINERD_VERSION"),
    ("runc", "RUNC_VERSION"),
    ("cri-tools", "CRICTL_VERSION"),
    ("cni-plugins", "CNI_PLUGINS_VERSION"),
];

pub fn read_go_mod(dir: &str) -> Result<String> {
    let path = project::root().join(dir).join("go.mod");
    std::fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))
}

/// The version `go_mod` requires of `module`.
pub fn required_version(go_mod: &str, module: &str) -> Result<String> {
    go_mod
        .lines()
        .map(|l| l.trim().trim_start_matches("require").trim())
        .find_map(|l| {
            let mut words = l.split_whitespace();
            (words.next() == Some(module)).then(|| words.next().map(str::to_string)).flatten()
        })
        .with_context(|| format!("go.mod does not require {module}"))
}

/// The packages of `tool` lines (single or in a `tool ( … )` block).
pub fn tools(go_mod: &str) -> Vec<String> {
    let mut tools = Vec::new();
    let mut in_block = false;
    for line in go_mod.lines().map(str::trim) {
        if in_block {
            if line == ")" {
                in_block = false;
            } else if !line.is_empty() && !line.starts_with("//") {
                tools.push(line.to_string());
            }
        } else if line == "tool (" {
            in_block = true;
        } else if let Some(tool) = line.strip_prefix("tool ") {
            tools.push(tool.trim().to_string());
        }
    }
    tools
}

/// Every component, read from its go.mod.
pub fn components() -> Result<Vec<GoComponent>> {
    DEFINITIONS
        .iter()
        .map(|d| {
            let go_mod = read_go_mod(d.dir)?;
            let go_sum = std::fs::read_to_string(project::root().join(d.dir).join("go.sum"))
                .unwrap_or_default();
            let version =
                required_version(&go_mod, d.module).with_context(|| format!("{}/go.mod", d.dir))?;
            let mut packages = tools(&go_mod);
            if packages.is_empty() {
                packages.push(".".into());
            }
            let mut ldflags = vec!["-s".to_string(), "-w".to_string()];
            if d.cgo {
                ldflags.extend(["-extldflags".into(), "-static".into()]);
            }
            for stamp in (d.stamps)(&version) {
                ldflags.extend(["-X".into(), stamp]);
            }
            let env = vec![("CGO_ENABLED", if d.cgo { "1" } else { "0" }.to_string())];
            let ldflags = ldflags.join(" ");
            let fingerprint = labkit::fingerprint::sha256_hex(
                format!("{go_mod}\n{go_sum}\n{ldflags}\n{}\n{}", d.tags, d.cgo).as_bytes(),
            )[..12]
                .to_string();
            Ok(GoComponent {
                name: d.name,
                dir: d.dir,
                module: d.module,
                version,
                packages,
                env,
                tags: d.tags,
                ldflags,
                in_image: d.in_image,
                fingerprint,
            })
        })
        .collect()
}

impl GoComponent {
    /// `target/node-image/go/<name>-<fingerprint>/`.
    pub fn out_dir(&self, cache: &Path) -> PathBuf {
        cache.join("go").join(format!("{}-{}", self.name, self.fingerprint))
    }

    /// `go build` of every package into `out` (a directory: Go then names
    /// each program after its package).
    fn build(&self, out: &Path) -> Cmd {
        let packages: Vec<&str> = self.packages.iter().map(String::as_str).collect();
        self.build_cmd(&PathBuf::from(format!("{}/", out.display())), &packages)
    }

    /// `go build` of `packages` into `out` (a file for one package, a
    /// directory ending in `/` for several), with this component's flags.
    pub fn build_cmd(&self, out: &Path, packages: &[&str]) -> Cmd {
        let mut cmd = Cmd::new("go").dir(project::root().join(self.dir));
        for (key, value) in &self.env {
            cmd = cmd.env(key, value);
        }
        cmd = cmd.args(["build", "-trimpath"]);
        if !self.tags.is_empty() {
            cmd = cmd.args(["-tags", self.tags]);
        }
        cmd.args(["-ldflags", &self.ldflags, "-o"]).path(out).args(packages)
    }
}

/// A build is complete once this marker exists: a half-done one is redone.
fn marker(out: &Path) -> PathBuf {
    out.join(".complete")
}

/// The `go build` of `component` and its completion marker, unless it is built.
fn build_steps(recipe: &Recipe, component: &GoComponent, cmd: Cmd) -> Vec<Step<Build>> {
    let out = component.out_dir(&recipe.cache);
    let done = marker(&out);
    let unless = format!("if {} is not built yet", shown(&out));
    let missing = {
        let done = done.clone();
        move |_: &Build| !done.is_file()
    };
    vec![
        Step::long(cmd, "building with Go").when(unless.clone(), missing.clone()),
        Step::own(format!("mark {} complete", shown(&out)), move |_| {
            Box::pin(async move { labkit::files::write_public(&done, "") })
        })
        .when(unless, missing),
    ]
}

/// Every component but runc (which needs the rootfs's libseccomp), and kind's
/// module, whose base-image files and pins are read from the module cache.
pub fn steps(recipe: &Recipe) -> Result<Vec<Step<Build>>> {
    let kind = recipe.component("kind")?;
    let kind_dir = recipe.kind_module()?;
    let mut steps = vec![
        Step::run(
            Cmd::argv(["go", "mod", "download", kind.module]).dir(project::root().join(kind.dir)),
        ),
        {
            let components = recipe.components.clone();
            let dockerfile = kind_dir.join("images/base/Dockerfile");
            Step::own(
                format!(
                    "check the pins against kind {}'s base image ({})",
                    kind.version,
                    dockerfile.display()
                ),
                move |_| Box::pin(async move { check_kind_pins(&dockerfile, &components) }),
            )
        },
    ];
    for component in &recipe.components {
        if component.in_image && component.name != "runc" {
            let out = component.out_dir(&recipe.cache);
            steps.extend(build_steps(recipe, component, component.build(&out)));
        }
    }
    Ok(steps)
}

/// runc, linked statically against the rootfs's libseccomp (its sysroot):
/// the same library the node's containers are confined with.
pub fn runc_steps(recipe: &Recipe) -> Result<Vec<Step<Build>>> {
    let runc = recipe.component("runc")?;
    let sysroot = recipe.rootfs.sysroot(&recipe.cache);
    let pkgconfig = sysroot.join("usr/lib").join(recipe.arch.multiarch).join("pkgconfig");
    let cmd = runc
        .build(&runc.out_dir(&recipe.cache))
        .env("PKG_CONFIG_PATH", "")
        .env("PKG_CONFIG_LIBDIR", pkgconfig.display().to_string())
        .env("PKG_CONFIG_SYSROOT_DIR", sysroot.display().to_string());
    let mut steps = vec![
        Step::probe(Cmd::argv(["gcc", "-print-file-name=libc.a"]), |_, out| {
            static_libc(out.as_deref().ok())
        })
        .when(format!("if {} is not built yet", shown(&runc.out_dir(&recipe.cache))), {
            let done = marker(&runc.out_dir(&recipe.cache));
            move |_: &Build| !done.is_file()
        }),
    ];
    steps.extend(build_steps(recipe, runc, cmd));
    Ok(steps)
}

/// kind's base image Dockerfile says which versions its node images ship
/// (`ARG RUNC_VERSION="v1.4.3"`); the repository's modules must pin the same.
fn check_kind_pins(dockerfile: &Path, components: &[GoComponent]) -> Result<()> {
    let text = std::fs::read_to_string(dockerfile)
        .with_context(|| format!("cannot read {}", dockerfile.display()))?;
    for (name, arg) in KIND_BASE_PINS {
        let pinned = dockerfile_arg(&text, arg)
            .with_context(|| format!("{} has no ARG {arg}", dockerfile.display()))?;
        let component = components
            .iter()
            .find(|c| c.name == *name)
            .with_context(|| format!("no component {name}"))?;
        ensure!(
            component.version == pinned,
            "{}/go.mod pins {} {}, but kind's base image uses {pinned}: pin the same version",
            component.dir,
            component.module,
            component.version
        );
    }
    Ok(())
}

/// The default of `ARG NAME="value"` in a Dockerfile.
pub fn dockerfile_arg(text: &str, name: &str) -> Option<String> {
    text.lines().find_map(|line| {
        let rest = line.trim().strip_prefix("ARG ")?;
        let value = rest.strip_prefix(name)?.strip_prefix('=')?;
        Some(value.trim().trim_matches('"').to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_versions_and_tools_from_go_mod() {
        let go_mod = "module x\n\ngo 1.26.0\n\ntool a/cmd/one\ntool (\n\tb/cmd/two\n\t// note\n)\n\nrequire a v1.2.3\nrequire (\n\tb v0.1.0 // indirect\n)\n";
        assert_eq!(tools(go_mod), vec!["a/cmd/one", "b/cmd/two"]);
        assert_eq!(required_version(go_mod, "a").unwrap(), "v1.2.3");
        assert_eq!(required_version(go_mod, "b").unwrap(), "v0.1.0");
        assert!(required_version(go_mod, "c").is_err());
    }

    #[test]
    fn every_component_reads_its_go_mod() {
        let components = components().unwrap();
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
    fn reads_dockerfile_args() {
        let text = "FROM x\nARG TARGETARCH GO_VERSION\nARG RUNC_VERSION=\"v1.4.3\"\n";
        assert_eq!(dockerfile_arg(text, "RUNC_VERSION").as_deref(), Some("v1.4.3"));
        assert_eq!(dockerfile_arg(text, "GO_VERSION"), None);
    }

    #[test]
    fn a_missing_static_libc_names_the_package() {
        assert!(static_libc(Some("/usr/lib/x86_64-linux-gnu/libc.a")).is_ok());
        let error = static_libc(Some("libc.a")).unwrap_err().to_string();
        assert!(error.contains("libc6-dev") && error.contains("glibc-static"), "{error}");
        assert!(static_libc(None).is_err());
    }
}
