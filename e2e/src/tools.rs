//! Facts about the tools and files around the lab, for the version check.

use std::path::Path;

use anyhow::Context as _;

/// kubectl's client minor version, when kubectl is on PATH and answers.
pub fn kubectl_client_minor() -> Option<u32> {
    let out = std::process::Command::new("kubectl")
        .args(["version", "--client", "-o", "json"])
        .output()
        .ok()?;
    let info: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
    controller::version::parse_minor(info["clientVersion"]["minor"].as_str()?)
}

/// The minor version of the `kindest/node` image pinned in a kind cluster file.
pub fn kind_node_minor(cluster_file: &Path) -> anyhow::Result<u32> {
    let text = std::fs::read_to_string(cluster_file)
        .with_context(|| format!("cannot read {}", cluster_file.display()))?;
    node_image_minor(&text).with_context(|| {
        format!(
            "{} pins no kindest/node:v1.N.x image",
            cluster_file.display()
        )
    })
}

/// `kindest/node:v1.36.4@sha256:…` → 36.
pub fn node_image_minor(text: &str) -> Option<u32> {
    let tag = text.split("kindest/node:v").nth(1)?;
    let mut parts = tag.split(['.', '@', '\n', ' ']);
    let (major, minor) = (parts.next()?, parts.next()?);
    (major == "1").then_some(())?;
    minor.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_node_image_minor() {
        assert_eq!(
            node_image_minor("image: kindest/node:v1.36.4@sha256:abc"),
            Some(36)
        );
        assert_eq!(node_image_minor("image: kindest/node:v1.35.0\n"), Some(35));
        assert_eq!(node_image_minor("image: nginx:1.2"), None);
    }
}
