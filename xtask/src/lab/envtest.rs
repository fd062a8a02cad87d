//! The envtest provider: etcd, kube-apiserver and the controller as local processes, no
//! Docker. As controller-runtime's envtest, there is no kube-controller-manager or scheduler:
//! no garbage collection, namespaces stay Terminating, Pods are never scheduled.
//!
//! Everything lives in `target/lab/<name>/`:
//! `pki/` (CA, serving and admin certificates, ServiceAccount key), `etcd/` (data),
//! `{etcd,kube-apiserver,controller}.{log,pid}`, `kubeconfig` (admin),
//! `controller.kubeconfig` (the controller's ServiceAccount token), `lab.json` (last).

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, anyhow};
use std::process::Command;

use xshell::Shell;

use crate::lab::binaries::{self, Binary};
use crate::lab::controller;
use crate::lab::kubeconfig::{self, Credentials};
use crate::lab::{apply, certs};
use crate::wait::{self, Seen};
use e2e::lab_file::{self, LabFile, ProviderKind};
use e2e::process::{self, Spawned, StopOutcome};
use e2e::{http_probe, project};

/// controller-runtime envtest's service range; its first address is the `kubernetes` Service.
const SERVICE_CLUSTER_IP_RANGE: &str = "10.0.0.0/24";
/// The issuer in-cluster clients expect (`kubernetes.default.svc.cluster.local`).
const SERVICE_ACCOUNT_ISSUER: &str = "https://kubernetes.default.svc.cluster.local";
const ETCD_TIMEOUT: Duration = Duration::from_secs(30);
/// Generous for a 2-core machine building something else at the same time.
const API_SERVER_TIMEOUT: Duration = Duration::from_secs(90);

/// The files of one lab, by purpose.
pub struct Layout {
    pub state_dir: PathBuf,
    pki: PathBuf,
    etcd_data: PathBuf,
    admin_kubeconfig: PathBuf,
    controller_kubeconfig: PathBuf,
}

/// The processes in start order; `down` stops them in reverse.
const ROLES: [&str; 3] = ["etcd", "kube-apiserver", "controller"];

impl Layout {
    pub fn new(state_dir: &Path) -> Layout {
        Layout {
            state_dir: state_dir.to_path_buf(),
            pki: state_dir.join("pki"),
            etcd_data: state_dir.join("etcd"),
            admin_kubeconfig: state_dir.join("kubeconfig"),
            controller_kubeconfig: state_dir.join("controller.kubeconfig"),
        }
    }

    pub fn log(&self, role: &str) -> PathBuf {
        self.state_dir.join(format!("{role}.log"))
    }

    fn pid_file(&self, role: &str) -> PathBuf {
        self.state_dir.join(format!("{role}.pid"))
    }
}

/// Bring a lab up from nothing: the state directory must not exist (the caller cleans it).
pub async fn up(
    name: &str,
    layout: &Layout,
    host: controller::Host,
    target: &e2e::lab_file::Target,
) -> Result<LabFile> {
    let sh = Shell::new()?;
    let prepare = Instant::now();
    let binaries = binaries::find(&sh).await?;
    let launch = match host {
        controller::Host::Process => {
            controller::Launch::Process { binary: controller::build(&sh)? }
        }
        controller::Host::Container(builder) => {
            let image = crate::image::build(builder).await?;
            // A container left by a killed `docker run` would block the name.
            let stale = controller::container_name(name);
            let _ = xshell::cmd!(sh, "docker rm -f {stale}")
                .quiet()
                .ignore_stderr()
                .ignore_stdout()
                .run();
            controller::Launch::Container { image: image.reference }
        }
    };
    eprintln!("prepared binaries in {:.1}s", prepare.elapsed().as_secs_f64());

    let mut started = Vec::new();
    let cold_start = Instant::now();
    let result = start_all(name, layout, &binaries, &launch, target, &mut started).await;
    match result {
        Ok(lab) => {
            eprintln!(
                "lab {name} is up: cold start {:.1}s (processes started to controller ready)",
                cold_start.elapsed().as_secs_f64()
            );
            Ok(lab)
        }
        Err(error) => {
            eprintln!("lab up failed: stopping what it started");
            for spawned in started.iter().rev() {
                report_stop(spawned.name, spawned.pid, &layout.state_dir);
            }
            eprintln!(
                "logs are kept in {}; `cargo xtask lab down --name {name}` removes them",
                layout.state_dir.display()
            );
            Err(error)
        }
    }
}

async fn start_all(
    name: &str,
    layout: &Layout,
    binaries: &binaries::EnvtestBinaries,
    launch: &controller::Launch,
    target: &e2e::lab_file::Target,
    started: &mut Vec<Spawned>,
) -> Result<LabFile> {
    let phase = Instant::now();
    std::fs::create_dir_all(&layout.state_dir)
        .with_context(|| format!("cannot create {}", layout.state_dir.display()))?;
    let pki = certs::generate(&layout.pki)?;
    let [etcd_client, etcd_peer, api_port, controller_port] = free_ports()?;
    eprintln!("certificates and ports: {:.2}s", phase.elapsed().as_secs_f64());

    // etcd
    let etcd_client_url = format!("http://127.0.0.1:{etcd_client}");
    let etcd_peer_url = format!("http://127.0.0.1:{etcd_peer}");
    let etcd_args = vec![
        "--name=lab".to_string(),
        format!("--data-dir={}", layout.etcd_data.display()),
        format!("--listen-client-urls={etcd_client_url}"),
        format!("--advertise-client-urls={etcd_client_url}"),
        format!("--listen-peer-urls={etcd_peer_url}"),
        format!("--initial-advertise-peer-urls={etcd_peer_url}"),
        format!("--initial-cluster=lab={etcd_peer_url}"),
        // A lab's data is thrown away: durability costs start-up time for nothing.
        "--unsafe-no-fsync=true".to_string(),
    ];
    let mut etcd_command = Command::new(&binaries.etcd.path);
    etcd_command.args(&etcd_args);
    let etcd = process::spawn_detached(
        "etcd",
        etcd_command,
        &layout.log("etcd"),
        &layout.pid_file("etcd"),
    )?;
    started.push(etcd);

    // kube-apiserver: controller-runtime envtest's flags, plus our own PKI.
    let pki_dir = &layout.pki;
    let api_args = vec![
        format!("--etcd-servers={etcd_client_url}"),
        format!("--cert-dir={}", pki_dir.display()),
        format!("--tls-cert-file={}", pki.serving_cert.display()),
        format!("--tls-private-key-file={}", pki.serving_key.display()),
        format!("--client-ca-file={}", pki.ca_cert.display()),
        format!("--secure-port={api_port}"),
        "--bind-address=127.0.0.1".to_string(),
        "--advertise-address=127.0.0.1".to_string(),
        format!("--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}"),
        "--allow-privileged=true".to_string(),
        "--authorization-mode=RBAC".to_string(),
        // As envtest: with no kube-controller-manager there is no `default` ServiceAccount
        // in any namespace, and this plugin would reject every Pod for lack of it.
        // Every other default admission plugin (PodSecurity included) stays on.
        "--disable-admission-plugins=ServiceAccount".to_string(),
        format!("--service-account-issuer={SERVICE_ACCOUNT_ISSUER}"),
        format!("--service-account-key-file={}", pki.service_account_pub.display()),
        format!("--service-account-signing-key-file={}", pki.service_account_key.display()),
        // Lets the controller's TokenRequest get the whole 48 h it asks for.
        format!("--service-account-max-token-expiration={}h", controller::TOKEN_SECONDS / 3600),
    ];
    let mut api_command = Command::new(&binaries.kube_apiserver.path);
    api_command.args(&api_args);
    let api_server = process::spawn_detached(
        "kube-apiserver",
        api_command,
        &layout.log("kube-apiserver"),
        &layout.pid_file("kube-apiserver"),
    )?;
    started.push(api_server);

    let api_server_url = format!("https://127.0.0.1:{api_port}");
    kubeconfig::write(
        &layout.admin_kubeconfig,
        name,
        &api_server_url,
        &pki.ca_pem,
        certs::ADMIN_USER,
        Credentials::ClientCertificate {
            cert_pem: &pki.admin_cert_pem,
            key_pem: &pki.admin_key_pem,
        },
    )?;

    let etcd_addr = SocketAddr::from((Ipv4Addr::LOCALHOST, etcd_client));
    wait_etcd(&mut started[0], etcd_addr).await?;
    let probe = kubeconfig::probe_client(&layout.admin_kubeconfig).await?;
    wait_api_server(&probe, started).await?;
    eprintln!("API server ready {:.1}s after start", phase.elapsed().as_secs_f64());

    // RBAC for the controller, then its identity.
    let admin = kubeconfig::client(&layout.admin_kubeconfig).await?;
    let rbac = project::manifests_dir().join("rbac.yaml");
    apply::apply_documents(&admin, &rbac, apply::rbac_for(target)?).await?;
    let (token, token_expires) = controller::request_token(&admin).await?;
    let service_account =
        format!("{}/{}", controller::SERVICE_ACCOUNT_NAMESPACE, controller::SERVICE_ACCOUNT);
    kubeconfig::write(
        &layout.controller_kubeconfig,
        name,
        &api_server_url,
        &pki.ca_pem,
        &format!("system:serviceaccount:{}", service_account.replace('/', ":")),
        Credentials::Token(&token),
    )?;
    eprintln!(
        "RBAC applied, token for {service_account} (expires {token_expires}): {:.1}s",
        phase.elapsed().as_secs_f64()
    );

    // The controller.
    let listen = SocketAddr::from((Ipv4Addr::LOCALHOST, controller_port));
    let (program, controller_args, container) = match launch {
        controller::Launch::Process { binary } => (
            binary.clone(),
            [controller::args(&layout.controller_kubeconfig, listen), target.flags()].concat(),
            None,
        ),
        controller::Launch::Container { image } => {
            let sa_dir = layout.state_dir.join("serviceaccount");
            controller::write_service_account_dir(&sa_dir, &token, &pki.ca_pem)?;
            let docker = binaries::on_path("docker").context("docker is not on PATH")?;
            let args = [
                controller::container_args(name, image, &sa_dir, api_port, listen),
                target.flags(),
            ]
            .concat();
            (docker, args, Some(controller::container_name(name)))
        }
    };
    let controller_process = controller::start(
        &program,
        &controller_args,
        &layout.log("controller"),
        &layout.pid_file("controller"),
    )?;
    started.push(controller_process);
    let spawned = started.last_mut().context("controller just started")?;
    controller::wait_ready(spawned, listen).await?;

    let version = admin.apiserver_version().await.context("GET /version")?.git_version;
    let lab = LabFile {
        format: lab_file::FORMAT,
        name: name.to_string(),
        provider: ProviderKind::Envtest,
        state_dir: layout.state_dir.clone(),
        created_unix: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|since| since.as_secs())
            .unwrap_or_default(),
        kubernetes_version: version,
        api_server_url,
        admin_kubeconfig: layout.admin_kubeconfig.clone(),
        controller: lab_file::Controller {
            url: format!("http://{listen}"),
            kubeconfig: layout.controller_kubeconfig.clone(),
            service_account,
            token_expires,
            log: layout.log("controller"),
            container: container.clone(),
        },
        processes: vec![
            process_entry(
                &started[0],
                Found::Binary(&binaries.etcd),
                etcd_args,
                &[("client", etcd_client), ("peer", etcd_peer)],
            ),
            process_entry(
                &started[1],
                Found::Binary(&binaries.kube_apiserver),
                api_args,
                &[("https", api_port)],
            ),
            process_entry(
                &started[2],
                match launch {
                    controller::Launch::Process { .. } => Found::CargoBuild(&program),
                    controller::Launch::Container { image } => Found::Image(&program, image),
                },
                controller_args,
                &[("http", controller_port)],
            ),
        ],
        kind: None,
        target: target.clone(),
    };
    lab.write()?;
    Ok(lab)
}

/// Where a process's program came from, for its lab.json entry.
enum Found<'a> {
    Binary(&'a Binary),
    CargoBuild(&'a Path),
    /// `docker run` of an image.
    Image(&'a Path, &'a str),
}

fn process_entry(
    spawned: &Spawned,
    found: Found<'_>,
    args: Vec<String>,
    ports: &[(&str, u16)],
) -> lab_file::Process {
    let (binary, version, source) = match found {
        Found::Binary(binary) => {
            (binary.path.clone(), Some(binary.version.clone()), binary.source.to_string())
        }
        Found::CargoBuild(path) => (path.to_path_buf(), None, "cargo build".to_string()),
        Found::Image(docker, image) => (docker.to_path_buf(), None, format!("image {image}")),
    };
    lab_file::Process {
        role: spawned.name.to_string(),
        pid: spawned.pid,
        pid_file: spawned.pid_file.clone(),
        binary,
        args,
        version,
        source,
        log: spawned.log.clone(),
        ports: ports
            .iter()
            .map(|(purpose, port)| (purpose.to_string(), *port))
            .collect::<BTreeMap<_, _>>(),
    }
}

/// Loopback ports nobody listens on right now: bound together (so they differ), read, released.
fn free_ports<const N: usize>() -> Result<[u16; N]> {
    let listeners = (0..N)
        .map(|_| TcpListener::bind((Ipv4Addr::LOCALHOST, 0)))
        .collect::<std::io::Result<Vec<_>>>()
        .context("cannot bind a loopback port")?;
    let ports = listeners
        .iter()
        .map(|listener| listener.local_addr().map(|addr| addr.port()))
        .collect::<std::io::Result<Vec<_>>>()?;
    ports.try_into().map_err(|_| anyhow!("port count mismatch"))
}

async fn wait_etcd(etcd: &mut Spawned, addr: SocketAddr) -> Result<()> {
    wait::until("etcd /health", ETCD_TIMEOUT, || {
        let died = etcd.exited().map(|status| etcd.died(status));
        async move {
            if let Some(error) = died {
                return Seen::Failed(error);
            }
            match http_probe::get(addr, "/health", Duration::from_secs(2)).await {
                Ok(reply) if reply.status == 200 && reply.body.contains("\"true\"") => {
                    Seen::Ready(())
                }
                Ok(reply) => Seen::NotYet(format!("HTTP {} {}", reply.status, reply.body)),
                Err(error) => Seen::NotYet(root_cause(&*error)),
            }
        }
    })
    .await
    .map_err(|error| etcd.with_log_tail(error))
}

/// `/readyz` through the admin identity (anonymous may not see it on every setup).
async fn wait_api_server(client: &kube::Client, started: &mut [Spawned]) -> Result<()> {
    let result = wait::until("kube-apiserver /readyz", API_SERVER_TIMEOUT, || {
        let died = started
            .iter_mut()
            .find_map(|spawned| spawned.exited().map(|status| spawned.died(status)));
        async move {
            if let Some(error) = died {
                return Seen::Failed(error);
            }
            readyz(client).await
        }
    })
    .await;
    result.map_err(|error| started[1].with_log_tail(error))
}

/// One look at `/readyz`: ready, or which checks still fail.
async fn readyz(client: &kube::Client) -> Seen<()> {
    let request = match http::Request::get("/readyz").body(Vec::new()) {
        Ok(request) => request,
        Err(error) => return Seen::Failed(error.into()),
    };
    match client.request_text(request).await {
        Ok(_) => Seen::Ready(()),
        Err(kube::Error::Api(status)) => {
            let failing: Vec<&str> = status
                .message
                .lines()
                .filter_map(|line| line.strip_prefix("[-]"))
                .map(|line| line.split_whitespace().next().unwrap_or(line))
                .collect();
            if failing.is_empty() {
                Seen::NotYet(format!("HTTP {}: {}", status.code, status.message))
            } else {
                Seen::NotYet(format!("HTTP {}: waiting for {}", status.code, failing.join(", ")))
            }
        }
        Err(error) => Seen::NotYet(root_cause(&error)),
    }
}

/// The innermost error: "Connection refused" rather than four layers of client plumbing.
fn root_cause(error: &(dyn std::error::Error + 'static)) -> String {
    let mut current = error;
    while let Some(source) = current.source() {
        current = source;
    }
    current.to_string()
}

/// What `status` and `up` learn about a lab.
pub struct Health {
    pub lines: Vec<String>,
    pub healthy: bool,
}

/// Check every part of a running lab: processes, `/readyz` of both servers, `/version`.
pub async fn health(lab: &LabFile) -> Health {
    let mut lines = Vec::new();
    let mut healthy = true;
    for process in &lab.processes {
        let alive =
            process::is_alive(process.pid) && process::belongs_to(process.pid, &lab.state_dir);
        healthy &= alive;
        let ports = process
            .ports
            .iter()
            .map(|(purpose, port)| format!("{purpose} 127.0.0.1:{port}"))
            .collect::<Vec<_>>()
            .join(", ");
        let version = process.version.as_deref().unwrap_or("-");
        lines.push(format!(
            "{:<15} pid {:<7} {:<8} {ports}; {version} ({}) {}",
            process.role,
            process.pid,
            if alive { "running" } else { "DEAD" },
            process.source,
            process.binary.display(),
        ));
    }
    match api_server_health(lab).await {
        Ok(line) => lines.push(line),
        Err(error) => {
            healthy = false;
            lines.push(format!("kube-apiserver  NOT READY: {error:#}"));
        }
    }
    match token_validity(lab) {
        Ok(()) => {}
        Err(error) => {
            healthy = false;
            lines.push(format!("controller      {error:#}"));
        }
    }
    match controller_health(lab).await {
        Ok(line) => lines.push(line),
        Err(error) => {
            healthy = false;
            lines.push(format!("controller      NOT READY: {error:#}"));
        }
    }
    Health { lines, healthy }
}

async fn api_server_health(lab: &LabFile) -> Result<String> {
    let client = kubeconfig::probe_client(&lab.admin_kubeconfig).await?;
    match readyz(&client).await {
        Seen::Ready(()) => {}
        Seen::NotYet(seen) => return Err(anyhow!("{} /readyz: {seen}", lab.api_server_url)),
        Seen::Failed(error) => return Err(error),
    }
    let version = client.apiserver_version().await.context("GET /version")?;
    Ok(format!(
        "kube-apiserver  {} /readyz ok, /version {} ({})",
        lab.api_server_url, version.git_version, version.platform
    ))
}

/// The controller's token is not refreshed: past its expiry the lab needs a new `up`.
fn token_validity(lab: &LabFile) -> Result<()> {
    let expires: k8s_openapi::jiff::Timestamp =
        lab.controller.token_expires.parse().with_context(|| {
            format!("token expiry {:?} in lab.json", lab.controller.token_expires)
        })?;
    if expires <= k8s_openapi::jiff::Timestamp::now() {
        return Err(anyhow!("token of {} expired at {expires}", lab.controller.service_account));
    }
    Ok(())
}

async fn controller_health(lab: &LabFile) -> Result<String> {
    let reply = http_probe::get_url(&lab.controller.url, "/readyz", Duration::from_secs(2)).await?;
    if reply.status != 200 {
        return Err(anyhow!("{}/readyz: HTTP {} {}", lab.controller.url, reply.status, reply.body));
    }
    Ok(format!("controller      {}/readyz 200", lab.controller.url))
}

/// What `lab up --provider envtest` does, in order (ports are chosen at start).
pub fn plan(name: &str, options: &crate::lab::UpOptions) -> Vec<crate::plan::Line> {
    use crate::plan::Line as Step;
    let dir = format!("target/lab/{name}");
    let mut steps = vec![Step::note(
        "find kube-apiserver and etcd (`cargo xtask envtest-bins`): env, KUBEBUILDER_ASSETS, PATH, target/envtest cache, go build, download",
    )];
    let controller_cmd = match options.controller_host() {
        controller::Host::Process => {
            steps.push(Step::run([
                "cargo",
                "build",
                "-p",
                controller::PACKAGE,
                "--bin",
                controller::BINARY,
            ]));
            format!(
                "$ target/debug/my-controller --kubeconfig {dir}/controller.kubeconfig --listen 127.0.0.1:<port> >>{dir}/controller.log 2>&1 &"
            )
        }
        controller::Host::Container(builder) => {
            let reference = crate::image::reference().unwrap_or_else(|e| format!("<{e}>"));
            let builder = crate::image::resolve(builder);
            let target = match builder {
                crate::image::Builder::Host => crate::image::StaticTarget::detect().ok(),
                _ => None,
            }
            .unwrap_or(crate::image::StaticTarget { triple: String::new(), rustflags: None });
            match crate::image::steps::<()>(builder, &target) {
                Ok(image) => steps.extend(image.iter().map(|s| Step::Shown(s.to_string()))),
                Err(e) => steps.push(Step::note(format!("{e:#}"))),
            }
            let sa = format!("{dir}/serviceaccount");
            let args = controller::container_args(
                name,
                &reference,
                Path::new(&sa),
                0,
                SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            );
            format!(
                "$ docker {} >>{dir}/controller.log 2>&1 &    # API server port and listen port chosen at start",
                args.join(" ")
            )
        }
    };
    steps.extend([
        Step::note(format!("generate a CA, serving, admin and ServiceAccount keys into {dir}/pki (rcgen)")),
        Step::note(format!("$ etcd --data-dir={dir}/etcd --listen-client-urls=http://127.0.0.1:<port> … >>{dir}/etcd.log 2>&1 &")),
        Step::note(format!("$ kube-apiserver --etcd-servers=… --secure-port=<port> --authorization-mode=RBAC … >>{dir}/kube-apiserver.log 2>&1 &")),
        Step::api(format!("kubectl --kubeconfig {dir}/kubeconfig apply --server-side -f manifests/rbac.yaml")),
        Step::api(format!("kubectl --kubeconfig {dir}/kubeconfig create token my-controller --duration=48h")),
        Step::note(controller_cmd),
        Step::note(format!("wait for the controller's /readyz, write {dir}/lab.json")),
    ]);
    steps
}

/// What `lab down` does for an envtest lab.
pub fn down_plan(layout: &Layout) -> Vec<crate::plan::Line> {
    use crate::plan::Line as Step;
    let mut steps: Vec<Step> = ROLES
        .iter()
        .rev()
        .filter_map(|role| {
            process::read_pid_file(&layout.pid_file(role)).map(|pid| {
                Step::run(["kill", "-TERM", &format!("-{pid}")])
                    .when(&format!("while pid {pid} ({role}) runs; SIGKILL after a grace period"))
            })
        })
        .collect();
    steps.push(Step::run(["rm", "-rf", &layout.state_dir.display().to_string()]));
    steps
}

/// Stop whatever processes the pid files name, newest first, then remove the state
/// directory. Works without lab.json (a failed `up` leaves none). Returns whether there was
/// anything to remove.
pub fn down(layout: &Layout) -> Result<bool> {
    if !layout.state_dir.exists() {
        return Ok(false);
    }
    for role in ROLES.iter().rev() {
        if let Some(pid) = process::read_pid_file(&layout.pid_file(role)) {
            report_stop(role, pid, &layout.state_dir);
        }
    }
    // `docker run --rm` removes its container when stopped by SIGTERM; one left
    // behind by a SIGKILL is removed here.
    if let Ok(Some(LabFile {
        controller: lab_file::Controller { container: Some(name), .. },
        ..
    })) = LabFile::read(&layout.state_dir)
    {
        e2e::process::remove_container(&name);
    }
    std::fs::remove_dir_all(&layout.state_dir)
        .with_context(|| format!("cannot remove {}", layout.state_dir.display()))?;
    eprintln!("removed {}", layout.state_dir.display());
    Ok(true)
}

fn report_stop(role: &str, pid: u32, state_dir: &Path) {
    match process::stop(pid, state_dir) {
        Ok(StopOutcome::NotRunning) => eprintln!("  {role} (pid {pid}) was not running"),
        Ok(StopOutcome::NotOurs) => {
            eprintln!("  {role}: pid {pid} is now another program's, left alone")
        }
        Ok(StopOutcome::Stopped { killed, after }) => eprintln!(
            "  stopped {role} (pid {pid}) with {} in {:.1}s",
            if killed { "SIGKILL" } else { "SIGTERM" },
            after.as_secs_f64()
        ),
        Err(error) => eprintln!("  warning: cannot stop {role} (pid {pid}): {error:#}"),
    }
}
