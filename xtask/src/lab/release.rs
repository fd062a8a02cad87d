//! envtest's release tarballs (`xtask/envtest/releases.toml`): kube-apiserver and etcd
//! downloaded, and checked against the pinned sha512 before anything is unpacked — a first
//! envtest lab in a minute instead of a compile. From the release server, or a mirror of it
//! (`LAB_ENVTEST_MIRROR`: a server with the same file names); an archive of one's own (an
//! instructor's, built here) with its sum in `LAB_ENVTEST_SHA512`. Unpacked whole or not at
//! all into `target/envtest/release-<version>-<sum>/`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, ensure};
use labkit::{command::Cmd, project, tr};

/// A server with the release's file names, instead of the release server.
pub const MIRROR_ENV: &str = "LAB_ENVTEST_MIRROR";
/// The sha512 of the mirror's archive when it is not the release's own.
pub const SHA512_ENV: &str = "LAB_ENVTEST_SHA512";

#[derive(serde::Deserialize)]
struct Releases {
    version: String,
    base: String,
    sha512: BTreeMap<String, String>,
}

/// This machine's archive of the pinned release.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Release {
    pub version: String,
    pub url: String,
    pub sha512: String,
}

impl Release {
    /// The archive for this system, from the release server or the mirror; `None` where the
    /// release has none (then kube-apiserver and etcd are built).
    pub fn here() -> Result<Option<Release>> {
        let text = std::fs::read_to_string(project::root().join("xtask/envtest/releases.toml"))?;
        let releases: Releases = toml::from_str(&text).context("xtask/envtest/releases.toml")?;
        let env = |name| std::env::var(name).ok().filter(|v: &String| !v.is_empty());
        let arch = match std::env::consts::ARCH {
            "x86_64" => "amd64",
            "aarch64" => "arm64",
            other => other,
        };
        let system = format!("{}-{arch}", std::env::consts::OS.replace("macos", "darwin"));
        let Some(pinned) = releases.sha512.get(&system) else { return Ok(None) };
        let file = format!("envtest-{}-{system}.tar.gz", releases.version);
        let base = env(MIRROR_ENV).unwrap_or(releases.base);
        Ok(Some(Release {
            url: format!("{}/{file}", base.trim_end_matches('/')),
            sha512: env(SHA512_ENV).unwrap_or_else(|| pinned.clone()),
            version: releases.version,
        }))
    }

    /// Where it is unpacked.
    pub fn dir(&self) -> PathBuf {
        let name =
            format!("release-{}-{}", self.version, &self.sha512[..12.min(self.sha512.len())]);
        project::target_dir().join("envtest").join(name)
    }

    /// Downloaded, checked and unpacked, unless it is already; the folder with both programs.
    pub fn fetch(&self) -> Result<PathBuf> {
        let dir = self.dir();
        if dir.join("kube-apiserver").is_file() && dir.join("etcd").is_file() {
            return Ok(dir);
        }
        let parent = dir.parent().context("target/envtest")?;
        labkit::files::create_dir(parent)?;
        let partial = parent.join(format!(".release-{}.partial", std::process::id()));
        let _ = std::fs::remove_dir_all(&partial);
        let unpacked = self.unpack(&partial);
        let done = unpacked.and_then(|()| {
            std::fs::rename(partial.join("controller-tools/envtest"), &dir)
                .with_context(|| tr!("the archive holds no controller-tools/envtest/"))
        });
        let _ = std::fs::remove_dir_all(&partial);
        done.map(|()| dir)
    }

    /// Into `partial`: the archive, its sum checked, then unpacked.
    fn unpack(&self, partial: &Path) -> Result<()> {
        std::fs::create_dir_all(partial)?;
        let archive = partial.join("envtest.tar.gz");
        Cmd::argv(["curl", "-fsSL", "--connect-timeout", "5", "-o"])
            .path(&archive)
            .arg(&self.url)
            .run_long(&tr!(
                "downloading kube-apiserver and etcd {version}",
                version = self.version
            ))?;
        let bytes = std::fs::read(&archive)?;
        let sum = labkit::fingerprint::sha512_hex(&bytes);
        ensure!(
            sum == self.sha512,
            tr!(
                "{url} is not the pinned archive: its sha512 is {sum}, xtask/envtest/releases.toml (or LAB_ENVTEST_SHA512) says {pinned}",
                url = self.url,
                sum,
                pinned = self.sha512
            )
        );
        Cmd::argv(["tar", "-xzf"]).path(&archive).arg("-C").path(partial).run()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read as _, Write as _};

    /// A one-file HTTP server on loopback standing in for the release server.
    fn serve(body: Vec<u8>) -> String {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for mut stream in listener.incoming().flatten() {
                let _ = stream.read(&mut [0; 4096]);
                let head = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let _ = stream.write_all(head.as_bytes()).and_then(|()| stream.write_all(&body));
            }
        });
        format!("http://127.0.0.1:{port}/envtest.tar.gz")
    }

    fn archive(dir: &Path) -> Vec<u8> {
        let envtest = dir.join("src/controller-tools/envtest");
        std::fs::create_dir_all(&envtest).unwrap();
        for name in ["kube-apiserver", "etcd"] {
            std::fs::write(envtest.join(name), format!("#!/bin/sh\necho {name}\n")).unwrap();
        }
        let tar = dir.join("a.tar.gz");
        let src = dir.join("src");
        Cmd::argv(["tar", "-czf"])
            .path(&tar)
            .arg("-C")
            .path(&src)
            .arg("controller-tools")
            .run()
            .unwrap();
        std::fs::read(tar).unwrap()
    }

    #[test]
    fn an_archive_is_unpacked_only_when_its_sum_is_the_pinned_one() {
        let scratch = project::target_dir().join(format!("release-test-{}", std::process::id()));
        let bytes = archive(&scratch);
        let sum = labkit::fingerprint::sha512_hex(&bytes);
        let url = serve(bytes);
        let wrong =
            Release { version: "v0.0.0-test".into(), url: url.clone(), sha512: "0".repeat(128) };
        let error = wrong.fetch().unwrap_err().to_string();
        assert!(error.contains("is not the pinned archive"), "{error}");
        assert!(!wrong.dir().exists(), "a refused archive left {}", wrong.dir().display());
        let right = Release { sha512: sum, ..wrong };
        let dir = right.fetch().unwrap();
        assert!(dir.join("kube-apiserver").is_file() && dir.join("etcd").is_file());
        assert_eq!(right.fetch().unwrap(), dir, "a second fetch reuses it");
        let _ = std::fs::remove_dir_all(&dir);
        let _ = std::fs::remove_dir_all(&scratch);
    }

    #[test]
    fn the_pinned_release_names_this_machines_archive() {
        let release = Release::here().unwrap().expect("linux and macOS have one");
        assert!(release.url.contains(&format!("envtest-{}-", release.version)), "{}", release.url);
        assert_eq!(release.sha512.len(), 128);
    }
}
