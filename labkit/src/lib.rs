//! The library for labs, used by `xtask`, the grader, the bench and the
//! suites: the one command runner, the one poller, the lab file that is
//! their contract and the handle on a running lab (`lab`), rollout waits
//! (`deployment`), the lab's PKI and accounts, where things are in the
//! repository, the machine's tools, server-side apply of manifests, the
//! record of what the kit made on a cluster (`record`, `owned`), the
//! language it talks to a person in and its progress lines (`say`), and the
//! check of the `-o json` documents against their page (`json_doc`).

pub mod accounts;
pub mod apply;
pub mod cluster;
pub mod command;
pub mod converge;
pub mod deployment;
pub mod etcd;
pub mod eventually;
pub mod files;
pub mod fingerprint;
pub mod go_build;
pub mod http_probe;
pub mod json_doc;
pub mod kind_releases;
pub mod lab;
pub mod lab_file;
pub mod metrics;
pub mod node;
pub mod owned;
pub mod pki;
pub mod process;
pub mod project;
pub mod record;
pub mod results;
pub mod say;
pub mod security;
pub mod stage2;
pub mod suite;
pub mod test_hook;
pub mod tools;
