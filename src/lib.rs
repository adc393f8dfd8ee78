//! mcpdev: develop, test and flash voice/IoT devices that speak MCP the way xiaozhi-esp32 devices do.
//!
//! Layers, from the wire up (each only calls the ones below it):
//! 1. [`wire`]: the xiaozhi envelope, device identity and a tolerant JSON-RPC model. Pure, no I/O.
//! 2. [`sim`]: virtual devices running the firmware's own MCP core (`mcp-device`) behind a real
//!    WebSocket client.
//! 3. [`commands`]: one module per subcommand; thin: parse, call the layers, render.
//!
//! [`session`] is the I/O-free state machine of one device; [`links`] drive sessions over
//! WebSocket or MQTT; [`mqtt`] holds the broker side (topics, embedded broker, cluster claims);
//! [`hub`] is `mcpdev serve` (device listener with OTA, registry, control API).
//!
//! [`cli`] holds the clap definitions the binary, the man pages and the shell completions share.

pub mod args;
pub mod bridge;
pub mod cli;
pub mod commands;
pub mod config;
pub mod exit;
pub mod flash;
pub mod hub;
pub mod links;
pub mod mqtt;
pub mod session;
pub mod sim;
pub mod wire;
