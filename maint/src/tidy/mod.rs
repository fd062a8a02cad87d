//! Checks of the repository itself, written as tests (rust-analyzer's "tidy").
//!
//! The Kubernetes minor is declared once: the `v1_NN` feature of k8s-openapi,
//! which the controller reads at build time. Every other place that has to
//! repeat it is checked against that here, so they cannot drift apart.

#![cfg(test)]

mod architecture;
mod catalogue;
mod claims;
mod course_pages;
mod deny;
mod docs;
mod invariants;
mod modules;
mod sizes;
mod support;
mod tree;

use std::path::Path;

use controller::version::target_minor;
use labkit::project;

fn read(relative: &str) -> String {
    let path = project::root().join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// `v1.36.3` or `v0.36.3` → 36.
fn minor_of(version: &str) -> u32 {
    version
        .trim_start_matches('v')
        .split('.')
        .nth(1)
        .and_then(|m| m.parse().ok())
        .unwrap_or_else(|| panic!("{version:?} is not vMAJOR.MINOR.PATCH"))
}

/// The k8s-openapi `v1_NN` features `manifest` switches on, each with
/// whether it is in `[dependencies]` (the build's) rather than
/// `[dev-dependencies]` (its tests').
fn version_features(manifest: &toml::Table) -> Vec<(String, bool)> {
    let workspace = manifest.get("workspace").and_then(|w| w.get("dependencies"));
    let sections = [(workspace, true)].into_iter().chain(
        ["dependencies", "dev-dependencies"].map(|s| (manifest.get(s), s == "dependencies")),
    );
    sections
        .filter_map(|(section, build)| Some((section?.get("k8s-openapi")?.get("features")?, build)))
        .flat_map(|(features, build)| {
            let features = features.as_array().into_iter().flatten().filter_map(|f| f.as_str());
            features.filter(|f| f.starts_with("v1_")).map(move |f| (f.to_string(), build))
        })
        .collect()
}

/// Whether the package at `member` builds a binary (`src/main.rs`, `src/bin/`, `[[bin]]`).
fn builds_a_binary(member: &str, manifest: &toml::Table) -> bool {
    let root = project::root().join(member);
    manifest.contains_key("bin")
        || root.join("src/main.rs").is_file()
        || root.join("src/bin").is_dir()
}

/// k8s-openapi's rule, as Cargo lets a package keep it: the `v1_NN` feature
/// is switched on in `[dependencies]` only by a package that builds a binary
/// (Cargo's features are per package, so the controller's library builds
/// with the feature its my-controller switches on), by a library only for its
/// tests, never in the workspace's table; and it is the one minor targeted.
fn version_rule_broken(member: &str, manifest: &toml::Table, binary: bool) -> Vec<String> {
    let minor = format!("v1_{}", target_minor());
    version_features(manifest)
        .into_iter()
        .filter_map(|(feature, build)| {
            if feature != minor {
                Some(format!("{member}: {feature}, the kit targets {minor}"))
            } else if build && !binary {
                Some(format!("{member}: a library switching {feature} on for its build"))
            } else {
                None
            }
        })
        .collect()
}

#[test]
fn only_packages_with_a_binary_choose_the_kubernetes_version() {
    let parse = |file: &str| -> toml::Table { toml::from_str(&read(file)).expect(file) };
    let mut broken = version_rule_broken("the workspace", &parse("Cargo.toml"), false);
    let mut choosers = Vec::new();
    for member in architecture::members() {
        let manifest = parse(&format!("{member}/Cargo.toml"));
        let binary = builds_a_binary(&member, &manifest);
        broken.extend(version_rule_broken(&member, &manifest, binary));
        if version_features(&manifest).iter().any(|(_, build)| *build) {
            choosers.push(member);
        }
    }
    println!("k8s-openapi's version switched on by: {choosers:?}");
    assert!(broken.is_empty(), "k8s-openapi's version rule:\n{}", broken.join("\n"));
    assert!(!choosers.is_empty(), "no package chooses the version: the check reads nothing");
}

#[test]
fn the_version_rule_catches_a_library_choosing() {
    let minor = target_minor();
    let library: toml::Table = toml::from_str(&format!(
        "[dependencies]\nk8s-openapi = {{ workspace = true, features = [\"v1_{minor}\"] }}\n\
         [dev-dependencies]\nk8s-openapi = {{ workspace = true, features = [\"v1_{minor}\"] }}"
    ))
    .unwrap();
    assert_eq!(version_rule_broken("lib", &library, false).len(), 1);
    assert!(version_rule_broken("bin", &library, true).is_empty());
    let workspace: toml::Table = toml::from_str(
        "[workspace.dependencies]\nk8s-openapi = { version = \"0.29\", features = [\"v1_30\"] }",
    )
    .unwrap();
    assert_eq!(version_rule_broken("ws", &workspace, false).len(), 1);
}

#[test]
fn the_kubernetes_module_has_the_same_minor() {
    let go_mod = read("xtask/envtest/kubernetes/go.mod");
    let minor = target_minor();
    let kubernetes = go_mod
        .lines()
        .find_map(|l| l.trim().strip_prefix("k8s.io/kubernetes "))
        .expect("go.mod requires k8s.io/kubernetes");
    assert_eq!(
        minor_of(kubernetes.trim()),
        minor,
        "go.mod requires k8s.io/kubernetes {kubernetes}"
    );
    let staging: Vec<&str> = go_mod
        .lines()
        .filter_map(|l| {
            l.split_once("=>").map(|(_, to)| to.split_whitespace().last().unwrap_or(""))
        })
        .collect();
    assert!(staging.len() >= 30, "every staging module is replaced: found {}", staging.len());
    for version in &staging {
        assert_eq!(minor_of(version), minor, "a staging module is replaced by {version}");
        assert_eq!(version, &staging[0], "staging modules at one version: {staging:?}");
    }
}

#[test]
fn the_readme_names_the_targeted_version() {
    let readme = read("README.md");
    let minor = target_minor();
    assert!(readme.contains(&format!("v1_{minor}")) && readme.contains(&format!("1.{minor}")));
    assert!(Path::new(&project::root().join(".ci/run")).is_file());
}

#[test]
fn every_kind_release_runs_the_targeted_minor() {
    let minor = target_minor();
    let table = labkit::kind_releases::table().unwrap();
    assert!(!table.is_empty(), "{} has no rows", labkit::kind_releases::FILE);
    for row in &table {
        assert!(
            row.kind.starts_with("v0.") && row.kind.matches('.').count() == 1,
            "{}: kind = {:?} is not a release line like v0.33",
            labkit::kind_releases::FILE,
            row.kind
        );
        assert_eq!(
            labkit::kind_releases::image_minor(&row.image),
            Some(minor),
            "{}: kind {} runs {}, the kit targets 1.{minor}",
            labkit::kind_releases::FILE,
            row.kind,
            row.image
        );
        let digest = row.image.split("@sha256:").nth(1).unwrap_or_default();
        assert!(
            row.image.starts_with("kindest/node:v1.") && digest.len() == 64,
            "{}: {} is not pinned by tag and digest",
            labkit::kind_releases::FILE,
            row.image
        );
    }
    // One table: the cluster file names no image, and the flake reads the same file.
    assert!(!read("kind/cluster.yaml").contains("image:"));
    assert!(read("flake.nix").contains("./kind/node-images.toml"));
}

#[test]
fn the_shutdown_grace_fits_in_the_pods_termination_grace() {
    let deployment = read("manifests/deployment.yaml");
    let pod: u64 = deployment
        .lines()
        .find_map(|l| l.trim().strip_prefix("terminationGracePeriodSeconds:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("manifests/deployment.yaml sets terminationGracePeriodSeconds");
    let cli = <controller::cli::Cli as clap::Parser>::try_parse_from(["my-controller"]).unwrap();
    assert!(
        cli.shutdown_grace.as_secs() < pod,
        "--shutdown-grace {:?} is not below the pod's terminationGracePeriodSeconds {pod}",
        cli.shutdown_grace
    );
}

#[test]
fn no_import_circle_inside_a_crate() {
    let members = architecture::members();
    assert_eq!(members.len(), 8, "{members:?}");
    for krate in &members {
        let src = project::root().join(krate).join("src");
        let root = if src.join("lib.rs").exists() { "lib.rs" } else { "main.rs" };
        let graph = modules::graph(&src, root);
        assert!(graph.len() > 1, "{krate}: found only {:?}", graph.keys());
        let circles: Vec<String> = modules::circles(graph)
            .iter()
            .map(|c| c.iter().map(|m| m.join("::")).collect::<Vec<_>>().join(" → "))
            .collect();
        assert!(circles.is_empty(), "{krate}: import circles:\n{}", circles.join("\n"));
    }
}

#[test]
fn the_circle_check_finds_a_circle() {
    let dir = std::env::temp_dir().join(format!("tidy-circle-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("b")).unwrap();
    let write = |file: &str, text: &str| std::fs::write(dir.join(file), text).unwrap();
    write("lib.rs", "mod a; mod b;");
    write("a.rs", "use crate::b::c::f; pub fn g() {}");
    write("b/mod.rs", "pub mod c; pub fn h() { super::a::g() }");
    write("b/c.rs", "pub fn f() { super::h() } #[cfg(test)] mod tests { use crate::a; }");
    let graph = modules::graph(&dir, "lib.rs");
    let names = |c: Vec<Vec<String>>| c.iter().map(|m| m.join("::")).collect::<Vec<_>>();
    // b::c naming b is nesting, not an edge; a naming b::c is an edge to b too.
    assert!(graph[&vec!["b".to_string(), "c".to_string()]].is_empty(), "{graph:?}");
    let found: Vec<_> = modules::circles(graph).into_iter().map(names).collect();
    assert_eq!(found, [["a", "b", "a"]]);
    std::fs::write(dir.join("b/mod.rs"), "pub mod c; pub fn h() {}").unwrap();
    assert!(modules::circles(modules::graph(&dir, "lib.rs")).is_empty());
    std::fs::remove_dir_all(&dir).unwrap();
}
