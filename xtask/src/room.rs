//! `cargo xtask room up|down`: one cluster for a workshop room. Per
//! attendee a namespace, a ServiceAccount bound to the attendee's Role in
//! that namespace only, and a kubeconfig of its own (a TokenRequest token of
//! bounded lifetime); `room down` deletes exactly those. An attendee then
//! runs `lab up --provider existing --kubeconfig attendee-07.kubeconfig`
//! with no cluster-wide rights (docs/existing-cluster.md).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use clap::{Args, Subcommand};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::lab::apply::FIELD_MANAGER;
use crate::lab::existing::{one_context, parse_namespace};
use labkit::project::shown;
use labkit::record::Record;

/// The attendee's ServiceAccount, Role and RoleBinding, in each namespace.
const ATTENDEE: &str = "attendee";
/// Labels each namespace with its room, for `kubectl get ns -l`.
const ROOM_LABEL: &str = "lab-kit.dev/room";
/// Pod Security: an attendee's pods run as the course's controller does
/// (non-root, no privileges), not as anything on the instructor's nodes.
const ENFORCE: &str = "pod-security.kubernetes.io/enforce";
/// How long deleting one namespace (with what the attendee left in it) may take.
const DELETE_WITHIN: Duration = Duration::from_secs(180);
/// What `room up` makes is recorded as made by it.
const BY: &str = "room up";

#[derive(Subcommand)]
pub enum RoomCommand {
    /// Per attendee: a namespace, a ServiceAccount with the attendee's Role there only,
    /// and a kubeconfig (a token of bounded lifetime) under target/room/<name>/.
    Up {
        /// How many attendees (namespaces `<prefix>-01` …).
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..=99))]
        attendees: u32,
        /// How long the attendees' tokens are valid, in hours (the API server may cap it).
        #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(i64).range(1..=48))]
        token_hours: i64,
        /// The namespaces' prefix (a DNS label).
        #[arg(long, default_value = "attendee", value_parser = parse_namespace)]
        prefix: String,
        #[command(flatten)]
        room: RoomOptions,
    },
    /// Delete what `room up` created (the namespaces, with everything in them), and its files.
    Down {
        #[command(flatten)]
        room: RoomOptions,
    },
}

#[derive(Args)]
pub struct RoomOptions {
    /// The instructor's kubeconfig (default: $KUBECONFIG, else ~/.kube/config).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// The instructor's context [default: the kubeconfig's current one].
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
    /// The room's name: its state is target/room/<name>/.
    #[arg(long, default_value = "room", value_parser = parse_namespace)]
    pub name: String,
}

/// `target/room/<name>/room.json`: the room as its attendees and `room down`
/// see it. What `room up` made on the cluster, with uids, is the room's
/// record next to it ([`Record`]), which `room down` undoes.
#[derive(Debug, Serialize, Deserialize)]
pub struct RoomFile {
    /// `--name`: each namespace's `lab-kit.dev/room` label.
    pub name: String,
    pub context: String,
    /// The attendees' namespaces, in order; each has the attendee's objects.
    pub namespaces: Vec<String>,
    /// The attendees' kubeconfigs, by namespace order.
    pub kubeconfigs: Vec<PathBuf>,
    /// When the tokens expire (RFC 3339).
    pub expires: String,
}

pub async fn run(command: RoomCommand) -> Result<ExitCode> {
    match command {
        RoomCommand::Up { attendees, token_hours, prefix, room } => {
            up(&room, attendees, token_hours, &prefix).await
        }
        RoomCommand::Down { room } => down(&room).await,
    }
}

fn room_dir(name: &str) -> PathBuf {
    labkit::project::target_dir().join("room").join(name)
}

/// The instructor's kubeconfig cut to one context, and a client for it.
async fn connect(room: &RoomOptions) -> Result<(Kubeconfig, String, kube::Client)> {
    let (config, _, context, _) =
        one_context(room.kubeconfig.as_deref(), room.context.as_deref(), None)?;
    let options = KubeConfigOptions::default();
    let client: kube::Client =
        kube::Config::from_custom_kubeconfig(config.clone(), &options).await?.try_into()?;
    client
        .apiserver_version()
        .await
        .with_context(|| format!("the API server of context {context} does not answer"))?;
    Ok((config, context, client))
}

/// The attendee's objects in `namespace`: what the course's controller
/// needs, and what `lab up`, the e2e suite and the grader do there.
fn attendee_objects(namespace: &str) -> Vec<Value> {
    let all = ["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"];
    let read = ["get", "list", "watch"];
    let rule = |group: &str, resources: &[&str], verbs: &[&str]| json!({"apiGroups": [group], "resources": resources, "verbs": verbs});
    let meta = |kind: &str| json!({"name": ATTENDEE, "namespace": namespace, "labels": {ROOM_LABEL: "attendee"}, "annotations": {"lab-kit.dev/kind": kind}});
    vec![
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta("ServiceAccount")}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta("Role"), "rules": [
            rule("", &["configmaps", "serviceaccounts", "pods", "events"], &all),
            rule("", &["serviceaccounts/token", "pods/eviction"], &["create"]),
            rule("", &["pods/log", "pods/proxy"], &["get"]),
            rule("events.k8s.io", &["events"], &all),
            rule("apps", &["deployments", "deployments/scale"], &all),
            rule("apps", &["replicasets"], &read),
            rule("rbac.authorization.k8s.io", &["roles", "rolebindings"], &all),
            rule("authorization.k8s.io", &["localsubjectaccessreviews"], &["create"]),
        ]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": meta("RoleBinding"),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": ATTENDEE},
            "subjects": [{"kind": "ServiceAccount", "name": ATTENDEE, "namespace": namespace}]}),
    ]
}

async fn up(
    room: &RoomOptions,
    attendees: u32,
    token_hours: i64,
    prefix: &str,
) -> Result<ExitCode> {
    let dir = room_dir(&room.name);
    if dir.join("room.json").exists() {
        bail!(
            "room {} is up already ({}): `cargo xtask room down --name {}` first, or another --name",
            room.name,
            shown(&dir),
            room.name
        );
    }
    let (config, context, client) = connect(room).await?;
    let namespaces: Vec<String> = (1..=attendees).map(|i| format!("{prefix}-{i:02}")).collect();
    let namespace_api = Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone());
    for namespace in &namespaces {
        if namespace_api.get_opt(namespace).await?.is_some() {
            bail!(
                "namespace {namespace} exists already: this room would not own it (another --prefix, or remove it)"
            );
        }
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut record = Record::open(&dir, &format!("room-{}", room.name), None)?;
    let mut file = RoomFile {
        name: room.name.clone(),
        context: context.clone(),
        namespaces: Vec::new(),
        kubeconfigs: Vec::new(),
        expires: String::new(),
    };
    let made =
        make_all(&client, &config, &namespaces, token_hours, &dir, &mut file, &mut record).await;
    if let Err(error) = made {
        eprintln!("room up failed: deleting what it created");
        delete_recorded(&client, &mut record).await?;
        let _ = std::fs::remove_dir_all(&dir);
        return Err(error);
    }
    isolation(&client, &namespaces).await?;
    eprintln!("room {}: {} attendees, tokens valid until {}", room.name, attendees, file.expires);
    for (namespace, kubeconfig) in file.namespaces.iter().zip(&file.kubeconfigs) {
        eprintln!(
            "  {namespace}: cargo xtask lab up --provider existing --kubeconfig {} --registry HOST[:PORT]",
            shown(kubeconfig)
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Each attendee's namespace, objects and kubeconfig; each object is in the
/// room's record before it is made ([`labkit::owned::apply`]), so a failure
/// or a kill leaves a record of what to delete.
async fn make_all(
    client: &kube::Client,
    config: &Kubeconfig,
    namespaces: &[String],
    token_hours: i64,
    dir: &Path,
    file: &mut RoomFile,
    record: &mut Record,
) -> Result<()> {
    let room_json = dir.join("room.json");
    for namespace in namespaces {
        eprintln!("$ kubectl create namespace {namespace}    # done with kube-rs");
        let document = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace, "labels": {ROOM_LABEL: file.name.clone(), ENFORCE: "restricted"}}});
        labkit::owned::apply(client, record, BY, FIELD_MANAGER, document).await?;
        file.namespaces.push(namespace.clone());
        labkit::files::write_private(&room_json, serde_json::to_string_pretty(file)?)?;
        eprintln!(
            "$ kubectl apply --server-side -n {namespace} -f -    # ServiceAccount, Role and RoleBinding {ATTENDEE}, done with kube-rs"
        );
        for document in attendee_objects(namespace) {
            labkit::owned::apply(client, record, BY, FIELD_MANAGER, document).await?;
        }
        eprintln!(
            "$ kubectl create token {ATTENDEE} -n {namespace} --duration={token_hours}h    # done with kube-rs"
        );
        let (token, expires) =
            e2e::accounts::token(client, namespace, ATTENDEE, token_hours * 3600).await?;
        let kubeconfig = dir.join(format!("{namespace}.kubeconfig"));
        labkit::files::write_private(
            &kubeconfig,
            serde_saphyr::to_string(&attendee_kubeconfig(config, namespace, &token))?,
        )?;
        file.kubeconfigs.push(kubeconfig);
        file.expires = expires;
        labkit::files::write_private(&room_json, serde_json::to_string_pretty(file)?)?;
    }
    Ok(())
}

/// The instructor's cluster entry, the attendee's token as its one user,
/// one context named after the namespace and set to it.
fn attendee_kubeconfig(instructor: &Kubeconfig, namespace: &str, token: &str) -> Kubeconfig {
    let mut config = e2e::accounts::with_token(instructor.clone(), token);
    for user in &mut config.auth_infos {
        user.name = namespace.to_string();
    }
    for named in &mut config.contexts {
        named.name = namespace.to_string();
        if let Some(context) = named.context.as_mut() {
            context.user = Some(namespace.to_string());
            context.namespace = Some(namespace.to_string());
        }
    }
    config.current_context = Some(namespace.to_string());
    config
}

/// Each attendee may do nothing in the next one's namespace, nor in
/// `default` (SubjectAccessReview as the attendee, for every verb and
/// resource its Role grants at home).
async fn isolation(client: &kube::Client, namespaces: &[String]) -> Result<()> {
    let reviews = Api::<SubjectAccessReview>::all(client.clone());
    let mut asked = 0;
    for (i, home) in namespaces.iter().enumerate() {
        let elsewhere = namespaces.get((i + 1) % namespaces.len()).filter(|n| *n != home);
        for other in elsewhere.into_iter().map(String::as_str).chain(["default"]) {
            for rule in attendee_objects(home)[1]["rules"].as_array().into_iter().flatten() {
                for (group, resource, verb) in expand(rule) {
                    let review = SubjectAccessReview {
                        spec: SubjectAccessReviewSpec {
                            user: Some(format!("system:serviceaccount:{home}:{ATTENDEE}")),
                            groups: Some(vec![
                                "system:serviceaccounts".into(),
                                format!("system:serviceaccounts:{home}"),
                                "system:authenticated".into(),
                            ]),
                            resource_attributes: Some(resource_attributes(
                                other, &group, &resource, &verb,
                            )),
                            ..Default::default()
                        },
                        ..Default::default()
                    };
                    let answer = reviews.create(&PostParams::default(), &review).await?;
                    asked += 1;
                    if answer.status.is_some_and(|s| s.allowed) {
                        bail!(
                            "{home}'s attendee may {verb} {resource} in {other}: the room is not isolated (a ClusterRoleBinding grants it?)"
                        );
                    }
                }
            }
        }
    }
    eprintln!(
        "isolation: {asked} SubjectAccessReviews, each attendee denied everything in a neighbour's namespace and in default"
    );
    Ok(())
}

fn resource_attributes(
    namespace: &str,
    group: &str,
    resource: &str,
    verb: &str,
) -> ResourceAttributes {
    let (resource, subresource) = match resource.split_once('/') {
        Some((r, s)) => (r.to_string(), Some(s.to_string())),
        None => (resource.to_string(), None),
    };
    ResourceAttributes {
        namespace: Some(namespace.into()),
        group: Some(group.into()),
        resource: Some(resource),
        subresource,
        verb: Some(verb.into()),
        ..Default::default()
    }
}

/// A Role rule as (group, resource, verb) triples.
fn expand(rule: &Value) -> Vec<(String, String, String)> {
    let list = |key: &str| -> Vec<String> {
        rule[key]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str().map(String::from))
            .collect()
    };
    let mut triples = Vec::new();
    for group in list("apiGroups") {
        for resource in list("resources") {
            for verb in list("verbs") {
                triples.push((group.clone(), resource.clone(), verb));
            }
        }
    }
    triples
}

/// What the room's record names, newest first, each with its uid as a
/// precondition: a namespace someone made again under the same name is left.
async fn delete_recorded(client: &kube::Client, record: &mut Record) -> Result<()> {
    let left = labkit::owned::delete_all(client, record, |_| true, DELETE_WITHIN).await?;
    if !left.is_empty() {
        eprintln!("left alone ({}): not this room's, as the lines above say", left.len());
    }
    Ok(())
}

async fn down(room: &RoomOptions) -> Result<ExitCode> {
    let dir = room_dir(&room.name);
    let text = match std::fs::read_to_string(dir.join("room.json")) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            eprintln!("room {} is not up (nothing at {})", room.name, shown(&dir));
            return Ok(ExitCode::SUCCESS);
        }
        Err(error) => return Err(error).context("cannot read room.json"),
    };
    let file: RoomFile = serde_json::from_str(&text).context("room.json is not a room file")?;
    let (_, context, client) = connect(room).await?;
    if context != file.context {
        bail!(
            "room {} was made on context {}, not {context}: pass --context {}",
            room.name,
            file.context,
            file.context
        );
    }
    if let Some(mut record) = Record::load(&dir)? {
        delete_recorded(&client, &mut record).await?;
    }
    std::fs::remove_dir_all(&dir).with_context(|| format!("cannot remove {}", dir.display()))?;
    eprintln!(
        "room {} is down: {} namespaces and their kubeconfigs removed",
        room.name,
        file.namespaces.len()
    );
    Ok(ExitCode::SUCCESS)
}
