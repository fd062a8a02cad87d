//! What `xtask` and the suites both need: the one command runner, the one
//! poller, the lab file that is their contract, where things are in the
//! repository, the machine's tools, server-side apply of manifests, the
//! record of what the kit made on a cluster (`record`, `owned`), the
//! language it talks to a person in and its progress lines (`say`), and the
//! check of the `-o json` documents against their page (`json_doc`).

pub mod apply;
pub mod command;
pub mod eventually;
pub mod files;
pub mod fingerprint;
pub mod json_doc;
pub mod kind_releases;
pub mod lab_file;
pub mod owned;
pub mod process;
pub mod project;
pub mod record;
pub mod say;
pub mod test_hook;
pub mod tools;
