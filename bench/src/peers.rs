//! The course's own controller in Go (client-go informer, typed work queue,
//! the kick, 30 s resync), the peer of `cargo xtask bench --peer go`: the
//! course's program as it prints it (`e2e/peers/course-verbatim/`) with the
//! two changes of `e2e/peers/course-go.patch`, built by [`e2e::go_build`].
//!
//! Peers run as the lab's controller ServiceAccount, like my-controller. The
//! course's informer lists and watches every ConfigMap of the namespace,
//! which the kit's Role does not grant (it names my-config), so for the run
//! the bench binds the course's own Role to that ServiceAccount
//! ([`CourseRole`]) and deletes it again afterwards.

use anyhow::{Context, Result};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::{
    Api,
    api::{DeleteParams, Patch, PatchParams},
};
use serde_json::json;

use super::subject::Spec;
use e2e::lab::Lab;
use labkit::project;

/// The name of the Role and RoleBinding [`CourseRole`] makes.
pub const COURSE_ROLE: &str = "bench-peer-course-rbac";

/// The course's RBAC (configmaps: get, list, watch, create, update), bound
/// to the lab's controller ServiceAccount while it exists.
pub struct CourseRole {
    roles: Api<Role>,
    bindings: Api<RoleBinding>,
}

impl CourseRole {
    pub async fn grant(lab: &Lab) -> Result<CourseRole> {
        let (namespace, account) = lab
            .controller_service_account()
            .split_once('/')
            .context("the lab's ServiceAccount is namespace/name")?;
        let target = lab.desired().namespace();
        let roles: Api<Role> = Api::namespaced(lab.client(), target);
        let bindings: Api<RoleBinding> = Api::namespaced(lab.client(), target);
        let apply = PatchParams::apply("bench").force();
        let role = json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": COURSE_ROLE},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"],
                       "verbs": ["get", "list", "watch", "create", "update"]}],
        });
        let binding = json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": COURSE_ROLE},
            "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}],
            "roleRef": {"kind": "Role", "name": COURSE_ROLE, "apiGroup": "rbac.authorization.k8s.io"},
        });
        roles.patch(COURSE_ROLE, &apply, &Patch::Apply(&role)).await?;
        bindings.patch(COURSE_ROLE, &apply, &Patch::Apply(&binding)).await?;
        eprintln!("granted the course's Role ({COURSE_ROLE}) to {account} for the peers");
        Ok(CourseRole { roles, bindings })
    }

    pub async fn revoke(self) -> Result<()> {
        self.bindings.delete(COURSE_ROLE, &DeleteParams::default()).await?;
        self.roles.delete(COURSE_ROLE, &DeleteParams::default()).await?;
        Ok(())
    }
}

/// The course's program as it prints it: a Go module, relative to the repository.
pub const COURSE_VERBATIM: &str = "e2e/peers/course-verbatim";
/// The bench's changes to it, each said in its header.
pub const COURSE_GO_PATCH: &str = "e2e/peers/course-go.patch";

/// How the course's Go controller is named in tables (and found by the bars).
pub const COURSE_LABEL: &str = "course-go";

/// The Go peer, built if its sources changed since the last build.
pub fn course_go() -> Result<Spec> {
    let patch = project::root().join(COURSE_GO_PATCH);
    let binary = e2e::go_build::build("course-go", COURSE_VERBATIM, Some(&patch))?;
    let go_mod = project::root().join(COURSE_VERBATIM).join("go.mod");
    let version = client_go_version(
        &std::fs::read_to_string(&go_mod)
            .with_context(|| format!("cannot read {}", go_mod.display()))?,
    );
    Ok(Spec::Peer {
        label: Some(format!("{COURSE_LABEL} (client-go {version})")),
        command: binary.display().to_string(),
    })
}

/// The controller-runtime peer: a reconciler as controller-runtime's book
/// writes one (`e2e/peers/controller-runtime/main.go` says what it chose).
pub const CONTROLLER_RUNTIME: &str = "e2e/peers/controller-runtime";

/// The controller-runtime peer, built if its sources changed.
pub fn controller_runtime() -> Result<Spec> {
    let binary = e2e::go_build::build("controller-runtime", CONTROLLER_RUNTIME, None)?;
    let go_mod = std::fs::read_to_string(project::root().join(CONTROLLER_RUNTIME).join("go.mod"))?;
    let version = go_mod
        .lines()
        .find_map(|l| l.trim().strip_prefix("sigs.k8s.io/controller-runtime "))
        .map_or("?".into(), |v| v.trim().to_string());
    Ok(Spec::Peer {
        label: Some(format!("controller-runtime {version}")),
        command: binary.display().to_string(),
    })
}

/// The kube-runtime peer: stage 2 (`controller/examples/stage2_crd.rs`,
/// kube-runtime's `Controller` with `.owns()`) keeping my-config through one
/// template naming it, as its own ServiceAccount (the kubeconfig that
/// [`kube_runtime_install`] writes). `binary` is the example as cargo built it.
pub fn kube_runtime(lab: &Lab, binary: &std::path::Path) -> Spec {
    let kubeconfig = e2e::examples::stage2_kubeconfig(lab);
    Spec::Peer {
        label: Some("kube-runtime Controller (stage 2)".into()),
        command: format!("{} --kubeconfig {}", binary.display(), kubeconfig.display()),
    }
}

/// Installs what the kube-runtime peer needs: the CRD, its RBAC and
/// kubeconfig, and the template naming my-config with the desired data.
pub async fn kube_runtime_install(lab: &Lab) -> Result<()> {
    let desired = lab.desired();
    anyhow::ensure!(
        desired.namespace() == "default",
        "the kube-runtime peer (stage 2) keeps ConfigMaps in default, and the lab's is in {}",
        desired.namespace()
    );
    e2e::examples::stage2_install(lab).await?;
    e2e::examples::stage2_keep(lab, desired.name(), desired.data().clone()).await
}

/// `k8s.io/client-go v0.36.3` in go.mod → `v0.36.3`.
fn client_go_version(go_mod: &str) -> String {
    go_mod
        .lines()
        .find_map(|l| l.trim().strip_prefix("k8s.io/client-go "))
        .map_or("?".into(), |v| v.trim().to_string())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_peer_pins_the_kits_client_go_minor() {
        let go_mod = std::fs::read_to_string(
            labkit::project::root().join(super::COURSE_VERBATIM).join("go.mod"),
        )
        .unwrap();
        let version = super::client_go_version(&go_mod);
        let minor = controller::version::target_minor();
        assert!(version.starts_with(&format!("v0.{minor}.")), "client-go {version}, kit 1.{minor}");
    }
}
