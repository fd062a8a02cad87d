//! The steps of `lab up --provider kind` that are more than a command, and
//! what every step learns on the way ([`Up`], `lab down`'s too); [`super::phases`] puts them in
//! order.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, bail, ensure};

use super::{CLUSTER_FILE, DEPLOYMENT, Kind, NAMESPACE, cluster_entry, config, node_container};
use crate::image;
use crate::lab::deploy::{DeploymentHost, Deploys};
use crate::lab::{kubeconfig, manifests, provider::Provider};
use crate::preflight::Status;
use labkit::command::Cmd;
use labkit::lab_file::{self, LabFile};
use labkit::record::Record;
use labkit::tr;

/// What `lab up` learns on the way.
#[derive(Default)]
pub struct Up {
    pub name: String,
    /// The lab's state directory.
    pub dir: PathBuf,
    /// The ConfigMap the controller keeps (`--target`).
    pub target: labkit::lab_file::Target,
    /// The node image the cluster runs (a reference Docker has).
    pub node_image: String,
    /// `docker version`: the engine's version and API version, or why it did not answer.
    pub(super) docker: Option<std::result::Result<String, String>>,
    pub(super) cgroup_version: Option<String>,
    pub(super) kind_version: Option<String>,
    pub(super) cluster_exists: bool,
    /// The ID of the node container of a cluster that exists.
    pub(super) node_id: Option<String>,
    pub(super) node_present: bool,
    /// `/kind/version` of the node image and the capabilities a privileged container gets.
    pub(super) node_facts: Option<String>,
    pub(super) host: config::Host,
    /// `docker inspect` of an existing node: its image and whether it runs.
    pub(super) existing_node: Option<String>,
    /// The controller image's ID in Docker, and in the node's containerd.
    pub(super) built_id: Option<String>,
    pub(super) loaded_id: Option<String>,
    pub(super) bundle_images: Vec<String>,
    pub(super) client: Option<kube::Client>,
    /// The API server's version, asked once connected.
    pub(super) version: String,
    /// Before the apply: whether the Deployment existed, the images its
    /// containers run in the node (image IDs), leftover test arguments.
    pub(super) deployment_existed: bool,
    pub(super) running_images: Vec<String>,
    pub(super) leftover_args: bool,
    /// What this lab made: the cluster first (its node container's ID as
    /// its uid), then what `lab up` applied in it.
    pub(super) record: Option<Record>,
    /// `lab down`: the cluster is this lab's, deleted.
    pub(super) ours: bool,
}

impl Up {
    /// The node must be (re)loaded with the controller image.
    pub(super) fn needs_load(&self) -> bool {
        self.built_id.is_none() || self.built_id != self.loaded_id
    }

    /// The Deployment existed and one of its containers runs another image
    /// than the one built (a new Deployment starts on the new image anyway).
    pub(super) fn needs_restart(&self) -> bool {
        self.deployment_existed
            && self.running_images.iter().any(|r| Some(r) != self.built_id.as_ref())
    }
}

/// A cluster of the lab's name that exists must be the one this lab's
/// record names (by its node container's ID): another is not this lab's
/// to reuse, and `lab down` would not delete it.
pub(super) fn check_cluster_is_ours(up: &mut Up) -> Result<()> {
    let name = &up.name;
    match super::not_ours(name, up.record.as_ref(), up.node_id.as_deref()) {
        Some(why) if up.cluster_exists => bail!(tr!(
            "a kind cluster named {name} exists and is not this lab's ({why}): \
             `kind delete cluster --name {name}` if it is yours, or use another --name",
            name,
            why
        )),
        _ => Ok(()),
    }
}

/// The node container's ID once kind made it: the cluster's uid in the record.
pub(super) fn record_cluster(up: &mut Up, out: Result<String>) -> Result<()> {
    let id = out.with_context(|| tr!("the new cluster's node container is not there"))?;
    let name = up.name.clone();
    up.record()?.made(&cluster_entry(&name), id.trim())
}

/// The strategic merge patch that removes a test's `args` from the controller's container.
pub(super) const CLEAR_ARGS: &str =
    r#"{"spec":{"template":{"spec":{"containers":[{"name":"controller","args":null}]}}}}"#;

/// `docker save` without `--platform`, for a Docker that has no such flag.
pub(super) fn strip_platform(save: &Cmd) -> Cmd {
    let mut args = save.arguments().to_vec();
    if let Some(at) = args.iter().position(|a| a == "--platform") {
        args.drain(at..at + 2);
    }
    Cmd::new(save.program()).args(args)
}

/// The preflight checks on what the probes saw; a FAIL stops `lab up`.
pub(super) fn machine_checks(up: &mut Up) -> Result<()> {
    let docker = match &up.docker {
        Some(Ok(line)) => Ok(line.split(' ').next().unwrap_or_default()),
        Some(Err(error)) => Err(error.as_str()),
        None => Err("docker: command not found"),
    };
    let cgroup = up.cgroup_version.as_deref().map(str::trim);
    let clusters = if up.cluster_exists { &up.name } else { "" };
    let checks =
        super::host_checks(&up.name, docker, up.kind_version.as_deref(), None, cgroup, clusters)?;
    for check in &checks {
        labkit::progress!("{check}");
    }
    let failed: Vec<String> = checks
        .iter()
        .filter(|c| c.status == Status::Fail)
        .map(|c| {
            tr!(
                "{name}: {found} (fix: {fix})",
                name = labkit::say::translate(c.name, &[]),
                found = c.found,
                fix = c.fix.as_deref().unwrap_or("-")
            )
        })
        .collect();
    if !failed.is_empty() {
        bail!(tr!("the kind lab cannot start here: {failed}", failed = failed.join("; ")));
    }
    up.host.cgroup_v1 = cgroup == Some("1");
    Ok(())
}

/// The node image's minor must be the kit's; the host's adaptations go into
/// the cluster config the lab uses.
pub(super) fn write_cluster_config(up: &mut Up, file: &Path) -> Result<()> {
    let facts = up.node_facts.clone().unwrap_or_default();
    let version = facts.lines().next().unwrap_or_default().trim().to_string();
    let minor = ::controller::version::parse_minor(
        version.trim_start_matches('v').split('.').nth(1).unwrap_or(""),
    );
    let target = ::controller::version::target_minor();
    ensure!(
        minor == Some(target),
        tr!(
            "node image {image} runs Kubernetes {version}, and this kit is built for 1.{target}: \
             use a 1.{target} node image (the pinned one, or `--node-image built`)",
            image = up.node_image,
            version = format!("{version:?}"),
            target
        )
    );
    up.host.no_sys_resource = config::has_sys_resource(&facts) == Some(false);
    for warning in up.host.warnings() {
        eprintln!("{}", tr!("warning: {warning}", warning));
    }
    let cluster = labkit::files::read_in_repo(CLUSTER_FILE)?;
    labkit::files::create_dir(&up.dir)?;
    labkit::files::write_public(file, config::for_host(&cluster, up.host)?)
}

/// A client for the lab's kubeconfig; an existing cluster must run the node
/// image asked for and answer.
pub(super) async fn connect(up: &mut Up, kubeconfig: &Path) -> Result<()> {
    if let Some(seen) = &up.existing_node {
        let (image, running) = seen.rsplit_once(' ').unwrap_or((seen, ""));
        let name = &up.name;
        ensure!(
            running == "true",
            tr!(
                "cluster {name} exists but its node container is stopped: \
                 `cargo xtask lab down --name {name}`, then `lab up` again",
                name
            )
        );
        ensure!(
            image == up.node_image,
            tr!(
                "cluster {name} runs node image {image}, not {wanted}: `cargo xtask lab down --name {name}` \
                 first (or `--node-image {image}` to keep it)",
                name,
                image,
                wanted = up.node_image
            )
        );
    }
    let client = kubeconfig::client(kubeconfig).await?;
    let version = client.apiserver_version().await.with_context(|| {
        tr!(
            "the API server of cluster {name} does not answer: `cargo xtask lab down --name {name}` and up again",
            name = up.name
        )
    })?;
    (up.client, up.version) = (Some(client), version.git_version);
    Ok(())
}

/// Before the apply: does the Deployment exist, which image does its pod
/// run, did a test leave arguments on it?
pub(super) async fn look_at_deployment(up: &mut Up) -> Result<()> {
    let Some(deployment) =
        DeploymentHost::new(up.client()?, NAMESPACE).deployments().get_opt(DEPLOYMENT).await?
    else {
        return Ok(());
    };
    up.deployment_existed = true;
    up.leftover_args = deployment
        .spec
        .and_then(|s| s.template.spec)
        .and_then(|s| s.containers.into_iter().find(|c| c.name == "controller"))
        .and_then(|c| c.args)
        .is_some_and(|args| !args.is_empty());
    Ok(())
}

impl Deploys for Up {
    fn client(&self) -> Result<kube::Client> {
        self.client.clone().with_context(|| tr!("no client for the cluster yet"))
    }

    fn record(&mut self) -> Result<&mut Record> {
        self.record.as_mut().with_context(|| tr!("no record opened"))
    }

    fn documents(&self) -> Result<Vec<serde_json::Value>> {
        Ok([manifests::rbac(&self.target)?, manifests::deployment(&self.target)?].concat())
    }

    fn lab_file(&self, controller: lab_file::Controller) -> Result<LabFile> {
        let kubeconfig = kube::config::Kubeconfig::read_from(self.dir.join("kubeconfig"))?;
        let api_server_url = kubeconfig
            .clusters
            .first()
            .and_then(|c| c.cluster.as_ref())
            .and_then(|c| c.server.clone())
            .with_context(|| tr!("the kind kubeconfig names no server"))?;
        let kind = lab_file::Kind {
            node_image: self.node_image.clone(),
            node: node_container(&self.name),
            controller_image: image::reference()?,
            controller_image_id: self.built_id.clone().unwrap_or_default(),
        };
        Ok(LabFile {
            kubernetes_version: self.version.clone(),
            api_server_url,
            kind: Some(kind),
            ..Kind.lab_file(&self.name, &self.dir, self.target.clone(), controller)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::save_platform;
    use super::*;

    #[test]
    fn docker_save_names_the_platform_where_docker_can() {
        assert_eq!(save_platform(Some("1.48"), "amd64").as_deref(), Some("linux/amd64"));
        assert_eq!(save_platform(Some("1.51"), "arm64").as_deref(), Some("linux/arm64"));
        // Debian's docker.io 20.10 speaks API 1.41 and has no --platform.
        assert_eq!(save_platform(Some("1.41"), "amd64"), None);
        assert_eq!(save_platform(None, "amd64"), None);
        let save = Cmd::argv(["docker", "save", "--platform", "linux/amd64", "-o", "x.tar", "i:1"]);
        assert_eq!(strip_platform(&save).to_string(), "docker save -o x.tar i:1");
    }

    #[test]
    fn a_restart_follows_the_image_the_pod_runs() {
        let mut up = Up {
            deployment_existed: true,
            built_id: Some("sha256:abc".into()),
            running_images: vec!["sha256:abc".into()],
            ..Up::default()
        };
        assert!(!up.needs_restart());
        up.running_images.push("sha256:old".into());
        assert!(up.needs_restart());
        up.running_images.clear();
        assert!(!up.needs_restart(), "scaled to zero: the apply starts the new image");
        up.running_images.push("sha256:old".into());
        up.deployment_existed = false;
        assert!(!up.needs_restart(), "a new Deployment starts on the new image anyway");
        up.loaded_id = Some("sha256:abc".into());
        assert!(!up.needs_load());
        up.loaded_id = None;
        assert!(up.needs_load());
    }
}
