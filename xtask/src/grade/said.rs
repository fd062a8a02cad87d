//! What `cargo xtask grade` says outside its table (`xtask/grade/*.toml`):
//! its errors, in the language chosen ([`labkit::say`]).

use std::path::Path;

use anyhow::{Result, bail};
use labkit::say::pick;

pub(super) fn not_back() -> &'static str {
    pick("could not put the lab's controller back", "没能让实验环境的控制器回来")
}

/// The error of a lab whose controller did not come back, and what to do.
pub(super) fn not_put_back(name: &str, error: &anyhow::Error) -> String {
    pick(
        format!(
            "error: could not put the lab's controller back: {error:#}\n\
             `cargo xtask lab reset --name {name}` starts it anew"
        ),
        format!(
            "错误：没能让实验环境的控制器回来：{error:#}\n\
             `cargo xtask lab reset --name {name}` 重新启动它"
        ),
    )
}

/// Refused on a lab whose user lacks cluster-wide rights (a room attendee's).
pub(super) fn cluster_wide(file: &labkit::lab_file::LabFile) -> Result<()> {
    let Some(existing) = file.existing().filter(|e| !e.cluster_wide) else {
        return Ok(());
    };
    let namespace = &existing.namespace;
    bail!(
        "{}",
        pick(
            format!(
                "grading needs cluster-wide rights (FlowSchemas that count the program's \
                 requests, the API server's /metrics), which {namespace}'s user does not have: \
                 the instructor grades, from a lab of their own context \
                 (`cargo xtask lab up --provider existing --context …`)"
            ),
            format!(
                "评分需要整个集群的权限（数程序请求的 FlowSchema、API Server 的 /metrics），\
                 {namespace} 的用户没有：由讲师在自己 context 的实验环境里评分\
                 （`cargo xtask lab up --provider existing --context …`）"
            )
        )
    );
}

/// `cannot write PATH`, in the language chosen.
pub(super) fn cannot(en: &str, zh: &str, path: &Path) -> String {
    let path = path.display();
    pick(format!("cannot {en} {path}"), format!("{zh} {path}"))
}
