//! The offline bundle: every image the kind lab needs in one archive, for a
//! room with bad Wi-Fi. The instructor runs `cargo xtask lab bundle -o
//! lab-bundle.tar` once (pulls the node image, builds the controller image);
//! attendees run `cargo xtask lab up --bundle lab-bundle.tar`, which loads it
//! and never pulls.
//!
//! Registry digests do not survive `docker save`/`docker load` with Docker's
//! classic image store, so the node image travels under its tag
//! (`kindest/node:v1.36.4`) and a lab started from a bundle creates its
//! cluster with `kind create cluster --image <that tag>`.

use std::path::Path;

use anyhow::{Context, Result, bail};
use xshell::{Shell, cmd};

use crate::image::{self, Builder};
use crate::lab::kind;

/// `kindest/node:v1.36.4@sha256:…` → `kindest/node:v1.36.4`.
pub fn node_tag(pinned: &str) -> &str {
    pinned.split('@').next().unwrap_or(pinned)
}

/// `lab bundle -o FILE`: pull the pinned node image (by digest), tag it, build
/// the controller image, save both into `output`.
pub fn create(output: &Path, builder: Builder) -> Result<()> {
    let sh = Shell::new()?;
    sh.change_dir(e2e::project::root());
    let pinned = kind::node_image()?;
    let tag = node_tag(&pinned);
    cmd!(sh, "docker pull {pinned}")
        .run()
        .context("pulling the kind node image failed (this step needs the network)")?;
    cmd!(sh, "docker tag {pinned} {tag}").run()?;
    let controller = image::build(&sh, builder)?.reference;
    save(&sh, &[tag, &controller], output)?;
    let size = std::fs::metadata(output)
        .map(|m| m.len() >> 20)
        .unwrap_or(0);
    eprintln!(
        "wrote {} ({size} MiB): {tag} and {controller}",
        output.display()
    );
    eprintln!(
        "attendees: cargo xtask lab up --bundle {}",
        output.display()
    );
    Ok(())
}

/// `docker save` of `images` into one archive.
pub fn save(sh: &Shell, images: &[&str], output: &Path) -> Result<()> {
    cmd!(sh, "docker save -o {output} {images...}")
        .run()
        .context("docker save failed")?;
    Ok(())
}

/// `docker load` of a bundle; returns the images it held.
pub fn load(sh: &Shell, bundle: &Path) -> Result<Vec<String>> {
    if !bundle.is_file() {
        bail!(
            "no bundle at {} (the instructor makes it with `cargo xtask lab bundle -o FILE`)",
            bundle.display()
        );
    }
    eprintln!("$ docker load -i {}", bundle.display());
    let out = cmd!(sh, "docker load -i {bundle}")
        .read()
        .context("docker load failed")?;
    let images: Vec<String> = out
        .lines()
        .filter_map(|l| l.strip_prefix("Loaded image: "))
        .map(|s| s.trim().to_string())
        .collect();
    for image in &images {
        eprintln!("  loaded {image}");
    }
    Ok(images)
}

/// What a bundle must hold for `lab up --bundle`.
pub fn check_contents(images: &[String], node_tag: &str, controller: &str) -> Result<()> {
    for wanted in [node_tag, controller] {
        if !images.iter().any(|i| i == wanted) {
            bail!(
                "the bundle holds {images:?}, not {wanted}: ask for a bundle made by this version of the kit"
            );
        }
    }
    Ok(())
}

/// The round trip CI runs with Docker: save the controller image, remove it,
/// load the archive, and find the same image again.
pub fn round_trip(dir: &Path) -> Result<()> {
    let sh = Shell::new()?;
    let controller = image::reference()?;
    let format = "{{.Id}}";
    let before = cmd!(sh, "docker image inspect --format {format} {controller}").read()?;
    let archive = dir.join("bundle-round-trip.tar");
    save(&sh, &[&controller], &archive)?;
    cmd!(sh, "docker rmi {controller}").run()?;
    let loaded = load(&sh, &archive)?;
    let after = cmd!(sh, "docker image inspect --format {format} {controller}").read()?;
    std::fs::remove_file(&archive).ok();
    if !loaded.contains(&controller) || before != after {
        bail!("bundle round trip: loaded {loaded:?}, image {before} became {after}");
    }
    eprintln!("bundle round trip: {controller} saved, removed and loaded back as {after}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_node_image_travels_under_its_tag() {
        let pinned = kind::node_image().unwrap();
        let tag = node_tag(&pinned);
        assert!(
            tag.starts_with("kindest/node:v1.") && !tag.contains('@'),
            "{tag}"
        );
    }

    #[test]
    fn a_bundle_must_hold_both_images() {
        let held = vec![
            "kindest/node:v1.36.4".to_string(),
            "my-controller:0.1.0".to_string(),
        ];
        assert!(check_contents(&held, "kindest/node:v1.36.4", "my-controller:0.1.0").is_ok());
        let err =
            check_contents(&held[..1], "kindest/node:v1.36.4", "my-controller:0.1.0").unwrap_err();
        assert!(err.to_string().contains("my-controller:0.1.0"));
    }
}
