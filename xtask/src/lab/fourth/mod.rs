//! A fourth provider, in tests only: the proof that a provider is its folder
//! and one line in `providers.rs`. Its `up` writes a lab.json and starts
//! nothing; `lab up`, `status`, `logs` and `down`, `--provider`, doctor and the
//! suites' offers take it as they take the other three.

#![cfg(test)]

use std::sync::atomic::{AtomicBool, Ordering};

use super::options::UpOptions;
use super::provider::{Answer, Health, Machine, Provider};
use crate::preflight::Check;
use labkit::lab_file::{Controller, LabFile, Offers};
use labkit::{files, project};

pub struct Fourth;

/// Set when `lab logs` reached [`Fourth::logs`].
static LOGGED: AtomicBool = AtomicBool::new(false);

impl Provider for Fourth {
    fn name(&self) -> &'static str {
        "fourth"
    }

    fn about(&self) -> &'static str {
        "A lab of nothing, for a test"
    }

    fn offers(&self) -> Offers {
        Offers {
            place: "a fourth place".into(),
            local_control_plane: false,
            node: true,
            own_cluster: false,
            cluster_wide: true,
        }
    }

    fn flags(&self) -> &'static [&'static str] {
        &["--node-image"]
    }

    fn up<'a>(&'a self, name: &'a str, options: &'a UpOptions) -> Answer<'a, Option<LabFile>> {
        Box::pin(async move {
            if options.dry_run {
                return Ok(None);
            }
            let dir = project::lab_dir(name);
            let controller = Controller::deployment("fourth/controller".into());
            let lab = self.lab_file(name, &dir, options.target.clone(), controller);
            files::create_dir(&dir)?;
            lab.write()?;
            Ok(Some(lab))
        })
    }

    fn down<'a>(&'a self, name: &'a str, dry_run: bool) -> Answer<'a, bool> {
        Box::pin(async move {
            let dir = project::lab_dir(name);
            let had = dir.exists();
            if had && !dry_run {
                std::fs::remove_dir_all(&dir)?;
            }
            Ok(had)
        })
    }

    fn status<'a>(&'a self, lab: &'a LabFile) -> Answer<'a, Health> {
        let lines = vec![format!("{}: nothing runs", lab.name)];
        Box::pin(async move { Ok(Health { lines, healthy: true }) })
    }

    fn logs<'a>(&'a self, _name: &'a str, _follow: bool) -> Answer<'a, ()> {
        LOGGED.store(true, Ordering::SeqCst);
        Box::pin(async { Ok(()) })
    }

    fn machine_checks(&self, _name: &str, _machine: &Machine) -> anyhow::Result<Vec<Check>> {
        Ok(vec![Check::pass("fourth", "nothing to check")])
    }
}

mod tests {
    use std::process::ExitCode;

    use clap::Parser;

    use super::*;
    use crate::{Cli, Command};
    use labkit::suite::RunsOn;

    async fn xtask(words: &[&str]) -> anyhow::Result<ExitCode> {
        let cli = Cli::try_parse_from([&["xtask"], words].concat())?;
        match cli.command {
            Command::Lab(command) => crate::lab::run(command).await,
            _ => unreachable!("a lab verb"),
        }
    }

    /// Registered by its one line, the fourth provider is taken by every generic path:
    /// `--provider` and its flags, `lab up`, lab.json's offers as the suites read them,
    /// `lab status`, `lab logs`, `lab down`, and doctor's rows.
    #[tokio::test]
    async fn a_fourth_provider_is_its_folder_and_one_line() {
        let name = format!("fourth-{}", std::process::id());
        let up = ["lab", "up", "--provider", "fourth", "--name", &name];
        let refused = xtask(&[&up[..], &["--bundle", "b.tar"]].concat()).await.unwrap_err();
        assert!(refused.to_string().starts_with("--bundle holds"), "{refused}");
        let node_image = [&up[..], &["--node-image", "mine"]].concat();
        assert_eq!(xtask(&node_image).await.unwrap(), ExitCode::SUCCESS);
        let lab = LabFile::read(&project::lab_dir(&name)).unwrap().expect("lab.json");
        assert_eq!((lab.provider.as_str(), &lab.offers), ("fourth", &Fourth.offers()));
        assert_eq!(RunsOn::Kind("x").skip_reason(&lab), None);
        let envtest = RunsOn::Envtest("x").skip_reason(&lab);
        assert_eq!(envtest.unwrap(), "not run on a fourth place: needs the envtest lab (x)");
        let status = xtask(&["lab", "status", "--name", &name]).await.unwrap();
        assert_eq!(status, ExitCode::SUCCESS);
        xtask(&["lab", "logs", "--name", &name]).await.unwrap();
        assert!(LOGGED.load(Ordering::SeqCst), "lab logs did not reach the fourth provider");
        xtask(&["lab", "down", "--name", &name]).await.unwrap();
        assert!(!project::lab_dir(&name).exists(), "lab down left the folder");
        let cli = Cli::try_parse_from(["xtask", "doctor", "--provider", "fourth"]).unwrap();
        let Command::Doctor(args) = cli.command else { unreachable!("doctor") };
        let rows = crate::doctor::gather(&args, crate::lab::providers::resolve("fourth").unwrap());
        assert!(rows.unwrap().iter().any(|row| row.name == "fourth"), "doctor lacks its row");
    }
}
