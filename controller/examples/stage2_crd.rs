//! Stage 2 preview — the same job the framework way: each `ConfigMapTemplate`
//! (controller/src/stage2.rs) keeps its ConfigMap, with kube-runtime's
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
    stage2::{ConfigMapTemplate, ConfigMapTemplateStatus, READY, crd_yaml},
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
    runtime::{Controller, controller::Action, watcher},
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
    let context = Arc::new(Context { client, resync: args.resync });
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

/// One template: its ConfigMap made to hold the data, then the status.
async fn reconcile(template: Arc<ConfigMapTemplate>, ctx: Arc<Context>) -> Result<Action, Error> {
    let namespace = template.namespace().ok_or(Error::NoNamespace)?;
    let name = &template.spec.config_map_name;
    let key = format!("{namespace}/{name}");
    let config_maps: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &namespace);
    let owner = template.controller_owner_ref(&()).expect("a template read from the API has a uid");
    let message = match config_maps.get_opt(name).await? {
        None => {
            let fresh = ConfigMap {
                metadata: ObjectMeta {
                    name: Some(name.clone()),
                    namespace: Some(namespace.clone()),
                    owner_references: Some(vec![owner]),
                    ..ObjectMeta::default()
                },
                data: Some(template.spec.data.clone()),
                ..ConfigMap::default()
            };
            config_maps.create(&PostParams::default(), &fresh).await?;
            info!("{key} does not exist, created it for {}", template.name_any());
            "created"
        }
        Some(live) if live.data.as_ref() == Some(&template.spec.data) && owns(&live, &owner) => {
            debug!("{key} matches its template, nothing to do");
            "in sync"
        }
        Some(live) => {
            // An owned copy, as in step 4; the ownerReference joins it, so
            // its events come back to this template through `.owns()`.
            let mut copy = live.clone();
            copy.data = Some(template.spec.data.clone());
            let refs = copy.metadata.owner_references.get_or_insert_with(Vec::new);
            if !refs.iter().any(|r| r.uid == owner.uid) {
                refs.push(owner);
            }
            config_maps.replace(name, &PostParams::default(), &copy).await?;
            info!("{key} drifted from its template, corrected it");
            "corrected"
        }
    };
    set_ready(&template, &ctx.client, &namespace, message).await?;
    Ok(Action::requeue(ctx.resync))
}

fn owns(
    cm: &ConfigMap,
    owner: &k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference,
) -> bool {
    cm.metadata.owner_references.iter().flatten().any(|r| r.uid == owner.uid)
}

/// `Ready=True` with the generation it describes; written only when it
/// changes, so the status's own event finds nothing to do (no hot loop).
async fn set_ready(
    template: &ConfigMapTemplate,
    client: &Client,
    namespace: &str,
    message: &str,
) -> Result<(), Error> {
    let generation = template.meta().generation;
    let old = template.status.clone().unwrap_or_default();
    let ready = old.conditions.iter().find(|c| c.type_ == READY);
    if old.observed_generation == generation && ready.is_some_and(|c| c.status == "True") {
        return Ok(());
    }
    let status = ConfigMapTemplateStatus {
        observed_generation: generation,
        conditions: vec![Condition {
            type_: READY.into(),
            status: "True".into(),
            reason: "InSync".into(),
            message: format!("ConfigMap {} {message}", template.spec.config_map_name),
            observed_generation: generation,
            last_transition_time: Time(Timestamp::now()),
        }],
    };
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
