//! Reading files, each error naming the file; writing them with the permissions they need,
//! removing a state folder.

use std::fs::{self, OpenOptions};
use std::io::{ErrorKind::NotFound, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

use anyhow::{Context, Result};

use crate::tr;

/// The text of `path`.
pub fn read(path: &Path) -> Result<String> {
    fs::read_to_string(path).with_context(|| tr!("cannot read {path}", path = path.display()))
}

/// The text of a file of the repository, `relative` to its root.
pub fn read_in_repo(relative: &str) -> Result<String> {
    read(&crate::project::root().join(relative))
}

/// The text of `path`; `None` when there is no such file.
pub fn read_if_there(path: &Path) -> Result<Option<String>> {
    match read(path) {
        Err(e) if e.downcast_ref::<std::io::Error>().map(|e| e.kind()) == Some(NotFound) => {
            Ok(None)
        }
        text => text.map(Some),
    }
}

/// Creates folder `dir` and its parents, if they are not there.
pub fn create_dir(dir: &Path) -> Result<()> {
    fs::create_dir_all(dir).with_context(|| tr!("cannot create {path}", path = dir.display()))
}

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
        .with_context(|| tr!("cannot write {path}", path = path.display()))?;
    file.set_permissions(fs::Permissions::from_mode(mode)).with_context(|| {
        tr!("cannot chmod {mode} {path}", mode = format!("{mode:o}"), path = path.display())
    })?;
    file.write_all(contents).with_context(|| tr!("cannot write {path}", path = path.display()))?;
    Ok(())
}

/// Removes `dir` and what it holds, if it is there; whether it was.
pub fn remove_dir(dir: &Path) -> Result<bool> {
    let there = dir.exists();
    if there {
        fs::remove_dir_all(dir)
            .with_context(|| tr!("cannot remove {path}", path = dir.display()))?;
    }
    Ok(there)
}

/// The last `lines` lines of a log file, for error messages; a note when it cannot be read.
pub fn tail(path: &Path, lines: usize) -> String {
    match fs::read(path) {
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes);
            let all: Vec<&str> = text.lines().collect();
            let (start, path) = (all.len().saturating_sub(lines), path.display());
            if all.is_empty() {
                tr!("({path} is empty)", path)
            } else {
                let last = all[start..].join("\n");
                tr!("last lines of {path}:\n{last}", path, last)
            }
        }
        Err(error) => tr!("({path} cannot be read: {error})", path = path.display(), error),
    }
}

/// A number alone in a file (a pid file, a /proc/sys setting); `None` when
/// the file is missing or holds something else.
pub fn read_number<T: std::str::FromStr>(path: impl AsRef<Path>) -> Option<T> {
    fs::read_to_string(path).ok()?.trim().parse().ok()
}
