//! Every external command is shown before it runs, so a person can repeat it by hand.
//!
//! xshell's `run()` echoes `$ cmd` to stderr, but its `read()` does not; commands whose
//! output is read, or that are spawned (long-running, or polled while they work), are echoed
//! in the same form, here and in `e2e::process::spawn_detached`.

use std::path::Path;

/// Echo, run, and return stdout (trimmed), as xshell's `read()`.
pub fn read(cmd: &xshell::Cmd<'_>) -> xshell::Result<String> {
    eprintln!("$ {cmd}");
    cmd.read()
}

/// `$ cd <dir> && <command line>`: for a command whose working directory matters.
pub fn echo_in(dir: &Path, cmd: &xshell::Cmd<'_>) {
    eprintln!("$ cd {} && {cmd}", dir.display());
}

/// `cargo <args>` run from the project root, as a person would type it in a shell.
///
/// `cargo run` gives xtask the variables it gives any package (CARGO_MANIFEST_DIR, …).
/// Passed on, they would differ from a plain `cargo` in a shell: ring's build script
/// watches CARGO_MANIFEST_DIR, so every switch between the two rebuilt ring, rustls and kube.
pub fn cargo<'a>(sh: &'a xshell::Shell, args: &[&str]) -> xshell::Cmd<'a> {
    let mut cmd = xshell::cmd!(sh, "cargo {args...}");
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        if name.starts_with("CARGO_MANIFEST_")
            || name.starts_with("CARGO_PKG_")
            || [
                "CARGO_CRATE_NAME",
                "CARGO_BIN_NAME",
                "CARGO_PRIMARY_PACKAGE",
            ]
            .contains(&&*name)
        {
            cmd = cmd.env_remove(&*name);
        }
    }
    cmd
}
