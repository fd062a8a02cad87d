//! Commands run at once, each into a log of its own, as N laptops or N test
//! runs would: `cargo maint test`'s attendees and grade halves, `room-bench`'s
//! attendees and graders.

use std::path::PathBuf;
use std::time::Instant;

use labkit::command::Cmd;

/// One command's run: from its start to its end, whether it succeeded, its log.
pub struct Ran {
    pub what: String,
    pub span: (Instant, Instant),
    pub ok: bool,
    pub log: PathBuf,
}

/// Runs `commands` at once, each into `target/<dir>/<what>.log`; waits for all.
pub fn run(dir: &str, commands: Vec<(String, Cmd)>) -> Vec<Ran> {
    let dir = labkit::project::target_dir().join(dir);
    if let Err(e) = std::fs::create_dir_all(&dir) {
        eprintln!("cannot make {}: {e}", dir.display());
    }
    std::thread::scope(|scope| {
        let running: Vec<_> = commands
            .into_iter()
            .map(|(what, cmd)| {
                let log = dir.join(format!("{what}.log").replace(' ', "-"));
                let _ = std::fs::remove_file(&log);
                scope.spawn(move || {
                    let start = Instant::now();
                    let ok = cmd.spawn_to_log(&log).and_then(|mut c| Ok(c.wait()?.success()));
                    Ran { what, span: (start, Instant::now()), ok: matches!(ok, Ok(true)), log }
                })
            })
            .collect();
        running.into_iter().map(|r| r.join().expect("a waiting thread")).collect()
    })
}

/// The failures among `ran`, each with its log's last lines.
pub fn failed(ran: &[Ran]) -> Vec<String> {
    let tail = |r: &Ran| format!("{}:\n{}", r.log.display(), labkit::files::tail(&r.log, 15));
    ran.iter().filter(|r| !r.ok).map(tail).collect()
}

/// Every log shown whole, one after the other (interleaved they would be
/// unreadable); an error naming the commands that failed.
pub fn shown(ran: &[Ran]) -> anyhow::Result<()> {
    for r in ran {
        let how = if r.ok { "ok" } else { "FAILED" };
        eprintln!("---- {} ({how}), {}:", r.what, r.log.display());
        eprint!("{}", std::fs::read_to_string(&r.log).unwrap_or_default());
    }
    let failed: Vec<&str> = ran.iter().filter(|r| !r.ok).map(|r| r.what.as_str()).collect();
    anyhow::ensure!(failed.is_empty(), "failed: {failed:?}");
    Ok(())
}
