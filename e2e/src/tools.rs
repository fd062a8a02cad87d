//! Facts about the tools and files around the lab, for the version check.

/// kubectl's client minor version, when kubectl is on PATH and answers.
pub fn kubectl_client_minor() -> Option<u32> {
    let out = std::process::Command::new("kubectl")
        .args(["version", "--client", "-o", "json"])
        .output()
        .ok()?;
    let info: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
    controller::version::parse_minor(info["clientVersion"]["minor"].as_str()?)
}
