//! The cluster config `lab up` hands to kind: `kind/cluster.yaml` plus what
//! this host needs, each adaptation announced by a warning line. A cgroup v2
//! host with every capability (a laptop) gets the file unchanged.

use anyhow::{Context as _, Result};
use labkit::tr;
use serde_json::{Value, json};

/// Facts about the Docker host that change how the node must be configured.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Host {
    /// `docker info`'s CgroupVersion is 1.
    pub cgroup_v1: bool,
    /// A privileged container lacks CAP_SYS_RESOURCE (the host's capability
    /// bounding set does not have it).
    pub no_sys_resource: bool,
}

/// kubelet 1.35+ refuses to start on cgroup v1 unless told otherwise.
const CGROUP_V1_PATCH: &str = "kind: KubeletConfiguration\nfailCgroupV1: false\n";
/// runc cannot lower a container's `oom_score_adj` without CAP_SYS_RESOURCE
/// (every sandbox fails: "nsexec: failed to update /proc/self/oom_score_adj");
/// containerd then keeps it at or above its own.
const OOM_SCORE_PATCH: &str =
    "[plugins.\"io.containerd.grpc.v1.cri\"]\n  restrict_oom_score_adj = true\n";

impl Host {
    /// What each adaptation is, for the warning lines `lab up` prints.
    pub fn warnings(&self) -> Vec<String> {
        let mut lines = Vec::new();
        if self.cgroup_v1 {
            lines.push(tr!(
                "this Docker host uses cgroup v1: the kubelet gets `failCgroupV1: false` \
                 (a kubeadmConfigPatch); kind and Kubernetes deprecate v1, prefer a cgroup v2 host"
            ));
        }
        if self.no_sys_resource {
            lines.push(tr!(
                "privileged containers here lack CAP_SYS_RESOURCE: containerd in the node gets \
                 `restrict_oom_score_adj = true` (a containerdConfigPatch), or no pod could start"
            ));
        }
        lines
    }
}

/// `kind/cluster.yaml` with the patches `host` needs, as YAML.
pub fn for_host(cluster_yaml: &str, host: Host) -> Result<String> {
    let mut config: Value = serde_saphyr::from_str(cluster_yaml)
        .with_context(|| tr!("{path} is not valid YAML", path = "kind/cluster.yaml"))?;
    let object = config
        .as_object_mut()
        .with_context(|| tr!("{path} is not a mapping", path = "kind/cluster.yaml"))?;
    let mut add = |key: &str, patch: &str| {
        let list = object.entry(key).or_insert_with(|| json!([]));
        if let Some(list) = list.as_array_mut() {
            list.push(Value::String(patch.to_string()));
        }
    };
    if host.cgroup_v1 {
        add("kubeadmConfigPatches", CGROUP_V1_PATCH);
    }
    if host.no_sys_resource {
        add("containerdConfigPatches", OOM_SCORE_PATCH);
    }
    let mut text = String::from(
        "# Written by `cargo xtask lab up` from kind/cluster.yaml and what this host needs.\n",
    );
    text.push_str(&serde_saphyr::to_string(&config)?);
    Ok(text)
}

/// CAP_SYS_RESOURCE's bit in `/proc/<pid>/status` capability masks.
const CAP_SYS_RESOURCE: u32 = 24;

/// Whether a `CapEff:` line (hex mask) has CAP_SYS_RESOURCE.
pub fn has_sys_resource(status: &str) -> Option<bool> {
    let mask = status.lines().find_map(|l| l.strip_prefix("CapEff:")).map(str::trim)?;
    let bits = u64::from_str_radix(mask, 16).ok()?;
    Some(bits & (1 << CAP_SYS_RESOURCE) != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CLUSTER: &str = "kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\nnodes:\n  - role: control-plane\n    image: kindest/node:v1.36.4\n";

    #[test]
    fn a_capable_cgroup_v2_host_gets_the_file_as_it_is() {
        let out = for_host(CLUSTER, Host::default()).unwrap();
        let config: Value = serde_saphyr::from_str(&out).unwrap();
        let original: Value = serde_saphyr::from_str(CLUSTER).unwrap();
        assert_eq!(config, original);
        assert!(Host::default().warnings().is_empty());
    }

    #[test]
    fn each_host_fact_adds_its_patch_and_says_so() {
        let host = Host { cgroup_v1: true, no_sys_resource: true };
        let config: Value = serde_saphyr::from_str(&for_host(CLUSTER, host).unwrap()).unwrap();
        assert_eq!(config["kubeadmConfigPatches"][0], CGROUP_V1_PATCH);
        assert_eq!(config["containerdConfigPatches"][0], OOM_SCORE_PATCH);
        assert_eq!(config["nodes"][0]["role"], "control-plane");
        assert_eq!(host.warnings().len(), 2);
    }

    #[test]
    fn reads_cap_sys_resource_from_a_status_mask() {
        // Seen on a CI host whose bounding set lacks it, and on a full one.
        assert_eq!(has_sys_resource("CapInh:\t0\nCapEff:\t0000003ffeffffff\n"), Some(false));
        assert_eq!(has_sys_resource("CapEff:\t000001ffffffffff\n"), Some(true));
        assert_eq!(has_sys_resource("nothing"), None);
    }
}
