//! mcpdev: develop, test and flash voice/IoT devices that speak MCP the way xiaozhi-esp32 devices do.
//!
//! Layers, from the wire up (each only calls the ones below it):
//! 1. [`wire`]: the xiaozhi envelope, device identity, a tolerant JSON-RPC model and a device's
//!    WebSocket frames. Pure, no I/O.
//! 2. [`session`]: one connected device as an I/O-free state machine (onboarding with retries
//!    and re-lists that survive gateways, request correlation for every consumer, timeouts, late
//!    replies, keepalive, caps and rate limits on what a device can make the hub hold or send,
//!    events; tool lists shared between devices that list the same tools). A caller gets a
//!    device's result as the JSON text the device sent.
//! 3. [`links`]: how frames reach a device (a WebSocket or MQTT task per device driving its
//!    session, the WebSocket's task owning its socket; the CLI's relay through a hub; the CLI as a
//!    client of any MCP server).
//! 4. [`hub`]: `mcpdev serve` (device listener with OTA and vision, device admission, registry,
//!    control API; accept loops with deadlines and a connection budget; an owner-only host
//!    listener, whose checks run in front of every route as plain functions). It knows neither the bridge nor MQTT: it is bound, they are attached, then it
//!    serves.
//! 5. [`bridge`]: the hub's MCP endpoints for MCP hosts (rmcp, plus legacy SSE; a session's
//!    device tool calls answered directly, without rmcp's session worker); [`mqtt`]'s hub
//!    side: MQTT devices through a broker (topics, connections, embedded broker), and the cluster
//!    of hubs on one broker (claims, presence, hub-to-hub requests, failover: docs/cluster.md).
//! 6. [`dashboard`]: the live dashboard and `/metrics` on the host listener (log-in links, a
//!    session cookie, pages embedded in the binary); beside [`cli`].
//! 7. [`commands`]: one module per subcommand; thin: parse, call the layers, render
//!    (`commands::hub_stack` assembles the hub with its MQTT side and bridge).
//!
//! Beside them: [`sim`] (virtual devices running the firmware's own MCP core, `mcp-device`; the
//! stock firmware's deviations; replay of a recorded session), [`check`] (`mcpdev check`: conformance
//! and robustness checks of a device's firmware),
//! [`flash`] (building, imaging, provisioning and flashing `firmware/`), [`args`] (`k=v` typed by
//! a tool's inputSchema, and validated: directly for the shapes devices declare, by `jsonschema`
//! otherwise), [`metrics`] (the hub's counters, counted where things happen, for `/metrics` and
//! the dashboard), [`config`] (`mcpdev.toml`), [`paths`] (the private state and runtime directories), [`device_identity`] (a device's random
//! Client-Id and device key, kept per MAC for `sim` and `flash`), [`tls`] (the rustls provider of the HTTP clients), [`exit`] (the exit codes), and [`cli`] (the
//! clap definitions the binary, the man pages and the shell completions share).
#![allow(clippy::result_large_err, reason = "an HTTP response is the error type of axum handlers and tungstenite handshake callbacks")]

/// The binary's global allocator: mimalloc for `serve` and `sim`, the system's for one-shot commands.
pub mod alloc;
pub mod args;
pub mod bridge;
pub mod check;
pub mod cli;
pub mod commands;
pub mod config;
pub mod dashboard;
pub mod device_identity;
pub mod exit;
pub mod flash;
/// The cargo-fuzz entry points (`fuzz/`), replayed by `tests/fuzz_corpora.rs`; not an API.
#[doc(hidden)]
pub mod fuzz;
pub mod hub;
pub mod links;
pub mod metrics;
pub mod mqtt;
pub mod paths;
pub mod session;
pub mod sim;
pub mod tls;
pub mod wire;
