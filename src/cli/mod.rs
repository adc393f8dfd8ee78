//! The command line, as clap definitions. The binary, the man pages and the shell completions
//! are all generated from these.
//!
//! Every subcommand enum is `#[command(defer = true)]`: a command's arguments are built only
//! when that command is run (or when the man pages, completions or a `mcpdev.toml` with
//! defaults need them all: `Command::build`). Building every command's arguments for each run
//! was a third of a one-shot call's instructions (issue 46.6, benches/README.md "Start-up").
//! So an `Args` struct has a plain `//` comment, never a `///` one: a deferred command's
//! arguments are added after its own `about`, and a struct's doc comment would replace it.

use clap::{ArgAction, Args, Parser, Subcommand, ValueEnum};

use crate::exit::EXIT_CODES_HELP;
// Lives in `flash` (which this module mounts), so the dependency runs one way: cli -> flash.
pub use crate::flash::parse_duration;

mod serve;
pub use serve::{LimitArgs, MqttServeArgs, ServeArgs, TlsMode, TlsServeArgs, UpstreamArgs};

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

// Options every command takes.
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
    /// Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA
    /// certificate (PEM) instead of the system's roots; `serve` prints where the hub keeps its own
    #[arg(long, global = true, env = "MCPDEV_CA_FILE", value_name = "FILE")]
    pub ca_file: Option<std::path::PathBuf>,
    /// Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256
    /// fingerprint (`serve` prints its CA's)
    #[arg(long, global = true, env = "MCPDEV_CA_FINGERPRINT", value_name = "SHA256")]
    pub ca_fingerprint: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ColorChoice {
    Auto,
    Always,
    Never,
}

#[derive(Debug, Subcommand)]
#[command(defer = true)]
#[allow(clippy::large_enum_variant, reason = "parsed once per process")]
pub enum Command {
    /// Run the hub: devices connect here; the CLI and MCP hosts reach them through it
    Serve(ServeArgs),
    /// Print a fresh one-time log-in link to the hub's dashboard (and open it in a browser where one is available)
    Dashboard(DashboardArgs),
    /// Show a device's hello: identity, transport, features, audio parameters
    Hello(HelloArgs),
    /// Show the device's MCP `initialize` answer: protocol version, serverInfo, capabilities
    /// (through a hub: the answer to the hub's initialize at onboarding; --live sends a new one)
    Init(InitArgs),
    /// List a device's tools
    Tools {
        #[command(subcommand)]
        command: ToolsCommand,
    },
    /// Call a tool: arguments typed and validated by its inputSchema before anything is sent
    Call(CallArgs),
    /// An MCP server's resources: list, read, templates (--url or --stdio)
    Resources {
        #[command(subcommand)]
        command: ResourcesCommand,
    },
    /// An MCP server's prompts: list, get with typed arguments (--url or --stdio)
    Prompts {
        #[command(subcommand)]
        command: PromptsCommand,
    },
    /// The tasks an MCP server keeps (MCP 2025-11-25): list, get, result, cancel (--url or --stdio)
    Tasks {
        #[command(subcommand)]
        command: TasksCommand,
    },
    /// Stream live events: connects, hellos, notifications, messages, and MCP traffic
    Watch(WatchArgs),
    /// List connected devices; approve, revoke and list devices waiting to be admitted
    Devices(DevicesArgs),
    /// Run virtual devices (the firmware's own MCP core) against a backend
    Sim(SimArgs),
    /// Check a device's firmware: conformance and robustness, each check pass/warn/fail
    Check(CheckArgs),
    /// Build the firmware, make the image, flash and provision an ESP32-C3/C6 (or save the image)
    Flash(crate::flash::FlashArgs),
    /// Tokens for people who use this machine's hub from another machine (run it on the hub's machine)
    RemoteToken {
        #[command(subcommand)]
        command: RemoteTokenCommand,
    },
    /// Print the man page of mcpdev or of a command (`mcpdev man call | man -l -`)
    Man(ManArgs),
    /// Print the shell completion script (`mcpdev completions bash > ~/.local/share/bash-completion/completions/mcpdev`)
    Completions(CompletionsArgs),
}

impl Command {
    /// Whether the command does one exchange and exits, so one thread serves it: starting
    /// worker threads (and their allocator arenas) would cost it more than the work.
    pub fn is_one_shot(&self) -> bool {
        matches!(self, Command::Dashboard(_) | Command::RemoteToken { .. } | Command::Hello(_) | Command::Init(_) | Command::Tools { .. } | Command::Call(_) | Command::Resources { .. } | Command::Prompts { .. } | Command::Tasks { .. } | Command::Devices(_) | Command::Man(_) | Command::Completions(_))
    }
}

#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  mcpdev sim\n  mcpdev sim --count 100 --extra-tools 20\n  \
MCPDEV_DEVICE_TOKEN=secret mcpdev sim --url wss://hub.example/xiaozhi/v1/")]
pub struct SimArgs {
    /// The backend's WebSocket URL [default: ws://127.0.0.1:PORT/xiaozhi/v1/, PORT from
    /// MCPDEV_DEVICE_ADDR as `serve` reads it, else 8000]
    #[arg(long, env = "MCPDEV_SIM_URL")]
    pub url: Option<String>,
    /// Device-Id (MAC) of the first device; further devices count up from it [default:
    /// 02:00:00:00:00:01, or the next free one: another `sim` here, or a device the hub has
    /// (`serve --demo`'s), moves it on; the id taken is printed]. With --replay: replay under this id (with a Client-Id
    /// of its own), beside the recorded device, instead of as it
    #[arg(long, value_parser = parse_mac)]
    pub device_id: Option<String>,
    /// How many virtual devices to run in this process (one the backend refuses ends alone, reported; the others run on)
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
    /// Which tools the virtual devices offer
    #[arg(long, value_enum, default_value_t = crate::sim::Profile::StockTools)]
    pub profile: crate::sim::Profile,
    /// Connect from these local addresses, the devices spread over them in turn (e.g.
    /// 127.0.0.2,127.0.0.3): one source address reaches a hub through about 28,000 ports at most
    #[arg(long, value_name = "ADDR[,ADDR…]", value_delimiter = ',', conflicts_with_all = ["mqtt", "ota"])]
    pub source_addr: Vec<std::net::IpAddr>,
    #[command(flatten)]
    pub bootstrap: SimBootstrapArgs,
    /// Play back a session recorded with `watch --record FILE`: one device with the recorded
    /// identity and hello, answering each request with the recorded reply (--count,
    /// --extra-tools, --profile, --protocol-version, --mqtt, --ota and --source-addr do not apply
    /// to it and are refused)
    #[arg(long, value_name = "FILE", conflicts_with_all = ["count", "extra_tools", "profile", "protocol_version", "mqtt", "ota", "source_addr"])]
    pub replay: Option<std::path::PathBuf>,
    /// With --replay: answer after the recorded latencies
    #[arg(long, requires = "replay")]
    pub replay_timing: bool,
}

// How a command reaches a device: through a running hub, or by accepting it directly.
#[derive(Debug, Args, Clone)]
pub struct DeviceArgs {
    /// The hub's host listener
    #[arg(long, env = "MCPDEV_HUB", default_value = "http://127.0.0.1:8001")]
    pub hub: String,
    /// Device-Id (MAC), a unique prefix of it, or an alias; may be left out with one device connected
    #[arg(short, long, env = "MCPDEV_DEVICE")]
    pub device: Option<String>,
    /// Instead of a hub: listen on ADDR (e.g. 0.0.0.0:8000), accept the next device, do the step, exit
    #[arg(long, value_name = "ADDR", conflicts_with_all = ["url", "stdio"])]
    pub listen: Option<std::net::SocketAddr>,
    /// Instead of a hub: reach the device (--device) through this MQTT broker, e.g. mqtt://host:1883
    #[arg(long, value_name = "URL", conflicts_with_all = ["listen", "url", "stdio"])]
    pub mqtt: Option<String>,
    /// Wait up to DURATION for the device to connect and finish onboarding (e.g. 30s)
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub wait: Option<std::time::Duration>,
    /// How long to wait for each answer from the device
    #[arg(long, env = "MCPDEV_TIMEOUT", default_value = "30s", value_parser = parse_duration)]
    pub timeout: std::time::Duration,
    #[command(flatten)]
    pub server: McpServerArgs,
}

// Any MCP server instead of a device: at a URL, or run over stdio.
#[derive(Debug, Args, Clone)]
pub struct McpServerArgs {
    /// An MCP server at this URL, instead of a device (Streamable HTTP, or legacy SSE for …/sse)
    #[arg(long, value_name = "URL", conflicts_with = "stdio")]
    pub url: Option<String>,
    /// An MCP server run as a child over stdio, instead of a device, e.g. --stdio "npx -y
    /// @modelcontextprotocol/server-everything" (words split as a shell would; no shell is run).
    /// Without a command: the one in mcpdev.toml's [stdio]
    #[arg(long, value_name = "COMMAND", num_args = 0..=1, default_missing_value = "")]
    pub stdio: Option<String>,
    /// With --stdio: NAME=VALUE in the server's environment, or NAME to pass ours on (it gets
    /// only HOME, PATH, USER, LANG… of ours otherwise); repeatable
    #[arg(long = "stdio-env", value_name = "NAME[=VALUE]", requires = "stdio")]
    pub stdio_env: Vec<String>,
    /// With --url: an HTTP header `Name: value` for every request; repeatable
    #[arg(long = "header", short = 'H', value_name = "NAME: VALUE")]
    pub headers: Vec<String>,
    /// With --url: the transport (auto picks SSE for URLs ending in /sse)
    #[arg(long, value_enum, default_value_t = crate::links::mcp::McpTransport::Auto)]
    pub transport: crate::links::mcp::McpTransport,
}

// The MCP server a client command (`resources`, `prompts`, `tasks`) talks to.
#[derive(Debug, Args, Clone)]
pub struct ServerArgs {
    #[command(flatten)]
    pub server: McpServerArgs,
    /// How long to wait for each answer from the server
    #[arg(long, env = "MCPDEV_TIMEOUT", default_value = "30s", value_parser = parse_duration)]
    pub timeout: std::time::Duration,
}

#[derive(Debug, Args)]
pub struct HelloArgs {
    #[command(flatten)]
    pub target: DeviceArgs,
}

#[derive(Debug, Args)]
pub struct InitArgs {
    #[command(flatten)]
    pub target: DeviceArgs,
    /// Through a hub: send a new `initialize` instead of showing the onboarding answer (without
    /// --vision-url it carries no vision capability, so the device keeps the hub's endpoint)
    #[arg(long)]
    pub live: bool,
    /// Vision endpoint to give the device (`capabilities.vision.url`); sends a fresh initialize
    #[arg(long)]
    pub vision_url: Option<String>,
    /// Token for the vision endpoint (prefer the environment variable)
    #[arg(long, env = "MCPDEV_VISION_TOKEN", hide_env_values = true)]
    pub vision_token: Option<String>,
}

#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub enum ToolsCommand {
    /// Every tool, all pages, as a table (full schemas with --json)
    List(ToolsListArgs),
}

#[derive(Debug, Args)]
pub struct ToolsListArgs {
    #[command(flatten)]
    pub target: DeviceArgs,
    /// Also show user-only tools (annotated audience: ["user"])
    #[arg(long)]
    pub user_tools: bool,
    /// List the tools on the device again instead of showing the hub's cached list (after a
    /// failed onboarding: onboard the device again)
    #[arg(long)]
    pub refresh: bool,
}

#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub enum ResourcesCommand {
    /// Every resource, all pages, as a table (as the server sent them with --json)
    List(ServerArgs),
    /// Read one resource by URI: text printed (escaped for the terminal), binary saved with --out
    Read(ResourceReadArgs),
    /// Every resource template (URIs with {placeholders})
    Templates(ServerArgs),
}

#[derive(Debug, Args)]
#[command(after_help = "A resource is read whole into memory up to 64 MiB, the most mcpdev reads of one message; a larger one is \
refused (exit 5) and the session ended.\n\nExamples:\n  mcpdev resources read file:///notes.txt --stdio \"npx -y @modelcontextprotocol/server-filesystem .\"\n  \
mcpdev resources read test://blob --out blob.bin --url http://127.0.0.1:8080/mcp")]
pub struct ResourceReadArgs {
    /// The resource's URI
    pub uri: String,
    /// Write the contents (text as UTF-8, blobs decoded) to FILE instead of the terminal
    #[arg(long, value_name = "FILE")]
    pub out: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub server: ServerArgs,
}

#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub enum PromptsCommand {
    /// Every prompt, all pages, with its arguments
    List(ServerArgs),
    /// Get a prompt's messages: arguments given as name=value, checked against the prompt's
    /// declared arguments before anything is sent
    Get(PromptGetArgs),
}

#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  mcpdev prompts get greet name=Ada --stdio \"python server.py\"\n  mcpdev prompts get greet --args-json '{\"name\":\"Ada\"}' --url http://127.0.0.1:8080/mcp --json")]
pub struct PromptGetArgs {
    /// The prompt's name
    pub name: String,
    /// Arguments as name=value (prompt arguments are strings)
    #[arg(value_name = "ARG")]
    pub args: Vec<String>,
    /// Arguments as one JSON object of strings (name=value words are merged on top)
    #[arg(long, value_name = "JSON")]
    pub args_json: Option<String>,
    #[command(flatten)]
    pub server: ServerArgs,
}

#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub enum TasksCommand {
    /// The tasks the server keeps for this session (all pages)
    List(ServerArgs),
    /// One task's status
    Get(TaskIdArgs),
    /// A task's result: waits (up to --timeout) for it to finish, then shows it as `call` does
    Result(TaskIdArgs),
    /// Cancel a task
    Cancel(TaskIdArgs),
}

#[derive(Debug, Args)]
pub struct TaskIdArgs {
    /// The task's id (as `call --task` or `tasks list` printed it)
    pub task_id: String,
    #[command(flatten)]
    pub server: ServerArgs,
}

#[derive(Debug, Args)]
#[command(after_help = "Arguments:\n  key=value     typed by the tool's inputSchema: zip=01234 stays a string, volume=50 is an integer\n  \
a.b=value     nested object {\"a\":{\"b\":…}}\n  key:=JSON     raw JSON, no typing (opts:='{\"x\":[1,2]}')\n\n\
Examples:\n  mcpdev call self.audio_speaker.set_volume volume=50\n  mcpdev call self.screen.set_theme theme=dark --device aa:bb\n  \
mcpdev call self.get_device_status --json | jq .\n  \
mcpdev call dev-020000000001.self.get_device_status --url http://127.0.0.1:8001/mcp\n\n\
With --url, a server's tools are listed only up to the page that holds the tool; on an mcpdev hub's /mcp, \
`<prefix>.<tool>` is looked up in that device's tools alone, however large the fleet.")]
pub struct CallArgs {
    /// The tool's name
    pub tool: String,
    /// Arguments as key=value, a.b=value or key:=JSON
    #[arg(value_name = "ARG")]
    pub args: Vec<String>,
    /// Arguments as one JSON object (k=v words are merged on top)
    #[arg(long, value_name = "JSON")]
    pub args_json: Option<String>,
    /// Save image and audio content to DIR instead of summarising it
    #[arg(long, value_name = "DIR")]
    pub save_images: Option<std::path::PathBuf>,
    /// Send even if the arguments fail the inputSchema (the device decides)
    #[arg(long)]
    pub no_validate: bool,
    /// With --url or --stdio: run the call as a task (MCP 2025-11-25): its status is shown on
    /// stderr while it runs, its result fetched when it ends, and Ctrl-C cancels it
    /// (`tasks/cancel`). --timeout bounds the whole wait; a task still running then is left to
    /// run (`mcpdev tasks result ID` fetches it later). A tool whose taskSupport is "required"
    /// runs as a task without it
    #[arg(long)]
    pub task: bool,
    /// With --task: how long the server should keep the task and its result (its `ttl`)
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, requires = "task")]
    pub task_ttl: Option<std::time::Duration>,
    #[command(flatten)]
    pub target: DeviceArgs,
}

#[derive(Debug, Args)]
#[command(after_help = "Checks: hello (headers, fields, features.mcp), initialize, tools/list (paging, order, \
withUserTools, cursors, page size, declarations), JSON-RPC hygiene (error codes, ids, ping, 8 in flight, escaping, \
malformed JSON, notifications), the envelope (type, session_id echoed), opt-in calls (--call) and fuzzing \
(--fuzz), timing.\n\n\
fail: what real backends trip on; warn: a deviation they tolerate; one missing answer is counted once, \
other checks that met it are skipped naming it. Every check with its severity and reference: docs/check.md.\n\n\
Exit code 10 when a check failed (or warned, with --strict).\n\n\
Examples:\n  mcpdev check --listen 0.0.0.0:8000\n  mcpdev check -d aa:bb   # through a running hub: raw-frame checks are skipped\n  mcpdev check --mqtt mqtt://broker.lan:1883 -d aa:bb:cc:dd:ee:ff   # no hub: hello checks are skipped\n  mcpdev check --listen 0.0.0.0:8000 --call 'self.audio_speaker.*' --junit check.xml")]
pub struct CheckArgs {
    /// Listen on ADDR (e.g. 0.0.0.0:8000), accept the next device, check it, exit (every check);
    /// without it or --mqtt, the device is reached through the hub (checks needing raw frames are skipped)
    #[arg(long, value_name = "ADDR", conflicts_with = "device")]
    pub listen: Option<std::net::SocketAddr>,
    /// Instead of a hub: reach the device (--device) through this MQTT broker, e.g. mqtt://host:1883,
    /// and run every check but the hello checks (an idle device says no hello over MQTT)
    #[arg(long, value_name = "URL", conflicts_with = "listen")]
    pub mqtt: Option<String>,
    /// The Device-Id (MAC); through a hub also a unique prefix of it, or an alias
    #[arg(short, long, env = "MCPDEV_DEVICE")]
    pub device: Option<String>,
    /// The hub's host listener
    #[arg(long, env = "MCPDEV_HUB", default_value = "http://127.0.0.1:8001")]
    pub hub: String,
    /// Wait up to DURATION for the device to connect (and, through a hub, finish onboarding; over
    /// MQTT, answer initialize: at least --timeout); default: 1h with --listen, not at all through a hub
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub wait: Option<std::time::Duration>,
    /// How long to wait for each answer from the device
    #[arg(long, env = "MCPDEV_TIMEOUT", default_value = "10s", value_parser = parse_duration)]
    pub timeout: std::time::Duration,
    /// Call the tools matching GLOB (`*`, `?`) with arguments from their schemas; repeatable.
    /// User-only and reboot/reset/upgrade/erase tools are called only when named exactly
    #[arg(long, value_name = "GLOB")]
    pub call: Vec<String>,
    /// Also send N generated argument sets to each tool chosen with --call (bounds and just
    /// outside, wrong types, missing arguments, long and non-ASCII strings)
    #[arg(long, value_name = "N", requires = "call", default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=10_000))]
    pub fuzz: u32,
    /// Onboarding (initialize and every tools/list page) must end within DURATION of the hello
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub max_onboarding: std::time::Duration,
    /// Treat warnings as failures
    #[arg(long)]
    pub strict: bool,
    /// Also write the results as JUnit XML to FILE
    #[arg(long, value_name = "FILE")]
    pub junit: Option<std::path::PathBuf>,
}

#[derive(Debug, Args)]
#[command(after_help = "The link works once: opening it sets a session cookie and drops the token from the address.\n\
Examples:\n  mcpdev dashboard\n  mcpdev dashboard --no-open --hub http://127.0.0.1:8001")]
pub struct DashboardArgs {
    /// The hub's host listener
    #[arg(long, env = "MCPDEV_HUB", default_value = "http://127.0.0.1:8001")]
    pub hub: String,
    /// Only print the link; do not open a browser
    #[arg(long)]
    pub no_open: bool,
}

#[derive(Debug, Args)]
pub struct WatchArgs {
    /// Only this device (id, prefix or alias); all devices when left out
    #[arg(short, long, env = "MCPDEV_DEVICE")]
    pub device: Option<String>,
    /// The hub's host listener
    #[arg(long, env = "MCPDEV_HUB", default_value = "http://127.0.0.1:8001")]
    pub hub: String,
    /// Also show every MCP frame in both directions, with the round-trip latency of replies
    #[arg(long)]
    pub traffic: bool,
    /// Stop after this many events
    #[arg(long, value_name = "N")]
    pub count: Option<u64>,
    /// Also write the device's session to FILE (NDJSON: identity and hello, then every MCP frame
    /// both ways with timestamps; never a token), for `sim --replay FILE`; needs --device
    #[arg(long, value_name = "FILE", requires = "device")]
    pub record: Option<std::path::PathBuf>,
}

#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  mcpdev devices                  # connected devices\n  \
mcpdev devices --ndjson         # one JSON object per device and line, as pages arrive\n  \
mcpdev devices pending          # devices waiting to be admitted, with their codes\n  \
mcpdev devices approve 123456   # the code the device shows (or its Device-Id)\n  \
mcpdev devices deny 123456      # refuse a request\n  \
mcpdev devices revoke aa:bb:cc:dd:ee:ff")]
pub struct DevicesArgs {
    /// The hub's host listener
    #[arg(long, env = "MCPDEV_HUB", default_value = "http://127.0.0.1:8001", global = true)]
    pub hub: String,
    /// The listing as NDJSON: one device object per line, written as the hub's pages arrive
    /// (--json keeps one array)
    #[arg(long)]
    pub ndjson: bool,
    /// Devices per request to the hub when listing (at most 1000)
    #[arg(long, value_name = "N", default_value_t = 200, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub page_size: u32,
    #[command(subcommand)]
    pub command: Option<DevicesCommand>,
}

#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub enum DevicesCommand {
    /// Admit a device: the 6-digit code it shows (or that its refusal named); or its Device-Id,
    /// which prints a token for you to give the device (never handed out over OTA)
    Approve {
        #[arg(value_name = "CODE|DEVICE-ID")]
        target: String,
        /// Replace the binding of a device that is admitted already (a new board or a reset one
        /// with the same MAC): the old binding's tokens stop working and its session is cut off
        #[arg(long)]
        rebind: bool,
    },
    /// Refuse a pending request by its code (the device may ask again, with a new code)
    Deny {
        #[arg(value_name = "CODE")]
        code: String,
    },
    /// Withdraw a device's admission and disconnect it
    Revoke {
        #[arg(value_name = "DEVICE-ID")]
        device: String,
    },
    /// Devices waiting to be admitted, with their codes
    Pending,
    /// Devices that are admitted
    Admitted,
}

// `sim`: how a virtual device finds its backend besides a WebSocket URL.
#[derive(Debug, Args, Clone)]
pub struct SimBootstrapArgs {
    /// Connect over MQTT through this broker instead of WebSocket (mqtt://host:1883)
    #[arg(long, value_name = "URL", conflicts_with = "ota")]
    pub mqtt: Option<String>,
    /// Bootstrap like a stock device: POST the system info to this OTA URL, then connect over
    /// what the answer says (MQTT if it has an mqtt section, else WebSocket)
    #[arg(long, value_name = "URL")]
    pub ota: Option<String>,
}

/// Flags that carry a secret, with the environment variable to use instead: on the command line,
/// `ps` shows them to every user of the machine.
const SECRET_FLAGS: &[(&str, &str, &str)] = &[
    ("device_tokens", "--device-token", "MCPDEV_DEVICE_TOKEN"),
    ("gateway_tokens", "--gateway-token", "MCPDEV_GATEWAY_TOKEN"),
    ("token", "--token", "MCPDEV_DEVICE_TOKEN"),
    ("vision_token", "--vision-token", "MCPDEV_VISION_TOKEN"),
    ("mcp_token", "--mcp-token", "MCPDEV_MCP_TOKEN"),
];

/// A warning for each secret given on the command line (not through its environment variable),
/// including `--header 'Authorization: …'`.
pub fn secrets_on_command_line(matches: &clap::ArgMatches) -> Vec<String> {
    let mut warnings = Vec::new();
    let mut m = Some(matches);
    while let Some(here) = m {
        let on_line = |id: &str| here.value_source(id) == Some(clap::parser::ValueSource::CommandLine);
        for id in here.ids() {
            if let Some((_, flag, env)) = SECRET_FLAGS.iter().find(|(name, ..)| *name == id.as_str())
                && on_line(id.as_str())
            {
                warnings.push(format!("{flag} on the command line is visible to other users of this machine (ps); set {env} instead"));
            }
        }
        let headers = here.ids().any(|id| id.as_str() == "headers") && on_line("headers");
        if headers && here.get_many::<String>("headers").into_iter().flatten().any(|h| h.trim_start().to_ascii_lowercase().starts_with("authorization")) {
            warnings.push("an Authorization header on the command line is visible to other users of this machine (ps)".into());
        }
        // `--stdio-env API_KEY=…`: the value is on the command line; `--stdio-env API_KEY` passes ours.
        let env = here.ids().any(|id| id.as_str() == "stdio_env") && on_line("stdio_env");
        let pairs = if env { here.get_many::<String>("stdio_env").into_iter().flatten().collect() } else { Vec::new() };
        for pair in pairs {
            if let Some((name, _)) = pair.split_once('=')
                && ["TOKEN", "KEY", "SECRET", "PASSWORD"].iter().any(|w| name.to_ascii_uppercase().contains(w))
            {
                warnings.push(format!("--stdio-env {name}=… on the command line is visible to other users of this machine (ps); export {name} and pass `--stdio-env {name}` instead"));
            }
        }
        m = here.subcommand().map(|(_, sub)| sub);
    }
    warnings
}

#[derive(Debug, Subcommand)]
#[command(defer = true)]
#[command(after_help = "Examples (on the hub's machine, as the user who runs the hub):\n  \
mcpdev remote-token create alice > alice.token   # shown once; copy it to alice's machine (0600)\n  \
mcpdev remote-token list\n  \
mcpdev remote-token revoke alice\n\n\
On the other machine: MCPDEV_HUB_TOKEN_FILE=alice.token MCPDEV_CA_FILE=ca.pem mcpdev devices --hub https://hub.lan:8001\n\n\
A remote token is accepted only over TLS, by a hub whose host listener other machines reach \
(serve --tls auto --host-tls --host-addr 0.0.0.0:8001); it never goes on a command line.")]
pub enum RemoteTokenCommand {
    /// Make a token for NAME and print it (once: only its hash is kept, in the state directory),
    /// with the hub's CA on a second line when the hub has one: the CLI then sends the token only
    /// to a hub that proves that CA
    Create {
        /// Whose token it is: 1 to 32 letters, digits, '.', '-', '_'
        #[arg(value_name = "NAME")]
        name: String,
        /// Write the token to FILE, readable by you only (0600), instead of printing it
        #[arg(long, value_name = "FILE")]
        out: Option<std::path::PathBuf>,
    },
    /// The tokens this hub accepts: names, ids and when they were made (never a secret)
    List,
    /// Withdraw NAME's token: the hub refuses it from now on and ends, within a second, every
    /// stream, session, connection and task it opened
    Revoke {
        #[arg(value_name = "NAME")]
        name: String,
    },
}

#[derive(Debug, Args)]
pub struct ManArgs {
    /// The command whose page to print (e.g. `tools list`); none for mcpdev's own page
    pub command: Vec<String>,
}

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// The Device-Id of `sim`'s first device when `--device-id` is not given.
pub const SIM_FIRST_DEVICE: &str = "02:00:00:00:00:01";

/// The hint for `mcpdev call TOOL --name value` (or `--name=value`), which clap refuses as an
/// unknown flag: tool arguments are `name=value` words. `None` for any other error.
pub fn flag_as_tool_argument(argv: &[std::ffi::OsString], err: &clap::Error) -> Option<String> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if err.kind() != ErrorKind::UnknownArgument {
        return None;
    }
    let Some(ContextValue::String(flag)) = err.get(ContextKind::InvalidArg) else { return None };
    let words: Vec<&str> = argv.iter().map(|a| a.to_str().unwrap_or_default()).collect();
    let call = words.iter().position(|w| *w == "call")?;
    let at = words.iter().skip(call).position(|w| *w == flag || w.starts_with(&format!("{flag}=")))? + call;
    let name = flag.trim_start_matches('-');
    let (name, value) = match words[at].split_once('=') {
        Some((_, v)) => (name, v.to_string()),
        None => match words.get(at + 1).filter(|v| !v.starts_with('-')) {
            Some(v) => (name, (*v).to_string()),
            None => (name, "VALUE".to_string()),
        },
    };
    if name.is_empty() {
        return None;
    }
    let flag_meant = match err.get(ContextKind::SuggestedArg) {
        Some(ContextValue::String(s)) => format!(" (or, for mcpdev's own flag, {s})"),
        _ => String::new(),
    };
    Some(format!(
        "unexpected argument '{flag}': a tool's arguments are words NAME=VALUE, not flags; write {name}={value}{flag_meant}\n\nFor more information, try 'mcpdev call --help'."
    ))
}

pub fn parse_mac(s: &str) -> Result<String, String> {
    crate::wire::identity::parse_mac(s).map(|m| crate::wire::identity::format_mac(&m))
}
