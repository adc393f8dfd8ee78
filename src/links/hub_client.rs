//! The CLI's side of the hub's control API (`/api/v1/link`): tagged requests over one WebSocket.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::{HeaderValue, header};
use tokio_tungstenite::tungstenite::{self, Message};

use super::control_token::ForHub;
use crate::exit::{CodedError, Exit};

/// An error the hub answered with: `kind` is stable (`not_found`, `timeout`, `device_error`, …).
/// The control API's path on the hub's host listener.
pub const CONTROL_PATH: &str = "/api/v1/link";

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

    /// The exit code of a hub's refusal to pick a device, the same for every command: an
    /// ambiguous `--device` is a usage mistake (2), any other a device not reachable (4).
    pub fn select_exit(&self) -> Exit {
        if self.kind == "ambiguous" { Exit::Usage } else { Exit::Unreachable }
    }

    /// This error as the CLI reports it when it could not pick a device of the hub at `hub`.
    pub fn to_coded(&self, hub: &str) -> CodedError {
        let err = CodedError::new(self.select_exit(), format!("{} (hub {hub})", self.message));
        match self.kind.as_str() {
            "ambiguous" => err.with_help("name one with --device (an id, a unique prefix or an alias from mcpdev.toml)"),
            "no_devices" | "not_found" => err.with_help("--wait 30s waits for the device to connect"),
            _ => err,
        }
    }

    /// The hub did not answer in time (kind `timeout`, as when the hub itself says so).
    pub fn no_answer(waited: Duration) -> Self {
        Self { kind: "timeout".into(), message: format!("the hub did not answer within {waited:?}"), rpc: None }
    }
}

/// How long past a request's own time limit (`timeout_ms`, `wait_ms`) the client waits for the
/// hub's answer before giving up on its own.
pub const ANSWER_GRACE: Duration = Duration::from_secs(2);
/// The limit of a request with no time limit of its own (`devices`, …).
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(30);

/// How long the client waits for the answer to `request`, whatever the hub does.
pub fn deadline_of(request: &Value) -> Duration {
    let own = ["timeout_ms", "wait_ms"].iter().filter_map(|k| request.get(*k).and_then(Value::as_u64)).max();
    match own {
        Some(ms) => Duration::from_millis(ms) + ANSWER_GRACE,
        None => DEFAULT_DEADLINE,
    }
}

/// Largest answer the CLI takes from its hub: `devices` describes every device with its tools
/// (about 3.6 KB each), 36 MB for 10,000 of them, over tungstenite's 16 MiB default.
pub const MAX_ANSWER_BYTES: usize = 256 << 20;

/// The control connection's WebSocket settings: reads of 8 KiB at a time. tungstenite's default
/// (128 KiB) zero-fills its read buffer first, which costs a one-shot command more than its
/// whole exchange with the hub; a large answer still arrives whole, in more reads.
fn ws_config() -> tungstenite::protocol::WebSocketConfig {
    tungstenite::protocol::WebSocketConfig::default()
        .read_buffer_size(8 * 1024)
        .max_message_size(Some(MAX_ANSWER_BYTES))
        .max_frame_size(Some(MAX_ANSWER_BYTES))
}

enum Waiter {
    Once(oneshot::Sender<Result<Value, ControlError>>),
    Stream(mpsc::Sender<Value>, Arc<AtomicU64>),
}

/// Events a watch holds for its reader before it counts them as dropped.
pub const WATCH_QUEUE: usize = 1024;

/// A watch's events as they come (`watching` first), for a reader that may fall behind: what
/// [`WATCH_QUEUE`] cannot hold is dropped, never waited for (a reader that stops must not stall
/// the connection until the hub cuts it off), and counted, with the events the hub said it
/// dropped (its `lagged` notices, which may be dropped here too), into one
/// `{"event":"lagged","skipped":N}` that comes in place of what was dropped: as soon as there is
/// room for it, or when the reader has read everything before it. Nothing is dropped unsaid.
pub struct WatchEvents {
    rx: mpsc::Receiver<Value>,
    dropped: Arc<AtomicU64>,
}

fn lagged(n: u64) -> Value {
    json!({"event": "lagged", "skipped": n})
}

/// What one event stands for when it is dropped: a `lagged` notice, the events it counts.
fn weight(ev: &Value) -> u64 {
    if ev["event"] == "lagged" { ev["skipped"].as_u64().unwrap_or(0) } else { 1 }
}

impl WatchEvents {
    /// The next event; `None` once the connection ended and every event and the count of what
    /// was dropped were read.
    pub async fn recv(&mut self) -> Option<Value> {
        match self.rx.try_recv() {
            Ok(ev) => return Some(ev),
            Err(mpsc::error::TryRecvError::Empty) => {}
            Err(mpsc::error::TryRecvError::Disconnected) => return self.take_dropped(),
        }
        if let Some(notice) = self.take_dropped() {
            return Some(notice);
        }
        match self.rx.recv().await {
            Some(ev) => Some(ev),
            None => self.take_dropped(),
        }
    }

    fn take_dropped(&self) -> Option<Value> {
        let n = self.dropped.swap(0, Ordering::AcqRel);
        (n > 0).then(|| lagged(n))
    }
}

/// Hands `ev` to a watch's reader without waiting: the count of what was dropped before it goes
/// first, and what finds no room is counted. False once the reader is gone.
fn deliver(tx: &mpsc::Sender<Value>, dropped: &AtomicU64, ev: Value) -> bool {
    let before = dropped.swap(0, Ordering::AcqRel);
    if before > 0
        && let Err(e) = tx.try_send(lagged(before))
    {
        dropped.fetch_add(before, Ordering::AcqRel);
        if matches!(e, mpsc::error::TrySendError::Closed(_)) {
            return false;
        }
    }
    match tx.try_send(ev) {
        Ok(()) => true,
        Err(mpsc::error::TrySendError::Full(ev)) => {
            dropped.fetch_add(weight(&ev), Ordering::AcqRel);
            true
        }
        Err(mpsc::error::TrySendError::Closed(_)) => false,
    }
}

type Socket = super::ws_client::ClientSocket;

/// A connection to a running hub. A caller writes its request to the socket itself (no writer
/// task to hand it to); one task reads the answers and hands each to its caller.
pub struct HubClient {
    sink: tokio::sync::Mutex<futures_util::stream::SplitSink<Socket, Message>>,
    waiters: Arc<Mutex<HashMap<u64, Waiter>>>,
    next_id: std::sync::atomic::AtomicU64,
}

impl HubClient {
    /// Connects to the hub's host listener, e.g. `http://127.0.0.1:8001` or `ws://…`, with the
    /// hub's control token: `MCPDEV_HUB_TOKEN`, else the file the hub wrote for that port, sent
    /// only to the loopback address that hub bound ([`super::control_token`]). A refusal
    /// (401/403), or a hub the file's token is not for, is a [`CodedError`] with [`Exit::Auth`].
    pub async fn connect(hub: &str) -> anyhow::Result<Self> {
        let base = hub.trim_end_matches('/');
        let base = base.strip_prefix("http://").map(|r| format!("ws://{r}")).unwrap_or_else(|| base.to_string());
        let base = base.strip_prefix("https://").map(|r| format!("wss://{r}")).unwrap_or(base);
        let base = if base.contains("://") { base } else { format!("ws://{base}") };
        let mut url = format!("{base}{}", CONTROL_PATH);
        let uri = url.as_str().into_client_request()?.uri().clone();
        let port = uri.port_u16().unwrap_or(if base.starts_with("wss:") { 443 } else { 80 });
        let mut host = uri.host().unwrap_or_default().to_string();
        // `localhost` is the loopback address the local hub bound, not whatever it resolves to first.
        if let Some(ip) = super::control_token::pin_localhost(&host, port) {
            url = url.replacen(&format!("://{host}"), &format!("://{ip}"), 1);
            host = ip;
        }
        let token_for_hub = || match super::control_token::for_client(&host, port, url.starts_with("wss:")) {
            ForHub::Send(token) => Ok(Ok(token)),
            ForHub::Missing(why) => Ok(Err(why)),
            // Another host, or not the address the local hub bound: nothing is sent.
            ForHub::NotThisHub(what_to_do) => Err(CodedError::new(Exit::Auth, format!("the hub at {hub} needs its control token: {what_to_do}"))),
        };
        // A hub that has just bound its port writes its token a moment later: when there was no
        // token to send and the hub refuses, read it once more and try again.
        let mut attempts = 0;
        let ws = loop {
            attempts += 1;
            let mut request = url.as_str().into_client_request()?;
            let token = token_for_hub()?;
            let mut tls = None;
            if let Ok(token) = &token {
                let value = HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| anyhow::anyhow!("the hub token contains characters a header cannot carry"))?;
                request.headers_mut().insert(header::AUTHORIZATION, value);
                // A remote token goes only to the hub its file names, by that hub's CA.
                if super::control_token::is_remote(token)
                    && let Some(pin) = super::control_token::hub_pin()
                {
                    tls = Some(crate::tls::client::pinned_http_config(pin).map_err(|e| anyhow::anyhow!("{}", e.0))?);
                }
            }
            match super::ws_client::connect(request, ws_config(), tls).await {
                Ok(ws) => break ws,
                Err(tungstenite::Error::Http(resp)) if matches!(resp.status().as_u16(), 401 | 403) => {
                    // No token yet, or one left by a killed hub: a hub that is starting writes its
                    // own a moment later. Read the file again and retry once if it changed.
                    if attempts == 1 && token_for_hub().is_ok_and(|now| now.is_ok() && now.as_ref().ok() != token.as_ref().ok()) {
                        continue;
                    }
                    // 401 with no token sent: that is the cause, not what the hub says of tokens.
                    // Any other refusal (403: another user) is the hub's to explain.
                    let said = resp.body().as_deref().map(String::from_utf8_lossy).map(|b| b.trim().to_string()).unwrap_or_default();
                    let message = match token {
                        Err(problem) if resp.status() == 401 => format!("the hub at {hub} wants its control token, and none was sent: {problem}"),
                        Err(problem) => format!("the hub at {hub} refused this client ({}): {said} ({problem})", resp.status()),
                        Ok(_) => format!("the hub at {hub} refused this client ({}): {said}", resp.status()),
                    };
                    return Err(CodedError::new(Exit::Auth, message).into());
                }
                Err(tungstenite::Error::Http(resp)) if resp.headers().contains_key(super::listeners::HEADER) => {
                    let answered = resp.headers().get(super::listeners::HEADER).and_then(|v| v.to_str().ok());
                    let wrong = super::listeners::wrong_listener(super::listeners::Client::Cli, hub, answered);
                    return Err(wrong.map_or_else(|| anyhow::anyhow!("the hub at {hub} answered {}", resp.status()), Into::into));
                }
                Err(e) if super::listeners::is_refused(&e) => return Err(super::listeners::no_hub(hub).into()),
                Err(e) if url.starts_with("ws://") && super::listeners::is_not_http(&e) => return Err(super::listeners::plain_at_tls(hub).into()),
                Err(e) => {
                    // A hub that does not prove who it is gets nothing, the token included (exit 3).
                    if let Some(what) = crate::tls::client::explain(&e) {
                        return Err(CodedError::new(Exit::Auth, format!("the hub at {hub} did not prove who it is: {what}")).into());
                    }
                    return Err(e.into());
                }
            }
        };
        let (sink, mut stream) = ws.split();
        let waiters: Arc<Mutex<HashMap<u64, Waiter>>> = Arc::default();
        let w = waiters.clone();
        tokio::spawn(async move {
            while let Some(Ok(Message::Text(text))) = stream.next().await {
                let Ok(mut v) = serde_json::from_str::<Value>(&text) else { continue };
                let Some(id) = v.get("id").and_then(Value::as_u64) else { continue };
                let mut waiters = w.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                match waiters.get(&id) {
                    Some(Waiter::Stream(tx, dropped)) => {
                        // The first message confirms the subscription (`ok`), then events follow.
                        let payload = match (v.get("event"), v.get("ok")) {
                            (Some(ev), _) => ev.clone(),
                            (None, Some(ok)) => serde_json::json!({"event": "watching", "device": ok["watching"]}),
                            (None, None) => Value::Null,
                        };
                        if !deliver(tx, dropped, payload) {
                            waiters.remove(&id);
                        }
                    }
                    Some(Waiter::Once(_)) => {
                        let Some(Waiter::Once(tx)) = waiters.remove(&id) else { unreachable!() };
                        let outcome = match v.get("error") {
                            Some(e) => Err(ControlError::from_value(e)),
                            None => Ok(v.get_mut("ok").map(Value::take).unwrap_or(Value::Null)),
                        };
                        let _ = tx.send(outcome);
                    }
                    None => {}
                }
            }
            // The hub went away: everyone waiting learns it.
            w.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clear();
        });
        Ok(Self { sink: tokio::sync::Mutex::new(sink), waiters, next_id: 1.into() })
    }

    /// [`Self::connect`], with the error as the CLI reports it: refused (exit 3), the wrong
    /// listener (2), nobody listening or unreachable (4).
    pub async fn open(hub: &str) -> Result<Self, CodedError> {
        Self::connect(hub).await.map_err(|e| match e.downcast::<CodedError>() {
            Ok(coded) => coded,
            Err(e) => CodedError::new(Exit::Unreachable, format!("cannot reach the hub at {hub}: {e}"))
                .with_help("is `mcpdev serve` running there? (--hub or MCPDEV_HUB names another hub; --wait waits for one that is starting)"),
        })
    }

    /// Writes one request. A send cut short (its caller's time ran out) leaves no half frame:
    /// the frame waits whole in the socket's buffer, written before the next.
    async fn send(&self, text: String) -> Result<(), ControlError> {
        self.sink.lock().await.send(Message::text(text)).await.map_err(|_| ControlError::lost())
    }

    fn register(&self, waiter: Waiter) -> u64 {
        let id = self.next_id.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.waiters.lock().unwrap_or_else(|e| e.into_inner()).insert(id, waiter);
        id
    }

    /// Sends one request (`op` and its fields) and waits for its answer, at most the request's
    /// own time limit plus [`ANSWER_GRACE`] (see [`deadline_of`]): a hub that does not answer
    /// ends the call with kind `timeout`.
    pub async fn call(&self, request: Value) -> Result<Value, ControlError> {
        let limit = deadline_of(&request);
        self.call_within(request, limit).await
    }

    /// [`Self::call`] with an explicit limit on the whole exchange.
    pub async fn call_within(&self, mut request: Value, limit: Duration) -> Result<Value, ControlError> {
        let (tx, rx) = oneshot::channel();
        let id = self.register(Waiter::Once(tx));
        request["id"] = json!(id);
        let exchange = async {
            self.send(request.to_string()).await?;
            rx.await.unwrap_or_else(|_| Err(ControlError::lost()))
        };
        let outcome = tokio::time::timeout(limit, exchange).await;
        if outcome.is_err() {
            self.waiters.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
        }
        outcome.unwrap_or_else(|_| Err(ControlError::no_answer(limit)))
    }

    /// Starts watching events; they arrive on the returned channel until it is dropped.
    pub async fn watch(&self, device: Option<&str>, traffic: bool) -> Result<WatchEvents, ControlError> {
        let (tx, rx) = mpsc::channel(WATCH_QUEUE);
        let dropped = Arc::new(AtomicU64::new(0));
        let id = self.register(Waiter::Stream(tx, dropped.clone()));
        let request = json!({"id": id, "op": "watch", "device": device, "traffic": traffic});
        self.send(request.to_string()).await?;
        Ok(WatchEvents { rx, dropped })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader that stops while 5,000 events and a hub's notice of 300 more come: it reads the
    /// events the queue held, then one notice counting every other, then what comes after.
    #[tokio::test]
    async fn what_a_slow_reader_misses_is_counted_with_the_hubs_own_notices() {
        let (tx, rx) = mpsc::channel(WATCH_QUEUE);
        let dropped = Arc::new(AtomicU64::new(0));
        let mut events = WatchEvents { rx, dropped: dropped.clone() };
        for n in 0..5_000 {
            assert!(deliver(&tx, &dropped, json!({"event": "notification", "n": n})));
        }
        assert!(deliver(&tx, &dropped, lagged(300)));
        let mut shown = 0;
        let mut skipped = 0;
        while shown + skipped < 5_300 {
            let ev = events.recv().await.expect("an event");
            match ev["event"].as_str() {
                Some("lagged") => skipped += ev["skipped"].as_u64().unwrap(),
                _ => {
                    assert_eq!(ev["n"], shown, "in order");
                    shown += 1;
                }
            }
        }
        assert_eq!((shown, skipped), (WATCH_QUEUE as u64, 5_300 - WATCH_QUEUE as u64));
        // With room again, the next event comes as it is, and nothing is left to say.
        assert!(deliver(&tx, &dropped, json!({"event": "ready"})));
        assert_eq!(events.recv().await.unwrap()["event"], "ready");
        assert_eq!(dropped.load(Ordering::Acquire), 0);
        // A reader that went away ends the delivery.
        drop(events);
        assert!(!deliver(&tx, &dropped, json!({"event": "ready"})));
    }

    /// Drops while the reader keeps up partly: the notice comes in their place, before the
    /// events that came after them.
    #[tokio::test]
    async fn the_notice_comes_where_the_events_were_dropped() {
        let (tx, rx) = mpsc::channel(2);
        let dropped = Arc::new(AtomicU64::new(0));
        let mut events = WatchEvents { rx, dropped: dropped.clone() };
        for n in 0..5 {
            deliver(&tx, &dropped, json!({"n": n}));
        }
        assert_eq!(events.recv().await.unwrap()["n"], 0);
        assert_eq!(events.recv().await.unwrap()["n"], 1);
        deliver(&tx, &dropped, json!({"n": 5}));
        assert_eq!(events.recv().await.unwrap(), lagged(3));
        assert_eq!(events.recv().await.unwrap()["n"], 5);
    }
}
