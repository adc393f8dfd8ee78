//! Virtual devices: the firmware's own MCP core (`mcp-device`) behind a real WebSocket client.

pub mod client;
pub mod conformance;
pub mod tools;

pub use client::{SimConfig, run_device};
pub use tools::{Profile, SimState, build_server, build_server_with};
