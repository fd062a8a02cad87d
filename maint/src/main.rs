//! `cargo maint …`: the kit's own instruments — its CI, its benchmark and the
//! checks of the repository — apart from the verbs learners
//! and instructors run (`cargo xtask`, the `xtask` library this one uses).
//!
//! | module           | holds                                                         |
//! |------------------|---------------------------------------------------------------|
//! | [`test`]         | `cargo maint test`, the README's test command                 |
//! | [`room_cluster`] | the three-node cluster `test` treats as an existing one       |
//! | [`mirror`]       | a Docker Hub mirror on this machine, for the kind lab's pods  |
//! | [`bench`]        | `cargo maint bench`: heal latency against the floor           |
//! | [`room_bench`]   | `cargo maint room-bench`: a room of N on one cluster, measured |
//! | [`side_by_side`] | commands run at once, each into a log of its own              |
//! | [`node_image`]   | `cargo maint node-image`: kind's node built here, offline     |
//! | [`cluster`]      | a cluster's objects, to compare before and after              |
//!
//! Its tests are the checks of the repository (`tidy`, rust-analyzer's name) and of the
//! pictures in docs/pictures/ (`pictures`, which also writes the charts again).

mod bench;
mod cluster;
mod mirror;
mod node_image;
#[cfg(test)]
mod pictures;
mod room_bench;
mod room_cluster;
mod side_by_side;
mod test;
#[cfg(test)]
mod tidy;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "cargo maint", about = "The controller kit's own CI and benchmarks", version)]
struct Cli {
    /// No progress lines (the commands run, the steps): only results and errors.
    #[arg(short, long, global = true)]
    quiet: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// The README's test command: unit tests, then fresh labs with the e2e suite and the
    /// lab tests on each, lab down.
    Test {
        /// Only one part of the labs (no unit tests): `envtest`, `docker` (kind, then a
        /// room on a cluster the kit did not make) or `existing` (that room alone).
        #[arg(long, value_enum)]
        only: Option<test::Part>,
    },
    /// How fast the controller heals, against the floor the API server allows, and what it costs.
    Bench(bench::BenchArgs),
    /// Build the kind node image here from Debian packages and Go modules (no registry
    /// needed), tagged `lab-kit/kind-node:built`; prints its reference. Rebuilt only when
    /// its inputs change.
    NodeImage {
        #[command(flatten)]
        source: node_image::Source,
        /// Print the build's commands in order without running them.
        #[arg(long)]
        dry_run: bool,
    },
    /// A room of N on one cluster, measured: room up, N labs up at once, the course's
    /// experiments in each, self-heal, grading the room, every lab down, room down
    /// (docs/samples/room-N.*).
    RoomBench(room_bench::RoomBenchArgs),
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    labkit::say::set_quiet(cli.quiet);
    xtask::exit_code(match cli.command {
        Command::Test { only } => test::run(only).await,
        Command::Bench(args) => bench::run(args).await,
        Command::NodeImage { source, dry_run } => node_image::run(&source, dry_run).await,
        Command::RoomBench(args) => room_bench::run(args).await,
    })
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    /// `-n` is a namespace in kubectl: bench's old short name for --rounds is
    /// refused in one line naming what to type instead, exit status 2.
    #[test]
    fn bench_refuses_the_old_short_name_with_kubectls_meaning() {
        let error = super::Cli::try_parse_from(["cargo maint", "bench", "-n", "20"])
            .err()
            .expect("refused");
        assert_eq!(error.exit_code(), 2);
        let first = error.to_string().lines().next().unwrap_or_default().to_string();
        assert!(first.starts_with("error: ") && first.contains("--rounds 20"), "{first}");
    }
}
