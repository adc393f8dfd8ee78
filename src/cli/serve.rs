//! `mcpdev serve`'s arguments, one struct per heading of its `--help` (upstream, TLS, limits,
//! MQTT and OTA), and the parsers of its own values (hub names, share groups).
//!
//! Rules it enforces: every flag that carries a secret also reads its environment variable and
//! never shows its value in `--help` (`hide_env_values`; [`super::secrets_on_command_line`]
//! warns when one is given on the command line); every deadline and cap has a default; and a
//! hub name or share group that MQTT or a broker ACL would misread is refused, saying the form
//! it must take.

use clap::{Args, ValueEnum};

use super::parse_duration;

#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  mcpdev serve --demo            # with 2 virtual devices, nothing else needed\n  \
mcpdev serve --approve-all     # a lab bench: every device is admitted\n\n\
Devices are admitted, not merely connected: a new device gets a 6-digit code (its OTA check-in \
shows it; a refused WebSocket names it) and is let in once you run `mcpdev devices approve CODE`; \
it then connects with its own token. Approvals are kept in the state directory \
($MCPDEV_STATE_DIR, else $XDG_STATE_HOME/mcpdev or ~/.local/state/mcpdev).\n\n\
SIGINT (Ctrl-C) and SIGTERM stop the hub alike: each device gets a goodbye (MQTT `goodbye`, \
WebSocket close 1001), the control token and --ready-file are removed, and it exits 130.")]
pub struct ServeArgs {
    /// Where devices connect (WebSocket /xiaozhi/v1/)
    #[arg(long, env = "MCPDEV_DEVICE_ADDR", default_value = "0.0.0.0:8000")]
    pub device_addr: std::net::SocketAddr,
    /// Where the CLI and MCP hosts connect; keep it on loopback unless you add --allowed-host
    #[arg(long, env = "MCPDEV_HOST_ADDR", default_value = "127.0.0.1:8001")]
    pub host_addr: std::net::SocketAddr,
    /// Once every listener is up, write the `listening` event (JSON: the real addresses) to FILE,
    /// so a script can wait for it; removed when the hub stops
    #[arg(long, value_name = "FILE")]
    pub ready_file: Option<std::path::PathBuf>,
    /// Run N virtual devices in this process (2 when given without a number)
    #[arg(long, value_name = "N", num_args = 0..=1, default_missing_value = "2")]
    pub demo: Option<u32>,
    /// Extra generated tools per demo device
    #[arg(long, default_value_t = 0)]
    pub demo_extra_tools: u32,
    /// Which tools the demo devices offer
    #[arg(long, value_enum, default_value_t = crate::sim::Profile::StockTools)]
    pub demo_profile: crate::sim::Profile,
    /// Shared device tokens, comma-separated, accepted for any Device-Id (not bound to a device;
    /// prefer per-device admission)
    #[arg(long = "device-token", env = "MCPDEV_DEVICE_TOKEN", hide_env_values = true, value_delimiter = ',')]
    pub device_tokens: Vec<String>,
    /// Gateway credentials, comma-separated (the xiaozhi MQTT gateway sends one bearer token for
    /// every device): accepted in place of the device token of Device-Ids a person approved; the
    /// others wait in `mcpdev devices pending`
    #[arg(long = "gateway-token", env = "MCPDEV_GATEWAY_TOKEN", hide_env_values = true, value_delimiter = ',')]
    pub gateway_tokens: Vec<String>,
    /// Admit every device (a lab bench). By default a device is admitted once approved with
    /// `mcpdev devices approve`, and must present its own token
    #[arg(long)]
    pub approve_all: bool,
    /// capabilities.vision.url for initialize (default: the hub's own vision endpoint)
    #[arg(long)]
    pub vision_url: Option<String>,
    /// capabilities.vision.token for --vision-url (default: each device gets its own token for the hub's own endpoint)
    #[arg(long, env = "MCPDEV_VISION_TOKEN", hide_env_values = true)]
    pub vision_token: Option<String>,
    /// Where the hub's vision endpoint saves uploaded photos, private to this user (folder 0700, files 0600) [default: vision/ in the state directory]
    #[arg(long, value_name = "DIR")]
    pub vision_dir: Option<std::path::PathBuf>,
    /// Photos the vision folder keeps (the oldest are removed first)
    #[arg(long, value_name = "N", default_value_t = 200, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub vision_max_files: u32,
    /// Megabytes the vision folder keeps (the oldest photos are removed first)
    #[arg(long, value_name = "MB", default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub vision_max_mb: u32,
    /// Send an MCP ping to a device after this long without traffic (its limit is 120 s)
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub keepalive: std::time::Duration,
    /// Timeout of each onboarding request (initialize, tools/list)
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub onboarding_timeout: std::time::Duration,
    /// Also accept this Host name on the host listener (for LAN use); repeatable
    #[arg(long, value_name = "HOST")]
    pub allowed_host: Vec<String>,
    /// Also accept requests with this Origin on the host listener; repeatable
    #[arg(long, value_name = "ORIGIN")]
    pub allowed_origin: Vec<String>,
    /// A bearer token MCP clients must send to /mcp, /devices/*/mcp and /sse (prefer the environment
    /// variable); shared by its holders, read once at start. Under --host-tls each person's remote
    /// token opens these too, and this one is optional
    #[arg(long, env = "MCPDEV_MCP_TOKEN", hide_env_values = true)]
    pub mcp_token: Option<String>,
    /// How long an MCP tools/call waits for the device
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub mcp_timeout: std::time::Duration,
    /// Tool names on /mcp: prefixed by device (`<alias>.<tool>`, stable) or the devices' own
    #[arg(long, value_enum, default_value_t = crate::bridge::Naming::Prefixed)]
    pub mcp_names: crate::bridge::Naming,
    /// Also offer tools the device marks user-only to MCP hosts
    #[arg(long)]
    pub mcp_user_tools: bool,
    /// Tools per tools/list page on the MCP endpoints
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub mcp_page_size: u32,
    /// Devices connected above which /mcp and /sse offer fleet tools (search_devices,
    /// list_device_tools, call_device_tool) instead of every device's tools; they turn back at a
    /// quarter below. /devices/<id>/mcp always offers that device's own tools
    #[arg(long, env = "MCPDEV_MCP_FLEET_THRESHOLD", value_name = "N", default_value_t = crate::bridge::fleet::DEFAULT_THRESHOLD)]
    pub mcp_fleet_threshold: u32,
    /// Open MCP sessions (/mcp, /sse, /devices/*/mcp and /sse) allowed in total; a new one
    /// beyond it takes the place of the least recently used Streamable HTTP session idle for
    /// --mcp-reclaim-idle, or is refused with 503 until sessions end or expire (5 min idle)
    #[arg(long, env = "MCPDEV_MCP_MAX_SESSIONS", value_name = "N", default_value_t = crate::bridge::sessions::DEFAULT_TOTAL, value_parser = clap::value_parser!(u32).range(1..))]
    pub mcp_max_sessions: u32,
    /// Open MCP sessions allowed from one peer address (on loopback, every local MCP host is one
    /// peer), and for one person's remote token from any address
    #[arg(long, env = "MCPDEV_MCP_MAX_SESSIONS_PER_PEER", value_name = "N", default_value_t = crate::bridge::sessions::DEFAULT_PER_PEER, value_parser = clap::value_parser!(u32).range(1..))]
    pub mcp_max_sessions_per_peer: u32,
    /// How long a Streamable HTTP session must go without a request (and with none open) before
    /// a new session may take its place when a session cap is full
    #[arg(long, env = "MCPDEV_MCP_RECLAIM_IDLE", value_name = "DURATION", default_value = "30s", value_parser = parse_duration)]
    pub mcp_reclaim_idle: std::time::Duration,
    /// How long a tools/call with a progressToken waits for its device before the hub reports
    /// its stages (sent, waiting, the device's own progress, answered); a call answered sooner
    /// gets its answer alone. A device's own progress report starts them at once
    #[arg(long, env = "MCPDEV_MCP_PROGRESS_AFTER", value_name = "DURATION", default_value = "250ms", value_parser = parse_duration)]
    pub mcp_progress_after: std::time::Duration,
    /// MCP tasks (a tools/call with params.task) the hub holds at once, running or finished; a
    /// task is kept for its ttl (at most 1 h), then forgotten
    #[arg(long, env = "MCPDEV_MCP_MAX_TASKS", value_name = "N", default_value_t = crate::bridge::tasks::DEFAULT_TOTAL, value_parser = clap::value_parser!(u32).range(1..))]
    pub mcp_max_tasks: u32,
    /// MCP tasks one session may hold at once
    #[arg(long, env = "MCPDEV_MCP_MAX_TASKS_PER_SESSION", value_name = "N", default_value_t = crate::bridge::tasks::DEFAULT_PER_SESSION, value_parser = clap::value_parser!(u32).range(1..))]
    pub mcp_max_tasks_per_session: u32,
    #[command(flatten)]
    pub mqtt: MqttServeArgs,
    #[command(flatten)]
    pub tls: TlsServeArgs,
    #[command(flatten)]
    pub limits: LimitArgs,
    #[command(flatten)]
    pub upstream: UpstreamArgs,
}

// `serve --upstream`: devices keep their own voice backend, relayed through the hub
// (docs/upstream.md).
#[derive(Debug, Args, Clone)]
#[command(next_help_heading = "Upstream (relay devices to their own voice backend, docs/upstream.md)")]
pub struct UpstreamArgs {
    /// Relay every device to this voice backend (wss://api.tenclass.net/xiaozhi/v1/, or a
    /// self-hosted xiaozhi-esp32-server): the hub opens it with the device's own headers and
    /// passes every frame both ways, while the CLI and MCP hosts still list and call the
    /// device's tools. Per-device upstreams: `[upstreams]` in mcpdev.toml
    #[arg(long, env = "MCPDEV_UPSTREAM", value_name = "URL")]
    pub upstream: Option<String>,
    /// Pass OTA check-ins and /activate to this upstream OTA endpoint
    /// (https://api.tenclass.net/xiaozhi/ota/); its answer comes back with websocket.url pointing
    /// at this hub and any mqtt block replaced by websocket
    #[arg(long, env = "MCPDEV_UPSTREAM_OTA", value_name = "URL")]
    pub upstream_ota: Option<String>,
    /// Allow plain ws:// and http:// upstreams (the device's token then crosses the network in
    /// clear text); by default only wss:// and https://, verified by the system's roots or
    /// MCPDEV_CA_FILE
    #[arg(long)]
    pub upstream_plain: bool,
}

/// `serve --tls`: whether the hub makes its own certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TlsMode {
    /// Plain ws://, http:// and mqtt://
    Off,
    /// The hub's own CA and a certificate for this machine's names and addresses, kept (0600) in
    /// the state directory's tls/ and renewed before they expire
    Auto,
}

// `serve`: TLS on the hub's listeners.
#[derive(Debug, Args, Clone)]
#[command(next_help_heading = "TLS")]
pub struct TlsServeArgs {
    /// Serve devices over https:// and wss:// only (and mqtts with --mqtt embedded); `auto`: with
    /// the hub's own CA (docs/tls.md)
    #[arg(long, env = "MCPDEV_TLS", value_enum, value_name = "MODE", default_value_t = TlsMode::Off)]
    pub tls: TlsMode,
    /// Serve TLS with this certificate chain (PEM, leaf first: certbot's fullchain.pem), re-read
    /// when it changes; a public certificate is what stock xiaozhi firmware accepts
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<std::path::PathBuf>,
    /// The private key of --tls-cert (PEM)
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<std::path::PathBuf>,
    /// Serve the host listener (CLI, MCP hosts, dashboard) over https:// too, for use from other
    /// machines (with --host-addr or --allowed-host, and MCPDEV_MCP_TOKEN)
    #[arg(long)]
    pub host_tls: bool,
    /// With TLS and --mqtt embedded: where the broker takes MQTT over TLS (stock firmware uses TLS
    /// on port 8883 only)
    #[arg(long, value_name = "ADDR", default_value = "0.0.0.0:8883")]
    pub mqtts_listen: std::net::SocketAddr,
    /// With TLS and --mqtt embedded: keep plain MQTT on --mqtt-listen too (by default it is moved
    /// to a loopback port for the hub's own link)
    #[arg(long)]
    pub mqtt_plain: bool,
}

// `serve`: deadlines and caps that keep slow or hostile connections from starving the hub.
#[derive(Debug, Args, Clone)]
#[command(next_help_heading = "Limits")]
pub struct LimitArgs {
    /// A request's headers must arrive within this (both listeners)
    #[arg(long, env = "MCPDEV_HEADER_TIMEOUT", value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub header_timeout: std::time::Duration,
    /// A request's body must arrive within this (both listeners)
    #[arg(long, env = "MCPDEV_BODY_TIMEOUT", value_name = "DURATION", default_value = "60s", value_parser = parse_duration)]
    pub body_timeout: std::time::Duration,
    /// A TLS handshake must be complete this long after its connection was let in (it holds a
    /// pre-hello slot meanwhile)
    #[arg(long, env = "MCPDEV_TLS_HANDSHAKE_TIMEOUT", value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub tls_handshake_timeout: std::time::Duration,
    /// A WebSocket device that has not said hello this long after connecting is closed
    #[arg(long, env = "MCPDEV_HELLO_TIMEOUT", value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub hello_timeout: std::time::Duration,
    /// Connections from one address that have not said hello yet (more for a distant address whose hellos keep coming); more wait their turn (--accept-queue-timeout)
    #[arg(long, env = "MCPDEV_MAX_PRE_HELLO_PER_PEER", value_name = "N", default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_pre_hello_per_peer: u32,
    /// Device-side connections that have not said hello yet, in total; more wait their turn
    #[arg(long, env = "MCPDEV_MAX_PRE_HELLO", value_name = "N", default_value_t = 512, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_pre_hello: u32,
    /// How long a connection over those caps waits for its turn before it is closed
    #[arg(long, env = "MCPDEV_ACCEPT_QUEUE_TIMEOUT", value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub accept_queue_timeout: std::time::Duration,
    /// Connections from one address waiting for their turn; more are closed at once [default: half of the device-connection cap]
    #[arg(long, env = "MCPDEV_MAX_QUEUED_PER_PEER", value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_queued_per_peer: Option<u32>,
    /// Device-side connections in total (also kept 256 below the open-file limit, for the host listener)
    #[arg(long, env = "MCPDEV_MAX_DEVICE_CONNECTIONS", value_name = "N", default_value_t = 100_000, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_device_connections: u32,
}

// `serve`: MQTT devices and device bootstrap (OTA).
#[derive(Debug, Args, Clone)]
#[command(next_help_heading = "MQTT and OTA")]
pub struct MqttServeArgs {
    /// Serve MQTT devices: `embedded` runs a broker in this process; or a broker URL
    /// (mqtt://[user@]host[:port], mqtts://…; a password in MCPDEV_MQTT_PASSWORD)
    #[arg(long, env = "MCPDEV_MQTT", value_name = "embedded|URL")]
    pub mqtt: Option<String>,
    /// Where the embedded broker listens
    #[arg(long, value_name = "ADDR", default_value = "0.0.0.0:1883")]
    pub mqtt_listen: std::net::SocketAddr,
    /// Shared-subscription group: hubs on one broker with the same group and the same hub secret
    /// share the devices (they read `$share/NAME-<tag>/…`, the tag derived from the hub secret, so
    /// a hub with another secret takes none of their uplinks)
    #[arg(long, value_name = "NAME", default_value = "mcpdev", value_parser = parse_mqtt_group)]
    pub mqtt_group: String,
    /// This hub's name in a cluster, shown by `devices` (column `hub`) instead of its id: up to 32
    /// letters, digits, `.`, `-` and `_` (needs --mqtt: a hub without a broker has no cluster)
    #[arg(long, env = "MCPDEV_HUB_NAME", value_name = "NAME", requires = "mqtt", value_parser = parse_hub_name)]
    pub hub_name: Option<String>,
    /// Cluster: devices this hub lists in its index for the other hubs at most (the first in
    /// Device-Id order); the others hubs find the rest on demand and say how many are not listed
    #[arg(long, env = "MCPDEV_CLUSTER_INDEX_MAX", value_name = "N", default_value_t = crate::mqtt::presence::DEFAULT_INDEX_MAX)]
    pub cluster_index_max: u32,
    /// Cluster: other hubs' devices kept as stand-ins for this hub's MCP endpoints at once; beyond
    /// it the one used least recently is dropped and made again when asked for
    #[arg(long, env = "MCPDEV_CLUSTER_STAND_INS", value_name = "N", default_value_t = crate::mqtt::proxy::DEFAULT_MAX_PROXIES, value_parser = clap::value_parser!(u32).range(1..))]
    pub cluster_stand_ins: u32,
    /// Cluster: offer the other hubs a direct TLS link here for their requests to this hub's
    /// devices (one hop fewer than the broker each way): the address they reach this hub at, not a
    /// wildcard (port 0: any free port). Advertised to the hubs only, MAC'd with the hub secret;
    /// a hub without one goes through the broker
    #[arg(long, env = "MCPDEV_CLUSTER_LINK", value_name = "IP:PORT", requires = "mqtt")]
    pub cluster_link: Option<std::net::SocketAddr>,
    /// Largest MQTT message to or from a device, in bytes; larger ones are refused
    #[arg(long, value_name = "BYTES", default_value_t = 8192, value_parser = clap::value_parser!(u64).range(512..=1_048_576))]
    pub mqtt_max_payload: u64,
    /// Mosquitto with dynamic security: keep a broker login per approved device (username and
    /// client id its key, password its token, its own two topics only); removed on revocation.
    /// Admin login in MCPDEV_MQTT_ADMIN_USERNAME and MCPDEV_MQTT_ADMIN_PASSWORD(_FILE), else the hub's own
    #[arg(long)]
    pub mqtt_dynsec: bool,
    /// EMQX 5: serve its HTTP authentication and authorization hooks here (/mqtt/authn,
    /// /mqtt/authz), so that EMQX asks the hub; the secret EMQX sends is in MCPDEV_MQTT_HOOK_SECRET(_FILE)
    #[arg(long, value_name = "ADDR")]
    pub mqtt_hooks: Option<std::net::SocketAddr>,
    /// Hand approved devices the one login in MCPDEV_MQTT_DEVICE_USERNAME/PASSWORD. It lets every
    /// device (and anyone who reads it off one) connect under any client id, another device's
    /// included: prefer --mqtt-dynsec or --mqtt-hooks
    #[arg(long)]
    pub mqtt_shared_device_login: bool,
    /// `mqtt.endpoint` handed to devices by OTA (default: the broker's address as devices reach it)
    #[arg(long, value_name = "HOST:PORT")]
    pub mqtt_device_endpoint: Option<String>,
    /// The UDP socket MQTT devices send audio to (counted, then dropped)
    #[arg(long, value_name = "ADDR", default_value = "0.0.0.0:0")]
    pub udp_addr: std::net::SocketAddr,
    /// The name devices reach this machine by (OTA URLs, udp.server, vision URL); default: the hub's address the device came in on (MQTT devices: this machine's address)
    #[arg(long, value_name = "HOST")]
    pub public_host: Option<String>,
    /// Offer this firmware image in OTA answers (served by the hub; needs --firmware-version)
    #[arg(long, value_name = "FILE", requires = "firmware_version")]
    pub firmware: Option<std::path::PathBuf>,
    /// The version of --firmware; a device upgrades when it is newer than its own
    #[arg(long, value_name = "V", requires = "firmware")]
    pub firmware_version: Option<String>,
    /// `server_time.timezone_offset` in OTA answers, in minutes east of UTC
    #[arg(long, value_name = "MINUTES", default_value_t = 0, allow_negative_numbers = true)]
    pub timezone_offset: i32,
}

/// A MAC address `aa:bb:cc:dd:ee:ff`, normalised to lower case.
fn parse_hub_name(s: &str) -> Result<String, String> {
    if crate::mqtt::presence::valid_hub_name(s) {
        return Ok(s.to_string());
    }
    Err(format!("a hub name is 1 to {} letters, digits, '.', '-' and '_', starting with a letter or digit", crate::mqtt::presence::MAX_HUB_NAME))
}

/// A share-group name: one topic level MQTT takes after `$share/` (no `/`, `+`, `#`), kept to
/// what reads the same in logs and broker ACLs.
fn parse_mqtt_group(s: &str) -> Result<String, String> {
    if (1..=64).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_')) {
        return Ok(s.to_string());
    }
    Err("a share group is 1 to 64 letters, digits, '.', '-' and '_' (it names an MQTT shared subscription, $share/NAME-<tag>/…)".into())
}
