//! What every MCP client transport (stdio, Streamable HTTP, legacy SSE) gives the client: raw
//! JSON-RPC messages as JSON values, each way, so that no field a server sends (a task's `ttl`,
//! an extension's result) is lost to a typed model.
//!
//! Rules:
//! - A transport never holds more than one message of [`MAX_MESSAGE`] bytes: a larger one is
//!   refused with [`McpFailure::TooLarge`], never buffered.
//! - A transport reports its end once ([`Incoming::Closed`]), with why, and a failed send for
//!   one request ([`Incoming::Failed`]) fails that request alone.
//! - Closing drains what was queued (a `notifications/cancelled` goes out before the end), within
//!   [`CLOSE_WAIT`](super::CLOSE_WAIT).

use std::future::Future;
use std::pin::Pin;

use serde_json::Value;
use tokio::sync::mpsc;

use super::McpFailure;

/// Largest JSON-RPC message (a stdout line, an HTTP body, one SSE event) read from a server.
pub const MAX_MESSAGE: usize = 64 * 1024 * 1024;

/// What a transport delivers to the client.
#[derive(Debug)]
pub enum Incoming {
    Message(Value),
    /// Sending the request `id` failed (or its answer could not be read).
    Failed { id: Value, failure: McpFailure },
    /// The transport ended: nothing more will arrive.
    Closed(McpFailure),
}

pub type CloseFuture = Pin<Box<dyn Future<Output = ()> + Send>>;

/// One open transport: messages out, messages in, and how to end it.
pub struct Wire {
    pub out: mpsc::Sender<Value>,
    pub incoming: mpsc::Receiver<Incoming>,
    /// Ends the transport once `out` has been dropped (the session `DELETE`d, the child
    /// stopped), bounded in time.
    pub close: Box<dyn FnOnce() -> CloseFuture + Send>,
}

/// How many messages wait in each direction.
pub const QUEUE: usize = 64;
