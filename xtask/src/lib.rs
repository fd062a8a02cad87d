//! `cargo xtask …`: the verbs learners and instructors run (alias in
//! `.cargo/config.toml`; `src/main.rs` calls [`main`]). The maintainers'
//! verbs, `cargo maint …`, are the `maint` crate, which uses this one.
//! Each verb is a module of its own.
//!
//! | module           | holds                                                         |
//! |------------------|---------------------------------------------------------------|
//! | [`lab`]          | `lab up`, `down`, `status`, `logs`, … on each provider        |
//! | [`plan`]         | the steps `--dry-run` prints and a real run carries out       |
//! | [`room`]         | `room up` and `down`: a namespace, kubeconfig, quota and policy per attendee |
//! | [`e2e`], [`exp`], [`grade`], [`doctor`] | the verbs of those names (`envtest-bins` builds what [`lab::binaries`] finds) |
//! | [`borrow`]       | how `grade` and `bench` take a lab's controller and put it back |
//! | [`interrupt`]    | the signals `lab up`, `grade` and `bench` catch               |
//! | [`preflight`]    | checks of the machine a lab runs on                           |
//! | [`mirrors`]      | where the kit fetches from, and each source's mirror setting  |
//! | [`image`], [`cargo`] | the controller's image, and its cargo package and binary  |
//! | [`locale`], [`output`] | the language a person reads; `-o text` or `json`          |

pub mod borrow;
pub mod cargo;
pub mod doctor;
pub mod e2e;
pub mod exp;
pub mod grade;
pub mod image;
pub mod interrupt;
pub mod lab;
pub mod locale;
pub mod mirrors;
pub mod output;
pub mod plan;
pub mod preflight;
pub mod room;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "cargo xtask",
    about = "Tasks of the controller kit",
    version,
    after_help = "The kit's own CI, benchmark and pictures: cargo maint --help"
)]
pub struct Cli {
    /// No progress lines (the commands run, the steps): only results and errors.
    #[arg(short, long, global = true)]
    quiet: bool,
    /// The language of every line it prints [default: the locale's, from LC_ALL, LC_MESSAGES
    /// or LANG: zh… is Chinese].
    #[arg(long, global = true, value_enum)]
    lang: Option<locale::Lang>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
pub enum Command {
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
        /// Print only the commands that repeat it by hand on this lab; run nothing.
        #[arg(long, requires = "experiment")]
        by_hand: bool,
    },
    /// Grade a controller program you wrote (any language) against the lab:
    /// the course's experiments and more, a table of what each row saw.
    Grade(grade::GradeArgs),
    /// Is this machine ready for the workshop? One line per check, with fixes.
    Doctor(doctor::DoctorArgs),
    /// Find (or build with Go) the envtest kube-apiserver and etcd; print their paths and versions.
    EnvtestBins,
}

/// `cargo xtask`: parses the command line, runs the verb, says an error in one line.
pub async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    // Read first, so that a mistake elsewhere on the line is told in this language too.
    if let Some(chinese) = chinese_asked(&args) {
        labkit::say::choose_chinese(chinese);
    }
    let cli = match Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        Err(e) => return bad_command_line(e),
    };
    labkit::say::set_quiet(cli.quiet);
    let lang = locale::Lang::chosen();
    let held = changes(&cli.command).map(|(dir, what)| labkit::lock::take(&dir, &what));
    let _held = match held.transpose() {
        Ok(held) => held,
        Err(e) => return exit_code(Err(e)),
    };
    let result = match cli.command {
        Command::Lab(command) => lab::run(command).await,
        Command::Room(command) => room::run(command).await,
        Command::E2e { exp, lab, output } => {
            // Caught, not acted on: the suite stops itself ([`e2e::run`]).
            let hangup = labkit::project::lab_dir(&lab.name).join("hangup.log");
            let _signals = interrupt::Interrupts::catch(&hangup);
            borrow::put_back_if_left(&lab.name)
                .await
                .and_then(|()| e2e::run(&lab.name, exp.as_deref(), output.output))
        }
        Command::Exp { experiment, lab, by_hand } => {
            exp::run(&lab.name, experiment.as_deref(), by_hand, lang).await
        }
        Command::Grade(args) => grade::run(args).await,
        Command::Doctor(args) => doctor::run(args),
        Command::EnvtestBins => envtest_bins().await,
    };
    exit_code(result)
}

/// The lab or room `command` changes, and how a person calls it: the command holds its
/// lock while it runs ([`labkit::lock`]); reading one takes none, and a borrow takes
/// it itself ([`borrow::Borrow::begin`]).
fn changes(command: &Command) -> Option<(std::path::PathBuf, String)> {
    use lab::LabCommand as L;
    let lab = |name: &str| (labkit::project::lab_dir(name), labkit::tr!("lab {name}", name));
    match command {
        Command::Lab(
            L::Up { lab: named, .. }
            | L::Down { lab: named, .. }
            | L::Reset { lab: named, .. }
            | L::Controller { lab: named, .. }
            | L::Stage2 { lab: named },
        )
        | Command::E2e { lab: named, .. }
        | Command::Exp { experiment: Some(_), lab: named, .. } => Some(lab(&named.name)),
        Command::Room(room::RoomCommand::Up { room, .. } | room::RoomCommand::Down { room }) => {
            let what = labkit::tr!("room {name}", name = room.name);
            Some((room::room_dir(&room.name), what))
        }
        _ => None,
    }
}

/// `cargo xtask envtest-bins`: find (or build) the envtest programs and say where they are.
async fn envtest_bins() -> anyhow::Result<ExitCode> {
    let found = lab::binaries::find().await?;
    for (name, binary) in [("kube-apiserver", &found.kube_apiserver), ("etcd", &found.etcd)] {
        println!("{name:<15} {:<8} {}  ({})", binary.version, binary.path.display(), binary.source);
    }
    Ok(ExitCode::SUCCESS)
}

/// `--lang zh` or `--lang=en` anywhere before a `--`.
fn chinese_asked(args: &[String]) -> Option<bool> {
    let mut words = args.iter().take_while(|w| *w != "--");
    while let Some(word) = words.next() {
        let value = match word.strip_prefix("--lang=") {
            Some(value) => Some(value),
            None if word == "--lang" => words.next().map(String::as_str),
            None => None,
        };
        if let Some(value) = value {
            return Some(value.starts_with("zh"));
        }
    }
    None
}

/// clap's own message in English; in Chinese, what is wrong in one line and where the usage
/// is (clap speaks English only). Exit status 2, as clap's.
fn bad_command_line(e: clap::Error) -> ExitCode {
    use clap::error::{ContextKind, ErrorKind};
    if !labkit::say::chinese()
        || matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion)
    {
        let _ = e.print();
        return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
    }
    // A list of values is said "a, b" (clap's Display).
    let said = |kind| e.get(kind).map(ToString::to_string).unwrap_or_default();
    let (arg, value) = (said(ContextKind::InvalidArg), said(ContextKind::InvalidValue));
    let line = match e.kind() {
        ErrorKind::InvalidValue => labkit::tr!(
            "{arg} does not take {value}; it takes: {valid}",
            arg,
            value,
            valid = said(ContextKind::ValidValue)
        ),
        ErrorKind::ValueValidation => labkit::tr!(
            "{arg} does not take {value}: {why}",
            arg,
            value,
            why = match std::error::Error::source(&e) {
                Some(n) if n.is::<std::num::ParseIntError>() =>
                    labkit::tr!("a whole number is needed"),
                other => other.map(ToString::to_string).unwrap_or_default(),
            }
        ),
        ErrorKind::UnknownArgument => labkit::tr!("there is no {arg} here", arg),
        ErrorKind::MissingRequiredArgument => labkit::tr!("{arg} is needed", arg),
        _ => labkit::tr!("the command line is not one cargo xtask takes"),
    };
    eprintln!("{}", labkit::tr!("error: {message}", message = line));
    eprintln!("{}", labkit::tr!("  the usage: add `--help` to the command"));
    ExitCode::from(2)
}

/// The verb's exit code; an error in one line (`{:#}` keeps the whole context chain).
pub fn exit_code(result: anyhow::Result<ExitCode>) -> ExitCode {
    result.unwrap_or_else(|error| {
        eprintln!("{}", labkit::tr!("error: {message}", message = format!("{error:#}")));
        ExitCode::FAILURE
    })
}
