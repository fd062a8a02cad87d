//! The lab's manifests, made for its target; `lab up` applies them with
//! [`labkit::apply`] (kube-rs, not the older kubectl of these machines) as
//! [`FIELD_MANAGER`].

use anyhow::Result;
use serde_json::{Value, json};

use labkit::apply::read_documents;
use labkit::lab_file::Target;
use labkit::project;

/// The field manager the lab's objects are owned by (`kubectl get -o yaml --show-managed-fields`).
pub const FIELD_MANAGER: &str = "xtask-lab";

/// `manifests/rbac.yaml` for the controller's target: the Role and its
/// binding in the target's namespace, the Role's `resourceNames` the
/// target's name, and that namespace itself when it is not `default`. The
/// ServiceAccount stays where it is.
pub fn rbac(target: &Target) -> Result<Vec<Value>> {
    let mut documents = read_documents(&project::root().join("manifests/rbac.yaml"))?;
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
pub fn deployment(target: &Target) -> Result<Vec<Value>> {
    let mut documents = read_documents(&project::root().join("manifests/deployment.yaml"))?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_role_is_made_for_the_target() {
        let target = Target::parse("lab-target/other-config").unwrap();
        let documents = rbac(&target).unwrap();
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
        let plain = rbac(&Target::default()).unwrap();
        assert_eq!(plain, read_documents(&project::root().join("manifests/rbac.yaml")).unwrap());
    }

    #[test]
    fn the_deployment_gets_the_target_in_its_environment() {
        let target = Target::parse("lab-target/other-config").unwrap();
        let deployment = &deployment(&target).unwrap()[0];
        let env = &deployment["spec"]["template"]["spec"]["containers"][0]["env"];
        let value = |name: &str| {
            env.as_array().unwrap().iter().find(|e| e["name"] == name).map(|e| e["value"].clone())
        };
        assert_eq!(value("MY_CONTROLLER_NAMESPACE"), Some(json!("lab-target")));
        assert_eq!(value("MY_CONTROLLER_NAME"), Some(json!("other-config")));
        assert!(value("POD_NAME").is_none() || value("POD_NAME") == Some(Value::Null));
    }
}
