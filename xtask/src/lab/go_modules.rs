//! The Go modules of the repository the kit builds programs from: each
//! module's go.mod pins one upstream module and names the packages to build
//! as `tool` lines, so versions and package lists are written once. The
//! envtest lab's kube-apiserver and etcd come from [`ENVTEST`]'s two; the
//! kind node image (`cargo maint node-image`) adds its own to them. Most are
//! built in one Go workspace ([`WORKSPACE`]), so what they share compiles once.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};

use labkit::command::Cmd;
use labkit::project;

pub const KUBERNETES_DIR: &str = "xtask/envtest/kubernetes";

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
    /// Whether its programs go into the image (kind's module only lends its files).
    pub in_image: bool,
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
    pub in_image: bool,
}

/// The envtest lab's two programs' modules.
pub const ENVTEST: &[Definition] = &[
    Definition {
        name: "kubernetes",
        dir: KUBERNETES_DIR,
        module: "k8s.io/kubernetes",
        cgo: false,
        tags: "",
        // Built from a module, Kubernetes does not know its version: stamp it,
        // or every component says v0.0.0-master and kubeadm refuses it.
        stamps: |version| {
            let minor = version.split('.').nth(1).unwrap_or_default().to_string();
            vec![
                format!("k8s.io/component-base/version.gitVersion={version}"),
                "k8s.io/component-base/version.gitMajor=1".into(),
                format!("k8s.io/component-base/version.gitMinor={minor}"),
                "k8s.io/component-base/version.gitTreeState=clean".into(),
            ]
        },
        in_image: true,
    },
    Definition {
        name: "etcd",
        dir: "xtask/envtest/etcd",
        module: "go.etcd.io/etcd/server/v3",
        cgo: false,
        tags: "",
        stamps: |_| Vec::new(),
        in_image: true,
    },
];

pub fn read_go_mod(dir: &str) -> Result<String> {
    read(&format!("{dir}/go.mod"))
}

/// A file of the repository, `path` relative to its root.
fn read(path: &str) -> Result<String> {
    let path = project::root().join(path);
    std::fs::read_to_string(&path)
        .with_context(|| labkit::tr!("cannot read {path}", path = path.display()))
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
        .with_context(|| labkit::tr!("go.mod does not require {module}", module))
}

/// The packages of `tool` lines (single or in a `tool ( … )` block).
pub fn tools(go_mod: &str) -> Vec<String> {
    directive(go_mod, "tool")
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
            let mut packages = tools(&go_mod);
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
            let fingerprint = labkit::fingerprint::sha256_hex(
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
                in_image: d.in_image,
                fingerprint,
            })
        })
        .collect()
}

impl GoComponent {
    /// `<cache>/go/<name>-<fingerprint>/`.
    pub fn out_dir(&self, cache: &Path) -> PathBuf {
        cache.join("go").join(format!("{}-{}", self.name, self.fingerprint))
    }

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_versions_and_tools_from_go_mod() {
        let go_mod = "module x\n\ngo 1.26.0\n\ntool a/cmd/one\ntool (\n\tb/cmd/two\n\t// note\n)\n\nrequire a v1.2.3\nrequire (\n\tb v0.1.0 // indirect\n)\n";
        assert_eq!(tools(go_mod), vec!["a/cmd/one", "b/cmd/two"]);
        assert_eq!(required_version(go_mod, "a").unwrap(), "v1.2.3");
        assert_eq!(required_version(go_mod, "b").unwrap(), "v0.1.0");
        assert!(required_version(go_mod, "c").is_err());
        let go_work =
            "go 1.26.3\n\n// a note\nuse ./one\nuse (\n\t./two\n\t// skipped\n)\nuser x\n";
        assert_eq!(directive(go_work, "use"), vec!["./one", "./two"]);
    }

    #[test]
    fn envtest_programs_build_in_the_workspace_and_others_alone() {
        let modules = workspace_modules().unwrap();
        for module in &modules {
            assert!(project::root().join(module).join("go.mod").is_file(), "{module}");
        }
        let gowork = project::root().join(WORKSPACE).display().to_string();
        for component in components(ENVTEST).unwrap() {
            assert!(modules.iter().any(|m| m == component.dir), "{}", component.dir);
            assert!(component.env.contains(&("GOWORK", gowork.clone())), "{component:?}");
        }
        // One module's pins reach another's build: each fingerprint covers them all.
        let (_, kubernetes) = build_inputs(KUBERNETES_DIR).unwrap();
        assert!(kubernetes.contains("module labkit.local/kube-router"));
        let (off, peer) = build_inputs("bench/peers/course-verbatim").unwrap();
        assert_eq!(off, "off");
        assert!(!peer.contains("module labkit.local/kube-router"));
    }

    #[test]
    fn every_component_reads_its_go_mod() {
        let components = components(ENVTEST).unwrap();
        let kubernetes = components.iter().find(|c| c.name == "kubernetes").unwrap();
        assert!(kubernetes.version.starts_with("v1.36."), "{}", kubernetes.version);
        for program in ["kubelet", "kubeadm", "kubectl", "kube-apiserver", "kube-proxy"] {
            assert!(
                kubernetes.packages.contains(&format!("k8s.io/kubernetes/cmd/{program}")),
                "{program}"
            );
        }
        let etcd = components.iter().find(|c| c.name == "etcd").unwrap();
        assert_eq!(etcd.packages, vec!["."]);
        assert!(components.iter().all(|c| c.fingerprint.len() == 12));
    }
}
