//! `cargo maint node-image`: a kind node image for Kubernetes 1.36, built
//! on this machine from nothing but Debian's packages and Go modules — for
//! machines that cannot pull `kindest/node` (CI here, a room with no
//! registry). `kind build node-image` cannot do it: it pulls with
//! `ctr content fetch`. Tagged as well [`BUILT_IMAGE`], what `lab up
//! --node-image built` runs (and builds with this, unless it is up to date).
//!
//! What goes in, following kind v0.33's own base and node images:
//! * a Debian rootfs from `debootstrap` ([`rootfs`]), the mirror read from
//!   this machine's apt sources;
//! * containerd, runc, crictl and kind's CNI plugins, Kubernetes' kubelet,
//!   kubeadm and kubectl, built from the Go modules under `maint/node-image/`
//!   and `xtask/envtest/` ([`go_builds`]), at the versions kind's base image
//!   uses (checked against its Dockerfile at build time);
//! * kind's base files (entrypoint, containerd config, units, hooks) from the
//!   `sigs.k8s.io/kind` module in the Go module cache ([`stage`]);
//! * the control-plane images kubeadm asks for, built from the same modules
//!   and preloaded into the node's containerd ([`images`]);
//! * `/kind/version`, and a pod network: a static ptp + host-local conflist
//!   for kind's first node range (one node).
//!
//! The image's tag carries a fingerprint of every input (the Go modules, the
//! rootfs recipe, this builder's own source), so it is rebuilt only when one
//! changes; each part is cached under `target/node-image/` on its own.

pub mod go_builds;
pub mod images;
pub mod rootfs;
pub mod stage;

use std::path::PathBuf;

use anyhow::{Context as _, Result, bail};

use labkit::command::Cmd;
use labkit::project;
use xtask::plan::{self, Step};

use labkit::go_build::{self, GoComponent};
use xtask::lab::binaries::{ENVTEST, KUBERNETES_DIR};
use xtask::lab::kind::{BUILT_IMAGE, image_present};

/// The repository of the images this builder makes.
pub const REPOSITORY: &str = "lab-kit/kind-node";
/// Label on the image: the fingerprint of its inputs.
pub const FINGERPRINT_LABEL: &str = "lab-kit.node-image.fingerprint";

/// The builder's own source, part of the fingerprint: a change to how the
/// image is made is a change of input.
const SOURCES: &[&str] = &[
    include_str!("mod.rs"),
    include_str!("go_builds.rs"),
    include_str!("images.rs"),
    include_str!("rootfs.rs"),
    include_str!("stage.rs"),
];

/// `--mirror` / `--suite` of `cargo maint node-image`.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct Source {
    /// The Debian mirror debootstrap fetches from (default: this machine's apt sources).
    #[arg(long, value_name = "URL", env = xtask::mirrors::DEBIAN_MIRROR_ENV)]
    pub mirror: Option<String>,
    /// The Debian suite of the rootfs (default: the one the apt sources name, else bookworm).
    #[arg(long, value_name = "NAME")]
    pub suite: Option<String>,
}

/// Everything the image is made from, and where each part is cached.
pub struct Recipe {
    /// `v1.36.3`: the Kubernetes module's version.
    pub kubernetes: String,
    pub arch: Arch,
    pub components: Vec<GoComponent>,
    pub rootfs: rootfs::Rootfs,
    /// `$(go env GOMODCACHE)`; `None` without Go (then only the reference is known).
    pub module_cache: Option<PathBuf>,
    /// `target/node-image`.
    pub cache: PathBuf,
    pub fingerprint: String,
}

/// The machine's architecture in the names each tool uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Arch {
    /// Go's and Docker's: `amd64`, `arm64` (Debian's too).
    pub go: &'static str,
    /// Debian's multiarch directory: `x86_64-linux-gnu`.
    pub multiarch: &'static str,
}

impl Arch {
    pub fn host() -> Result<Arch> {
        match std::env::consts::ARCH {
            "x86_64" => Ok(Arch { go: "amd64", multiarch: "x86_64-linux-gnu" }),
            "aarch64" => Ok(Arch { go: "arm64", multiarch: "aarch64-linux-gnu" }),
            other => bail!("kind node images exist for x86_64 and aarch64, not {other}"),
        }
    }
}

impl Recipe {
    /// The recipe for this machine; `source` overrides the rootfs's mirror and suite.
    pub fn new(source: &Source) -> Result<Recipe> {
        if !cfg!(target_os = "linux") {
            bail!(
                "the node image is built on Linux (debootstrap, a Linux Docker engine): \
                 on this machine use the pinned kindest/node, or an image built on Linux and \
                 carried in a bundle (`cargo xtask lab bundle --node-image built` there)"
            );
        }
        let arch = Arch::host()?;
        let components = go_build::components(ENVTEST.iter().chain(go_builds::NODE))?;
        let kubernetes = go_build::required_version(
            &go_build::read_go_mod(KUBERNETES_DIR)?,
            "k8s.io/kubernetes",
        )?;
        let rootfs = rootfs::Rootfs::new(source, arch)?;
        let module_cache = labkit::tools::on_path("go")
            .and_then(|_| Cmd::argv(["go", "env", "GOMODCACHE"]).read().ok())
            .map(PathBuf::from);
        let cache = project::target_dir().join("node-image");
        let mut inputs: Vec<String> = SOURCES.iter().map(|s| s.to_string()).collect();
        inputs.extend(components.iter().map(|c| c.fingerprint.clone()));
        inputs.push(rootfs.fingerprint());
        inputs.push(arch.go.to_string());
        let fingerprint =
            labkit::fingerprint::sha256_hex(inputs.join("\n--\n").as_bytes())[..12].to_string();
        Ok(Recipe { kubernetes, arch, components, rootfs, module_cache, cache, fingerprint })
    }

    /// `lab-kit/kind-node:v1.36.3-<fingerprint>`.
    pub fn reference(&self) -> String {
        format!("{REPOSITORY}:{}-{}", self.kubernetes, self.fingerprint)
    }

    pub fn component(&self, name: &str) -> Result<&GoComponent> {
        self.components
            .iter()
            .find(|c| c.name == name)
            .with_context(|| format!("no Go component {name}"))
    }

    /// A program built by one of the components.
    pub fn binary(&self, component: &str, program: &str) -> Result<PathBuf> {
        Ok(self.out_dir(self.component(component)?).join(program))
    }

    /// Where `component` is built: `<cache>/go/<name>-<fingerprint>/`.
    pub fn out_dir(&self, component: &GoComponent) -> PathBuf {
        self.cache.join("go").join(format!("{}-{}", component.name, component.fingerprint))
    }

    /// Where a module version is unpacked in the Go module cache (capital
    /// letters are escaped as `!` + lowercase there).
    pub fn module_dir(&self, module: &str, version: &str) -> Result<PathBuf> {
        let escaped: String = module
            .chars()
            .flat_map(|c| {
                if c.is_ascii_uppercase() { vec!['!', c.to_ascii_lowercase()] } else { vec![c] }
            })
            .collect();
        let cache = self.module_cache.as_ref().context(
            "the node image is built from Go modules: install Go 1.26 or newer (`go` is not on PATH)",
        )?;
        Ok(cache.join(format!("{escaped}@{version}")))
    }

    /// sigs.k8s.io/kind in the module cache: its base-image files and Dockerfile.
    pub fn kind_module(&self) -> Result<PathBuf> {
        let kind = self.component("kind")?;
        self.module_dir("sigs.k8s.io/kind", &kind.version)
    }

    /// A scratch directory of this build's, for docker build contexts and archives.
    pub fn work(&self) -> PathBuf {
        self.cache.join(format!("work-{}", self.fingerprint))
    }

    /// The container the node image is assembled in.
    pub fn build_container(&self) -> String {
        format!("lab-kit-node-build-{}", self.fingerprint)
    }
}

/// What the build learns as it goes.
#[derive(Default)]
pub struct Build {
    /// `ctr oci spec` of the built ctr.
    pub oci_spec: String,
    /// Whether the rootfs image is in Docker already.
    pub rootfs_image: bool,
}

/// `cargo maint node-image [--dry-run]`: build the image unless it is there,
/// tag it [`BUILT_IMAGE`]; print its reference.
pub async fn run(source: &Source, dry_run: bool) -> Result<std::process::ExitCode> {
    let recipe = Recipe::new(source)?;
    let reference = recipe.reference();
    if dry_run {
        println!("$ {}", image_present(&reference));
        println!("# when it is missing:");
        print!("{}", plan::render(&build_plan(&recipe)?));
        return Ok(std::process::ExitCode::SUCCESS);
    }
    ensure(&recipe).await?;
    Cmd::argv(["docker", "tag", &reference, BUILT_IMAGE]).run()?;
    println!("{reference}");
    Ok(std::process::ExitCode::SUCCESS)
}

/// The image's reference, built first when it is not in Docker yet.
pub async fn ensure(recipe: &Recipe) -> Result<String> {
    let reference = recipe.reference();
    // A second build of the same cache (another `lab up`, `cargo maint test`'s Docker part
    // while its first part builds) waits for the first and then finds the image built.
    let _lock = labkit::lock::wait(&recipe.cache.join("build.lock")).await?;
    if image_present(&reference).read().is_ok() {
        labkit::progress!("node image {reference} is up to date (its inputs are unchanged)");
        return Ok(reference);
    }
    labkit::progress!(
        "building the kind node image {reference} (cached parts under {})",
        recipe.cache.display()
    );
    let started = std::time::Instant::now();
    let mut build = Build::default();
    let result = plan::execute(build_plan(recipe)?, &mut build).await;
    // The assembly container never outlives the build, whatever happened.
    let _ = Cmd::argv(["docker", "rm", "-f", &recipe.build_container()]).output();
    result.context("building the kind node image failed (the failing command is above)")?;
    let _ = std::fs::remove_dir_all(recipe.work());
    labkit::progress!("built node image {reference} in {} s", started.elapsed().as_secs());
    Ok(reference)
}

/// Every step of a build, in order; parts already cached are skipped.
pub fn build_plan(recipe: &Recipe) -> Result<Vec<Step<Build>>> {
    let mut steps = go_builds::steps(recipe)?;
    steps.extend(rootfs::steps(recipe)?);
    steps.extend(go_builds::runc_steps(recipe)?);
    steps.extend(images::steps(recipe)?);
    steps.extend(stage::steps(recipe)?);
    Ok(steps)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn module_cache_paths_escape_capitals() {
        let recipe = Recipe {
            kubernetes: "v1.36.3".into(),
            arch: Arch::host().unwrap(),
            components: Vec::new(),
            rootfs: rootfs::Rootfs::for_test(),
            module_cache: Some(PathBuf::from("/m")),
            cache: PathBuf::from("/c"),
            fingerprint: "abc".into(),
        };
        assert_eq!(
            recipe.module_dir("github.com/BurntSushi/toml", "v1.4.0").unwrap(),
            PathBuf::from("/m/github.com/!burnt!sushi/toml@v1.4.0")
        );
        assert_eq!(recipe.reference(), "lab-kit/kind-node:v1.36.3-abc");
    }
}
