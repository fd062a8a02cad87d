//! The interface every provider of labs implements: envtest, kind and
//! existing, each one folder; [`super::providers::of`] picks one.

use anyhow::Result;
use futures::future::BoxFuture;

use super::options::UpOptions;
use labkit::lab_file::LabFile;

/// What a provider's verb gives back, later.
pub type Answer<'a, T> = BoxFuture<'a, Result<T>>;

/// One provider of labs: what `lab up`, `lab down`, `lab status` and `lab
/// logs` do for it. Each is one folder under `xtask/src/lab/` implementing
/// this; [`super::providers::of`] is the one place that picks it.
pub trait Provider: Sync {
    /// `lab up`: its plan, printed (`--dry-run`: `None`) or carried out
    /// (the lab.json it wrote). What a step makes is recorded before the
    /// next one runs (pid files, the lab's [`Record`](labkit::record::Record)),
    /// so that [`Provider::down`] undoes a failed `up` ([`super::up`]).
    fn up<'a>(&'a self, name: &'a str, options: &'a UpOptions) -> Answer<'a, Option<LabFile>>;
    /// `lab down`: its plan, made from what the lab's files say was made,
    /// printed (`--dry-run`) or carried out; whether there was anything.
    fn down<'a>(&'a self, name: &'a str, dry_run: bool) -> Answer<'a, bool>;
    /// `lab status`: one line a part, and whether the lab is healthy.
    fn status<'a>(&'a self, lab: &'a LabFile) -> Answer<'a, Health>;
    /// `lab logs [-f]`: the controller's log.
    fn logs<'a>(&'a self, name: &'a str, follow: bool) -> Answer<'a, ()>;
}

/// What `lab status` shows of a lab, and whether it is healthy.
pub struct Health {
    pub lines: Vec<String>,
    pub healthy: bool,
}
