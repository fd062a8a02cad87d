//! The library for labs, used by `xtask`, the grader, the bench and the suites.
//!
//! | module            | holds                                                        |
//! |-------------------|--------------------------------------------------------------|
//! | [`command`]       | the one runner of external commands, echoed as typed         |
//! | [`eventually`]    | the one poller: every wait, with a deadline and the last state seen |
//! | [`lab_file`]      | `lab.json`, the contract between xtask and the suites        |
//! | [`project`]       | where things are in the repository                           |
//! | [`process`]       | the lab's detached processes                                 |
//! | [`lock`]          | one run of a lab or room at a time                           |
//! | [`apply`]         | server-side apply of manifests, as `kubectl apply --server-side` |
//! | [`record`]        | the one record of what a lab or room made on a cluster       |
//! | [`owned`]         | making and deleting objects only as that record says         |
//! | [`say`]           | the kit's language and its `progress!` lines                 |
//! | [`kind_releases`] | the table of kind releases and node images                   |
//! | [`test_hook`]     | the interrupt tests' hook                                    |
//! | [`lab`]           | the handle on a running lab, found through its `lab.json`    |
//! | [`deployment`]    | the controller as a Deployment, and rollout waits            |
//! | [`suite`], [`results`] | an experiment's registry entry; its outcome as a JSON line |
//! | [`converge`]      | waits for the controller to converge, and how long it took   |
//! | [`accounts`], [`pki`] | ServiceAccount tokens; the envtest lab's CA and client certificates |
//! | [`stage2`]        | stage 2 on a lab: its CRD, RBAC and account                  |
//! | [`http_probe`], [`scrape`]  | plain-HTTP requests, `/metrics`                      |
//! | [`files`], [`fingerprint`], [`tools`] | files' permissions, build inputs' fingerprints, where a program is |
//! | [`go_build`]      | the one `go build`: the repository's Go modules, cached by fingerprint |
//!
//! Test support, for tests only (the `test-support` feature of a dev-dependency):
//! `json_doc` holds the `-o json` documents against docs/output.md, `english` finds English
//! left in a Chinese output (both in `tests/support/`: only tests call them), `node` a kind node's crictl; and what only the faults do to a lab (`lab/fault_controls.rs`,
//! `deployment/controls.rs`).

pub mod accounts;
pub mod apply;
pub mod command;
pub mod converge;
pub mod deployment;
#[cfg(any(test, feature = "test-support"))]
#[path = "../tests/support/english.rs"]
pub mod english;
pub mod eventually;
pub mod files;
pub mod fingerprint;
pub mod go_build;
pub mod http_probe;
#[cfg(any(test, feature = "test-support"))]
#[path = "../tests/support/json_doc.rs"]
pub mod json_doc;
pub mod kind_releases;
pub mod lab;
pub mod lab_file;
pub mod lock;
#[cfg(any(test, feature = "test-support"))]
pub mod node;
pub mod owned;
pub mod pki;
pub mod process;
pub mod project;
pub mod record;
pub mod results;
pub mod say;
pub mod scrape;
pub mod stage2;
pub mod suite;
pub mod test_hook;
pub mod tools;
