//! Facts about the tools around the lab: where a program is, kubectl's version.

use std::path::PathBuf;

/// The first executable file called `name` on `PATH`.
pub fn on_path(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    std::env::split_paths(&std::env::var_os("PATH")?).map(|dir| dir.join(name)).find(|path| {
        path.metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    })
}

/// kubectl's client minor version, when kubectl is on PATH and answers.
pub fn kubectl_client_minor() -> Option<u32> {
    let out =
        crate::command::Cmd::argv(["kubectl", "version", "--client", "-o", "json"]).read().ok()?;
    let info: serde_json::Value = serde_json::from_str(&out).ok()?;
    controller::version::parse_minor(info["clientVersion"]["minor"].as_str()?)
}
