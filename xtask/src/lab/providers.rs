//! The one place that lists the providers ([`PROVIDERS`]) and picks one by
//! name ([`named`], [`of_lab`]; `--provider`: [`choice`], [`resolve`]): `lab
//! up`, `lab down`, `lab status`, `lab logs` and doctor call it, never a
//! provider by name.

use anyhow::{Context, Result};
use clap::Arg;
use clap::builder::{PossibleValue, PossibleValuesParser};

use super::provider::Provider;
use super::{envtest, existing, kind};
use labkit::lab_file::LabFile;
use labkit::record::Record;
use labkit::tr;

/// Every provider, in `--provider`'s order: a new provider is its folder and one line here.
pub static PROVIDERS: &[&dyn Provider] = &[
    &envtest::Envtest,
    &kind::Kind,
    &existing::Existing,
    #[cfg(test)]
    &super::fourth::Fourth,
];

/// The provider called `name` (by `--provider`, lab.json or a record).
pub fn named(name: &str) -> Result<&'static dyn Provider> {
    let provider = PROVIDERS.iter().find(|p| p.name() == name);
    provider.copied().with_context(|| tr!("this xtask has no provider {name}", name))
}

/// `--provider`'s values: a provider's name, or `auto` ([`resolve`]).
pub fn choice(arg: Arg) -> Arg {
    let named = PROVIDERS.iter().map(|p| PossibleValue::new(p.name()).help(p.about()));
    let auto = PossibleValue::new("auto").help("kind when Docker is usable, else envtest");
    arg.value_parser(PossibleValuesParser::new(named.chain([auto])))
}

/// The provider `--provider` names, saying why when `auto` made the choice for the person.
pub fn resolve(choice: &str) -> Result<&'static dyn Provider> {
    if choice != "auto" {
        return named(choice);
    }
    let (kind, why) = auto();
    labkit::progress!("{}", tr!("provider auto: {why}: using {kind}", why, kind));
    named(kind)
}

/// kind when a Docker daemon answers and kind is installed, else envtest.
fn auto() -> (&'static str, String) {
    if labkit::tools::on_path("kind").is_none() {
        return ("envtest", tr!("kind is not on PATH"));
    }
    if labkit::tools::on_path("docker").is_none() {
        return ("envtest", tr!("docker is not on PATH"));
    }
    if super::provider::docker_version().is_ok() {
        ("kind", tr!("Docker answers and kind is installed"))
    } else {
        ("envtest", tr!("the Docker daemon does not answer"))
    }
}

/// The provider lab `name` is on, by name: its lab.json's, else (an `up`
/// that did not finish) its record's; `None` when neither names one.
pub fn name_of_lab(name: &str) -> Result<Option<String>> {
    let dir = labkit::project::lab_dir(name);
    match LabFile::read(&dir).ok().flatten() {
        Some(lab) => Ok(Some(lab.provider)),
        None => Ok(Record::load(&dir)?.and_then(|r| r.provider)),
    }
}

/// The provider of lab `name` ([`name_of_lab`]); with none named, nothing
/// was made on a cluster and envtest's plan (the processes its pid files
/// name, the folder) is the one.
pub fn of_lab(name: &str) -> Result<&'static dyn Provider> {
    named(name_of_lab(name)?.as_deref().unwrap_or(envtest::Envtest.name()))
}
