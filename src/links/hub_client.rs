//! The CLI's side of the hub's control API (`/api/v1/link`): tagged requests over one WebSocket.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};
use tokio_tungstenite::tungstenite::Message;

/// An error the hub answered with: `kind` is stable (`not_found`, `timeout`, `device_error`, …).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct ControlError {
    pub kind: String,
    pub message: String,
    /// The device's JSON-RPC error, for `device_error`.
    pub rpc: Option<Value>,
}

impl ControlError {
    fn from_value(v: &Value) -> Self {
        Self {
            kind: v.get("kind").and_then(Value::as_str).unwrap_or("internal").to_string(),
            message: v.get("message").and_then(Value::as_str).unwrap_or("the hub gave no reason").to_string(),
            rpc: v.get("rpc").cloned(),
        }
    }

    pub fn lost() -> Self {
        Self { kind: "hub_unreachable".into(), message: "the connection to the hub was lost".into(), rpc: None }
    }
}

enum Waiter {
    Once(oneshot::Sender<Result<Value, ControlError>>),
    Stream(mpsc::Sender<Value>),
}

/// A connection to a running hub.
pub struct HubClient {
    outgoing: mpsc::Sender<String>,
    waiters: Arc<Mutex<HashMap<u64, Waiter>>>,
    next_id: std::sync::atomic::AtomicU64,
}

impl HubClient {
    /// Connects to the hub's host listener, e.g. `http://127.0.0.1:8001` or `ws://…`.
    pub async fn connect(hub: &str) -> anyhow::Result<Self> {
        let base = hub.trim_end_matches('/');
        let base = base.strip_prefix("http://").map(|r| format!("ws://{r}")).unwrap_or_else(|| base.to_string());
        let base = if base.contains("://") { base } else { format!("ws://{base}") };
        let url = format!("{base}{}", crate::hub::control::LINK_PATH);
        let (ws, _) = tokio_tungstenite::connect_async_with_config(&url, None, true).await?;
        let (mut sink, mut stream) = ws.split();
        let (outgoing, mut rx) = mpsc::channel::<String>(64);
        tokio::spawn(async move {
            while let Some(text) = rx.recv().await {
                if sink.send(Message::text(text)).await.is_err() {
                    break;
                }
            }
        });
        let waiters: Arc<Mutex<HashMap<u64, Waiter>>> = Arc::default();
        let w = waiters.clone();
        tokio::spawn(async move {
            while let Some(Ok(Message::Text(text))) = stream.next().await {
                let Ok(v) = serde_json::from_str::<Value>(&text) else { continue };
                let Some(id) = v.get("id").and_then(Value::as_u64) else { continue };
                let mut waiters = w.lock().expect("waiters lock");
                match waiters.get(&id) {
                    Some(Waiter::Stream(tx)) => {
                        // The first message confirms the subscription (`ok`), then events follow.
                        let payload = match (v.get("event"), v.get("ok")) {
                            (Some(ev), _) => ev.clone(),
                            (None, Some(ok)) => serde_json::json!({"event": "watching", "device": ok["watching"]}),
                            (None, None) => Value::Null,
                        };
                        if tx.try_send(payload).is_err() && tx.is_closed() {
                            waiters.remove(&id);
                        }
                    }
                    Some(Waiter::Once(_)) => {
                        let Some(Waiter::Once(tx)) = waiters.remove(&id) else { unreachable!() };
                        let outcome = match v.get("error") {
                            Some(e) => Err(ControlError::from_value(e)),
                            None => Ok(v.get("ok").cloned().unwrap_or(Value::Null)),
                        };
                        let _ = tx.send(outcome);
                    }
                    None => {}
                }
            }
            // The hub went away: everyone waiting learns it.
            w.lock().expect("waiters lock").clear();
        });
        Ok(Self { outgoing, waiters, next_id: 1.into() })
    }

    fn register(&self, waiter: Waiter) -> u64 {
        let id = self.next_id.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.waiters.lock().expect("waiters lock").insert(id, waiter);
        id
    }

    /// Sends one request (`op` and its fields) and waits for its answer.
    pub async fn call(&self, mut request: Value) -> Result<Value, ControlError> {
        let (tx, rx) = oneshot::channel();
        let id = self.register(Waiter::Once(tx));
        request["id"] = json!(id);
        self.outgoing.send(request.to_string()).await.map_err(|_| ControlError::lost())?;
        rx.await.unwrap_or_else(|_| Err(ControlError::lost()))
    }

    /// Starts watching events; they arrive on the returned channel until it is dropped.
    pub async fn watch(&self, device: Option<&str>, traffic: bool) -> Result<mpsc::Receiver<Value>, ControlError> {
        let (tx, rx) = mpsc::channel(1024);
        let id = self.register(Waiter::Stream(tx));
        let request = json!({"id": id, "op": "watch", "device": device, "traffic": traffic});
        self.outgoing.send(request.to_string()).await.map_err(|_| ControlError::lost())?;
        Ok(rx)
    }
}
