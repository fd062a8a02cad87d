//! The node image's programs, built from the Go modules in the repository
//! ([`labkit::go_build`]: the envtest lab's two and the node's own). Each component
//! is built into `target/node-image/go/<name>-<fingerprint>/` and reused
//! until its go.mod, go.sum or flags change.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, ensure};

use labkit::go_build::{Definition, GoComponent};
use xtask::preflight::static_libc;

use super::{Build, Recipe};
use labkit::command::Cmd;
use labkit::project;
use labkit::project::shown;
use xtask::plan::Step;

/// The node's own modules, besides the envtest lab's two.
pub const NODE: &[Definition] = &[
    Definition {
        name: "containerd",
        dir: "maint/node-image/containerd",
        module: "github.com/containerd/containerd/v2",
        cgo: false,
        // As kind's base image: no optional snapshotters.
        tags: "no_aufs no_zfs no_btrfs no_devmapper",
        stamps: |version| {
            vec![format!("github.com/containerd/containerd/v2/version.Version={version}")]
        },
    },
    Definition {
        name: "runc",
        dir: "maint/node-image/runc",
        module: "github.com/opencontainers/runc",
        cgo: true,
        // seccomp: pods run with the RuntimeDefault profile (the Deployment asks for it).
        tags: "seccomp netgo osusergo",
        stamps: |version| vec![format!("main.version={}", version.trim_start_matches('v'))],
    },
    Definition {
        name: "cri-tools",
        dir: "maint/node-image/cri-tools",
        module: "sigs.k8s.io/cri-tools",
        cgo: false,
        tags: "",
        stamps: |version| {
            vec![format!(
                "sigs.k8s.io/cri-tools/pkg/version.Version={}",
                version.trim_start_matches('v')
            )]
        },
    },
    plain("cni-plugins", "maint/node-image/cni-plugins", "github.com/containernetworking/plugins"),
    plain("coredns", "maint/node-image/coredns", "github.com/coredns/coredns"),
    plain("kind", "maint/node-image/kind", "sigs.k8s.io/kind"),
];

/// A module built as it is: no cgo, no build tags, no version stamped in.
pub const fn plain(name: &'static str, dir: &'static str, module: &'static str) -> Definition {
    Definition { name, dir, module, cgo: false, tags: "", stamps: |_| Vec::new() }
}

/// Which of kind's base-image Dockerfile `ARG`s pins each component's version.
const KIND_BASE_PINS: &[(&str, &str)] = &[
    ("containerd", "CONTAINERD_VERSION"),
    ("runc", "RUNC_VERSION"),
    ("cri-tools", "CRICTL_VERSION"),
    ("cni-plugins", "CNI_PLUGINS_VERSION"),
];

/// A build is complete once this marker exists: a half-done one is redone.
fn marker(out: &Path) -> PathBuf {
    out.join(".complete")
}

/// The `go build` of `component` and its completion marker, unless it is built.
fn build_steps(recipe: &Recipe, component: &GoComponent, cmd: Cmd) -> Vec<Step<Build>> {
    let out = recipe.out_dir(component);
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
        // runc is built by [`runc_steps`]; kind's module only lends its files.
        if !matches!(component.name, "runc" | "kind") {
            let out = recipe.out_dir(component);
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
        .build(&recipe.out_dir(runc))
        .env("PKG_CONFIG_PATH", "")
        .env("PKG_CONFIG_LIBDIR", pkgconfig.display().to_string())
        .env("PKG_CONFIG_SYSROOT_DIR", sysroot.display().to_string());
    let mut steps = vec![
        Step::probe(Cmd::argv(["gcc", "-print-file-name=libc.a"]), |_, out| {
            static_libc(out.as_deref().ok())
        })
        .when(format!("if {} is not built yet", shown(&recipe.out_dir(runc))), {
            let done = marker(&recipe.out_dir(runc));
            move |_: &Build| !done.is_file()
        }),
    ];
    steps.extend(build_steps(recipe, runc, cmd));
    Ok(steps)
}

/// kind's base image Dockerfile says which versions its node images ship
/// (`ARG RUNC_VERSION="v1.4.3"`); the repository's modules must pin the same.
fn check_kind_pins(dockerfile: &Path, components: &[GoComponent]) -> Result<()> {
    let text = labkit::files::read(dockerfile)?;
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
    fn the_workspace_is_every_cgo_free_program_of_the_cluster() {
        use labkit::go_build::workspace_modules;
        use xtask::lab::binaries::ENVTEST;
        let mut built: Vec<&str> = ENVTEST.iter().chain(NODE).map(|d| d.dir).collect();
        built.extend([
            crate::room_cluster::KUBE_ROUTER_MODULE,
            crate::room_cluster::REGISTRY_MODULE,
        ]);
        // runc links libseccomp with cgo; kind's CLI is built before everything else.
        let alone = ["maint/node-image/runc", "maint/node-image/kind"];
        built.retain(|dir| !alone.contains(dir));
        let mut used = workspace_modules().unwrap();
        used.sort();
        built.sort();
        assert_eq!(used, built);
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
