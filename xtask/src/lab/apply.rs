//! `kubectl apply --server-side`, done with kube-rs: the kubectl on these machines is older
//! than the lab's API server, and a client of our own has no version skew to worry about.

use std::path::Path;

use anyhow::{Context, Result, anyhow};
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::discovery::{self, Scope};
use serde_json::{Value, json};

use e2e::lab_file::Target;
use e2e::project;

/// The field manager the lab's objects are owned by (`kubectl get -o yaml --show-managed-fields`).
pub const FIELD_MANAGER: &str = "xtask-lab";

/// The documents of a multi-document YAML file (empty ones left out).
pub fn read_documents(path: &Path) -> Result<Vec<Value>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let documents: Vec<Value> = serde_saphyr::from_multiple(&text)
        .with_context(|| format!("{} is not YAML", path.display()))?;
    // `---` followed by nothing (or only comments) is an empty document, not an object.
    Ok(documents.into_iter().filter(|d| !d.is_null()).collect())
}

/// `manifests/rbac.yaml` for the controller's target: the Role and its
/// binding in the target's namespace, the Role's `resourceNames` the
/// target's name, and that namespace itself when it is not `default`. The
/// ServiceAccount stays where it is.
pub fn rbac_for(target: &Target) -> Result<Vec<Value>> {
    let mut documents = read_documents(&project::manifests_dir().join("rbac.yaml"))?;
    for document in &mut documents {
        let kind = document["kind"].as_str().unwrap_or_default().to_string();
        if kind == "Role" || kind == "RoleBinding" {
            document["metadata"]["namespace"] = json!(target.namespace);
        }
        if kind == "Role" {
            for rule in document["rules"].as_array_mut().into_iter().flatten() {
                if rule.get("resourceNames").is_some() {
                    rule["resourceNames"] = json!([target.name]);
                }
            }
        }
    }
    if target.namespace != "default" {
        documents.insert(
            0,
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": target.namespace}}),
        );
    }
    Ok(documents)
}

/// `manifests/deployment.yaml` for the controller's target: its container
/// gets the target through its environment (the arguments are the tests').
pub fn deployment_for(target: &Target) -> Result<Vec<Value>> {
    let mut documents = read_documents(&project::manifests_dir().join("deployment.yaml"))?;
    if target.is_default() {
        return Ok(documents);
    }
    for document in &mut documents {
        for container in
            document["spec"]["template"]["spec"]["containers"].as_array_mut().into_iter().flatten()
        {
            let env = container["env"].as_array_mut();
            let extra = [
                json!({"name": "MY_CONTROLLER_NAMESPACE", "value": target.namespace}),
                json!({"name": "MY_CONTROLLER_NAME", "value": target.name}),
            ];
            match env {
                Some(env) => env.extend(extra),
                None => container["env"] = json!(extra),
            }
        }
    }
    Ok(documents)
}

/// Server-side apply `documents` (read from `source`, for messages).
pub async fn apply_documents(
    client: &kube::Client,
    source: &Path,
    documents: Vec<Value>,
) -> Result<Vec<String>> {
    let path = source;
    let mut applied = Vec::new();
    for (index, document) in documents.into_iter().enumerate() {
        let described = apply_one(client, document)
            .await
            .with_context(|| format!("{} document {}", path.display(), index + 1))?;
        eprintln!("  applied {described}");
        applied.push(described);
    }
    Ok(applied)
}

async fn apply_one(client: &kube::Client, document: Value) -> Result<String> {
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
    // force: the lab owns these objects; take over fields another manager set by hand.
    let params = PatchParams::apply(FIELD_MANAGER).force();
    api.patch(&name, &params, &Patch::Apply(&object))
        .await
        .with_context(|| format!("server-side apply of {described}"))?;
    Ok(described)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_role_is_made_for_the_target() {
        let target = Target::parse("lab-target/other-config").unwrap();
        let documents = rbac_for(&target).unwrap();
        assert_eq!(documents[0]["kind"], "Namespace");
        assert_eq!(documents[0]["metadata"]["name"], "lab-target");
        let role = documents.iter().find(|d| d["kind"] == "Role").unwrap();
        assert_eq!(role["metadata"]["namespace"], "lab-target");
        let named: Vec<&Value> = role["rules"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r.get("resourceNames").is_some())
            .collect();
        assert_eq!(named.len(), 1);
        assert_eq!(named[0]["resourceNames"], json!(["other-config"]));
        let binding = documents.iter().find(|d| d["kind"] == "RoleBinding").unwrap();
        assert_eq!(binding["metadata"]["namespace"], "lab-target");
        assert_eq!(binding["subjects"][0]["namespace"], "default", "the ServiceAccount stays");
        // The default target is the file as it is.
        let plain = rbac_for(&Target::default()).unwrap();
        assert_eq!(plain, read_documents(&project::manifests_dir().join("rbac.yaml")).unwrap());
    }

    #[test]
    fn the_deployment_gets_the_target_in_its_environment() {
        let target = Target::parse("lab-target/other-config").unwrap();
        let deployment = &deployment_for(&target).unwrap()[0];
        let env = &deployment["spec"]["template"]["spec"]["containers"][0]["env"];
        let value = |name: &str| {
            env.as_array().unwrap().iter().find(|e| e["name"] == name).map(|e| e["value"].clone())
        };
        assert_eq!(value("MY_CONTROLLER_NAMESPACE"), Some(json!("lab-target")));
        assert_eq!(value("MY_CONTROLLER_NAME"), Some(json!("other-config")));
        assert!(value("POD_NAME").is_none() || value("POD_NAME") == Some(Value::Null));
    }
}
