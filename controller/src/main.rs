//! `my-controller`: flags → run; nothing else lives here.

use std::process::ExitCode;

use clap::Parser;
use controller::{cli::Cli, connect, runner, telemetry};

/// Exit status for bad input (flags, kubeconfig, desired data).
const BAD_INPUT: u8 = 2;
/// Exit status after a second signal (as a shell reports SIGINT: 128 + 2).
const INTERRUPTED: u8 = 130;

#[tokio::main]
async fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => {
            // --help and --version
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            // clap's first line names the problem; its usage block is noise here.
            let text = e.render().to_string();
            let first = text.lines().next().unwrap_or("invalid arguments");
            eprintln!("my-controller: {} (see --help)", first.trim_start_matches("error: "));
            return ExitCode::from(BAD_INPUT);
        }
    };
    let settings = match cli.settings() {
        Ok(settings) => settings,
        Err(e) => {
            eprintln!("my-controller: {e}");
            return ExitCode::from(BAD_INPUT);
        }
    };
    let client = match connect::client(cli.kubeconfig.as_deref()).await {
        Ok(client) => client,
        Err(e) => {
            eprintln!("my-controller: {e}");
            return ExitCode::from(BAD_INPUT);
        }
    };
    telemetry::init(cli.log_format);
    let signals = match runner::signals() {
        Ok(signals) => signals,
        Err(e) => {
            eprintln!("my-controller: cannot handle SIGINT/SIGTERM: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runner::run(client, settings, signals).await {
        Ok(()) => ExitCode::SUCCESS,
        // One line each, naming what was cut off.
        Err(e @ runner::Stopped::Interrupted { .. }) => {
            tracing::error!("{e}");
            ExitCode::from(INTERRUPTED)
        }
        Err(e) => {
            tracing::error!("{e:#}");
            ExitCode::FAILURE
        }
    }
}
