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
//!
//! and to everyone (the kubelet asks for a pod's tokens as its node):
//! - a token lasting longer than the room's tokens (CEL has no clock: the
//!   bound is on each token's length, not on when it ends), or exactly 3607 s,
//!   which the API server makes last a year when it is bound to a pod
//!   (`--service-account-extend-token-expiration`); so a pod's projected
//!   tokens are bounded the same way, and an automounted one (3607 s) is
//!   refused: the lab's Deployment projects its own (`manifests/deployment.yaml`);
//! - a pod running as the attendee (its projected token would be renewed by
//!   the kubelet for as long as the pod lives), and a Secret of type
//!   `kubernetes.io/service-account-token` (the API server fills it with a
//!   token that never expires; the attendee may create Secrets for the bench);
//!
//! and, to the namespace's own ServiceAccounts again:
//! - a ConfigMap or Secret holding more than [`DATA_BYTES`], an Event whose
//!   message is longer than [`MESSAGE_BYTES`], any object here with more than
//!   [`ANNOTATION_BYTES`] of annotations or [`LABELS`] labels: with the
//!   quota's counts, what one attendee can store is bounded (docs/existing-cluster.md).

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
/// The sizes an object may have in a room's namespace (see the module's text).
pub const DATA_BYTES: u64 = 16 * 1024;
pub const MESSAGE_BYTES: u64 = 1024;
pub const ANNOTATION_BYTES: u64 = 4 * 1024;
pub const LABELS: u64 = 32;
/// A pod-bound token of exactly this length is made to last a year.
const EXTENDED: i64 = 3607;
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
    let checks = rbac_checks().into_iter().chain(token_checks(seconds)).chain(size_checks());
    let validations: Vec<Value> = checks
        .map(|(expression, message)| json!({"expression": expression, "message": format!("room {room}: {message}"), "reason": "Forbidden"}))
        .collect();
    vec![
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "namespaceSelector": {"matchLabels": {ROOM_LABEL: room}},
                "resourceRules": [
                    rule("rbac.authorization.k8s.io", &["roles", "rolebindings"], &["CREATE", "UPDATE"]),
                    rule("", &["serviceaccounts/token"], &["CREATE"]),
                    rule("", &["pods"], &["CREATE", "UPDATE"]),
                    rule("", &["configmaps", "secrets", "events", "serviceaccounts"], &["CREATE", "UPDATE"]),
                    rule("events.k8s.io", &["events"], &["CREATE", "UPDATE"]),
                    rule("apps", &["deployments"], &["CREATE", "UPDATE"]),
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

/// A check on requests of `kind` by the namespace's own ServiceAccounts.
fn by_attendee(kind: &str, rest: &str) -> String {
    format!("request.kind.kind != '{kind}' || !variables.attendee || {rest}")
}

/// What an attendee may bind and grant.
fn rbac_checks() -> [(String, String); 3] {
    [
        (
            by_attendee(
                "RoleBinding",
                "!has(object.subjects) || object.subjects.all(s, s.kind == 'ServiceAccount' && has(s.namespace) && s.namespace == request.namespace)",
            ),
            "a RoleBinding made here may name only ServiceAccounts of this namespace".into(),
        ),
        (
            by_attendee(
                "RoleBinding",
                &format!("object.roleRef.kind == 'Role' && object.roleRef.name != '{ATTENDEE}'"),
            ),
            format!(
                "a RoleBinding made here may bind only a Role of this namespace, and not {ATTENDEE}"
            ),
        ),
        (
            by_attendee(
                "Role",
                "!has(object.rules) || object.rules.all(r, !has(r.resources) || r.resources.all(x, x != '*' && !x.endsWith('/token') && !(x in ['roles', 'rolebindings', 'pods', 'deployments'])))",
            ),
            "a Role made here may not grant tokens, roles, rolebindings, pods or deployments"
                .into(),
        ),
    ]
}

/// The tokens anyone makes here, a pod's among them: at most `seconds` long, never 3607 s.
fn token_checks(seconds: i64) -> [(String, String); 4] {
    let short = |field: &str| format!("({field} <= {seconds} && {field} != {EXTENDED})");
    [
        (
            format!(
                "request.kind.kind != 'TokenRequest' || !has(object.spec.expirationSeconds) || {}",
                short("object.spec.expirationSeconds")
            ),
            format!(
                "a token made here may last at most {seconds} s (as the room's own), and not {EXTENDED} s"
            ),
        ),
        (
            format!(
                "request.kind.kind != 'Pod' || !has(object.spec.volumes) || object.spec.volumes.all(v, !has(v.projected) || !has(v.projected.sources) || v.projected.sources.all(s, !has(s.serviceAccountToken) || !has(s.serviceAccountToken.expirationSeconds) || {}))",
                short("s.serviceAccountToken.expirationSeconds")
            ),
            format!(
                "a pod here may mount ServiceAccount tokens of at most {seconds} s and not {EXTENDED} s (an automounted one): set automountServiceAccountToken: false and project one, as manifests/deployment.yaml does"
            ),
        ),
        (
            format!(
                "request.kind.kind != 'Pod' || !has(object.spec.serviceAccountName) || object.spec.serviceAccountName != '{ATTENDEE}'"
            ),
            format!("no pod runs as ServiceAccount {ATTENDEE}"),
        ),
        (
            format!(
                "request.kind.kind != 'Secret' || !has(object.type) || object.type != '{LEGACY_TOKEN}'"
            ),
            format!(
                "no Secret of type {LEGACY_TOKEN} (the API server fills it with a token that never expires)"
            ),
        ),
    ]
}

/// The sizes of what the namespace's own ServiceAccounts store.
fn size_checks() -> [(String, String); 4] {
    // The bytes of a map field's keys and values (`value` of key `k`), 0 when it is absent.
    let bytes = |field: &str, value: &str| {
        format!(
            "(has(object.{field}) ? object.{field}.map(k, size(bytes(k)) + size({value})).sum() : 0)"
        )
    };
    [
        (
            format!(
                "!variables.attendee || !(request.kind.kind in ['ConfigMap', 'Secret']) || {} + {} <= {DATA_BYTES}",
                bytes("data", "bytes(object.data[k])"),
                bytes("binaryData", "object.binaryData[k]")
            ),
            format!("a ConfigMap or Secret here holds at most {DATA_BYTES} bytes of data"),
        ),
        (
            format!(
                "!variables.attendee || request.kind.kind != 'Event' || !has(object.message) || size(bytes(object.message)) <= {MESSAGE_BYTES}"
            ),
            format!("an Event's message here is at most {MESSAGE_BYTES} bytes"),
        ),
        (
            format!(
                "!variables.attendee || !has(object.metadata.annotations) || {} <= {ANNOTATION_BYTES}",
                "object.metadata.annotations.map(k, size(bytes(k)) + size(bytes(object.metadata.annotations[k]))).sum()"
            ),
            format!("an object here has at most {ANNOTATION_BYTES} bytes of annotations"),
        ),
        (
            format!(
                "!variables.attendee || !has(object.metadata.labels) || size(object.metadata.labels) <= {LABELS}"
            ),
            format!("an object here has at most {LABELS} labels"),
        ),
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
        assert_eq!(expressions.len(), 11, "{expressions:#?}");
        let legacy = "object.type != 'kubernetes.io/service-account-token'";
        assert!(expressions.iter().any(|e| e.contains(legacy)), "{expressions:#?}");
        let short =
            "(object.spec.expirationSeconds <= 7200 && object.spec.expirationSeconds != 3607)";
        assert!(expressions.iter().any(|e| e.ends_with(short)), "{expressions:#?}");
        assert!(
            validations
                .iter()
                .all(|v| v["message"].as_str().unwrap().starts_with("room workshop: "))
        );
    }
}
