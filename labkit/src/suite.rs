//! What every test of the suite shares: its entry in the registry (name,
//! aliases, what it shows, where it runs, the function that runs it), what it
//! measured, and the data key the experiments, faults and benchmark change.

use std::time::Duration;

use controller::desired::Desired;
use futures::future::LocalBoxFuture;

use crate::lab::Lab;

#[cfg(any(test, feature = "test-support"))]
mod skip;

/// What an experiment measured.
#[derive(Clone, Debug, Default)]
pub struct Measured {
    /// The controller's reaction time, where the experiment has one.
    pub latency: Option<Duration>,
    /// One line for the summary table.
    pub detail: String,
    /// Things worth a warning that do not fail the experiment.
    pub warnings: Vec<String>,
    /// The numbers in `detail`, by name, for a narration that says it in
    /// another language (`cargo xtask exp --lang zh`).
    pub values: Vec<(&'static str, String)>,
}

impl Measured {
    /// What was measured, without a reaction time.
    pub fn said(detail: impl Into<String>) -> Measured {
        Measured { detail: detail.into(), ..Measured::default() }
    }

    /// What was measured, and the controller's reaction time.
    pub fn took(latency: Duration, detail: impl Into<String>) -> Measured {
        Measured { latency: Some(latency), ..Measured::said(detail) }
    }
}

/// How an entry runs against a lab: its async function, boxed.
pub type Run = for<'a> fn(&'a mut Lab) -> LocalBoxFuture<'a, anyhow::Result<Measured>>;

/// One experiment: its test name, the short names `--exp` accepts, what it
/// shows, the labs it means something on, and its function. The suite's
/// test binary (e2e/tests/suite.rs) and `cargo xtask exp` run it from here.
pub struct Experiment {
    pub name: &'static str,
    pub run: Run,
    pub aliases: &'static [&'static str],
    pub about: &'static str,
    pub runs_on: RunsOn,
}

/// A registry entry named as its function (the test's name is the function's):
/// `entry!(function, ["alias", …], "what it shows")`, with a [`RunsOn`] last
/// where it does not run everywhere.
#[macro_export]
macro_rules! entry {
    ($run:ident, [$($alias:literal),*], $about:literal) => {
        $crate::entry!($run, [$($alias),*], $about, $crate::suite::RunsOn::Any)
    };
    ($run:ident, [$($alias:literal),*], $about:literal, $runs_on:expr) => {
        $crate::suite::Experiment {
            name: stringify!($run),
            run: |lab| Box::pin($run(lab)),
            aliases: &[$($alias),*],
            about: $about,
            runs_on: $runs_on,
        }
    };
}
pub use crate::entry;

/// Where an experiment runs; elsewhere it is reported as not run, with why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunsOn {
    Any,
    /// Only on an envtest lab; the text says what it needs of one.
    Envtest(&'static str),
    /// Only on a kind lab; the text says what it needs of one.
    Kind(&'static str),
    /// Only on a cluster the kit made (envtest or kind); the text says what
    /// it does that is not the kit's to do to someone else's cluster.
    OwnCluster(&'static str),
    /// Only where the lab's user has cluster-wide rights (the kit's own
    /// labs; an existing cluster's lab when its context has them, as an
    /// instructor's does and an attendee's does not); the text says what for.
    ClusterWide(&'static str),
}

/// The key the experiments, faults and benchmark change: the first of the
/// desired data.
pub fn first_key(desired: &Desired) -> String {
    desired.data().keys().next().cloned().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab_file::{Controller, LabFile, Offers, Target};

    #[test]
    fn what_a_lab_lacks_is_said_in_one_line() {
        let at = |place: &str, local_control_plane, node, own_cluster| {
            let offers = Offers {
                place: place.into(),
                local_control_plane,
                node,
                own_cluster,
                cluster_wide: own_cluster,
            };
            let controller = Controller::deployment("ns/sa".into());
            LabFile::ready("a", "/a".as_ref(), ("p", offers), Target::default(), controller)
        };
        let (envtest, kind) = (at("envtest", true, false, true), at("kind", false, true, true));
        let existing = at("an existing cluster", false, false, false);
        assert_eq!(RunsOn::Any.skip_reason(&existing), None);
        assert_eq!(RunsOn::Envtest("x").skip_reason(&envtest), None);
        assert_eq!(RunsOn::Kind("x").skip_reason(&kind), None);
        assert_eq!(RunsOn::OwnCluster("x").skip_reason(&kind), None);
        assert_eq!(RunsOn::ClusterWide("x").skip_reason(&kind), None);
        let cases = [
            (RunsOn::Envtest("x"), &kind, "not run on kind: needs the envtest lab (x)"),
            (RunsOn::Kind("x"), &envtest, "not run on envtest: needs a kind node (x)"),
            (
                RunsOn::Envtest("x"),
                &existing,
                "not run on an existing cluster: needs the envtest lab (x)",
            ),
            (RunsOn::Kind("x"), &existing, "not run on an existing cluster: needs a kind node (x)"),
            (RunsOn::OwnCluster("x"), &existing, "not run on an existing cluster: x"),
            (
                RunsOn::ClusterWide("x"),
                &existing,
                "not run as default's user (no cluster-wide rights): x",
            ),
        ];
        for (runs, on, expected) in cases {
            assert_eq!(runs.skip_reason(on).as_deref(), Some(expected));
        }
    }
}
