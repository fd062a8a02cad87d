//! Commands xtask runs: `cargo` as a person types it, and the xshell helpers
//! the envtest binaries still use. Every command is shown before it runs
//! (see `e2e::command`).

use e2e::command::Cmd;

/// Echo, run, and return stdout (trimmed), as xshell's `read()`.
pub fn read(cmd: &xshell::Cmd<'_>) -> xshell::Result<String> {
    eprintln!("$ {cmd}");
    cmd.read()
}

/// `cargo <args>` run from the project root, as a person would type it in a shell.
///
/// `cargo run` gives xtask the variables it gives any package (CARGO_MANIFEST_DIR, …).
/// Passed on, they would differ from a plain `cargo` in a shell: ring's build script
/// watches CARGO_MANIFEST_DIR, so every switch between the two rebuilt ring, rustls and kube.
pub fn cargo(args: &[&str]) -> Cmd {
    let mut cmd = Cmd::new("cargo").args(args).dir(e2e::project::root());
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        if name.starts_with("CARGO_MANIFEST_")
            || name.starts_with("CARGO_PKG_")
            || ["CARGO_CRATE_NAME", "CARGO_BIN_NAME", "CARGO_PRIMARY_PACKAGE"].contains(&&*name)
        {
            cmd = cmd.env_remove(&name);
        }
    }
    cmd
}
