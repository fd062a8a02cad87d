//! The room's share of the API server: a PriorityLevelConfiguration of its
//! own and a FlowSchema sending every request of the attendees' namespaces'
//! ServiceAccounts there, each user in a queue of its own (API Priority and
//! Fairness). Otherwise they share `workload-low` with every other
//! ServiceAccount of the cluster: one attendee's list storm would slow the
//! others, the instructor and the cluster's own controllers.

use serde_json::{Value, json};

/// Before `workload-low`'s `service-accounts` (9000) and the cluster's own
/// schemas for ServiceAccounts of kube-system (below 1000 are the system's).
const PRECEDENCE: u32 = 1000;

/// The priority level and the flow schema for room `room`'s `namespaces`.
pub fn objects(room: &str, namespaces: &[String]) -> Vec<Value> {
    // Both objects' name: `lab-kit-room-<room>`, as the policy's.
    let name = super::guard::name(room);
    let subjects: Vec<Value> = namespaces
        .iter()
        .map(|namespace| json!({"kind": "ServiceAccount", "serviceAccount": {"namespace": namespace, "name": "*"}}))
        .collect();
    let queuing = json!({"queues": 64, "handSize": 6, "queueLengthLimit": 50});
    vec![
        json!({"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "PriorityLevelConfiguration",
            "metadata": {"name": name},
            "spec": {"type": "Limited", "limited": {"nominalConcurrencyShares": 20, "lendablePercent": 0,
                "limitResponse": {"type": "Queue", "queuing": queuing}}}}),
        json!({"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema",
            "metadata": {"name": name},
            "spec": {"priorityLevelConfiguration": {"name": name}, "matchingPrecedence": PRECEDENCE,
                "distinguisherMethod": {"type": "ByUser"},
                "rules": [{"subjects": subjects,
                    "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "namespaces": ["*"], "clusterScope": true}],
                    "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}]}]}}),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_attendee_namespace_goes_to_the_rooms_own_level_by_user() {
        let objects = objects("workshop", &["attendee-01".into(), "attendee-02".into()]);
        assert_eq!(objects[0]["metadata"]["name"], "lab-kit-room-workshop");
        let spec = &objects[1]["spec"];
        assert_eq!(spec["priorityLevelConfiguration"]["name"], "lab-kit-room-workshop");
        assert_eq!(spec["distinguisherMethod"]["type"], "ByUser");
        let subjects = spec["rules"][0]["subjects"].as_array().unwrap();
        assert_eq!(subjects[1]["serviceAccount"], json!({"namespace": "attendee-02", "name": "*"}));
    }
}
