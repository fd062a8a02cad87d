//! Where the kit fetches from, and the mirror each source can be swapped for: one row per
//! source, read by `doctor` (what it probes, and the settings it names when a probe fails), by
//! the kind lab (`--registry-mirror`) and by the page for learners in mainland China
//! (docs/zh-CN/14-china.md, held to these settings by a test). The kit never picks a mirror
//! by itself: the settings name public mirrors there as examples a person chooses.

use std::path::{Path, PathBuf};

use labkit::tr;

/// A place the kit, or the tools it runs, fetch from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Source {
    /// Its name in doctor's table (the JSON's `name`: English, a stable word for scripts).
    pub name: &'static str,
    /// The setting that uses a mirror, as a person types or writes it, each line as is.
    pub setting: &'static [&'static str],
    /// Whose mirror the setting names, and where else one is found (in English: doctor
    /// translates it).
    pub whose: &'static str,
    /// The way without this source, if there is one (in English, as `whose`).
    pub offline: Option<&'static str>,
}

/// crates.io's index (cargo: the kit, a learner's project).
pub const CRATES: Source = Source {
    name: "crates",
    setting: &[
        "# ~/.cargo/config.toml",
        "[source.crates-io]",
        "replace-with = \"mirror\"",
        "[source.mirror]",
        "registry = \"sparse+https://rsproxy.cn/index/\"",
    ],
    whose: "rsproxy.cn's (ByteDance); USTC, TUNA and Aliyun run others",
    offline: None,
};

/// The Rust toolchain server (rustup installs the pinned toolchain).
pub const TOOLCHAIN: Source = Source {
    name: "Rust toolchain server",
    setting: &[
        "export RUSTUP_DIST_SERVER=https://rsproxy.cn",
        "export RUSTUP_UPDATE_ROOT=https://rsproxy.cn/rustup",
    ],
    whose: "rsproxy.cn's; TUNA and USTC run others",
    offline: None,
};

/// The Go module proxy (kube-apiserver and etcd, the node image, the course's Go program).
pub const GO_MODULES: Source = Source {
    name: "Go modules",
    setting: &["go env -w GOPROXY=https://goproxy.cn,direct"],
    whose: "goproxy.cn's; Aliyun runs another",
    offline: None,
};

/// The envtest release binaries (kube-apiserver and etcd, downloaded instead of built).
pub const ENVTEST_RELEASES: Source = Source {
    name: "envtest releases",
    setting: &["export LAB_ENVTEST_MIRROR=http://INSTRUCTOR-HOST:8000"],
    whose: "a server with the release's archive, such as the instructor's `python3 -m http.server`; checked against the pinned sha512",
    offline: Some("or nothing: kube-apiserver and etcd are then built from Go source (minutes)"),
};

/// Docker Hub, for the kind node image.
pub const NODE_IMAGE: Source = Source {
    name: "kind node image",
    whose: "DaoCloud's; Docker's own `registry-mirrors` in /etc/docker/daemon.json works too",
    ..POD_IMAGES
};

/// Docker Hub, for the pods' images (step 2's `nginx`), pulled by the nodes' containerd.
pub const POD_IMAGES: Source = Source {
    name: "pods' images",
    setting: &["cargo xtask lab up --provider kind --registry-mirror https://docker.m.daocloud.io"],
    whose: "DaoCloud's, written into the nodes' containerd",
    offline: Some(
        "or, without a network: `cargo xtask lab bundle` where Docker Hub is reachable, then `cargo xtask lab up --bundle FILE` here",
    ),
};

/// Debian's packages, for a node image built here.
pub const DEBIAN: Source = Source {
    name: "Debian packages",
    setting: &["export LAB_DEBIAN_MIRROR=https://mirrors.tuna.tsinghua.edu.cn/debian"],
    whose: "TUNA's; USTC and Aliyun run others",
    offline: None,
};

/// Nix's binary cache (`nix develop`).
pub const NIX: Source = Source {
    name: "Nix cache",
    setting: &[
        "# /etc/nix/nix.conf",
        "substituters = https://mirrors.tuna.tsinghua.edu.cn/nix-channels/store https://cache.nixos.org/",
    ],
    whose: "TUNA's; USTC runs another",
    offline: Some(
        "or without Nix: rustup, Go, kubectl and kind installed by hand (the README's prerequisites)",
    ),
};

/// The `--registry-mirror` flag of `lab up` and `doctor`, or its variable.
#[derive(clap::Args, Clone, Debug, Default, PartialEq, Eq)]
pub struct RegistryMirror {
    /// kind only: a Docker Hub mirror (`https://HOST` or `http://HOST:PORT`) for the node image
    /// and, written into the nodes' containerd, the pods' images (step 2's nginx).
    #[arg(long = "registry-mirror", value_name = "URL", env = "LAB_REGISTRY_MIRROR",
          value_parser = parse_mirror)]
    pub url: Option<String>,
}

/// A mirror is `http://` or `https://` and a host, without a path.
fn parse_mirror(value: &str) -> Result<String, String> {
    let host = value.strip_prefix("https://").or_else(|| value.strip_prefix("http://"));
    match host.map(|h| h.trim_end_matches('/')) {
        Some(host) if !host.is_empty() && !host.contains('/') => {
            Ok(value.trim_end_matches('/').to_string())
        }
        _ => {
            Err(tr!("a mirror is https://HOST or http://HOST:PORT, without a path: {value}", value))
        }
    }
}

impl RegistryMirror {
    /// `reference` (`kindest/node:v1.36.4@sha256:…`) pulled through the mirror: the same
    /// digest on another host (the mirror's host and port, as Docker names an image on it).
    pub fn image(&self, reference: &str) -> String {
        match self.url.as_deref().and_then(|url| url.split_once("://")) {
            Some((_, host)) => format!("{host}/{reference}"),
            None => reference.to_string(),
        }
    }

    /// The nodes' containerd's `hosts.toml` for docker.io: Docker Hub through the mirror.
    pub fn hosts_toml(&self) -> Option<String> {
        let url = self.url.as_deref()?;
        Some(format!(
            "server = \"https://registry-1.docker.io\"\n\n[host.\"{url}\"]\n  capabilities = [\"pull\", \"resolve\"]\n"
        ))
    }
}

/// Where debootstrap keeps its per-suite scripts: a suite it can make.
const DEBOOTSTRAP_SCRIPTS: &str = "/usr/share/debootstrap/scripts";

/// The Debian mirror a node image built here fetches from: `LAB_DEBIAN_MIRROR`, else the
/// apt sources' (what `cargo maint node-image --mirror` defaults to), else Debian's own.
pub fn debian_mirror() -> String {
    let chosen = std::env::var(DEBIAN_MIRROR_ENV).ok().filter(|m| !m.is_empty());
    chosen
        .or(apt_mirror().map(|(uri, _)| uri))
        .unwrap_or_else(|| "http://deb.debian.org/debian".into())
}

/// The variable of `cargo maint node-image --mirror`, which `lab up --node-image built` runs.
pub const DEBIAN_MIRROR_ENV: &str = "LAB_DEBIAN_MIRROR";

/// The first Debian (or Ubuntu) mirror and release suite this machine's apt
/// sources name, from the one-line `.list` format and the deb822 `.sources` format.
pub fn apt_mirror() -> Option<(String, String)> {
    let listed = std::fs::read_dir("/etc/apt/sources.list.d").into_iter().flatten();
    let mut paths: Vec<PathBuf> = listed.filter_map(|e| Some(e.ok()?.path())).collect();
    paths.sort();
    paths.insert(0, "/etc/apt/sources.list".into());
    let texts = paths.iter().filter_map(|path| std::fs::read_to_string(path).ok());
    let known = |suite: &str| {
        let scripts = Path::new(DEBOOTSTRAP_SCRIPTS);
        if scripts.is_dir() { scripts.join(suite).exists() } else { !suite.contains(['-', '/']) }
    };
    texts.flat_map(|text| sources(&text)).find(|(_, suite)| known(suite))
}

/// The `deb` entries with component `main` of one sources file: (URI, suite).
pub fn sources(text: &str) -> Vec<(String, String)> {
    // One-line format: `deb [options] URI SUITE COMPONENT…`, as deb822's four fields.
    let one_line = text.lines().filter_map(|line| {
        let rest = line.trim().strip_prefix("deb ")?.trim_start();
        let rest = match rest.strip_prefix('[') {
            Some(options) => options.split_once(']')?.1.trim_start(),
            None => rest,
        };
        let (uri, rest) = rest.split_once(char::is_whitespace)?;
        let (suite, components) = rest.trim_start().split_once(char::is_whitespace)?;
        Some(["deb", uri, suite, components].map(String::from))
    });
    // deb822 format: paragraphs of `Key: value` lines.
    let deb822 = text.split("\n\n").filter_map(|paragraph| {
        let field = |name: &str| {
            paragraph.lines().find_map(|l| {
                let (key, value) = l.split_once(':')?;
                key.trim().eq_ignore_ascii_case(name).then(|| value.trim().to_string())
            })
        };
        Some([field("Types")?, field("URIs")?, field("Suites")?, field("Components")?])
    });
    let has = |list: &str, word: &str| list.split_whitespace().any(|w| w == word);
    let mut found = Vec::new();
    for [types, uris, suites, components] in one_line.chain(deb822) {
        if has(&types, "deb") && has(&components, "main") {
            for uri in uris.split_whitespace() {
                for suite in suites.split_whitespace() {
                    found.push((uri.to_string(), suite.to_string()));
                }
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The page for learners in mainland China shows every setting as doctor prints it.
    #[test]
    fn the_china_page_shows_each_setting_as_doctor_prints_it() {
        const ALL: [Source; 8] =
            [CRATES, TOOLCHAIN, GO_MODULES, ENVTEST_RELEASES, NODE_IMAGE, POD_IMAGES, DEBIAN, NIX];
        let page = std::fs::read_to_string(labkit::project::root().join("docs/zh-CN/14-china.md"));
        let page = page.unwrap();
        for source in ALL {
            for line in source.setting {
                assert!(page.lines().any(|l| l == *line), "docs/zh-CN/14-china.md lacks {line:?}");
            }
        }
    }

    #[test]
    fn reads_both_apt_source_formats() {
        let one_line = "# comment\ndeb [signed-by=/k.gpg] http://deb.example/debian bookworm main contrib\n\
                        deb http://security.example/debian-security bookworm-security main\n\
                        deb-src http://deb.example/debian bookworm main\n\
                        deb https://packages.example/apt cloud-sdk-bookworm main\n";
        assert_eq!(
            sources(one_line),
            vec![
                ("http://deb.example/debian".into(), "bookworm".into()),
                ("http://security.example/debian-security".into(), "bookworm-security".into()),
                ("https://packages.example/apt".into(), "cloud-sdk-bookworm".into()),
            ]
        );
        let deb822 = "Types: deb\n# http://snapshot.example/archive\nURIs: http://deb.example/debian\n\
                      Suites: bookworm bookworm-updates\nComponents: main\nSigned-By: /k.gpg\n\n\
                      Types: deb-src\nURIs: http://x\nSuites: bookworm\nComponents: main\n";
        assert_eq!(
            sources(deb822),
            vec![
                ("http://deb.example/debian".into(), "bookworm".into()),
                ("http://deb.example/debian".into(), "bookworm-updates".into()),
            ]
        );
    }

    #[test]
    fn a_mirror_is_a_scheme_and_a_host() {
        assert_eq!(
            parse_mirror("https://docker.m.daocloud.io/").unwrap(),
            "https://docker.m.daocloud.io"
        );
        assert!(parse_mirror("docker.m.daocloud.io").is_err());
        assert!(parse_mirror("https://mirror/v2/library").is_err());
        let mirror = RegistryMirror { url: Some("http://lab-kit-mirror:5000".into()) };
        assert_eq!(
            mirror.image("kindest/node:v1.36.4@sha256:ab"),
            "lab-kit-mirror:5000/kindest/node:v1.36.4@sha256:ab"
        );
        assert!(mirror.hosts_toml().unwrap().contains("[host.\"http://lab-kit-mirror:5000\"]"));
        assert_eq!(RegistryMirror::default().image("nginx"), "nginx");
    }
}
