//! The peers the bench builds: the course's own controller in Go (client-go
//! informer, typed work queue, the kick, 30 s resync), the peer of `cargo
//! xtask bench --peer go`: the course's program as it prints it
//! (`bench/peers/course-verbatim/`) with the four changes of
//! `bench/peers/course-go.patch`, built by [`go_program`]; a
//! controller-runtime reconciler; stage 2's kube-runtime `Controller`.
//!
//! Peers run as the lab's controller ServiceAccount, like my-controller, with
//! the Role that [`crate::places::grant`] binds (the course's informer
//! lists and watches every ConfigMap of its namespace, which the kit's Role,
//! naming my-config, does not grant).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::subject::Spec;
use controller::template::{ConfigMapTemplate, ConfigMapTemplateSpec};
use kube::{Api, api::PostParams};
use labkit::command::Cmd;
use labkit::lab::Lab;
use labkit::{fingerprint::sha256_hex, go_build, project, stage2};

/// The course's program as it prints it: a Go module, relative to the repository.
pub const COURSE_VERBATIM: &str = "bench/peers/course-verbatim";
/// The bench's changes to it, each said in its header.
pub const COURSE_GO_PATCH: &str = "bench/peers/course-go.patch";

/// How the course's Go controller is named in tables (and found by the bars).
pub const COURSE_LABEL: &str = "course-go";

/// The Go peer, built if its sources changed since the last build.
pub fn course_go() -> Result<Spec> {
    let patch = project::root().join(COURSE_GO_PATCH);
    let label = |version| format!("{COURSE_LABEL} (client-go {version})");
    go_peer("course-go", COURSE_VERBATIM, Some(&patch), "k8s.io/client-go", label)
}

/// A Go peer: the program of the module in `dir` ([`go_program`]), named by `label` given
/// the version its go.mod requires of `module`.
fn go_peer(
    name: &str,
    dir: &str,
    patch: Option<&Path>,
    module: &str,
    label: impl FnOnce(String) -> String,
) -> Result<Spec> {
    let binary = go_program(name, dir, patch)?;
    let version = go_build::required_version(&go_build::read_go_mod(dir)?, module)?;
    Ok(Spec::Peer {
        label: Some(label(version)),
        command: binary.display().to_string(),
        pinned: false,
    })
}

/// A Go module's files that decide its build.
const SOURCES: [&str; 3] = ["go.mod", "go.sum", "main.go"];

/// A copy of the module in `dir` (relative to the repository), made afresh
/// in `target/go/<name>.module`: for `go run .`, which builds in the folder
/// it is run in and leaves the module as it is.
pub fn module_copy(name: &str, dir: &str) -> Result<PathBuf> {
    let dir = project::root().join(dir);
    let copy = project::target_dir().join("go").join(format!("{name}.module"));
    labkit::files::create_dir(&copy)?;
    for file in SOURCES {
        std::fs::copy(dir.join(file), copy.join(file))
            .with_context(|| format!("cannot copy {file} of {}", dir.display()))?;
    }
    Ok(copy)
}

/// The Go program of the module in `dir` (relative to the repository), with
/// `patch` applied first when given (a unified diff of its `main.go`), built
/// by [`labkit::go_build::build_once`] into `target/go/<name>-<fingerprint>`:
/// again only when the sources or the patch change.
pub fn go_program(name: &str, dir: &str, patch: Option<&Path>) -> Result<PathBuf> {
    let module = project::root().join(dir);
    let mut inputs = Vec::new();
    for file in SOURCES.iter().map(|f| module.join(f)).chain(patch.map(Path::to_path_buf)) {
        inputs.extend(
            std::fs::read(&file).with_context(|| format!("cannot read {}", file.display()))?,
        );
    }
    let binary =
        project::target_dir().join("go").join(format!("{name}-{}", &sha256_hex(&inputs)[..12]));
    if binary.is_file() {
        return Ok(binary);
    }
    // A copy to patch and build in; the module itself stays as it is. Named after this
    // process: two test runs may build the same program at once.
    let work = module_copy(&format!("{name}.{}", std::process::id()), dir)?;
    if let Some(patch) = patch {
        Cmd::argv(["git", "apply"]).path(patch).dir(&work).run()?;
    }
    // Without -trimpath, as `go run` builds: the grader's `go run` of the course's module
    // (xtask/tests/grade.rs) then reuses these compiles of client-go in Go's build cache
    // instead of making its own, minutes of CPU on a cold machine.
    labkit::go_build::build_once(name, &binary, |partial| {
        Cmd::argv(["go", "build", "-o"]).path(partial).arg(".").dir(&work)
    })?;
    let _ = std::fs::remove_dir_all(&work);
    Ok(binary)
}

/// The controller-runtime peer: a reconciler as controller-runtime's book
/// writes one (`bench/peers/controller-runtime/main.go` says what it chose).
pub const CONTROLLER_RUNTIME: &str = "bench/peers/controller-runtime";

/// The controller-runtime peer, built if its sources changed.
pub fn controller_runtime() -> Result<Spec> {
    let module = "sigs.k8s.io/controller-runtime";
    let label = |version| format!("controller-runtime {version}");
    go_peer("controller-runtime", CONTROLLER_RUNTIME, None, module, label)
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
/// kubeconfig, and the template naming my-config with the desired data (in
/// the stage-2 namespace: stage 2 then keeps my-config so).
pub async fn kube_runtime_install(lab: &Lab) -> Result<()> {
    let desired = lab.desired();
    anyhow::ensure!(
        desired.namespace() == "default",
        "the kube-runtime peer (stage 2) keeps ConfigMaps in default, and the lab's is in {}",
        desired.namespace()
    );
    labkit::stage2::install(lab).await?;
    let templates: Api<ConfigMapTemplate> = Api::namespaced(lab.client(), stage2::NAMESPACE);
    let (name, data) = (desired.name(), desired.data().clone());
    let spec = ConfigMapTemplateSpec { config_map_name: name.into(), data };
    let template = ConfigMapTemplate::new(&format!("keeps-{name}"), spec);
    templates.create(&PostParams::default(), &template).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_peer_pins_the_kits_client_go_minor() {
        let go_mod = labkit::go_build::read_go_mod(super::COURSE_VERBATIM).unwrap();
        let version = labkit::go_build::required_version(&go_mod, "k8s.io/client-go").unwrap();
        let minor = controller::version::target_minor();
        assert!(version.starts_with(&format!("v0.{minor}.")), "client-go {version}, kit 1.{minor}");
    }
}
