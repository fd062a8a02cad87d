//! The controller image: the static `my-controller` binary and nothing else,
//! run as a non-root user. Three ways to build it, chosen automatically and
//! overridable with `--image-builder`:
//!
//! * `nix`: `nix build .#image` (the flake's dockerTools image), in the dev shell;
//! * `host`: a static release binary built here (musl when installed, else glibc
//!   with `-C target-feature=+crt-static`) copied into a `FROM scratch` image.
//!   It pulls no base image, so it works offline;
//! * `dockerfile`: the multi-stage `Dockerfile` (portable: macOS with Docker
//!   Desktop), which pulls the Rust build image.
//!
//! The tag is the one `manifests/deployment.yaml` uses, read from there.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::ValueEnum;
use xshell::{Shell, cmd};

use crate::{cmdline, plan::Step};
use e2e::project;

/// The image label holding the SHA-256 of the binary inside (host builds):
/// an unchanged binary is not built into a new image.
pub const BINARY_LABEL: &str = "lab-kit.binary-sha256";
/// The user the image runs as (distroless's "nonroot"); the Deployment agrees.
pub const USER: &str = "65532:65532";

/// `--image-builder`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Builder {
    /// nix in the dev shell, else host on Linux, else dockerfile.
    Auto,
    Nix,
    Host,
    Dockerfile,
}

/// The image reference the Deployment runs (`image:` in manifests/deployment.yaml).
pub fn reference() -> Result<String> {
    let path = project::manifests_dir().join("deployment.yaml");
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    reference_in(&text).with_context(|| format!("{} has no `image:` line", path.display()))
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
    let in_dev_shell = std::env::var_os("LAB_KIT_NIX_SHELL").is_some();
    // The flake builds images on Linux only (macOS needs a Linux builder).
    if in_dev_shell && cfg!(target_os = "linux") && crate::lab::binaries::on_path("nix").is_some() {
        eprintln!("image builder auto: in the Nix dev shell: nix build .#image");
        Builder::Nix
    } else if cfg!(target_os = "linux") {
        eprintln!("image builder auto: Linux: a static binary built here in a FROM scratch image");
        Builder::Host
    } else {
        eprintln!("image builder auto: not Linux: the multi-stage Dockerfile");
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
    /// linked statically (static-pie; no musl needed).
    pub fn detect(sh: &Shell) -> Result<StaticTarget> {
        let host = cmd!(sh, "rustc -vV").read()?;
        let triple = host
            .lines()
            .find_map(|l| l.strip_prefix("host: "))
            .context("rustc -vV printed no host")?
            .to_string();
        let musl = triple.replace("-gnu", "-musl");
        let installed = cmd!(sh, "rustup target list --installed")
            .read()
            .unwrap_or_default();
        Ok(if installed.lines().any(|t| t == musl) {
            StaticTarget {
                triple: musl,
                rustflags: None,
            }
        } else {
            StaticTarget {
                triple,
                rustflags: Some("-C target-feature=+crt-static"),
            }
        })
    }

    pub fn binary(&self, target_dir: &Path) -> PathBuf {
        target_dir
            .join(&self.triple)
            .join("release")
            .join(crate::lab::controller::BINARY)
    }
}

/// The commands a build runs, for `--dry-run` and the snapshot test.
pub fn plan(builder: Builder, reference: &str, target: &StaticTarget, root: &Path) -> Vec<Step> {
    let context = root.join("target/image");
    match builder {
        Builder::Auto => unreachable!("resolve() first"),
        Builder::Nix => vec![
            Step::run([
                "nix",
                "build",
                ".#image",
                "--out-link",
                "target/image/nix-image.tar",
            ]),
            Step::run(["docker", "load", "-i", "target/image/nix-image.tar"]),
        ],
        Builder::Dockerfile => vec![Step::run([
            "docker",
            "build",
            "-t",
            reference,
            "-f",
            "Dockerfile",
            ".",
        ])],
        Builder::Host => {
            let mut build = Step::run([
                "cargo",
                "build",
                "--release",
                "-p",
                "controller",
                "--bin",
                "my-controller",
                "--target",
                &target.triple,
            ]);
            if let Some(flags) = target.rustflags {
                build = build.env("RUSTFLAGS", flags);
            }
            let binary = target.binary(&root.join("target"));
            vec![
                build,
                Step::note(format!(
                    "copy {} and a FROM scratch Dockerfile into {}",
                    binary.display(),
                    context.display()
                )),
                Step::run([
                    "docker",
                    "build",
                    "--label",
                    &format!("{BINARY_LABEL}=<sha256 of the binary>"),
                    "-t",
                    reference,
                    "target/image",
                ]),
            ]
        }
    }
}

/// What a build produced.
pub struct Built {
    pub reference: String,
}

/// Builds the image (unless an identical one exists) and tags it as the Deployment expects.
pub fn build(sh: &Shell, builder: Builder) -> Result<Built> {
    let reference = reference()?;
    let root = project::root();
    let _dir = sh.push_dir(&root);
    match resolve(builder) {
        Builder::Auto => unreachable!("resolved above"),
        Builder::Host => return build_on_host(sh, &reference, &root),
        Builder::Nix => {
            cmd!(
                sh,
                "nix build .#image --out-link target/image/nix-image.tar"
            )
            .run()?;
            cmd!(sh, "docker load -i target/image/nix-image.tar").run()?;
        }
        Builder::Dockerfile => cmd!(sh, "docker build -t {reference} -f Dockerfile .").run()?,
    }
    if image_id(sh, &reference).is_none() {
        bail!("the build finished but docker has no image {reference}");
    }
    Ok(Built { reference })
}

fn build_on_host(sh: &Shell, reference: &str, root: &Path) -> Result<Built> {
    let target = StaticTarget::detect(sh)?;
    let mut cargo = cmdline::cargo(
        sh,
        &[
            "build",
            "--release",
            "-p",
            "controller",
            "--bin",
            crate::lab::controller::BINARY,
            "--target",
            &target.triple,
        ],
    );
    if let Some(flags) = target.rustflags {
        cargo = cargo.env("RUSTFLAGS", flags);
    }
    cargo
        .run()
        .context("building the static controller binary failed")?;
    let binary = target.binary(&project::target_dir());
    let bytes =
        std::fs::read(&binary).with_context(|| format!("cannot read {}", binary.display()))?;
    let sha = sha256_hex(&bytes);
    let label = format!("{{{{ index .Config.Labels \"{BINARY_LABEL}\" }}}}");
    let current = cmdline::read(
        &cmd!(sh, "docker image inspect --format {label} {reference}")
            .quiet()
            .ignore_stderr(),
    )
    .unwrap_or_default();
    if current.trim() == sha {
        eprintln!(
            "image {reference} already holds this binary ({}…): not rebuilt",
            &sha[..12]
        );
        return Ok(Built {
            reference: reference.to_string(),
        });
    }
    let context = root.join("target/image");
    std::fs::create_dir_all(&context)?;
    std::fs::copy(&binary, context.join("my-controller")).with_context(|| {
        format!(
            "cannot copy {} into {}",
            binary.display(),
            context.display()
        )
    })?;
    std::fs::write(context.join("Dockerfile"), SCRATCH_DOCKERFILE)?;
    let label = format!("{BINARY_LABEL}={sha}");
    cmd!(sh, "docker build --label {label} -t {reference} {context}").run()?;
    Ok(Built {
        reference: reference.to_string(),
    })
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

/// The image's ID, if docker has it.
fn image_id(sh: &Shell, reference: &str) -> Option<String> {
    let format = "{{.Id}}";
    cmd!(sh, "docker image inspect --format {format} {reference}")
        .quiet()
        .ignore_stderr()
        .read()
        .ok()
        .filter(|id| !id.is_empty())
}

fn sha256_hex(bytes: &[u8]) -> String {
    ring::digest::digest(&ring::digest::SHA256, bytes)
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tag_comes_from_the_deployment() {
        let reference = reference().unwrap();
        assert!(reference.starts_with("my-controller:"), "{reference}");
        assert!(
            !reference.ends_with(":latest"),
            "a :latest tag means pull policy Always"
        );
        let version = env!("CARGO_PKG_VERSION");
        assert_eq!(
            reference,
            format!("my-controller:{version}"),
            "the tag is the crate version"
        );
        assert_eq!(reference_in("  image: a:1\n"), Some("a:1".into()));
    }

    #[test]
    fn sha256_of_a_known_input() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn the_scratch_image_runs_as_the_deployments_user() {
        assert!(SCRATCH_DOCKERFILE.contains(&format!("USER {USER}")));
        let deployment =
            std::fs::read_to_string(project::manifests_dir().join("deployment.yaml")).unwrap();
        let (uid, gid) = USER.split_once(':').unwrap();
        assert!(deployment.contains(&format!("runAsUser: {uid}")));
        assert!(deployment.contains(&format!("runAsGroup: {gid}")));
    }
}
