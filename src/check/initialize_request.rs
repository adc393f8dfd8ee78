//! The `initialize` request check sends, as backends send it: with a vision endpoint (stock
//! devices set it up from here). [`super::initialize`] checks the device's answer to it, and
//! [`super::conn`] sends it to find a device over MQTT (an idle device says no hello there).
//!
//! Rules it enforces: the vision URL points at a discard port on loopback, so a device that
//! follows it sends nothing off the machine, and the token is a fixed placeholder, not a secret.

use serde_json::{Value, json};

/// `initialize` as backends send it: with a vision endpoint (stock devices set it up from here).
pub fn params() -> Value {
    json!({"protocolVersion": "2024-11-05", "capabilities": {"vision": {"url": "http://127.0.0.1:9/mcpdev-check-vision", "token": "mcpdev-check"}},
        "clientInfo": {"name": "mcpdev-check", "version": env!("CARGO_PKG_VERSION")}})
}
