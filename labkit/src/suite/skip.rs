//! Why an entry does not run on a lab: what the e2e suite's runner says of it
//! (e2e/tests/suite.rs). Test support (the `test-support` feature).

use super::RunsOn;
use crate::lab_file::LabFile;
use crate::say::translate;
use crate::tr;

impl RunsOn {
    /// `None` when it runs on the lab, else why not (from what lab.json says it offers).
    pub fn skip_reason(&self, file: &LabFile) -> Option<String> {
        let offers = &file.offers;
        // The whys are the registry's (e2e), said through the catalogue when it has them.
        let lacks = match *self {
            RunsOn::Envtest(why) if !offers.local_control_plane => {
                tr!("needs the envtest lab ({why})", why = translate(why, &[]))
            }
            RunsOn::Kind(why) if !offers.node => {
                tr!("needs a kind node ({why})", why = translate(why, &[]))
            }
            RunsOn::OwnCluster(why) if !offers.own_cluster => translate(why, &[]),
            RunsOn::ClusterWide(why) if !offers.cluster_wide => {
                return Some(tr!(
                    "not run as {namespace}'s user (no cluster-wide rights): {why}",
                    namespace = file.deployment_namespace(),
                    why = translate(why, &[])
                ));
            }
            _ => return None,
        };
        Some(tr!("not run on {place}: {lacks}", place = translate(&offers.place, &[]), lacks))
    }
}
