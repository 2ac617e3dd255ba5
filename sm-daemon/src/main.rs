//! `ibsm`: the InfiniBand subnet manager's command line.

use clap::{Parser, Subcommand};

mod cmd;
mod logging;

/// An InfiniBand subnet manager, routing analyser and virtual fabric.
#[derive(Debug, Parser)]
#[command(name = "ibsm", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the subnet manager (against the in-process simulated fabric with --sim).
    Run(cmd::run::Args),
    /// Generate a topology (fat-tree, torus, mesh, dragonfly, random) as an ibnetdiscover /
    /// ibsim net file.
    Gen(cmd::generate::Args),
    /// Route a topology file offline: tables, validity verdict, quality figures, picture.
    Route(cmd::route::Args),
    /// Validate and measure forwarding tables made by another SM (opensm-lfts.dump, ibroute).
    Analyze(cmd::analyze::Args),
    /// Decode one MAD given as hex (a file or standard input) and print every field.
    Decode(cmd::decode::Args),
    /// Ask the running SM how the subnet is: state, last sweep, recent fabric events.
    Status(cmd::status::Args),
    /// List the ports of the running SM's subnet: state, width, speed, peer.
    Ports(cmd::status::Args),
    /// Simulation testing: random fabrics, configurations and faults from seeds, with the
    /// SM's invariants checked after every sweep; failures shrunk and saved to replay.
    Soak(cmd::soak::Args),
    /// Subscribe to the SA's event forwarding from a umad port and print every trap it
    /// reports.
    Events(cmd::events::Args),
}

fn main() -> std::process::ExitCode {
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            // The chain of causes, without a backtrace: the message must say what and where.
            eprintln!("ibsm: {e:#}");
            if e.is::<cmd::analysis::Invalid>() {
                std::process::ExitCode::from(cmd::analysis::Invalid::EXIT)
            } else {
                std::process::ExitCode::FAILURE
            }
        }
    }
}

fn run() -> anyhow::Result<()> {
    let cli = Cli::parse();
    if let Command::Run(a) = cli.command {
        // `run` starts the log once it has read its configuration's [log].
        return cmd::run::run(a);
    }
    if let Command::Soak(a) = cli.command {
        // Thousands of runs: only errors, unless RUST_LOG asks for more.
        let quiet = sm_core::config::LogConfig {
            level: sm_core::config::LogLevel::Error,
            ..sm_core::config::LogConfig::default()
        };
        logging::init(&quiet, std::path::Path::new("<defaults>"))?;
        return cmd::soak::run(a);
    }
    logging::init(
        &sm_core::config::LogConfig::default(),
        std::path::Path::new("<defaults>"),
    )?;
    match cli.command {
        Command::Run(_) | Command::Soak(_) => Ok(()),
        Command::Gen(a) => cmd::generate::run(a),
        Command::Route(a) => cmd::route::run(a),
        Command::Analyze(a) => cmd::analyze::run(a),
        Command::Decode(a) => cmd::decode::run(a),
        Command::Events(a) => cmd::events::run(a),
        Command::Status(a) => cmd::status::status(a),
        Command::Ports(a) => cmd::status::ports(a),
    }
}
