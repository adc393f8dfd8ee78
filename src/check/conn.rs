//! The connection `check` drives: one device accepted on `--listen`, every frame under the
//! checker's control (string ids, malformed JSON, notifications, many requests in flight); or a
//! device reached through a hub's `rpc` op, where only requests can be sent.
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

/// What the device sent before MCP: its handshake headers and its hello.
#[derive(Debug, Clone)]
pub struct Greeting {
    /// Handshake headers, names lowercased (no `authorization`: a token is never kept).
    pub headers: Vec<(String, String)>,
    pub hello: Value,
    pub remote: String,
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

/// Why no answer came.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Silence {
    Timeout,
    Gone(String),
}

impl std::fmt::Display for Silence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Silence::Timeout => write!(f, "no answer within the timeout"),
            Silence::Gone(why) => write!(f, "the device disconnected ({why})"),
        }
    }
}

/// One MCP reply and how long it took.
#[derive(Debug, Clone)]
pub struct Reply {
    pub payload: Value,
    pub latency: Duration,
}

pub struct Conn {
    /// The device's socket (`--listen`); `None` through a hub.
    ws: Option<WebSocketStream<TcpStream>>,
    /// Through a hub (`-d`): its control client and the device id. Requests go through its `rpc`
    /// op, so ids are the hub's and raw frames cannot be sent.
    hub: Option<(crate::links::hub_client::HubClient, String)>,
    session_id: String,
    next_id: i64,
    /// Frames received while waiting for something else.
    pending: VecDeque<Frame>,
    pub timeout: Duration,
    pub gone: Option<String>,
    /// Round trips per method, for the timing section.
    pub latencies: Vec<(String, Duration)>,
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
        let session_id = uuid::Uuid::new_v4().to_string();
        let mut conn = Conn { ws: Some(ws), hub: None, session_id, next_id: 1, pending: VecDeque::new(), timeout, gone: None, latencies: Vec::new() };
        let hello = conn.read_hello().await?;
        let server_hello = crate::links::websocket::server_hello(&conn.session_id);
        conn.send_text(server_hello).await;
        let greeting = Greeting { headers, hello, remote: remote.to_string() };
        return Ok((conn, greeting, Instant::now()));
    }
}

/// Reaches `device` through the hub at `hub_url`: its identity and hello come from the hub's
/// record of the device. Raw-frame checks are skipped this way.
pub async fn through_hub(hub_url: &str, device: Option<&str>, wait: Duration, timeout: Duration) -> anyhow::Result<(Conn, Greeting)> {
    let client = crate::links::hub_client::HubClient::connect(hub_url).await.map_err(|e| anyhow::anyhow!("cannot reach the hub at {hub_url}: {e}"))?;
    let info = client.call(json!({"op": "device", "device": device, "wait_ms": wait.as_millis() as u64})).await.map_err(|e| anyhow::anyhow!("{} (hub {hub_url})", e.message))?;
    let device_id = info["device_id"].as_str().unwrap_or_default().to_string();
    let mut headers = vec![("device-id".to_string(), device_id.clone()), ("protocol-version".to_string(), info["protocol_version"].to_string())];
    if let Some(c) = info["client_id"].as_str() {
        headers.push(("client-id".into(), c.into()));
    }
    let greeting = Greeting { headers, hello: info["hello"].clone(), remote: String::new() };
    let conn = Conn { ws: None, hub: Some((client, device_id)), session_id: String::new(), next_id: 1, pending: VecDeque::new(), timeout, gone: None, latencies: Vec::new() };
    Ok((conn, greeting))
}

impl Conn {
    /// Whether raw frames can be sent (`--listen`), not only requests through a hub.
    pub fn raw(&self) -> bool {
        self.ws.is_some()
    }

    async fn read_hello(&mut self) -> anyhow::Result<Value> {
        let deadline = tokio::time::Instant::now() + self.timeout;
        let Some(ws) = self.ws.as_mut() else { anyhow::bail!("no socket") };
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
        let Some(ws) = self.ws.as_mut() else {
            tracing::debug!("not sent: raw frames need --listen");
            return;
        };
        if self.gone.is_some() {
            return;
        }
        if let Err(e) = ws.send(Message::text(text)).await {
            self.gone = Some(e.to_string());
        }
    }

    /// Sends a JSON-RPC payload inside the `mcp` envelope.
    pub async fn send(&mut self, payload: &Value) {
        let envelope = json!({"session_id": self.session_id, "type": "mcp", "payload": payload});
        self.send_text(envelope.to_string()).await;
    }

    /// The envelope around a payload given as text (which may be broken on purpose).
    pub fn envelope_text(&self, payload: &str) -> String {
        format!("{{\"session_id\":{},\"type\":\"mcp\",\"payload\":{payload}}}", json!(self.session_id))
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
            let Some(ws) = self.ws.as_mut() else { return Err(Silence::Gone("raw frames need --listen".into())) };
            let msg = match tokio::time::timeout_at(deadline, ws.next()).await {
                Err(_) => return Err(Silence::Timeout),
                Ok(m) => m,
            };
            let text = match msg {
                Some(Ok(Message::Text(t))) => t,
                Some(Ok(Message::Close(frame))) => {
                    self.gone = Some(frame.map_or_else(|| "closed".to_string(), |f| format!("closed: {} {}", f.code, f.reason)));
                    continue;
                }
                None => {
                    self.gone = Some("connection closed".into());
                    continue;
                }
                Some(Err(e)) => {
                    self.gone = Some(e.to_string());
                    continue;
                }
                Some(Ok(_)) => continue,
            };
            match serde_json::from_str::<Value>(&text) {
                Ok(v) if v["type"] == "mcp" => return Ok(Frame::Mcp(v["payload"].clone())),
                Ok(_) => continue,
                Err(_) => return Ok(Frame::Invalid(text.to_string())),
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
