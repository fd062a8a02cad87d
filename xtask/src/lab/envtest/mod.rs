//! The envtest provider: etcd, kube-apiserver and the controller as local processes, no
//! Docker. As controller-runtime's envtest, there is no kube-controller-manager or scheduler:
//! no garbage collection, namespaces stay Terminating, Pods are never scheduled.
//!
//! Everything lives in `target/lab/<name>/`:
//! `pki/` (CA, serving and admin certificates, ServiceAccount key), `etcd/` (data),
//! `{etcd,kube-apiserver,controller}.{log,pid}`, `kubeconfig` (admin),
//! `controller.kubeconfig` (the controller's ServiceAccount token), `lab.json` (last).
//!
//! `lab up` is one list of steps ([`up_plan`]), printed by `--dry-run` or carried out;
//! ports are chosen when the step that needs them runs, and each process's command is
//! echoed as it starts.

mod down_plan;
mod health;
mod logs;

pub use down_plan::down_plan;
pub use health::health;

use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, anyhow};

use crate::lab::binaries::{self, Binary, EnvtestBinaries};
use crate::lab::controller::{self, SERVICE_ACCOUNT, SERVICE_ACCOUNT_NAMESPACE, TOKEN_SECONDS};
use crate::lab::kubeconfig;
use crate::lab::options::UpOptions;
use crate::lab::provider::{Answer, Health, Machine, Provider};
use crate::lab::{certs, manifests};
use crate::plan::{self, Step};
use crate::preflight;
use labkit::command::Cmd;
use labkit::eventually::Check;
use labkit::lab::{
    self as handle,
    probes::{self, wait_ready},
};
use labkit::lab_file::{self, LabFile, Offers, Target};
use labkit::process::{self, Spawned, StopOutcome};
use labkit::project;
use labkit::project::shown;
use labkit::record::Record;
use labkit::tr;

/// controller-runtime envtest's service range; its first address is the `kubernetes` Service.
const SERVICE_CLUSTER_IP_RANGE: &str = "10.0.0.0/24";
/// The issuer in-cluster clients expect (`kubernetes.default.svc.cluster.local`).
const SERVICE_ACCOUNT_ISSUER: &str = "https://kubernetes.default.svc.cluster.local";

/// The processes in start order; `down` stops them in reverse.
const ROLES: [&str; 3] = [handle::ETCD, handle::API_SERVER, handle::CONTROLLER];

/// `<dir>/<role>.log`: a process's output.
pub fn log(dir: &Path, role: &str) -> PathBuf {
    dir.join(format!("{role}.log"))
}

fn pid_file(dir: &Path, role: &str) -> PathBuf {
    dir.join(format!("{role}.pid"))
}

/// What `lab up` learns on the way.
#[derive(Default)]
pub struct Up {
    name: String,
    /// The lab's state directory.
    dir: PathBuf,
    target: Target,
    binaries: Option<EnvtestBinaries>,
    pki: Option<certs::Pki>,
    /// etcd client and peer, kube-apiserver, controller.
    ports: [u16; 4],
    /// In start order; each with its lab.json entry.
    started: Vec<(Spawned, lab_file::Process)>,
    admin: Option<kube::Client>,
    token_expires: String,
    lab: Option<LabFile>,
}

impl Up {
    fn binaries(&self) -> Result<&EnvtestBinaries> {
        self.binaries.as_ref().with_context(|| tr!("the programs were not found yet"))
    }

    fn pki(&self) -> Result<&certs::Pki> {
        self.pki.as_ref().with_context(|| tr!("no PKI yet"))
    }

    /// etcd's URL on port `port` (TLS: [`start_etcd`]).
    fn url(&self, port: usize) -> String {
        format!("https://127.0.0.1:{}", self.ports[port])
    }

    /// Starts `cmd` as `role`, in its own process group, its output in its log;
    /// `binary`: what it runs, when it is not the controller `cargo build` made.
    fn spawn(
        &mut self,
        role: &'static str,
        cmd: Cmd,
        binary: Option<Binary>,
        ports: &[(&str, u16)],
    ) -> Result<&mut Spawned> {
        let (log, pid_file) = (log(&self.dir, role), pid_file(&self.dir, role));
        let spawned = process::spawn_detached(role, &cmd, &log, &pid_file)?;
        let entry = lab_file::Process {
            role: role.into(),
            pid: spawned.pid,
            pid_file,
            binary: PathBuf::from(cmd.program()),
            args: cmd.arguments().to_vec(),
            source: binary.as_ref().map_or_else(|| "cargo build".into(), |b| b.source.clone()),
            version: binary.map(|b| b.version),
            log,
            ports: ports.iter().map(|(purpose, port)| (purpose.to_string(), *port)).collect(),
        };
        self.started.push((spawned, entry));
        Ok(&mut self.started.last_mut().with_context(|| tr!("nothing started"))?.0)
    }
}

/// What `lab up --provider envtest` does, in order.
pub fn up_plan(state_dir: &Path) -> Vec<Step<Up>> {
    let dir = shown(state_dir);
    let mut steps = vec![Step::own(
        tr!("find kube-apiserver and etcd: $KUBE_APISERVER/$ETCD, $KUBEBUILDER_ASSETS, PATH, \
             target/envtest, else go build (`cargo xtask envtest-bins`)"),
        |up: &mut Up| {
            Box::pin(async move {
                up.binaries = Some(binaries::find().await?);
                Ok(())
            })
        },
    )];
    steps.push(Step::run(crate::cargo::cargo([
        "build",
        "-p",
        crate::cargo::PACKAGE,
        "--bin",
        crate::cargo::BINARY,
    ])));
    steps.extend([
        Step::own(
            tr!("generate a CA, serving, admin and ServiceAccount keys into {dir}/pki (rcgen); choose free loopback ports", dir),
            |up: &mut Up| {
                Box::pin(async move {
                    labkit::files::create_dir(&up.dir)?;
                    up.pki = Some(certs::generate(&up.dir.join("pki"))?);
                    up.ports = free_ports()?;
                    Ok(())
                })
            },
        ),
        Step::own(tr!("start etcd (data in {dir}/etcd) and wait for its /health", dir), |up: &mut Up| {
            Box::pin(async move { start_etcd(up).await })
        }),
        Step::own(
            tr!("start kube-apiserver with envtest's flags, RBAC on; write {dir}/kubeconfig (admin); wait for /readyz", dir),
            |up: &mut Up| Box::pin(async move { start_api_server(up).await }),
        ),
        Step::api(
            format!(
                "kubectl --kubeconfig {dir}/kubeconfig apply --server-side --force-conflicts --field-manager={} -f manifests/rbac.yaml",
                manifests::FIELD_MANAGER
            ),
            |up: &mut Up| {
                Box::pin(async move {
                    let admin = up.admin.clone().with_context(|| tr!("no admin client"))?;
                    let mut record = Record::open(&up.dir, &up.name, Some(Envtest.name()))?;
                    for document in manifests::rbac(&up.target)? {
                        labkit::owned::apply(&admin, &mut record, "lab up", manifests::FIELD_MANAGER, document).await?;
                    }
                    Ok(())
                })
            },
        ),
        Step::api(
            format!(
                "kubectl --kubeconfig {dir}/kubeconfig create token {} --duration={}h > {dir}/controller.kubeconfig",
                controller::SERVICE_ACCOUNT,
                controller::TOKEN_SECONDS / 3600
            ),
            |up: &mut Up| Box::pin(async move { write_controller_kubeconfig(up).await }),
        ),
        Step::own(
            tr!("start the controller as its ServiceAccount and wait for its /readyz"),
            |up: &mut Up| Box::pin(async move { start_controller(up).await }),
        ),
        Step::own(tr!("write {path}", path = format!("{dir}/lab.json")), |up: &mut Up| {
            Box::pin(async move { write_lab(up).await })
        }),
    ]);
    steps
}

/// kube-apiserver, etcd and the controller as local processes.
pub struct Envtest;

impl Provider for Envtest {
    fn name(&self) -> &'static str {
        "envtest"
    }

    fn about(&self) -> &'static str {
        "kube-apiserver + etcd + the controller as local processes; no Docker needed"
    }

    fn offers(&self) -> Offers {
        Offers {
            place: "envtest".into(),
            local_control_plane: true,
            node: false,
            own_cluster: true,
            cluster_wide: true,
        }
    }

    fn flags(&self) -> &'static [&'static str] {
        &["--target"]
    }

    fn up<'a>(&'a self, name: &'a str, options: &'a UpOptions) -> Answer<'a, Option<LabFile>> {
        Box::pin(async move {
            let dir = project::lab_dir(name);
            if !options.dry_run
                && let Some(lab) = reuse_or_clean(name, &dir, &options.target).await?
            {
                return Ok(Some(lab));
            }
            let steps = up_plan(&dir);
            let target = options.target.clone();
            let mut up = Up { name: name.into(), dir, target, ..Up::default() };
            let cold_start = Instant::now();
            plan::print_or_execute(steps, &mut up, options.dry_run).await?;
            if !options.dry_run {
                let after = format!("{:.1}", cold_start.elapsed().as_secs_f64());
                labkit::progress!("{}", tr!("lab {name} is up in {after}s", name, after));
            }
            Ok(up.lab)
        })
    }

    fn down<'a>(&'a self, name: &'a str, dry_run: bool) -> Answer<'a, bool> {
        Box::pin(async move {
            let mut removed = false;
            let steps = down_plan(&project::lab_dir(name));
            plan::print_or_execute(steps, &mut removed, dry_run).await?;
            Ok(removed)
        })
    }

    fn status<'a>(&'a self, lab: &'a LabFile) -> Answer<'a, Health> {
        Box::pin(async move { Ok(health(lab).await) })
    }

    fn logs<'a>(&'a self, name: &'a str, follow: bool) -> Answer<'a, ()> {
        Box::pin(async move { logs::show(name, follow) })
    }

    /// kube-apiserver and etcd: found, or Go to build them.
    fn machine_checks(&self, _name: &str, machine: &Machine) -> Result<Vec<preflight::Check>> {
        let from = |b: &binaries::Binary| {
            let source = binaries::said(&b.source);
            tr!("{version} from {source}", version = b.version, source)
        };
        let found: Vec<(&str, Option<String>)> =
            machine.located.iter().map(|(n, b)| (*n, b.as_ref().map(from))).collect();
        Ok(vec![preflight::envtest_programs(&found, machine.go.as_deref(), machine.go_required)])
    }
}

/// An envtest lab that is up and healthy is reused; anything else under its
/// name is taken down so a fresh one can start.
async fn reuse_or_clean(name: &str, dir: &Path, target: &Target) -> Result<Option<LabFile>> {
    let why = match LabFile::read(dir) {
        Ok(Some(lab)) if lab.target != *target => tr!(
            "lab {name} keeps {kept}, not {target}: starting it anew for {target}",
            name,
            kept = lab.target,
            target
        ),
        Ok(Some(lab)) => {
            let health = health(&lab).await;
            let said = if health.healthy {
                tr!("lab {name} is already up and healthy; not starting another", name)
            } else {
                tr!("lab {name} is there but not healthy:", name)
            };
            labkit::progress!("{said}");
            for line in &health.lines {
                labkit::progress!("  {line}");
            }
            if health.healthy {
                return Ok(Some(lab));
            }
            tr!("cleaning it up and starting anew")
        }
        Ok(None) if dir.exists() => {
            tr!(
                "{path} holds an incomplete lab (no lab.json): cleaning it up",
                path = dir.display()
            )
        }
        Ok(None) => return Ok(None),
        Err(error) => tr!("warning: {error}; cleaning up", error = format!("{error:#}")),
    };
    labkit::progress!("{why}");
    Envtest.down(name, false).await?;
    Ok(None)
}

/// etcd over TLS, client and peer, answering only certificates of the lab's CA
/// ([`labkit::lab::ETCD_KUBECONFIG`]).
async fn start_etcd(up: &mut Up) -> Result<()> {
    let binary = up.binaries()?.etcd.clone();
    let (client, peer) = (up.url(0), up.url(1));
    let pki = up.pki()?.clone();
    let admin = kubeconfig::client_certificate(&pki.admin_cert_pem, &pki.admin_key_pem);
    let etcd_kubeconfig = up.dir.join(labkit::lab::ETCD_KUBECONFIG);
    kubeconfig::write(&etcd_kubeconfig, &up.name, &client, &pki.ca_pem, certs::ADMIN_USER, admin)?;
    let cmd = Cmd::new(binary.path.display().to_string())
        .args(certs::etcd_flags(&up.dir.join("pki")))
        .args([
            "--name=lab".to_string(),
            format!("--data-dir={}", up.dir.join("etcd").display()),
            format!("--listen-client-urls={client}"),
            format!("--advertise-client-urls={client}"),
            format!("--listen-peer-urls={peer}"),
            format!("--initial-advertise-peer-urls={peer}"),
            format!("--initial-cluster=lab={peer}"),
            // A lab's data is thrown away: durability costs start-up time for nothing.
            "--unsafe-no-fsync=true".to_string(),
        ]);
    let ports = [("client", up.ports[0]), ("peer", up.ports[1])];
    let client = labkit::lab::etcd_client(&up.dir).await?;
    let etcd = up.spawn(handle::ETCD, cmd, Some(binary), &ports)?;
    wait_ready("etcd /health", etcd, true, || probes::etcd_ready(client.clone())).await
}

async fn start_api_server(up: &mut Up) -> Result<()> {
    let binary = up.binaries()?.kube_apiserver.clone();
    let pki = up.pki()?.clone();
    let port = up.ports[2];
    // controller-runtime envtest's flags, plus our own PKI.
    let cmd = Cmd::new(binary.path.display().to_string()).args([
        format!("--etcd-servers={}", up.url(0)),
        format!("--cert-dir={}", up.dir.join("pki").display()),
        format!("--secure-port={port}"),
        "--bind-address=127.0.0.1".into(),
        "--advertise-address=127.0.0.1".into(),
        format!("--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}"),
        "--allow-privileged=true".into(),
        "--authorization-mode=RBAC".into(),
        // As envtest: with no kube-controller-manager there is no `default` ServiceAccount
        // in any namespace, and this plugin would reject every Pod for lack of it.
        // Every other default admission plugin (PodSecurity included) stays on.
        "--disable-admission-plugins=ServiceAccount".into(),
        format!("--service-account-issuer={SERVICE_ACCOUNT_ISSUER}"),
        // Lets the controller's TokenRequest get the whole 48 h it asks for.
        format!("--service-account-max-token-expiration={}h", controller::TOKEN_SECONDS / 3600),
    ]);
    let cmd = cmd.args(certs::api_server_flags(&up.dir.join("pki")));
    let admin = kubeconfig::client_certificate(&pki.admin_cert_pem, &pki.admin_key_pem);
    let url = format!("https://127.0.0.1:{port}");
    let kubeconfig = &up.dir.join("kubeconfig");
    kubeconfig::write(kubeconfig, &up.name, &url, &pki.ca_pem, certs::ADMIN_USER, admin)?;
    let probe = kubeconfig::probe_client(kubeconfig).await?;
    let api_server = up.spawn(handle::API_SERVER, cmd, Some(binary), &[("https", port)])?;
    wait_ready("kube-apiserver /readyz", api_server, true, || {
        probes::api_server_ready(probe.clone())
    })
    .await?;
    up.admin = Some(kubeconfig::client(kubeconfig).await?);
    Ok(())
}

async fn write_controller_kubeconfig(up: &mut Up) -> Result<()> {
    let admin = up.admin.clone().with_context(|| tr!("no admin client"))?;
    // TokenRequest: with no kube-controller-manager there are no legacy token Secrets.
    let (token, expires) = labkit::accounts::token(
        &admin,
        SERVICE_ACCOUNT_NAMESPACE,
        SERVICE_ACCOUNT,
        TOKEN_SECONDS,
        None,
    )
    .await?;
    let user = format!("system:serviceaccount:{SERVICE_ACCOUNT_NAMESPACE}:{SERVICE_ACCOUNT}");
    let url = format!("https://127.0.0.1:{}", up.ports[2]);
    let ca = &up.pki()?.ca_pem;
    kubeconfig::write(
        &up.dir.join("controller.kubeconfig"),
        &up.name,
        &url,
        ca,
        &user,
        serde_json::json!({ "token": token }),
    )?;
    up.token_expires = expires;
    Ok(())
}

async fn start_controller(up: &mut Up) -> Result<()> {
    let listen = SocketAddr::from((Ipv4Addr::LOCALHOST, up.ports[3]));
    let binary = project::target_dir().join("debug").join(crate::cargo::BINARY);
    let cmd = Cmd::new(binary.display().to_string())
        .args(controller::args(&up.dir.join("controller.kubeconfig"), listen))
        .args(up.target.flags());
    let controller = up.spawn(handle::CONTROLLER, cmd, None, &[("http", up.ports[3])])?;
    let url = format!("http://{listen}");
    wait_ready("controller /readyz", controller, true, || probes::controller_ready(url.clone()))
        .await
}

async fn write_lab(up: &mut Up) -> Result<()> {
    let admin = up.admin.clone().with_context(|| tr!("no admin client"))?;
    let version = admin.apiserver_version().await.context("GET /version")?.git_version;
    let listen = SocketAddr::from((Ipv4Addr::LOCALHOST, up.ports[3]));
    let controller = lab_file::Controller {
        url: format!("http://{listen}"),
        kubeconfig: up.dir.join("controller.kubeconfig"),
        service_account: format!("{SERVICE_ACCOUNT_NAMESPACE}/{SERVICE_ACCOUNT}"),
        token_expires: up.token_expires.clone(),
        log: log(&up.dir, handle::CONTROLLER),
    };
    let lab = LabFile {
        kubernetes_version: version,
        api_server_url: format!("https://127.0.0.1:{}", up.ports[2]),
        processes: up.started.iter().map(|(_, entry)| entry.clone()).collect(),
        ..Envtest.lab_file(&up.name, &up.dir, up.target.clone(), controller)
    };
    labkit::test_hook::at("lab up:lab.json")?;
    lab.write()?;
    up.lab = Some(lab);
    Ok(())
}

/// Loopback ports nobody listens on right now: bound together (so they differ), read, released.
fn free_ports<const N: usize>() -> Result<[u16; N]> {
    let (mut ports, mut listeners) = ([0; N], Vec::new());
    for port in &mut ports {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .with_context(|| tr!("cannot bind a loopback port"))?;
        *port = listener.local_addr()?.port();
        listeners.push(listener);
    }
    Ok(ports)
}
