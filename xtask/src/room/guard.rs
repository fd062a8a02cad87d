//! What RBAC cannot say about a room, said by admission: one
//! ValidatingAdmissionPolicy and its binding per room, cluster-scoped,
//! named after the room, matching the namespaces labelled with it.
//!
//! RBAC lets a subject bind any Role it holds to anyone, and mint tokens of
//! any lifetime the API server allows. The policy refuses, in a room's
//! namespaces, to the namespace's own ServiceAccounts (the attendee, and
//! any pod or token they make — the instructor is not one of them):
//! - a RoleBinding naming anyone but a ServiceAccount of the namespace, or
//!   binding a ClusterRole or the attendee's own Role (which mints tokens);
//! - a Role granting tokens, RBAC, pods or Deployments, so that nothing an
//!   attendee binds can renew a token or make what renews one;
//! - a token lasting longer than the room's tokens (CEL has no clock: the
//!   bound is on each token's length, not on when it ends);
//!
//! and to everyone, a pod running as the attendee (its projected token would
//! be renewed by the kubelet for as long as the pod lives), and a Secret of
//! type `kubernetes.io/service-account-token` (the API server fills it with
//! a token that never expires; the attendee may create Secrets for the bench).

use std::time::Duration;

use anyhow::Result;
use k8s_openapi::api::rbac::v1::RoleBinding;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

use super::attendee::{ATTENDEE, ROOM_LABEL};
use labkit::eventually::{Check, eventually};
use labkit::tr;

/// The Secret type the API server fills with a ServiceAccount's token.
const LEGACY_TOKEN: &str = "kubernetes.io/service-account-token";
/// How long the API server may take to enforce a new policy.
const ENFORCED_WITHIN: Duration = Duration::from_secs(60);

/// The policy's and its binding's name: `lab-kit-room-<room>`.
pub fn name(room: &str) -> String {
    format!("lab-kit-room-{room}")
}

/// The policy and its binding, for room `room` whose tokens last `seconds`.
pub fn objects(room: &str, seconds: i64) -> Vec<Value> {
    let name = name(room);
    let rule = |group: &str, resources: &[&str], operations: &[&str]| json!({"apiGroups": [group], "apiVersions": ["*"], "resources": resources, "operations": operations});
    let check = |expression: String, message: String| json!({"expression": expression, "message": format!("room {room}: {message}"), "reason": "Forbidden"});
    let by_attendee = |kind: &str, rest: &str| {
        format!("request.kind.kind != '{kind}' || !variables.attendee || {rest}")
    };
    let validations = [
        check(
            by_attendee(
                "RoleBinding",
                "!has(object.subjects) || object.subjects.all(s, s.kind == 'ServiceAccount' && has(s.namespace) && s.namespace == request.namespace)",
            ),
            "a RoleBinding made here may name only ServiceAccounts of this namespace".into(),
        ),
        check(
            by_attendee(
                "RoleBinding",
                &format!("object.roleRef.kind == 'Role' && object.roleRef.name != '{ATTENDEE}'"),
            ),
            format!(
                "a RoleBinding made here may bind only a Role of this namespace, and not {ATTENDEE}"
            ),
        ),
        check(
            by_attendee(
                "Role",
                "!has(object.rules) || object.rules.all(r, !has(r.resources) || r.resources.all(x, x != '*' && !x.endsWith('/token') && !(x in ['roles', 'rolebindings', 'pods', 'deployments'])))",
            ),
            "a Role made here may not grant tokens, roles, rolebindings, pods or deployments"
                .into(),
        ),
        check(
            by_attendee(
                "TokenRequest",
                &format!(
                    "!has(object.spec.expirationSeconds) || object.spec.expirationSeconds <= {seconds}"
                ),
            ),
            format!("a token made here may last at most {seconds} s, as the room's own"),
        ),
        check(
            format!(
                "request.kind.kind != 'Pod' || !has(object.spec.serviceAccountName) || object.spec.serviceAccountName != '{ATTENDEE}'"
            ),
            format!("no pod runs as ServiceAccount {ATTENDEE}"),
        ),
        check(
            format!(
                "request.kind.kind != 'Secret' || !has(object.type) || object.type != '{LEGACY_TOKEN}'"
            ),
            format!(
                "no Secret of type {LEGACY_TOKEN} (the API server fills it with a token that never expires)"
            ),
        ),
    ];
    vec![
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "namespaceSelector": {"matchLabels": {ROOM_LABEL: room}},
                "resourceRules": [
                    rule("rbac.authorization.k8s.io", &["roles", "rolebindings"], &["CREATE", "UPDATE"]),
                    rule("", &["serviceaccounts/token", "pods", "secrets"], &["CREATE"]),
                ],
            },
            "variables": [{"name": "attendee",
                "expression": "request.userInfo.username.startsWith('system:serviceaccount:' + request.namespace + ':')"}],
            "validations": validations,
        }}),
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": name},
            "spec": {"policyName": name, "validationActions": ["Deny"]}}),
    ]
}

/// Until the API server enforces the policy: a dry-run RoleBinding of the
/// attendee's Role to every anonymous caller, made as the attendee
/// (`attendee`, a client with their token), is refused by it.
pub async fn enforced(attendee: &kube::Client, namespace: &str, room: &str) -> Result<()> {
    let name = name(room);
    labkit::progress!(
        "$ kubectl --kubeconfig {namespace}.kubeconfig create rolebinding room-guard-probe --role={ATTENDEE} \
         --group=system:unauthenticated --dry-run=server    # done with kube-rs, until the policy refuses it"
    );
    let bindings: Api<RoleBinding> = Api::namespaced(attendee.clone(), namespace);
    let probe: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "room-guard-probe"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": ATTENDEE},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:unauthenticated"}],
    }))?;
    let params = PostParams { dry_run: true, ..Default::default() };
    eventually(&tr!("policy {name} to be enforced", name), ENFORCED_WITHIN, || async {
        Ok(match bindings.create(&params, &probe).await {
            Ok(_) => Check::NotYet(tr!("the binding is still admitted")),
            Err(kube::Error::Api(s)) if s.message.contains(&name) => Check::Done(()),
            Err(kube::Error::Api(s)) => {
                Check::NotYet(tr!("refused, not by {name}: {message}", name, message = s.message))
            }
            Err(e) => return Err(e.into()),
        })
    })
    .await?;
    labkit::progress!(tr!(
        "policy {name} is enforced: the attendee's binding to anonymous callers is refused",
        name
    ));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_policy_and_its_binding_named_after_the_room() {
        let objects = objects("workshop", 7200);
        assert_eq!(objects[0]["metadata"]["name"], "lab-kit-room-workshop");
        assert_eq!(objects[1]["spec"]["policyName"], "lab-kit-room-workshop");
        assert_eq!(objects[1]["spec"]["validationActions"], json!(["Deny"]));
        let spec = &objects[0]["spec"];
        assert_eq!(
            spec["matchConstraints"]["namespaceSelector"]["matchLabels"][ROOM_LABEL],
            "workshop"
        );
        let validations = spec["validations"].as_array().unwrap();
        let expressions: Vec<&str> =
            validations.iter().map(|v| v["expression"].as_str().unwrap()).collect();
        assert_eq!(expressions.len(), 6, "{expressions:#?}");
        let legacy = "object.type != 'kubernetes.io/service-account-token'";
        assert!(expressions.iter().any(|e| e.contains(legacy)), "{expressions:#?}");
        assert!(validations.iter().any(|v| {
            v["expression"].as_str().unwrap().ends_with("object.spec.expirationSeconds <= 7200")
        }));
        assert!(
            validations
                .iter()
                .all(|v| v["message"].as_str().unwrap().starts_with("room workshop: "))
        );
    }
}
