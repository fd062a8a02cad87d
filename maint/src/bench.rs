//! `cargo maint bench`: how fast the controller heals, and what it costs,
//! against the current lab. What is measured, in which order and why:
//! [`bench`]. This verb builds the controller (the release build by
//! default, `cargo build --release -p controller --bin my-controller`), stops
//! the lab's own controller for the run and starts it again whatever
//! happened, prints the tables and writes `bench-<unix time>.{json,svg}` and
//! `latest.{json,svg}` into `--out` (`target/bench`).
//!
//! Every side runs on this machine. On a lab whose controller is a
//! Deployment (kind, an existing cluster) they run as that Deployment's
//! ServiceAccount (a token from the TokenRequest API, in a kubeconfig next to
//! lab.json while the run lasts) and share the lab's namespace
//! ([`places::Sharing`]): nothing cluster-wide is needed, as an attendee of
//! a room has nothing cluster-wide.

use std::{
    path::{Path, PathBuf},
    process::ExitCode,
    time::Duration,
};

use anyhow::{Context, Result, bail, ensure};
use bench::{
    chart, load, peers, phases,
    places::{self, Sharing},
    report::{self, Settings},
    run,
    subject::Spec,
};
use clap::{Args, ValueEnum};
use labkit::lab::Lab;
use labkit::{lab_file::Offers, project};

use bench::places::BY;
use labkit::record::Shared;
use serde_json::json;
use xtask::{borrow::Borrow, cargo, interrupt::Interrupts, lab::LabName};

/// Rounds of each kind in a block by default: short enough that a few slow
/// seconds of a shared machine land on every side (with 50, they still
/// decided p99s: docs/bench.md), long enough that restarting each side per
/// block stays a small share of the run.
const ROUNDS_PER_BLOCK: usize = 10;

#[derive(Args)]
pub struct BenchArgs {
    /// Rounds of each latency measure (self-heal, correction), for every subject and the floor alike; 1000 puts the p99's 95 % interval inside the series (with 500 its upper end is the largest sample).
    #[arg(long, default_value_t = 1000)]
    rounds: usize,
    /// The old short name of --rounds, refused: `-n` is the namespace in kubectl.
    #[arg(short = 'n', hide = true, value_parser = renamed_n)]
    _n: Option<String>,
    /// Length of the steady-state window (with a 1 s resync), e.g. 10s, 2s.
    #[arg(long, default_value = "10s", value_parser = controller::cli::parse_duration)]
    steady: Duration,
    /// Patches in the burst (coalescing: changes seen vs reconciles run).
    #[arg(long, default_value_t = 50)]
    burst: usize,
    /// Unrelated ConfigMaps created in the namespace for the memory measure (0: skip).
    #[arg(long, default_value_t = 10_000)]
    unrelated: usize,
    /// Creates in flight at once while making the unrelated ConfigMaps.
    #[arg(long, default_value_t = 32)]
    parallel: usize,
    /// Every side (the floor and each subject) is started afresh this many times; in each block all run at once, each on a my-config of its own, and the rounds take turns one by one. Default: one block per 10 rounds, at least 2 (100 for 1000).
    #[arg(long)]
    blocks: Option<usize>,
    /// Which build of my-controller to measure (built first).
    #[arg(long, value_enum, default_value_t = Build::Release)]
    build: Build,
    /// Restart the lab's kube-apiserver with an audit log for the run and
    /// report where each round's milliseconds went (its flags are put back after).
    #[arg(long)]
    phases: bool,
    /// Measure a peer in the same run: `go` (the course's program, bench/peers/course-verbatim, with bench/peers/course-go.patch), `controller-runtime` (bench/peers/controller-runtime), `kube-runtime` (stage 2's kube-runtime Controller keeping my-config through a template), or a command run with `sh -c`, KUBECONFIG set to the lab's controller kubeconfig whose context names the namespace to keep my-config in and MY_CONTROLLER_NAME its name. Repeatable.
    #[arg(long, value_name = "go|controller-runtime|kube-runtime|COMMAND")]
    peer: Vec<String>,
    /// Where the report and the sides' log are written (default: target/bench).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    #[command(flatten)]
    lab: LabName,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Build {
    Release,
    Debug,
}

/// `-n N` was `--rounds`; kubectl's `-n` is a namespace, so it is refused in one line.
fn renamed_n(rounds: &str) -> Result<String, String> {
    Err(format!("-n is a namespace in kubectl; the rounds are --rounds {rounds}"))
}

impl BenchArgs {
    fn settings(&self) -> Settings {
        Settings {
            rounds: self.rounds,
            blocks: self.blocks(),
            steady_seconds: self.steady.as_secs_f64(),
            burst: self.burst,
            unrelated: self.unrelated,
            parallel: self.parallel,
        }
    }

    /// `--blocks`, or one per [`ROUNDS_PER_BLOCK`] rounds (at least 2).
    fn blocks(&self) -> usize {
        self.blocks.unwrap_or_else(|| self.rounds.div_ceil(ROUNDS_PER_BLOCK).max(2))
    }

    fn check(&self) -> Result<()> {
        ensure!(self.rounds >= 1, "--rounds must be at least 1");
        ensure!(self.blocks != Some(0), "--blocks must be at least 1");
        ensure!(self.burst >= 1, "--burst must be at least 1");
        ensure!(self.parallel >= 1, "--parallel must be at least 1");
        ensure!(!self.steady.is_zero(), "--steady must be longer than 0");
        Ok(())
    }

    /// What only an envtest lab allows, refused on another in one line each.
    fn check_on(&self, offers: &Offers) -> Result<()> {
        if offers.local_control_plane {
            return Ok(());
        }
        let on = &offers.place;
        ensure!(
            !self.phases,
            "--phases restarts kube-apiserver with an audit log, which is not the bench's to \
             restart on {on}: drop --phases, or use an envtest lab"
        );
        ensure!(
            !self.peer.iter().any(|p| p == KUBE_RUNTIME),
            "--peer {KUBE_RUNTIME} installs stage 2's CustomResourceDefinition, cluster-wide, \
             which the bench does not do on {on}: drop it, or use an envtest lab"
        );
        Ok(())
    }
}

/// How long the sides' token lasts: longer than a run of 1000 rounds with
/// every peer (it is not renewed). It is bound to a Secret the run makes and
/// deletes: the token dies with it, whenever the run ends.
const SIDES_TOKEN_SECONDS: i64 = 12 * 3600;
/// The Secret the sides' token is bound to.
const TOKEN_SECRET: &str = "bench-sides-token";

/// The lab as the sides see it, when it is not the lab itself: on a lab
/// whose controller is a Deployment (kind, an existing cluster), a
/// kubeconfig for that Deployment's ServiceAccount — a token bound to a
/// Secret of the run's, in the borrow's folder — and a free loopback port
/// for ours. `None` on envtest, whose controller is a process with a
/// kubeconfig already.
async fn sides_here(lab: &Lab, record: &Shared) -> Result<Option<Lab>> {
    if lab.deployment().is_none() {
        return Ok(None);
    }
    let (namespace, account) = lab
        .controller_service_account()
        .split_once('/')
        .context("the lab's ServiceAccount is namespace/name")?;
    let secret = json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": TOKEN_SECRET, "namespace": namespace}});
    let client = lab.client();
    let made = {
        let mut record = record.lock().await;
        labkit::owned::apply(&client, &mut record, BY, places::MANAGER, secret).await?;
        record.find_named("Secret", namespace, TOKEN_SECRET).and_then(|e| e.uid.clone())
    };
    let uid = made.context("no uid")?;
    // No longer than the lab's own credential: a room's attendee may mint no longer token.
    let seconds = token_seconds_within(&lab.file().admin_kubeconfig, SIDES_TOKEN_SECONDS);
    let (token, expires) =
        labkit::accounts::token(&client, namespace, account, seconds, Some((TOKEN_SECRET, &uid)))
            .await?;
    let dir = lab.borrowed_dir();
    labkit::files::create_dir(&dir)?;
    let kubeconfig = dir.join("bench-controller.kubeconfig");
    let config = labkit::accounts::kubeconfig_with_token(lab.file(), &token)?;
    labkit::files::write_private(&kubeconfig, &serde_saphyr::to_string(&config)?)?;
    let port = std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0))
        .and_then(|l| l.local_addr())
        .context("no free loopback port for the controller under test")?
        .port();
    labkit::progress!(
        "the sides run here as ServiceAccount {namespace}/{account} (a token until {expires} or \
         until Secret {TOKEN_SECRET} is deleted, in {}), each keeping a ConfigMap of its own in namespace {}",
        kubeconfig.display(),
        lab.desired().namespace()
    );
    // The same lab, its controller a local process of ours with that kubeconfig, serving `url`.
    let mut file = lab.file().clone();
    file.controller.url = format!("http://127.0.0.1:{port}");
    file.controller.kubeconfig = kubeconfig;
    Ok(Some(lab.seen_as(file, lab.desired().clone(), true)))
}

/// The shortest token the API server issues (TokenRequest's minimum).
const SHORTEST_TOKEN: i64 = 600;

/// `seconds`, or less when the kubeconfig at `path` holds a token (a JWT)
/// that ends sooner: a token minted with it need not outlive it, and in a
/// room may not outlive the room's own (`xtask/src/room/guard.rs`).
fn token_seconds_within(path: &Path, seconds: i64) -> i64 {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let config: serde_json::Value = serde_saphyr::from_str(&text).unwrap_or_default();
    let expires = config["users"][0]["user"]["token"].as_str().and_then(expiry);
    let left = |expires: i64| expires - k8s_openapi::jiff::Timestamp::now().as_second();
    expires.map_or(seconds, |expires| seconds.min(left(expires).max(SHORTEST_TOKEN)))
}

/// A JWT's `exp` claim (seconds since the epoch); nothing is verified.
fn expiry(token: &str) -> Option<i64> {
    use base64::{Engine as _, engine::general_purpose::URL_SAFE_NO_PAD};
    let payload = URL_SAFE_NO_PAD.decode(token.split('.').nth(1)?).ok()?;
    serde_json::from_slice::<serde_json::Value>(&payload).ok()?["exp"].as_i64()
}

pub async fn run(args: BenchArgs) -> Result<ExitCode> {
    args.check()?;
    let mut lab = Lab::find_named(&args.lab.name).await?;
    args.check_on(&lab.file().offers)?;
    let stage2 = args.peer.iter().any(|p| p == KUBE_RUNTIME);
    let built = build(args.build, stage2)?;
    let mut specs = vec![Spec::Ours { binary: built.ours.clone() }];
    for peer in &args.peer {
        specs.push(match peer.as_str() {
            "go" => peers::course_go()?,
            "controller-runtime" => peers::controller_runtime()?,
            KUBE_RUNTIME => peers::kube_runtime(&lab, built.stage2.as_deref().context("built")?),
            command => Spec::Peer { label: None, command: command.into(), pinned: false },
        });
    }
    let dir = args.out.clone().unwrap_or_else(|| project::target_dir().join("bench"));
    labkit::files::create_dir(&dir)?;
    let log = dir.join("controller.log");
    let labels = specs.iter().map(Spec::label).collect::<Vec<_>>().join(", ");
    labkit::progress!(
        "bench: {labels} against lab {}; their log: {}",
        args.lab.name,
        log.display()
    );
    // Caught before anything is made: an interrupted run puts the lab back
    // like a finished one (xtask::borrow).
    let mut interrupts = Interrupts::catch(&lab.file().state_dir.join("hangup.log"))?;
    labkit::progress!("stopping the lab's own controller for the run");
    let mut borrow = Borrow::begin(&mut lab, BY).await?;
    let record = borrow.record.clone();
    let measured = match borrow.stopped().and_then(|()| labkit::test_hook::at("stopped")) {
        Err(error) => Err(error),
        Ok(()) => {
            let interrupted = interrupts.first("the controllers under test");
            measure(&mut lab, &args, (&specs, &built), &log, &record, interrupted).await
        }
    };
    drop(record);
    let interrupted = interrupts.seen.is_some();
    // The API server back on its own flags, and the controller with them.
    let restored = borrow.put_back(&mut lab, interrupts).await;
    if interrupted {
        restored?;
        bail!(
            "interrupted: the controllers under test were stopped and the lab put back as it was"
        );
    }
    let (mut report, spans, audit) = measured?;
    restored?;
    if let Some(audit) = audit {
        report.phases = phases::rows(&spans, &audit.requests()?, lab.desired().name());
    }

    println!("{}", bench::render::render(&report));
    let chart = chart::of(&report);
    for path in bench::kept::write(&dir, &report, &chart)? {
        eprintln!("wrote {}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// The run with what its sides need: a place each ([`places`]) with the
/// Role that lets them keep my-config there, stage 2's CRD, RBAC and
/// template for the kube-runtime peer, the audit log for `--phases`; the
/// Role, the sides' ConfigMaps, the unrelated ones and stage 2 are taken
/// away again whatever happened, `interrupted` included (the sides'
/// processes are killed as the run is dropped). What is made is in the
/// lab's `record` first, so the borrow's put-back deletes what a killed run left.
/// The sides run here ([`sides_here`]) on a lab whose controller is a Deployment.
async fn measure(
    lab: &mut Lab,
    args: &BenchArgs,
    (specs, built): (&[Spec], &Built),
    log: &Path,
    record: &Shared,
    interrupted: impl Future<Output = ()>,
) -> Result<(report::Report, Vec<phases::Span>, Option<phases::Audit>)> {
    let stage2 = built.stage2.is_some();
    let result = async {
        let here = sides_here(lab, record).await?;
        let sharing = match here {
            Some(_) => Sharing::OneNamespace,
            None => Sharing::NamespaceEach,
        };
        let own = places::Place::kept_in(lab);
        places::grant(lab, &places::of_sides(&own, specs, sharing), record).await?;
        labkit::test_hook::at("bench:granted")?;
        if stage2 {
            peers::kube_runtime_install(lab).await?;
        }
        let audit = match args.phases {
            true => Some(phases::Audit::enable(lab).await?),
            false => None,
        };
        let sides = here.as_ref().unwrap_or(lab);
        let (report, spans) =
            run::measure(sides, &args.settings(), (specs, sharing), &built.floor, log).await?;
        anyhow::Ok((report, spans, audit))
    };
    let result = tokio::select! {
        result = result => result,
        () = interrupted => Err(anyhow::anyhow!("interrupted")),
    };
    let mut cleanup = Vec::new();
    let revoked = places::revoke(lab, record).await;
    cleanup.push(revoked.context("could not take the sides' Role and ConfigMaps away"));
    let unrelated = load::Unrelated::of(lab).await;
    cleanup.push(
        match unrelated {
            Ok(unrelated) => unrelated.delete_all().await,
            Err(e) => Err(e),
        }
        .context("could not delete the unrelated ConfigMaps"),
    );
    if stage2 {
        cleanup.push(labkit::stage2::uninstall(lab).await.context("could not take stage 2 away"));
    }
    let measured = result?;
    cleanup.into_iter().collect::<Result<Vec<()>>>()?;
    Ok(measured)
}

/// The `--peer` that measures kube-runtime's `Controller` (stage 2).
const KUBE_RUNTIME: &str = "kube-runtime";

/// What the bench runs, as cargo built it.
struct Built {
    ours: PathBuf,
    /// Always the release build: a floor is no floor if the bench's own loop
    /// is slower than what it is compared with.
    floor: PathBuf,
    /// Stage 2, release, when the kube-runtime peer is measured.
    stage2: Option<PathBuf>,
}

/// `cargo build [--release] -p controller --bin my-controller`, then `cargo
/// build --release -p bench --bin bench-floor` (with `-p controller --example
/// stage2_crd` for the kube-runtime peer).
///
/// On Linux the release builds are the image's own static build
/// ([`xtask::image::StaticTarget::release_build`]): the bench measures the
/// binary the image ships, and the dependencies compile once for both (CI
/// builds both).
fn build(build: Build, stage2: bool) -> Result<Built> {
    use xtask::cargo::{BINARY, PACKAGE};
    let target = project::target_dir();
    let image_target = match cfg!(target_os = "linux") {
        true => Some(xtask::image::StaticTarget::detect()?),
        false => None,
    };
    let release_dir = match &image_target {
        Some(t) => t.release_dir(&target),
        None => target.join("release"),
    };
    let release = |args: &[&str]| match &image_target {
        Some(t) => t.release_build(args),
        None => cargo::cargo([&["build", "--release"], args].concat()),
    };
    let ours = match build {
        Build::Release => {
            release(&["-p", PACKAGE, "--bin", BINARY])
                .run()
                .context("building the controller failed")?;
            release_dir.join(BINARY)
        }
        Build::Debug => {
            let debug = cargo::cargo(["build", "-p", PACKAGE, "--bin", BINARY]);
            debug.run().context("building the controller failed")?;
            target.join("debug").join(BINARY)
        }
    };
    let mut floor = vec!["-p", "bench", "--bin", "bench-floor"];
    if stage2 {
        floor.extend(["-p", PACKAGE, "--example", "stage2_crd"]);
    }
    release(&floor).run().context("building the floor failed")?;
    let built = Built {
        ours,
        floor: release_dir.join("bench-floor"),
        stage2: stage2.then(|| release_dir.join("examples/stage2_crd")),
    };
    for binary in [&built.ours, &built.floor].into_iter().chain(&built.stage2) {
        ensure!(binary.is_file(), "cargo built no {}", binary.display());
    }
    Ok(built)
}

#[cfg(test)]
mod tests {
    use base64::{Engine as _, engine::general_purpose::URL_SAFE_NO_PAD};

    #[test]
    fn a_jwts_expiry_is_read_from_its_payload() {
        let payload = URL_SAFE_NO_PAD.encode(r#"{"exp":1767225600,"sub":"x"}"#);
        assert_eq!(super::expiry(&format!("e30.{payload}.c2ln")), Some(1767225600));
        assert_eq!(super::expiry("not-a-jwt"), None);
    }
}
