//! `kubectl apply --server-side`, done with kube-rs: the kubectl on these
//! machines is older than the lab's API server, and a client of our own has
//! no version skew to worry about. xtask applies the lab's manifests with it,
//! the stage-2 test its CRD and RBAC.

use std::path::Path;

use anyhow::{Context, Result, anyhow};
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::discovery::{self, Scope};
use serde_json::Value;

/// The documents of a multi-document YAML file (empty ones left out).
pub fn read_documents(path: &Path) -> Result<Vec<Value>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let documents: Vec<Value> = serde_saphyr::from_multiple(&text)
        .with_context(|| format!("{} is not YAML", path.display()))?;
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
) -> Result<Vec<String>> {
    let path = source;
    let mut applied = Vec::new();
    for (index, document) in documents.into_iter().enumerate() {
        let described = apply_one(client, field_manager, document)
            .await
            .with_context(|| format!("{} document {}", path.display(), index + 1))?;
        eprintln!("  applied {described}");
        applied.push(described);
    }
    Ok(applied)
}

async fn apply_one(client: &kube::Client, field_manager: &str, document: Value) -> Result<String> {
    let object: DynamicObject =
        serde_json::from_value(document).context("not a Kubernetes object")?;
    let types = object.types.as_ref().ok_or_else(|| anyhow!("apiVersion and kind are missing"))?;
    let gvk = GroupVersionKind::try_from(types).context("bad apiVersion")?;
    let name = object
        .metadata
        .name
        .clone()
        .ok_or_else(|| anyhow!("{} without metadata.name", gvk.kind))?;
    // Discovery says whether the kind is namespaced and what its resource is called.
    let (resource, capabilities) = discovery::pinned_kind(client, &gvk)
        .await
        .with_context(|| format!("the server does not serve {}/{}", types.api_version, gvk.kind))?;
    let (api, described): (Api<DynamicObject>, String) = match capabilities.scope {
        Scope::Namespaced => {
            let namespace = object.metadata.namespace.as_deref().unwrap_or("default");
            (
                Api::namespaced_with(client.clone(), namespace, &resource),
                format!("{} {namespace}/{name}", gvk.kind),
            )
        }
        Scope::Cluster => {
            (Api::all_with(client.clone(), &resource), format!("{} {name}", gvk.kind))
        }
    };
    // force: take over fields another manager set by hand.
    let params = PatchParams::apply(field_manager).force();
    api.patch(&name, &params, &Patch::Apply(&object))
        .await
        .with_context(|| format!("server-side apply of {described}"))?;
    Ok(described)
}
