//! Virtual devices: the firmware's own MCP core (`mcp-device`) behind a real WebSocket or MQTT
//! client, optionally bootstrapped from an OTA endpoint like a stock device.

pub mod client;
pub mod config;
pub mod conformance;
pub mod mqtt;
pub mod ota;
pub mod replay;
pub mod source;
pub mod stock;
pub mod tools;

pub use client::{SimConfig, run_device};
pub use source::check_source_addr;
pub use tools::{Profile, SimState, build_server, build_server_with};
