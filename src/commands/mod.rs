//! One module per subcommand: parse, call the layers, render.

pub mod call;
pub mod check;
pub mod dashboard;
pub mod devices;
pub mod flash;
pub mod generate;
pub mod hello;
pub mod hub_stack;
pub mod init;
pub mod output;
mod record;
pub mod serve;
pub mod serve_report;
pub mod sim;
pub mod stop_signal;
pub mod target;
pub mod terminal_text;
pub mod tools;
pub mod watch;

use crate::cli::{Cli, Command, ToolsCommand};

/// Runs the parsed command line.
pub async fn run(cli: Cli) -> anyhow::Result<()> {
    let g = &cli.global;
    match cli.command {
        Command::Serve(args) => serve::run(g, args).await,
        Command::Dashboard(args) => dashboard::run(g, args).await,
        Command::Hello(args) => hello::run(g, args).await,
        Command::Init(args) => init::run(g, args).await,
        Command::Tools { command: ToolsCommand::List(args) } => tools::list(g, args).await,
        Command::Call(args) => call::run(g, args).await,
        Command::Watch(args) => watch::run(g, args).await,
        Command::Devices(args) => devices::run(g, args).await,
        Command::Sim(args) => sim::run(g, args).await,
        Command::Check(args) => check::run(g, args).await,
        Command::Flash(args) => flash::run(g, args).await,
        Command::Man(args) => generate::man(&args),
        Command::Completions(args) => generate::completions(&args),
    }
}
