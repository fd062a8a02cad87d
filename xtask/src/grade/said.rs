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
        "grading needs cluster-wide rights (FlowSchemas that count the program's \
         requests, the API server's /metrics), which {namespace}'s user does not have: \
         the instructor grades, from a lab of their own context \
         (`cargo xtask lab up --provider existing --context …`)",
        namespace
    ));
}
