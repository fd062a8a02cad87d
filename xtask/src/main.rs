//! `cargo xtask …`: the kit's task runner (alias in `.cargo/config.toml`).
//!
//! Only the verbs live here; each one is a module of its own.

mod bench;
mod borrow;
mod cargo;
mod doctor;
mod e2e;
mod envtest_bins;
mod exp;
mod grade;
mod image;
mod interrupt;
mod lab;
mod locale;
mod output;
mod pictures;
mod plan;
mod preflight;
mod room;
mod room_cluster;
mod test;
mod tidy;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "cargo xtask", about = "Tasks of the controller kit", version)]
struct Cli {
    /// No progress lines (the commands run, the steps): only results and errors.
    #[arg(short, long, global = true)]
    quiet: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Start, inspect and stop a local lab: a Kubernetes API plus the controller.
    #[command(subcommand)]
    Lab(lab::LabCommand),
    /// One cluster for a workshop room: a namespace, rights and a kubeconfig per attendee.
    #[command(subcommand)]
    Room(room::RoomCommand),
    /// Run the e2e suite against the current lab and print a summary table.
    E2e {
        /// Only this experiment (e.g. self-heal, correct, rerun, dedup).
        #[arg(long)]
        exp: Option<String>,
        #[command(flatten)]
        lab: lab::LabName,
        #[command(flatten)]
        output: output::OutputArg,
    },
    /// One of the course's experiments, live against the current lab, narrated
    /// (what it does, kubectl by hand, the controller's log, timing, what to notice).
    Exp {
        /// create, heal, correct, rerun or dedup; none lists them.
        experiment: Option<String>,
        #[command(flatten)]
        lab: lab::LabName,
        /// The narration's language [default: the locale's, from LC_ALL, LC_MESSAGES or LANG].
        #[arg(long, value_enum)]
        lang: Option<locale::Lang>,
        /// Print only the commands that repeat it by hand on this lab; run nothing.
        #[arg(long, requires = "experiment")]
        by_hand: bool,
    },
    /// Grade a controller program you wrote (any language) against the lab:
    /// the course's experiments and more, a table of what each row saw.
    Grade(grade::GradeArgs),
    /// Is this machine ready for the workshop? One line per check, with fixes.
    Doctor {
        #[command(flatten)]
        lab: lab::LabName,
        /// The lab to check the machine for, chosen as `lab up` chooses.
        #[arg(long, value_enum, default_value_t = lab::options::ProviderChoice::Auto)]
        provider: lab::options::ProviderChoice,
        #[command(flatten)]
        output: output::OutputArg,
    },
    /// The README's test command: unit tests, then fresh labs with the e2e suite and the
    /// lab tests on each, lab down.
    Test {
        /// Only one part of the labs (no unit tests): `envtest` (the controller as a
        /// process) or `docker` (the controller in its image, then kind).
        #[arg(long, value_enum)]
        only: Option<test::Part>,
    },
    /// Find (or build with Go) the envtest kube-apiserver and etcd; print their paths and versions.
    EnvtestBins,
    /// How fast the controller heals, against the floor the API server allows, and what it costs.
    Bench(bench::BenchArgs),
    /// Draw the pictures in docs/pictures/ from their sources (docs/samples/, step 3's description); --check looks at each in headless Chromium.
    Pictures(pictures::PicturesArgs),
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    labkit::say::set_quiet(cli.quiet);
    // What the layers under `grade` and `exp` print is in their reader's language too.
    let lang = match &cli.command {
        Command::Exp { lang, .. } => locale::Lang::or_locale(*lang),
        Command::Grade(args) => args.lang(),
        _ => locale::Lang::En,
    };
    labkit::say::choose_chinese(lang == locale::Lang::Zh);
    let result = match cli.command {
        Command::Lab(command) => lab::run(command).await,
        Command::Room(command) => room::run(command).await,
        Command::E2e { exp, lab, output } => match borrow::put_back_if_left(&lab.name).await {
            Ok(()) => e2e::run(&lab.name, exp.as_deref(), output.output),
            Err(e) => Err(e),
        },
        Command::Exp { experiment, lab, by_hand, .. } => match (by_hand, experiment.as_deref()) {
            (true, Some(exp)) => exp::print_by_hand(&lab.name, exp, lang).await,
            _ => match borrow::put_back_if_left(&lab.name).await {
                Ok(()) => exp::run(&lab.name, experiment.as_deref(), lang).await,
                Err(e) => Err(e),
            },
        },
        Command::Grade(args) => grade::run(args).await,
        Command::Test { only } => test::run(only).await,
        Command::Doctor { lab, provider, output } => {
            doctor::run(&lab.name, provider, output.output)
        }
        Command::EnvtestBins => envtest_bins::run().await,
        Command::Bench(args) => bench::run(args).await,
        Command::Pictures(args) => pictures::run(args),
    };
    match result {
        Ok(code) => code,
        Err(error) => {
            // `{:#}` keeps the whole context chain on one line.
            eprintln!("{}{error:#}", labkit::say::pick("error: ", "错误："));
            ExitCode::FAILURE
        }
    }
}
