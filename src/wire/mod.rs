//! The wire: what devices send and how it is read. Pure, no I/O.

pub mod envelope;
pub mod identity;
pub mod jsonrpc;
pub mod ws_frame;
