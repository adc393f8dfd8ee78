//! One module per subcommand: parse, call the layers, render.

pub mod call;
pub mod call_result;
pub mod check;
mod column_stream;
pub mod dashboard;
pub mod devices;
pub mod flash;
pub mod generate;
pub mod hello;
pub mod hub_stack;
pub mod init;
pub mod mcp_server;
pub mod output;
pub mod prompts;
mod record;
pub mod remote_token;
pub mod resources;
pub mod serve;
pub mod serve_report;
pub mod sim;
pub mod stop_signal;
pub mod target;
pub mod tasks;
pub mod terminal_text;
pub mod tools;
pub mod watch;

use crate::cli::{Cli, Command, ToolsCommand};

/// Runs the parsed command line.
pub async fn run(cli: Cli) -> anyhow::Result<()> {
    let g = &cli.global;
    set_trust(g)?;
    match cli.command {
        Command::Serve(args) => serve::run(g, args).await,
        Command::Dashboard(args) => dashboard::run(g, args).await,
        Command::Hello(args) => hello::run(g, args).await,
        Command::Init(args) => init::run(g, args).await,
        Command::Tools { command: ToolsCommand::List(args) } => tools::list(g, args).await,
        Command::Call(args) => call::run(g, args).await,
        Command::Resources { command } => resources::run(g, command).await,
        Command::Prompts { command } => prompts::run(g, command).await,
        Command::Tasks { command } => tasks::run(g, command).await,
        Command::Watch(args) => watch::run(g, args).await,
        Command::Devices(args) => devices::run(g, args).await,
        Command::Sim(args) => sim::run(g, args).await,
        Command::Check(args) => check::run(g, args).await,
        Command::Flash(args) => flash::run(g, args).await,
        Command::RemoteToken { command } => remote_token::run(g, command),
        Command::Man(args) => generate::man(&args),
        Command::Completions(args) => generate::completions(&args),
    }
}

/// What this process's TLS clients trust ([`crate::tls::client`]): `--ca-file`, or a pinned
/// `--ca-fingerprint`, else the system's roots plus the local hub's own CA (`serve --tls auto`),
/// so a CLI on the hub's machine reaches `https://` with nothing to set.
fn set_trust(g: &crate::cli::GlobalArgs) -> anyhow::Result<()> {
    use crate::exit::{CodedError, Exit};
    let pin = match g.ca_fingerprint.as_deref().filter(|f| !f.trim().is_empty()) {
        Some(text) => Some(crate::tls::parse_fingerprint(text).ok_or_else(|| {
            CodedError::new(Exit::Usage, format!("--ca-fingerprint (MCPDEV_CA_FINGERPRINT) {text:?} is not a SHA-256 fingerprint")).with_help("64 hex digits, colons allowed, as `mcpdev serve` prints it")
        })?),
        None => None,
    };
    let ca_files: Vec<_> = g.ca_file.iter().filter(|f| !f.as_os_str().is_empty()).cloned().collect();
    for f in &ca_files {
        crate::tls::client::read_certs(f).map_err(|e| CodedError::new(Exit::Usage, e.to_string()))?;
    }
    let own = crate::paths::hub_ca_file();
    let implicit_ca_files = if own.exists() { vec![own] } else { Vec::new() };
    crate::tls::client::set_trust(crate::tls::client::Trust { ca_files, pin, implicit_ca_files });
    Ok(())
}
