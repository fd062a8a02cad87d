//! What `xtask` and the suites both need: the one command runner, the one
//! poller, the lab file that is their contract, where things are in the
//! repository, the machine's tools, server-side apply of manifests, the
//! record of what the kit made on a cluster (`record`, `owned`), the
//! language it talks to a person in and its progress lines (`say`), and the
//! check of the `-o json` documents against their page (`json_doc`).
//!
//! | module            | holds                                                        |
//! |-------------------|--------------------------------------------------------------|
//! | [`command`]       | the one runner of external commands, echoed as typed         |
//! | [`eventually`]    | the one poller: every wait, with a deadline and the last state seen |
//! | [`lab_file`]      | `lab.json`, the contract between xtask and the suites        |
//! | [`project`]       | where things are in the repository                           |
//! | [`process`]       | the lab's detached processes                                 |
//! | [`apply`]         | server-side apply of manifests, as `kubectl apply --server-side` |
//! | [`record`]        | the one record of what a lab or room made on a cluster       |
//! | [`owned`]         | making and deleting objects only as that record says         |
//! | [`say`]           | the kit's language and its `progress!` lines                 |
//! | [`json_doc`]      | the `-o json` documents against docs/output.md               |
//! | [`kind_releases`] | the table of kind releases and node images                   |
//! | [`test_hook`]     | the interrupt tests' hook                                    |
//! | [`files`], [`fingerprint`], [`tools`] | files' permissions, build inputs' fingerprints, where a program is |

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
