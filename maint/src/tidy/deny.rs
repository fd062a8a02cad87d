//! deny.toml's exceptions checked against Cargo.lock: cargo-deny (`.ci/audit`) only warns
//! about a skip that no longer matches, so a duplicate the kit removed would keep its
//! skip, ready to hide the next one.

use std::collections::BTreeMap;

use super::read;

/// Cargo.lock's versions of each crate.
fn locked_versions() -> BTreeMap<String, Vec<String>> {
    let lock: toml::Table = read("Cargo.lock").parse().expect("Cargo.lock is TOML");
    let mut versions: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for package in lock["package"].as_array().expect("Cargo.lock has [[package]]") {
        let field = |key: &str| package[key].as_str().expect("name and version").to_string();
        versions.entry(field("name")).or_default().push(field("version"));
    }
    versions
}

#[test]
fn every_skipped_duplicate_is_one_in_cargo_lock_and_says_why() {
    let deny: toml::Table = read("deny.toml").parse().expect("deny.toml is TOML");
    let skips = deny["bans"]["skip"].as_array().expect("deny.toml has [bans] skip = [...]");
    let versions = locked_versions();
    for skip in skips {
        let spec = skip["crate"].as_str().expect("each skip is { crate = \"name@version\", … }");
        let reason = skip.get("reason").and_then(|r| r.as_str()).unwrap_or_default();
        assert!(!reason.is_empty(), "deny.toml: the skip of {spec} has no reason");
        let (name, version) = spec.split_once('@').expect("a skip names crate@version");
        let locked = versions.get(name).map(Vec::as_slice).unwrap_or_default();
        assert!(
            locked.len() > 1 && locked.iter().any(|v| v == version),
            "deny.toml skips {spec}, but Cargo.lock has {name} at {locked:?}: drop the skip"
        );
    }
}

#[test]
fn the_license_file_is_the_license_cargo_toml_names() {
    let manifest: toml::Table = read("Cargo.toml").parse().expect("Cargo.toml is TOML");
    let license = manifest["workspace"]["package"]["license"].as_str().expect("a license");
    assert_eq!(license, "Apache-2.0", "LICENSE holds the Apache License 2.0 text");
    let text = read("LICENSE");
    assert!(
        text.contains("Apache License\n                           Version 2.0, January 2004")
            && text.contains("END OF TERMS AND CONDITIONS"),
        "LICENSE is not the Apache License 2.0's whole text"
    );
}
