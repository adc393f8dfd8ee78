//! Links: how frames reach a device. Each link drives one [`Session`](crate::session::Session)
//! and exposes it as a [`DeviceHandle`].
//! - [`websocket`]: a device's WebSocket, accepted by the hub or by a CLI command with `--listen`,
//!   and [`ws_socket`]: its socket, read and written by the link's one task;
//! - [`mqtt`]: a device reached through an MQTT broker, by the hub or by a CLI command with `--mqtt`;
//! - [`upgrade`]: turning an HTTP request into a WebSocket on our own listeners, and
//!   [`ws_client`]: opening one as a client, `ws://` or `wss://`, with [`ws_handshake`]'s
//!   opening handshake;
//! - [`relay`]: a device relayed to its own upstream voice backend (`serve --upstream`), its
//!   session fed and used by the hub on the way;
//! - [`hub_client`]: the CLI's link through a running hub, which behaves like a direct one;
//!   [`control_token`]: where it finds the hub's control token; [`listeners`]: which of a hub's
//!   two listeners a client reached;
//! - [`changes`]: the tools epoch and the log of which device changed at each epoch;
//! - [`event`]: what a link tells the hub about its device, and [`ring`]: the hub's event ring,
//!   bounded in events and bytes, that every watcher reads.

pub mod changes;
pub mod control_token;
pub mod event;
pub mod handle;
pub mod hub_client;
pub mod listeners;
pub(crate) mod mailbox;
pub mod mcp;
pub mod mqtt;
pub mod relay;
pub mod ring;
pub mod upgrade;
pub mod websocket;
pub mod ws_client;
pub mod ws_handshake;
pub mod ws_socket;

pub use event::DeviceEvent;
pub use handle::DeviceHandle;
