//! What each attendee's namespace holds besides the namespace itself: the
//! attendee's ServiceAccount, Role and RoleBinding, a ResourceQuota and a
//! LimitRange (one attendee cannot fill the cluster for all), and a
//! NetworkPolicy (no other namespace's pod reaches theirs, theirs reach
//! nothing but their own, DNS and the API server).

use serde_json::{Value, json};

use super::policy_sources::Sources;

/// The attendee's ServiceAccount, Role and RoleBinding, in each namespace.
pub const ATTENDEE: &str = "attendee";
/// The lab's controller ServiceAccount (`manifests/rbac.yaml`): the only one
/// an attendee may mint tokens for (the bench and the e2e suite act as it).
pub const LAB_ACCOUNT: &str = "my-controller";
/// Labels what the room made in a namespace, for `kubectl get -l`.
pub const ROOM_LABEL: &str = "lab-kit.dev/room";
/// The ResourceQuota, LimitRange and NetworkPolicy, in each namespace.
pub const LIMITS: &str = "room-limits";

/// What one attendee's namespace may hold at most. Sized to the kit's own
/// use with room to spare: the lab (one Deployment, its pod, a ReplicaSet per
/// rollout, kept 10 deep), the e2e suite (a few ConfigMaps, a second
/// controller run here), `cargo maint bench` (a ConfigMap per side, its
/// unrelated ConfigMaps sized to what is left: bench/src/load.rs) — but not
/// 10 000 ConfigMaps in etcd.
pub const QUOTA: &[(&str, &str)] = &[
    ("count/configmaps", "100"),
    ("count/secrets", "20"),
    ("count/serviceaccounts", "10"),
    ("count/roles.rbac.authorization.k8s.io", "10"),
    ("count/rolebindings.rbac.authorization.k8s.io", "10"),
    ("count/deployments.apps", "5"),
    ("count/replicasets.apps", "30"),
    ("pods", "10"),
    ("requests.cpu", "1"),
    ("requests.memory", "1Gi"),
    ("limits.cpu", "2"),
    ("limits.memory", "2Gi"),
];

/// The rules of the attendee's Role: what the course's controller needs, and
/// what `lab up`, the e2e suite, `lab down` and the bench do there. Tokens
/// only for the lab's ServiceAccount (never the attendee's own: it would
/// renew itself); the room's quota, limits and policy readable, not writable.
pub fn rules() -> Vec<Value> {
    let all = ["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"];
    let read = ["get", "list", "watch"];
    let rule = |group: &str, resources: &[&str], verbs: &[&str]| json!({"apiGroups": [group], "resources": resources, "verbs": verbs});
    vec![
        rule("", &["configmaps", "serviceaccounts", "pods", "events"], &all),
        json!({"apiGroups": [""], "resources": ["serviceaccounts/token"], "verbs": ["create"], "resourceNames": [LAB_ACCOUNT]}),
        rule("", &["pods/eviction"], &["create"]),
        rule("", &["pods/log", "pods/proxy"], &["get"]),
        // The bench binds its token to a Secret it makes and deletes.
        rule("", &["secrets"], &["get", "create", "delete"]),
        rule("", &["resourcequotas", "limitranges"], &read),
        rule("networking.k8s.io", &["networkpolicies"], &read),
        rule("events.k8s.io", &["events"], &all),
        rule("apps", &["deployments", "deployments/scale"], &all),
        rule("apps", &["replicasets"], &read),
        rule("rbac.authorization.k8s.io", &["roles", "rolebindings"], &all),
        rule("authorization.k8s.io", &["localsubjectaccessreviews"], &["create"]),
    ]
}

/// Every object the room makes in `namespace` (after the namespace), in
/// order. `sources`: the addresses outside the pod network the attendee's
/// pods talk with ([`super::policy_sources`]).
pub fn objects(namespace: &str, sources: &Sources) -> Vec<Value> {
    let meta = |name: &str| json!({"name": name, "namespace": namespace, "labels": {ROOM_LABEL: ATTENDEE}});
    vec![
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta(ATTENDEE)}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta(ATTENDEE), "rules": rules()}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": meta(ATTENDEE),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": ATTENDEE},
            "subjects": [{"kind": "ServiceAccount", "name": ATTENDEE, "namespace": namespace}]}),
        json!({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": meta(LIMITS),
            "spec": {"hard": QUOTA.iter().map(|(k, v)| (k.to_string(), json!(v))).collect::<serde_json::Map<_, _>>()}}),
        // A container that says nothing gets these (the quota then admits it); none may ask
        // for more than `max`.
        json!({"apiVersion": "v1", "kind": "LimitRange", "metadata": meta(LIMITS), "spec": {"limits": [{
            "type": "Container", "defaultRequest": {"cpu": "10m", "memory": "32Mi"},
            "default": {"cpu": "200m", "memory": "128Mi"}, "max": {"cpu": "1", "memory": "512Mi"}}]}}),
        network_policy(meta(LIMITS), sources),
    ]
}

/// Every pod of the namespace takes connections from the namespace's own
/// pods, and on its `http` port (the controller's health and metrics) from
/// the nodes (the kubelet's probes; the API server's pod proxy, which the e2e
/// suite reads /metrics through); and it connects to the namespace's own
/// pods, the cluster's DNS and the API server, nothing else: not another
/// namespace, not a node's kubelet, not the cloud's metadata address.
fn network_policy(metadata: Value, sources: &Sources) -> Value {
    let block = |cidrs: &[String]| {
        cidrs.iter().map(|ip| json!({"ipBlock": {"cidr": ip}})).collect::<Vec<_>>()
    };
    let own = json!({"podSelector": {}});
    let dns = json!({"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
        "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}}});
    let api_ports: Vec<Value> =
        sources.api_ports.iter().map(|p| json!({"protocol": "TCP", "port": p})).collect();
    let dns_ports = json!([{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]);
    json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": metadata,
        "spec": {"podSelector": {}, "policyTypes": ["Ingress", "Egress"],
            "ingress": [{"from": [own]}, {"from": block(&sources.nodes), "ports": [{"protocol": "TCP", "port": "http"}]}],
            "egress": [{"to": [own]}, {"to": [dns], "ports": dns_ports},
                {"to": block(&sources.api_servers), "ports": api_ports}]}})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_only_for_the_labs_account_and_the_room_objects_read_only() {
        let rules = rules();
        let grants = |resource: &str| -> Vec<&Value> {
            rules
                .iter()
                .filter(|r| r["resources"].as_array().unwrap().iter().any(|x| x == resource))
                .collect()
        };
        let token = grants("serviceaccounts/token");
        assert_eq!(token.len(), 1);
        assert_eq!(token[0]["resourceNames"], json!([LAB_ACCOUNT]));
        for resource in ["resourcequotas", "limitranges", "networkpolicies"] {
            assert_eq!(grants(resource)[0]["verbs"], json!(["get", "list", "watch"]), "{resource}");
        }
    }

    #[test]
    fn the_namespace_gets_a_quota_limits_and_a_policy_open_to_its_own_pods_and_the_sources() {
        let sources = Sources {
            nodes: vec!["172.18.0.2/32".into()],
            api_servers: vec!["172.18.0.2/32".into()],
            api_ports: [6443].into(),
        };
        let objects = objects("attendee-01", &sources);
        let kinds: Vec<&str> = objects.iter().map(|o| o["kind"].as_str().unwrap()).collect();
        assert_eq!(
            kinds,
            [
                "ServiceAccount",
                "Role",
                "RoleBinding",
                "ResourceQuota",
                "LimitRange",
                "NetworkPolicy"
            ]
        );
        assert_eq!(objects[3]["spec"]["hard"]["count/configmaps"], "100");
        assert_eq!(objects[4]["spec"]["limits"][0]["default"]["memory"], "128Mi");
        let spec = &objects[5]["spec"];
        assert_eq!(spec["ingress"][0]["from"][0], json!({"podSelector": {}}));
        assert_eq!(spec["ingress"][1]["from"][0]["ipBlock"]["cidr"], "172.18.0.2/32");
        assert_eq!(spec["ingress"][1]["ports"], json!([{"protocol": "TCP", "port": "http"}]));
        assert_eq!(spec["egress"][2]["ports"], json!([{"protocol": "TCP", "port": 6443}]));
        assert!(objects.iter().all(|o| o["metadata"]["namespace"] == "attendee-01"));
    }
}
