//! `cargo xtask test`, the README's test command: the unit tests; then fresh
//! labs, each with the e2e suite against it and taken down whatever happened:
//! envtest with the controller as a process, envtest with the controller in
//! its image, and kind.

use std::process::ExitCode;

use anyhow::Result;
use e2e::command::Cmd;

use crate::{
    cmdline,
    lab::{self, ControllerChoice, UpOptions},
};

/// Its own lab, so a person's `my-controller-lab` is left alone.
pub const LAB_NAME: &str = "my-controller-test";

pub async fn run() -> Result<ExitCode> {
    eprintln!("== unit tests");
    // Everything that needs no lab: the e2e crate's integration tests need
    // the lab below, its own unit tests do not.
    cmdline::cargo(&["test", "--workspace", "--exclude", "e2e"]).run()?;
    cmdline::cargo(&["test", "-p", "e2e", "--lib"]).run()?;

    // A Ctrl-C reaches the test processes (same terminal); xtask itself stays
    // to take the lab down.
    tokio::spawn(async {
        if tokio::signal::ctrl_c().await.is_ok() {
            eprintln!("interrupted: the lab goes down once the running step ends");
        }
    });
    let processes = suite_on_fresh_lab(ControllerChoice::Process).await?;
    if processes != ExitCode::SUCCESS {
        return Ok(processes);
    }
    let required = std::env::var(DOCKER_REQUIRED_ENV).is_ok_and(|v| v == "1");
    if let Err(reason) = docker_usable() {
        if required {
            anyhow::bail!("{DOCKER_REQUIRED_ENV}=1 but Docker is not usable: {reason}");
        }
        eprintln!(
            "== NOT RUN: the suite with the controller in its container, and on kind (Docker is not usable: {reason})"
        );
        return Ok(ExitCode::SUCCESS);
    }
    let container = suite_on_fresh_lab(ControllerChoice::Container).await?;
    if container != ExitCode::SUCCESS {
        return Ok(container);
    }
    // The image now exists: the offline bundle's save/load must give it back.
    eprintln!("== offline bundle round trip");
    lab::bundle::round_trip(&e2e::project::target_dir())?;
    if lab::binaries::on_path("kind").is_none() {
        if required {
            anyhow::bail!(
                "{DOCKER_REQUIRED_ENV}=1 but kind is not on PATH (kind v0.33: `nix develop`, or build xtask/node-image/kind)"
            );
        }
        eprintln!("== NOT RUN: the suite on kind (kind is not on PATH)");
        return Ok(ExitCode::SUCCESS);
    }
    suite_on_kind().await
}

/// Set to 1 (CI does, once dockerd runs) to make the container and kind runs mandatory.
pub const DOCKER_REQUIRED_ENV: &str = "LAB_DOCKER_REQUIRED";
/// The kind lab's node image (`--node-image`): unset for the pinned one,
/// `built` where no registry can be reached (CI sets it).
pub const NODE_IMAGE_ENV: &str = "LAB_NODE_IMAGE";

/// A fresh kind lab the way a person makes one, the suite against it, what
/// only a reused lab and the lab verbs show, the lab down whatever happened.
async fn suite_on_kind() -> Result<ExitCode> {
    let node_image = std::env::var(NODE_IMAGE_ENV).ok().filter(|v| !v.is_empty());
    let options = UpOptions {
        provider: lab::provider::ProviderChoice::Kind,
        node_image,
        ..UpOptions::envtest(ControllerChoice::Process)
    };
    let kubeconfig_before = user_kubeconfig();
    refusals(&options).await?;
    eprintln!("== a fresh kind lab ({LAB_NAME})");
    let _down = LabDown;
    lab::down::run(LAB_NAME, false).await?;
    let started = std::time::Instant::now();
    lab::up::run(LAB_NAME, &options).await?;
    eprintln!("kind lab up in {:.0} s", started.elapsed().as_secs_f64());
    let pod = kind_pod().await?;

    eprintln!("== lab up again: the lab is reused as it is");
    let started = std::time::Instant::now();
    lab::up::run(LAB_NAME, &options).await?;
    let again = kind_pod().await?;
    anyhow::ensure!(
        again == pod,
        "a second `lab up` replaced the controller's pod ({pod} → {again}): nothing changed, nothing should"
    );
    eprintln!("second lab up in {:.0} s, same pod {pod}", started.elapsed().as_secs_f64());

    eprintln!("== lab up clears a test's leftover arguments");
    let lab = e2e::lab::Lab::find_named(LAB_NAME).await?;
    let deployments: kube::Api<k8s_openapi::api::apps::v1::Deployment> =
        kube::Api::namespaced(lab.client(), lab::kind::NAMESPACE);
    let leftover = serde_json::json!({"spec": {"template": {"spec": {"containers": [
        {"name": "controller", "args": ["--resync", "7s"]}]}}}});
    deployments
        .patch(
            lab::kind::DEPLOYMENT,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Strategic(&leftover),
        )
        .await?;
    lab::up::run(LAB_NAME, &options).await?;
    let args = deployments
        .get(lab::kind::DEPLOYMENT)
        .await?
        .spec
        .and_then(|s| s.template.spec)
        .and_then(|s| s.containers.into_iter().next())
        .and_then(|c| c.args);
    anyhow::ensure!(
        args.as_ref().is_none_or(|a| a.is_empty()),
        "lab up left the arguments {args:?}"
    );

    eprintln!("== lab up refuses to reuse the cluster with another node image");
    let node = Cmd::argv(["docker", "inspect", "--format", "{{.Config.Image}}"])
        .arg(lab::kind::node_container(LAB_NAME))
        .read()?;
    let other = "lab-kit/kind-node:another-tag";
    Cmd::argv(["docker", "tag", &node, other]).run()?;
    let out = cmdline::cargo(&[
        "xtask",
        "lab",
        "up",
        "--provider",
        "kind",
        "--name",
        LAB_NAME,
        "--node-image",
        other,
    ])
    .output()?;
    let _ = Cmd::argv(["docker", "rmi", other]).output();
    let text = String::from_utf8_lossy(&out.stderr);
    anyhow::ensure!(
        !out.status.success() && text.contains(&format!("runs node image {node}, not {other}")),
        "lab up with another node image did not refuse the existing cluster:\n{text}"
    );

    eprintln!("== e2e suite on kind");
    let suite = crate::e2e::run(LAB_NAME, None)?;
    if suite != ExitCode::SUCCESS {
        return Ok(suite);
    }
    let suite = another_target(&options).await?;

    eprintln!("== lab status and lab logs show the pod");
    let pod = kind_pod().await?;
    let status = cmdline::cargo(&["xtask", "lab", "status", "--name", LAB_NAME]).read()?;
    anyhow::ensure!(
        status.contains(&format!("pod {pod}: Running, ready true, 0 restarts"))
            && status.ends_with("healthy"),
        "`cargo xtask lab status` does not show pod {pod} healthy:\n{status}"
    );
    let logs = cmdline::cargo(&["xtask", "lab", "logs", "--name", LAB_NAME]).read()?;
    anyhow::ensure!(
        logs.contains(controller::runner::LOG_STARTING),
        "`cargo xtask lab logs` shows no start line of pod {pod}:\n{logs}"
    );

    eprintln!("== lab down without lab.json deletes the cluster; ~/.kube/config untouched");
    std::fs::remove_file(e2e::lab_file::LabFile::path(&lab::state_dir(LAB_NAME)))?;
    cmdline::cargo(&["xtask", "lab", "down", "--name", LAB_NAME]).run()?;
    let clusters = Cmd::argv(["kind", "get", "clusters"]).read()?;
    anyhow::ensure!(
        !clusters.lines().any(|c| c == LAB_NAME) && !lab::state_dir(LAB_NAME).exists(),
        "lab down without lab.json left cluster or state: {clusters}"
    );
    anyhow::ensure!(
        user_kubeconfig() == kubeconfig_before,
        "the kind lab changed {}",
        user_kubeconfig_path().display()
    );
    Ok(suite)
}

fn user_kubeconfig_path() -> std::path::PathBuf {
    std::env::var_os("KUBECONFIG").map(std::path::PathBuf::from).unwrap_or_else(|| {
        std::path::PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".kube/config")
    })
}

/// The user's own kubeconfig, which a lab must leave alone.
fn user_kubeconfig() -> Option<Vec<u8>> {
    std::fs::read(user_kubeconfig_path()).ok()
}

/// The lab made for another ConfigMap (`lab up --target`): the Role is made
/// for exactly that one, and the controller keeps it.
async fn another_target(options: &UpOptions) -> Result<ExitCode> {
    let target = e2e::lab_file::Target::parse(OTHER_TARGET).map_err(anyhow::Error::msg)?;
    eprintln!("== lab up --target {target}: least privilege, create, heal for it");
    let options = UpOptions { target, ..options.clone() };
    lab::up::run(LAB_NAME, &options).await?;
    for experiment in ["rbac", "create", "heal"] {
        let code = crate::e2e::run(LAB_NAME, Some(experiment))?;
        if code != ExitCode::SUCCESS {
            return Ok(code);
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Not the default namespace, not the default name.
const OTHER_TARGET: &str = "lab-target/other-config";

/// A lab that cannot be made is refused before anything is: one line naming
/// the fix, a non-zero exit, no cluster and no state left. Each case runs
/// `cargo xtask lab up` as a person would, with the one thing wrong.
async fn refusals(options: &UpOptions) -> Result<()> {
    const NAME: &str = "my-controller-refused";
    eprintln!("== lab up refuses bad input and leaves nothing behind");
    // A node image of another minor: the built one, relabelled.
    let node = match options.node_image.as_deref() {
        Some(lab::node_image::BUILT) => {
            let recipe = lab::node_image::Recipe::new(&lab::node_image::Source::default())?;
            lab::node_image::ensure(&recipe).await?
        }
        Some(other) => other.to_string(),
        None => lab::kind::node_image()?,
    };
    let other_minor = "lab-kit/kind-node:another-minor";
    let context = e2e::project::target_dir().join("refusals");
    std::fs::create_dir_all(&context)?;
    std::fs::write(
        context.join("Dockerfile"),
        format!("FROM {node}\nRUN echo v1.30.0 > /kind/version\n"),
    )?;
    Cmd::argv(["docker", "build", "-q", "-t", other_minor]).path(&context).run()?;
    let fake_kind = context.join("bin");
    std::fs::create_dir_all(&fake_kind)?;
    let script = fake_kind.join("kind");
    std::fs::write(&script, "#!/bin/sh\necho 'kind v0.29.0 go1.24.2 linux/amd64'\n")?;
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755))?;
    let path = format!("{}:{}", fake_kind.display(), std::env::var("PATH").unwrap_or_default());
    let base = ["xtask", "lab", "up", "--provider", "kind", "--name", NAME];
    let cases = [
        Refusal {
            what: "an unknown node image",
            args: vec!["--node-image", "no-such/node:v1.36.0"],
            env: vec![],
            says: "cargo xtask lab node-image",
        },
        Refusal {
            what: "a node image of another minor",
            args: vec!["--node-image", other_minor],
            env: vec![],
            says: "built for 1.36",
        },
        Refusal {
            what: "no Docker daemon",
            args: vec![],
            env: vec![("DOCKER_HOST", "unix:///nonexistent/docker.sock".into())],
            says: "fix: start Docker",
        },
        Refusal {
            what: "kind of another release",
            args: vec![],
            env: vec![("PATH", path)],
            says: "has no node image in kind/node-images.toml (supported: ",
        },
    ];
    for Refusal { what, args, env, says } in cases {
        let mut cmd = cmdline::cargo(&[&base[..], &args[..]].concat());
        for (key, value) in &env {
            cmd = cmd.env(key, value);
        }
        let out = cmd.output()?;
        let text = String::from_utf8_lossy(&out.stderr).into_owned();
        let last = text.lines().last().unwrap_or_default();
        anyhow::ensure!(!out.status.success(), "lab up with {what} succeeded:\n{text}");
        anyhow::ensure!(
            text.contains(says) && last.starts_with("error: ") && !text.contains("panicked"),
            "lab up with {what}: expected an error line and {says:?}, got:\n{text}"
        );
        anyhow::ensure!(
            !lab::state_dir(NAME).exists(),
            "lab up with {what} left {}",
            lab::state_dir(NAME).display()
        );
        let clusters = Cmd::argv(["kind", "get", "clusters"]).read()?;
        anyhow::ensure!(
            !clusters.lines().any(|c| c == NAME),
            "lab up with {what} left a kind cluster {NAME}"
        );
        eprintln!("refused {what}: {last}");
    }
    let _ = Cmd::argv(["docker", "rmi", other_minor]).output();
    let _ = std::fs::remove_dir_all(&context);
    Ok(())
}

/// One bad `lab up`: what is wrong, how, and what its error must say.
struct Refusal<'a> {
    what: &'static str,
    args: Vec<&'a str>,
    env: Vec<(&'static str, String)>,
    says: &'static str,
}

/// The kind lab's controller pod.
async fn kind_pod() -> Result<String> {
    let lab = e2e::lab::Lab::find_named(LAB_NAME).await?;
    e2e::deployment::DeploymentHost::new(lab.client())
        .ready_pod()
        .await?
        .ok_or_else(|| anyhow::anyhow!("the kind lab has no ready controller pod"))
}

/// A fresh envtest lab with the controller as `host`, the suite, the lab down.
async fn suite_on_fresh_lab(host: ControllerChoice) -> Result<ExitCode> {
    eprintln!("== a fresh envtest lab ({LAB_NAME}), controller as a {host:?}");
    let _down = LabDown;
    lab::down::run(LAB_NAME, false).await?;
    lab::up::run(LAB_NAME, &UpOptions::envtest(host)).await?;
    eprintln!("== e2e suite (controller as a {host:?})");
    let suite = crate::e2e::run(LAB_NAME, None)?;
    if suite != ExitCode::SUCCESS || host != ControllerChoice::Process {
        return Ok(suite);
    }
    // The workshop's narrated experiments run the same functions; check that
    // each one still tells its story (its key lines) and passes.
    for name in crate::exp::NAMES {
        eprintln!("== cargo xtask exp {name}");
        let (code, transcript) = crate::exp::transcript(LAB_NAME, name).await?;
        let missing = crate::exp::missing_key_lines(&transcript);
        if code != ExitCode::SUCCESS || !missing.is_empty() {
            eprintln!("exp {name} failed or lacks key lines {missing:?}");
            return Ok(ExitCode::FAILURE);
        }
    }
    let bench = short_benchmark().await?;
    if bench != ExitCode::SUCCESS {
        return Ok(bench);
    }
    another_target(&UpOptions::envtest(host)).await
}

/// A short `cargo xtask bench`: it must complete and write its JSON report.
async fn short_benchmark() -> Result<ExitCode> {
    eprintln!(
        "== cargo xtask bench --name {LAB_NAME} -n 20 --steady 2s --unrelated 500 --build debug"
    );
    let report = e2e::project::target_dir().join("bench/latest.json");
    let _ = std::fs::remove_file(&report);
    let code = crate::bench::run(crate::bench::BenchArgs::short(LAB_NAME)).await?;
    let text = std::fs::read_to_string(&report)
        .map_err(|e| anyhow::anyhow!("the benchmark wrote no {}: {e}", report.display()))?;
    let json: serde_json::Value = serde_json::from_str(&text)?;
    anyhow::ensure!(
        json["latency"]["self_heal"]["controller"]["n"] == 20,
        "{} lacks the 20 self-heal rounds",
        report.display()
    );
    eprintln!("bench: wrote {}", report.display());
    Ok(code)
}

/// Whether a Docker daemon answers.
fn docker_usable() -> Result<(), String> {
    if crate::lab::binaries::on_path("docker").is_none() {
        return Err("no docker on PATH".into());
    }
    Cmd::argv(["docker", "info", "--format", "{{.ServerVersion}}"])
        .read()
        .map(drop)
        .map_err(|_| "the Docker daemon does not answer (`docker info`)".to_string())
}

/// Takes the test lab down when `run` ends, by success, error or panic.
struct LabDown;

impl Drop for LabDown {
    fn drop(&mut self) {
        eprintln!("== lab down");
        // Drop cannot await: block this worker thread on the runtime instead.
        let down = tokio::task::block_in_place(|| {
            tokio::runtime::Handle::current().block_on(lab::down::run(LAB_NAME, false))
        });
        if let Err(e) = down {
            eprintln!("error: could not take the lab down: {e:#}");
        }
    }
}
