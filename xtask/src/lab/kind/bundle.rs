//! The offline bundle: every image the kind lab needs in one archive, for a
//! room with bad Wi-Fi. The instructor runs `cargo xtask lab bundle -f
//! lab-bundle.tar` once (pulls the pinned node image, or takes the one built
//! here with `--node-image built`; builds the controller image); attendees
//! run `cargo xtask lab up --provider kind --bundle lab-bundle.tar`, which
//! loads it and never pulls or builds.
//!
//! The archive is `docker save`'s, with one more entry, `lab-kit-bundle.json`
//! (which images, for which CPU architecture); `docker load` ignores it.
//! Registry digests do not survive `docker save`/`docker load` with Docker's
//! classic image store, so the node image travels under its tag.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail, ensure};
use serde::{Deserialize, Serialize};

use super::{self as kind, NodeImage};
use crate::image::{self, Builder};
use labkit::command::Cmd;
use labkit::tr;

/// The bundle's own entry.
pub const MANIFEST_ENTRY: &str = "lab-kit-bundle.json";

/// Every image the course's pages and experiments run in a pod (`kubectl run … --image=nginx`):
/// a bundle carries them, and the nodes of a lab loaded from it have them.
pub const COURSE_IMAGES: &[&str] = &["nginx:latest"];

/// What a bundle holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// Docker's architecture name: `amd64`, `arm64`.
    pub arch: String,
    pub node_image: String,
    pub controller_image: String,
    /// The kit's version that made it.
    pub kit: String,
    /// The row of kind/node-images.toml the node image came from (the kind
    /// release it was published with); `None` for a node image built here or given.
    #[serde(default)]
    pub kind_release: Option<String>,
    /// [`COURSE_IMAGES`], loaded into the node by `lab up --bundle`.
    #[serde(default)]
    pub course_images: Vec<String>,
}

impl Manifest {
    /// Every image it holds: the node's, the controller's, the course's.
    pub fn images(&self) -> Vec<String> {
        let two = [self.node_image.clone(), self.controller_image.clone()];
        two.into_iter().chain(self.course_images.iter().cloned()).collect()
    }
}

/// `lab bundle -f FILE`: the node image (pulled by digest and tagged, or the
/// one built here), the controller image, one archive.
pub async fn create(output: &Path, builder: Builder, node: NodeImage) -> Result<()> {
    let mut kind_release = None;
    let node = match node {
        NodeImage::Pinned => {
            let table = labkit::kind_releases::table()?;
            let found = kind::kind_version().with_context(|| {
                tr!("kind is not on PATH: the bundle's node image is the one of the kind release found")
            })?;
            let row =
                labkit::kind_releases::for_kind(&table, &found).map_err(anyhow::Error::msg)?;
            let tag = labkit::kind_releases::node_tag(&row.image).to_string();
            Cmd::argv(["docker", "pull", &row.image])
                .run()
                .with_context(|| tr!("pulling the kind node image failed (this step needs the network; `--node-image built` needs none)"))?;
            Cmd::argv(["docker", "tag", &row.image, &tag]).run()?;
            kind_release = Some(row.kind);
            tag
        }
        NodeImage::Built => {
            kind::build_node_image().run_long(&tr!("building the kind node image"))?;
            kind::BUILT_IMAGE.to_string()
        }
        NodeImage::Given(reference) => {
            ensure!(
                kind::image_present(&reference).read().is_ok(),
                tr!("Docker has no image {reference}: pull or build it first", reference)
            );
            reference
        }
    };
    let controller = image::build(builder).await?;
    for course in COURSE_IMAGES {
        if kind::image_present(course).read().is_err() {
            Cmd::argv(["docker", "pull", course]).run().with_context(|| {
                tr!(
                    "pulling {course} failed: it is step 2's pod (this step needs the network)",
                    course
                )
            })?;
        }
    }
    let manifest = Manifest {
        arch: kind::docker_arch().to_string(),
        node_image: node.clone(),
        controller_image: controller.clone(),
        kit: env!("CARGO_PKG_VERSION").to_string(),
        kind_release,
        course_images: COURSE_IMAGES.iter().map(|i| i.to_string()).collect(),
    };
    Cmd::argv(["docker", "save", "-o"])
        .path(output)
        .args(manifest.images())
        .run()
        .with_context(|| tr!("docker save failed"))?;
    let dir = output.parent().map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from("."));
    let entry = dir.join(MANIFEST_ENTRY);
    labkit::files::write_public(&entry, serde_json::to_string_pretty(&manifest)? + "\n")?;
    let appended =
        Cmd::argv(["tar", "-rf"]).path(output).arg("-C").path(&dir).arg(MANIFEST_ENTRY).run();
    let _ = std::fs::remove_file(&entry);
    appended?;
    let size = std::fs::metadata(output).map(|m| m.len() >> 20).unwrap_or(0);
    let (path, arch) = (output.display(), &manifest.arch);
    println!(
        "{}",
        tr!(
            "wrote {path} ({size} MiB, {arch}): {node}, {controller} and the course's {course}",
            path,
            size,
            arch,
            node,
            controller,
            course = COURSE_IMAGES.join(", ")
        )
    );
    println!("{} $ cargo xtask lab up --provider kind --bundle {path}", tr!("attendees:"));
    Ok(())
}

/// The manifest of a bundle (read before anything is loaded).
pub fn read_manifest(bundle: &Path) -> Result<Manifest> {
    ensure!(
        bundle.is_file(),
        tr!(
            "no bundle at {path} (the instructor makes it with `cargo xtask lab bundle -f FILE`)",
            path = bundle.display()
        )
    );
    let text =
        Cmd::argv(["tar", "-xOf"]).path(bundle).arg(MANIFEST_ENTRY).read().with_context(|| {
            tr!(
                "{path} has no {entry}: not made by `cargo xtask lab bundle` of this kit version",
                path = bundle.display(),
                entry = MANIFEST_ENTRY
            )
        })?;
    serde_json::from_str(&text).with_context(|| {
        tr!("{entry} in {path} is garbled", entry = MANIFEST_ENTRY, path = bundle.display())
    })
}

/// The images `docker load` printed it loaded.
pub fn loaded(output: &str) -> Vec<String> {
    output
        .lines()
        .filter_map(|l| l.strip_prefix("Loaded image: "))
        .map(|s| s.trim().to_string())
        .collect()
}

/// A bundle's pinned node image is only good with the kind release it was
/// published with: the one the bundle's row names.
pub fn check_kind(manifest: &Manifest, kind_version: Option<&str>) -> Result<()> {
    let Some(release) = &manifest.kind_release else {
        return Ok(());
    };
    let found = kind_version.and_then(labkit::kind_releases::version_of);
    let found = found.map_or_else(|| tr!("none"), String::from);
    ensure!(
        found.starts_with(&format!("{release}.")),
        tr!(
            "the bundle's node image {image} was published with kind {release}.x, and this machine has kind {found}: \
             install kind {release}.x, or ask for a bundle made with kind {found}",
            image = manifest.node_image,
            release,
            found
        )
    );
    Ok(())
}

/// A bundle must be for this machine and hold what its manifest says.
pub fn check(manifest: &Manifest, loaded: &[String], arch: &str) -> Result<()> {
    if manifest.arch != arch {
        bail!(tr!(
            "the bundle holds {held} images and this machine is {arch}: ask for a bundle made on an {arch} machine",
            held = manifest.arch,
            arch
        ));
    }
    for wanted in &manifest.images() {
        ensure!(
            loaded.iter().any(|i| i == wanted),
            tr!(
                "the bundle should hold {wanted} but loaded {loaded}: make it again with `cargo xtask lab bundle`",
                wanted,
                loaded = format!("{loaded:?}")
            )
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest() -> Manifest {
        Manifest {
            arch: "amd64".into(),
            node_image: "kindest/node:v1.36.4".into(),
            controller_image: "my-controller:0.1.0".into(),
            kit: "0.1.0".into(),
            kind_release: Some("v0.33".into()),
            course_images: vec!["nginx:latest".into()],
        }
    }

    #[test]
    fn a_bundle_names_the_kind_release_its_node_image_needs() {
        assert!(check_kind(&manifest(), Some("kind v0.33.1 go1.26.8 linux/amd64")).is_ok());
        let error = check_kind(&manifest(), Some("kind v0.32.0 go1.25 linux/amd64")).unwrap_err();
        assert!(error.to_string().contains("install kind v0.33.x"), "{error}");
        assert!(check_kind(&manifest(), None).is_err());
        let built = Manifest { kind_release: None, ..manifest() };
        assert!(check_kind(&built, None).is_ok(), "a node image built here names no release");
    }

    #[test]
    fn the_node_image_travels_under_its_tag() {
        let pinned = labkit::kind_releases::table().unwrap()[0].image.clone();
        let tag = labkit::kind_releases::node_tag(&pinned);
        assert!(tag.starts_with("kindest/node:v1.") && !tag.contains('@'), "{tag}");
    }

    #[test]
    fn a_bundle_must_hold_both_images_for_this_machine() {
        let held = loaded(
            "Loaded image: kindest/node:v1.36.4\nLoaded image: my-controller:0.1.0\nLoaded image: nginx:latest\n",
        );
        assert!(check(&manifest(), &held, "amd64").is_ok());
        let error = check(&manifest(), &held[..1], "amd64").unwrap_err();
        assert!(error.to_string().contains("my-controller:0.1.0"));
        let error = check(&manifest(), &held[..2], "amd64").unwrap_err();
        assert!(error.to_string().contains("nginx:latest"), "{error}");
        let error = check(&manifest(), &held, "arm64").unwrap_err().to_string();
        assert!(error.contains("amd64 images") && error.contains("arm64"), "{error}");
    }
}
