//! What `cargo xtask grade` says outside its table (`xtask/grade/*.toml`):
//! its errors, in the language chosen ([`labkit::say`]).

use anyhow::{Result, bail};
use labkit::tr;

pub(super) fn not_back() -> String {
    tr!("could not put the lab's controller back")
}

/// The error of a lab whose controller did not come back, and what to do.
pub(super) fn not_put_back(name: &str, error: &anyhow::Error) -> String {
    tr!(
        "error: could not put the lab's controller back: {error}\n\
         `cargo xtask lab reset --name {name}` starts it anew",
        error = format!("{error:#}"),
        name
    )
}

/// Refused on a lab whose user lacks cluster-wide rights (a room attendee's).
pub(super) fn cluster_wide(file: &labkit::lab_file::LabFile) -> Result<()> {
    let Some(existing) = file.existing().filter(|e| !e.cluster_wide) else {
        return Ok(());
    };
    let namespace = &existing.namespace;
    bail!(tr!(
        "grading runs the program as a ServiceAccount of its own ({identity}) with a token \
         the grade makes for it, which {namespace}'s user may not make (a room's attendee gets \
         tokens for the lab's my-controller only): the instructor grades, from a lab of their \
         own context (`cargo xtask lab up --provider existing --context …`)",
        identity = grader::IDENTITY,
        namespace
    ));
}
