//! `lab up --provider existing`: the controller on a cluster the kit did not
//! create, in one namespace, as phases: checks → controller image → deploy →
//! record. Nothing kind-specific is assumed: the image reaches the nodes
//! through a registry (`--registry`), the Deployment names it by digest.
//! `lab down` deletes exactly what `up` created, never the cluster; a failed
//! `up` deletes what it had created before it stops.

mod steps;

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, Result, anyhow, bail};
use kube::config::Kubeconfig;

use self::steps::{
    Up, check_nothing_in_the_way, check_rights, connect, look_at_namespace, record_digest,
};
use crate::image;
use crate::lab::deploy::{self, DEPLOYMENT};
use crate::lab::options::{ExistingOptions, UpOptions};
use crate::lab::provider::{Answer, Health, Machine, Provider, docker_version};
use crate::plan::{self, Step};
use crate::preflight::{self, Check};
use labkit::command::Cmd;
use labkit::lab_file::{LabFile, Offers, Target};
use labkit::project::shown;
use labkit::record::{Entry, Record};
use labkit::tr;

/// How long one deletion (a namespace with its contents) may take.
const DELETE_WITHIN: Duration = Duration::from_secs(120);

/// Where and how, as `lab up` was asked, the kubeconfig read.
#[derive(Clone, Debug, Default)]
pub struct Given {
    /// `--kubeconfig`, else `$KUBECONFIG`, else `~/.kube/config`, as kubectl reads them.
    pub kubeconfig: PathBuf,
    pub context: String,
    pub namespace: String,
    pub create_namespace: bool,
    /// `HOST[:PORT]` the cluster's nodes pull from, and this machine pushes to.
    pub registry: String,
    /// The kubeconfig cut to the context, its namespace set: the lab's own copy.
    pub config: Kubeconfig,
    /// `--kubeconfig` was given (the plan's kubectl lines then name it).
    file_given: bool,
}

impl Given {
    /// Reads the kubeconfig as kubectl would ([`one_context`]), and checks the registry.
    pub fn new(flags: &ExistingOptions) -> Result<Given> {
        let (config, kubeconfig, context, namespace) = one_context(
            flags.kubeconfig.as_deref(),
            flags.context.as_deref(),
            flags.namespace.as_deref(),
        )?;
        let registry = flags.registry.clone().with_context(|| {
            tr!(
                "--provider existing needs --registry HOST[:PORT]: where the cluster's nodes pull the \
                 controller image from (this machine pushes it there)"
            )
        })?;
        if registry.is_empty() || registry.contains('/') {
            bail!(tr!(
                "--registry {registry} is not HOST[:PORT] (no scheme, no path): e.g. localhost:5001",
                registry = format!("{registry:?}")
            ));
        }
        Ok(Given {
            kubeconfig,
            context,
            namespace,
            create_namespace: flags.create_namespace,
            registry,
            config,
            file_given: flags.kubeconfig.is_some(),
        })
    }

    /// The `--kubeconfig F --context C` a person adds to kubectl for this cluster.
    fn kubectl(&self) -> String {
        let file = self.file_given.then(|| format!(" --kubeconfig {}", shown(&self.kubeconfig)));
        format!("kubectl{} --context {}", file.unwrap_or_default(), self.context)
    }

    /// The controller image as pushed: `HOST[:PORT]/NAME:TAG` (the Deployment gets its digest).
    fn pushed(&self) -> Result<String> {
        let local = image::reference()?;
        let name = local.rsplit('/').next().unwrap_or(&local);
        Ok(format!("{}/{name}", self.registry))
    }

    pub fn target(&self) -> Target {
        Target { namespace: self.namespace.clone(), name: Target::default().name }
    }
}

/// The kubeconfig as kubectl reads it (`file`, else `$KUBECONFIG`, else
/// `~/.kube/config`) cut to one context (`context`, else its current one),
/// that context's namespace set (`namespace`, else its own, else `default`).
/// Returns it with the file as shown, the context's name and the namespace.
pub fn one_context(
    file: Option<&Path>,
    context: Option<&str>,
    namespace: Option<&str>,
) -> Result<(Kubeconfig, PathBuf, String, String)> {
    let (config, kubeconfig) = match file {
        Some(file) => (Kubeconfig::read_from(file), file.to_path_buf()),
        None => {
            let shown = std::env::var_os("KUBECONFIG").unwrap_or_else(|| "~/.kube/config".into());
            (Kubeconfig::read(), PathBuf::from(shown))
        }
    };
    let mut config = config.map_err(|e| {
        anyhow!(tr!(
            "cannot read kubeconfig {path}: {error}: pass the file with --kubeconfig",
            path = kubeconfig.display(),
            error = e
        ))
    })?;
    let Some(context) = context.map(String::from).or_else(|| config.current_context.clone()) else {
        bail!(tr!(
            "{path} names no current context: pass --context NAME (`kubectl config get-contexts` lists them)",
            path = kubeconfig.display()
        ));
    };
    let Some(mut named) = config.contexts.iter().find(|c| c.name == context).cloned() else {
        let names: Vec<&str> = config.contexts.iter().map(|c| c.name.as_str()).collect();
        bail!(tr!(
            "context {context} is not in {path} (it has: {names}): pass one of them to --context",
            context,
            path = kubeconfig.display(),
            names = if names.is_empty() { tr!("none") } else { names.join(", ") }
        ));
    };
    let inner = named.context.as_mut().with_context(|| tr!("the context is empty"))?;
    let namespace = namespace
        .map(String::from)
        .or_else(|| inner.namespace.clone())
        .unwrap_or_else(|| "default".into());
    inner.namespace = Some(namespace.clone());
    let (cluster, user) = (inner.cluster.clone(), inner.user.clone().unwrap_or_default());
    config.clusters.retain(|c| c.name == cluster);
    config.auth_infos.retain(|u| u.name == user);
    config.contexts = vec![named];
    config.current_context = Some(context.clone());
    Ok((config, kubeconfig, context, namespace))
}

/// What `lab up --provider existing` does, in order.
pub fn up_plan(state_dir: &Path, given: &Given, builder: image::Builder) -> Result<Vec<Step<Up>>> {
    let record = vec![deploy::write_lab_file(state_dir, &given.namespace)];
    Ok([checks(given), controller_image(given, builder)?, deploy(given), record]
        .into_iter()
        .flatten()
        .collect())
}

/// Checks: the context, the server's minor, the namespace, the rights, and
/// nothing of someone else's in the way — all before anything is built or applied.
fn checks(given: &Given) -> Vec<Step<Up>> {
    let kubectl = given.kubectl();
    let namespace = &given.namespace;
    vec![
        Step::api(format!("{kubectl} version"), |up: &mut Up| Box::pin(connect(up))),
        Step::api(format!("{kubectl} get namespace {namespace}"), |up: &mut Up| {
            Box::pin(look_at_namespace(up))
        }),
        Step::api(
            format!(
                "{kubectl} auth can-i create serviceaccounts,roles,rolebindings,deployments -n {namespace}"
            ),
            |up: &mut Up| Box::pin(check_rights(up)),
        ),
        Step::api(
            format!(
                "{kubectl} -n {namespace} get serviceaccount,role,rolebinding,deployment/{DEPLOYMENT} configmap/{}    # {}",
                given.target().name,
                tr!("none there, or this lab's")
            ),
            |up: &mut Up| Box::pin(check_nothing_in_the_way(up)),
        ),
    ]
}

/// The controller image: built here, pushed to the registry, its digest read.
fn controller_image(given: &Given, builder: image::Builder) -> Result<Vec<Step<Up>>> {
    let (local, pushed) = (image::reference()?, given.pushed()?);
    let registry = &given.registry;
    let mut steps = image::steps::<Up>(builder)?;
    steps.extend([
        Step::run(Cmd::argv(["docker", "tag", &local, &pushed])),
        Step::run(Cmd::argv(["docker", "push", &pushed])).or(tr!(
            "registry {registry} refused the push: is it running, and reachable from here? \
             (an HTTP registry other than localhost must be in Docker's insecure-registries)",
            registry
        )),
        Step::probe(
            Cmd::argv([
                "docker",
                "image",
                "inspect",
                "--format",
                "{{join .RepoDigests \" \"}}",
                &pushed,
            ]),
            record_digest,
        ),
    ]);
    Ok(steps)
}

/// The controller deployed into the namespace: RBAC and the Deployment (the
/// image by digest) applied, the rollout awaited.
fn deploy(given: &Given) -> Vec<Step<Up>> {
    let namespace = &given.namespace;
    let kubectl = format!("{} -n {namespace}", given.kubectl());
    vec![
        Step::api(format!("{} create namespace {namespace}", given.kubectl()), |up: &mut Up| {
            Box::pin(steps::create_namespace(up))
        })
        .when(tr!("if {namespace} does not exist (--create-namespace)", namespace), |up: &Up| {
            up.namespace_exists == Some(false)
        }),
        deploy::apply(
            &kubectl,
            &tr!("in {namespace}, the image by digest", namespace),
            Some(steps::my_config(&given.target())),
        ),
        deploy::rollout(&kubectl, namespace),
    ]
}

/// A cluster the kit did not make, the controller a Deployment in one namespace.
pub struct Existing;

impl Provider for Existing {
    fn name(&self) -> &'static str {
        "existing"
    }

    fn about(&self) -> &'static str {
        "A cluster that is there already (`--context`, `--registry`): the controller in one namespace"
    }

    /// None of the kit's: no control plane of its own, no node, not its cluster; whether
    /// the context may act cluster-wide is found at `lab up`'s first check.
    fn offers(&self) -> Offers {
        Offers { place: "an existing cluster".into(), ..Offers::default() }
    }

    fn flags(&self) -> &'static [&'static str] {
        &[
            "--image-builder",
            "--context",
            "--kubeconfig",
            "--namespace",
            "--create-namespace",
            "--registry",
        ]
    }

    /// [`up_plan`], each object recorded before it is made ([`Record`]).
    fn up<'a>(&'a self, name: &'a str, options: &'a UpOptions) -> Answer<'a, Option<LabFile>> {
        Box::pin(async move {
            let given = Given::new(&options.existing)?;
            let state_dir = labkit::project::lab_dir(name);
            let steps = up_plan(&state_dir, &given, options.image_builder)?;
            if !options.dry_run
                && let Some(lab) = LabFile::read(&state_dir)?
                && lab.target != given.target()
            {
                bail!(tr!(
                    "lab {name} is in namespace {namespace}, not {given}: `cargo xtask lab down --name {name}` first, or use another --name",
                    name,
                    namespace = lab.target.namespace,
                    given = given.namespace
                ));
            }
            let record = Record::open(&state_dir, name, Some(self.name()))?;
            let (name, dir) = (name.to_string(), state_dir.clone());
            let mut up = Up { name, state_dir: dir, given, record, ..Up::default() };
            plan::print_or_execute(steps, &mut up, options.dry_run).await?;
            Ok(if options.dry_run { None } else { LabFile::read(&state_dir)? })
        })
    }

    fn down<'a>(&'a self, name: &'a str, dry_run: bool) -> Answer<'a, bool> {
        Box::pin(async move {
            let state_dir = labkit::project::lab_dir(name);
            let had = state_dir.exists();
            let record = Record::open(&state_dir, name, Some(self.name()))?;
            let steps = down_plan(&state_dir, &record);
            let kubeconfig = state_dir.join("kubeconfig");
            let mut down = Down { kubeconfig, record, client: None, left: 0, failed: None };
            plan::print_or_execute(steps, &mut down, dry_run).await?;
            if down.left > 0 {
                let left = down.left;
                eprintln!(
                    "{}",
                    tr!("left alone ({left}): not this lab's, as the lines above say", left)
                );
            }
            Ok(had)
        })
    }

    /// The context and namespace, then the Deployment's lines.
    fn status<'a>(&'a self, lab: &'a LabFile) -> Answer<'a, Health> {
        Box::pin(async move {
            let existing =
                lab.existing.as_ref().with_context(|| tr!("lab.json has no existing section"))?;
            let line = tr!(
                "context {context} of {path}, namespace {namespace}",
                context = existing.context,
                path = existing.kubeconfig.display(),
                namespace = existing.namespace
            );
            deploy::status(lab, vec![line]).await
        })
    }

    fn logs<'a>(&'a self, name: &'a str, follow: bool) -> Answer<'a, ()> {
        Box::pin(deploy::logs(name, follow))
    }

    /// The image is built and pushed here; the cluster is someone else's.
    fn machine_checks(&self, _name: &str, _machine: &Machine) -> Result<Vec<Check>> {
        let docker = docker_version();
        Ok(vec![preflight::docker_daemon(docker.as_deref().map_err(String::as_str))])
    }
}

/// What `lab down` learns: the record, deleted from as the plan goes.
pub struct Down {
    kubeconfig: PathBuf,
    record: Record,
    client: Option<kube::Client>,
    /// Objects of a recorded name that are not this lab's, left alone.
    left: usize,
    /// The first deletion that failed: every one is tried, then this is the error.
    failed: Option<anyhow::Error>,
}

/// What `lab down` does on a cluster the kit did not make (lab.json there
/// or not): each object the lab's record names deleted, newest first, its
/// recorded uid the precondition ([`labkit::owned::delete`]; its namespace
/// last, awaited), then the record and the state. Never the cluster, never
/// what the lab did not make.
pub fn down_plan(state_dir: &Path, record: &Record) -> Vec<Step<Down>> {
    let kubeconfig = shown(&state_dir.join("kubeconfig"));
    let mut steps: Vec<Step<Down>> = record
        .entries
        .iter()
        .rev()
        .map(|entry| {
            let object = &entry.object;
            let namespace =
                object.namespace.as_ref().map(|n| format!(" -n {n}")).unwrap_or_default();
            let uid =
                entry.uid.as_ref().map_or_else(|| tr!("its owner label"), |u| format!("uid {u}"));
            let (kind, by, entry) = (object.kind.to_lowercase(), entry.by.clone(), entry.clone());
            let why = tr!("made by {by}, if {uid} says it is this lab's; awaited", by, uid);
            Step::api(
                format!(
                    "kubectl --kubeconfig {kubeconfig}{namespace} delete {kind} {}    # {why}",
                    object.name
                ),
                move |down: &mut Down| Box::pin(delete(down, entry)),
            )
        })
        .collect();
    let (file, dir) = (record.file().to_path_buf(), state_dir.to_path_buf());
    steps.push(Step::own(
        tr!("remove {file} and {dir}", file = shown(&file), dir = shown(&dir)),
        move |down: &mut Down| {
            Box::pin(async move {
                if let Some(error) = down.failed.take() {
                    return Err(error);
                }
                down.record.clone().remove()?;
                labkit::files::remove_dir(&dir).map(drop)
            })
        },
    ));
    steps
}

/// One recorded object deleted if it is this lab's ([`labkit::owned::delete_all`]
/// of that entry alone, which says what it did); a failure is kept for the end.
async fn delete(down: &mut Down, entry: Entry) -> Result<()> {
    if down.client.is_none() {
        let client = crate::lab::kubeconfig::client(&down.kubeconfig).await.with_context(|| {
            tr!("the record {path} names objects to delete", path = shown(down.record.file()))
        })?;
        down.client = Some(client);
    }
    let client = down.client.clone().with_context(|| tr!("no client for the cluster yet"))?;
    let this = |e: &Entry| e.object == entry.object;
    match labkit::owned::delete_all(&client, &mut down.record, this, DELETE_WITHIN).await {
        Ok(left) => down.left += left.len(),
        Err(error) => {
            down.failed.get_or_insert(error);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A kubeconfig with two contexts, the second one's namespace set.
    fn kubeconfig(test: &str) -> PathBuf {
        let dir = labkit::project::target_dir().join("unit-tests").join(test);
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("kubeconfig");
        let text = "apiVersion: v1\nkind: Config\ncurrent-context: admin\n\
            clusters:\n- name: work\n  cluster: {server: 'https://work.example:6443'}\n\
            users:\n- name: me\n  user: {token: t}\n\
            contexts:\n- name: admin\n  context: {cluster: work, user: me}\n\
            - name: team\n  context: {cluster: work, user: me, namespace: team-a}\n";
        std::fs::write(&file, text).unwrap();
        file
    }

    fn flags(file: &Path, context: Option<&str>, namespace: Option<&str>) -> ExistingOptions {
        ExistingOptions {
            kubeconfig: Some(file.into()),
            context: context.map(String::from),
            namespace: namespace.map(String::from),
            create_namespace: true,
            registry: Some("localhost:5001".into()),
        }
    }

    /// The existing path's plan, pinned: a change to it shows in review
    /// (`INSTA_UPDATE=always cargo test -p xtask` rewrites it).
    #[test]
    fn the_existing_plan_matches_its_snapshot() {
        let file = kubeconfig("existing-plan");
        let given = Given::new(&flags(&file, Some("team"), None)).unwrap();
        let steps = up_plan(Path::new("target/lab/my-controller-lab"), &given, image::Builder::Nix);
        let plan = plan::render(&steps.unwrap()).replace(&shown(&file), "KUBECONFIG");
        insta::assert_snapshot!("plan", plan);
    }

    #[test]
    fn the_context_and_namespace_default_as_kubectl_s_do() {
        let file = kubeconfig("existing-defaults");
        let current = Given::new(&flags(&file, None, None)).unwrap();
        assert_eq!((current.context.as_str(), current.namespace.as_str()), ("admin", "default"));
        let team = Given::new(&flags(&file, Some("team"), None)).unwrap();
        assert_eq!(team.namespace, "team-a", "the context's namespace");
        let given = Given::new(&flags(&file, Some("team"), Some("mine"))).unwrap();
        assert_eq!(given.namespace, "mine", "--namespace wins");
        assert_eq!(given.config.contexts.len(), 1, "the lab's copy holds the one context");
        let contexts = &given.config.contexts[0];
        assert_eq!(contexts.context.as_ref().unwrap().namespace.as_deref(), Some("mine"));
    }

    #[test]
    fn bad_flags_are_one_line_naming_the_fix() {
        let file = kubeconfig("existing-bad");
        let error = |f: ExistingOptions| format!("{:#}", Given::new(&f).unwrap_err());
        let unknown = error(flags(&file, Some("nope"), None));
        assert!(
            unknown.contains("context nope is not in") && unknown.contains("(it has: admin, team)"),
            "{unknown}"
        );
        let no_registry = error(ExistingOptions { registry: None, ..flags(&file, None, None) });
        assert!(no_registry.contains("needs --registry HOST[:PORT]"), "{no_registry}");
        let url = error(ExistingOptions {
            registry: Some("http://r:5000".into()),
            ..flags(&file, None, None)
        });
        assert!(url.contains("is not HOST[:PORT]"), "{url}");
        assert!(
            crate::lab::options::parse_namespace("Team_A")
                .unwrap_err()
                .contains("is not a namespace name")
        );
    }
}
