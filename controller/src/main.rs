//! `my-controller`: flags → run; nothing else lives here.

use std::process::ExitCode;

use clap::Parser;
use controller::{cli::Cli, connect, runner, telemetry};

/// Exit status for bad input (flags, kubeconfig, desired data).
const BAD_INPUT: u8 = 2;

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
            eprintln!(
                "my-controller: {} (see --help)",
                first.trim_start_matches("error: ")
            );
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
    match runner::run(client, settings, runner::shutdown_signal()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e:#}");
            ExitCode::FAILURE
        }
    }
}
