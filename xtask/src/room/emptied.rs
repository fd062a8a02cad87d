//! `room down`'s namespaces: all deleted at once (each with its recorded uid as
//! a precondition), then awaited together. An object an attendee left with a
//! finalizer nothing will ever remove would hold its namespace in deletion for
//! good: once the namespace controller reports finalizers remaining, they are
//! taken off every object of the namespace (it is the room's, being emptied).

use anyhow::{Context as _, Result};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, Preconditions};
use kube::discovery::{Discovery, Scope, verbs};

use labkit::eventually::{Check, eventually};
use labkit::record::Record;
use labkit::tr;

/// Deletes every namespace `record` names and waits until all are gone.
pub async fn namespaces(client: &kube::Client, record: &Record) -> Result<()> {
    let api = Api::<Namespace>::all(client.clone());
    let recorded: Vec<(String, String)> = record
        .entries
        .iter()
        .filter(|e| e.object.kind == "Namespace")
        .filter_map(|e| Some((e.object.name.clone(), e.uid.clone()?)))
        .collect();
    let names: Vec<&str> = recorded.iter().map(|(name, _)| name.as_str()).collect();
    labkit::progress!(
        "$ kubectl delete namespace {} --wait=false    # done with kube-rs, each with its recorded uid",
        names.join(" ")
    );
    for (name, uid) in &recorded {
        let uid = Some(uid.clone());
        let params =
            DeleteParams::background().preconditions(Preconditions { uid, resource_version: None });
        match api.delete(name, &params).await {
            Ok(_) => {}
            // Gone, or another of the name (the record's delete then leaves it and says so).
            Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {}
            Err(e) => return Err(e).with_context(|| tr!("cannot delete namespace {name}", name)),
        }
    }
    let waits = recorded.iter().map(|(name, uid)| gone(client, &api, name, uid));
    futures::future::try_join_all(waits).await.map(drop)
}

/// Until namespace `name` of `uid` is gone, its objects' finalizers taken off
/// when the namespace controller says they hold it.
async fn gone(client: &kube::Client, api: &Api<Namespace>, name: &str, uid: &str) -> Result<()> {
    let what = tr!("namespace {name} to be gone", name);
    // Said once; taken off again every 10 s at most while the controller still reports some.
    let last = std::sync::Mutex::new(None::<std::time::Instant>);
    eventually(&what, super::DELETE_WITHIN, || async {
        let Some(namespace) = api.get_opt(name).await? else { return Ok(Check::Done(())) };
        if namespace.metadata.uid.as_deref() != Some(uid) {
            return Ok(Check::Done(()));
        }
        let conditions = namespace.status.and_then(|s| s.conditions).unwrap_or_default();
        let held = conditions
            .iter()
            .find(|c| c.type_ == "NamespaceFinalizersRemaining" && c.status == "True");
        let due = {
            let mut last = last.lock().expect("not poisoned");
            let due = held.is_some() && last.is_none_or(|at| at.elapsed().as_secs() >= 10);
            if due && last.is_none() {
                let message = held.and_then(|h| h.message.clone()).unwrap_or_default();
                labkit::progress!(tr!(
                    "  {name}: {message}: taking the finalizers off",
                    name,
                    message
                ));
            }
            if due {
                *last = Some(std::time::Instant::now());
            }
            due
        };
        if due {
            take_finalizers_off(client, name).await?;
        }
        Ok(Check::NotYet(
            conditions
                .iter()
                .filter(|c| c.status == "True")
                .map(|c| c.type_.clone())
                .collect::<Vec<_>>()
                .join(", "),
        ))
    })
    .await
}

/// Every object of `namespace` that has finalizers, of every kind the API server
/// lists, patched to have none.
async fn take_finalizers_off(client: &kube::Client, namespace: &str) -> Result<()> {
    let discovery = Discovery::new(client.clone()).run().await?;
    let none = Patch::Merge(serde_json::json!({"metadata": {"finalizers": null}}));
    for group in discovery.groups() {
        for (resource, capabilities) in group.recommended_resources() {
            let listed = capabilities.scope == Scope::Namespaced
                && capabilities.supports_operation(verbs::LIST)
                && capabilities.supports_operation(verbs::PATCH);
            if !listed {
                continue;
            }
            let api: Api<DynamicObject> =
                Api::namespaced_with(client.clone(), namespace, &resource);
            for object in api.list(&ListParams::default()).await? {
                if object.metadata.finalizers.as_ref().is_some_and(|f| !f.is_empty()) {
                    let name = object.metadata.name.unwrap_or_default();
                    api.patch(&name, &PatchParams::default(), &none).await?;
                }
            }
        }
    }
    Ok(())
}
