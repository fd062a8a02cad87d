//! The interface every provider of labs implements: envtest, kind and
//! existing, each one folder; [`super::providers::PROVIDERS`] lists them.

use std::path::Path;

use anyhow::Result;
use futures::future::BoxFuture;

use super::options::UpOptions;
use crate::preflight::Check;
use labkit::command::{Cmd, is_not_found};
use labkit::lab_file::{Controller, LabFile, Offers, Target};
use labkit::tr;

/// What a provider's verb gives back, later.
pub type Answer<'a, T> = BoxFuture<'a, Result<T>>;

/// One provider of labs: its name, what its labs offer, and what `lab up`,
/// `lab down`, `lab status`, `lab logs` and doctor do for it. Each is one
/// folder under `xtask/src/lab/` implementing this and one line in
/// [`super::providers::PROVIDERS`], where the generic verbs find it.
pub trait Provider: Sync {
    /// `--provider`'s value for it, and lab.json's and the record's `provider`.
    fn name(&self) -> &'static str;
    /// Its line in `--provider`'s help.
    fn about(&self) -> &'static str;
    /// What its labs offer the suites and doctor (its `up` may say less: an
    /// existing cluster's rights).
    fn offers(&self) -> Offers;
    /// The flags of `lab up` it takes beyond every provider's ([`UpOptions::check_for`]).
    fn flags(&self) -> &'static [&'static str];
    /// Its lab `name` in `dir`, ready now, as its `up` writes it last ([`LabFile::ready`]).
    fn lab_file(&self, name: &str, dir: &Path, target: Target, controller: Controller) -> LabFile {
        LabFile::ready(name, dir, (self.name(), self.offers()), target, controller)
    }
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
    /// `doctor`'s checks of what this provider runs lab `name` on (Docker and kind, the
    /// envtest programs, …), from what `machine` found; the checks every lab shares are doctor's.
    fn machine_checks(&self, name: &str, machine: &Machine) -> Result<Vec<Check>>;
}

/// What `lab status` shows of a lab, and whether it is healthy.
pub struct Health {
    pub lines: Vec<String>,
    pub healthy: bool,
}

/// What doctor finds of this machine once, for every provider's checks.
pub struct Machine {
    /// `go version`'s output, and the newest Go the kit's modules ask for.
    pub go: Option<String>,
    pub go_required: (u32, u32),
    /// kube-apiserver and etcd, where they were found.
    pub located: Vec<(&'static str, Option<super::binaries::Binary>)>,
}

/// What `argv` printed, echoed like any other command; its failure is a check's finding,
/// not an error.
pub fn probe(argv: &[&str]) -> Option<String> {
    Cmd::argv(argv).read().ok()
}

/// The Docker daemon's version, or why there is none.
pub fn docker_version() -> std::result::Result<String, String> {
    match Cmd::argv(["docker", "info", "--format", "{{.ServerVersion}}"]).read() {
        Ok(v) => Ok(v),
        Err(e) if is_not_found(&e) => Err("docker: command not found".to_string()),
        Err(_) => Err(tr!("Cannot connect to the Docker daemon (`docker info` failed)")),
    }
}
