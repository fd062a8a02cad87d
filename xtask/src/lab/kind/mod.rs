//! The kind provider, the course's own setting: a kind cluster on the pinned
//! node image (or one built here: [`super::node_image`]), the controller
//! image built and loaded into the node, the RBAC and the Deployment applied,
//! the rollout awaited.
//!
//! `lab up`, `lab down` and `--dry-run` share one list of steps ([`up_plan`],
//! [`down_plan`]): printed, or carried out ([`crate::plan`]). What is already
//! done is skipped by asking the system, not a file of ours: the cluster by
//! `kind get clusters`, the controller image by the node's containerd
//! (`crictl inspecti`, as `kind load` does), the restart by the pod's image.

pub mod bundle;
pub mod config;
pub mod status;

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, Result, bail, ensure};
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, Patch, PatchParams};

use crate::image::{self, Builder, StaticTarget};
use crate::lab::{apply, controller, kubeconfig, node_image};
use crate::plan::{self, Step};
use crate::preflight::{self, Check, Status};
use e2e::command::Cmd;
use e2e::kind_releases;
use e2e::lab_file::{self, LabFile, ProviderKind};
use e2e::project;

pub use self::status::{logs, status};
pub use e2e::deployment::{NAME as DEPLOYMENT, NAMESPACE};

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

/// `--node-image`: which node image the cluster runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeImage {
    /// The one kind/node-images.toml names for the kind found (pulled by Docker when missing).
    Pinned,
    /// The one `cargo xtask lab node-image` builds here, built first when missing.
    Built,
    /// An image by reference: present in Docker, or pulled.
    Given(String),
}

impl NodeImage {
    pub fn parse(value: Option<&str>) -> NodeImage {
        match value {
            None => NodeImage::Pinned,
            Some(node_image::BUILT) => NodeImage::Built,
            Some(other) => NodeImage::Given(other.to_string()),
        }
    }
}

/// Where a lab's files are, as the plan names them.
#[derive(Clone, Debug)]
pub struct Paths {
    pub state_dir: PathBuf,
    pub kubeconfig: PathBuf,
    pub cluster_config: PathBuf,
    pub image_archive: PathBuf,
}

impl Paths {
    pub fn new(state_dir: &Path) -> Paths {
        Paths {
            state_dir: state_dir.to_path_buf(),
            kubeconfig: state_dir.join("kubeconfig"),
            cluster_config: state_dir.join("cluster.yaml"),
            image_archive: state_dir.join("controller-image.tar"),
        }
    }
}

/// Paths as a person would type them: relative to the project root when inside it.
fn shown(path: &Path) -> String {
    e2e::project::shown(path)
}

/// Where the images come from.
#[derive(Clone, Debug)]
pub enum Images {
    /// Build the controller image with this builder; the node image as chosen.
    Build(Builder, NodeImage),
    /// Load everything from an offline bundle; nothing is pulled or built.
    Bundle(PathBuf),
}

/// What `lab up` learns on the way.
#[derive(Default)]
pub struct Up {
    pub name: String,
    pub paths: Paths,
    /// The ConfigMap the controller keeps (`--target`).
    pub target: e2e::lab_file::Target,
    /// The node image the cluster runs (a reference Docker has).
    pub node_image: String,
    /// `docker version`: the engine's version and API version, or why it did not answer.
    docker: Option<std::result::Result<(String, String), String>>,
    cgroup_version: Option<String>,
    kind_version: Option<String>,
    cluster_exists: bool,
    node_present: bool,
    /// `/kind/version` of the node image and the capabilities a privileged container gets.
    node_facts: Option<String>,
    host: config::Host,
    /// `docker inspect` of an existing node: its image and whether it runs.
    existing_node: Option<String>,
    /// The controller image's ID in Docker, and in the node's containerd.
    built_id: Option<String>,
    loaded_id: Option<String>,
    bundle_images: Vec<String>,
    client: Option<kube::Client>,
    /// Before the apply: whether the Deployment existed, the images its
    /// containers run in the node (image IDs), leftover test arguments.
    deployment_existed: bool,
    running_images: Vec<String>,
    leftover_args: bool,
}

impl Default for Paths {
    fn default() -> Self {
        Paths::new(Path::new(""))
    }
}

impl Up {
    fn client(&self) -> Result<kube::Client> {
        self.client.clone().context("no client for the cluster yet")
    }

    /// The node must be (re)loaded with the controller image.
    fn needs_load(&self) -> bool {
        self.built_id.is_none() || self.built_id != self.loaded_id
    }

    /// The Deployment existed and one of its containers runs another image
    /// than the one built (a new Deployment starts on the new image anyway).
    fn needs_restart(&self) -> bool {
        self.deployment_existed
            && self.running_images.iter().any(|r| Some(r) != self.built_id.as_ref())
    }
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

/// What `lab up --provider kind` does, in order.
pub fn up_plan(
    name: &str,
    state_dir: &Path,
    images: &Images,
    node: &str,
    target: &e2e::lab_file::Target,
) -> Result<Vec<Step<Up>>> {
    let paths = Paths::new(state_dir);
    let (kubeconfig, cluster_config, archive) =
        (shown(&paths.kubeconfig), shown(&paths.cluster_config), shown(&paths.image_archive));
    let container = node_container(name);
    let reference = image::reference()?;
    let mut steps: Vec<Step<Up>> = vec![
        Step::probe(
            Cmd::argv([
                "docker",
                "version",
                "--format",
                "{{.Server.Version}} {{.Server.APIVersion}}",
            ]),
            |up: &mut Up, out: Result<String>| {
                up.docker = Some(match out {
                    Ok(line) => {
                        let (version, api) = line.split_once(' ').unwrap_or((&line, ""));
                        Ok((version.to_string(), api.to_string()))
                    }
                    Err(e) if e2e::command::is_not_found(&e) => {
                        Err("docker: command not found".into())
                    }
                    Err(e) => Err(format!("{e:#}")),
                });
                Ok(())
            },
        ),
        Step::probe(
            Cmd::argv(["docker", "info", "--format", "{{.CgroupVersion}}"]),
            |up: &mut Up, out: Result<String>| {
                up.cgroup_version = out.ok();
                Ok(())
            },
        ),
        Step::probe(
            Cmd::argv(["kind", "get", "clusters"]),
            move |up: &mut Up, out: Result<String>| {
                let clusters = out.unwrap_or_default();
                up.cluster_exists = clusters.lines().any(|c| c.trim() == up.name);
                Ok(())
            },
        ),
        Step::own("check the machine: Docker, kind, cgroups, inotify, an existing cluster", |up| {
            Box::pin(async move { machine_checks(up) })
        }),
    ];
    match images {
        Images::Bundle(bundle) => {
            steps.push(Step::probe(
                Cmd::argv(["docker", "load", "-i"]).path(bundle),
                |up: &mut Up, out: Result<String>| {
                    up.bundle_images = bundle::loaded(&out?);
                    Ok(())
                },
            ));
            let bundle = bundle.clone();
            steps.push(Step::own(
                format!(
                    "check that {} held the node and controller images, made for this machine ({})",
                    shown(&bundle),
                    bundle::MANIFEST_ENTRY
                ),
                move |up: &mut Up| {
                    Box::pin(async move {
                        let manifest = bundle::read_manifest(&bundle)?;
                        bundle::check(&manifest, &up.bundle_images, docker_arch())
                    })
                },
            ));
        }
        Images::Build(_, NodeImage::Built) => steps.push(Step::own(
            "build the node image unless it is up to date (`cargo xtask lab node-image`)",
            |_| {
                Box::pin(async {
                    let recipe = node_image::Recipe::new(&node_image::Source::default())?;
                    node_image::ensure(&recipe).await.map(|_| ())
                })
            },
        )),
        Images::Build(_, _) => {
            steps.push(Step::probe(
                node_image::present_probe(node),
                |up: &mut Up, out: Result<String>| {
                    up.node_present = out.is_ok();
                    Ok(())
                },
            ));
            steps.push(
                Step::run(Cmd::argv(["docker", "pull", node]))
                    .when("if Docker does not have it", |up: &Up| !up.node_present)
                    .or(format!(
                        "node image {node} is not here and cannot be pulled: \
                         `cargo xtask lab node-image` builds one on this machine (then `--node-image built`), \
                         or check the name"
                    )),
            );
        }
    }
    steps.extend([
        Step::probe(
            Cmd::argv([
                "docker",
                "run",
                "--rm",
                "--privileged",
                "--entrypoint",
                "sh",
                node,
                "-c",
                "echo \"$(cat /kind/version)\"; grep CapEff /proc/self/status",
            ]),
            |up: &mut Up, out: Result<String>| {
                up.node_facts = Some(out.map_err(|e| {
                    let text = format!("{e:#}");
                    if text.contains("unable to apply caps") {
                        anyhow::anyhow!(
                            "Docker cannot start a privileged container here (\"unable to apply caps\"): \
                             this host's capability bounding set lacks one Docker grants; see \
                             docs/lab.md (kind on a restricted host)"
                        )
                    } else {
                        e.context("the node image does not start")
                    }
                })?);
                Ok(())
            },
        ),
        {
            let dir = paths.state_dir.clone();
            let file = paths.cluster_config.clone();
            Step::own(
                format!("check the node image's Kubernetes minor; write {cluster_config}: {CLUSTER_FILE} + what this host needs"),
                move |up: &mut Up| Box::pin(async move { write_cluster_config(up, &dir, &file) }),
            )
        },
        Step::run(Cmd::argv([
            "kind", "create", "cluster", "--name", name, "--config", &cluster_config, "--image", node,
            "--kubeconfig", &kubeconfig, "--wait", WAIT,
        ]))
        .when(format!("if no cluster named {name} exists"), |up: &Up| !up.cluster_exists)
        .or("kind create cluster failed (its output is above; it removes a half-made cluster itself)"),
        Step::probe(
            Cmd::argv(["docker", "inspect", "--format", "{{.Config.Image}} {{.State.Running}}", &container]),
            |up: &mut Up, out: Result<String>| {
                up.existing_node = Some(out?);
                Ok(())
            },
        )
        .when(format!("if the cluster {name} existed"), |up: &Up| up.cluster_exists),
        Step::run(Cmd::argv(["kind", "export", "kubeconfig", "--name", name, "--kubeconfig", &kubeconfig]))
            .when(format!("if the cluster {name} existed"), |up: &Up| up.cluster_exists),
        {
            let kubeconfig = paths.kubeconfig.clone();
            Step::own("connect to the API server; check an existing cluster's node image and health", move |up| {
                Box::pin(async move { connect(up, &kubeconfig).await })
            })
        },
    ]);
    if let Images::Build(builder, _) = images {
        let builder = image::resolve(*builder);
        let target = match builder {
            Builder::Host => StaticTarget::detect()?,
            _ => StaticTarget { triple: String::new(), rustflags: None },
        };
        steps.extend(image::steps::<Up>(builder, &target)?);
    }
    let mut save = Cmd::argv(["docker", "save"]);
    // Known only once Docker answered: the plan shows the flag for this machine.
    if let Some(platform) = save_platform(Some("1.48"), docker_arch()) {
        save = save.args(["--platform", &platform]);
    }
    let save = save.args(["-o", &archive, &reference]);
    steps.extend([
        Step::probe(image_id_probe(&reference), |up: &mut Up, out: Result<String>| {
            up.built_id = Some(out.context("the controller image is not in Docker")?);
            Ok(())
        }),
        Step::probe(
            Cmd::argv(["docker", "exec", &container, "crictl", "inspecti", "-o", "go-template", "--template", "{{.status.id}}", &reference]),
            |up: &mut Up, out: Result<String>| {
                up.loaded_id = out.ok().filter(|id| !id.is_empty());
                Ok(())
            },
        ),
        // Older Dockers have no --platform: it is dropped there.
        Step::adjusted(save, |up: &Up, save: &Cmd| match up.docker.as_ref() {
            Some(Ok((_, api))) if save_platform(Some(api), docker_arch()).is_some() => save.clone(),
            _ => strip_platform(save),
        })
        .when("if the node does not have this image", Up::needs_load),
        Step::run(Cmd::argv(["kind", "load", "image-archive", &archive, "--name", name]))
            .when("if the node does not have this image", Up::needs_load),
        Step::probe(
            Cmd::argv([
                "docker", "exec", &container, "crictl", "ps", "--label", "io.kubernetes.pod.namespace=default",
                "--label", "io.kubernetes.container.name=controller", "-o", "go-template", "--template",
                "{{range .containers}}{{.imageRef}} {{end}}",
            ]),
            |up: &mut Up, out: Result<String>| {
                up.running_images = out.unwrap_or_default().split_whitespace().map(String::from).collect();
                Ok(())
            },
        ),
        Step::api(
            format!("kubectl --kubeconfig {kubeconfig} get deployment/{DEPLOYMENT} -o yaml"),
            |up: &mut Up| Box::pin(async move { look_at_deployment(up).await }),
        ),
        Step::api(
            format!(
                "kubectl --kubeconfig {kubeconfig} apply --server-side --force-conflicts --field-manager={} -f manifests/rbac.yaml -f manifests/deployment.yaml{}",
                apply::FIELD_MANAGER,
                if target.is_default() {
                    String::new()
                } else {
                    format!("    # made for {target}: Role, RoleBinding and the controller's environment")
                }
            ),
            |up: &mut Up| {
                Box::pin(async move {
                    let client = up.client()?;
                    let manifests = project::manifests_dir();
                    apply::apply_documents(&client, &manifests.join("rbac.yaml"), apply::rbac_for(&up.target)?)
                        .await?;
                    apply::apply_documents(
                        &client,
                        &manifests.join("deployment.yaml"),
                        apply::deployment_for(&up.target)?,
                    )
                    .await?;
                    Ok(())
                })
            },
        ),
        Step::api(
            format!(
                "kubectl --kubeconfig {kubeconfig} patch deployment/{DEPLOYMENT} --type strategic -p '{}'",
                CLEAR_ARGS
            ),
            |up: &mut Up| {
                Box::pin(async move {
                    let patch: serde_json::Value = serde_json::from_str(CLEAR_ARGS)?;
                    deployments(up)?.patch(DEPLOYMENT, &PatchParams::default(), &Patch::Strategic(&patch)).await?;
                    Ok(())
                })
            },
        )
        .when("if a test left arguments on the controller's container", |up: &Up| up.leftover_args),
        Step::api(
            format!("kubectl --kubeconfig {kubeconfig} rollout restart deployment/{DEPLOYMENT}"),
            |up: &mut Up| Box::pin(async move { e2e::deployment::DeploymentHost::new(up.client()?).restart().await }),
        )
        .when("if the Deployment existed and its pod runs another image than the one built", Up::needs_restart),
        Step::api(
            format!("kubectl --kubeconfig {kubeconfig} rollout status deployment/{DEPLOYMENT}"),
            |up: &mut Up| Box::pin(async move { e2e::deployment::wait_rollout(&deployments(up)?).await }),
        ),
        Step::own(format!("write {}", shown(&paths.state_dir.join(lab_file::FILE_NAME))), |up| {
            Box::pin(async move { write_lab_file(up).await })
        }),
    ]);
    Ok(steps)
}

/// The strategic merge patch that removes a test's `args` from the controller's container.
const CLEAR_ARGS: &str =
    r#"{"spec":{"template":{"spec":{"containers":[{"name":"controller","args":null}]}}}}"#;

fn deployments(up: &Up) -> Result<Api<Deployment>> {
    Ok(Api::namespaced(up.client()?, NAMESPACE))
}

fn image_id_probe(reference: &str) -> Cmd {
    Cmd::argv(["docker", "image", "inspect", "--format", "{{.Id}}", reference])
}

/// `docker save` without `--platform`, for a Docker that has no such flag.
fn strip_platform(save: &Cmd) -> Cmd {
    let mut args = save.arguments().to_vec();
    if let Some(at) = args.iter().position(|a| a == "--platform") {
        args.drain(at..at + 2);
    }
    Cmd::new(save.program()).args(args)
}

/// The preflight checks on what the probes saw; a FAIL stops `lab up`.
fn machine_checks(up: &mut Up) -> Result<()> {
    let table = kind_releases::table()?;
    let docker = match &up.docker {
        Some(Ok((version, _))) => Ok(version.clone()),
        Some(Err(error)) => Err(error.clone()),
        None => Err("docker: command not found".to_string()),
    };
    let cgroup = up.cgroup_version.as_deref().map(str::trim);
    let checks: Vec<Check> = vec![
        preflight::docker_daemon(docker.as_deref().map_err(String::as_str)),
        preflight::kind_version(up.kind_version.as_deref(), &table),
        preflight::cgroups(cgroup),
        preflight::inotify(
            read_number("/proc/sys/fs/inotify/max_user_watches"),
            read_number("/proc/sys/fs/inotify/max_user_instances"),
        ),
        preflight::existing_cluster(if up.cluster_exists { &up.name } else { "" }, &up.name),
    ];
    for check in &checks {
        eprintln!("{check}");
    }
    let failed: Vec<String> = checks
        .iter()
        .filter(|c| c.status == Status::Fail)
        .map(|c| format!("{}: {} (fix: {})", c.name, c.found, c.fix.as_deref().unwrap_or("-")))
        .collect();
    if !failed.is_empty() {
        bail!("the kind lab cannot start here: {}", failed.join("; "));
    }
    up.host.cgroup_v1 = cgroup == Some("1");
    Ok(())
}

pub fn read_number(path: &str) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// The node image's minor must be the kit's; the host's adaptations go into
/// the cluster config the lab uses.
fn write_cluster_config(up: &mut Up, dir: &Path, file: &Path) -> Result<()> {
    let facts = up.node_facts.clone().unwrap_or_default();
    let version = facts.lines().next().unwrap_or_default().trim().to_string();
    let minor = ::controller::version::parse_minor(
        version.trim_start_matches('v').split('.').nth(1).unwrap_or(""),
    );
    let target = ::controller::version::target_minor();
    ensure!(
        minor == Some(target),
        "node image {} runs Kubernetes {version:?}, and this kit is built for 1.{target}: \
         use a 1.{target} node image (the pinned one, or `--node-image built`)",
        up.node_image
    );
    up.host.no_sys_resource = config::has_sys_resource(&facts) == Some(false);
    for warning in up.host.warnings() {
        eprintln!("warning: {warning}");
    }
    let cluster = std::fs::read_to_string(project::root().join(CLUSTER_FILE))
        .with_context(|| format!("cannot read {CLUSTER_FILE}"))?;
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    e2e::files::write_public(file, config::for_host(&cluster, up.host)?)
}

/// A client for the lab's kubeconfig; an existing cluster must run the node
/// image asked for and answer.
async fn connect(up: &mut Up, kubeconfig: &Path) -> Result<()> {
    if let Some(seen) = &up.existing_node {
        let (image, running) = seen.rsplit_once(' ').unwrap_or((seen, ""));
        let name = &up.name;
        ensure!(
            running == "true",
            "cluster {name} exists but its node container is stopped: \
             `cargo xtask lab down --name {name}`, then `lab up` again"
        );
        ensure!(
            image == up.node_image,
            "cluster {name} runs node image {image}, not {}: `cargo xtask lab down --name {name}` \
             first (or `--node-image {image}` to keep it)",
            up.node_image
        );
    }
    let client = kubeconfig::client(kubeconfig).await?;
    client.apiserver_version().await.with_context(|| {
        format!(
            "the API server of cluster {} does not answer: `cargo xtask lab down --name {}` and up again",
            up.name, up.name
        )
    })?;
    up.client = Some(client);
    Ok(())
}

/// Before the apply: does the Deployment exist, which image does its pod
/// run, did a test leave arguments on it?
async fn look_at_deployment(up: &mut Up) -> Result<()> {
    let Some(deployment) = deployments(up)?.get_opt(DEPLOYMENT).await? else {
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

async fn write_lab_file(up: &mut Up) -> Result<()> {
    let client = up.client()?;
    let version = client.apiserver_version().await.context("GET /version")?.git_version;
    let kubeconfig = kube::config::Kubeconfig::read_from(&up.paths.kubeconfig)?;
    let api_server_url = kubeconfig
        .clusters
        .first()
        .and_then(|c| c.cluster.as_ref())
        .and_then(|c| c.server.clone())
        .context("the kind kubeconfig names no server")?;
    let lab = LabFile {
        format: lab_file::FORMAT,
        name: up.name.clone(),
        provider: ProviderKind::Kind,
        state_dir: up.paths.state_dir.clone(),
        created_unix: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or_default(),
        kubernetes_version: version,
        api_server_url,
        admin_kubeconfig: up.paths.kubeconfig.clone(),
        controller: lab_file::Controller {
            // Reached through the API server's pod proxy (see e2e::lab).
            url: String::new(),
            kubeconfig: PathBuf::new(),
            service_account: format!(
                "{}/{}",
                controller::SERVICE_ACCOUNT_NAMESPACE,
                controller::SERVICE_ACCOUNT
            ),
            token_expires: "projected by the kubelet (rotated)".into(),
            log: PathBuf::new(),
            container: None,
        },
        processes: Vec::new(),
        target: up.target.clone(),
        kind: Some(lab_file::Kind {
            node_image: up.node_image.clone(),
            node: node_container(&up.name),
            controller_image: image::reference()?,
            controller_image_id: up.built_id.clone().unwrap_or_default(),
        }),
    };
    lab.write()
}

/// `lab up --provider kind`: carries out [`up_plan`]. A failed first `up`
/// leaves nothing behind (kind removes a half-made cluster itself).
pub async fn up(
    name: &str,
    images: &Images,
    target: &e2e::lab_file::Target,
    dry_run: bool,
) -> Result<Option<LabFile>> {
    let state_dir = project::lab_dir(name);
    // The kind release decides the pinned node image: it is asked before the plan is made.
    let kind_version = kind_version();
    let node = match images {
        Images::Bundle(bundle) => {
            let manifest = bundle::read_manifest(bundle)?;
            bundle::check(
                &manifest,
                &[manifest.node_image.clone(), manifest.controller_image.clone()],
                docker_arch(),
            )?;
            bundle::check_kind(&manifest, kind_version.as_deref())?;
            manifest.node_image
        }
        Images::Build(_, NodeImage::Pinned) => {
            let table = kind_releases::table()?;
            let found = kind_version.as_deref().context(
                "kind is not on PATH: `nix develop` provides it, or install a kind release that \
                 kind/node-images.toml lists",
            )?;
            kind_releases::for_kind(&table, found).map_err(anyhow::Error::msg)?.image
        }
        Images::Build(_, NodeImage::Given(reference)) => reference.clone(),
        Images::Build(_, NodeImage::Built) => {
            node_image::Recipe::new(&node_image::Source::default())?.reference()
        }
    };
    let steps = up_plan(name, &state_dir, images, &node, target)?;
    if dry_run {
        print!("{}", plan::render(&steps));
        return Ok(None);
    }
    let fresh = !state_dir.exists();
    let mut up = Up {
        name: name.to_string(),
        paths: Paths::new(&state_dir),
        node_image: node,
        kind_version,
        target: target.clone(),
        ..Up::default()
    };
    let result = plan::execute(steps, &mut up).await;
    if let Err(error) = result {
        if fresh && !up.cluster_exists {
            let _ = std::fs::remove_dir_all(&state_dir);
        }
        return Err(error);
    }
    LabFile::read(&state_dir)
}

/// What `lab down` does for a kind lab (also when lab.json is gone).
pub fn down_plan(name: &str, state_dir: &Path) -> Vec<Step<Down>> {
    let kubeconfig = shown(&Paths::new(state_dir).kubeconfig);
    let dir = state_dir.to_path_buf();
    vec![
        Step::probe(
            Cmd::argv(["kind", "get", "clusters"]),
            |down: &mut Down, out: Result<String>| {
                down.exists = out.unwrap_or_default().lines().any(|c| c.trim() == down.name);
                Ok(())
            },
        ),
        Step::run(Cmd::argv([
            "kind",
            "delete",
            "cluster",
            "--name",
            name,
            "--kubeconfig",
            &kubeconfig,
        ]))
        .when(format!("if a cluster named {name} exists"), |down: &Down| down.exists),
        Step::own(format!("remove {}", shown(state_dir)), move |_| {
            Box::pin(async move {
                if dir.exists() {
                    std::fs::remove_dir_all(&dir)
                        .with_context(|| format!("cannot remove {}", dir.display()))?;
                }
                Ok(())
            })
        }),
    ]
}

/// What `lab down` learns.
pub struct Down {
    pub name: String,
    pub exists: bool,
}

/// `lab down` for kind: delete the cluster (if kind knows it), remove the state.
pub async fn down(name: &str, state_dir: &Path) -> Result<bool> {
    if e2e::tools::on_path("kind").is_none() {
        eprintln!(
            "kind is not on PATH: cannot look for a cluster named {name} (`nix develop`, or install kind v0.33)"
        );
        return Ok(false);
    }
    let mut down = Down { name: name.to_string(), exists: false };
    plan::execute(down_plan(name, state_dir), &mut down).await?;
    Ok(down.exists)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kind path's command plan, pinned: a change to it shows in review.
    /// After an intended change, `INSTA_UPDATE=always cargo test -p xtask`
    /// (or `cargo insta review`) rewrites the snapshot; commit it with the code.
    #[test]
    fn the_kind_plan_matches_its_snapshot() {
        let dir = Path::new("target/lab/my-controller-lab");
        let pinned = kind_releases::table().unwrap().last().unwrap().image.clone();
        let up = plan::render(
            &up_plan(
                "my-controller-lab",
                dir,
                &Images::Build(Builder::Nix, NodeImage::Pinned),
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
                e2e::kind_releases::node_tag(&pinned),
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

    #[test]
    fn node_image_choices() {
        assert_eq!(NodeImage::parse(Some("built")), NodeImage::Built);
        assert_eq!(NodeImage::parse(None), NodeImage::Pinned);
        assert_eq!(NodeImage::parse(Some("x:1")), NodeImage::Given("x:1".into()));
    }

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
