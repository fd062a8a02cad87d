//! The cluster `cargo maint test` treats as one that exists already: made
//! with the kind CLI directly (not `lab up`), one control plane and two
//! workers on the node image the kind lab uses, and an OCI registry built
//! here from distribution's Go module (`maint/registry`), wired to the nodes
//! as kind's local-registry guide does (a `certs.d` mirror for
//! `localhost:PORT`, the registry on the `kind` network). Its pod network is
//! wired by hand ([`pod_network`]); NetworkPolicy is enforced by kube-router
//! ([`network_policy`]), as kindnetd does in kind's own images.

mod network_policy;
mod pod_network;

#[cfg(test)]
pub(crate) use network_policy::MODULE as KUBE_ROUTER_MODULE;

use std::path::PathBuf;

use anyhow::Result;

use labkit::command::Cmd;
use labkit::go_build::{self, Definition};
use labkit::project::{self, shown};
use xtask::lab::kind::config::{self, Host};

pub const CLUSTER: &str = "lab-kit-room";
const REGISTRY: &str = "lab-kit-registry";
/// The registry as this machine and the nodes' containerd name it.
pub const REGISTRY_HOST: &str = "localhost:5001";
pub(crate) const REGISTRY_MODULE: &str = "maint/registry";
/// distribution's server, built from [`REGISTRY_MODULE`].
const REGISTRY_BUILD: Definition = crate::node_image::go_builds::plain(
    "registry",
    REGISTRY_MODULE,
    "github.com/distribution/distribution/v3",
);

/// A running room cluster; dropped, it is deleted with its registry.
pub struct RoomCluster {
    /// The instructor's kubeconfig (kind's, written here, not to ~/.kube/config).
    pub kubeconfig: PathBuf,
    pub context: String,
    /// Debian with a shell and curl, in the room's registry: what the tests' probe pods run.
    pub debian: String,
    removed: bool,
}

/// The registry's image: built from `maint/registry` unless Docker has this very one.
pub(crate) fn registry_image() -> Result<String> {
    let component = go_build::components([&REGISTRY_BUILD])?.remove(0);
    let main = labkit::files::read(&project::root().join(REGISTRY_MODULE).join("main.go"))?;
    let inputs = format!("{}\n{main}", component.fingerprint);
    let tag =
        format!("lab-kit/registry:{}", &labkit::fingerprint::sha256_hex(inputs.as_bytes())[..12]);
    docker_image(tag, "registry", |out| {
        component
            .build_cmd(&out.join("registry"), &["."])
            .run_long("building the registry (distribution v3)")?;
        let config = "version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: /var/lib/registry\nhttp:\n  addr: :5000\n";
        labkit::files::write_public(&out.join("config.yml"), config)?;
        // distribution v3 exports traces unless told not to (as its own image does).
        let dockerfile = "FROM scratch\nCOPY registry /bin/registry\nCOPY config.yml /etc/distribution/config.yml\n\
            ENV OTEL_TRACES_EXPORTER=none\nENTRYPOINT [\"/bin/registry\"]\nCMD [\"serve\", \"/etc/distribution/config.yml\"]\n";
        labkit::files::write_public(&out.join("Dockerfile"), dockerfile)
    })
}

/// Image `tag`, unless Docker has this very one: `fill` writes its build context (a
/// Dockerfile and what it copies) into `target/<folder>`, which the classic builder builds
/// (BuildKit would pull its own image, and no registry can be reached here).
pub(crate) fn docker_image(
    tag: String,
    folder: &str,
    fill: impl FnOnce(&std::path::Path) -> Result<()>,
) -> Result<String> {
    if xtask::lab::kind::image_present(&tag).succeeds() {
        return Ok(tag);
    }
    let dir = project::target_dir().join(folder);
    labkit::files::create_dir(&dir)?;
    fill(&dir)?;
    Cmd::argv(["docker", "build", "-q", "-t", &tag, &shown(&dir)])
        .env("DOCKER_BUILDKIT", "0")
        .run_long(&format!("building {tag}"))?;
    Ok(tag)
}

/// The kind config: three nodes, and what this host needs (as `lab up` adapts its own).
fn cluster_config() -> Result<String> {
    let cgroup = Cmd::argv(["docker", "info", "--format", "{{.CgroupVersion}}"]).read()?;
    let status = std::fs::read_to_string("/proc/self/status")?;
    let bounding = status.lines().find_map(|l| l.strip_prefix("CapBnd:")).unwrap_or_default();
    let host = Host {
        cgroup_v1: cgroup.trim() == "1",
        no_sys_resource: config::has_sys_resource(&format!("CapEff:{bounding}")) == Some(false),
    };
    let three = "kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\nnodes:\n  - role: control-plane\n  - role: worker\n  - role: worker\n";
    config::for_host(three, host)
}

/// Makes the cluster and its registry (what a previous run left is removed first).
pub async fn make(node_image: &str) -> Result<RoomCluster> {
    let image = registry_image()?;
    let dir = project::target_dir().join("room-cluster");
    std::fs::create_dir_all(&dir)?;
    let (kubeconfig, config_file) = (dir.join("kubeconfig"), dir.join("cluster.yaml"));
    labkit::files::write_public(&config_file, cluster_config()?)?;
    let mut cluster = RoomCluster {
        kubeconfig: kubeconfig.clone(),
        context: format!("kind-{CLUSTER}"),
        debian: String::new(),
        removed: false,
    };
    cluster.remove_now();
    cluster.removed = false;
    let port = REGISTRY_HOST.rsplit(':').next().unwrap_or("5001");
    Cmd::argv([
        "docker",
        "run",
        "-d",
        "--name",
        REGISTRY,
        "-p",
        &format!("127.0.0.1:{port}:5000"),
        &image,
    ])
    .run()?;
    Cmd::argv(["kind", "create", "cluster", "--name", CLUSTER, "--image", node_image, "--config"])
        .args([
            shown(&config_file),
            "--kubeconfig".into(),
            shown(&kubeconfig),
            "--wait".into(),
            "120s".into(),
        ])
        .run_long("creating a three-node kind cluster")?;
    let nodes = Cmd::argv(["kind", "get", "nodes", "--name", CLUSTER]).read()?;
    let mirror = format!("/etc/containerd/certs.d/{REGISTRY_HOST}");
    for node in nodes.split_whitespace() {
        let hosts = format!(
            "mkdir -p {mirror} && printf '[host.\"http://{REGISTRY}:5000\"]\\n' > {mirror}/hosts.toml"
        );
        Cmd::argv(["docker", "exec", node, "sh", "-c", &hosts]).run()?;
    }
    Cmd::argv(["docker", "network", "connect", "kind", REGISTRY]).run()?;
    let client = xtask::lab::kubeconfig::client(&kubeconfig).await?;
    pod_network::wire(&client).await?;
    cluster.debian = network_policy::install(&client).await?;
    Ok(cluster)
}

impl RoomCluster {
    /// Deletes the cluster and the registry.
    pub fn remove_now(&mut self) {
        if self.removed {
            return;
        }
        self.removed = true;
        let _ = Cmd::argv(["kind", "delete", "cluster", "--name", CLUSTER, "--kubeconfig"])
            .arg(shown(&self.kubeconfig))
            .run();
        let _ = Cmd::argv(["docker", "rm", "-f", REGISTRY]).read();
    }
}

impl Drop for RoomCluster {
    fn drop(&mut self) {
        self.remove_now();
    }
}
