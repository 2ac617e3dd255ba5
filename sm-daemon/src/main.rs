//! `ibsm`: the InfiniBand subnet manager's command line.

use clap::{Parser, Subcommand};

mod cmd;

/// An InfiniBand subnet manager, routing analyser and virtual fabric.
#[derive(Debug, Parser)]
#[command(name = "ibsm", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Generate a topology (fat-tree, torus, mesh, dragonfly, random) as an ibnetdiscover /
    /// ibsim net file.
    Gen(cmd::generate::Args),
    /// Decode one MAD given as hex (a file or standard input) and print every field.
    Decode(cmd::decode::Args),
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Gen(a) => cmd::generate::run(a),
        Command::Decode(a) => cmd::decode::run(a),
    }
}
