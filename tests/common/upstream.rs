//! A voice backend written for the tests, speaking the device protocol as xiaozhi-esp32-server
//! does (the real one cannot be installed from a package registry): it wants the device's token,
//! answers a hello with its own `session_id` and `audio_params`, and on a hello with
//! `features.mcp` sends `initialize` (id 1, with its own vision URL) and then `tools/list` (id 2,
//! again with each `nextCursor`). Everything else is the test's: it reads what the device sent
//! and sends what it likes. Every message received is kept, to check what reached it.
//!
//! Its OTA endpoint answers like the official one: an `activation` block until `/activate` was
//! polled twice, a firmware offer, `websocket` and `mqtt` blocks, and `server_time`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};

use super::ws::DEADLINE;

/// The token the upstream wants (`Authorization: Bearer up-token`).
pub const TOKEN: &str = "up-token";
/// The vision URL the upstream hands the device in its `initialize`.
pub const VISION_URL: &str = "http://upstream.example/vision/explain";

/// One device session on the upstream.
pub struct UpConn {
    pub headers: HashMap<String, String>,
    pub session_id: String,
    to_device: mpsc::UnboundedSender<Message>,
    from_device: mpsc::UnboundedReceiver<Message>,
    /// Every message the upstream received on this session, in order.
    pub received: Arc<Mutex<Vec<Message>>>,
    /// The tools the upstream listed, once its listing ended.
    listed: mpsc::UnboundedReceiver<Vec<Value>>,
}

impl UpConn {
    /// The tools of the upstream's own listing (waits for it to end).
    pub async fn listed(&mut self) -> Vec<Value> {
        tokio::time::timeout(DEADLINE, self.listed.recv()).await.expect("the upstream's listing did not end in time").expect("the session ended")
    }

    pub fn send(&self, frame: Value) {
        self.to_device.send(Message::text(frame.to_string())).expect("the session is open");
    }

    pub fn send_raw(&self, message: Message) {
        self.to_device.send(message).expect("the session is open");
    }

    /// The next message the upstream's script did not take (answers to the test's requests,
    /// binary frames, device messages).
    pub async fn recv(&mut self) -> Message {
        tokio::time::timeout(DEADLINE, self.from_device.recv()).await.expect("nothing reached the upstream in time").expect("the session ended")
    }

    /// The next text message the script did not take, as JSON.
    pub async fn recv_json(&mut self) -> Value {
        loop {
            if let Message::Text(t) = self.recv().await {
                return serde_json::from_str(&t).unwrap_or_else(|e| panic!("not JSON ({e}): {t}"));
            }
        }
    }

    /// The device's answer to the upstream's request `id` (what else the device sends on the way,
    /// `listen` or notifications, is skipped).
    pub async fn answer(&mut self, id: Value) -> Value {
        loop {
            let v = self.recv_json().await;
            if v["type"] != "mcp" || v["payload"].get("method").is_some() {
                continue;
            }
            assert_eq!(v["payload"]["id"], id, "{v}");
            return v;
        }
    }

    /// Waits for the session to end (the hub closed it).
    pub async fn ended(&mut self) {
        let ended = tokio::time::timeout(DEADLINE, async {
            while let Some(m) = self.from_device.recv().await {
                if m.is_close() {
                    return;
                }
            }
        })
        .await;
        assert!(ended.is_ok(), "the upstream's session was not ended");
    }

    /// Every text message received, as JSON.
    pub fn received_json(&self) -> Vec<Value> {
        self.received.lock().unwrap().iter().filter_map(|m| m.to_text().ok().and_then(|t| serde_json::from_str(t).ok())).collect()
    }
}

/// The upstream: its WebSocket and OTA listeners.
pub struct FakeUpstream {
    pub ws_url: String,
    pub ota_url: String,
    conns: mpsc::UnboundedReceiver<UpConn>,
    /// Every OTA request: its path, headers and body.
    pub ota_requests: Arc<Mutex<Vec<(String, HashMap<String, String>, String)>>>,
}

impl FakeUpstream {
    /// An upstream that wants [`TOKEN`] from every device.
    pub async fn start() -> Self {
        Self::with_token(true).await
    }

    /// An upstream that takes devices without a token (xiaozhi-sdk's devices send none).
    pub async fn open() -> Self {
        Self::with_token(false).await
    }

    async fn with_token(required: bool) -> Self {
        let ws = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let ws_url = format!("ws://{}/xiaozhi/v1/", ws.local_addr().unwrap());
        let (conn_tx, conns) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut n = 0;
            while let Ok((tcp, _)) = ws.accept().await {
                n += 1;
                let conn_tx = conn_tx.clone();
                tokio::spawn(serve_session(tcp, format!("upstream-session-{n}"), conn_tx, required));
            }
        });
        let ota = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let ota_url = format!("http://{}/xiaozhi/ota/", ota.local_addr().unwrap());
        let ota_requests: Arc<Mutex<Vec<(String, HashMap<String, String>, String)>>> = Arc::default();
        let polls = Arc::new(Mutex::new(0u32));
        let (log, ws_for_ota) = (ota_requests.clone(), ws_url.clone());
        let app = axum::Router::new().fallback(move |req: axum::extract::Request| {
            let (log, polls, ws_url) = (log.clone(), polls.clone(), ws_for_ota.clone());
            async move { ota_answer(req, &log, &polls, &ws_url).await }
        });
        tokio::spawn(async move { axum::serve(ota, app).await.unwrap() });
        Self { ws_url, ota_url, conns, ota_requests }
    }

    /// The next device session.
    pub async fn next_conn(&mut self) -> UpConn {
        tokio::time::timeout(DEADLINE, self.conns.recv()).await.expect("no session reached the upstream in time").unwrap()
    }

    /// Whether a session reached the upstream by now.
    pub fn try_conn(&mut self) -> Option<UpConn> {
        self.conns.try_recv().ok()
    }
}

async fn ota_answer(req: axum::extract::Request, log: &Mutex<Vec<(String, HashMap<String, String>, String)>>, polls: &Mutex<u32>, ws_url: &str) -> axum::response::Response {
    use axum::response::IntoResponse;
    let path = req.uri().path().to_string();
    let headers: HashMap<String, String> = req.headers().iter().map(|(k, v)| (k.as_str().to_string(), v.to_str().unwrap_or_default().to_string())).collect();
    let body = axum::body::to_bytes(req.into_body(), 1 << 20).await.unwrap();
    log.lock().unwrap().push((path.clone(), headers, String::from_utf8_lossy(&body).into_owned()));
    if path.ends_with("/redirect/") {
        return (axum::http::StatusCode::FOUND, [("location", "http://elsewhere.example/")], "").into_response();
    }
    if path.ends_with("/huge/") {
        return (axum::http::StatusCode::OK, "x".repeat(2 << 20)).into_response();
    }
    if path.ends_with("/activate") {
        let mut n = polls.lock().unwrap();
        *n += 1;
        return if *n >= 2 { (axum::http::StatusCode::OK, "success").into_response() } else { (axum::http::StatusCode::ACCEPTED, "pending upstream").into_response() };
    }
    let activated = *polls.lock().unwrap() >= 2;
    let mut answer = json!({
        "server_time": {"timestamp": 1_754_611_200_000u64, "timezone_offset": 480},
        "firmware": {"version": "1.0.0", "url": "https://upstream.example/firmware.bin"},
        "websocket": {"url": ws_url, "token": TOKEN, "version": 1},
        "mqtt": {"endpoint": "mqtt.upstream.example:8883", "client_id": "GID_test@@@aa_bb_cc_00_00_07", "username": "u", "password": "p", "publish_topic": "device-server", "subscribe_topic": "null"},
    });
    if !activated {
        answer["activation"] = json!({"code": "654321", "message": "upstream.example\n654321", "challenge": "upstream-challenge", "timeout_ms": 30000});
    }
    axum::Json(answer).into_response()
}

/// One session, scripted as xiaozhi-esp32-server runs it.
async fn serve_session(tcp: tokio::net::TcpStream, session_id: String, conns: mpsc::UnboundedSender<UpConn>, token_required: bool) {
    let mut headers = HashMap::new();
    let accepted = tokio_tungstenite::accept_hdr_async(tcp, |req: &Request, resp: Response| -> Result<Response, ErrorResponse> {
        for (k, v) in req.headers() {
            headers.insert(k.as_str().to_ascii_lowercase(), v.to_str().unwrap_or_default().to_string());
        }
        if token_required && headers.get("authorization").map(String::as_str) != Some(&format!("Bearer {TOKEN}")) {
            let mut refusal = ErrorResponse::new(Some("the upstream wants its own token".into()));
            *refusal.status_mut() = tokio_tungstenite::tungstenite::http::StatusCode::UNAUTHORIZED;
            return Err(refusal);
        }
        Ok(resp)
    })
    .await;
    let Ok(ws) = accepted else { return };
    let (to_device, mut outgoing) = mpsc::unbounded_channel();
    let (from_tx, from_device) = mpsc::unbounded_channel();
    let (listed_tx, listed) = mpsc::unbounded_channel();
    let received: Arc<Mutex<Vec<Message>>> = Arc::default();
    let conn = UpConn { headers, session_id: session_id.clone(), to_device, from_device, received: received.clone(), listed };
    if conns.send(conn).is_err() {
        return;
    }
    let (mut sink, mut stream) = ws.split();
    let mut tools: Vec<Value> = Vec::new();
    // Where the script stands: waiting for `initialize`'s answer, or listing.
    let (mut initializing, mut listing) = (false, false);
    loop {
        tokio::select! {
            out = outgoing.recv() => match out {
                Some(m) => if sink.send(m).await.is_err() { break },
                None => break,
            },
            msg = stream.next() => {
                let Some(Ok(msg)) = msg else {
                    let _ = from_tx.send(Message::Close(None));
                    break;
                };
                received.lock().unwrap().push(msg.clone());
                let v: Value = msg.to_text().ok().and_then(|t| serde_json::from_str(t).ok()).unwrap_or_default();
                let script = match (v["type"].as_str(), v["payload"]["id"].as_i64()) {
                    (Some("hello"), _) => {
                        let mut answers = vec![json!({"type": "hello", "transport": "websocket", "session_id": session_id,
                            "audio_params": {"format": "opus", "sample_rate": 24000, "channels": 1, "frame_duration": 60}})];
                        if v["features"]["mcp"] == true {
                            initializing = true;
                            answers.push(json!({"type": "mcp", "payload": {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                                "protocolVersion": "2024-11-05", "capabilities": {"roots": {"listChanged": true}, "sampling": {}, "vision": {"url": VISION_URL, "token": "upstream-vision-token"}},
                                "clientInfo": {"name": "XiaozhiClient", "version": "1.0.0"}}}}));
                        }
                        Some(answers)
                    }
                    (Some("mcp"), Some(1)) if initializing => {
                        (initializing, listing) = (false, true);
                        Some(vec![json!({"type": "mcp", "payload": {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}})])
                    }
                    (Some("mcp"), Some(2)) if listing && v["payload"]["result"]["tools"].is_array() => {
                        tools.extend(v["payload"]["result"]["tools"].as_array().unwrap().iter().cloned());
                        match v["payload"]["result"]["nextCursor"].as_str().filter(|c| !c.is_empty()) {
                            Some(cursor) => Some(vec![json!({"type": "mcp", "payload": {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"cursor": cursor}}})]),
                            None => {
                                listing = false;
                                let _ = listed_tx.send(std::mem::take(&mut tools));
                                Some(Vec::new())
                            }
                        }
                    }
                    _ => None,
                };
                match script {
                    Some(answers) => {
                        for a in answers {
                            if sink.send(Message::text(a.to_string())).await.is_err() {
                                break;
                            }
                        }
                    }
                    None => {
                        let close = msg.is_close();
                        let _ = from_tx.send(msg);
                        if close {
                            break;
                        }
                    }
                }
            }
        }
    }
}
