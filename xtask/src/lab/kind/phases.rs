//! `lab up --provider kind` as phases, in the manner of kind's own create
//! (`create.go` and its actions): checks → node image → cluster → controller
//! image → deploy → record. Each phase is a small function returning its
//! [`Step`]s; what a step learns goes into [`Up`] for the steps after it.
//! [`up_plan`] is the phases in order, printed by `--dry-run` or carried out
//! ([`crate::plan`]); its snapshot pins it (`the_kind_plan_matches_its_snapshot`).

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};
use kube::api::{Patch, PatchParams};

use super::steps::{
    CLEAR_ARGS, Up, check_cluster_is_ours, connect, look_at_deployment, machine_checks,
    record_cluster, strip_platform, write_cluster_config,
};
use super::{
    CLUSTER_FILE, DEPLOYMENT, Images, NAMESPACE, NodeImage, WAIT, build_node_image, bundle,
    cluster_entry, docker_arch, find_cluster, find_node, image_present, kind_version,
    node_container, save_platform, shown,
};
use crate::image;
use crate::lab::deploy::{self, BY, DeploymentHost, Deploys};
use crate::lab::options::UpOptions;
use crate::lab::provider::Provider;
use crate::plan::{self, Step};
use labkit::command::Cmd;
use labkit::lab_file::LabFile;
use labkit::project;
use labkit::record::{How, Record};
use labkit::tr;

/// What every phase names, fixed before the plan is made.
struct Names {
    name: String,
    /// The lab's state directory.
    dir: PathBuf,
    /// The kubeconfig, as a person types its path.
    kubeconfig: String,
    /// The node's container.
    container: String,
    /// The controller image.
    reference: String,
    /// The node image.
    node: String,
}

/// What `lab up --provider kind` does, in order.
pub fn up_plan(
    name: &str,
    state_dir: &Path,
    images: &Images,
    node: &str,
    target: &labkit::lab_file::Target,
) -> Result<Vec<Step<Up>>> {
    let names = Names {
        name: name.to_string(),
        kubeconfig: shown(&state_dir.join("kubeconfig")),
        dir: state_dir.to_path_buf(),
        container: node_container(name),
        reference: image::reference()?,
        node: node.to_string(),
    };
    Ok([
        checks(&names),
        node_image_phase(images, &names.node),
        cluster(&names),
        registry_mirror(&names, images),
        course_images(&names, images),
        controller_image(&names, images)?,
        deploy(&names, target),
        vec![deploy::write_lab_file(&names.dir, NAMESPACE)],
    ]
    .into_iter()
    .flatten()
    .collect())
}

/// Checks: Docker, cgroups, kind, an existing cluster (this lab's, or
/// refused) — asked, then judged.
fn checks(names: &Names) -> Vec<Step<Up>> {
    let name = &names.name;
    vec![
        Step::probe(
            Cmd::argv([
                "docker",
                "version",
                "--format",
                "{{.Server.Version}} {{.Server.APIVersion}}",
            ]),
            |up: &mut Up, out: Result<String>| {
                up.docker = Some(out.map_err(|e| match labkit::command::is_not_found(&e) {
                    true => "docker: command not found".into(),
                    false => format!("{e:#}"),
                }));
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
        find_cluster(),
        Step::own(
            tr!("check the machine: Docker, kind, cgroups, inotify, an existing cluster"),
            |up| Box::pin(async move { machine_checks(up) }),
        ),
        find_node(name),
        check_ours(name),
    ]
}

/// A cluster of the lab's name must be this lab's; asked again right before
/// `kind create cluster`, as one made meanwhile would fail the create and its
/// undo must not take it.
fn check_ours(name: &str) -> Step<Up> {
    Step::own(
        tr!("check that a cluster named {name} is this lab's (its record names its node)", name),
        |up| Box::pin(async move { check_cluster_is_ours(up) }),
    )
    .when(tr!("if a cluster named {name} exists", name), |up: &Up| up.cluster_exists)
}

/// The node image: from the bundle, built here, or in Docker (pulled when
/// missing); then what it runs and which capabilities it gets.
fn node_image_phase(images: &Images, node: &str) -> Vec<Step<Up>> {
    let mut steps: Vec<Step<Up>> = Vec::new();
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
                tr!(
                    "check that {bundle} held the node, controller and course images, made for this machine ({entry})",
                    bundle = shown(&bundle),
                    entry = bundle::MANIFEST_ENTRY
                ),
                move |up: &mut Up| {
                    Box::pin(async move {
                        let manifest = bundle::read_manifest(&bundle)?;
                        bundle::check(&manifest, &up.bundle_images, docker_arch())
                    })
                },
            ));
        }
        Images::Build(_, NodeImage::Built, _) => {
            steps.push(Step::long(build_node_image(), tr!("building the kind node image")))
        }
        Images::Build(_, _, _) => {
            steps.push(Step::probe(image_present(node), |up: &mut Up, out: Result<String>| {
                up.node_present = out.is_ok();
                Ok(())
            }));
            steps.push(
                Step::run(Cmd::argv(["docker", "pull", node]))
                    .when(tr!("if Docker does not have it"), |up: &Up| !up.node_present)
                    .or(tr!(
                        "node image {node} is not here and cannot be pulled: `--registry-mirror URL` \
                         pulls it through a mirror, `--node-image built` runs one built on this machine, \
                         or check the name",
                        node
                    )),
            );
        }
    }
    steps.push(node_facts(node));
    steps
}

/// `/kind/version` of the node image and the capabilities a privileged
/// container gets there.
fn node_facts(node: &str) -> Step<Up> {
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
                    anyhow::anyhow!(tr!(
                        "Docker cannot start a privileged container here (\"unable to apply caps\"): \
                         this host's capability bounding set lacks one Docker grants; see \
                         docs/lab.md (kind on a restricted host)"
                    ))
                } else {
                    e.context(tr!("the node image does not start"))
                }
            })?);
            Ok(())
        },
    )
}

/// The cluster: its config for this host, created unless it exists (then
/// checked), and a client for it.
fn cluster(names: &Names) -> Vec<Step<Up>> {
    let Names { name, dir, kubeconfig, container, node, .. } = names;
    let file = dir.join("cluster.yaml");
    let cluster_config = shown(&file);
    let kubeconfig_path = dir.join("kubeconfig");
    vec![
        find_cluster(),
        find_node(name),
        check_ours(name),
        Step::own(
            tr!(
                "check the node image's Kubernetes minor; write {config}: {file} + what this host needs",
                config = cluster_config,
                file = CLUSTER_FILE
            ),
            move |up: &mut Up| Box::pin(async move { write_cluster_config(up, &file) }),
        ),
        Step::own(tr!("record the cluster {name} in {path} before kind makes it", name, path = shown(&Record::path(dir))), |up: &mut Up| {
            Box::pin(async move {
                let entry = cluster_entry(&up.name);
                up.record()?.intend(&entry, BY, How::Created)
            })
        })
        .when(tr!("if no cluster named {name} exists", name), |up: &Up| !up.cluster_exists),
        Step::run(Cmd::argv([
            "kind", "create", "cluster", "--name", name, "--config", &cluster_config, "--image", node,
            "--kubeconfig", kubeconfig, "--wait", WAIT,
        ]))
        .when(tr!("if no cluster named {name} exists", name), |up: &Up| !up.cluster_exists)
        .or(tr!("kind create cluster failed (its output is above; it removes a half-made cluster itself)")),
        Step::probe(Cmd::argv(["docker", "inspect", "--format", "{{.Id}}", container]), record_cluster)
            .when(tr!("if no cluster named {name} existed", name), |up: &Up| !up.cluster_exists),
        Step::probe(
            Cmd::argv(["docker", "inspect", "--format", "{{.Config.Image}} {{.State.Running}}", container]),
            |up: &mut Up, out: Result<String>| {
                up.existing_node = Some(out?);
                Ok(())
            },
        )
        .when(tr!("if the cluster {name} existed", name), |up: &Up| up.cluster_exists),
        Step::run(Cmd::argv(["kind", "export", "kubeconfig", "--name", name, "--kubeconfig", kubeconfig]))
            .when(tr!("if the cluster {name} existed", name), |up: &Up| up.cluster_exists),
        Step::own(tr!("connect to the API server; check an existing cluster's node image and health"), move |up| {
            Box::pin(async move { connect(up, &kubeconfig_path).await })
        }),
    ]
}

/// Docker Hub through the mirror for the pods' images (step 2's nginx): the node's containerd
/// reads `certs.d/docker.io/hosts.toml` at each pull, as kind's registry docs set it up.
fn registry_mirror(names: &Names, images: &Images) -> Vec<Step<Up>> {
    let Images::Build(_, _, mirror) = images else { return Vec::new() };
    let Some(hosts) = mirror.hosts_toml() else { return Vec::new() };
    let dir = "/etc/containerd/certs.d/docker.io";
    let write =
        format!("mkdir -p {dir} && printf '{}' > {dir}/hosts.toml", hosts.replace('\n', "\\n"));
    vec![Step::run(Cmd::argv(["docker", "exec", &names.container, "sh", "-c", &write]))]
}

/// A bundle's course images (step 2's nginx) into the node: its pods run them without a
/// network (with `--image-pull-policy=IfNotPresent`, as the pages say).
fn course_images(names: &Names, images: &Images) -> Vec<Step<Up>> {
    let Images::Bundle(bundle) = images else { return Vec::new() };
    let course = bundle::read_manifest(bundle).map(|m| m.course_images).unwrap_or_default();
    if course.is_empty() {
        return Vec::new();
    }
    let archive = shown(&names.dir.join("course-images.tar"));
    vec![
        Step::run(Cmd::argv(["docker", "save", "-o", &archive]).args(&course)),
        Step::run(Cmd::argv(["kind", "load", "image-archive", &archive, "--name", &names.name])),
    ]
}

/// The controller image: built (unless loading a bundle), then loaded into
/// the node unless its containerd has this very image.
fn controller_image(names: &Names, images: &Images) -> Result<Vec<Step<Up>>> {
    let Names { name, dir, container, reference, .. } = names;
    let archive = shown(&dir.join("controller-image.tar"));
    let mut steps = Vec::new();
    if let Images::Build(builder, _, _) = images {
        steps.extend(image::steps::<Up>(*builder)?);
    }
    let mut save = Cmd::argv(["docker", "save"]);
    // Known only once Docker answered: the plan shows the flag for this machine.
    if let Some(platform) = save_platform(Some("1.48"), docker_arch()) {
        save = save.args(["--platform", &platform]);
    }
    let save = save.args(["-o", &archive, reference]);
    steps.extend([
        Step::probe(image_present(reference), |up: &mut Up, out: Result<String>| {
            up.built_id = Some(out.with_context(|| tr!("the controller image is not in Docker"))?);
            Ok(())
        }),
        Step::probe(
            Cmd::argv([
                "docker",
                "exec",
                container,
                "crictl",
                "inspecti",
                "-o",
                "go-template",
                "--template",
                "{{.status.id}}",
                reference,
            ]),
            |up: &mut Up, out: Result<String>| {
                up.loaded_id = out.ok().filter(|id| !id.is_empty());
                Ok(())
            },
        ),
        // Older Dockers have no --platform: it is dropped there.
        Step::adjusted(save, |up: &Up, save: &Cmd| {
            let api = up.docker.as_ref().and_then(|d| d.as_ref().ok()?.split_once(' '));
            match save_platform(api.map(|(_, api)| api), docker_arch()) {
                Some(_) => save.clone(),
                None => strip_platform(save),
            }
        })
        .when(tr!("if the node does not have this image"), Up::needs_load),
        Step::run(Cmd::argv(["kind", "load", "image-archive", &archive, "--name", name]))
            .when(tr!("if the node does not have this image"), Up::needs_load),
    ]);
    Ok(steps)
}

/// The controller deployed: RBAC and the Deployment applied (a test's
/// leftover arguments cleared), restarted when its pod runs an older
/// image, the rollout awaited.
fn deploy(names: &Names, target: &labkit::lab_file::Target) -> Vec<Step<Up>> {
    let Names { kubeconfig, container, .. } = names;
    let kubectl = format!("kubectl --kubeconfig {kubeconfig}");
    let made_for = if target.is_default() {
        String::new()
    } else {
        let made =
            tr!("made for {target}: Role, RoleBinding and the controller's environment", target);
        format!("    # {made}")
    };
    vec![
        Step::probe(
            Cmd::argv([
                "docker", "exec", container, "crictl", "ps", "--label", "io.kubernetes.pod.namespace=default",
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
        deploy::apply(&kubectl, &format!("{}{made_for}", tr!("made by this lab, or new")), None),
        Step::api(
            format!(
                "kubectl --kubeconfig {kubeconfig} patch deployment/{DEPLOYMENT} --type strategic -p '{}'",
                CLEAR_ARGS
            ),
            |up: &mut Up| {
                Box::pin(async move {
                    let patch: serde_json::Value = serde_json::from_str(CLEAR_ARGS)?;
                    DeploymentHost::new(up.client()?, NAMESPACE).deployments().patch(DEPLOYMENT, &PatchParams::default(), &Patch::Strategic(&patch)).await?;
                    Ok(())
                })
            },
        )
        .when(tr!("if a test left arguments on the controller's container"), |up: &Up| up.leftover_args),
        Step::api(
            format!("kubectl --kubeconfig {kubeconfig} rollout restart deployment/{DEPLOYMENT}"),
            |up: &mut Up| Box::pin(async move { DeploymentHost::new(up.client()?, NAMESPACE).restart().await }),
        )
        .when(tr!("if the Deployment existed and its pod runs another image than the one built"), Up::needs_restart),
        deploy::rollout(&kubectl, NAMESPACE),
    ]
}

/// `lab up --provider kind`: carries out [`up_plan`], the cluster recorded
/// before kind makes it. A failure is undone by the caller
/// ([`crate::lab::up`]) from that record: the cluster this run made is deleted.
pub async fn up(name: &str, options: &UpOptions) -> Result<Option<LabFile>> {
    let images = &match &options.bundle {
        Some(bundle) => Images::Bundle(bundle.clone()),
        None => Images::Build(
            options.image_builder,
            NodeImage::parse(options.node_image.as_deref()),
            options.mirror.clone(),
        ),
    };
    let (target, dry_run) = (&options.target, options.dry_run);
    let state_dir = project::lab_dir(name);
    // The kind release decides the pinned node image: it is asked before the plan is made.
    let kind_version = kind_version();
    let node = match images {
        Images::Bundle(bundle) => {
            let manifest = bundle::read_manifest(bundle)?;
            // Its architecture, before anything is loaded.
            bundle::check(&manifest, &manifest.images(), docker_arch())?;
            bundle::check_kind(&manifest, kind_version.as_deref())?;
            manifest.node_image
        }
        // The pinned image through a mirror: the same digest on the mirror's host.
        Images::Build(_, NodeImage::Pinned, mirror) => {
            mirror.image(&NodeImage::Pinned.reference(kind_version.as_deref())?)
        }
        Images::Build(_, node, _) => node.reference(kind_version.as_deref())?,
    };
    let steps = up_plan(name, &state_dir, images, &node, target)?;
    let mut up = Up {
        name: name.to_string(),
        dir: state_dir.clone(),
        node_image: node,
        kind_version,
        target: target.clone(),
        record: Some(Record::open(&state_dir, name, Some(super::Kind.name()))?),
        ..Up::default()
    };
    plan::print_or_execute(steps, &mut up, dry_run).await?;
    Ok(if dry_run { None } else { LabFile::read(&state_dir)? })
}
