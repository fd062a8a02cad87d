//! The part of `cargo maint test` on a cluster the kit did not make
//! ([`crate::room_cluster`]): a room of three attendees, each attendee's lab
//! up at the same time with their own kubeconfig, the e2e suite in the first and
//! the course's four experiments in the others,
//! `xtask/tests/existing_cluster.rs` (isolation, every escalation an attendee
//! might try, rescheduling, the grader), and the cluster left exactly as it was.
//! The instructor's kubeconfig names its CA by a file path, as many do: the
//! attendees' kubeconfigs must carry it inline.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context as _, Result, ensure};
use base64::Engine as _;
use labkit::command::Cmd;

use super::section;
use crate::room_cluster::{self, REGISTRY_HOST};
use xtask::lab::kind::NodeImage;
use xtask::room::{RoomCommand, RoomOptions};

/// The room's name, and its attendees' labs.
pub const ROOM: &str = "test-room";
pub const LABS: [&str; 3] = ["room-attendee-01", "room-attendee-02", "room-attendee-03"];
/// The attendees' namespaces' prefix (`attendee-01`, …), here and in the room bench.
pub const PREFIX: &str = "attendee";
/// Tells `xtask/tests/existing_cluster.rs` where the room's kubeconfigs are.
pub const ROOM_DIR_ENV: &str = "LAB_ROOM_DIR";
/// Tells it the image its probe pods run (Debian with curl, in the room's registry).
pub const DEBIAN_ENV: &str = "LAB_ROOM_DEBIAN_IMAGE";

pub async fn part(node_image: Option<&str>) -> Result<ExitCode> {
    section(
        "an existing cluster: kind CLI, one control plane and two workers, a registry built from distribution v3",
    );
    let node =
        NodeImage::parse(node_image).reference(xtask::lab::kind::kind_version().as_deref())?;
    let mut cluster = room_cluster::make(&node).await?;
    forget_an_interrupted_run(ROOM, &LABS)?;
    let admin = xtask::lab::kubeconfig::client(&cluster.kubeconfig).await?;
    let before = crate::cluster::snapshot(&admin).await?;
    let instructor = with_ca_file(&cluster.kubeconfig)?;
    let room = || RoomOptions {
        kubeconfig: Some(instructor.clone()),
        context: Some(cluster.context.clone()),
        name: ROOM.into(),
    };
    section("room up --attendees 3");
    let up = RoomCommand::Up {
        attendees: 3,
        duration: xtask::room::TokenSeconds(2 * 3600),
        _token_hours: None,
        prefix: PREFIX.into(),
        room: room(),
    };
    xtask::room::run(up).await?;
    let result = attendees(&cluster.debian).await;
    section("lab down for each attendee, room down");
    for name in LABS {
        xtask::lab::down::run(name, false).await?;
    }
    xtask::room::run(RoomCommand::Down { room: room() }).await?;
    let after = crate::cluster::snapshot(&admin).await?;
    crate::cluster::difference(&before, &after)?;
    eprintln!("the cluster is as it was: {} objects, the same before and after", after.len());
    cluster.remove_now();
    result
}

/// The room's cluster is new (or made again): its folder and its attendees' labs recorded
/// by an interrupted run name one that is gone, and would stop `room up`: removed.
pub(crate) fn forget_an_interrupted_run(room: &str, labs: &[impl AsRef<str>]) -> Result<()> {
    let labs = labs.iter().map(|l| labkit::project::lab_dir(l.as_ref()));
    for dir in labs.chain([xtask::room::room_dir(room)]) {
        if labkit::files::remove_dir(&dir)? {
            eprintln!("removed {}: left by an interrupted run", labkit::project::shown(&dir));
        }
    }
    Ok(())
}

/// `lab up --provider existing` for the `i`th attendee of `room` (from 0), as they type it
/// with the kubeconfig `room up` wrote them: `cargo xtask`, as this process's own binary may
/// have been rebuilt by the tests before (its path then names a deleted file).
pub(crate) fn attendee_lab_up(room: &str, i: usize, lab: &str, registry: &str) -> Cmd {
    let kubeconfig = xtask::room::room_dir(room).join(format!("{PREFIX}-{:02}.kubeconfig", i + 1));
    let up = ["xtask", "lab", "up", "--provider", "existing", "--name", lab, "--registry"];
    xtask::cargo::cargo(up).args([registry, "--kubeconfig"]).path(&kubeconfig)
}

/// kind's kubeconfig with its CA moved into a file beside it, named by a
/// relative path: `target/room-cluster/instructor/{kubeconfig,ca.crt}`.
pub(crate) fn with_ca_file(kind: &Path) -> Result<PathBuf> {
    let dir = labkit::project::target_dir().join("room-cluster/instructor");
    std::fs::create_dir_all(&dir)?;
    let text = std::fs::read_to_string(kind)?;
    let mut config: serde_json::Value = serde_saphyr::from_str(&text)?;
    let cluster = &mut config["clusters"][0]["cluster"];
    let data = cluster["certificate-authority-data"].as_str().context("kind's CA is inline")?;
    let pem = base64::engine::general_purpose::STANDARD.decode(data)?;
    labkit::files::write_public(&dir.join("ca.crt"), pem)?;
    cluster["certificate-authority"] = "ca.crt".into();
    cluster.as_object_mut().context("a cluster entry")?.remove("certificate-authority-data");
    let path = dir.join("kubeconfig");
    labkit::files::write_private(&path, serde_saphyr::to_string(&config)?)?;
    eprintln!("the instructor's kubeconfig, its CA in a file beside it: {}", path.display());
    Ok(path)
}

/// Each attendee's lab up at once, the e2e suite in each, then the tests.
async fn attendees(debian: &str) -> Result<ExitCode> {
    section("lab up --provider existing, three attendees at once");
    let up = |i: usize| {
        (format!("lab up for {}", LABS[i]), attendee_lab_up(ROOM, i, LABS[i], REGISTRY_HOST))
    };
    crate::side_by_side::shown(&crate::side_by_side::run("room-logs", vec![up(0), up(1), up(2)]))?;
    // The whole suite in one attendee's namespace; in the others, the course's four
    // experiments at once: each lab works, and the suite is not run three times over
    // (350 s of CI's critical path). Three suites at once on two cores made timing-bound
    // checks (a pod's 10 s reconcile inside its 10 s grace) fail for want of CPU.
    let mut failed = Vec::new();
    section(format!("e2e suite in {}'s namespace", LABS[0]));
    if xtask::e2e::run(LABS[0], None, xtask::output::Format::Text)? != ExitCode::SUCCESS {
        failed.push(LABS[0].to_string());
    }
    section(format!("the course's four experiments in {:?}' namespaces at once", &LABS[1..]));
    let others = LABS[1..].iter().map(|name| async move {
        let result = course_experiments(name).await;
        result.map_err(|e| format!("{name}: {e:#}"))
    });
    for result in futures::future::join_all(others).await {
        if let Err(e) = result {
            eprintln!("the course's experiments failed in {e}");
            failed.push(e);
        }
    }
    section("xtask/tests/existing_cluster.rs");
    let tests = xtask::cargo::cargo([
        "test",
        "-p",
        "xtask",
        "--test",
        "existing_cluster",
        "--",
        "--test-threads=1",
        // Each escalation tried is one line of its own: shown.
        "--nocapture",
    ])
    .env(labkit::lab::NAME_ENV, LABS[0])
    .env(ROOM_DIR_ENV, xtask::room::room_dir(ROOM).display().to_string())
    .env(DEBIAN_ENV, debian)
    .run();
    ensure!(failed.is_empty(), "the suite or the experiments failed: {failed:?}");
    tests?;
    Ok(ExitCode::SUCCESS)
}

/// The course's four experiments (实验 1–4 of step 4; dedup is step 3's).
const COURSE: [&str; 4] =
    ["create_on_start", "self_heal_on_delete", "correct_on_patch", "idempotent_rerun"];

/// The course's four experiments against lab `name`, in the course's order.
pub(crate) async fn course_experiments(name: &str) -> Result<()> {
    let mut lab = labkit::lab::Lab::find_named(name).await?;
    for test in COURSE {
        let experiment = grader::experiments::find(test).with_context(|| format!("no {test}"))?;
        (experiment.run)(&mut lab).await.with_context(|| test.to_string())?;
    }
    Ok(())
}
