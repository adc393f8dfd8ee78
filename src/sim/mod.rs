//! Virtual devices: the firmware's own MCP core (`mcp-device`) behind a real WebSocket or MQTT
//! client, optionally bootstrapped from an OTA endpoint like a stock device.

pub mod client;
pub mod mqtt;
pub mod ota;
pub mod tools;

pub use client::{SimConfig, run_device};
pub use tools::{SimState, build_server};
