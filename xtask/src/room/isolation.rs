//! `room up`'s proof that the room is isolated: SubjectAccessReviews as
//! each attendee, for every verb and resource their Role grants at home, in
//! a neighbour's namespace and in `default` — each must be denied.

use anyhow::{Result, bail};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::rbac::v1::PolicyRule;
use kube::api::{Api, PostParams};
use serde_json::Value;

use super::attendee::{self, ATTENDEE};
use labkit::{accounts::access, tr};

/// Each attendee may do nothing in the next one's namespace, nor in
/// `default` (SubjectAccessReview as the attendee, for every verb and
/// resource its Role grants at home).
pub async fn check(client: &kube::Client, namespaces: &[String]) -> Result<()> {
    let reviews = Api::<SubjectAccessReview>::all(client.clone());
    let triples: Vec<(String, String, String)> =
        attendee::rules().iter().flat_map(expand).collect();
    let mut asked = 0;
    for (i, home) in namespaces.iter().enumerate() {
        let elsewhere = namespaces.get((i + 1) % namespaces.len()).filter(|n| *n != home);
        for other in elsewhere.into_iter().map(String::as_str).chain(["default"]) {
            for (group, resource, verb) in &triples {
                let (plural, sub) = resource.split_once('/').unzip();
                let attributes = access(group, plural.unwrap_or(resource), verb, Some(other));
                let subresource = sub.map(String::from);
                let review = SubjectAccessReview {
                    spec: SubjectAccessReviewSpec {
                        user: Some(format!("system:serviceaccount:{home}:{ATTENDEE}")),
                        groups: Some(vec![
                            "system:serviceaccounts".into(),
                            format!("system:serviceaccounts:{home}"),
                            "system:authenticated".into(),
                        ]),
                        resource_attributes: Some(ResourceAttributes { subresource, ..attributes }),
                        ..Default::default()
                    },
                    ..Default::default()
                };
                let answer = reviews.create(&PostParams::default(), &review).await?;
                asked += 1;
                if answer.status.is_some_and(|s| s.allowed) {
                    bail!(tr!(
                        "{home}'s attendee may {verb} {resource} in {other}: the room is not isolated (a ClusterRoleBinding grants it?)",
                        home,
                        verb,
                        resource,
                        other
                    ));
                }
            }
        }
    }
    labkit::progress!(tr!(
        "isolation: {asked} SubjectAccessReviews, each attendee denied everything in a neighbour's namespace and in default",
        asked
    ));
    Ok(())
}

/// A Role rule as (group, resource, verb) triples.
fn expand(rule: &Value) -> Vec<(String, String, String)> {
    let rule: PolicyRule = serde_json::from_value(rule.clone()).unwrap_or_default();
    let (groups, resources) =
        (rule.api_groups.unwrap_or_default(), rule.resources.unwrap_or_default());
    let pairs = groups.iter().flat_map(|g| resources.iter().map(move |r| (g, r)));
    pairs.flat_map(|(g, r)| rule.verbs.iter().map(|v| (g.clone(), r.clone(), v.clone()))).collect()
}
