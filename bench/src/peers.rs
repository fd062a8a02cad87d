//! The peers the bench builds: the course's own controller in Go (client-go
//! informer, typed work queue, the kick, 30 s resync), the peer of `cargo
//! xtask bench --peer go`: the course's program as it prints it
//! (`bench/peers/course-verbatim/`) with the four changes of
//! `bench/peers/course-go.patch`, built by [`crate::go_build`]; a
//! controller-runtime reconciler; stage 2's kube-runtime `Controller`.
//!
//! Peers run as the lab's controller ServiceAccount, like my-controller, with
//! the Role that [`crate::places::Grant`] binds (the course's informer
//! lists and watches every ConfigMap of its namespace, which the kit's Role,
//! naming my-config, does not grant).

use anyhow::{Context, Result};

use super::subject::Spec;
use labkit::lab::Lab;
use labkit::project;

/// The course's program as it prints it: a Go module, relative to the repository.
pub const COURSE_VERBATIM: &str = "bench/peers/course-verbatim";
/// The bench's changes to it, each said in its header.
pub const COURSE_GO_PATCH: &str = "bench/peers/course-go.patch";

/// How the course's Go controller is named in tables (and found by the bars).
pub const COURSE_LABEL: &str = "course-go";

/// The Go peer, built if its sources changed since the last build.
pub fn course_go() -> Result<Spec> {
    let patch = project::root().join(COURSE_GO_PATCH);
    let binary = crate::go_build::build("course-go", COURSE_VERBATIM, Some(&patch))?;
    let go_mod = project::root().join(COURSE_VERBATIM).join("go.mod");
    let version = client_go_version(
        &std::fs::read_to_string(&go_mod)
            .with_context(|| format!("cannot read {}", go_mod.display()))?,
    );
    Ok(Spec::Peer {
        label: Some(format!("{COURSE_LABEL} (client-go {version})")),
        command: binary.display().to_string(),
        pinned: false,
    })
}

/// The controller-runtime peer: a reconciler as controller-runtime's book
/// writes one (`bench/peers/controller-runtime/main.go` says what it chose).
pub const CONTROLLER_RUNTIME: &str = "bench/peers/controller-runtime";

/// The controller-runtime peer, built if its sources changed.
pub fn controller_runtime() -> Result<Spec> {
    let binary = crate::go_build::build("controller-runtime", CONTROLLER_RUNTIME, None)?;
    let go_mod = std::fs::read_to_string(project::root().join(CONTROLLER_RUNTIME).join("go.mod"))?;
    let version = go_mod
        .lines()
        .find_map(|l| l.trim().strip_prefix("sigs.k8s.io/controller-runtime "))
        .map_or("?".into(), |v| v.trim().to_string());
    Ok(Spec::Peer {
        label: Some(format!("controller-runtime {version}")),
        command: binary.display().to_string(),
        pinned: false,
    })
}

/// The kube-runtime peer: stage 2 (`controller/examples/stage2_crd.rs`,
/// kube-runtime's `Controller` with `.owns()`) keeping my-config through one
/// template naming it, as its own ServiceAccount (the kubeconfig that
/// [`kube_runtime_install`] writes). `binary` is the example as cargo built it.
pub fn kube_runtime(lab: &Lab, binary: &std::path::Path) -> Spec {
    let kubeconfig = labkit::stage2::kubeconfig(lab);
    Spec::Peer {
        label: Some("kube-runtime Controller (stage 2)".into()),
        command: format!("{} --kubeconfig {}", binary.display(), kubeconfig.display()),
        // Its ServiceAccount's Role is in the lab's namespace.
        pinned: true,
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
    labkit::stage2::install(lab).await?;
    labkit::stage2::keep_with_template(lab, desired.name(), desired.data().clone()).await
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
