//! One module per subcommand: parse, call the layers, render.

pub mod generate;
pub mod output;
pub mod sim;

use crate::cli::{Cli, Command};

/// Runs the parsed command line.
pub async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Sim(args) => sim::run(&cli.global, args).await,
        Command::GenerateAssets(args) => generate::run(&args),
    }
}
