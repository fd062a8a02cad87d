//! The kind provider: a kind cluster (node image pinned in kind/cluster.yaml),
//! the controller image built here and loaded into the node, the RBAC and the
//! Deployment applied, and the rollout awaited. The course's own setting.
//!
//! The steps are a plan ([`up_plan`], [`down_plan`]): `--dry-run` prints it,
//! a snapshot test pins it, and [`up`] carries it out, skipping what is
//! already done (a healthy cluster is reused; an unchanged image is not
//! reloaded).

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail};
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::Api;
use xshell::{Shell, cmd};

use crate::image::{self, Builder, StaticTarget};
use crate::lab::{apply, controller, kubeconfig};
use crate::plan::Step;
use crate::preflight::{self, Check, Status};
use crate::{cmdline, lab::binaries};
use e2e::lab_file::{self, LabFile, ProviderKind};
use e2e::project;

/// The cluster definition, relative to the project root.
pub const CLUSTER_FILE: &str = "kind/cluster.yaml";
pub use e2e::deployment::{NAME as DEPLOYMENT, NAMESPACE};

/// Paths of a kind lab's state, relative to the project root (as the plan shows them).
struct Paths {
    kubeconfig: String,
    image_archive: String,
    /// The image ID last loaded into the node.
    loaded: String,
}

impl Paths {
    fn new(name: &str) -> Paths {
        let dir = format!("target/lab/{name}");
        Paths {
            kubeconfig: format!("{dir}/kubeconfig"),
            image_archive: format!("{dir}/controller-image.tar"),
            loaded: format!("{dir}/loaded-image-id"),
        }
    }
}

/// Where the lab's images come from.
pub enum Images {
    /// Build the controller image with these steps; kind pulls the node image.
    Build(Vec<Step>),
    /// Load everything from an offline bundle; nothing is pulled or built.
    Bundle(String),
}

/// What `lab up --provider kind` does, in order.
pub fn up_plan(name: &str, images: Images, reference: &str) -> Vec<Step> {
    let paths = Paths::new(name);
    let mut steps = vec![
        Step::run(["docker", "info"]),
        Step::run(["kind", "version"]),
        Step::run(["kind", "get", "clusters"]),
    ];
    let mut create = vec![
        "kind",
        "create",
        "cluster",
        "--name",
        name,
        "--config",
        CLUSTER_FILE,
        "--wait",
        "120s",
    ];
    let node = node_image().unwrap_or_default();
    let node_tag = super::bundle::node_tag(&node).to_string();
    if let Images::Bundle(bundle) = &images {
        steps.push(Step::run(["docker", "load", "-i", bundle]));
        // The node image from the bundle, by tag (registry digests do not survive docker save).
        create.extend(["--image", &node_tag]);
    }
    steps.extend([
        Step::run(create).when(&format!("if no cluster named {name} exists")),
        Step::run(["kind", "get", "kubeconfig", "--name", name]),
        Step::note(format!(
            "write that to {} (mode 0600), context kind-{name}",
            paths.kubeconfig
        )),
    ]);
    if let Images::Build(image_steps) = images {
        steps.extend(image_steps);
    }
    steps.extend([
        Step::run(["docker", "save", reference, "-o", &paths.image_archive])
            .when("if the image differs from the one last loaded"),
        Step::run(["kind", "load", "image-archive", &paths.image_archive, "--name", name])
            .when("if the image differs from the one last loaded"),
        Step::api(format!(
            "kubectl --kubeconfig {} apply --server-side -f manifests/rbac.yaml -f manifests/deployment.yaml",
            paths.kubeconfig
        )),
        Step::api(format!("kubectl --kubeconfig {} rollout restart deployment/{DEPLOYMENT}", paths.kubeconfig))
            .when("if a new image was loaded into a running lab"),
        Step::api(format!("kubectl --kubeconfig {} rollout status deployment/{DEPLOYMENT}", paths.kubeconfig)),
        Step::note(format!("write target/lab/{name}/lab.json")),
    ]);
    steps
}

/// What `lab down` does for a kind lab.
pub fn down_plan(name: &str) -> Vec<Step> {
    vec![
        Step::run(["kind", "delete", "cluster", "--name", name]),
        Step::note(format!("remove target/lab/{name}")),
    ]
}

/// The image steps of the plan, for the builder `choice` resolves to.
pub fn image_steps(sh: &Shell, choice: Builder) -> Result<Vec<Step>> {
    let builder = image::resolve(choice);
    let target = if builder == Builder::Host {
        StaticTarget::detect(sh)?
    } else {
        StaticTarget {
            triple: String::new(),
            rustflags: None,
        }
    };
    Ok(image::plan(
        builder,
        &image::reference()?,
        &target,
        Path::new(""),
    ))
}

/// The checks `lab up --provider kind` needs to pass before it starts anything.
pub fn preflight(sh: &Shell, name: &str) -> Vec<Check> {
    let node_image = node_image().unwrap_or_else(|e| format!("({e:#})"));
    let node_minor = e2e::tools::node_image_minor(&node_image).unwrap_or(0);
    let docker = cmd!(sh, "docker version --format {FORMAT_SERVER}")
        .quiet()
        .ignore_stderr()
        .read()
        .map_err(|e| e.to_string());
    let kind = cmd!(sh, "kind version").quiet().ignore_stderr().read().ok();
    let clusters = cmd!(sh, "kind get clusters")
        .quiet()
        .ignore_stderr()
        .read()
        .unwrap_or_default();
    vec![
        preflight::docker_daemon(docker.as_deref().map_err(|e| e.as_str())),
        preflight::kind_version(kind.as_deref(), &node_image),
        preflight::cgroups(
            std::path::Path::new("/sys/fs/cgroup/cgroup.controllers").exists(),
            node_minor,
        ),
        preflight::inotify(
            read_number("/proc/sys/fs/inotify/max_user_watches"),
            read_number("/proc/sys/fs/inotify/max_user_instances"),
        ),
        preflight::existing_cluster(&clusters, name),
    ]
}

const FORMAT_SERVER: &str = "{{.Server.Version}}";

pub fn read_number(path: &str) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// The node image pinned in kind/cluster.yaml.
pub fn node_image() -> Result<String> {
    let text = std::fs::read_to_string(project::root().join(CLUSTER_FILE))
        .with_context(|| format!("cannot read {CLUSTER_FILE}"))?;
    text.lines()
        .find_map(|l| l.trim().strip_prefix("image:"))
        .map(|i| i.trim().to_string())
        .with_context(|| format!("{CLUSTER_FILE} has no node image"))
}

/// `lab up --provider kind`: carries out [`up_plan`].
pub async fn up(name: &str, builder: Builder, bundle: Option<&Path>) -> Result<LabFile> {
    let sh = Shell::new()?;
    sh.change_dir(project::root());
    let checks = preflight(&sh, name);
    for check in &checks {
        eprintln!("{check}");
    }
    if checks.iter().any(|c| c.status == Status::Fail) {
        bail!(
            "the kind lab cannot start on this machine (see the FAIL lines); `--provider envtest` needs no Docker"
        );
    }
    let paths = Paths::new(name);
    let state_dir = project::lab_dir(name);
    std::fs::create_dir_all(&state_dir)
        .with_context(|| format!("cannot create {}", state_dir.display()))?;

    let node = node_image()?;
    let node_tag = super::bundle::node_tag(&node).to_string();
    let controller_image = image::reference()?;
    let mut node_override = Vec::new();
    if let Some(bundle) = bundle {
        let images = super::bundle::load(&sh, bundle)?;
        super::bundle::check_contents(&images, &node_tag, &controller_image)?;
        node_override = vec!["--image".to_string(), node_tag.clone()];
    }
    let clusters = cmdline::read(&cmd!(sh, "kind get clusters"))?;
    if clusters.lines().any(|c| c.trim() == name) {
        eprintln!("cluster {name} exists: reusing it");
    } else {
        let config = CLUSTER_FILE;
        let create = cmd!(
            sh,
            "kind create cluster --name {name} --config {config} --wait 120s {node_override...}"
        );
        eprintln!("$ {create}");
        let output = create.ignore_status().output()?;
        let text = String::from_utf8_lossy(&output.stderr).into_owned()
            + &String::from_utf8_lossy(&output.stdout);
        eprint!("{text}");
        if !output.status.success() {
            let hint = preflight::kind_create_hint(&text).unwrap_or("see kind's output above");
            bail!("kind create cluster failed: {hint}");
        }
    }
    let admin_kubeconfig = project::root().join(&paths.kubeconfig);
    let kubeconfig_text = cmdline::read(&cmd!(sh, "kind get kubeconfig --name {name}"))?;
    e2e::files::write_private(&admin_kubeconfig, kubeconfig_text + "\n")?;

    let reference = match bundle {
        Some(_) => controller_image,
        None => image::build(&sh, builder)?.reference,
    };
    let image_id = image_id(&sh, &reference)?;
    let loaded_file = project::root().join(&paths.loaded);
    let loaded = std::fs::read_to_string(&loaded_file).unwrap_or_default();
    let new_image = loaded.trim() != image_id;
    if new_image {
        let archive = &paths.image_archive;
        // docker save of a single-platform image into kind load image-archive also works
        // where Docker uses the containerd image store (kind load docker-image fails there).
        cmd!(sh, "docker save {reference} -o {archive}").run()?;
        cmd!(sh, "kind load image-archive {archive} --name {name}").run()?;
        std::fs::write(&loaded_file, &image_id)?;
    } else {
        eprintln!("image {reference} already loaded into {name}");
    }

    let admin = kubeconfig::client(&admin_kubeconfig).await?;
    apply::apply_file(&admin, &project::manifests_dir().join("rbac.yaml")).await?;
    apply::apply_file(&admin, &project::manifests_dir().join("deployment.yaml")).await?;
    if new_image && !loaded.trim().is_empty() {
        // Same tag, new content: pods only pick it up when they are replaced.
        eprintln!("$ kubectl rollout restart deployment/{DEPLOYMENT}    # done with kube-rs");
        e2e::deployment::DeploymentHost::new(admin.clone())
            .start(&[])
            .await?;
    }
    eprintln!("$ kubectl rollout status deployment/{DEPLOYMENT}    # done with kube-rs");
    e2e::deployment::wait_rollout(&Api::namespaced(admin.clone(), NAMESPACE)).await?;

    let version = admin
        .apiserver_version()
        .await
        .context("GET /version")?
        .git_version;
    let api_server_url = admin_server_url(&admin_kubeconfig)?;
    let lab = LabFile {
        format: lab_file::FORMAT,
        name: name.to_string(),
        provider: ProviderKind::Kind,
        state_dir: state_dir.clone(),
        created_unix: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or_default(),
        kubernetes_version: version,
        api_server_url,
        admin_kubeconfig,
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
    };
    lab.write()?;
    Ok(lab)
}

fn image_id(sh: &Shell, reference: &str) -> Result<String> {
    let format = "{{.Id}}";
    cmdline::read(&cmd!(
        sh,
        "docker image inspect --format {format} {reference}"
    ))
    .with_context(|| format!("docker has no image {reference}"))
}

fn admin_server_url(kubeconfig: &Path) -> Result<String> {
    let config = kube::config::Kubeconfig::read_from(kubeconfig)?;
    config
        .clusters
        .first()
        .and_then(|c| c.cluster.as_ref())
        .and_then(|c| c.server.clone())
        .context("the kind kubeconfig names no server")
}

/// The controller's pod: the Deployment's newest pod (by creation time).
pub async fn controller_pod(
    client: &kube::Client,
) -> Result<Option<k8s_openapi::api::core::v1::Pod>> {
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let list = pods
        .list(&kube::api::ListParams::default().labels("app.kubernetes.io/name=my-controller"))
        .await?;
    Ok(list
        .items
        .into_iter()
        .max_by_key(|p| p.metadata.creation_timestamp.clone()))
}

/// `lab status` for kind: cluster, node image, Deployment, pod, image, readiness.
/// Returns whether the lab is healthy.
pub async fn status(lab: &LabFile) -> Result<bool> {
    let sh = Shell::new()?;
    let name = &lab.name;
    let clusters = cmd!(sh, "kind get clusters")
        .quiet()
        .ignore_stderr()
        .read()
        .unwrap_or_default();
    if !clusters.lines().any(|c| c.trim() == name) {
        println!("  cluster {name}: not found (`kind get clusters`)");
        return Ok(false);
    }
    let node = format!("{name}-control-plane");
    let format = "{{.Config.Image}}";
    let image = cmd!(sh, "docker inspect --format {format} {node}")
        .quiet()
        .ignore_stderr()
        .read()
        .unwrap_or_default();
    println!("  cluster {name}: node {node}, image {image}");
    let client = kubeconfig::client(&lab.admin_kubeconfig).await?;
    let version = client
        .apiserver_version()
        .await
        .map(|v| v.git_version)
        .unwrap_or_else(|e| format!("unreachable: {e}"));
    println!("  API server:   {} ({version})", lab.api_server_url);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NAMESPACE);
    let ready = match deployments.get_opt(DEPLOYMENT).await? {
        Some(d) => {
            let status = d.status.unwrap_or_default();
            let (ready, want) = (
                status.ready_replicas.unwrap_or(0),
                d.spec.and_then(|s| s.replicas).unwrap_or(1),
            );
            println!("  deployment/{DEPLOYMENT}: {ready}/{want} ready");
            ready == want && want > 0
        }
        None => {
            println!("  deployment/{DEPLOYMENT}: missing");
            false
        }
    };
    if let Some(pod) = controller_pod(&client).await? {
        let image = pod
            .spec
            .as_ref()
            .and_then(|s| s.containers.first())
            .and_then(|c| c.image.clone())
            .unwrap_or_default();
        let phase = pod
            .status
            .as_ref()
            .and_then(|s| s.phase.clone())
            .unwrap_or_default();
        println!(
            "  pod {}: {phase}, image {image}",
            kube::ResourceExt::name_any(&pod)
        );
    }
    Ok(ready)
}

/// `lab logs [-f]` for kind: the controller pod's log.
pub async fn logs(lab: &LabFile, follow: bool) -> Result<()> {
    use futures::{AsyncBufReadExt, TryStreamExt};
    let client = kubeconfig::client(&lab.admin_kubeconfig).await?;
    let pod = controller_pod(&client)
        .await?
        .context("no controller pod")?;
    let name = kube::ResourceExt::name_any(&pod);
    eprintln!(
        "$ kubectl --kubeconfig {} logs {}pod/{name}    # done with kube-rs",
        lab.admin_kubeconfig.display(),
        if follow { "-f " } else { "" }
    );
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client, NAMESPACE);
    if follow {
        let mut lines = pods
            .log_stream(
                &name,
                &kube::api::LogParams {
                    follow: true,
                    ..Default::default()
                },
            )
            .await?
            .lines();
        while let Some(line) = lines.try_next().await? {
            println!("{line}");
        }
    } else {
        print!(
            "{}",
            pods.logs(&name, &kube::api::LogParams::default()).await?
        );
    }
    Ok(())
}

/// `lab down` for kind: delete the cluster, remove the state.
pub fn down(name: &str) -> Result<()> {
    let sh = Shell::new()?;
    if binaries::on_path("kind").is_some() {
        cmd!(sh, "kind delete cluster --name {name}").run()?;
    } else {
        eprintln!(
            "kind is not on PATH: cannot delete cluster {name} (`nix develop`, then `cargo xtask lab down --name {name}`)"
        );
    }
    let dir = project::lab_dir(name);
    if dir.exists() {
        std::fs::remove_dir_all(&dir)
            .with_context(|| format!("cannot remove {}", dir.display()))?;
        eprintln!("removed {}", dir.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::render;

    /// The kind path's command plan, pinned: a change to it shows in review.
    /// `UPDATE_SNAPSHOTS=1 cargo test -p xtask` rewrites the snapshot after an
    /// intended change; commit it with the code.
    #[test]
    fn the_kind_plan_matches_its_snapshot() {
        let target = StaticTarget {
            triple: "x86_64-unknown-linux-gnu".into(),
            rustflags: Some("-C target-feature=+crt-static"),
        };
        let reference = image::reference().unwrap();
        let image = image::plan(Builder::Host, &reference, &target, Path::new(""));
        let up = render(&up_plan(
            "my-controller-lab",
            Images::Build(image),
            &reference,
        ));
        let offline = render(&up_plan(
            "my-controller-lab",
            Images::Bundle("lab-bundle.tar".into()),
            &reference,
        ));
        let down = render(&down_plan("my-controller-lab"));
        let actual = format!(
            "## lab up --provider kind\n{up}\n## lab up --provider kind --bundle lab-bundle.tar\n{offline}\n## lab down\n{down}"
        );
        let path = project::root().join("xtask/src/lab/kind.plan.snap");
        if std::env::var("UPDATE_SNAPSHOTS").is_ok_and(|v| v == "1") {
            std::fs::write(&path, &actual).unwrap();
        }
        let snapshot = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            actual == snapshot,
            "the kind plan changed; if intended, run UPDATE_SNAPSHOTS=1 cargo test -p xtask:\n{actual}"
        );
    }

    #[test]
    fn the_node_image_is_read_from_the_cluster_file() {
        let image = node_image().unwrap();
        assert!(
            image.starts_with("kindest/node:v1.") && image.contains("@sha256:"),
            "{image}"
        );
    }
}
