//! The controller image: the static `my-controller` binary and nothing else,
//! run as a non-root user. Three ways to build it, chosen automatically and
//! overridable with `--image-builder`:
//!
//! * `host`: a static release binary built here (musl when its target is
//!   installed, as in the Nix dev shell, else glibc with
//!   `-C target-feature=+crt-static`) copied into a `FROM scratch` image.
//!   It pulls no base image, so it works offline; in the dev shell it is
//!   cargo's own build, not a second compile by `nix build`;
//! * `nix`: `nix build .#image` (the flake's dockerTools image; from a Mac,
//!   on a Linux builder);
//! * `dockerfile`: the multi-stage `Dockerfile` (portable: macOS with Docker
//!   Desktop), which pulls the Rust build image.
//!
//! The tag is the one `manifests/deployment.yaml` uses, read from there.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::ValueEnum;

use crate::plan::Step;
use labkit::command::Cmd;
use labkit::project;
use labkit::tr;

/// `--image-builder`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum Builder {
    /// host on Linux (in the Nix dev shell too), else dockerfile.
    #[default]
    Auto,
    Nix,
    Host,
    Dockerfile,
}

/// The image reference the Deployment runs (`image:` in manifests/deployment.yaml).
pub fn reference() -> Result<String> {
    let path = project::root().join("manifests/deployment.yaml");
    let text = labkit::files::read(&path)?;
    reference_in(&text).with_context(|| tr!("{path} has no `image:` line", path = path.display()))
}

fn reference_in(deployment: &str) -> Option<String> {
    deployment
        .lines()
        .find_map(|l| l.trim().strip_prefix("image:"))
        .map(|image| image.trim().to_string())
}

/// The builder `Auto` stands for here, saying why.
pub fn resolve(choice: Builder) -> Builder {
    if choice != Builder::Auto {
        return choice;
    }
    // In the Nix dev shell too: its toolchain has the musl target, and cargo's
    // release build is reused (bench, test), where `nix build .#image` would
    // compile the controller and its dependencies a second time.
    if cfg!(target_os = "linux") {
        if std::env::var_os("LAB_KIT_NIX_SHELL").is_some() {
            labkit::progress!(
                "{}",
                tr!(
                    "image builder auto: Linux, in the Nix dev shell: cargo's static build, no nix build"
                )
            );
        }
        labkit::progress!(
            "{}",
            tr!("image builder auto: Linux: a static binary built here in a FROM scratch image")
        );
        Builder::Host
    } else {
        labkit::progress!("{}", tr!("image builder auto: not Linux: the multi-stage Dockerfile"));
        Builder::Dockerfile
    }
}

/// How the host build makes its binary static.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StaticTarget {
    pub triple: String,
    /// `-C target-feature=+crt-static` when the target is glibc.
    pub rustflags: Option<&'static str>,
}

impl StaticTarget {
    /// musl when its standard library is installed, else the glibc target
    /// linked statically (static-pie; no musl needed). Installed means in
    /// the toolchain's sysroot: rustup's (`rustup target add`) and the Nix
    /// dev shell's (the flake adds the target) alike.
    pub fn detect() -> Result<StaticTarget> {
        let host = Cmd::argv(["rustc", "-vV"]).read()?;
        let triple = host
            .lines()
            .find_map(|l| l.strip_prefix("host: "))
            .with_context(|| tr!("rustc -vV printed no host"))?
            .to_string();
        let musl = triple.replace("-gnu", "-musl");
        let sysroot = Cmd::argv(["rustc", "--print", "sysroot"]).read()?;
        Ok(if has_target(Path::new(sysroot.trim()), &musl) {
            StaticTarget { triple: musl, rustflags: None }
        } else {
            StaticTarget { triple, rustflags: Some("-C target-feature=+crt-static") }
        })
    }

    /// `cargo build --release <args> --target <triple>` with the static
    /// flags: the image's build, and the bench's (so both share one set of
    /// compiled dependencies).
    pub fn release_build(&self, args: &[&str]) -> Cmd {
        let build = crate::cargo::cargo(["build", "--release"]).args(args);
        let build = build.args(["--target", &self.triple]);
        match self.rustflags {
            Some(flags) => build.env("RUSTFLAGS", flags),
            None => build,
        }
    }

    /// The image's build of the controller's binary.
    pub fn controller_build(&self) -> Cmd {
        self.release_build(&["-p", crate::cargo::PACKAGE, "--bin", crate::cargo::BINARY])
    }

    /// Where [`StaticTarget::release_build`] puts what it builds.
    pub fn release_dir(&self, target_dir: &Path) -> PathBuf {
        target_dir.join(&self.triple).join("release")
    }
}

/// Whether the toolchain at `sysroot` has `triple`'s standard library.
fn has_target(sysroot: &Path, triple: &str) -> bool {
    sysroot.join("lib/rustlib").join(triple).join("lib").is_dir()
}

/// The steps of a build with `choice` (resolved here), for any plan:
/// printed by `--dry-run`, run by `lab up`.
pub fn steps<C: 'static>(choice: Builder) -> Result<Vec<Step<C>>> {
    let reference = reference()?;
    Ok(match resolve(choice) {
        Builder::Auto => unreachable!("resolve() chose one"),
        Builder::Nix => nix_steps()?,
        Builder::Dockerfile => vec![Step::run(
            Cmd::argv(["docker", "build", "-t", &reference, "-f", "Dockerfile", "."])
                .dir(project::root()),
        )],
        Builder::Host => host_steps(&StaticTarget::detect()?, &reference)?,
    })
}

/// `nix build` of the flake's image, loaded into Docker.
fn nix_steps<C: 'static>() -> Result<Vec<Step<C>>> {
    let root = project::root();
    // The flake builds the image for Linux systems; from a Mac, the
    // aarch64-linux one, on a Linux builder.
    let (attribute, hint) = if cfg!(target_os = "linux") {
        (".#image", tr!("nix build failed (its output is above)"))
    } else if cfg!(target_arch = "aarch64") {
        (
            ".#packages.aarch64-linux.image",
            tr!("the image is a Linux binary: on macOS nix builds it on a Linux builder \
                 (nix-darwin's linux-builder, or a remote builder; README, Nix), or use \
                 --image-builder dockerfile"),
        )
    } else {
        bail!(tr!("the flake has no image for this machine (it builds for x86_64-linux, \
             aarch64-linux, and from Apple silicon): use --image-builder dockerfile"));
    };
    Ok(vec![
        Step::run(
            Cmd::argv(["nix", "build", attribute, "--out-link", "target/image/nix-image.tar"])
                .dir(&root),
        )
        .or(hint),
        Step::run(Cmd::argv(["docker", "load", "-i", "target/image/nix-image.tar"]).dir(&root)),
    ])
}

/// The static binary built here, copied into a `FROM scratch` image.
fn host_steps<C: 'static>(target: &StaticTarget, reference: &str) -> Result<Vec<Step<C>>> {
    if !cfg!(target_os = "linux") {
        bail!(tr!("--image-builder host copies a binary built here into a Linux image, and this \
             is not Linux: use --image-builder dockerfile (Docker Desktop builds it in \
             Linux), or nix with a Linux builder"));
    }
    let mut steps = Vec::new();
    if target.rustflags.is_some() {
        // glibc linked statically needs its static archive (Fedora: glibc-static).
        steps.push(Step::probe(Cmd::argv(["gcc", "-print-file-name=libc.a"]), |_, out| {
            crate::preflight::static_libc(out.as_deref().ok())
        }));
    }
    let build = target.controller_build();
    let binary = target.release_dir(&project::target_dir()).join(crate::cargo::BINARY);
    let context = project::target_dir().join("image");
    steps.push(Step::long(build, tr!("building the static controller")));
    steps.push({
        let (binary, context) = (binary.clone(), context.clone());
        Step::own(
            tr!(
                "copy {binary} and a FROM scratch Dockerfile into {context}",
                binary = labkit::project::shown(&binary),
                context = labkit::project::shown(&context)
            ),
            move |_| Box::pin(async move { write_scratch_context(&binary, &context) }),
        )
    });
    // An unchanged binary hits Docker's build cache: the same image ID.
    steps.push(Step::run(Cmd::argv(["docker", "build", "-q", "-t", reference]).path(&context)));
    Ok(steps)
}

/// Each file is written beside its place and renamed into it: another `lab
/// up` building at the same time (two labs, a room's test) reads a whole
/// old file or a whole new one, never one being written.
fn write_scratch_context(binary: &Path, context: &Path) -> Result<()> {
    labkit::files::create_dir(context)?;
    // Beside the context, not in it: `docker build` sends the whole folder.
    let partial =
        |name: &str| context.with_file_name(format!(".image-{name}.{}", std::process::id()));
    std::fs::copy(binary, partial("my-controller")).with_context(|| {
        tr!(
            "cannot copy {binary} into {context}",
            binary = binary.display(),
            context = context.display()
        )
    })?;
    std::fs::rename(partial("my-controller"), context.join("my-controller"))?;
    std::fs::write(partial("Dockerfile"), SCRATCH_DOCKERFILE)?;
    std::fs::rename(partial("Dockerfile"), context.join("Dockerfile"))?;
    Ok(())
}

/// Builds the image and tags it as the Deployment expects; its reference.
pub async fn build(builder: Builder) -> Result<String> {
    let reference = reference()?;
    crate::plan::execute(steps::<()>(builder)?, &mut ()).await?;
    if !image_present(&reference).read().is_ok_and(|id| !id.is_empty()) {
        bail!(tr!("the build finished but docker has no image {reference}", reference));
    }
    Ok(reference)
}

/// The host build's image: the binary, a non-root user, nothing else.
const SCRATCH_DOCKERFILE: &str = "\
# Written by `cargo xtask` (xtask/src/image.rs): the static binary, nothing else.
FROM scratch
COPY my-controller /my-controller
USER 65532:65532
EXPOSE 8080
ENTRYPOINT [\"/my-controller\"]
";

/// `docker image inspect` of `reference`: it succeeds when the image is there.
pub fn image_present(reference: &str) -> Cmd {
    Cmd::argv(["docker", "image", "inspect", "--format", "{{.Id}}", reference])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The user the image runs as (distroless's "nonroot"); the Deployment agrees.
    const USER: &str = "65532:65532";

    #[test]
    fn the_tag_comes_from_the_deployment() {
        let reference = reference().unwrap();
        assert!(reference.starts_with("my-controller:"), "{reference}");
        assert!(!reference.ends_with(":latest"), "a :latest tag means pull policy Always");
        let version = env!("CARGO_PKG_VERSION");
        assert_eq!(reference, format!("my-controller:{version}"), "the tag is the crate version");
        assert_eq!(reference_in("  image: a:1\n"), Some("a:1".into()));
    }

    #[test]
    fn a_target_is_installed_when_the_sysroot_has_its_library() {
        let sysroot = Cmd::argv(["rustc", "--print", "sysroot"]).read().unwrap();
        let version = Cmd::argv(["rustc", "-vV"]).read().unwrap();
        let host = version.lines().find_map(|l| l.strip_prefix("host: ")).unwrap();
        assert!(has_target(Path::new(sysroot.trim()), host), "{host} in {sysroot}");
        assert!(!has_target(Path::new(sysroot.trim()), "no-such-unknown-target"));
    }

    #[test]
    fn the_scratch_image_runs_as_the_deployments_user() {
        assert!(SCRATCH_DOCKERFILE.contains(&format!("USER {USER}")));
        let deployment =
            std::fs::read_to_string(project::root().join("manifests/deployment.yaml")).unwrap();
        let (uid, gid) = USER.split_once(':').unwrap();
        assert!(deployment.contains(&format!("runAsUser: {uid}")));
        assert!(deployment.contains(&format!("runAsGroup: {gid}")));
    }
}
