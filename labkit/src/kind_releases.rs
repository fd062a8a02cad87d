//! `kind/node-images.toml`: the node image each kind release was published
//! with. kind only guarantees the node images of its own release, so the kit
//! runs the row of the kind it finds; `lab up`, `lab bundle`, `doctor`, the
//! version check and the repository's tidy test all read this one table.

use anyhow::Context as _;
use serde::Deserialize;

use crate::{project, tr};

/// The table, relative to the project root.
pub const FILE: &str = "kind/node-images.toml";

#[derive(Deserialize)]
struct Table {
    release: Vec<Release>,
}

/// One row: a kind release line and its node image.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct Release {
    /// `v0.33`: every patch release of the line.
    pub kind: String,
    /// `kindest/node:v1.36.4@sha256:…`.
    pub image: String,
}

/// Every row, in the file's order.
pub fn table() -> anyhow::Result<Vec<Release>> {
    let path = project::root().join(FILE);
    let table: Table = toml::from_str(&crate::files::read(&path)?)
        .with_context(|| tr!("{path} is not a node-image table", path = path.display()))?;
    Ok(table.release)
}

/// `kind v0.33.0 go1.26.8 linux/amd64` → `v0.33.0`.
pub fn version_of(kind_version_output: &str) -> Option<&str> {
    kind_version_output.split_whitespace().find(|w| w.starts_with("v0."))
}

/// The row of the kind that printed `kind_version_output` (`kind version`),
/// or the one line that says which releases are supported and how to add one.
pub fn for_kind(table: &[Release], kind_version_output: &str) -> Result<Release, String> {
    let version = version_of(kind_version_output).unwrap_or(kind_version_output.trim());
    let line: String = version.split('.').take(2).collect::<Vec<_>>().join(".");
    table.iter().find(|r| r.kind == line).cloned().ok_or_else(|| {
        let supported: Vec<&str> = table.iter().map(|r| r.kind.as_str()).collect();
        tr!(
            "kind {version} has no node image in {file} (supported: {supported}): install one of those, \
             or add a row for {line} with the Kubernetes node image that release was published with",
            version,
            file = FILE,
            supported = supported.join(", "),
            line
        )
    })
}

/// `kindest/node:v1.36.4@sha256:…` → 36.
pub fn image_minor(image: &str) -> Option<u32> {
    let tag = image.split(":v").nth(1)?;
    let mut parts = tag.split(['.', '@']);
    let (major, minor) = (parts.next()?, parts.next()?);
    (major == "1").then_some(())?;
    minor.parse().ok()
}

/// `kindest/node:v1.36.4@sha256:…` → `kindest/node:v1.36.4`.
pub fn node_tag(pinned: &str) -> &str {
    pinned.split('@').next().unwrap_or(pinned)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: &str = "[[release]]\nkind = \"v0.32\"\nimage = \"kindest/node:v1.36.1@sha256:aa\"\n\n\
                         [[release]]\nkind = \"v0.33\"\nimage = \"kindest/node:v1.36.4@sha256:bb\"\n";

    #[test]
    fn each_kind_release_gets_its_row() {
        let table = toml::from_str::<Table>(TABLE).unwrap().release;
        let row = for_kind(&table, "kind v0.32.1 go1.25.0 linux/amd64").unwrap();
        assert_eq!(row.image, "kindest/node:v1.36.1@sha256:aa");
        assert_eq!(for_kind(&table, "kind v0.33.0 go1.26.8 darwin/arm64").unwrap().kind, "v0.33");
    }

    #[test]
    fn a_release_without_a_row_says_what_is_supported() {
        let table = toml::from_str::<Table>(TABLE).unwrap().release;
        let error = for_kind(&table, "kind v0.34.0 go1.27.0 linux/amd64").unwrap_err();
        assert!(
            error.contains("v0.34.0")
                && error.contains("v0.32, v0.33")
                && error.contains("add a row for v0.34"),
            "{error}"
        );
    }

    #[test]
    fn reads_the_minor_of_an_image() {
        assert_eq!(image_minor("kindest/node:v1.36.4@sha256:abc"), Some(36));
        assert_eq!(image_minor("lab-kit/kind-node:v1.36.3-abcdef"), Some(36));
        assert_eq!(image_minor("nginx:1.2"), None);
    }

    #[test]
    fn the_repository_table_reads() {
        assert!(!table().unwrap().is_empty());
    }
}
