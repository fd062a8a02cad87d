//! `grade` and `bench` borrow a lab: its controller stopped while they run a
//! program (the one under grade, the bench's sides) with grants of their
//! own. Whatever ends them — a result, a failure in any row or round, a
//! failed stop, Ctrl-C, SIGTERM, SIGHUP, further signals — the lab is put
//! back ([`Borrow::put_back`]): the process groups they started killed,
//! the files holding their tokens removed, every object they made deleted
//! (their entries of the lab's record), my-config writable and as desired,
//! the lab's controller running and ready.
//!
//! The borrow is in the lab's record before the controller is stopped, and
//! each process group and object as it is made (its token files in one
//! folder), so a borrower that is killed outright leaves what is needed to
//! put the lab back: its watchdog ([`watchdog`]) does so a second after it
//! died, and should that be gone too, `grade`, `bench`, `lab up`, `lab
//! controller`, `e2e` and `exp` put a lab left borrowed back first
//! ([`put_back_if_left`]), `lab down` kills what it left running
//! ([`stop_leftovers`]).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, Result};
use kube::api::{DeleteParams, Preconditions};

use crate::interrupt::Interrupts;
use labkit::lab::Lab;
use labkit::{
    record::{Borrow as Borrowed, Record, Shared},
    tr,
};

/// How long deleting what a borrower made may take: an object, and a
/// collection (the bench's 10 000 unrelated ConfigMaps take minutes).
const DELETE_WITHIN: Duration = Duration::from_secs(120);
const COLLECTION_WITHIN: Duration = Duration::from_secs(600);

/// A lab whose controller `by` has stopped.
pub struct Borrow {
    by: &'static str,
    /// The record, for the work to add what it makes ([`labkit::owned`]),
    /// the groups it starts and the files it writes.
    pub record: Shared,
    /// Stopping the controller failed: nothing may run, the lab is put back.
    stop_failed: Option<anyhow::Error>,
    /// Held until the lab is put back.
    _lock: labkit::lock::Held,
    watchdog: std::process::Child,
}

/// A shell in a process group of its own that waits for this process to end,
/// then runs `cargo xtask lab controller start`, which puts a lab left
/// borrowed back: a borrower killed outright (SIGKILL, the OOM killer) leaves
/// the lab's controller stopped, its program running and its tokens valid for
/// a second, not until someone runs the next command. Stopped by
/// [`Borrow::put_back`] when the borrow ends as it should.
fn watchdog(name: &str, dir: &std::path::Path) -> Result<std::process::Child> {
    let pid = std::process::id();
    let script = format!(
        "while kill -0 {pid} 2>/dev/null; do sleep 1; done; exec cargo xtask lab controller start --name {name}"
    );
    let watch = labkit::command::Cmd::argv(["sh", "-c", &script]).dir(labkit::project::root());
    watch.spawn_to_log(&dir.join("watchdog.log"))
}

impl Borrow {
    /// Puts back a lab an earlier borrower left, records this borrow, and
    /// stops the lab's controller (a failure is kept for [`Borrow::stopped`]).
    pub async fn begin(lab: &mut Lab, by: &'static str) -> Result<Borrow> {
        let dir = lab.file().state_dir.clone();
        let name = lab.file().name.clone();
        let lock = labkit::lock::take(&dir, &tr!("lab {name}", name))?;
        let _ = std::fs::remove_file(dir.join("watchdog.log"));
        let mut record = Record::open(&dir, &name, Some(&lab.file().provider))?;
        if let Some(earlier) = record.borrow.clone() {
            left_behind(&earlier)?;
            record = put_back(lab, record, earlier.by.as_str()).await?;
        }
        let since = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs());
        // This process's binary (`xtask`, `maint`), as its command line names it.
        let exe = std::env::current_exe().ok();
        let program = exe.and_then(|p| Some(p.file_stem()?.to_string_lossy().into_owned()));
        record.borrow = Some(Borrowed {
            by: by.into(),
            program: program.unwrap_or_default(),
            pid: std::process::id(),
            since_unix: since.unwrap_or_default(),
            ..Borrowed::default()
        });
        record.save()?;
        let watchdog = watchdog(&name, &dir)?;
        let record = record.shared();
        lab.record = Some(record.clone());
        let stop_failed = lab.stop_controller().await.err();
        Ok(Borrow { by, record, stop_failed, _lock: lock, watchdog })
    }

    /// `Ok` when the controller was stopped: the work may run.
    pub fn stopped(&mut self) -> Result<()> {
        let not_stopped = |e: anyhow::Error| e.context(tr!("could not stop the lab's controller"));
        self.stop_failed.take().map_or(Ok(()), |error| Err(not_stopped(error)))
    }

    /// Puts the lab back (see the module's text); each further signal kills
    /// the borrower's process groups at once and says that the lab is still
    /// being put back. Every part is tried; the first failure is returned.
    pub async fn put_back(mut self, lab: &mut Lab, signals: Interrupts) -> Result<()> {
        let dir = lab.file().state_dir.clone();
        // A test's second signal comes here; a failure it asks for is not one of put-back's.
        let _ = labkit::test_hook::at("put_back");
        signals.further(move |signal| {
            eprintln!(
                "{}",
                tr!("{signal}: still putting the lab back (what it started is killed now)", signal)
            );
            if let Ok(Some(record)) = Record::load(&dir) {
                stop_leftovers(&record);
            }
        });
        // The work is over: what it recorded is read once, and the lab forgets the shared copy.
        let record = self.record.lock().await.clone();
        lab.record = None;
        let put = put_back(lab, record, self.by).await.map(|_| ());
        // SAFETY: killpg(2) of the watchdog's own process group; no memory is involved.
        unsafe { libc::killpg(self.watchdog.id() as libc::pid_t, libc::SIGKILL) };
        let _ = self.watchdog.wait();
        put
    }
}

/// Says that a borrower which ended left the lab borrowed. One that runs holds the
/// lab's lock ([`labkit::lock`]), which every caller holds now; a borrower that still
/// runs is refused all the same, should a caller ever not.
fn left_behind(earlier: &Borrowed) -> Result<()> {
    let (by, pid) = (format!("cargo {} {}", earlier.program, earlier.by), earlier.pid);
    let alive =
        labkit::process::is_alive(pid) && labkit::process::belongs_to(pid, &earlier.program);
    anyhow::ensure!(
        !alive || pid == std::process::id(),
        tr!("lab is in use by `{by}` (pid {pid})", by, pid)
    );
    let said = tr!(
        "the lab was left borrowed by `{by}` (pid {pid}, no longer running): putting it back first",
        by,
        pid
    );
    eprintln!("{said}");
    Ok(())
}

/// Kills the process groups a borrow recorded and removes its token files:
/// what must not outlive the borrower, whatever else is done with the lab.
pub fn stop_leftovers(record: &Record) {
    if let Some(borrow) = &record.borrow {
        for group in &borrow.groups {
            if labkit::process::kill_group(*group) {
                let (pgid, by) = (group.pgid, &borrow.by);
                labkit::progress!(tr!("  killed process group {pgid} (started by {by})", pgid, by));
            }
        }
    }
    let dir = record.borrowed_dir();
    if dir.exists() && std::fs::remove_dir_all(&dir).is_ok() {
        let dir = labkit::project::shown(&dir);
        labkit::progress!(tr!("  removed {dir} (the borrow's token files)", dir));
    }
}

/// A lab a killed borrower left is put back before another command uses it
/// (`lab up`, `lab controller`, `e2e`, `exp`); a lab never borrowed is left as it is.
pub async fn put_back_if_left(name: &str) -> Result<()> {
    let Some(mut record) = Record::load(&labkit::project::lab_dir(name))? else { return Ok(()) };
    let Some(earlier) = record.borrow.clone() else { return Ok(()) };
    left_behind(&earlier)?;
    match Lab::find_named(name).await {
        Ok(mut lab) => put_back(&mut lab, record, &earlier.by).await.map(|_| ()),
        // No lab.json (an `up` that did not finish): nothing runs to start again.
        Err(_) => {
            stop_leftovers(&record);
            record.borrow = None;
            record.save()
        }
    }
}

/// The lab put back after `by`, every part tried: the record without the borrow.
async fn put_back(lab: &mut Lab, mut record: Record, by: &str) -> Result<Record> {
    // Every part is tried; each failure is kept, the first returned.
    let mut failures = Vec::new();
    let what_made_stays = |e: anyhow::Error| e.context(tr!("could not delete what {by} made", by));
    stop_leftovers(&record);
    let client = lab.client();
    let collections = record.borrow.iter().flat_map(|b| b.collections.clone()).collect::<Vec<_>>();
    for collection in &collections {
        let deleted =
            labkit::owned::delete_collection(&client, collection, COLLECTION_WITHIN).await;
        failures.extend(deleted.err().map(what_made_stays));
    }
    let made = labkit::owned::delete_all(&client, &mut record, |e| e.by == by, DELETE_WITHIN).await;
    failures.extend(made.err().map(what_made_stays));
    failures.extend(writable_my_config(lab).await.err());
    labkit::progress!(tr!("starting the lab's own controller again"));
    let restored = async {
        lab.restore().await?;
        labkit::converge::wait_desired(lab).await
    };
    let not_back = |e: anyhow::Error| e.context(tr!("could not put the lab's controller back"));
    failures.extend(restored.await.err().map(not_back));
    record.borrow = None;
    record.save()?;
    let name = &lab.file().name;
    let anew = tr!("`cargo xtask lab reset --name {name}` makes the lab anew", name);
    failures.into_iter().next().map_or(Ok(record), |first| Err(first.context(anew)))
}

/// A my-config left immutable (the grade's failed-write row) is deleted,
/// with its uid as a precondition: the lab's controller makes it anew.
async fn writable_my_config(lab: &Lab) -> Result<()> {
    let api = lab.config_maps();
    let name = lab.desired().name();
    let Some(live) = api.get_opt(name).await? else { return Ok(()) };
    if live.immutable != Some(true) {
        return Ok(());
    }
    let uid = live.metadata.uid.clone();
    let params =
        DeleteParams::default().preconditions(Preconditions { uid, resource_version: None });
    labkit::progress!(tr!(
        "  {name} was left immutable: deleting it, the controller makes it anew",
        name
    ));
    match api.delete(name, &params).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => Ok(()),
        Err(e) => Err(e).with_context(|| tr!("cannot delete the immutable {name}", name)),
    }
}
