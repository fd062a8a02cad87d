//! `lab logs [-f]` of an envtest lab: the controller's log (stdout and stderr of the process).

use std::fs::File;
use std::io::{Seek, SeekFrom, Write};
use std::os::unix::fs::MetadataExt;
use std::time::Duration;

use anyhow::{Context, Result, bail};

use labkit::tr;

/// How often `-f` looks for new output: a person reading along, not a state being awaited.
const FOLLOW_POLL: Duration = Duration::from_millis(250);

pub fn show(name: &str, follow: bool) -> Result<()> {
    let log = super::log(&labkit::project::lab_dir(name), "controller");
    if !log.exists() {
        bail!(tr!(
            "no controller log at {path} (is lab {name} up? `cargo xtask lab up --name {name}`)",
            path = log.display(),
            name
        ));
    }
    let mut out = std::io::stdout().lock();
    let mut file =
        File::open(&log).with_context(|| tr!("cannot open {path}", path = log.display()))?;
    let mut offset = copy_new(&mut file, &mut out)?;
    if !follow {
        return Ok(());
    }
    let mut inode = file.metadata()?.ino();
    loop {
        std::thread::sleep(FOLLOW_POLL);
        match std::fs::metadata(&log) {
            Err(_) => {
                eprintln!("{}", tr!("(the log is gone: lab {name} was taken down)", name));
                return Ok(());
            }
            // A new lab wrote a new file: start reading that one from its beginning.
            Ok(meta) if meta.ino() != inode => {
                eprintln!("{}", tr!("(lab {name} was started anew: following its new log)", name));
                file = File::open(&log)?;
                inode = meta.ino();
                offset = 0;
            }
            Ok(meta) if meta.len() < offset => {
                file.seek(SeekFrom::Start(0))?;
                offset = 0;
            }
            Ok(_) => {}
        }
        offset += copy_new(&mut file, &mut out)?;
    }
}

fn copy_new(file: &mut File, out: &mut impl Write) -> Result<u64> {
    let copied = std::io::copy(file, out)?;
    out.flush()?;
    Ok(copied)
}
