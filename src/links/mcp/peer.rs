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
//! - Notifications are kept up to [`NOTES`]; past that they are dropped, never queued without end.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

use super::McpFailure;
use super::wire::{Incoming, Wire};

/// Server notifications kept until read.
const NOTES: usize = 256;

type Waiting = Arc<Mutex<HashMap<u64, oneshot::Sender<Result<Value, McpFailure>>>>>;

pub struct Peer {
    out: mpsc::Sender<Value>,
    waiting: Waiting,
    ended: Arc<Mutex<Option<McpFailure>>>,
    next: AtomicU64,
    notes: tokio::sync::Mutex<mpsc::Receiver<Value>>,
    close: Option<Box<dyn FnOnce() -> super::wire::CloseFuture + Send>>,
}

impl Peer {
    pub fn start(wire: Wire) -> Self {
        let Wire { out, mut incoming, close } = wire;
        let waiting: Waiting = Arc::default();
        let ended: Arc<Mutex<Option<McpFailure>>> = Arc::default();
        let (note_tx, note_rx) = mpsc::channel(NOTES);
        // Weak: the transport's writer ends (and the session closes) once the peer lets go of `out`.
        let (w, e, reply) = (waiting.clone(), ended.clone(), out.downgrade());
        tokio::spawn(async move {
            while let Some(inc) = incoming.recv().await {
                match inc {
                    Incoming::Message(msg) => dispatch(msg, &w, &note_tx, &reply),
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
        Self { out, waiting, ended, next: AtomicU64::new(0), notes: tokio::sync::Mutex::new(note_rx), close: Some(close) }
    }

    /// One request; its result, or why there is none, within `timeout`.
    pub async fn request(&self, method: &str, params: Option<Value>, timeout: Duration) -> Result<Value, McpFailure> {
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
        self.notes.lock().await.recv().await
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

fn dispatch(msg: Value, waiting: &Waiting, notes: &mpsc::Sender<Value>, reply: &mpsc::WeakSender<Value>) {
    let method = msg.get("method").and_then(Value::as_str);
    match (msg.get("id"), method) {
        (Some(id), None) => {
            let Some(tx) = id.as_u64().and_then(|id| waiting.lock().ok()?.remove(&id)) else {
                tracing::debug!("an answer to no request of ours (id {id}); ignored");
                return;
            };
            let answer = match msg.get("error") {
                Some(err) => Err(McpFailure::Rpc {
                    code: err["code"].as_i64().unwrap_or(0) as i32,
                    message: err["message"].as_str().unwrap_or("(no message)").to_string(),
                    data: err.get("data").cloned(),
                }),
                None => Ok(msg.get("result").cloned().unwrap_or(Value::Null)),
            };
            let _ = tx.send(answer);
        }
        (Some(id), Some(method)) => {
            let answer = if method == "ping" {
                json!({"jsonrpc": "2.0", "id": id, "result": {}})
            } else {
                json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": format!("mcpdev does not serve {method}")}})
            };
            if let Some(reply) = reply.upgrade() {
                let _ = reply.try_send(answer);
            }
        }
        (None, Some(_)) => {
            let _ = notes.try_send(msg);
        }
        (None, None) => tracing::debug!("a message that is neither request, answer nor notification; ignored"),
    }
}
