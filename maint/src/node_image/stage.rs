//! The node image assembled the way kind's node-image builder does it: a
//! container of the rootfs, the files copied in, a setup script run inside
//! (systemd's container tweaks from kind's base Dockerfile, the control-plane
//! images imported into containerd), the container committed.
//!
//! The files: kind's base-image files from the sigs.k8s.io/kind module (the
//! module cache drops their exec bits: set again here), the programs built by
//! [`super::go_builds`], `/kind/version`, the pod network and the manifests
//! kind applies at cluster creation.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};

use super::{Build, FINGERPRINT_LABEL, Recipe, images};
use labkit::command::Cmd;
use labkit::project::shown;
use xtask::plan::Step;

/// kind's first node gets the first /24 of its default pod subnet
/// (10.244.0.0/16): one node, one static range.
pub const POD_RANGE: &str = "10.244.0.0/24";

/// ptp + host-local, the plugins kind's own CNI (kindnetd) configures, with
/// a fixed range instead of the node's podCIDR: no CNI image is needed.
const CONFLIST: &str = r#"{
  "cniVersion": "1.0.0",
  "name": "lab-kit",
  "plugins": [
    {
      "type": "ptp",
      "ipMasq": true,
      "mtu": 1500,
      "ipam": {
        "type": "host-local",
        "dataDir": "/run/cni-ipam-state",
        "routes": [{"dst": "0.0.0.0/0"}],
        "ranges": [[{"subnet": "POD_RANGE"}]]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
"#;

/// kind applies `/kind/manifests/default-cni.yaml` at creation: here it only
/// says where the network comes from (`kubectl -n kube-system get cm lab-kit-cni`).
const CNI_MANIFEST: &str = "\
apiVersion: v1
kind: ConfigMap
metadata:
  name: lab-kit-cni
  namespace: kube-system
data:
  network: >-
    One node, pods in POD_RANGE: a static ptp + host-local conflist in
    /etc/cni/net.d/10-lab-kit.conflist on the node (cargo maint node-image).
";

/// kind applies `/kind/manifests/default-storage.yaml`: a default
/// StorageClass without a provisioner (claims stay Pending; the lab needs none).
const STORAGE_MANIFEST: &str = "\
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: standard
  annotations:
    storageclass.kubernetes.io/is-default-class: \"true\"
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: WaitForFirstConsumer
";

/// Run inside the build container.
const SETUP: &str = r#"#!/bin/bash
# Written by `cargo maint node-image` (maint/src/node_image/stage.rs);
# runs inside the container the node image is committed from.
set -euo pipefail
# systemd in a container, as kind's base image sets it up: only what the node needs starts.
find /lib/systemd/system/sysinit.target.wants/ -name systemd-tmpfiles-setup.service -delete
rm -f /lib/systemd/system/multi-user.target.wants/* /etc/systemd/system/*.wants/* \
  /lib/systemd/system/local-fs.target.wants/* /lib/systemd/system/sockets.target.wants/*udev* \
  /lib/systemd/system/sockets.target.wants/*initctl* /lib/systemd/system/basic.target.wants/*
echo "ReadKMsg=no" >> /etc/systemd/journald.conf
systemctl enable kubelet.service containerd.service undo-mount-hacks.service
systemctl mask systemd-binfmt.service
# The control-plane images, into containerd's k8s.io namespace, pinned so the kubelet keeps them.
containerd >/tmp/lab-kit-containerd.log 2>&1 &
pid=$!
for _ in $(seq 1 100); do ctr version >/dev/null 2>&1 && break; sleep 0.1; done
ctr version >/dev/null || { cat /tmp/lab-kit-containerd.log; exit 1; }
for archive in /tmp/lab-kit-images/*.tar; do
  ctr --namespace=k8s.io images import --label=io.cri-containerd.pinned=pinned --no-unpack --digests "$archive"
done
ctr --namespace=k8s.io images list -q
kill "$pid"
wait "$pid" || true
rm -rf /tmp/lab-kit-images /tmp/lab-kit-containerd.log "$0"
"#;

/// Where each built program goes in the node.
const PROGRAMS: &[(&str, &str, &str)] = &[
    ("containerd", "containerd", "usr/local/bin"),
    ("containerd", "ctr", "usr/local/bin"),
    ("containerd", "containerd-shim-runc-v2", "usr/local/bin"),
    ("cri-tools", "crictl", "usr/local/bin"),
    ("runc", "runc", "usr/local/sbin"),
    ("cni-plugins", "host-local", "opt/cni/bin"),
    ("cni-plugins", "loopback", "opt/cni/bin"),
    ("cni-plugins", "ptp", "opt/cni/bin"),
    ("cni-plugins", "portmap", "opt/cni/bin"),
    // kind's kubelet unit expects /usr/bin/kubelet.
    ("kubernetes", "kubeadm", "usr/bin"),
    ("kubernetes", "kubelet", "usr/bin"),
    ("kubernetes", "kubectl", "usr/bin"),
];

/// Files copied into the node, and what to do with them.
struct Stage {
    dir: PathBuf,
    kind_files: PathBuf,
    programs: Vec<(PathBuf, String)>,
    kubernetes: String,
}

pub fn steps(recipe: &Recipe) -> Result<Vec<Step<Build>>> {
    let work = recipe.work();
    let container = recipe.build_container();
    let reference = recipe.reference();
    let committed = format!("{}-commit", reference);
    let final_context = work.join("final");
    let stage = stage_of(recipe, &work)?;
    let stage_dir = stage.dir.clone();
    let commit = commit_cmd(recipe, &container, &committed);
    let ctr = recipe.binary("containerd", "ctr")?;
    Ok(vec![
        Step::probe(
            Cmd::new(ctr.display().to_string()).args(["oci", "spec"]),
            |build: &mut Build, out: Result<String>| {
                build.oci_spec = out?;
                Ok(())
            },
        ),
        Step::own(
            format!(
                "stage kind's base files ({}), the programs and the node's config in {}",
                stage.kind_files.display(),
                shown(&stage_dir)
            ),
            move |build: &mut Build| {
                let spec = build.oci_spec.clone();
                Box::pin(async move { stage.write(&spec) })
            },
        ),
        Step::probe(Cmd::argv(["docker", "rm", "-f", &container]), |_, _| Ok(())),
        Step::run(Cmd::argv([
            "docker",
            "run",
            "-d",
            "--name",
            &container,
            "--entrypoint",
            "sleep",
            &recipe.rootfs.image(),
            "infinity",
        ])),
        Step::run(
            Cmd::argv(["docker", "cp"])
                .arg(format!("{}/.", stage_dir.display()))
                .arg(format!("{container}:/")),
        ),
        Step::run(
            Cmd::argv(["docker", "cp"])
                .path(&images::archives_dir(recipe))
                .arg(format!("{container}:/tmp/lab-kit-images")),
        ),
        Step::run(Cmd::argv(["docker", "exec", &container, "bash", "/tmp/lab-kit-setup.sh"])),
        Step::run(commit),
        {
            let (dir, committed) = (final_context.clone(), committed.clone());
            Step::own(
                format!(
                    "write {}/Dockerfile: FROM the commit, STOPSIGNAL SIGRTMIN+3",
                    shown(&final_context)
                ),
                move |_| {
                    Box::pin(async move {
                        std::fs::create_dir_all(&dir)?;
                        // `docker commit --change` cannot set it; systemd stops on it.
                        let text = format!("FROM {committed}\nSTOPSIGNAL SIGRTMIN+3\n");
                        std::fs::write(dir.join("Dockerfile"), text)
                            .context("cannot write the Dockerfile")
                    })
                },
            )
        },
        Step::run(Cmd::argv(["docker", "build", "-q", "-t", &reference]).path(&final_context)),
        Step::run(Cmd::argv(["docker", "rmi", &committed])),
        Step::run(Cmd::argv(["docker", "rm", "-f", &container])),
    ])
}

/// What goes into the node's filesystem before the commit.
fn stage_of(recipe: &Recipe, work: &std::path::Path) -> Result<Stage> {
    Ok(Stage {
        dir: work.join("stage"),
        kind_files: recipe.kind_module()?.join("images/base/files"),
        programs: PROGRAMS
            .iter()
            .map(|(component, program, dir)| {
                Ok((recipe.binary(component, program)?, format!("{dir}/{program}")))
            })
            .collect::<Result<_>>()?,
        kubernetes: recipe.kubernetes.clone(),
    })
}

/// `docker commit` of the build container, with the node's entrypoint,
/// environment and the labels that say what it was built from.
fn commit_cmd(recipe: &Recipe, container: &str, committed: &str) -> Cmd {
    let labels = [
        format!("LABEL {FINGERPRINT_LABEL}={}", recipe.fingerprint),
        format!("LABEL lab-kit.node-image.kubernetes={}", recipe.kubernetes),
        format!("LABEL lab-kit.node-image.arch={}", recipe.arch.go),
    ];
    let mut commit = Cmd::argv(["docker", "commit"]);
    for change in [
        r#"ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]"#,
        "CMD []",
        // systemd checks it to know it runs in a container.
        "ENV container=docker",
    ]
    .into_iter()
    .map(String::from)
    .chain(labels)
    {
        commit = commit.args(["--change", &change]);
    }
    commit.args([container, committed])
}

impl Stage {
    fn write(&self, oci_spec: &str) -> Result<()> {
        if self.dir.exists() {
            std::fs::remove_dir_all(&self.dir)
                .with_context(|| format!("cannot clear {}", self.dir.display()))?;
        }
        copy_kind_files(&self.kind_files, &self.dir)?;
        for (binary, target) in &self.programs {
            let to = self.dir.join(target);
            create_parent(&to)?;
            std::fs::copy(binary, &to)
                .with_context(|| format!("cannot copy {}", binary.display()))?;
            set_mode(&to, 0o755)?;
        }
        let config = labkit::files::read(&self.dir.join("etc/containerd/config.toml"))?;
        let files = [
            ("etc/containerd/config.toml", with_sandbox_image(&config, &images::pause_tag())),
            ("etc/containerd/cri-base.json", cri_base(oci_spec)?),
            ("kind/version", self.kubernetes.clone()),
            ("kind/manifests/default-cni.yaml", CNI_MANIFEST.replace("POD_RANGE", POD_RANGE)),
            ("kind/manifests/default-storage.yaml", STORAGE_MANIFEST.into()),
            ("etc/cni/net.d/10-lab-kit.conflist", CONFLIST.replace("POD_RANGE", POD_RANGE)),
            ("tmp/lab-kit-setup.sh", SETUP.into()),
        ];
        for (path, text) in files {
            let path = self.dir.join(path);
            create_parent(&path)?;
            labkit::files::write_public(&path, text)?;
        }
        std::fs::create_dir_all(self.dir.join("etc/kubernetes/manifests"))?;
        set_mode(&self.dir.join("tmp/lab-kit-setup.sh"), 0o755)
    }
}

/// kind's `images/base/files` tree: directories and files as its Dockerfile
/// copies them (0755 for `usr/local/bin` and `kind/bin`, 0644 otherwise).
fn copy_kind_files(from: &Path, to: &Path) -> Result<()> {
    for entry in walkdir::WalkDir::new(from).min_depth(1) {
        let entry = entry.with_context(|| format!("cannot read {}", from.display()))?.into_path();
        let relative = entry.strip_prefix(from).unwrap_or(&entry);
        let target = to.join(relative);
        if entry.is_dir() {
            std::fs::create_dir_all(&target)?;
            set_mode(&target, 0o755)?;
            continue;
        }
        create_parent(&target)?;
        std::fs::copy(&entry, &target)
            .with_context(|| format!("cannot copy {}", entry.display()))?;
        let executable = relative.starts_with("usr/local/bin") || relative.starts_with("kind/bin");
        set_mode(&target, if executable { 0o755 } else { 0o644 })?;
    }
    Ok(())
}

fn create_parent(path: &Path) -> Result<()> {
    if let Some(parent) = path.parent() {
        labkit::files::create_dir(parent)?;
    }
    Ok(())
}

fn set_mode(path: &Path, mode: u32) -> Result<()> {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .with_context(|| format!("cannot chmod {}", path.display()))
}

/// containerd's sandbox image set to the pause image the node carries.
pub fn with_sandbox_image(config: &str, image: &str) -> String {
    config
        .lines()
        .map(|line| {
            if line.trim_start().starts_with("sandbox_image") {
                let indent = &line[..line.len() - line.trim_start().len()];
                format!("{indent}sandbox_image = \"{image}\"")
            } else {
                line.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

/// `ctr oci spec` as kind's base image turns it into containerd's base
/// runtime spec: kind's product-files hook added, the rlimits removed.
pub fn cri_base(oci_spec: &str) -> Result<String> {
    let mut spec: serde_json::Value =
        serde_json::from_str(oci_spec).context("`ctr oci spec` printed no JSON")?;
    let hooks = spec["hooks"]["createContainer"].as_array().cloned().unwrap_or_default();
    let mut hooks = hooks;
    hooks.push(serde_json::json!({"path": "/kind/bin/mount-product-files.sh"}));
    spec["hooks"]["createContainer"] = serde_json::Value::Array(hooks);
    if let Some(process) = spec["process"].as_object_mut() {
        process.remove("rlimits");
    }
    Ok(serde_json::to_string_pretty(&spec)? + "\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sandbox_image_is_the_one_carried() {
        let config = "[plugins.\"io.containerd.grpc.v1.cri\"]\n  # comment\n  sandbox_image = \"registry.k8s.io/pause:3.10\"\n  x = 1";
        let out = with_sandbox_image(config, "registry.k8s.io/pause:3.10.2");
        assert!(out.contains("  sandbox_image = \"registry.k8s.io/pause:3.10.2\"\n"), "{out}");
        assert!(out.contains("  x = 1"));
    }

    #[test]
    fn the_runtime_spec_gets_kinds_hook_and_no_rlimits() {
        let spec = r#"{"process":{"rlimits":[{"type":"RLIMIT_NOFILE"}],"cwd":"/"},"hooks":{}}"#;
        let out: serde_json::Value = serde_json::from_str(&cri_base(spec).unwrap()).unwrap();
        assert_eq!(out["hooks"]["createContainer"][0]["path"], "/kind/bin/mount-product-files.sh");
        assert!(out["process"].get("rlimits").is_none());
        assert_eq!(out["process"]["cwd"], "/");
    }

    #[test]
    fn the_pod_network_is_one_static_range() {
        let conflist: serde_json::Value =
            serde_json::from_str(&CONFLIST.replace("POD_RANGE", POD_RANGE)).unwrap();
        assert_eq!(conflist["plugins"][0]["type"], "ptp");
        assert_eq!(conflist["plugins"][0]["ipam"]["ranges"][0][0]["subnet"], POD_RANGE);
    }
}
