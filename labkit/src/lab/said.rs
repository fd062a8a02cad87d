//! What finding a lab says when it cannot, in the language chosen
//! ([`crate::say`]): the first errors a learner meets.

use std::path::Path;

use crate::tr;

/// No lab of that name: its lab file `path` is not there.
pub(super) fn not_up(name: &str, path: &Path) -> String {
    let path = path.display();
    let up = match name {
        super::DEFAULT_NAME => "cargo xtask lab up".to_string(),
        _ => format!("cargo xtask lab up --name {name}"),
    };
    tr!("no lab named {name} is up (no {path}): run `{up}` first", name, path, up)
}

/// The lab's API server, at `url`, does not answer.
pub(super) fn silent(name: &str, url: &str) -> String {
    tr!(
        "the lab {name}'s API server ({url}) does not answer: see `cargo xtask lab status`, \
         or `cargo xtask lab down` and `cargo xtask lab up`",
        name,
        url
    )
}
