//! Least privilege: the Role's exact grants, Pod Security "restricted".

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::{Api, api::PostParams};
use labkit::{accounts::access, tr};

use super::*;

/// Least privilege, two ways: the ServiceAccount may do exactly what the
/// Role grants (SubjectAccessReviews); the Deployment's pod passes the
/// "restricted" Pod Security Standard. That the running pod is non-root,
/// read-only and without capabilities is `pod_ready_non_root_read_only`'s
/// (kind).
pub async fn least_privilege(lab: &mut Lab) -> anyhow::Result<Measured> {
    let rbac = rbac_reviews(lab).await?;
    let pod = super::security::deployment_passes_restricted(lab).await?;
    Ok(Measured::said(format!("{rbac}; {pod}")))
}

/// SubjectAccessReviews for the controller's ServiceAccount: allowed exactly
/// what the Role grants, denied everything around it.
async fn rbac_reviews(lab: &Lab) -> anyhow::Result<String> {
    let checks = expected_answers(lab.desired().namespace(), lab.desired().name());
    let account = lab.controller_service_account();
    let wrong = wrong_answers(lab.client(), account, &checks).await?;
    ensure!(wrong.is_empty(), tr!("RBAC differs from the Role: {wrong}", wrong = wrong.join("; ")));
    let granted = checks.iter().filter(|(_, e)| *e).count();
    Ok(tr!(
        "{reviews} reviews: {granted} allowed as granted, {denied} denied",
        reviews = checks.len(),
        granted,
        denied = checks.len() - granted
    ))
}

/// Asks a SubjectAccessReview for each of `checks` as the ServiceAccount
/// `account` (`namespace/name`); each answered otherwise than expected, said
/// as [`review_of`] says it.
pub(crate) async fn wrong_answers(
    client: kube::Client,
    account: &str,
    checks: &[(ResourceAttributes, bool)],
) -> anyhow::Result<Vec<String>> {
    let user = format!("system:serviceaccount:{}", account.replace('/', ":"));
    let namespace = account.split('/').next().unwrap_or_default();
    let api: Api<SubjectAccessReview> = Api::all(client);
    let answers = futures::stream::iter(checks.iter().map(|(attrs, _)| {
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(user.clone()),
                groups: Some(vec![
                    "system:serviceaccounts".into(),
                    format!("system:serviceaccounts:{namespace}"),
                ]),
                resource_attributes: Some(attrs.clone()),
                ..SubjectAccessReviewSpec::default()
            },
            ..SubjectAccessReview::default()
        };
        let api = api.clone();
        async move { api.create(&PostParams::default(), &review).await }
    }))
    .buffered(8)
    .try_collect::<Vec<_>>()
    .await?;
    let mut wrong = Vec::new();
    for ((attrs, expected), answer) in checks.iter().zip(&answers) {
        let allowed = answer.status.as_ref().is_some_and(|s| s.allowed);
        if allowed != *expected {
            let answer = match allowed {
                true => tr!("allowed, should be denied"),
                false => tr!("denied, should be allowed"),
            };
            wrong.push(format!("{}: {answer}", review_of(attrs)));
        }
    }
    Ok(wrong)
}

/// Every review asked, and whether the Role should allow it: my-config
/// read and updated by name, ConfigMaps and Events created, nothing else.
fn expected_answers(ns: &str, target: &str) -> Vec<(ResourceAttributes, bool)> {
    const ALL_VERBS: &[&str] =
        &["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"];
    let mut checks: Vec<(ResourceAttributes, bool)> = Vec::new();
    let named = |name: &str, verb: &str| ResourceAttributes {
        name: Some(name.into()),
        ..access("", "configmaps", verb, Some(ns))
    };
    for verb in ALL_VERBS {
        // my-config itself: read (a list or watch by its name too), update; and
        // create, which a Role cannot narrow to a name.
        checks.push((
            named(target, verb),
            ["get", "list", "watch", "update", "create"].contains(verb),
        ));
        // Another ConfigMap of the same namespace: nothing but that create.
        checks.push((named("someone-elses-config", verb), *verb == "create"));
        // Unnamed: only create (it names no existing object); no list of the namespace.
        checks.push((access("", "configmaps", verb, Some(ns)), *verb == "create"));
        checks.push((
            access("events.k8s.io", "events", verb, Some(ns)),
            ["create", "patch"].contains(verb),
        ));
        checks.push((access("", "secrets", verb, Some(ns)), false));
        checks.push((access("", "configmaps", verb, Some("kube-system")), false));
        checks.push((access("", "configmaps", verb, None), false)); // all namespaces
        checks.push((access("", "namespaces", verb, None), false));
        checks.push((access("", "nodes", verb, None), false));
        checks.push((access("rbac.authorization.k8s.io", "roles", verb, Some(ns)), false));
    }
    checks
}

/// `update configmaps/my-config in default`: what a review asked.
fn review_of(attrs: &ResourceAttributes) -> String {
    let resource = format!(
        "{}{}{}{}",
        attrs
            .group
            .as_deref()
            .filter(|g| !g.is_empty())
            .map(|g| format!("{g}/"))
            .unwrap_or_default(),
        attrs.resource.as_deref().unwrap_or_default(),
        attrs.subresource.as_deref().map(|s| format!("/{s}")).unwrap_or_default(),
        attrs.name.as_deref().map(|n| format!("/{n}")).unwrap_or_default(),
    );
    let scope = match attrs.namespace.as_deref() {
        Some(namespace) => tr!("in {namespace}", namespace),
        None => tr!("in the cluster"),
    };
    tr!(
        "{verb} {resource} {scope}",
        verb = attrs.verb.as_deref().unwrap_or_default(),
        resource,
        scope
    )
}
