//! `cargo maint room-bench --attendees N`: a room of N on one cluster, as an
//! instructor's morning goes — `room up`, every attendee's `lab up` at once
//! (or in waves), the course's experiments in every namespace, self-heal with
//! all of them running and then with one alone, the instructor grading every
//! attendee's program, every `lab down`, `room down` — timed, with the API
//! server's latency and memory and the controllers' memory; the cluster's
//! objects the same before and after. Writes `docs/samples/room-N.{md,json,svg}`
//! (docs/room-bench.md says what each figure is).

mod attendees;
mod cluster_metrics;
mod figures;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use anyhow::{Result, ensure};
use clap::Args;
use xtask::cargo::cargo;
use xtask::room::{RoomCommand, RoomOptions, TokenSeconds};

use crate::room_cluster::{self, REGISTRY_HOST};
use crate::test::existing::PREFIX;
use figures::Report;

/// The room's name.
const ROOM: &str = "room-bench";

#[derive(Args)]
pub struct RoomBenchArgs {
    /// How many attendees.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=99))]
    attendees: u32,
    /// How many attendees' `lab up` start together; a wave ends before the next starts [default: all at once].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=99))]
    wave: Option<u32>,
    /// How many grades run at once, each on an instructor's lab of its own.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=10))]
    graders: u32,
    /// Self-heal rounds in each namespace with all running; one alone then runs N times as many.
    #[arg(long, default_value_t = 20)]
    rounds: usize,
    /// The room cluster's node image (`built`: `cargo maint node-image`'s).
    #[arg(long, default_value = "built")]
    node_image: String,
    /// A real cluster instead of the room cluster made here: the instructor's kubeconfig.
    #[arg(long, value_name = "FILE", requires = "registry")]
    kubeconfig: Option<PathBuf>,
    /// The instructor's context there [default: the kubeconfig's current one].
    #[arg(long, value_name = "NAME", requires = "kubeconfig")]
    context: Option<String>,
    /// The registry the cluster's nodes pull from, as `lab up --registry` takes it.
    #[arg(long, value_name = "HOST", requires = "kubeconfig")]
    registry: Option<String>,
}

/// The cluster the room runs on: made here (deleted when dropped), or given.
struct Cluster {
    kubeconfig: PathBuf,
    context: Option<String>,
    registry: String,
    made: Option<room_cluster::RoomCluster>,
}

/// Set by a Ctrl-C: the phase under way ends, the next does not start.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// The next phase of the morning, unless a Ctrl-C came: then everything goes down.
fn phase(title: String) -> Result<()> {
    ensure!(!INTERRUPTED.load(Ordering::SeqCst), "interrupted before: {title}");
    crate::test::section(title);
    Ok(())
}

pub async fn run(args: RoomBenchArgs) -> Result<ExitCode> {
    // Caught, so that the labs, the room and the cluster go down whatever the moment.
    tokio::spawn(async {
        while tokio::signal::ctrl_c().await.is_ok() {
            eprintln!("interrupted: the phase under way ends, then every lab and the room go down");
            INTERRUPTED.store(true, Ordering::SeqCst);
        }
    });
    let mut cluster = match &args.kubeconfig {
        Some(kubeconfig) => Cluster {
            kubeconfig: kubeconfig.clone(),
            context: args.context.clone(),
            registry: args.registry.clone().unwrap_or_default(),
            made: None,
        },
        None => {
            let node = xtask::lab::kind::NodeImage::parse(Some(&args.node_image))
                .reference(xtask::lab::kind::kind_version().as_deref())?;
            let made = room_cluster::make(&node).await?;
            Cluster {
                kubeconfig: crate::test::existing::with_ca_file(&made.kubeconfig)?,
                context: Some(made.context.clone()),
                registry: REGISTRY_HOST.into(),
                made: Some(made),
            }
        }
    };
    let result = bench(&args, &cluster).await;
    if let Some(made) = cluster.made.as_mut() {
        made.remove_now();
    }
    let report = result?;
    let name = format!("room-{}", args.attendees);
    let dir = labkit::project::target_dir().join("room-bench");
    std::fs::create_dir_all(&dir)?;
    for (ext, text) in
        [("md", report.markdown()), ("json", report.json()?), ("svg", report.timeline_svg())]
    {
        std::fs::write(dir.join(format!("{name}.{ext}")), &text)?;
        labkit::project::write_sample(&format!("{name}.{ext}"), &text)?;
    }
    println!("{}", report.markdown());
    eprintln!("written: {}/{name}.{{md,json,svg}}", labkit::project::shown(&dir));
    ensure!(report.failures.is_empty(), "not everything passed: {:?}", report.failures);
    Ok(ExitCode::SUCCESS)
}

/// The morning, in order; the room and every lab down whatever happened.
async fn bench(args: &RoomBenchArgs, cluster: &Cluster) -> Result<Report> {
    let n = args.attendees as usize;
    let admin = cluster_metrics::client(&cluster.kubeconfig, cluster.context.as_deref()).await?;
    let labs: Vec<String> = (1..=n).map(|i| format!("{ROOM}-{i:02}")).collect();
    crate::test::existing::forget_an_interrupted_run(ROOM, &labs)?;
    let before = crate::cluster::snapshot(&admin).await?;
    let api_before = cluster_metrics::api_server(&admin).await?;
    let mut report =
        Report::new(n, args.wave.unwrap_or(args.attendees), args.graders, &admin).await?;
    let room = || RoomOptions {
        kubeconfig: Some(cluster.kubeconfig.clone()),
        context: cluster.context.clone(),
        name: ROOM.into(),
    };
    crate::test::section("the builds every laptop has after its first lab up, before the timing");
    cargo(["build", "-p", "xtask", "-p", "controller", "--bin", "xtask", "--bin", "my-controller"])
        .run()?;
    xtask::image::build(xtask::image::resolve(xtask::image::Builder::Auto)).await?;
    crate::test::section(format!("room up --attendees {n}"));
    let started = Instant::now();
    let up = RoomCommand::Up {
        attendees: args.attendees,
        duration: TokenSeconds(2 * 3600),
        _token_hours: None,
        prefix: PREFIX.into(),
        room: room(),
    };
    xtask::room::run(up).await?;
    report.room_up = started.elapsed();
    let mut timeline = attendees::Timeline::new(started, n);
    let morning = morning(args, cluster, &admin, &labs, &mut report, &mut timeline).await;
    crate::test::section("lab down for every attendee left, room down");
    let left: Vec<&String> = labs.iter().filter(|l| labkit::project::lab_dir(l).exists()).collect();
    report.failures.extend(attendees::down(&left, &labs, &mut timeline));
    let down = Instant::now();
    xtask::room::run(RoomCommand::Down { room: room() }).await?;
    report.room_down = down.elapsed();
    report.api_server = cluster_metrics::api_server(&admin).await?.since(&api_before);
    report.timeline = timeline;
    report.failures.extend(morning.err().map(|e| format!("{e:#}")));
    let after = crate::cluster::snapshot(&admin).await?;
    crate::cluster::difference(&before, &after)?;
    report.objects = after.len();
    Ok(report)
}

/// From the labs up to the grades; the labs stay up for [`bench`] to take down.
async fn morning(
    args: &RoomBenchArgs,
    cluster: &Cluster,
    admin: &kube::Client,
    labs: &[String],
    report: &mut Report,
    timeline: &mut attendees::Timeline,
) -> Result<()> {
    let n = labs.len();
    let wave = args.wave.map_or(n, |w| w as usize);
    phase(format!("lab up --provider existing: {n} attendees, {wave} at once"))?;
    let failed = attendees::up(labs, wave, &cluster.registry, timeline);
    ensure!(failed.is_empty(), "lab up failed for {failed:?}");
    report.controllers_idle = cluster_metrics::controllers_memory(admin, PREFIX).await?;
    phase(format!("the course's experiments in {n} namespaces at once"))?;
    report.failures.extend(attendees::experiments(labs, timeline).await);
    phase(format!("self-heal, {} rounds in each of {n} namespaces", args.rounds))?;
    report.heal_all = attendees::heal_in_turn(labs, args.rounds).await?;
    phase(format!("self-heal, the same in lockstep: {n} deletes at once"))?;
    report.heal_lockstep = attendees::heal_at_once(labs, args.rounds).await?;
    phase(format!("self-heal in {}, quiet, then with attendee 01's list storm", labs[1]))?;
    let quiet = attendees::heal_beside_a_storm(&labs[1], admin, args.rounds * 5, false).await?;
    let stormed = attendees::heal_beside_a_storm(&labs[1], admin, args.rounds * 5, true).await?;
    report.storm = figures::Storm {
        quiet: (quiet.0, quiet.1),
        stormed: (stormed.0, stormed.1),
        lists: stormed.2,
    };
    report.controllers_busy = cluster_metrics::controllers_memory(admin, PREFIX).await?;
    phase(format!("the instructor grades {n} programs, {} at once", args.graders))?;
    let graded = attendees::grade(cluster, args.graders as usize, n, timeline)?;
    report.grading = graded.total;
    report.room_table = graded.table;
    report.failures.extend(graded.failures);
    phase(format!("self-heal with one controller alone: {} rounds", n * args.rounds))?;
    let others: Vec<&String> = labs[1..].iter().collect();
    report.failures.extend(attendees::down(&others, labs, timeline));
    report.heal_alone = attendees::heal_in_turn(&labs[..1], n * args.rounds).await?;
    report.failures.extend(attendees::down(&[&labs[0]], labs, timeline));
    Ok(())
}
