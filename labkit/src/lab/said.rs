//! What finding a lab says when it cannot, in the language chosen
//! ([`crate::say`]): the first errors a learner meets.

use std::path::Path;

use crate::say::pick;

/// No lab of that name: its lab file `path` is not there.
pub(super) fn not_up(name: &str, path: &Path) -> String {
    let path = path.display();
    let up = match name {
        super::DEFAULT_NAME => "cargo xtask lab up".to_string(),
        _ => format!("cargo xtask lab up --name {name}"),
    };
    pick(
        format!("no lab named {name} is up (no {path}): run `{up}` first"),
        format!("没有叫 {name} 的实验环境在运行（没有 {path}）：先运行 `{up}`"),
    )
}

/// The lab's API server, at `url`, does not answer.
pub(super) fn silent(name: &str, url: &str) -> String {
    pick(
        format!(
            "the lab {name}'s API server ({url}) does not answer: see `cargo xtask lab status`, \
             or `cargo xtask lab down` and `cargo xtask lab up`"
        ),
        format!(
            "实验环境 {name} 的 API Server（{url}）没有应答：看 `cargo xtask lab status`，\
             或者 `cargo xtask lab down` 之后 `cargo xtask lab up`"
        ),
    )
}
