//! `kubectl apply --server-side`, done with kube-rs: the kubectl on these
//! machines is older than the lab's API server, and a client of our own has
//! no version skew to worry about. The suites apply what they need with it
//! (the stage-2 test its CRD and RBAC); what a command of the kit makes on a
//! cluster goes through [`crate::owned`], which records it.

use std::path::Path;

use anyhow::{Context, Result, anyhow};
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::discovery::{self, Scope};
use serde_json::Value;

use crate::lab_file::Applied;
use crate::tr;

/// The documents of a multi-document YAML file (empty ones left out).
pub fn read_documents(path: &Path) -> Result<Vec<Value>> {
    let documents: Vec<Value> = serde_saphyr::from_multiple(&crate::files::read(path)?)
        .with_context(|| tr!("{path} is not YAML", path = path.display()))?;
    // `---` followed by nothing (or only comments) is an empty document, not an object.
    Ok(documents.into_iter().filter(|d| !d.is_null()).collect())
}

/// Server-side apply `documents` (read from `source`, for messages) with
/// `field_manager`, each forced: whoever applies owns these objects.
pub async fn documents(
    client: &kube::Client,
    field_manager: &str,
    source: &Path,
    documents: Vec<Value>,
) -> Result<Vec<Applied>> {
    let mut applied = Vec::new();
    for (index, document) in documents.into_iter().enumerate() {
        let object = async {
            let (object, api) = identify(client, &document).await?;
            patch(&api, &object, field_manager, document).await.map(|_| object)
        };
        let object = object.await.with_context(|| {
            tr!("{source} document {n}", source = source.display(), n = index + 1)
        })?;
        crate::progress!("{}", tr!("  applied {object}", object));
        applied.push(object);
    }
    Ok(applied)
}

/// The object a document describes, and its API (discovery says whether
/// the kind is namespaced and what its resource is called).
pub async fn identify(
    client: &kube::Client,
    document: &Value,
) -> Result<(Applied, Api<DynamicObject>)> {
    let field = |f: &str| document[f].as_str().unwrap_or_default().to_string();
    let (api_version, kind) = (field("apiVersion"), field("kind"));
    if api_version.is_empty() || kind.is_empty() {
        return Err(anyhow!(tr!("apiVersion and kind are missing")));
    }
    let name = document["metadata"]["name"]
        .as_str()
        .ok_or_else(|| anyhow!(tr!("{kind} without metadata.name", kind)))?
        .to_string();
    let namespace = document["metadata"]["namespace"].as_str().unwrap_or("default").to_string();
    let object = Applied { api_version, kind, namespace: Some(namespace), name };
    identify_object(client, object).await
}

/// `object` with its namespace dropped when its kind is cluster-scoped, and its API.
pub async fn identify_object(
    client: &kube::Client,
    mut object: Applied,
) -> Result<(Applied, Api<DynamicObject>)> {
    let (group, version) = match object.api_version.split_once('/') {
        Some((group, version)) => (group, version),
        None => ("", object.api_version.as_str()),
    };
    let gvk = GroupVersionKind::gvk(group, version, &object.kind);
    let (resource, capabilities): (ApiResource, _) =
        discovery::pinned_kind(client, &gvk).await.with_context(|| {
            let (api_version, kind) = (&object.api_version, &object.kind);
            tr!("the server does not serve {api_version}/{kind}", api_version, kind)
        })?;
    let api = match (capabilities.scope, &object.namespace) {
        (Scope::Namespaced, Some(namespace)) => {
            Api::namespaced_with(client.clone(), namespace, &resource)
        }
        _ => {
            object.namespace = None;
            Api::all_with(client.clone(), &resource)
        }
    };
    Ok((object, api))
}

/// Server-side apply of `document` (it is `object`) as `field_manager`, forced:
/// it takes over fields another manager set by hand.
pub async fn patch(
    api: &Api<DynamicObject>,
    object: &Applied,
    field_manager: &str,
    document: Value,
) -> Result<DynamicObject> {
    let typed = typed(document)?;
    let params = PatchParams::apply(field_manager).force();
    let patched = api.patch(&object.name, &params, &Patch::Apply(&typed)).await;
    patched.with_context(|| tr!("server-side apply of {object}", object))
}

/// `document` as a Kubernetes object.
pub fn typed(document: Value) -> Result<DynamicObject> {
    serde_json::from_value(document).with_context(|| tr!("not a Kubernetes object"))
}
