//! The controller's runtime privileges: the Deployment's pod against the
//! "restricted" Pod Security Standard.

use anyhow::{Context as _, bail, ensure};
use k8s_openapi::api::{
    apps::v1::Deployment,
    core::v1::{Namespace, Pod},
};
use kube::{
    Api,
    api::{ObjectMeta, Patch, PatchParams},
};
use serde_json::json;

use labkit::lab::Lab;

use labkit::{project, tr};

/// Labels that make the API server enforce (and warn about) "restricted".
const ENFORCE: &str = "pod-security.kubernetes.io/enforce";
const WARN: &str = "pod-security.kubernetes.io/warn";

/// A Pod built from `manifests/deployment.yaml`'s template, created with
/// `dryRun=All` in the lab's Deployment namespace while that namespace enforces
/// "restricted": it must be admitted, and without a warning. The namespace's
/// labels are put back afterwards.
pub async fn deployment_passes_restricted(lab: &Lab) -> anyhow::Result<String> {
    let path = project::root().join("manifests/deployment.yaml");
    let text = labkit::files::read(&path)?;
    let deployment: Deployment = serde_saphyr::from_str(&text)
        .with_context(|| tr!("{path} is not a Deployment", path = path.display()))?;
    let namespace = lab.file().deployment_namespace().to_string();
    let template = deployment.spec.with_context(|| tr!("the Deployment has no spec"))?.template;
    let pod = Pod {
        metadata: ObjectMeta {
            name: Some("my-controller-pod-security-check".into()),
            labels: template.metadata.and_then(|m| m.labels),
            ..ObjectMeta::default()
        },
        spec: template.spec,
        ..Pod::default()
    };

    let namespaces: Api<Namespace> = Api::all(lab.client());
    let before = namespaces.get(&namespace).await?.metadata.labels.unwrap_or_default();
    let strict = json!({"metadata": {"labels": {ENFORCE: "restricted", WARN: "restricted"}}});
    namespaces.patch(&namespace, &PatchParams::default(), &Patch::Merge(&strict)).await?;
    let result = dry_run_create(lab, &namespace, &pod).await;
    let restore = json!({"metadata": {"labels": {
        ENFORCE: before.get(ENFORCE),
        WARN: before.get(WARN),
    }}});
    namespaces.patch(&namespace, &PatchParams::default(), &Patch::Merge(&restore)).await?;
    result?;
    Ok(tr!(
        "Deployment pod admitted under enforce=restricted in {namespace}, no warnings",
        namespace
    ))
}

/// POST the pod with `dryRun=All`; fails on rejection or on a `Warning` header.
async fn dry_run_create(lab: &Lab, namespace: &str, pod: &Pod) -> anyhow::Result<()> {
    let request = http::Request::post(format!("/api/v1/namespaces/{namespace}/pods?dryRun=All"))
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(kube::client::Body::from(serde_json::to_vec(pod)?))?;
    let response = lab.client().send(request).await?;
    let status = response.status();
    let warnings: Vec<String> = response
        .headers()
        .get_all("warning")
        .iter()
        .map(|w| String::from_utf8_lossy(w.as_bytes()).into_owned())
        .collect();
    if !status.is_success() {
        let body = response.into_body().collect_bytes().await.unwrap_or_default();
        let body = String::from_utf8_lossy(&body);
        bail!(tr!("the Deployment's pod is rejected ({status}): {body}", status, body));
    }
    ensure!(
        warnings.is_empty(),
        tr!(
            "the Deployment's pod is admitted with warnings: {warnings}",
            warnings = format!("{warnings:?}")
        )
    );
    Ok(())
}
