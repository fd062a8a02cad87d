//! Stage 2 preview: the desired state as an object in the cluster.
//!
//! A `ConfigMapTemplate` names a ConfigMap of its namespace and the data it
//! must hold; `controller/examples/stage2_crd.rs` keeps each one's ConfigMap
//! with kube-runtime's `Controller`. The CRD is generated from this type
//! ([`crd_yaml`]) and checked in as `manifests/stage2/crd.yaml`; a test fails
//! when the two differ (regenerate with
//! `cargo run -p controller --example stage2_crd -- crd > manifests/stage2/crd.yaml`).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, CustomResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The condition the controller sets: the ConfigMap holds the data.
pub const READY: &str = "Ready";

/// The ConfigMap a template keeps: its name, in the template's namespace,
/// and its whole data (keys not listed here are removed).
#[derive(CustomResource, Clone, Debug, Deserialize, Serialize, PartialEq, JsonSchema)]
#[kube(
    group = "lab.my-controller.dev",
    version = "v1alpha1",
    kind = "ConfigMapTemplate",
    namespaced,
    status = "ConfigMapTemplateStatus",
    shortname = "cmt",
    printcolumn = r#"{"name":"ConfigMap","type":"string","jsonPath":".spec.configMapName"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ConfigMapTemplateSpec {
    /// Name of the ConfigMap, in the template's namespace.
    pub config_map_name: String,
    /// The data the ConfigMap must hold.
    pub data: BTreeMap<String, String>,
}

/// What the controller last saw, for `kubectl get cmt` and `kubectl wait`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigMapTemplateStatus {
    /// The template generation the conditions describe.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default)]
    pub conditions: Vec<Condition>,
}

/// The CRD as YAML, the text `manifests/stage2/crd.yaml` holds.
pub fn crd_yaml() -> String {
    let crd = ConfigMapTemplate::crd();
    let yaml = serde_saphyr::to_string(&crd).expect("a CRD serializes");
    format!("# Generated from controller/src/template.rs: do not edit (see its header).\n{yaml}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_checked_in_crd_is_the_generated_one() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../manifests/stage2/crd.yaml");
        let checked_in = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            checked_in == crd_yaml(),
            "manifests/stage2/crd.yaml is not what controller/src/template.rs generates: \
             cargo run -p controller --example stage2_crd -- crd > manifests/stage2/crd.yaml"
        );
    }

    #[test]
    fn the_crd_names_what_kubectl_shows() {
        let crd = ConfigMapTemplate::crd();
        assert_eq!(crd.metadata.name.as_deref(), Some("configmaptemplates.lab.my-controller.dev"));
        assert_eq!(crd.spec.group, "lab.my-controller.dev");
        assert_eq!(crd.spec.names.short_names, Some(vec!["cmt".to_string()]));
        let version = &crd.spec.versions[0];
        assert!(version.subresources.as_ref().and_then(|s| s.status.as_ref()).is_some());
        let schema = serde_json::to_value(&version.schema).unwrap();
        let spec = &schema["openAPIV3Schema"]["properties"]["spec"];
        assert_eq!(spec["required"], serde_json::json!(["configMapName", "data"]), "{spec}");
    }
}
