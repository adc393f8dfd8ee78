//! The command line, as clap definitions. The binary, the man pages and the shell completions
//! are all generated from these.

use clap::{ArgAction, Args, Parser, Subcommand, ValueEnum};

use crate::exit::EXIT_CODES_HELP;

#[derive(Debug, Parser)]
#[command(
    name = "mcpdev",
    version,
    about = "Develop, test and flash voice/IoT devices that speak MCP the way xiaozhi-esp32 devices do",
    long_about = "mcpdev talks to devices that connect over WebSocket (or MQTT), say `hello`, and then act as \
MCP servers inside {\"type\":\"mcp\",\"payload\":…} envelopes. It runs virtual devices, and every step \
of the client flow is one command.",
    after_help = EXIT_CODES_HELP,
    propagate_version = true
)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

/// Options every command takes.
#[derive(Debug, Args, Clone)]
pub struct GlobalArgs {
    /// Machine-readable output: one JSON document, or NDJSON for streams
    #[arg(long, global = true)]
    pub json: bool,
    /// Print only results (no progress or hints)
    #[arg(short, long, global = true)]
    pub quiet: bool,
    /// More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides
    #[arg(short, long, global = true, action = ArgAction::Count)]
    pub verbose: u8,
    /// When to use colour (NO_COLOR is honoured under auto)
    #[arg(long, global = true, value_enum, default_value_t = ColorChoice::Auto)]
    pub color: ColorChoice,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ColorChoice {
    Auto,
    Always,
    Never,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run virtual devices (the firmware's own MCP core) against a backend
    Sim(SimArgs),
    /// Write the man pages and shell completions (for packagers; the repository has them checked in)
    #[command(hide = true)]
    GenerateAssets(GenerateArgs),
}

#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  mcpdev sim\n  mcpdev sim --count 100 --extra-tools 20\n  \
MCPDEV_DEVICE_TOKEN=secret mcpdev sim --url wss://hub.example/xiaozhi/v1/")]
pub struct SimArgs {
    /// The backend's WebSocket URL
    #[arg(long, env = "MCPDEV_SIM_URL", default_value = "ws://127.0.0.1:8000/xiaozhi/v1/")]
    pub url: String,
    /// Device-Id (MAC) of the first device; further devices count up from it
    #[arg(long, default_value = "02:00:00:00:00:01", value_parser = parse_mac)]
    pub device_id: String,
    /// How many virtual devices to run in this process
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub count: u32,
    /// Device token, sent as `Authorization: Bearer <token>` (prefer the environment variable)
    #[arg(long, env = "MCPDEV_DEVICE_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Extra generated tools per device, to exercise paging
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=10_000))]
    pub extra_tools: u32,
    /// Binary protocol version announced in `Protocol-Version` and the hello
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=3))]
    pub protocol_version: u8,
}

#[derive(Debug, Args)]
pub struct GenerateArgs {
    /// Folder that receives man/ and completions/
    pub out_dir: std::path::PathBuf,
}

/// A MAC address `aa:bb:cc:dd:ee:ff`, normalised to lower case.
pub fn parse_mac(s: &str) -> Result<String, String> {
    crate::wire::identity::parse_mac(s).map(|m| crate::wire::identity::format_mac(&m))
}
