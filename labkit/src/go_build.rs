//! The kit's Go builds: the Go modules of the repository (each go.mod pins
//! one upstream module and names the packages to build as `tool` lines, so
//! versions and package lists are written once), the fingerprint of what a
//! build depends on, and a build into a cache entry that only a complete
//! build ever fills ([`build_once`]). The envtest lab's kube-apiserver and etcd
//! (`xtask/src/lab/binaries.rs`) and the bench's Go peers (`bench/src/peers.rs`)
//! build through `build_once`; the node image's programs and the room cluster's
//! registry and kube-router (`maint/`) through [`GoComponent::build`], as printed
//! plan steps. Most modules are built in one Go workspace ([`WORKSPACE`]), so
//! what they share compiles once.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};

use crate::command::Cmd;
use crate::files::read_in_repo as read;
use crate::{project, tr};

/// One Go module of the repository and how its programs are built.
#[derive(Clone, Debug)]
pub struct GoComponent {
    /// `kubernetes`, `containerd`, …
    pub name: &'static str,
    /// The module's directory, relative to the project root.
    pub dir: &'static str,
    /// The upstream module it pins, and the version it pins.
    pub module: &'static str,
    pub version: String,
    /// The packages it builds: its go.mod's `tool` lines, or its own main package.
    pub packages: Vec<String>,
    pub env: Vec<(&'static str, String)>,
    pub tags: &'static str,
    pub ldflags: String,
    /// Of what it is built from ([`build_inputs`]) and the flags: the output directory's name.
    pub fingerprint: String,
}

/// What differs between components.
pub struct Definition {
    pub name: &'static str,
    pub dir: &'static str,
    pub module: &'static str,
    pub cgo: bool,
    pub tags: &'static str,
    /// Extra `-X` stamps, given the pinned version.
    pub stamps: fn(&str) -> Vec<String>,
}

pub fn read_go_mod(dir: &str) -> Result<String> {
    read(&format!("{dir}/go.mod"))
}

/// The version `go_mod` requires of `module`.
pub fn required_version(go_mod: &str, module: &str) -> Result<String> {
    go_mod
        .lines()
        .map(|l| l.trim().trim_start_matches("require").trim())
        .find_map(|l| {
            let mut words = l.split_whitespace();
            (words.next() == Some(module)).then(|| words.next().map(str::to_string)).flatten()
        })
        .with_context(|| tr!("go.mod does not require {module}", module))
}

/// The arguments of a go.mod or go.work directive `keyword`, single or in a block.
fn directive(text: &str, keyword: &str) -> Vec<String> {
    let (mut found, mut in_block) = (Vec::new(), false);
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with("//")) {
        let argument = line.strip_prefix(keyword).filter(|r| r.starts_with([' ', '(']));
        match (in_block, argument.map(str::trim)) {
            (true, _) if line == ")" => in_block = false,
            (true, _) => found.push(line.to_string()),
            (false, Some("(")) => in_block = true,
            (false, Some(argument)) => found.push(argument.to_string()),
            (false, None) => {}
        }
    }
    found
}

/// The workspace of the cluster's Go programs (its `use` lines name the modules in it).
pub const WORKSPACE: &str = "cluster.work";

/// The module directories (relative to the project root, where [`WORKSPACE`] is) it uses.
pub fn workspace_modules() -> Result<Vec<String>> {
    let used = directive(&read(WORKSPACE)?, "use");
    Ok(used.iter().map(|dir| dir.trim_start_matches("./").to_string()).collect())
}

/// How `go` builds in module `dir` (relative to the project root): `GOWORK` naming the
/// workspace when `dir` is in it, else `off` (the module alone, whatever the environment
/// says); and what the build's output depends on, to fingerprint it: the module's go.mod
/// and go.sum, and in the workspace every module's and the workspace's own files (one
/// module's pins can raise the versions another is built with).
pub fn build_inputs(dir: &str) -> Result<(String, String)> {
    let read = |path: &str| read(path).unwrap_or_default();
    let own = |dir: &str| read(&format!("{dir}/go.mod")) + "\n" + &read(&format!("{dir}/go.sum"));
    let modules = workspace_modules()?;
    if !modules.iter().any(|m| m == dir) {
        return Ok(("off".into(), own(dir)));
    }
    let mut inputs = vec![read(WORKSPACE), read(&format!("{WORKSPACE}.sum"))];
    inputs.extend(modules.iter().map(|m| own(m)));
    let gowork = project::root().join(WORKSPACE).display().to_string();
    Ok((gowork, format!("{dir}\n{}", inputs.join("\n"))))
}

/// Each definition's component, read from its go.mod.
pub fn components<'a>(
    definitions: impl IntoIterator<Item = &'a Definition>,
) -> Result<Vec<GoComponent>> {
    definitions
        .into_iter()
        .map(|d| {
            let go_mod = read_go_mod(d.dir)?;
            let (gowork, inputs) = build_inputs(d.dir)?;
            let version =
                required_version(&go_mod, d.module).with_context(|| format!("{}/go.mod", d.dir))?;
            // Its `tool` lines (single or in a `tool ( … )` block), else its own main package.
            let mut packages = directive(&go_mod, "tool");
            if packages.is_empty() {
                packages.push(".".into());
            }
            let mut ldflags = vec!["-s".to_string(), "-w".to_string()];
            if d.cgo {
                ldflags.extend(["-extldflags".into(), "-static".into()]);
            }
            for stamp in (d.stamps)(&version) {
                ldflags.extend(["-X".into(), stamp]);
            }
            let env = vec![
                ("CGO_ENABLED", if d.cgo { "1" } else { "0" }.to_string()),
                ("GOWORK", gowork),
            ];
            let ldflags = ldflags.join(" ");
            let fingerprint = crate::fingerprint::sha256_hex(
                format!("{inputs}\n{ldflags}\n{}\n{}", d.tags, d.cgo).as_bytes(),
            )[..12]
                .to_string();
            Ok(GoComponent {
                name: d.name,
                dir: d.dir,
                module: d.module,
                version,
                packages,
                env,
                tags: d.tags,
                ldflags,
                fingerprint,
            })
        })
        .collect()
}

impl GoComponent {
    /// `go build` of every package into `out` (a directory: Go then names
    /// each program after its package).
    pub fn build(&self, out: &Path) -> Cmd {
        let packages: Vec<&str> = self.packages.iter().map(String::as_str).collect();
        self.build_cmd(&PathBuf::from(format!("{}/", out.display())), &packages)
    }

    /// `go build` of `packages` into `out` (a file for one package, a
    /// directory ending in `/` for several), with this component's flags.
    pub fn build_cmd(&self, out: &Path, packages: &[&str]) -> Cmd {
        let mut cmd = Cmd::new("go").dir(project::root().join(self.dir));
        for (key, value) in &self.env {
            cmd = cmd.env(key, value);
        }
        cmd = cmd.args(["build", "-trimpath"]);
        if !self.tags.is_empty() {
            cmd = cmd.args(["-tags", self.tags]);
        }
        cmd.args(["-ldflags", &self.ldflags, "-o"]).path(out).args(packages)
    }
}

/// Runs `build` (a `go build` into the path it is given) unless `out` is there:
/// into a partial path beside it, renamed when complete, so that an interrupted
/// build never looks like a finished one.
pub fn build_once(name: &str, out: &Path, build: impl FnOnce(&Path) -> Cmd) -> Result<()> {
    if out.exists() {
        return Ok(());
    }
    let dir = out.parent().with_context(|| tr!("cache path has no parent"))?;
    crate::files::create_dir(dir)?;
    let file = out.file_name().unwrap_or_default().to_string_lossy();
    let partial = dir.join(format!(".{file}.partial-{}", std::process::id()));
    build(&partial)
        .run_long(&tr!("building {name}", name))
        .with_context(|| tr!("go build of {name} failed (its output is above)", name))?;
    std::fs::rename(&partial, out)
        .with_context(|| tr!("cannot move {path}", path = partial.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_versions_and_tools_from_go_mod() {
        let go_mod = "module x\n\ngo 1.26.0\n\ntool a/cmd/one\ntool (\n\tb/cmd/two\n\t// note\n)\n\nrequire a v1.2.3\nrequire (\n\tb v0.1.0 // indirect\n)\n";
        assert_eq!(directive(go_mod, "tool"), vec!["a/cmd/one", "b/cmd/two"]);
        assert_eq!(required_version(go_mod, "a").unwrap(), "v1.2.3");
        assert_eq!(required_version(go_mod, "b").unwrap(), "v0.1.0");
        assert!(required_version(go_mod, "c").is_err());
        let go_work =
            "go 1.26.3\n\n// a note\nuse ./one\nuse (\n\t./two\n\t// skipped\n)\nuser x\n";
        assert_eq!(directive(go_work, "use"), vec!["./one", "./two"]);
    }

    #[test]
    fn workspace_modules_build_in_it_and_others_alone() {
        let modules = workspace_modules().unwrap();
        for module in &modules {
            assert!(project::root().join(module).join("go.mod").is_file(), "{module}");
        }
        // One module's pins reach another's build: each fingerprint covers them all.
        let (gowork, kubernetes) = build_inputs("xtask/envtest/kubernetes").unwrap();
        assert_eq!(gowork, project::root().join(WORKSPACE).display().to_string());
        assert!(kubernetes.contains("module labkit.local/kube-router"));
        let (off, peer) = build_inputs("bench/peers/course-verbatim").unwrap();
        assert_eq!(off, "off");
        assert!(!peer.contains("module labkit.local/kube-router"));
    }

    #[test]
    fn a_build_fills_its_entry_whole_or_not_at_all() {
        let dir = project::target_dir().join(format!("go-build-test-{}", std::process::id()));
        let out = dir.join("program");
        let failed = build_once("nothing", &out, |partial| {
            Cmd::argv(["sh", "-c", "echo half > \"$0\"; false"]).path(partial)
        });
        assert!(failed.is_err() && !out.exists());
        build_once("program", &out, |partial| Cmd::argv(["touch"]).path(partial)).unwrap();
        assert!(out.is_file());
        build_once("program", &out, |_| Cmd::argv(["false"])).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }
}
