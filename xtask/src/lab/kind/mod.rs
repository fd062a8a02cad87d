//! The kind provider, the course's own setting: a kind cluster on the pinned
//! node image (or one built here: [`BUILT_IMAGE`]), the controller
//! image built and loaded into the node, the RBAC and the Deployment applied,
//! the rollout awaited.
//!
//! `lab up`, `lab down` and `--dry-run` share one list of steps ([`phases::up_plan`],
//! [`down_plan`]): printed, or carried out ([`crate::plan`]). What is already
//! done is skipped by asking the system, not a file of ours: the cluster by
//! `kind get clusters`, the controller image by the node's containerd
//! (`crictl inspecti`, as `kind load` does), the restart by the pod's image.

pub mod bundle;
pub mod config;
mod phases;
mod steps;

use self::steps::Up;

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};

use crate::image::Builder;
use crate::lab::deploy;
use crate::lab::options::UpOptions;
use crate::lab::provider::{Answer, Health, Machine, Provider, docker_version, probe};
use crate::mirrors::RegistryMirror;
use crate::plan::{self, Step};
use crate::preflight::{self, Check};
use labkit::command::Cmd;
use labkit::lab_file::{Applied, LabFile, Offers};
use labkit::project::shown;
use labkit::record::Record;
use labkit::tr;

pub use crate::lab::deploy::{DEPLOYMENT, NAMESPACE};

/// The cluster definition, relative to the project root.
pub const CLUSTER_FILE: &str = "kind/cluster.yaml";
/// How long `kind create cluster` waits for the node to be Ready.
const WAIT: &str = "120s";

/// `kind version`, echoed; `None` when kind is not on PATH.
pub fn kind_version() -> Option<String> {
    Cmd::argv(["kind", "version"]).read().ok()
}

/// The node's container: kind names it after the cluster.
pub fn node_container(name: &str) -> String {
    format!("{name}-control-plane")
}

/// A kind cluster as the lab's record names it; its uid is its node container's ID.
pub fn cluster_entry(name: &str) -> Applied {
    Applied {
        api_version: "kind.x-k8s.io/v1alpha4".into(),
        kind: "Cluster".into(),
        namespace: None,
        name: name.into(),
    }
}

/// `--node-image built`: the image `cargo maint node-image` builds on this
/// machine (from Debian's packages and Go modules, for machines that cannot
/// pull) and tags so.
pub const BUILT_IMAGE: &str = "lab-kit/kind-node:built";

/// Builds [`BUILT_IMAGE`] unless its inputs are unchanged (the builder is a
/// maintainers' instrument: maint/src/node_image/).
pub fn build_node_image() -> Cmd {
    labkit::command::cargo(["maint", "node-image"])
}

pub use crate::image::image_present;

/// `--node-image`: which node image the cluster runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeImage {
    /// The one kind/node-images.toml names for the kind found (pulled by Docker when missing).
    Pinned,
    /// [`BUILT_IMAGE`], built first unless it is up to date.
    Built,
    /// An image by reference: present in Docker, or pulled.
    Given(String),
}

impl NodeImage {
    pub fn parse(value: Option<&str>) -> NodeImage {
        match value {
            None => NodeImage::Pinned,
            Some("built") => NodeImage::Built,
            Some(other) => NodeImage::Given(other.to_string()),
        }
    }

    /// The image's reference; the pinned one is the kind release's (`kind_version`).
    pub fn reference(&self, kind_version: Option<&str>) -> Result<String> {
        Ok(match self {
            NodeImage::Pinned => {
                let table = labkit::kind_releases::table()?;
                let found = kind_version.with_context(|| {
                    tr!(
                        "kind is not on PATH: `nix develop` provides it, or install a kind release that \
                         kind/node-images.toml lists"
                    )
                })?;
                labkit::kind_releases::for_kind(&table, found).map_err(anyhow::Error::msg)?.image
            }
            NodeImage::Given(reference) => reference.clone(),
            NodeImage::Built => BUILT_IMAGE.to_string(),
        })
    }
}

/// Where the images come from.
#[derive(Clone, Debug)]
pub enum Images {
    /// Build the controller image with this builder; the node image as chosen; Docker Hub
    /// through the mirror, if one is given (the node image's pull, the nodes' containerd).
    Build(Builder, NodeImage, RegistryMirror),
    /// Load everything from an offline bundle; nothing is pulled or built.
    Bundle(PathBuf),
}

/// `docker save` names the platform where Docker can (API 1.48+, Docker 28):
/// with the containerd image store an image may hold several, and
/// `kind load image-archive` needs exactly this machine's.
pub fn save_platform(api_version: Option<&str>, arch: &str) -> Option<String> {
    let (major, minor) = api_version?.trim().split_once('.')?;
    let supported = (major.parse::<u32>().ok()?, minor.parse::<u32>().ok()?) >= (1, 48);
    supported.then(|| format!("linux/{arch}"))
}

/// Docker's name for this machine's architecture.
pub fn docker_arch() -> &'static str {
    match std::env::consts::ARCH {
        "aarch64" => "arm64",
        _ => "amd64",
    }
}

/// `kind get clusters`: whether a cluster of the lab's name exists (`lab up`'s checks, `lab down`).
fn find_cluster() -> Step<Up> {
    Step::probe(Cmd::argv(["kind", "get", "clusters"]), |up: &mut Up, out: Result<String>| {
        up.cluster_exists = out.unwrap_or_default().lines().any(|c| c.trim() == up.name);
        Ok(())
    })
}

/// The ID of the node container of a cluster of the lab's name that exists.
fn find_node(name: &str) -> Step<Up> {
    let container = node_container(name);
    Step::probe(
        Cmd::argv(["docker", "inspect", "--format", "{{.Id}}", &container]),
        |up: &mut Up, out: Result<String>| {
            up.node_id = out.ok().map(|id| id.trim().to_string());
            Ok(())
        },
    )
    .when(tr!("if a cluster named {name} exists", name), |up: &Up| up.cluster_exists)
}

/// What `lab down` does for a kind lab (also when lab.json is gone): the
/// cluster deleted when this lab's record names it and its node is the one
/// recorded; a cluster of the name that is not this lab's is left and named.
pub fn down_plan(name: &str, state_dir: &Path) -> Vec<Step<Up>> {
    let kubeconfig = shown(&state_dir.join("kubeconfig"));
    let dir = state_dir.to_path_buf();
    vec![
        find_cluster(),
        find_node(name),
        Step::own(
            tr!("check that this lab's record names the cluster {name} and its node", name),
            |down: &mut Up| {
                Box::pin(async move {
                    down.ours = down.cluster_exists && down.judge();
                    Ok(())
                })
            },
        )
        .when(tr!("if a cluster named {name} exists", name), |down: &Up| down.cluster_exists),
        Step::run(Cmd::argv([
            "kind",
            "delete",
            "cluster",
            "--name",
            name,
            "--kubeconfig",
            &kubeconfig,
        ]))
        .when(tr!("if this lab made the cluster {name}", name), |down: &Up| down.ours),
        Step::own(tr!("remove {path}", path = shown(state_dir)), move |_| {
            Box::pin(async move { labkit::files::remove_dir(&dir).map(drop) })
        }),
    ]
}

impl Up {
    /// `lab down`: whether the cluster of the name is this lab's, saying why not.
    fn judge(&self) -> bool {
        let name = &self.name;
        let Some(why) = not_ours(name, self.record.as_ref(), self.node_id.as_deref()) else {
            return true;
        };
        eprintln!(
            "{}",
            tr!(
                "left alone: the kind cluster {name} is not this lab's ({why}); \
                 `kind delete cluster --name {name}` if it is yours",
                name,
                why
            )
        );
        false
    }
}

/// Why the cluster `name`, its node container `node`, is not the one
/// `record` names (by the node's ID); `None` when it is.
pub(crate) fn not_ours(name: &str, record: Option<&Record>, node: Option<&str>) -> Option<String> {
    match record.and_then(|r| r.find(&cluster_entry(name))).map(|e| e.uid.as_deref()) {
        None => Some(tr!("no record of this lab names it")),
        // A create cut short before its node was recorded: kind's own cluster of the name.
        Some(None) => None,
        Some(Some(id)) if node == Some(id) => None,
        Some(Some(id)) => {
            let node = node.map_or_else(|| tr!("missing"), String::from);
            Some(tr!("its node container is {node}, this lab made {id}", node, id))
        }
    }
}

/// A kind cluster, the controller a Deployment in it.
pub struct Kind;

impl Provider for Kind {
    fn name(&self) -> &'static str {
        "kind"
    }

    fn about(&self) -> &'static str {
        "A kind cluster (needs Docker)"
    }

    fn offers(&self) -> Offers {
        let place = "kind".into();
        Offers { place, node: true, own_cluster: true, cluster_wide: true, ..Offers::default() }
    }

    fn flags(&self) -> &'static [&'static str] {
        &["--bundle", "--image-builder", "--registry-mirror", "--node-image", "--target"]
    }

    fn up<'a>(&'a self, name: &'a str, options: &'a UpOptions) -> Answer<'a, Option<LabFile>> {
        Box::pin(phases::up(name, options))
    }

    /// The cluster deleted if this lab made it, the state removed; `true`
    /// when a cluster was deleted.
    fn down<'a>(&'a self, name: &'a str, dry_run: bool) -> Answer<'a, bool> {
        Box::pin(async move {
            if !dry_run && labkit::tools::on_path("kind").is_none() {
                eprintln!(
                    "{}",
                    tr!(
                        "kind is not on PATH: cannot look for a cluster named {name} (`nix develop`, or install kind v0.33)",
                        name
                    )
                );
                return Ok(false);
            }
            let state_dir = labkit::project::lab_dir(name);
            let record = Record::load(&state_dir)?;
            let mut down = Up { name: name.to_string(), record, ..Up::default() };
            plan::print_or_execute(down_plan(name, &state_dir), &mut down, dry_run).await?;
            Ok(down.ours)
        })
    }

    /// The cluster and its node image, then the Deployment's lines.
    fn status<'a>(&'a self, lab: &'a LabFile) -> Answer<'a, Health> {
        Box::pin(async move {
            let name = &lab.name;
            let clusters = Cmd::argv(["kind", "get", "clusters"]).read().unwrap_or_default();
            if !clusters.lines().any(|c| c.trim() == name) {
                let lines = vec![tr!("cluster {name}: not found (`kind get clusters`)", name)];
                return Ok(Health { lines, healthy: false });
            }
            let node = node_container(name);
            let image = Cmd::argv(["docker", "inspect", "--format", "{{.Config.Image}}", &node])
                .read()
                .unwrap_or_default();
            let line = tr!("cluster {name}: node {node}, image {image}", name, node, image);
            deploy::status(lab, vec![line]).await
        })
    }

    fn logs<'a>(&'a self, name: &'a str, follow: bool) -> Answer<'a, ()> {
        Box::pin(deploy::logs(name, follow))
    }

    /// Docker and kind, and what a kind node needs of the host ([`host_checks`]).
    fn machine_checks(&self, name: &str, _machine: &Machine) -> Result<Vec<Check>> {
        let docker = docker_version();
        let docker_info = |format: &str| match docker {
            Ok(_) => probe(&["docker", "info", "--format", format]),
            Err(_) => None,
        };
        let kind = probe(&["kind", "version"]);
        let store =
            docker.is_ok().then(|| docker_info("{{json .DriverStatus}}").unwrap_or_default());
        let docker = docker.as_deref().map_err(String::as_str);
        let cgroup = docker_info("{{.CgroupVersion}}");
        let clusters = probe(&["kind", "get", "clusters"]).unwrap_or_default();
        host_checks(name, docker, kind.as_deref(), store.as_deref(), cgroup.as_deref(), &clusters)
    }
}

/// Docker and kind, and what a kind node needs of the host, from what the
/// probes printed: doctor's rows, and `lab up`'s first check (which has no
/// `store`, Docker's image store).
pub(crate) fn host_checks(
    name: &str,
    docker: std::result::Result<&str, &str>,
    kind: Option<&str>,
    store: Option<&str>,
    cgroup: Option<&str>,
    clusters: &str,
) -> Result<Vec<Check>> {
    let table = labkit::kind_releases::table()?;
    let mut checks = vec![preflight::kind_version(kind, &table), preflight::docker_daemon(docker)];
    checks.extend(store.map(preflight::image_store));
    checks.extend([
        preflight::inotify(
            labkit::files::read_number("/proc/sys/fs/inotify/max_user_watches"),
            labkit::files::read_number("/proc/sys/fs/inotify/max_user_instances"),
        ),
        preflight::cgroups(cgroup),
        preflight::existing_cluster(clusters, name),
    ]);
    Ok(checks)
}

#[cfg(test)]
mod tests {
    use super::phases::up_plan;
    use super::*;

    /// The kind path's command plan, pinned: a change to it shows in review.
    /// After an intended change, `INSTA_UPDATE=always cargo test -p xtask`
    /// (or `cargo insta review`) rewrites the snapshot; commit it with the code.
    #[test]
    fn the_kind_plan_matches_its_snapshot() {
        let dir = Path::new("target/lab/my-controller-lab");
        let pinned = labkit::kind_releases::table().unwrap().last().unwrap().image.clone();
        let up = plan::render(
            &up_plan(
                "my-controller-lab",
                dir,
                &Images::Build(Builder::Nix, NodeImage::Pinned, Default::default()),
                &pinned,
                &Default::default(),
            )
            .unwrap(),
        );
        let offline = plan::render(
            &up_plan(
                "my-controller-lab",
                dir,
                &Images::Bundle("lab-bundle.tar".into()),
                labkit::kind_releases::node_tag(&pinned),
                &Default::default(),
            )
            .unwrap(),
        );
        let down = plan::render(&down_plan("my-controller-lab", dir));
        let actual = format!(
            "## lab up --provider kind --image-builder nix\n{up}\n## lab up --provider kind --bundle lab-bundle.tar\n{offline}\n## lab down\n{down}"
        )
        .replace(&format!("linux/{}", docker_arch()), "linux/<arch>");
        insta::assert_snapshot!("plan", actual);
    }

    /// A failed `lab up` is undone by `lab down` ([`crate::lab::up`]); what
    /// its completed steps recorded decides kind's down plan: the cluster is
    /// deleted once the up got to record it, before `kind create cluster`.
    /// The steps that run after each failure point, pinned in `undo.snap`.
    #[test]
    fn a_failed_up_is_undone_by_the_down_plan_of_the_steps_it_completed() {
        let (dir, shown) =
            (labkit::project::target_dir().join("unit-tests/kind-undo"), "target/lab/lab");
        let _ = std::fs::remove_dir_all(&dir);
        let pinned = labkit::kind_releases::table().unwrap().last().unwrap().image.clone();
        let build = Images::Build(Builder::Nix, NodeImage::Pinned, Default::default());
        let up = plan::render(&up_plan("lab", &dir, &build, &pinned, &Default::default()).unwrap());
        let (recorded, created) = (up.find("# record the cluster lab"), up.find("$ kind create"));
        assert!(recorded.unwrap() < created.unwrap(), "recorded after kind made it:\n{up}");
        let kind = Some("kind");
        let mut record = Record::open(&dir, "lab", kind).unwrap();
        // The down plan's steps whose turn comes, its probes having seen a
        // cluster named `lab` on node container `node`.
        let runs = |failed: &str, record: &Record, node: &str| {
            let mut down = Up {
                name: "lab".into(),
                cluster_exists: true,
                node_id: Some(node.into()),
                record: Some(record.clone()),
                ..Up::default()
            };
            down.ours = down.judge();
            let plan = down_plan("lab", Path::new(shown));
            let holds = |s: &&Step<Up>| s.when.as_ref().is_none_or(|(_, holds)| holds(&down));
            let steps: String = plan.iter().filter(holds).map(|s| format!("{s}\n")).collect();
            format!("## failed {failed}\n{steps}")
        };
        let mut undo =
            vec![runs("at the checks (a cluster of the name is someone's)", &record, "n1")];
        let how = labkit::record::How::Created;
        record.intend(&cluster_entry("lab"), "lab up", how).unwrap();
        undo.push(runs("in kind create cluster", &record, "n1"));
        record.made(&cluster_entry("lab"), "n1").unwrap();
        undo.push(runs("after the cluster was made", &record, "n1"));
        undo.push(runs("after; another cluster made since under the name", &record, "n2"));
        let deletes: Vec<bool> = undo.iter().map(|u| u.contains("$ kind delete")).collect();
        assert_eq!(deletes, [false, true, true, false], "{}", undo.join("\n"));
        insta::assert_snapshot!("undo", undo.join("\n"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn node_image_choices() {
        assert_eq!(NodeImage::parse(Some("built")), NodeImage::Built);
        assert_eq!(NodeImage::parse(None), NodeImage::Pinned);
        assert_eq!(NodeImage::parse(Some("x:1")), NodeImage::Given("x:1".into()));
    }
}
