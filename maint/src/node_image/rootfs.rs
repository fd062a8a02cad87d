//! The node's Debian userland, from `debootstrap` (as kind's base image is a
//! Debian one): the packages kind's base image installs that a one-node lab
//! uses, plus libseccomp's static library for runc. The mirror is the one
//! this machine's apt sources name (or `--mirror`); it is never written into
//! the repository. Cached as `target/node-image/rootfs-<suite>-<fingerprint>.tar`
//! and imported into Docker as `lab-kit/node-rootfs:<suite>-<fingerprint>`.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, bail};

use super::{Arch, Build, Recipe, Source};
use labkit::command::Cmd;
use labkit::project::shown;
use xtask::lab::kind::image_present;
use xtask::plan::Step;

/// kind's base-image packages that a one-node lab uses (without the
/// storage-test and rootless ones), plus libseccomp-dev for runc's static
/// build and ipset for the room cluster's NetworkPolicy enforcer, which runs
/// on this rootfs (maint/src/room_cluster/network_policy.rs).
pub const PACKAGES: &[&str] = &[
    "systemd",
    "systemd-sysv",
    "dbus",
    "conntrack",
    "iptables",
    "ipset",
    "nftables",
    "iproute2",
    "ethtool",
    "util-linux",
    "mount",
    "kmod",
    "libseccomp2",
    "libseccomp-dev",
    "pigz",
    "e2fsprogs",
    "bash",
    "ca-certificates",
    "curl",
    "jq",
    "procps",
];

/// The suite used when the apt sources name none debootstrap knows.
const DEFAULT_SUITE: &str = "bookworm";

#[derive(Clone, Debug)]
pub struct Rootfs {
    pub suite: String,
    /// `None`: no mirror found; the build stops with how to name one.
    pub mirror: Option<String>,
    pub arch: Arch,
}

impl Rootfs {
    pub fn new(source: &Source, arch: Arch) -> Result<Rootfs> {
        let found = xtask::mirrors::apt_mirror();
        let suite = source
            .suite
            .clone()
            .or_else(|| found.as_ref().map(|(_, suite)| suite.clone()))
            .unwrap_or_else(|| DEFAULT_SUITE.to_string());
        let mirror = source.mirror.clone().or(found.map(|(uri, _)| uri));
        Ok(Rootfs { suite, mirror, arch })
    }

    #[cfg(test)]
    pub fn for_test() -> Rootfs {
        Rootfs {
            suite: DEFAULT_SUITE.into(),
            mirror: Some("http://deb.example/debian".into()),
            arch: Arch::host().unwrap(),
        }
    }

    /// What the rootfs is made of (not where it is fetched from).
    pub fn fingerprint(&self) -> String {
        format!("{} {} {}", self.suite, self.arch.go, PACKAGES.join(","))
    }

    fn tag(&self) -> String {
        let hash = labkit::fingerprint::sha256_hex(self.fingerprint().as_bytes());
        format!("{}-{}", self.suite, &hash[..12])
    }

    /// The cached tarball of the rootfs.
    pub fn tarball(&self, cache: &Path) -> PathBuf {
        cache.join(format!("rootfs-{}.tar", self.tag()))
    }

    /// libseccomp's headers, static library and pkg-config file, for runc.
    pub fn sysroot(&self, cache: &Path) -> PathBuf {
        cache.join(format!("sysroot-{}", self.tag()))
    }

    /// The rootfs as a Docker image: the node image's and kube-proxy's base.
    pub fn image(&self) -> String {
        format!("lab-kit/node-rootfs:{}", self.tag())
    }
}

/// `sudo` in front when this is not root: debootstrap, and reading or
/// removing the root-owned tree it makes, need root.
fn as_root(argv: &[&str]) -> Cmd {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 { Cmd::argv(argv) } else { Cmd::new("sudo").args(argv) }
}

/// debootstrap into a directory, libseccomp copied out of it, the tree packed
/// into the cached tarball, the directory removed; then the tarball imported
/// into Docker. Each only when its result is missing.
pub fn steps(recipe: &Recipe) -> Result<Vec<Step<Build>>> {
    let rootfs = &recipe.rootfs;
    let tarball = rootfs.tarball(&recipe.cache);
    let sysroot = rootfs.sysroot(&recipe.cache);
    let tree = recipe.cache.join(format!("rootfs-{}", rootfs.tag()));
    let partial = tarball.with_extension("tar.partial");
    let mirror = rootfs.mirror.clone().unwrap_or_else(|| "MIRROR".into());
    let (tree_s, tarball_s, partial_s) =
        (tree.display().to_string(), tarball.display().to_string(), partial.display().to_string());
    let unless = format!("if {} is not built yet", shown(&tarball));
    let missing = {
        let (tarball, sysroot) = (tarball.clone(), sysroot.clone());
        move |_: &Build| !tarball.is_file() || !sysroot.is_dir()
    };
    let include = format!("--include={}", PACKAGES.join(","));
    let arch = format!("--arch={}", rootfs.arch.go);
    let multiarch = rootfs.arch.multiarch;
    let image = rootfs.image();
    let mut guarded = Vec::new();
    if rootfs.mirror.is_none() {
        guarded.push(Step::own("find a Debian mirror in the apt sources", |_| {
            Box::pin(async {
                bail!(
                    "no Debian mirror in /etc/apt/sources.list or /etc/apt/sources.list.d/: \
                     name one with `--mirror URL` (and `--suite NAME`, e.g. bookworm)"
                )
            })
        }));
    }
    guarded.extend([
        Step::run(as_root(&["rm", "-rf", &tree_s, &partial_s])),
        Step::long(
            as_root(&[
                "debootstrap",
                "--variant=minbase",
                &arch,
                &include,
                &rootfs.suite,
                &tree_s,
                &mirror,
            ]),
            "making the Debian rootfs",
        ),
        {
            let (tree, sysroot) = (tree.clone(), sysroot.clone());
            Step::own(
                format!("copy libseccomp's headers and static library into {}", shown(&sysroot)),
                move |_| Box::pin(async move { copy_sysroot(&tree, &sysroot, multiarch) }),
            )
        },
        Step::run(as_root(&["tar", "-C", &tree_s, "-cf", &partial_s, "."])),
        {
            let (partial, tarball) = (partial.clone(), tarball.clone());
            Step::own(format!("move it to {}", shown(&tarball)), move |_| {
                Box::pin(async move {
                    std::fs::rename(&partial, &tarball)
                        .with_context(|| format!("cannot move {}", partial.display()))
                })
            })
        },
        Step::run(as_root(&["rm", "-rf", &tree_s])),
    ]);
    let mut steps: Vec<_> =
        guarded.into_iter().map(|step| step.when(unless.clone(), missing.clone())).collect();
    steps.extend([
        Step::probe(image_present(&image), |build: &mut Build, out: Result<String>| {
            build.rootfs_image = out.is_ok();
            Ok(())
        }),
        Step::run(Cmd::argv(["docker", "import", &tarball_s, &image]))
            .when("if Docker does not have it", |build: &Build| !build.rootfs_image),
    ]);
    Ok(steps)
}

/// libseccomp from the rootfs, as a sysroot for runc's cgo build.
fn copy_sysroot(tree: &Path, sysroot: &Path, multiarch: &str) -> Result<()> {
    let lib = format!("usr/lib/{multiarch}");
    let files = [
        format!("{lib}/libseccomp.a"),
        format!("{lib}/pkgconfig/libseccomp.pc"),
        "usr/include/seccomp.h".to_string(),
        "usr/include/seccomp-syscalls.h".to_string(),
    ];
    for file in &files {
        let (from, to) = (tree.join(file), sysroot.join(file));
        if let Some(parent) = to.parent() {
            labkit::files::create_dir(parent)?;
        }
        std::fs::copy(&from, &to).with_context(|| {
            format!("cannot copy {} (is libseccomp-dev in the rootfs?)", from.display())
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fingerprint_ignores_the_mirror() {
        let mut a = Rootfs::for_test();
        let tag = a.image();
        a.mirror = Some("http://elsewhere/debian".into());
        assert_eq!(a.image(), tag);
        a.suite = "trixie".into();
        assert_ne!(a.image(), tag);
    }
}
