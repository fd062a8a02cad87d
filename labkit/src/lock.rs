//! One run of a lab or a room at a time. Every command that changes one holds
//! an exclusive lock (flock) on a file beside its folder for as long as it
//! runs; the kernel lets go when the process ends, however it ends, so a lock
//! is never left behind. A second command is refused before it acts, in one
//! line naming the command that holds it, its pid and since when. The file
//! sits beside the folder, not in it: `lab down` removes the folder while it
//! holds the lock.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::{files, tr};

/// The lock, held until dropped (or the process ends): the open file holds it.
#[derive(Debug)]
pub struct Held {
    _file: File,
}

/// The lock file of the lab or room whose state is in `dir`.
pub fn path_of(dir: &Path) -> PathBuf {
    let name = dir.file_name().unwrap_or_default().to_string_lossy();
    dir.with_file_name(format!("{name}.lock"))
}

/// This process as a person typed it: `cargo xtask lab up --name x`.
fn typed() -> String {
    let mut args = std::env::args();
    let program = args.next().map(PathBuf::from);
    let stem = program.as_deref().and_then(Path::file_stem).unwrap_or_default();
    let words = ["cargo".into(), stem.to_string_lossy().into_owned()].into_iter().chain(args);
    words.collect::<Vec<_>>().join(" ")
}

/// Takes the lock of the lab or room whose state is in `dir` (called `what` to a
/// person) for this process, or says in one line who holds it.
pub fn take(dir: &Path, what: &str) -> Result<Held> {
    let path = path_of(dir);
    let mut file = open(&path)?;
    match file.try_lock() {
        Ok(()) => {
            let since = k8s_openapi::jiff::Timestamp::now().strftime("%Y-%m-%d %H:%M:%S UTC");
            file.set_len(0)?;
            writeln!(file, "{}\t{since}\t{}", std::process::id(), typed())?;
            Ok(Held { _file: file })
        }
        Err(TryLockError::WouldBlock) => {
            let holder = std::fs::read_to_string(&path).unwrap_or_default();
            let mut fields = holder.trim_end().splitn(3, '\t');
            let (pid, since, by) = (fields.next(), fields.next(), fields.next());
            anyhow::bail!(tr!(
                "{what} is in use: `{by}` (pid {pid}) holds it since {since}; wait for it to \
                 end, or stop it, then try again",
                what,
                by = by.unwrap_or("?"),
                pid = pid.unwrap_or("?"),
                since = since.unwrap_or("?")
            ))
        }
        Err(TryLockError::Error(e)) => {
            Err(e).with_context(|| tr!("cannot lock {path}", path = path.display()))
        }
    }
}

/// The lock file at `path`, opened (and its folder made).
fn open(path: &Path) -> Result<File> {
    files::create_dir(path.parent().unwrap_or(Path::new(".")))?;
    let open = OpenOptions::new().read(true).write(true).create(true).truncate(false).open(path);
    open.with_context(|| tr!("cannot open {path}", path = path.display()))
}

/// The lock in `path`, held until the file returned is dropped: a second taker (another
/// build of the same cache) waits for the first, said once, rather than being refused.
pub async fn wait(path: &Path) -> Result<File> {
    let file = open(path)?;
    let locked = match file.try_lock() {
        Err(TryLockError::WouldBlock) => {
            let shown = crate::project::shown(path);
            crate::progress!(
                "{}",
                tr!("another build holds {shown}: waiting for it to end", shown)
            );
            tokio::task::spawn_blocking(move || file.lock().map(|()| file)).await?
        }
        tried => tried.map(|()| file).map_err(std::io::Error::from),
    };
    locked.with_context(|| tr!("cannot lock {path}", path = path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_taker_is_told_who_holds_it_until_it_lets_go() {
        let dir = std::env::temp_dir().join(format!("labkit-lock-{}", std::process::id()));
        let lab = dir.join("lab").join("x");
        let held = take(&lab, "lab x").unwrap();
        assert_eq!(path_of(&lab), dir.join("lab").join("x.lock"));
        let refused = take(&lab, "lab x").unwrap_err().to_string();
        let (pid, typed) = (std::process::id(), typed());
        let said = format!("lab x is in use: `{typed}` (pid {pid}) holds it since 20");
        assert!(refused.starts_with(&said), "{refused}");
        drop(held);
        take(&lab, "lab x").unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
