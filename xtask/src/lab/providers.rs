//! The one place that picks a provider ([`of`]): `lab up`, `lab down`,
//! `lab status` and `lab logs` call it, never a provider by name.

use anyhow::Result;

use super::provider::Provider;
use super::{envtest, existing, kind};
use labkit::lab_file::{LabFile, ProviderKind};
use labkit::record::Record;

/// The provider of that kind: a new provider is one line here (and its
/// folder, and its variant of [`labkit::lab_file::Section`]).
pub fn of(kind: ProviderKind) -> &'static dyn Provider {
    match kind {
        ProviderKind::Envtest => &envtest::Envtest,
        ProviderKind::Kind => &kind::Kind,
        ProviderKind::Existing => &existing::Existing,
    }
}

/// The provider lab `name` is on: its lab.json's, else (an `up` that did
/// not finish) its record's; `None` when neither names one.
pub fn kind_of_lab(name: &str) -> Result<Option<ProviderKind>> {
    let dir = labkit::project::lab_dir(name);
    match LabFile::read(&dir).ok().flatten() {
        Some(lab) => Ok(Some(lab.provider())),
        None => Ok(Record::load(&dir)?.and_then(|r| r.provider)),
    }
}

/// The provider of lab `name` ([`kind_of_lab`]); with none named, nothing
/// was made on a cluster and envtest's plan (the processes its pid files
/// name, the folder) is the one.
pub fn of_lab(name: &str) -> Result<&'static dyn Provider> {
    Ok(of(kind_of_lab(name)?.unwrap_or(ProviderKind::Envtest)))
}
