//! `target/lab/<name>/lab.json`: how to reach a running lab.
//!
//! `cargo xtask lab up` writes it once everything is ready (so its presence means "was up");
//! `lab status`, `lab down` and the `e2e` crate read it. It is the contract between them:
//! plain data, no behaviour, every field documented. Paths are absolute. Add fields freely;
//! rename or remove one only together with [`FORMAT`] and every reader.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use crate::{files, tr};

/// Bumped when a reader of an older file would misread this one.
pub const FORMAT: u32 = 2;
pub const FILE_NAME: &str = "lab.json";

/// One lab.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LabFile {
    /// [`FORMAT`] at the time of writing.
    pub format: u32,
    /// `--name` of `lab up`; also the state directory's name.
    pub name: String,
    /// `target/lab/<name>`: logs, pid files, PKI, kubeconfigs; removed by `lab down`.
    pub state_dir: PathBuf,
    /// Seconds since the Unix epoch when the lab became ready.
    pub created_unix: u64,
    /// The API server's `/version` `gitVersion`, e.g. `v1.36.3`.
    pub kubernetes_version: String,
    /// `https://127.0.0.1:<port>`.
    pub api_server_url: String,
    /// cluster-admin (client certificate CN=lab-admin, O=system:masters). Mode 0600.
    pub admin_kubeconfig: PathBuf,
    pub controller: Controller,
    /// The processes the lab runs, in start order (envtest: etcd, kube-apiserver, controller).
    /// Empty for providers whose parts are not local processes.
    pub processes: Vec<Process>,
    /// `provider`, and what only that provider's labs have.
    #[serde(flatten)]
    pub section: Section,
    /// The ConfigMap the lab's controller keeps (`lab up --target`).
    #[serde(default)]
    pub target: Target,
}

/// A lab's provider and its own section of lab.json, one typed enum: as
/// JSON `"provider": "kind", "kind": {…}` (the shape of format 2, so older
/// files read as they are).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "provider", rename_all = "lowercase")]
pub enum Section {
    Envtest,
    /// A kind lab's node and images.
    Kind {
        kind: Kind,
    },
    /// A lab on a cluster the kit did not create: where, and what `lab up` applied there.
    Existing {
        existing: Existing,
    },
}

impl Section {
    pub fn provider(&self) -> ProviderKind {
        match self {
            Section::Envtest => ProviderKind::Envtest,
            Section::Kind { .. } => ProviderKind::Kind,
            Section::Existing { .. } => ProviderKind::Existing,
        }
    }
}

/// The ConfigMap a lab's controller keeps: its namespace and name. The Role
/// is made for exactly this one, and the controller started with it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Target {
    pub namespace: String,
    pub name: String,
}

impl Default for Target {
    fn default() -> Self {
        Target {
            namespace: controller::desired::DEFAULT_NAMESPACE.into(),
            name: controller::desired::DEFAULT_NAME.into(),
        }
    }
}

impl Target {
    /// `NAMESPACE/NAME`, both valid Kubernetes names.
    pub fn parse(text: &str) -> Result<Target, String> {
        let (namespace, name) = text
            .split_once('/')
            .ok_or_else(|| tr!("{text} is not NAMESPACE/NAME", text = format!("{text:?}")))?;
        controller::desired::Desired::new(namespace, name, controller::desired::default_data())
            .map_err(|e| e.to_string())?;
        Ok(Target { namespace: namespace.into(), name: name.into() })
    }

    pub fn is_default(&self) -> bool {
        *self == Target::default()
    }

    /// The controller's flags for it (none for the default).
    pub fn flags(&self) -> Vec<String> {
        if self.is_default() {
            return Vec::new();
        }
        vec!["--namespace".into(), self.namespace.clone(), "--name".into(), self.name.clone()]
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// What a kind lab runs on.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Kind {
    /// The node image the cluster was created from.
    pub node_image: String,
    /// The node's Docker container (`<name>-control-plane`).
    pub node: String,
    /// The controller image the Deployment runs, and its ID as built.
    pub controller_image: String,
    pub controller_image_id: String,
}

/// A lab on a cluster that was there before it (`lab up --provider existing`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Existing {
    /// The kubeconfig and context as given (`admin_kubeconfig` is a copy of that one context).
    pub kubeconfig: PathBuf,
    pub context: String,
    /// Where the controller, its RBAC and its ConfigMap live. What `lab up`
    /// made there (the namespace too, with `--create-namespace`) is in the
    /// lab's record ([`crate::record`]), which `lab down` undoes.
    pub namespace: String,
    /// The controller image as the Deployment names it: pushed, by digest.
    pub controller_image: String,
    /// The context may review access and read cluster-wide (SubjectAccessReviews, the API
    /// server's /metrics, Pods in `default`), as an instructor's may and an attendee's not:
    /// the suite's checks that need it run only then.
    #[serde(default)]
    pub cluster_wide: bool,
}

/// One object a lab made (or will make): its API, namespace and name.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Applied {
    pub api_version: String,
    pub kind: String,
    /// `None` for a cluster-scoped object.
    pub namespace: Option<String>,
    pub name: String,
}

impl std::fmt::Display for Applied {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.namespace {
            Some(namespace) => write!(f, "{} {namespace}/{}", self.kind, self.name),
            None => write!(f, "{} {}", self.kind, self.name),
        }
    }
}

/// The controller under test.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Controller {
    /// Base URL of its HTTP server: `<url>/healthz`, `/readyz`, `/metrics`.
    pub url: String,
    /// Its own identity: a ServiceAccount token (TokenRequest API), not admin. Mode 0600.
    pub kubeconfig: PathBuf,
    /// `namespace/name` of that ServiceAccount.
    pub service_account: String,
    /// When the token in `kubeconfig` expires (RFC 3339); a lab is meant to live for less.
    pub token_expires: String,
    /// Its log (stdout and stderr).
    pub log: PathBuf,
}

impl Controller {
    /// A controller run as a Deployment by `service_account`: reached
    /// through the API server's pod proxy (see e2e::lab), no log file here.
    pub fn deployment(service_account: String) -> Controller {
        Controller {
            url: String::new(),
            kubeconfig: PathBuf::new(),
            service_account,
            token_expires: "projected by the kubelet (rotated)".into(),
            log: PathBuf::new(),
        }
    }
}

/// One local process of the lab. To restart it: stop `pid` (its process group), then run
/// `binary` with `args`, appending output to `log` and writing the new pid to `pid_file`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Process {
    /// `etcd`, `kube-apiserver` or `controller`.
    pub role: String,
    /// Also the id of its process group.
    pub pid: u32,
    pub pid_file: PathBuf,
    pub binary: PathBuf,
    pub args: Vec<String>,
    /// As the binary reports it (`--version`), when it has one.
    pub version: Option<String>,
    /// Where the binary came from: `$KUBE_APISERVER`, `PATH`, `project cache`, `cargo build`, …
    pub source: String,
    pub log: PathBuf,
    /// Loopback ports it listens on, by purpose (`client`, `peer`, `https`, `http`).
    pub ports: BTreeMap<String, u16>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    /// kube-apiserver + etcd + the controller as local processes.
    Envtest,
    /// A kind cluster with the controller as a Deployment.
    Kind,
    /// A cluster the kit did not create, the controller as a Deployment in one namespace.
    Existing,
}

/// What a provider's lab offers the suites; a check that needs what it lacks
/// is not run there, saying why (`suite::RunsOn`). One row per provider.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Offers {
    /// Where it is said: "not run on {place}: …".
    pub place: &'static str,
    /// kube-apiserver and etcd as local processes the suites may stop and start.
    pub local_control_plane: bool,
    /// A kind node: its kubelet and container runtime.
    pub node: bool,
    /// A cluster the kit made, where it may act cluster-wide.
    pub own_cluster: bool,
}

/// The roles of an envtest lab's processes in lab.json.
pub const ETCD: &str = "etcd";
pub const API_SERVER: &str = "kube-apiserver";
pub const CONTROLLER: &str = "controller";

/// Where a lab's controller runs: the axis apart from the provider ([`LabFile::controller_runs`]).
pub enum ControllerRuns<'a> {
    /// A local process, as lab.json lists it.
    Process(&'a Process),
    /// A Deployment, in this namespace.
    Deployment(&'a str),
}

impl ProviderKind {
    /// What a lab of this provider offers the suites.
    pub fn offers(self) -> Offers {
        let (place, local_control_plane, node, own_cluster) = match self {
            ProviderKind::Envtest => ("envtest", true, false, true),
            ProviderKind::Kind => ("kind", false, true, true),
            ProviderKind::Existing => ("an existing cluster", false, false, false),
        };
        Offers { place, local_control_plane, node, own_cluster }
    }
}

impl std::fmt::Display for ProviderKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ProviderKind::Envtest => "envtest",
            ProviderKind::Kind => "kind",
            ProviderKind::Existing => "existing",
        })
    }
}

impl LabFile {
    /// A lab of `section` ready now, as `lab up` writes it last: its admin
    /// kubeconfig `<state_dir>/kubeconfig`, no local processes; the provider
    /// sets the API server's URL and version, and its processes if it has some.
    pub fn ready(
        name: &str,
        state_dir: &Path,
        section: Section,
        target: Target,
        controller: Controller,
    ) -> LabFile {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
        LabFile {
            format: FORMAT,
            name: name.into(),
            state_dir: state_dir.into(),
            created_unix: now.map(|d| d.as_secs()).unwrap_or_default(),
            kubernetes_version: String::new(),
            api_server_url: String::new(),
            admin_kubeconfig: state_dir.join("kubeconfig"),
            controller,
            processes: Vec::new(),
            section,
            target,
        }
    }

    pub fn provider(&self) -> ProviderKind {
        self.section.provider()
    }

    /// A kind lab's node and images.
    pub fn kind(&self) -> Option<&Kind> {
        match &self.section {
            Section::Kind { kind } => Some(kind),
            _ => None,
        }
    }

    /// A lab on a cluster the kit did not create.
    pub fn existing(&self) -> Option<&Existing> {
        match &self.section {
            Section::Existing { existing } => Some(existing),
            _ => None,
        }
    }

    /// Where the controller's Deployment lives (kind, an existing cluster):
    /// an existing cluster's lab's namespace, else the manifests'.
    pub fn deployment_namespace(&self) -> &str {
        self.existing().map_or(crate::deployment::NAMESPACE, |e| e.namespace.as_str())
    }

    /// Where the controller runs: its process when lab.json lists one (envtest), else its
    /// Deployment ([`LabFile::deployment_namespace`]).
    pub fn controller_runs(&self) -> ControllerRuns<'_> {
        match self.processes.iter().find(|p| p.role == CONTROLLER) {
            Some(process) => ControllerRuns::Process(process),
            None => ControllerRuns::Deployment(self.deployment_namespace()),
        }
    }

    pub fn path(state_dir: &Path) -> PathBuf {
        state_dir.join(FILE_NAME)
    }

    /// `None` when there is no lab.json; an error when there is one that cannot be used.
    pub fn read(state_dir: &Path) -> Result<Option<LabFile>> {
        let path = Self::path(state_dir);
        let Some(text) = files::read_if_there(&path)? else { return Ok(None) };
        let lab: LabFile = serde_json::from_str(&text)
            .with_context(|| tr!("{path} is not a lab file", path = path.display()))?;
        if lab.format != FORMAT {
            bail!(tr!(
                "{path} has format {format}, this xtask reads {ours}: `cargo xtask lab down` and up again",
                path = path.display(),
                format = lab.format,
                ours = FORMAT
            ));
        }
        Ok(Some(lab))
    }

    /// Written last by `up`, and 0600: it names the kubeconfigs next to it.
    pub fn write(&self) -> Result<()> {
        let json = serde_json::to_string_pretty(self)?;
        files::write_private(&Self::path(&self.state_dir), json + "\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// lab.json as `lab up` wrote it before the section was one enum (both
    /// sections always present, one null) still reads, as its provider; so
    /// does one from the envtest lab's removed container mode (its
    /// `controller.container` is ignored: that `docker run` is a process).
    #[test]
    fn a_lab_file_written_before_the_section_was_one_enum_reads() {
        let envtest = r#"{"format":2,"name":"a","provider":"envtest","state_dir":"/s","created_unix":1,
            "kubernetes_version":"v1.36.0","api_server_url":"https://127.0.0.1:1","admin_kubeconfig":"/s/k",
            "controller":{"url":"","kubeconfig":"","service_account":"d/c","token_expires":"","log":"","container":"a-controller"},
            "processes":[],"kind":null,"existing":null}"#;
        let lab: LabFile = serde_json::from_str(envtest).unwrap();
        assert_eq!(lab.provider(), ProviderKind::Envtest);
        let kind = envtest.replace(
            r#""provider":"envtest""#,
            r#""provider":"kind","kind":{"node_image":"n","node":"a-control-plane","controller_image":"c","controller_image_id":"i"}"#,
        ).replace(r#""kind":null,"#, "");
        let lab: LabFile = serde_json::from_str(&kind).unwrap();
        assert_eq!(lab.kind().map(|k| k.node.as_str()), Some("a-control-plane"));
        let written = serde_json::to_value(&lab).unwrap();
        assert_eq!((written["provider"].as_str(), written.get("existing")), (Some("kind"), None));
        assert_eq!(written["kind"]["node_image"], "n");
    }
}
