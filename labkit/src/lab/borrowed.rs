//! The lab while `grade` or `bench` borrows it (xtask's `borrow`): the
//! lab's record shared with the work ([`Lab::record`]), so that every process
//! group started for the lab is in it, and the folder for the borrow's token files.

use super::Lab;

impl Lab {
    /// `pid` (a process group's leader) was started for this lab: in the
    /// lab's record while it is borrowed, so that it never outlives the borrow.
    pub async fn started(&self, pid: u32) {
        if let Some(record) = &self.record {
            // Gone already (it exited at once): nothing to record.
            let _ = record.lock().await.started(pid);
        }
    }

    /// Where the token files of a borrow go ([`crate::record::BORROWED_DIR`]).
    pub fn borrowed_dir(&self) -> std::path::PathBuf {
        self.file.state_dir.join(crate::record::BORROWED_DIR)
    }
}
