//! Where things are in the repository, whatever directory `cargo xtask` was started from.

use std::path::{Path, PathBuf};

/// The workspace root: every package lives one level below it. Read from
/// the `CARGO_MANIFEST_DIR` cargo gives what it runs (`cargo xtask`, the
/// tests), else the one this crate was compiled in: cargo does not rebuild a
/// path crate for a workspace moved elsewhere whose files are older than its
/// artifacts, so the compiled-in path may name the old place.
pub fn root() -> PathBuf {
    let runtime = std::env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from);
    let manifest_dir = runtime
        .filter(|dir| dir.parent().is_some_and(|root| root.join("Cargo.lock").is_file()))
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    manifest_dir.parent().map(Path::to_path_buf).unwrap_or(manifest_dir)
}

/// Cargo's target directory: `CARGO_TARGET_DIR` when set (cargo honours it, so the controller
/// binary is there), else `<root>/target`. The lab's state and the binary cache live here too,
/// so `cargo clean` is the one way to forget all of it.
pub fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) if !dir.is_empty() => root().join(dir),
        _ => root().join("target"),
    }
}

/// `target/lab/<name>`: a lab's state directory (see `lab::lab_file`).
pub fn lab_dir(name: &str) -> PathBuf {
    target_dir().join("lab").join(name)
}

/// `path` as a plan shows it: relative to the project root when inside it.
pub fn shown(path: &Path) -> String {
    let root = root();
    path.strip_prefix(&root).unwrap_or(path).display().to_string()
}

/// `text` with this machine's paths as a reader's own would read: the build
/// output `target`, the project `.`, the home directory `~`.
pub fn machine_neutral(text: &str) -> String {
    let home = std::env::var("HOME").unwrap_or_default();
    let mut text = text.replace(&target_dir().display().to_string(), "target");
    text = text.replace(&root().display().to_string(), ".");
    // The home as a folder only: `/root` is not the start of `/rootfs`.
    if home.len() > 1 {
        text = text.replace(&format!("{home}/"), "~/");
    }
    text
}

/// With `E2E_WRITE_SAMPLES=1`, `text` becomes `docs/samples/<name>` ([`machine_neutral`]): the
/// sample outputs the docs link to are what a real run printed (the
/// examples suite, `cargo xtask e2e`, the narrations). Otherwise nothing.
pub fn write_sample(name: &str, text: &str) -> anyhow::Result<()> {
    if std::env::var_os("E2E_WRITE_SAMPLES").is_none_or(|v| v != "1") {
        return Ok(());
    }
    let dir = root().join("docs/samples");
    std::fs::create_dir_all(&dir)?;
    let path = dir.join(name);
    std::fs::write(&path, machine_neutral(text)).map_err(|error| {
        anyhow::anyhow!(crate::tr!("cannot write {path}: {error}", path = path.display(), error))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sample_names_no_path_of_this_machine() {
        let (target, root) = (target_dir(), root());
        let text = format!(
            "$ {} --kubeconfig {}\n{}/README.md\n",
            target.join("debug/xtask").display(),
            target.join("lab/x/kubeconfig").display(),
            root.display()
        );
        let neutral = machine_neutral(&text);
        assert_eq!(
            neutral,
            "$ target/debug/xtask --kubeconfig target/lab/x/kubeconfig\n./README.md\n"
        );
        let home = std::env::var("HOME").unwrap();
        let text = format!("{home}/.cache/kit {home}fs/x");
        assert_eq!(machine_neutral(&text), format!("~/.cache/kit {home}fs/x"));
    }
}
