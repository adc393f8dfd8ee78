//! Virtual devices: the firmware's own MCP core (`mcp-device`) behind a real WebSocket client.

pub mod client;
pub mod tools;

pub use client::{SimConfig, run_device};
pub use tools::{SimState, build_server};
