//! JSON-RPC over a [`Wire`]: requests matched to their answers by id, the server's
//! notifications handed on, its requests answered.
//!
//! Rules:
//! - Every request ends within its timeout, with its result or a typed [`McpFailure`]; a request
//!   that timed out, or whose caller gave up (dropped it: Ctrl-C), is cancelled on the server
//!   with `notifications/cancelled`, as the spec asks.
//! - When the transport ends, every request waiting fails at once with why it ended.
//! - The server's requests get an answer (`ping`: an empty result; anything else: method not
//!   found), so a server never waits on us.
//! - Notifications are kept up to [`NOTES`], and [`NOTES_BYTES`] of them (one of any size when
//!   none is held); past that they are dropped (counted, logged), never queued without end.
//! - An answer is kept as the text it came as until its caller reads it: once, into JSON values
//!   ([`Peer::request`]), or item by item from the text ([`Peer::request_raw`], for listings).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::value::RawValue;
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

use super::McpFailure;
use super::wire::{Head, Incoming, Message, Wire};

/// Server notifications kept until read.
const NOTES: usize = 256;
/// Bytes of unread notifications kept (one is kept whatever its size when none is).
pub const NOTES_BYTES: usize = 4 * 1024 * 1024;

/// An answer to one of our requests that is not an error, as the server sent it.
pub struct Answer(Message);

impl Answer {
    /// The answer's `result`, as its text (`None` when it has none).
    pub fn result(&self) -> Option<&RawValue> {
        Head::of(&self.0).and_then(|h| h.result)
    }

    /// The `result` read into JSON values (`null` when it has none).
    pub fn value(&self) -> Value {
        self.result().and_then(|r| serde_json::from_str(r.get()).ok()).unwrap_or(Value::Null)
    }
}

type Waiting = Arc<Mutex<HashMap<u64, oneshot::Sender<Result<Answer, McpFailure>>>>>;

/// The unread notifications: their queue and what they hold.
struct Notes {
    tx: mpsc::Sender<Message>,
    held: AtomicUsize,
    dropped: AtomicU64,
}

impl Notes {
    /// Queues a notification within [`NOTES`] and [`NOTES_BYTES`]; drops it (counted, logged at
    /// powers of two) past them.
    fn offer(&self, msg: Message) {
        let size = msg.get().len();
        let held = self.held.fetch_add(size, Ordering::Relaxed);
        if held > 0 && held + size > NOTES_BYTES || self.tx.try_send(msg).is_err() {
            self.held.fetch_sub(size, Ordering::Relaxed);
            let dropped = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
            if dropped.is_power_of_two() {
                tracing::warn!("the MCP server sent more notifications than mcpdev keeps unread ({NOTES}, {} MiB); dropped {dropped} so far", NOTES_BYTES >> 20);
            }
        }
    }
}

pub struct Peer {
    out: mpsc::Sender<Value>,
    waiting: Waiting,
    ended: Arc<Mutex<Option<McpFailure>>>,
    next: AtomicU64,
    notes: tokio::sync::Mutex<mpsc::Receiver<Message>>,
    kept: Arc<Notes>,
    close: Option<Box<dyn FnOnce() -> super::wire::CloseFuture + Send>>,
}

impl Peer {
    pub fn start(wire: Wire) -> Self {
        let Wire { out, mut incoming, close } = wire;
        let waiting: Waiting = Arc::default();
        let ended: Arc<Mutex<Option<McpFailure>>> = Arc::default();
        let (note_tx, note_rx) = mpsc::channel(NOTES);
        let kept = Arc::new(Notes { tx: note_tx, held: AtomicUsize::new(0), dropped: AtomicU64::new(0) });
        // Weak: the transport's writer ends (and the session closes) once the peer lets go of `out`.
        let (w, e, reply, notes) = (waiting.clone(), ended.clone(), out.downgrade(), kept.clone());
        tokio::spawn(async move {
            while let Some(inc) = incoming.recv().await {
                match inc {
                    Incoming::Message(msg) => dispatch(msg, &w, &notes, &reply),
                    Incoming::Failed { id, failure } => {
                        if let Some(tx) = id.as_u64().and_then(|id| w.lock().ok()?.remove(&id)) {
                            let _ = tx.send(Err(failure));
                        }
                    }
                    Incoming::Closed(failure) => {
                        if let Ok(mut slot) = e.lock() {
                            *slot = Some(failure.clone());
                        }
                        let all: Vec<_> = w.lock().map(|mut m| m.drain().collect()).unwrap_or_default();
                        for (_, tx) in all {
                            let _ = tx.send(Err(failure.clone()));
                        }
                        return;
                    }
                }
            }
        });
        Self { out, waiting, ended, next: AtomicU64::new(0), notes: tokio::sync::Mutex::new(note_rx), kept, close: Some(close) }
    }

    /// One request; its result, or why there is none, within `timeout`.
    pub async fn request(&self, method: &str, params: Option<Value>, timeout: Duration) -> Result<Value, McpFailure> {
        Ok(self.request_raw(method, params, timeout).await?.value())
    }

    /// One request; its answer as the server's text, or why there is none, within `timeout`.
    pub async fn request_raw(&self, method: &str, params: Option<Value>, timeout: Duration) -> Result<Answer, McpFailure> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        if let Ok(mut w) = self.waiting.lock() {
            w.insert(id, tx);
        }
        let mut guard = Cancel { peer: self, id, armed: true };
        if let Some(failure) = self.ended.lock().ok().and_then(|e| e.clone()) {
            guard.armed = false;
            return Err(failure);
        }
        let mut msg = json!({"jsonrpc": "2.0", "id": id, "method": method});
        if let Some(p) = params {
            msg["params"] = p;
        }
        let sent = async {
            self.out.send(msg).await.map_err(|_| self.ended())?;
            rx.await.map_err(|_| self.ended())?
        };
        let answer = tokio::time::timeout(timeout, sent).await;
        match answer {
            // Answered, or failed for good: nothing to cancel.
            Ok(outcome) => {
                guard.armed = false;
                outcome
            }
            Err(_) => Err(McpFailure::Timeout(timeout)),
        }
    }

    /// Why the transport ended (or that it did).
    fn ended(&self) -> McpFailure {
        self.ended.lock().ok().and_then(|e| e.clone()).unwrap_or_else(|| McpFailure::Unreachable("the MCP connection ended".into()))
    }

    pub async fn notify(&self, method: &str, params: Value) {
        let _ = self.out.send(json!({"jsonrpc": "2.0", "method": method, "params": params})).await;
    }

    /// The next notification from the server (`None` once the transport ended).
    pub async fn next_note(&self) -> Option<Value> {
        let msg = self.notes.lock().await.recv().await?;
        self.kept.held.fetch_sub(msg.get().len(), Ordering::Relaxed);
        Some(serde_json::from_str(msg.get()).unwrap_or(Value::Null))
    }

    /// Sends what is queued, then ends the transport (bounded in time).
    pub async fn close(mut self) {
        let close = self.close.take();
        let Peer { out, .. } = self;
        drop(out);
        if let Some(close) = close {
            close().await;
        }
    }
}

/// Cancels the request on the server unless disarmed: on timeout, or when its caller drops it.
struct Cancel<'a> {
    peer: &'a Peer,
    id: u64,
    armed: bool,
}

impl Drop for Cancel<'_> {
    fn drop(&mut self) {
        if let Ok(mut w) = self.peer.waiting.lock() {
            w.remove(&self.id);
        }
        if self.armed {
            let params = json!({"requestId": self.id, "reason": "the client gave up (timeout or interrupted)"});
            let _ = self.peer.out.try_send(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params}));
        }
    }
}

fn dispatch(msg: Message, waiting: &Waiting, notes: &Notes, reply: &mpsc::WeakSender<Value>) {
    let Some(head) = Head::of(&msg) else {
        tracing::debug!("a message that is not a JSON-RPC object; ignored");
        return;
    };
    match (head.id, head.method.as_deref()) {
        (Some(id), None) => {
            let Some(tx) = id.get().parse::<u64>().ok().and_then(|id| waiting.lock().ok()?.remove(&id)) else {
                tracing::debug!("an answer to no request of ours (id {}); ignored", id.get().chars().take(40).collect::<String>());
                return;
            };
            let failure = head.error.map(|err| {
                let err: Value = serde_json::from_str(err.get()).unwrap_or(Value::Null);
                McpFailure::Rpc {
                    code: err["code"].as_i64().unwrap_or(0) as i32,
                    message: err["message"].as_str().unwrap_or("(no message)").to_string(),
                    data: err.get("data").cloned(),
                }
            });
            let _ = tx.send(match failure {
                Some(f) => Err(f),
                None => Ok(Answer(msg)),
            });
        }
        (Some(id), Some(method)) => {
            let id: Value = serde_json::from_str(id.get()).unwrap_or(Value::Null);
            let answer = if method == "ping" {
                json!({"jsonrpc": "2.0", "id": id, "result": {}})
            } else {
                json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": format!("mcpdev does not serve {}", method.chars().take(100).collect::<String>())}})
            };
            if let Some(reply) = reply.upgrade() {
                let _ = reply.try_send(answer);
            }
        }
        (None, Some(_)) => notes.offer(msg),
        (None, None) => tracing::debug!("a message that is neither request, answer nor notification; ignored"),
    }
}
