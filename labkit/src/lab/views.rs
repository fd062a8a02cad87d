//! The same lab seen otherwise: what the bench gives each of its sides
//! (bench/src/run.rs keeps another ConfigMap, maint/src/bench.rs runs the
//! controller as a local process of its own).

use std::collections::BTreeMap;

use controller::desired::Desired;

use super::Lab;
use crate::lab_file::LabFile;

impl Lab {
    /// The same lab with `file` as its lab.json, keeping `desired`, no flags added; its
    /// controller a local process of the caller's when `local` (then [`Lab::deployment`] is
    /// `None` and its metrics are read from `file`'s URL, not through the pod proxy).
    pub fn seen_as(&self, file: LabFile, desired: Desired, local: bool) -> Lab {
        let local_controller = self.local_controller || local;
        Lab { file, desired, local_controller, extra_args: BTreeMap::new(), ..self.clone() }
    }
}
