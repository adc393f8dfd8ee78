//! What every MCP client transport (stdio, Streamable HTTP, legacy SSE) gives the client: raw
//! JSON-RPC messages, each way, so that no field a server sends (a task's `ttl`, an extension's
//! result) is lost to a typed model.
//!
//! Rules:
//! - A transport never holds more than one message of [`MAX_MESSAGE`] bytes: a larger one is
//!   refused with [`McpFailure::TooLarge`], never buffered.
//! - A message from the server is kept as the text it came as ([`Message`]: checked to be JSON,
//!   not read into a tree), so holding it costs its size; what of it is used is read from that
//!   text once, where it is used. A tree of JSON values costs up to 80 times the text it came
//!   from (`[{"a":0},…]`), which let a hostile server make the CLI hold 550 times what it sent.
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

/// One JSON-RPC message from a server, as the text it sent (valid JSON).
pub type Message = Box<serde_json::value::RawValue>;

/// A message from the server's text (a stdout line, an HTTP body, an SSE event's data): `None`
/// if it is not JSON. The text is taken, not copied, when it has no space around it.
pub fn message(text: String) -> Option<Message> {
    serde_json::value::RawValue::from_string(text).ok()
}

/// The messages of an HTTP body: one, or each of a JSON-RPC batch (`[…]`), each its own text.
pub fn messages(body: &[u8]) -> Result<Vec<Message>, serde_json::Error> {
    let text = body.trim_ascii();
    if text.first() == Some(&b'[') {
        let all: Vec<&serde_json::value::RawValue> = serde_json::from_slice(text)?;
        Ok(all.into_iter().map(|m| m.to_owned()).collect())
    } else {
        Ok(vec![serde_json::from_slice(text)?])
    }
}

/// What the client reads of every message, borrowed from its text (nothing copied, no tree).
#[derive(serde::Deserialize)]
pub struct Head<'a> {
    #[serde(borrow, default)]
    pub id: Option<&'a serde_json::value::RawValue>,
    #[serde(borrow, default)]
    pub method: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow, default)]
    pub result: Option<&'a serde_json::value::RawValue>,
    #[serde(borrow, default)]
    pub error: Option<&'a serde_json::value::RawValue>,
}

impl<'a> Head<'a> {
    /// The head of a message; `None` when it is not a JSON object (or names a field twice).
    pub fn of(msg: &'a Message) -> Option<Self> {
        serde_json::from_str(msg.get()).ok()
    }
}

/// What a transport delivers to the client.
#[derive(Debug)]
pub enum Incoming {
    Message(Message),
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
