//! Writing files with the permissions they need.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

use anyhow::{Context, Result};

/// Private keys, tokens and kubeconfigs: readable by the owner only (0600).
pub fn write_private(path: &Path, contents: impl AsRef<[u8]>) -> Result<()> {
    write_with_mode(path, contents.as_ref(), 0o600)
}

/// Certificates and other public material (0644).
pub fn write_public(path: &Path, contents: impl AsRef<[u8]>) -> Result<()> {
    write_with_mode(path, contents.as_ref(), 0o644)
}

fn write_with_mode(path: &Path, contents: &[u8], mode: u32) -> Result<()> {
    // `mode` only applies when the file is created; an older file keeps its bits, so set them
    // before writing the secret into it.
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    file.set_permissions(fs::Permissions::from_mode(mode))
        .with_context(|| format!("cannot chmod {:o} {}", mode, path.display()))?;
    file.write_all(contents).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

/// The last `lines` lines of a log file, for error messages; a note when it cannot be read.
pub fn tail(path: &Path, lines: usize) -> String {
    match fs::read(path) {
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes);
            let all: Vec<&str> = text.lines().collect();
            let start = all.len().saturating_sub(lines);
            if all.is_empty() {
                format!("({} is empty)", path.display())
            } else {
                format!("last lines of {}:\n{}", path.display(), all[start..].join("\n"))
            }
        }
        Err(error) => format!("({} cannot be read: {error})", path.display()),
    }
}

/// A number alone in a file (a pid file, a /proc/sys setting); `None` when
/// the file is missing or holds something else.
pub fn read_number<T: std::str::FromStr>(path: impl AsRef<Path>) -> Option<T> {
    fs::read_to_string(path).ok()?.trim().parse().ok()
}
