//! `target/lab/<name>/lab.json`: how to reach a running lab.
//!
//! `cargo xtask lab up` writes it once everything is ready (so its presence means "was up");
//! `lab status`, `lab down` and the `e2e` crate read it. It is the contract between them:
//! plain data, no behaviour, every field documented. Paths are absolute. Add fields freely;
//! rename or remove one only together with [`FORMAT`] and every reader.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use controller::desired::{Desired, InvalidDesired};
use serde::{Deserialize, Serialize};

use crate::{files, tr};

/// Bumped when a reader of an older file would misread this one.
pub const FORMAT: u32 = 3;
pub const FILE_NAME: &str = "lab.json";

/// One lab.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
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
    /// Its provider's name, as `lab up --provider` takes it (`envtest`, `kind`, `existing`).
    pub provider: String,
    /// What the lab offers the suites, as its provider said at `lab up`.
    pub offers: Offers,
    /// A kind lab's node and images.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<Kind>,
    /// A lab on a cluster the kit did not create: where, and what `lab up` applied there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub existing: Option<Existing>,
    /// The ConfigMap the lab's controller keeps (`lab up --target`).
    #[serde(default)]
    pub target: Target,
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
        let target = Target { namespace: namespace.into(), name: name.into() };
        target.desired().map_err(|e| e.to_string())?;
        Ok(target)
    }

    /// The course's data, kept at this ConfigMap.
    pub fn desired(&self) -> Result<Desired, InvalidDesired> {
        Desired::new(&self.namespace, &self.name, controller::desired::default_data())
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
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
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
            service_account,
            token_expires: "projected by the kubelet (rotated)".into(),
            ..Controller::default()
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

/// What a lab offers the suites, as its provider says (`Provider::offers`); a
/// check that needs what it lacks is not run there, saying why (`suite::RunsOn`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Offers {
    /// Where it is said: "not run on {place}: …".
    pub place: String,
    /// kube-apiserver and etcd as local processes the suites may stop and start.
    pub local_control_plane: bool,
    /// A kind node: its kubelet and container runtime.
    pub node: bool,
    /// A cluster the kit made, where it may act cluster-wide.
    pub own_cluster: bool,
    /// The lab's user may review access and read cluster-wide (SubjectAccessReviews, the API
    /// server's /metrics, Pods in `default`): on the kit's own clusters, and on an existing one
    /// when its context may, as an instructor's may and an attendee's not.
    pub cluster_wide: bool,
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

impl LabFile {
    /// A lab of `provider`, which `offers` that, ready now, as `lab up` writes it last: its
    /// admin kubeconfig `<state_dir>/kubeconfig`, no local processes; the provider sets the API
    /// server's URL and version, its processes if it has some, and its section.
    pub fn ready(
        name: &str,
        state_dir: &Path,
        (provider, offers): (&str, Offers),
        target: Target,
        controller: Controller,
    ) -> LabFile {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
        LabFile {
            format: FORMAT,
            name: name.into(),
            state_dir: state_dir.into(),
            created_unix: now.map(|d| d.as_secs()).unwrap_or_default(),
            admin_kubeconfig: state_dir.join("kubeconfig"),
            controller,
            provider: provider.into(),
            offers,
            target,
            ..LabFile::default()
        }
    }

    /// Where the controller's Deployment lives (kind, an existing cluster):
    /// an existing cluster's lab's namespace, else the manifests'.
    pub fn deployment_namespace(&self) -> &str {
        self.existing.as_ref().map_or(crate::deployment::NAMESPACE, |e| e.namespace.as_str())
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
        let not_lab = || tr!("{path} is not a lab file", path = path.display());
        let lab: serde_json::Value = serde_json::from_str(&text).with_context(not_lab)?;
        if lab["format"] != FORMAT {
            bail!(tr!(
                "{path} has format {format}, this xtask reads {ours}: `cargo xtask lab down` and up again",
                path = path.display(),
                format = lab["format"],
                ours = FORMAT
            ));
        }
        Ok(Some(serde_json::from_value(lab).with_context(not_lab)?))
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

    /// What a provider writes reads back, its section only when it has one; a lab.json of
    /// another format is refused before its fields are read (format 2 had no `offers`),
    /// saying what to do.
    #[test]
    fn a_lab_file_reads_back_and_one_of_another_format_is_refused_saying_what_to_do() {
        let dir = std::env::temp_dir().join(format!("labkit-lab-file-{}", std::process::id()));
        files::create_dir(&dir).unwrap();
        let offers = Offers {
            place: "a place".into(),
            local_control_plane: false,
            node: true,
            own_cluster: true,
            cluster_wide: false,
        };
        let controller = Controller::deployment("ns/sa".into());
        let lab = LabFile::ready("a", &dir, ("p", offers.clone()), Target::default(), controller);
        lab.write().unwrap();
        let written: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(LabFile::path(&dir)).unwrap()).unwrap();
        assert_eq!((written["provider"].as_str(), written.get("kind")), (Some("p"), None));
        let read = LabFile::read(&dir).unwrap().unwrap();
        assert_eq!((read.provider.as_str(), &read.offers), ("p", &offers));
        files::write_private(&LabFile::path(&dir), r#"{"format":2,"provider":"kind"}"#).unwrap();
        let refused = format!("{:#}", LabFile::read(&dir).unwrap_err());
        let said = "has format 2, this xtask reads 3: `cargo xtask lab down` and up again";
        assert!(refused.ends_with(said), "{refused}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
