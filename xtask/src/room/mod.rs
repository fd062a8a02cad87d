//! `cargo xtask room up|down`: one cluster for a workshop room. Per
//! attendee a namespace, a ServiceAccount bound to the attendee's Role in
//! that namespace only, a quota, limits and a NetworkPolicy, and a
//! kubeconfig of its own (a TokenRequest token of bounded lifetime, the
//! cluster's CA inline); for the room, an admission policy that closes what
//! RBAC leaves open ([`guard`]). `room down` deletes exactly those. An
//! attendee then runs `lab up --provider existing --kubeconfig
//! attendee-07.kubeconfig` with no cluster-wide rights
//! (docs/existing-cluster.md).

mod attendee;
mod attendee_kubeconfig;
mod emptied;
mod fairness;
mod guard;
mod isolation;
mod policy_sources;
mod serve;
mod view;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use clap::{Args, Subcommand};
use k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicy;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::Api;
use kube::config::Kubeconfig;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::lab::existing::one_context;
use crate::lab::manifests::FIELD_MANAGER;
use crate::lab::options::parse_namespace;
use labkit::project::shown;
use labkit::record::Record;
use labkit::tr;

use attendee::{ATTENDEE, LIMITS, ROOM_LABEL};
pub use view::{GRADE, GRADE_KEY};

/// Pod Security: an attendee's pods run as the course's controller does
/// (non-root, no privileges), not as anything on the instructor's nodes.
const ENFORCE: &str = "pod-security.kubernetes.io/enforce";
/// How long deleting one namespace (with what the attendee left in it) may take.
const DELETE_WITHIN: Duration = Duration::from_secs(180);
/// What `room up` makes is recorded as made by it.
const BY: &str = "room up";

#[derive(Subcommand)]
pub enum RoomCommand {
    /// Per attendee: a namespace, a ServiceAccount with the attendee's Role there only, a
    /// quota, limits and a NetworkPolicy, and a kubeconfig (a token of bounded lifetime) under
    /// target/room/<name>/; for the room, an admission policy (docs/existing-cluster.md).
    Up {
        /// How many attendees (namespaces `<prefix>-01` …).
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..=99))]
        attendees: u32,
        /// How long the attendees' tokens are valid, as kubectl's `create token --duration`
        /// says it (8h, 90m; 1h to 48h; the API server may cap it); no token an attendee mints
        /// may be longer.
        #[arg(long, value_name = "DURATION", default_value = "8h", value_parser = parse_token_duration)]
        duration: TokenSeconds,
        /// The old name: refused with the new one.
        #[arg(long = "token-hours", hide = true, value_parser = renamed_token_hours)]
        _token_hours: Option<String>,
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
    /// A live page of the room for the instructor: each attendee's lab, controller, my-config,
    /// the experiments seen and the grade handed in, from informers (docs/existing-cluster.md).
    Serve {
        /// Where the page listens; anywhere but loopback it asks for a secret printed once.
        #[arg(long, default_value = "127.0.0.1:8099")]
        listen: std::net::SocketAddr,
        #[command(flatten)]
        room: RoomOptions,
    },
}

#[derive(Args, Clone)]
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
#[derive(Debug, Default, Serialize, Deserialize)]
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
        RoomCommand::Up { attendees, duration, prefix, room, .. } => {
            up(&room, attendees, duration, &prefix).await
        }
        RoomCommand::Down { room } => down(&room).await,
        RoomCommand::Serve { listen, room } => serve::run(&room, listen).await,
    }
}

/// A token's lifetime in seconds, shown as kubectl's `--duration` takes it (`8h`, `90m`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TokenSeconds(pub i64);

impl std::fmt::Display for TokenSeconds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            s if s % 3600 == 0 => write!(f, "{}h", s / 3600),
            s if s % 60 == 0 => write!(f, "{}m", s / 60),
            s => write!(f, "{s}s"),
        }
    }
}

/// `--token-hours N` was renamed to kubectl's `--duration`: said in one line.
fn renamed_token_hours(hours: &str) -> Result<String, String> {
    Err(tr!("--token-hours is now --duration, as kubectl names it: --duration {hours}h", hours))
}

/// `--duration`: a Go-style duration (kubectl's), from 1h to 48h.
fn parse_token_duration(text: &str) -> Result<TokenSeconds, String> {
    let duration = controller::cli::parse_duration(text)?;
    let seconds = duration.as_secs();
    if !(3600..=48 * 3600).contains(&seconds) || duration.subsec_nanos() != 0 {
        return Err(tr!(
            "{text} is outside 1h..48h (whole seconds): use e.g. 8h or 90m",
            text = format!("{text:?}")
        ));
    }
    Ok(TokenSeconds(seconds as i64))
}

/// Where room `name`'s kubeconfigs are written (`<namespace>.kubeconfig` each).
pub fn room_dir(name: &str) -> PathBuf {
    labkit::project::target_dir().join("room").join(name)
}

/// The instructor's kubeconfig cut to one context, and a client for it.
async fn connect(room: &RoomOptions) -> Result<(Kubeconfig, String, kube::Client)> {
    let (config, _, context, _) =
        one_context(room.kubeconfig.as_deref(), room.context.as_deref(), None)?;
    let client = labkit::lab::client_of(config.clone(), |_| ()).await?;
    client
        .apiserver_version()
        .await
        .with_context(|| tr!("the API server of context {context} does not answer", context))?;
    Ok((config, context, client))
}

async fn up(
    room: &RoomOptions,
    attendees: u32,
    token: TokenSeconds,
    prefix: &str,
) -> Result<ExitCode> {
    let dir = room_dir(&room.name);
    if dir.join("room.json").exists() {
        bail!(tr!(
            "room {name} is up already ({path}): `cargo xtask room down --name {name}` first, or another --name",
            name = room.name,
            path = shown(&dir)
        ));
    }
    let (config, context, client) = connect(room).await?;
    let namespaces: Vec<String> = (1..=attendees).map(|i| format!("{prefix}-{i:02}")).collect();
    nothing_in_the_way(&client, &room.name, &namespaces).await?;
    let sources = policy_sources::sources(&client).await?;
    labkit::files::create_dir(&dir)?;
    let mut record = Record::open(&dir, &format!("room-{}", room.name), None)?;
    let mut file = RoomFile { name: room.name.clone(), context, ..RoomFile::default() };
    // Written first: `room down` finds the room (and its record) from here on, whatever ends this.
    labkit::files::write_private(&dir.join("room.json"), serde_json::to_string_pretty(&file)?)?;
    let mut signals = crate::interrupt::Interrupts::catch(&dir.join("hangup.log"))?;
    let making = Making { client: &client, config: &config, token, sources: &sources, dir: &dir };
    // Each object is in the room's record before it is made ([`labkit::owned::apply`]), so a
    // failure or a kill leaves a record of what to delete.
    let made = async {
        let policy = guard::name(&room.name);
        labkit::progress!(
            "$ kubectl apply --server-side -f -    # ValidatingAdmissionPolicy and its binding {policy}, done with kube-rs"
        );
        for document in guard::objects(&room.name, token.0) {
            labkit::owned::apply(&client, &mut record, BY, FIELD_MANAGER, document).await?;
        }
        labkit::test_hook::at("room up:policy")?;
        labkit::progress!(
            "$ kubectl apply --server-side -f -    # PriorityLevelConfiguration and FlowSchema {policy}, done with kube-rs"
        );
        for document in fairness::objects(&room.name, &namespaces) {
            labkit::owned::apply(&client, &mut record, BY, FIELD_MANAGER, document).await?;
        }
        for namespace in &namespaces {
            making.attendee(namespace, &mut file, &mut record).await?;
        }
        let first = crate::lab::kubeconfig::client(&file.kubeconfigs[0]).await?;
        guard::enforced(&first, &namespaces[0], &room.name).await?;
        isolation::check(&client, &namespaces).await
    };
    let made = tokio::select! {
        made = made => made,
        () = signals.first("room up") => Err(anyhow::anyhow!(tr!("interrupted"))),
    };
    if let Err(error) = made {
        eprintln!("{}", tr!("room up failed: deleting what it created"));
        emptied::namespaces(&client, &record).await?;
        delete_recorded(&client, &mut record).await?;
        let _ = std::fs::remove_dir_all(&dir);
        return Err(error);
    }
    println!(
        "{}",
        tr!(
            "room {name}: {attendees} attendees, tokens valid until {expires}",
            name = room.name,
            attendees,
            expires = file.expires
        )
    );
    for (namespace, kubeconfig) in file.namespaces.iter().zip(&file.kubeconfigs) {
        println!(
            "  {namespace}: $ cargo xtask lab up --provider existing --kubeconfig {} --registry HOST[:PORT]",
            shown(kubeconfig)
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Before anything is made: none of the namespaces exists (the room would
/// not own it), nor a policy of the room's name.
async fn nothing_in_the_way(
    client: &kube::Client,
    room: &str,
    namespaces: &[String],
) -> Result<()> {
    let namespace_api = Api::<Namespace>::all(client.clone());
    for namespace in namespaces {
        if namespace_api.get_opt(namespace).await?.is_some() {
            bail!(tr!(
                "namespace {namespace} exists already: this room would not own it (another --prefix, or remove it)",
                namespace
            ));
        }
    }
    let policies = Api::<ValidatingAdmissionPolicy>::all(client.clone());
    if policies.get_opt(&guard::name(room)).await?.is_some() {
        bail!(tr!(
            "ValidatingAdmissionPolicy {name} exists already: another room of this name is up on this cluster (another --name)",
            name = guard::name(room)
        ));
    }
    Ok(())
}

/// What `room up` makes, and from what.
struct Making<'a> {
    client: &'a kube::Client,
    config: &'a Kubeconfig,
    token: TokenSeconds,
    /// Where the attendees' pods must be reachable from ([`network`]).
    sources: &'a policy_sources::Sources,
    dir: &'a Path,
}

impl Making<'_> {
    async fn attendee(
        &self,
        namespace: &str,
        file: &mut RoomFile,
        record: &mut Record,
    ) -> Result<()> {
        let room_json = self.dir.join("room.json");
        labkit::progress!("$ kubectl create namespace {namespace}    # done with kube-rs");
        let document = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace, "labels": {ROOM_LABEL: file.name.clone(), ENFORCE: "restricted"}}});
        labkit::owned::apply(self.client, record, BY, FIELD_MANAGER, document).await?;
        file.namespaces.push(namespace.to_string());
        labkit::files::write_private(&room_json, serde_json::to_string_pretty(file)?)?;
        labkit::progress!(
            "$ kubectl apply --server-side -n {namespace} -f -    # ServiceAccount, Role and RoleBinding {ATTENDEE}; ResourceQuota, LimitRange and NetworkPolicy {LIMITS}; done with kube-rs"
        );
        for document in attendee::objects(namespace, self.sources) {
            labkit::owned::apply(self.client, record, BY, FIELD_MANAGER, document).await?;
        }
        labkit::progress!(
            "$ kubectl create token {ATTENDEE} -n {namespace} --duration={}    # done with kube-rs",
            self.token
        );
        let (token, expires) =
            labkit::accounts::token(self.client, namespace, ATTENDEE, self.token.0, None).await?;
        let path = self.dir.join(format!("{namespace}.kubeconfig"));
        let config = attendee_kubeconfig::for_attendee(self.config, namespace, &token)?;
        labkit::files::write_private(&path, serde_saphyr::to_string(&config)?)?;
        file.kubeconfigs.push(path);
        file.expires = expires;
        labkit::files::write_private(&room_json, serde_json::to_string_pretty(file)?)
    }
}

/// What the room's record names, newest first, each with its uid as a
/// precondition: a namespace someone made again under the same name is left.
async fn delete_recorded(client: &kube::Client, record: &mut Record) -> Result<()> {
    let left = labkit::owned::delete_all(client, record, |_| true, DELETE_WITHIN).await?;
    if !left.is_empty() {
        eprintln!(
            "{}",
            tr!("left alone ({n}): not this room's, as the lines above say", n = left.len())
        );
    }
    Ok(())
}

/// Room `room.name`'s file, if it is up, and a client of the context it was made on (the
/// one `room.json` names, unless `--context` says another).
pub async fn open(room: &RoomOptions) -> Result<Option<(RoomFile, kube::Client)>> {
    let dir = room_dir(&room.name);
    let Some(text) = labkit::files::read_if_there(&dir.join("room.json"))? else {
        return Ok(None);
    };
    let file: RoomFile =
        serde_json::from_str(&text).with_context(|| tr!("room.json is not a room file"))?;
    let context = room.context.clone().or_else(|| Some(file.context.clone()));
    let (_, context, client) = connect(&RoomOptions { context, ..room.clone() }).await?;
    if context != file.context {
        bail!(tr!(
            "room {name} was made on context {made}, not {context}: pass --context {made}",
            name = room.name,
            made = file.context,
            context
        ));
    }
    Ok(Some((file, client)))
}

/// One line for a room that is not up.
pub fn not_up(name: &str) -> String {
    let path = shown(&room_dir(name));
    tr!("room {name} is not up (nothing at {path})", name, path)
}

async fn down(room: &RoomOptions) -> Result<ExitCode> {
    let dir = room_dir(&room.name);
    let Some((file, client)) = open(room).await? else {
        println!("{}", not_up(&room.name));
        return Ok(ExitCode::SUCCESS);
    };
    if let Some(mut record) = Record::load(&dir)? {
        emptied::namespaces(&client, &record).await?;
        delete_recorded(&client, &mut record).await?;
    }
    labkit::files::remove_dir(&dir)?;
    println!(
        "{}",
        tr!(
            "room {name} is down: {n} namespaces and their kubeconfigs removed",
            name = room.name,
            n = file.namespaces.len()
        )
    );
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_duration_is_kubectls_within_1h_to_48h() {
        assert_eq!(parse_token_duration("8h"), Ok(TokenSeconds(8 * 3600)));
        assert_eq!(parse_token_duration("90m"), Ok(TokenSeconds(5400)));
        assert_eq!(parse_token_duration("1h30m").map(|t| t.to_string()), Ok("90m".into()));
        assert_eq!(TokenSeconds(48 * 3600).to_string(), "48h");
        for bad in ["59m", "49h", "8", "8x", "", "1h0.5s"] {
            let error = parse_token_duration(bad).unwrap_err();
            assert!(!error.contains('\n'), "{bad:?}: {error}");
        }
    }
}
