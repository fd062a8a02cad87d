//! The e2e harness: the lab handle, the course's experiments as plain async
//! functions, and the glue that runs one as a test and records its result.
//! Used by the e2e tests and by `cargo xtask e2e` (and the workshop verbs).
//!
//! | module          | holds                                                          |
//! |-----------------|----------------------------------------------------------------|
//! | [`lab`]         | the handle on a running lab, found through its `lab.json`      |
//! | [`deployment`]  | the controller as a Deployment (a kind lab)                    |
//! | [`suite`]       | the registry: each test's entry, function included             |
//! | [`experiments`] | the course's experiments and more                              |
//! | [`faults`]      | the controller keeping its promise when things go wrong        |
//! | [`examples`]    | the course's step programs, run as a learner runs them         |
//! | [`pages`]       | the course pages, typed as a learner types them                |
//! | [`grade`]       | `cargo xtask grade`'s rows and its proxy                       |
//! | [`converge`]    | waits for the controller to converge, and how long it took     |
//! | [`cluster`]     | a cluster's objects, to compare before and after               |
//! | [`accounts`], [`pki`] | ServiceAccount tokens; the envtest lab's CA and client certificates |
//! | [`etcd`], [`http_probe`], [`metrics`], [`node`] | etcd's JSON gateway, plain-HTTP requests, `/metrics`, a kind node's crictl |
//! | [`go_build`]    | the Go programs the kit builds (the course's, the peers)       |
//! | [`results`]     | each outcome as a JSON line for `cargo xtask e2e`'s table      |
//! | [`security`]    | the controller's privileges against Pod Security "restricted"  |

pub mod accounts;
pub mod cluster;
pub mod converge;
pub mod deployment;
pub mod etcd;
pub mod examples;
pub mod experiments;
pub mod faults;
pub mod go_build;
pub mod grade;
pub mod http_probe;
pub mod lab;
pub mod metrics;
pub mod node;
pub mod pages;
pub mod pki;
pub mod results;
pub mod security;
pub mod suite;

use std::time::Instant;

/// Everything the suite runs, in its order: experiments, faults, examples.
pub fn all() -> impl Iterator<Item = &'static suite::Experiment> {
    experiments::ALL.iter().chain(faults::ALL).chain(examples::ALL)
}

/// Finds an experiment, fault or example by test name or alias.
pub fn find(name: &str) -> Option<&'static suite::Experiment> {
    all().find(|e| e.name == name || e.aliases.contains(&name))
}

/// Runs `experiment` against the current lab as a test: an error when no lab
/// is up or the experiment fails (with the lab's diagnostics); records the
/// outcome for `cargo xtask e2e`'s summary either way.
pub fn run_test(experiment: &suite::Experiment) -> Result<(), String> {
    let name = experiment.name;
    let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
    let outcome = runtime.block_on(async {
        let mut lab = match lab::Lab::find().await {
            Ok(lab) => lab,
            Err(e) => return Err(format!("{e:#}")),
        };
        // Said in one line and counted by the summary: never a silent skip.
        if let Some(why) = experiment.runs_on.skip_reason(lab.file()) {
            eprintln!("{name}: {why}");
            results::append(&results::Outcome::not_run(name, &why));
            return Ok(());
        }
        let started = Instant::now();
        let result = (experiment.run)(&mut lab).await;
        let wall = started.elapsed();
        // What went wrong is read before the restore replaces the controller.
        let diagnostics = match &result {
            Err(_) => lab.diagnostics().await,
            Ok(_) => String::new(),
        };
        // Leave the lab as found even when the experiment failed half-way;
        // a lab that cannot be restored fails the test that left it so.
        let restored = lab.restore().await;
        let result = match (result, restored) {
            (Ok(_), Err(e)) => Err(e.context("could not restore the lab")),
            (result, _) => result,
        };
        results::append(&results::Outcome::new(name, &result, wall));
        match result {
            Ok(measured) => {
                for warning in &measured.warnings {
                    eprintln!("warning: {warning}");
                }
                eprintln!("{name}: {}", measured.detail);
                Ok(())
            }
            Err(e) => Err(format!("{e:#}\n\n{diagnostics}")),
        }
    });
    outcome.map_err(|message| format!("{name} failed: {message}"))
}
