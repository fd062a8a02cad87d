//! `my-controller`: flags → run; nothing else lives here.

use std::{
    process::ExitCode,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use clap::Parser;
use controller::{cli::Cli, connect, runner, telemetry};
use k8s_openapi::jiff::Timestamp;

/// Exit status for bad input (flags, kubeconfig, desired data).
const BAD_INPUT: u8 = 2;
/// Exit status after a second signal (as a shell reports SIGINT: 128 + 2).
const INTERRUPTED: u8 = 130;
/// Exit status when the credentials are about to expire (a restart renews them).
const CREDENTIALS_EXPIRE: u8 = 3;

/// How long the runtime's blocking threads (a DNS lookup, say) may hold the
/// exit once `run` has returned: within the second `--shutdown-grace` allows.
const RUNTIME_SHUTDOWN: Duration = Duration::from_millis(500);

fn main() -> ExitCode {
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("my-controller: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let code = runtime.block_on(run_until_stopped());
    runtime.shutdown_timeout(RUNTIME_SHUTDOWN);
    code
}

/// The desired ConfigMap, the logs and the client: a failure of any is bad input.
async fn prepare(cli: &Cli) -> Result<(controller::desired::Desired, kube::Client), String> {
    let desired = cli.desired().map_err(|e| e.to_string())?;
    telemetry::init(cli.log_format)?;
    let read_timeout = connect::read_timeout(cli.watch_timeout);
    let client = connect::client_reading_within(cli.kubeconfig.as_deref(), read_timeout).await?;
    Ok((desired, client))
}

async fn run_until_stopped() -> ExitCode {
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
    let (desired, client) = match prepare(&cli).await {
        Ok(prepared) => prepared,
        Err(e) => {
            eprintln!("my-controller: {e}");
            return ExitCode::from(BAD_INPUT);
        }
    };
    let signals = match runner::signals() {
        Ok(signals) => signals,
        Err(e) => {
            eprintln!("my-controller: cannot handle SIGINT/SIGTERM: {e}");
            return ExitCode::FAILURE;
        }
    };
    // Expiring credentials stop it like a signal, then it exits non-zero.
    let expiry = Arc::new(AtomicBool::new(false));
    let stop_in = connect::stop_before_expiry(client.valid_until().as_ref(), Timestamp::now());
    let expiring = futures::stream::once({
        let (expiry, until) = (expiry.clone(), *client.valid_until());
        async move {
            let Some(stop_in) = stop_in else { return std::future::pending().await };
            tracing::info!(expires = ?until, stop_in = %telemetry::rounded(stop_in), "the exec plugin's client certificate expires");
            tokio::time::sleep(stop_in).await;
            tracing::error!(expires = ?until, "{}", runner::LOG_CREDENTIALS_EXPIRE);
            expiry.store(true, Ordering::Release);
        }
    });
    let signals = futures::stream::select(signals, Box::pin(expiring));
    match runner::run(client, cli, desired, signals).await {
        Ok(()) if expiry.load(Ordering::Acquire) => ExitCode::from(CREDENTIALS_EXPIRE),
        Ok(()) => ExitCode::SUCCESS,
        // One line each, naming what was cut off.
        Err(e @ controller::shutdown::Stopped::Interrupted { .. }) => {
            tracing::error!("{e}");
            ExitCode::from(INTERRUPTED)
        }
        Err(e) => {
            tracing::error!("{e:#}");
            ExitCode::FAILURE
        }
    }
}
