//! The device side of the xiaozhi MCP protocol, for `no_std` + `alloc`.
//!
//! A xiaozhi-style device connects to its backend (WebSocket or MQTT), says `hello`, and then acts
//! as an **MCP server**: the backend sends JSON-RPC `initialize`, `tools/list` (paged by cursor)
//! and `tools/call` inside `{"session_id":…,"type":"mcp","payload":{…}}` envelopes.
//!
//! - [`McpServer`] answers JSON-RPC: `initialize` (`2024-11-05`, keeps `capabilities.vision`),
//!   `tools/list` (pages of at most 8000 bytes of result text, the cursor is a tool name,
//!   `nextCursor` absent on the last page, user-only tools behind `withUserTools`), `tools/call`
//!   (arguments validated against the declared properties), and `ping`.
//! - [`Tool`] and [`Property`] make up the registry a board or a simulator fills; each tool's
//!   `inputSchema` is generated from its properties.
//! - [`Outbox`] holds device-initiated notifications until the transport drains them.
//! - [`DeviceLink`] wraps the server in the envelope, handles the server hello and `goodbye`.
//!
//! Everything here is I/O-free and allocation-light (replies are written as text into one buffer),
//! and nothing needs atomics, so it runs on the ESP32-C3 (`riscv32imc`), inside `mcpdev sim`, and
//! in host unit tests alike.
#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

/// The cargo-fuzz entry point (`firmware/fuzz/`); not an API.
#[doc(hidden)]
pub mod fuzz;
mod hello;
mod json;
mod link;
mod outbox;
pub mod rpc;
mod schema;
mod server;
mod tool;

pub use hello::{AudioParams, Transport, hello};
pub use json::push_str_literal;
pub use link::{DeviceLink, Inbound};
pub use outbox::Outbox;
pub use schema::{DefaultValue, Property, PropertyKind};
pub use server::{DEFAULT_PAGE_LIMIT, McpServer, PROTOCOL_VERSION, RegistryError, Vision};
pub use tool::{ArgValue, Arguments, Call, Content, Handler, Tool, ToolError, ToolOutput};
