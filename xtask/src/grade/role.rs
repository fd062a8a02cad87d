//! `--role FILE`: a Role of the learner's own instead of the course's, for a
//! program that writes with patch or server-side apply. Only a Role: the
//! grade is of one namespace, and a guest on a cluster makes nothing
//! cluster-wide.

use super::*;

/// The Role in `path` — a YAML file, the course's two documents (Role and
/// RoleBinding) as the course prints them included: the Role is taken, the
/// grade binds it itself.
pub(super) fn read(path: &Path) -> Result<grade::Role> {
    // One line: what is wrong, not the YAML parser's picture of where.
    let first_line = |e: anyhow::Error| {
        let text = format!("{e:#}");
        anyhow::anyhow!("{}", text.lines().next().unwrap_or_default())
    };
    let documents = labkit::apply::read_documents(path).map_err(first_line)?;
    let shown = path.display();
    let mut roles = documents.into_iter().filter(|d| d["kind"] == "Role");
    let (Some(role), None) = (roles.next(), roles.next()) else {
        bail!(tr!("{shown} must hold one Role (kind: Role) for --role", shown));
    };
    let role: k8s_openapi::api::rbac::v1::Role = serde_json::from_value(role)
        .map_err(|e| anyhow::anyhow!(tr!("{shown}: not a Role: {e}", shown, e)))?;
    let rules = role.rules.unwrap_or_default();
    let any = |list: &Option<Vec<String>>, want: &str| {
        list.as_ref().is_some_and(|l| l.iter().any(|v| v == want || v == "*"))
    };
    if rules.iter().any(|r| r.non_resource_urls.as_ref().is_some_and(|u| !u.is_empty())) {
        bail!(tr!("{shown}: a Role cannot hold nonResourceURLs (a ClusterRole's)", shown));
    }
    // Of any ConfigMap: the grade's first get is of one of its own.
    let gets = rules.iter().any(|r| {
        any(&r.api_groups, "")
            && any(&r.resources, "configmaps")
            && r.verbs.iter().any(|v| v == "get" || v == "*")
            && r.resource_names.as_ref().is_none_or(Vec::is_empty)
    });
    if !gets {
        bail!(tr!(
            "{shown}: its Role allows no get of every configmap, which every controller of the \
             course makes (and the grade makes first, to know the program's identity works)",
            shown
        ));
    }
    Ok(grade::Role { file: Some(path.to_path_buf()), rules })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_text(name: &str, text: &str) -> Result<grade::Role> {
        let path = std::env::temp_dir().join(format!("grade-role-{}-{name}", std::process::id()));
        std::fs::write(&path, text).unwrap();
        let role = read(&path);
        std::fs::remove_file(&path).unwrap();
        role
    }

    #[test]
    fn the_course_s_two_documents_give_its_role() {
        let course = "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: my-controller\n  namespace: default\nrules:\n  - apiGroups: [\"\"]\n    resources: [\"configmaps\"]\n    verbs: [\"get\", \"list\", \"watch\", \"create\", \"update\", \"patch\"]\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: my-controller\nsubjects:\n  - kind: ServiceAccount\n    name: my-controller\nroleRef:\n  { kind: Role, name: my-controller, apiGroup: rbac.authorization.k8s.io }\n";
        let role = read_text("course", course).unwrap();
        assert_eq!(role.summary(), "get, list, watch, create, update, patch configmaps");
    }

    #[test]
    fn anything_but_one_role_that_gets_configmaps_is_refused_in_one_line() {
        let binding = "kind: RoleBinding\nmetadata: {name: a}\n";
        let no_get = "kind: Role\nmetadata: {name: a}\nrules:\n- apiGroups: ['']\n  resources: [configmaps]\n  verbs: [list]\n";
        let two = format!("{no_get}---\n{no_get}");
        let get = "  verbs: [get, list]\n";
        let by_name =
            no_get.replace("  verbs: [list]\n", &format!("{get}  resourceNames: [my-config]\n"));
        let urls = no_get.replace(
            "  verbs: [list]\n",
            &format!("{get}- nonResourceURLs: [/healthz]\n  verbs: [get]\n"),
        );
        for (name, text, says) in [
            ("binding", binding, "must hold one Role"),
            ("two", two.as_str(), "must hold one Role"),
            ("no-get", no_get, "allows no get of every configmap"),
            ("by-name", by_name.as_str(), "allows no get of every configmap"),
            ("urls", urls.as_str(), "cannot hold nonResourceURLs"),
            ("not-yaml", "kind: [", "is not YAML"),
        ] {
            let error = format!("{:#}", read_text(name, text).unwrap_err());
            assert!(error.contains(says), "{name}: {error}");
            assert_eq!(error.lines().count(), 1, "{name}: {error}");
        }
    }
}
