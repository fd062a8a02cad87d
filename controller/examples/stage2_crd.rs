//! Stage 2 preview — the same job the framework way: each `ConfigMapTemplate`
//! (controller/src/template.rs) keeps its ConfigMap, with kube-runtime's
//! `Controller` doing what step 4 wrote by hand.
//!
//! Step 4 → here: the informer and its cache are the `Controller`'s
//! reflectors (`Controller::new` for templates, `.owns()` for ConfigMaps,
//! which maps a ConfigMap's event to its owner's key through the
//! ownerReference); the queue, its dedup and the workers are its scheduler
//! and `run`; the failure branches of `process_next_item` are `error_policy`;
//! the resync is `Action::requeue`.
//! There is no kick: a template's creation is itself an event.
//!
//!     cargo run -p controller --example stage2_crd
//!     cargo run -p controller --example stage2_crd -- crd > manifests/stage2/crd.yaml
//!     kubectl apply -f manifests/stage2/crd.yaml -f manifests/stage2/template.yaml

use std::{sync::Arc, time::Duration};

use clap::{Parser, Subcommand};
use controller::{
    connect,
    template::{ConfigMapTemplate, ConfigMapTemplateStatus, READY, crd_yaml},
};
use futures::StreamExt;
use k8s_openapi::{
    api::core::v1::ConfigMap,
    apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta, Time},
    jiff::Timestamp,
};
use kube::{
    Api, Client, Resource, ResourceExt,
    api::{Patch, PatchParams, PostParams},
    runtime::{
        Controller,
        controller::Action,
        events::{Event, EventType, Recorder, Reporter},
        watcher,
    },
};
use serde_json::json;
use tracing::{debug, info, warn};

#[derive(Parser)]
struct Args {
    /// Path of a kubeconfig; without it `KUBECONFIG`, `~/.kube/config`, or in-cluster.
    #[arg(long)]
    kubeconfig: Option<std::path::PathBuf>,
    /// How often each template is reconciled without an event (step 4's resync).
    #[arg(long, default_value = "30s", value_parser = controller::cli::parse_duration)]
    resync: Duration,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Print the CRD (manifests/stage2/crd.yaml) and exit.
    Crd,
}

#[derive(Debug, thiserror::Error)]
enum Error {
    #[error("{0}")]
    Api(#[from] kube::Error),
    #[error("the template has no namespace")]
    NoNamespace,
}

struct Context {
    client: Client,
    resync: Duration,
    recorder: Recorder,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if let Some(Command::Crd) = args.command {
        print!("{}", crd_yaml());
        return Ok(());
    }
    anyhow::ensure!(!args.resync.is_zero(), "--resync must be more than 0 (step 4 uses 30s)");
    controller::telemetry::init_for_example();
    let client = connect::client(args.kubeconfig.as_deref()).await.map_err(anyhow::Error::msg)?;
    let templates: Api<ConfigMapTemplate> = Api::default_namespaced(client.clone());
    let config_maps: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let reporter = Reporter { controller: "my-controller-stage2".into(), instance: None };
    let recorder = Recorder::new(client.clone(), reporter);
    let context = Arc::new(Context { client, resync: args.resync, recorder });
    info!("watching ConfigMapTemplates and the ConfigMaps they own");
    Controller::new(templates, watcher::Config::default())
        .owns(config_maps, watcher::Config::default())
        .shutdown_on_signal()
        .run(reconcile, error_policy, context)
        .for_each(|result| async move {
            if let Err(e) = result {
                debug!("{e}");
            }
        })
        .await;
    info!("signal received, stopped");
    Ok(())
}

/// What a reconcile found and did to a template's ConfigMap.
enum Kept {
    Created,
    Corrected,
    InSync,
    /// It exists and this template does not own it (a person's, or another
    /// controller's): nothing is written — taking it would hand its data to
    /// the template, and deleting the template would delete it.
    NotOurs,
    /// The template is being deleted (or is gone): nothing is (re)created.
    Deleting,
}

/// One template: its ConfigMap made to hold the data, then the status
/// (Ready=False with the reason on anything but success).
async fn reconcile(template: Arc<ConfigMapTemplate>, ctx: Arc<Context>) -> Result<Action, Error> {
    let namespace = template.namespace().ok_or(Error::NoNamespace)?;
    let kept = keep(&template, &ctx, &namespace).await;
    let name = &template.spec.config_map_name;
    let (status, reason, message) = match &kept {
        Ok(Kept::Deleting) => return Ok(Action::await_change()),
        Ok(Kept::NotOurs) => (
            "False",
            "NotOwned",
            format!("ConfigMap {name} exists and is not this template's: left alone"),
        ),
        Ok(_) => ("True", "InSync", format!("ConfigMap {name} holds the template's data")),
        Err(e) => ("False", "Error", e.to_string()),
    };
    set_status(&template, &ctx.client, &namespace, status, reason, message).await?;
    kept.map(|kept| match kept {
        // Its ConfigMap's events do not come here (it has no ownerReference
        // to this template): look again soon, as after an error.
        Kept::NotOurs => Action::requeue(Duration::from_secs(5)),
        _ => Action::requeue(ctx.resync),
    })
}

/// Makes the template's ConfigMap hold its data, when it may.
async fn keep(template: &ConfigMapTemplate, ctx: &Context, namespace: &str) -> Result<Kept, Error> {
    if template.meta().deletion_timestamp.is_some() {
        return Ok(Kept::Deleting);
    }
    let name = &template.spec.config_map_name;
    let key = format!("{namespace}/{name}");
    let config_maps: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), namespace);
    let owner = template.controller_owner_ref(&()).expect("a template read from the API has a uid");
    match config_maps.get_opt(name).await? {
        None => {
            // The template's cache and its ConfigMap's events come from two
            // watches with no order between them: a ConfigMap deleted just
            // after its template can arrive first, with the template cached
            // as not yet deleting. Creating is rare: ask the API server.
            let templates: Api<ConfigMapTemplate> = Api::namespaced(ctx.client.clone(), namespace);
            match templates.get_opt(&template.name_any()).await? {
                Some(now)
                    if now.uid() == template.uid() && now.meta().deletion_timestamp.is_none() => {}
                _ => return Ok(Kept::Deleting),
            }
            let fresh = ConfigMap {
                metadata: ObjectMeta {
                    name: Some(name.clone()),
                    namespace: Some(namespace.into()),
                    owner_references: Some(vec![owner]),
                    ..ObjectMeta::default()
                },
                data: Some(template.spec.data.clone()),
                ..ConfigMap::default()
            };
            config_maps.create(&PostParams::default(), &fresh).await?;
            info!("{key} does not exist, created it for {}", template.name_any());
            Ok(Kept::Created)
        }
        Some(live) if !live.owner_references().iter().any(|r| r.uid == owner.uid) => {
            warn!("{key} is not {}'s: left alone", template.name_any());
            let event = Event {
                type_: EventType::Warning,
                reason: "NotOwned".into(),
                note: Some(format!(
                    "ConfigMap {name} exists and is not this template's: left alone"
                )),
                action: "Reconcile".into(),
                secondary: Some(live.object_ref(&())),
            };
            if let Err(e) = ctx.recorder.publish(&event, &template.object_ref(&())).await {
                warn!("could not record the Event: {e}");
            }
            Ok(Kept::NotOurs)
        }
        Some(live) if live.data.as_ref() == Some(&template.spec.data) => {
            debug!("{key} matches its template, nothing to do");
            Ok(Kept::InSync)
        }
        Some(live) => {
            // An owned copy, as in step 4.
            let mut copy = live.clone();
            copy.data = Some(template.spec.data.clone());
            config_maps.replace(name, &PostParams::default(), &copy).await?;
            info!("{key} drifted from its template, corrected it");
            Ok(Kept::Corrected)
        }
    }
}

/// The `Ready` condition and `observedGeneration`, written only when they
/// change (so the status's own event finds nothing to do: no hot loop). The
/// other conditions are kept, and `lastTransitionTime` moves only when
/// `Ready` changes its status.
async fn set_status(
    template: &ConfigMapTemplate,
    client: &Client,
    namespace: &str,
    status: &str,
    reason: &str,
    message: String,
) -> Result<(), Error> {
    let generation = template.meta().generation;
    let old = template.status.clone().unwrap_or_default();
    let previous = old.conditions.iter().find(|c| c.type_ == READY);
    let same = |c: &&Condition| {
        (c.status.as_str(), c.reason.as_str(), c.observed_generation)
            == (status, reason, generation)
            && c.message == message
    };
    if old.observed_generation == generation && previous.is_some_and(|c| same(&c)) {
        return Ok(());
    }
    let last_transition_time = match previous {
        Some(c) if c.status == status => c.last_transition_time.clone(),
        _ => Time(Timestamp::now()),
    };
    let ready = Condition {
        type_: READY.into(),
        status: status.into(),
        reason: reason.into(),
        message,
        observed_generation: generation,
        last_transition_time,
    };
    let mut conditions: Vec<Condition> =
        old.conditions.into_iter().filter(|c| c.type_ != READY).collect();
    conditions.push(ready);
    let status = ConfigMapTemplateStatus { observed_generation: generation, conditions };
    let templates: Api<ConfigMapTemplate> = Api::namespaced(client.clone(), namespace);
    let patch = json!({"status": status});
    templates
        .patch_status(&template.name_any(), &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}

/// Step 4's failure branch of `process_next_item`: log it, try again later (the scheduler keeps one
/// pending retry per template).
fn error_policy(template: Arc<ConfigMapTemplate>, error: &Error, _: Arc<Context>) -> Action {
    warn!("reconcile failed, retrying in 5 s ({}): {error}", template.name_any());
    Action::requeue(Duration::from_secs(5))
}
