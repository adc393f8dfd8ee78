//! The connection `check` drives: one device accepted on `--listen`, or reached through a broker
//! with `--mqtt` ([`super::mqtt`]), every frame under the checker's control (string ids, malformed
//! JSON, notifications, many requests in flight); or a device reached through a hub's `rpc` op,
//! where only requests can be sent.
//!
//! Frames are bounded (1 MiB, tungstenite's limits), every wait has a deadline, and a frame
//! that is not JSON is kept as text so the escaping check can see it.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::server::{Request, Response};

pub use super::silence::{GONE, Silence};
use crate::exit::{CodedError, Exit};

/// What the device sent before MCP: its handshake headers and its hello.
#[derive(Debug, Clone)]
pub struct Greeting {
    /// Handshake headers, names lowercased (no `authorization`: a token is never kept).
    pub headers: Vec<(String, String)>,
    pub hello: Value,
    pub remote: String,
    /// Why there is no hello to check (over MQTT an idle device says none).
    pub no_hello: Option<&'static str>,
    /// Through a hub that relays the device to its upstream: the upstream (`host:port`), and the
    /// device's answer to the upstream's `initialize` as the hub recorded it.
    pub relayed: Option<(String, Value)>,
}

impl Greeting {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

/// One frame from the device: an MCP payload, or text that is not valid JSON.
#[derive(Debug, Clone)]
pub enum Frame {
    Mcp(Value),
    Invalid(String),
}

/// One MCP reply and how long it took.
#[derive(Debug, Clone)]
pub struct Reply {
    pub payload: Value,
    pub latency: Duration,
}

/// Where raw frames go: the device's socket (`--listen`) or its topics on a broker (`--mqtt`).
enum Raw {
    Ws(Box<WebSocketStream<TcpStream>>),
    Mqtt(super::mqtt::Link),
}

pub struct Conn {
    /// The raw transport; `None` through a hub.
    raw: Option<Raw>,
    /// Through a hub (`-d`): its control client and the device id. Requests go through its `rpc`
    /// op, so ids are the hub's and raw frames cannot be sent.
    hub: Option<(crate::links::hub_client::HubClient, String)>,
    session_id: String,
    next_id: i64,
    /// Over MQTT, where a hub's traffic is seen too: the first id of ours, and the ids sent by
    /// [`Conn::request_with_id`] outside that run. Replies to any other id are not ours.
    first_id: i64,
    named_ids: Vec<Value>,
    /// Frames received while waiting for something else.
    pending: VecDeque<Frame>,
    pub timeout: Duration,
    pub gone: Option<String>,
    /// Round trips per method, for the timing section.
    pub latencies: Vec<(String, Duration)>,
    /// What the device's messages looked like, for the envelope checks.
    pub envelopes: Envelopes,
    /// Whether the device got a server hello (with [`Conn::session_id`]) to echo.
    pub hello_sent: bool,
}

/// The shape of the device's JSON messages after its hello: `type` and `session_id` (reference
/// §1.3, §1.5), counted with the first example of each deviation.
#[derive(Debug, Clone, Default)]
pub struct Envelopes {
    pub messages: usize,
    /// Messages without a string `type` (or not a JSON object at all).
    pub untyped: Vec<String>,
    /// `mcp` messages whose `payload` is not an object.
    pub bad_payload: Vec<String>,
    /// `session_id` of the server hello, echoed.
    pub echoed: usize,
    /// An empty `session_id`.
    pub empty: usize,
    /// No `session_id` at all.
    pub missing: usize,
    /// Another `session_id` (first seen kept).
    pub other: Vec<String>,
}

/// Examples kept per deviation.
const EXAMPLES: usize = 3;

impl Envelopes {
    fn note(&mut self, v: &Value, session_id: &str) {
        self.messages += 1;
        let keep = |list: &mut Vec<String>, what: String| {
            if list.len() < EXAMPLES {
                list.push(what.chars().take(120).collect());
            }
        };
        if !v["type"].is_string() {
            keep(&mut self.untyped, v.to_string());
        } else if v["type"] == "mcp" && !v["payload"].is_object() {
            keep(&mut self.bad_payload, v.to_string());
        }
        match v.get("session_id") {
            None => self.missing += 1,
            Some(Value::String(s)) if s == session_id => self.echoed += 1,
            Some(Value::String(s)) if s.is_empty() => self.empty += 1,
            Some(other) => keep(&mut self.other, other.to_string()),
        }
    }

    /// Messages with another `session_id` than the server hello's (not kept beyond the examples).
    pub fn others(&self) -> usize {
        self.messages - self.echoed - self.empty - self.missing
    }
}

/// Accepts the next device on `listener` (a failed handshake is logged and the next one taken),
/// reads its hello and answers it. Bounded by `wait` for the connection and `timeout` for the hello.
pub async fn accept(listener: &TcpListener, wait: Duration, timeout: Duration) -> anyhow::Result<(Conn, Greeting, Instant)> {
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        let (stream, remote) = tokio::time::timeout_at(deadline, listener.accept())
            .await
            .map_err(|_| anyhow::anyhow!("no device connected within {wait:?}"))??;
        let mut headers = Vec::new();
        let callback = |req: &Request, resp: Response| {
            headers = req
                .headers()
                .iter()
                .filter(|(n, _)| n.as_str() != "authorization")
                .map(|(n, v)| (n.as_str().to_string(), String::from_utf8_lossy(v.as_bytes()).into_owned()))
                .collect();
            Ok(resp)
        };
        let handshake = tokio_tungstenite::accept_hdr_async_with_config(stream, callback, Some(crate::links::upgrade::ws_config()));
        let ws = match tokio::time::timeout(timeout, handshake).await {
            Ok(Ok(ws)) => ws,
            Ok(Err(e)) => {
                tracing::warn!(%remote, "refused a connection: {e}");
                continue;
            }
            Err(_) => {
                tracing::warn!(%remote, "refused a connection: no WebSocket handshake within {timeout:?}");
                continue;
            }
        };
        let mut conn = Conn::new(Some(Raw::Ws(Box::new(ws))), None, timeout);
        let hello = conn.read_hello().await?;
        let server_hello = crate::links::websocket::server_hello(&conn.session_id);
        conn.send_text(server_hello).await;
        conn.hello_sent = true;
        let greeting = Greeting { headers, hello, remote: remote.to_string(), no_hello: None, relayed: None };
        return Ok((conn, greeting, Instant::now()));
    }
}

/// Reaches `device` through the hub at `hub_url`: its identity and hello come from the hub's
/// record of the device. Raw-frame checks are skipped this way.
pub async fn through_hub(hub_url: &str, device: Option<&str>, wait: Duration, timeout: Duration) -> Result<(Conn, Greeting), CodedError> {
    let client = crate::links::hub_client::HubClient::open(hub_url).await?;
    let info = client.call(json!({"op": "device", "device": device, "wait_ms": wait.as_millis() as u64})).await.map_err(|e| e.to_coded(hub_url))?;
    let device_id = info["device_id"].as_str().unwrap_or_default().to_string();
    let mut headers = vec![("device-id".to_string(), device_id.clone()), ("protocol-version".to_string(), info["protocol_version"].to_string())];
    if let Some(c) = info["client_id"].as_str() {
        headers.push(("client-id".into(), c.into()));
    }
    let relayed = info["upstream"].as_str().map(|up| {
        let observed = json!({"protocolVersion": info["mcp_protocol_version"], "serverInfo": info["server_info"], "capabilities": info["capabilities"]});
        (up.to_string(), observed)
    });
    let greeting = Greeting { headers, hello: info["hello"].clone(), remote: String::new(), no_hello: None, relayed };
    let mut conn = Conn::new(None, Some((client, device_id)), timeout);
    conn.session_id.clear();
    Ok((conn, greeting))
}

/// Reaches `device` through the MQTT broker at `url`, no hub. An idle device says no hello over
/// MQTT, so it counts as there once it answers `initialize`, sent every second (at most every
/// `timeout`) until `wait` is over (at least `timeout`, its time to answer). Request ids start from a random base so
/// that replies meant for a hub are never taken for the checker's.
pub async fn through_broker(url: &str, device: Option<&str>, wait: Option<Duration>, timeout: Duration) -> Result<(Conn, Greeting, Instant), CodedError> {
    let reached = super::mqtt::open(url, device, timeout).await?;
    let mut conn = Conn::new(Some(Raw::Mqtt(reached.link)), None, timeout);
    conn.next_id = fastrand::i64(1_000_000_000..1_900_000_000);
    conn.first_id = conn.next_id;
    let limit = wait.unwrap_or_default().max(timeout);
    if let Err(why) = conn.find_device(super::initialize_request::params(), limit).await {
        let msg = format!("device {} did not answer initialize over MQTT ({why}); is it connected to {}?", reached.device_id, reached.remote);
        return Err(CodedError::new(Exit::Unreachable, msg).with_help("--wait gives it longer; --device is its MAC (its Device-Id)"));
    }
    let headers = vec![("device-id".to_string(), reached.device_id)];
    let greeting = Greeting { headers, hello: Value::Null, remote: reached.remote, no_hello: Some(super::NO_HELLO_OVER_MQTT), relayed: None };
    Ok((conn, greeting, Instant::now()))
}

impl Conn {
    fn new(raw: Option<Raw>, hub: Option<(crate::links::hub_client::HubClient, String)>, timeout: Duration) -> Self {
        let session_id = uuid::Uuid::new_v4().to_string();
        Conn {
            raw,
            hub,
            session_id,
            next_id: 1,
            first_id: 1,
            named_ids: Vec::new(),
            pending: VecDeque::new(),
            timeout,
            gone: None,
            latencies: Vec::new(),
            envelopes: Envelopes::default(),
            hello_sent: false,
        }
    }

    /// Whether raw frames can be sent (`--listen`, `--mqtt`), not only requests through a hub.
    pub fn raw(&self) -> bool {
        self.raw.is_some()
    }

    /// Sends `initialize` every second (at most every `timeout`) until the device answers one
    /// (late answers to the others are then not ours), or why not by the end of `limit`.
    async fn find_device(&mut self, params: Value, limit: Duration) -> Result<(), String> {
        let end = tokio::time::Instant::now() + limit;
        let first = self.next_id;
        let every = self.timeout.min(Duration::from_secs(1));
        while tokio::time::Instant::now() < end {
            let id = self.fresh_id();
            self.send(&json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": params})).await;
            let step = (tokio::time::Instant::now() + every).min(end);
            loop {
                match self.read_frame(step).await {
                    Ok(Frame::Mcp(p)) if p.get("method").is_none() && p["id"].as_i64().is_some_and(|n| (first..=id).contains(&n)) => {
                        (self.first_id, self.pending) = (self.next_id, VecDeque::new());
                        return Ok(());
                    }
                    Ok(_) => {}
                    Err(Silence::Timeout) => break,
                    Err(Silence::Gone(why)) => return Err(why),
                }
            }
        }
        Err(format!("no answer within {limit:?}"))
    }

    /// Over MQTT: whether a reply is to one of the checker's requests (not a hub's).
    fn ours(&self, payload: &Value) -> bool {
        let id = &payload["id"];
        payload.get("method").is_some() || id.is_null() || id.as_i64().is_some_and(|n| (self.first_id..self.next_id).contains(&n)) || self.named_ids.contains(id)
    }

    async fn read_hello(&mut self) -> anyhow::Result<Value> {
        let deadline = tokio::time::Instant::now() + self.timeout;
        let Some(Raw::Ws(ws)) = self.raw.as_mut() else { anyhow::bail!("no socket") };
        loop {
            let msg = tokio::time::timeout_at(deadline, ws.next())
                .await
                .map_err(|_| anyhow::anyhow!("the device sent no hello within {:?}", self.timeout))?;
            match msg {
                Some(Ok(Message::Text(t))) => match serde_json::from_str::<Value>(&t) {
                    Ok(v) if v["type"] == "hello" => return Ok(v),
                    _ => tracing::info!("ignored a frame before the hello: {:.200}", t.as_str()),
                },
                Some(Ok(Message::Close(_))) | None => anyhow::bail!("the device disconnected before its hello"),
                Some(Ok(_)) => {}
                Some(Err(e)) => anyhow::bail!("the connection failed before the hello: {e}"),
            }
        }
    }

    /// Sends one text frame as is; a failed send marks the device gone.
    pub async fn send_text(&mut self, text: String) {
        if self.gone.is_some() {
            return;
        }
        let sent = match self.raw.as_mut() {
            None => return tracing::debug!("not sent: raw frames need --listen or --mqtt"),
            Some(Raw::Ws(ws)) => ws.send(Message::text(text)).await.map_err(|e| e.to_string()),
            Some(Raw::Mqtt(link)) => link.send(text),
        };
        if let Err(e) = sent {
            self.gone = Some(e);
        }
    }

    /// Sends a JSON-RPC payload inside the `mcp` envelope.
    pub async fn send(&mut self, payload: &Value) {
        self.send_text(crate::wire::envelope::mcp_text(&self.session_id, payload)).await;
    }

    /// The envelope around a payload given as text (which may be broken on purpose).
    pub fn envelope_text(&self, payload: &str) -> String {
        format!("{{\"session_id\":{},\"type\":\"mcp\",\"payload\":{payload}}}", json!(self.session_id))
    }

    /// The session id of the server hello (what the device should echo).
    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    pub fn fresh_id(&mut self) -> i64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    /// The next MCP frame (a queued one first), or why none came by `deadline`.
    pub async fn next_frame(&mut self, deadline: tokio::time::Instant) -> Result<Frame, Silence> {
        if let Some(f) = self.pending.pop_front() {
            return Ok(f);
        }
        self.read_frame(deadline).await
    }

    async fn read_frame(&mut self, deadline: tokio::time::Instant) -> Result<Frame, Silence> {
        loop {
            if let Some(why) = &self.gone {
                return Err(Silence::Gone(why.clone()));
            }
            let text = match self.raw.as_mut() {
                None => return Err(Silence::Gone("raw frames need --listen or --mqtt".into())),
                Some(Raw::Ws(ws)) => ws_text(ws, deadline).await,
                Some(Raw::Mqtt(link)) => link.next_text(deadline).await.map(Some),
            };
            let text = match text {
                Ok(Some(t)) => t,
                Ok(None) => continue,
                Err(Silence::Gone(why)) => {
                    self.gone = Some(why);
                    continue;
                }
                Err(Silence::Timeout) => return Err(Silence::Timeout),
            };
            match serde_json::from_str::<Value>(&text) {
                Ok(v) if v["type"] == "mcp" && matches!(self.raw, Some(Raw::Mqtt(_))) && !self.ours(&v["payload"]) => continue,
                Ok(v) => {
                    self.envelopes.note(&v, &self.session_id);
                    if v["type"] == "mcp" {
                        return Ok(Frame::Mcp(v["payload"].clone()));
                    }
                }
                Err(_) => return Ok(Frame::Invalid(text)),
            }
        }
    }

    /// Waits for the reply with `id`, keeping other frames for later.
    pub async fn wait_reply(&mut self, id: &Value, started: Instant, timeout: Duration) -> Result<Reply, Silence> {
        let deadline = tokio::time::Instant::now() + timeout;
        if let Some(pos) = self.pending.iter().position(|f| matches!(f, Frame::Mcp(p) if p.get("id") == Some(id))) {
            let Some(Frame::Mcp(payload)) = self.pending.remove(pos) else { unreachable!("matched above") };
            return Ok(Reply { payload, latency: started.elapsed() });
        }
        loop {
            let frame = self.read_frame(deadline).await?;
            match frame {
                Frame::Mcp(p) if p.get("id") == Some(id) && p.get("method").is_none() => return Ok(Reply { payload: p, latency: started.elapsed() }),
                other => {
                    if self.pending.len() < 1024 {
                        self.pending.push_back(other);
                    } else {
                        tracing::warn!("dropped a frame from the device: more than 1024 unexpected frames are queued");
                    }
                }
            }
        }
    }

    /// Sends a request with a fresh numeric id and waits for its reply.
    pub async fn request(&mut self, method: &str, params: Value) -> Result<Reply, Silence> {
        let id = json!(self.fresh_id());
        self.request_with_id(method, params, id).await
    }

    pub async fn request_with_id(&mut self, method: &str, params: Value, id: Value) -> Result<Reply, Silence> {
        let started = Instant::now();
        if !self.ours(&json!({"id": id})) && self.named_ids.len() < 64 {
            self.named_ids.push(id.clone());
        }
        if let Some((client, device)) = &self.hub {
            let req = json!({"op": "rpc", "device": device, "method": method, "params": params, "timeout_ms": self.timeout.as_millis() as u64});
            let payload = match client.call(req).await {
                Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
                Err(e) if e.kind == "device_error" => json!({"jsonrpc": "2.0", "id": id, "error": e.rpc.clone().unwrap_or(Value::Null)}),
                Err(e) if e.kind == "timeout" => return Err(Silence::Timeout),
                Err(e) => return Err(Silence::Gone(e.message)),
            };
            self.latencies.push((method.to_string(), started.elapsed()));
            return Ok(Reply { payload, latency: started.elapsed() });
        }
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})).await;
        let reply = self.wait_reply(&id, started, self.timeout).await;
        if let Ok(r) = &reply {
            self.latencies.push((method.to_string(), r.latency));
        }
        reply
    }

    /// Sends `text` (a whole frame), then a `tools/list` request as a marker, and returns every
    /// frame the device sent before the marker's reply. The device answers in order, so a reply
    /// to `text` arrives before the marker's.
    pub async fn frames_before_marker(&mut self, text: String) -> Result<Vec<Frame>, Silence> {
        self.pending.clear();
        self.send_text(text).await;
        let id = json!(self.fresh_id());
        let started = Instant::now();
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/list", "params": {"cursor": ""}})).await;
        let deadline = tokio::time::Instant::now() + self.timeout;
        let mut before = Vec::new();
        loop {
            match self.read_frame(deadline).await? {
                Frame::Mcp(p) if p.get("id") == Some(&id) && p.get("method").is_none() => {
                    self.latencies.push(("tools/list".into(), started.elapsed()));
                    return Ok(before);
                }
                other if before.len() < 64 => before.push(other),
                _ => {}
            }
        }
    }
}

/// The next text frame of a WebSocket: `None` for a frame that is not text.
async fn ws_text(ws: &mut WebSocketStream<TcpStream>, deadline: tokio::time::Instant) -> Result<Option<String>, Silence> {
    match tokio::time::timeout_at(deadline, ws.next()).await {
        Err(_) => Err(Silence::Timeout),
        Ok(Some(Ok(Message::Text(t)))) => Ok(Some(t.to_string())),
        Ok(Some(Ok(Message::Close(frame)))) => Err(Silence::Gone(frame.map_or_else(|| "closed".to_string(), |f| format!("closed: {} {}", f.code, f.reason)))),
        Ok(None) => Err(Silence::Gone("connection closed".into())),
        Ok(Some(Err(e))) => Err(Silence::Gone(e.to_string())),
        Ok(Some(Ok(_))) => Ok(None),
    }
}
