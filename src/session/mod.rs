//! One connected device, as an I/O-free state machine.
//!
//! The session owns everything about talking to one device that does not touch a socket:
//! request ids and request/response correlation for *every* consumer (the hub's onboarding, CLI
//! calls, MCP-bridge calls, keepalives), timeouts, dropping late replies, the onboarding flow
//! (hello -> server hello -> `initialize` with vision -> `notifications/initialized` ->
//! `tools/list` until the last page), the cached tool list, and the events watchers see.
//!
//! A link (WebSocket, MQTT) feeds it frames and time, and carries out the [`Output`]s it returns.

mod events;
mod info;
mod onboarding;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

pub use events::{Direction, Event};
pub use info::{Counters, DeviceInfo, Phase, ToolEntry};

use crate::wire::envelope::{self, DeviceMessage};
use crate::wire::identity::Identity;
use crate::wire::jsonrpc::{self, Id, RpcError, RpcMessage};

/// How a session behaves; the link fills it in.
#[derive(Debug, Clone)]
pub struct SessionConfig {
    /// Our session id, sent in the server hello; devices echo it.
    pub session_id: String,
    /// The server hello text to send when the device says hello.
    pub server_hello: String,
    /// `capabilities.vision` for `initialize` (xiaozhi-sdk ignores an initialize without both).
    pub vision_url: String,
    pub vision_token: String,
    /// Timeout of each onboarding request.
    pub onboarding_timeout: Duration,
    /// Send an MCP `ping` when nothing was sent for this long (the device drops a link after 120 s
    /// without incoming data; WebSocket pings are not relied on).
    pub keepalive: Duration,
    /// Give up listing after this many pages.
    pub max_pages: usize,
    /// When the list comes back empty, list again after this delay, up to `empty_list_retries` times.
    pub empty_list_retry: Duration,
    pub empty_list_retries: u32,
    /// Request ids start after this (a CLI that talks to a device some hub also serves picks a
    /// random base, so the two never take each other's replies).
    pub id_base: i64,
    /// The system info the device posted to the OTA endpoint, if it did.
    pub system_info: Option<Value>,
}

impl SessionConfig {
    pub fn new(session_id: impl Into<String>, server_hello: String) -> Self {
        Self {
            session_id: session_id.into(),
            server_hello,
            vision_url: String::new(),
            vision_token: String::new(),
            onboarding_timeout: Duration::from_secs(10),
            keepalive: Duration::from_secs(60),
            max_pages: 100,
            empty_list_retry: Duration::from_secs(2),
            empty_list_retries: 3,
            id_base: 0,
            system_info: None,
        }
    }
}

/// Why a call did not produce a result.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CallError {
    /// The device answered with a JSON-RPC error (its `code` may be missing).
    #[error("device error{}: {}", .0.code.map(|c| format!(" {c}")).unwrap_or_default(), .0.message)]
    Device(RpcError),
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    #[error("the device disconnected before answering")]
    Disconnected,
    /// The link could not carry the request or its answer (an MQTT broker that is down, a
    /// message over the payload limit); the device itself may be fine.
    #[error("{0}")]
    Link(String),
}

/// What the link must do.
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    /// Send this text frame to the device.
    Send(String),
    /// A caller's request ended.
    Reply { ticket: u64, outcome: Result<Value, CallError> },
    Event(Event),
}

/// Who is waiting for a reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Origin {
    Initialize,
    ListPage,
    Keepalive,
    Caller(u64),
}

#[derive(Debug)]
struct Pending {
    origin: Origin,
    sent_at: Instant,
    deadline: Instant,
    timeout: Duration,
}

/// One device's session.
pub struct Session {
    cfg: SessionConfig,
    info: DeviceInfo,
    next_id: i64,
    pending: HashMap<i64, Pending>,
    onboarding: onboarding::Listing,
    last_sent: Instant,
    /// When set, every MCP frame is reported as an [`Event::Traffic`] (costly; only while watched).
    pub trace: bool,
    out: Vec<Output>,
}

impl Session {
    pub fn new(identity: Identity, transport: &str, cfg: SessionConfig, now: Instant) -> Self {
        let mut info = DeviceInfo::new(identity, transport, &cfg.session_id);
        info.set_system_info(cfg.system_info.as_ref());
        Self {
            next_id: cfg.id_base,
            cfg,
            info,
            pending: HashMap::new(),
            onboarding: onboarding::Listing::default(),
            last_sent: now,
            trace: false,
            out: Vec::new(),
        }
    }

    pub fn info(&self) -> &DeviceInfo {
        &self.info
    }

    pub fn device_id(&self) -> &str {
        &self.info.device_id
    }

    /// A text frame from the device.
    pub fn on_text(&mut self, text: &str, now: Instant) -> Vec<Output> {
        self.info.touch();
        self.info.counters.frames_in += 1;
        match envelope::parse(text) {
            Err(e) => {
                self.info.counters.malformed += 1;
                self.emit(Event::Malformed { reason: e.to_string(), text: truncate(text, 200) });
            }
            Ok(DeviceMessage::Hello(hello)) => {
                self.info.set_hello(&hello.raw);
                self.emit(Event::Hello { hello: hello.raw.clone() });
                self.send_text(self.cfg.server_hello.clone(), now);
                self.start_onboarding(now);
            }
            Ok(DeviceMessage::Mcp { payload, .. }) => {
                if self.trace {
                    self.emit(Event::Traffic { direction: Direction::In, payload: payload.clone(), latency_ms: None });
                }
                match jsonrpc::classify(&payload) {
                    Ok(RpcMessage::Response { id, outcome }) => self.on_response(id, outcome, now),
                    Ok(RpcMessage::Notification { method, params }) => self.on_notification(method, params, now),
                    Ok(RpcMessage::Request { id, method, .. }) => {
                        let error = json!({"code": -32601, "message": format!("mcpdev does not handle {method} requests")});
                        self.send_payload(json!({"jsonrpc": "2.0", "id": id.to_value(), "error": error}), now);
                    }
                    Err(why) => {
                        self.info.counters.malformed += 1;
                        self.emit(Event::Malformed { reason: why, text: truncate(text, 200) });
                    }
                }
            }
            Ok(DeviceMessage::SalvagedMcpError { id, error }) => {
                self.info.counters.malformed += 1;
                self.emit(Event::Malformed {
                    reason: "device sent an error reply that is not valid JSON (unescaped quotes); recovered its message".into(),
                    text: truncate(text, 200),
                });
                self.on_response(id, Err(error), now);
            }
            Ok(DeviceMessage::Goodbye { .. }) => self.emit(Event::Message { kind: "goodbye".into(), message: json!({"type":"goodbye"}) }),
            Ok(DeviceMessage::Other { kind, raw }) => self.emit(Event::Message { kind, message: raw }),
        }
        std::mem::take(&mut self.out)
    }

    /// Starts onboarding without waiting for a hello: an MQTT device answers MCP while idle, and
    /// stock firmware says hello only when a voice session opens.
    pub fn begin(&mut self, now: Instant) -> Vec<Output> {
        self.start_onboarding(now);
        std::mem::take(&mut self.out)
    }

    /// Ends every waiting caller with `error` (the link is down for now); the session stays.
    pub fn fail_callers(&mut self, error: CallError) -> Vec<Output> {
        let callers: Vec<i64> = self.pending.iter().filter(|(_, p)| matches!(p.origin, Origin::Caller(_))).map(|(id, _)| *id).collect();
        for id in callers {
            if let Some(Pending { origin: Origin::Caller(ticket), .. }) = self.pending.remove(&id) {
                self.out.push(Output::Reply { ticket, outcome: Err(error.clone()) });
            }
        }
        std::mem::take(&mut self.out)
    }

    /// A device message over the link's size limit: dropped, counted as malformed, and if it is
    /// the answer to a waiting request, that request ends with a [`CallError::Link`] that says why.
    pub fn on_oversize(&mut self, text: &str, limit: usize) -> Vec<Output> {
        self.info.touch();
        self.info.counters.frames_in += 1;
        self.info.counters.malformed += 1;
        let reason = format!("a {}-byte message is over the {limit}-byte payload limit; dropped", text.len());
        self.emit(Event::Malformed { reason: reason.clone(), text: truncate(text, 200) });
        let id = serde_json::from_str::<Value>(text).ok().and_then(|v| v.pointer("/payload/id").and_then(Value::as_i64));
        if let Some(p) = id.and_then(|id| self.pending.remove(&id)) {
            match p.origin {
                Origin::Caller(ticket) => self.out.push(Output::Reply {
                    ticket,
                    outcome: Err(CallError::Link(format!("the device's answer was dropped: {reason}"))),
                }),
                Origin::Initialize | Origin::ListPage => self.onboarding_failed(format!("onboarding answer dropped: {reason}")),
                Origin::Keepalive => {}
            }
        }
        std::mem::take(&mut self.out)
    }

    /// A binary frame (audio): counted, never parsed as JSON.
    pub fn on_binary(&mut self, len: usize) {
        self.info.touch();
        self.info.counters.binary_frames += 1;
        self.info.counters.binary_bytes += len as u64;
    }

    /// Sends a caller's request; the reply comes back as `Output::Reply { ticket, .. }`.
    pub fn request(&mut self, ticket: u64, method: &str, params: Option<Value>, timeout: Duration, now: Instant) -> Vec<Output> {
        self.send_request(method, params, Origin::Caller(ticket), timeout, now);
        std::mem::take(&mut self.out)
    }

    /// A caller gave up (cancelled): stop waiting; a late reply will be dropped.
    pub fn cancel(&mut self, ticket: u64) {
        self.pending.retain(|_, p| p.origin != Origin::Caller(ticket));
    }

    /// Time passed: timeouts, keepalive, list retries.
    pub fn on_tick(&mut self, now: Instant) -> Vec<Output> {
        let expired: Vec<i64> = self.pending.iter().filter(|(_, p)| p.deadline <= now).map(|(id, _)| *id).collect();
        for id in expired {
            let p = self.pending.remove(&id).expect("listed above");
            // Devices that do not answer `ping` (xiaozhi-sdk) are not counted as timing out.
            if p.origin != Origin::Keepalive {
                self.info.counters.timeouts += 1;
            }
            match p.origin {
                Origin::Caller(ticket) => {
                    self.out.push(Output::Reply { ticket, outcome: Err(CallError::Timeout(p.timeout)) })
                }
                Origin::Initialize | Origin::ListPage => {
                    let what = if p.origin == Origin::Initialize { "initialize" } else { "tools/list" };
                    self.onboarding_failed(format!("{what} got no answer within {:?}", p.timeout));
                }
                Origin::Keepalive => {}
            }
        }
        if self.onboarding.retry_due(now) {
            self.list_tools(now);
        }
        if self.info.phase == Phase::Ready && now.duration_since(self.last_sent) >= self.cfg.keepalive {
            self.send_request("ping", None, Origin::Keepalive, self.cfg.onboarding_timeout, now);
        }
        std::mem::take(&mut self.out)
    }

    /// How many requests await an answer (callers' and the session's own); the fuzz target checks
    /// it stays bounded.
    #[doc(hidden)]
    pub fn pending_requests(&self) -> usize {
        self.pending.len()
    }

    /// The next moment `on_tick` has something to do.
    pub fn next_deadline(&self) -> Option<Instant> {
        let pending = self.pending.values().map(|p| p.deadline).min();
        let keepalive = (self.info.phase == Phase::Ready).then(|| self.last_sent + self.cfg.keepalive);
        [pending, keepalive, self.onboarding.retry_at()].into_iter().flatten().min()
    }

    /// The link is gone: every waiting caller gets `Disconnected`.
    pub fn on_disconnect(&mut self) -> Vec<Output> {
        for (_, p) in self.pending.drain() {
            if let Origin::Caller(ticket) = p.origin {
                self.out.push(Output::Reply { ticket, outcome: Err(CallError::Disconnected) });
            }
        }
        self.info.phase = Phase::Disconnected;
        std::mem::take(&mut self.out)
    }

    fn on_response(&mut self, id: Id, outcome: Result<Value, RpcError>, now: Instant) {
        let pending = match id {
            Id::Num(n) => self.pending.remove(&n),
            Id::Str(_) => None,
        };
        let Some(p) = pending else {
            self.info.counters.late_replies += 1;
            self.emit(Event::LateReply { id: id.to_value() });
            return;
        };
        let latency = now.duration_since(p.sent_at);
        if self.trace
            && let Some(Output::Event(Event::Traffic { latency_ms, .. })) = self.out.last_mut()
        {
            *latency_ms = Some(latency.as_secs_f64() * 1000.0);
        }
        match p.origin {
            Origin::Caller(ticket) => {
                self.out.push(Output::Reply { ticket, outcome: outcome.map_err(CallError::Device) });
            }
            Origin::Initialize => match outcome {
                Ok(result) => {
                    self.info.set_initialize(&result);
                    self.send_payload(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}), now);
                    self.onboarding = onboarding::Listing::default();
                    self.list_tools(now);
                }
                Err(e) => self.onboarding_failed(format!("initialize failed: {}", e.message)),
            },
            Origin::ListPage => match outcome {
                Ok(result) => self.on_list_page(&result, now),
                Err(e) => self.onboarding_failed(format!("tools/list failed: {}", e.message)),
            },
            Origin::Keepalive => {}
        }
    }

    fn on_notification(&mut self, method: String, params: Option<Value>, now: Instant) {
        if method == "notifications/tools/list_changed" && self.info.phase == Phase::Ready {
            self.onboarding = onboarding::Listing::default();
            self.list_tools(now);
        }
        self.emit(Event::Notification { method, params: params.unwrap_or(Value::Null) });
    }

    fn start_onboarding(&mut self, now: Instant) {
        self.info.phase = Phase::Initializing;
        let params = json!({
            "protocolVersion": "2024-11-05",
            "capabilities": {"vision": {"url": self.cfg.vision_url, "token": self.cfg.vision_token}},
            "clientInfo": {"name": "mcpdev", "version": env!("CARGO_PKG_VERSION")},
        });
        self.send_request("initialize", Some(params), Origin::Initialize, self.cfg.onboarding_timeout, now);
    }

    fn list_tools(&mut self, now: Instant) {
        self.info.phase = Phase::Listing;
        let params = json!({"cursor": self.onboarding.cursor(), "withUserTools": true});
        self.send_request("tools/list", Some(params), Origin::ListPage, self.cfg.onboarding_timeout, now);
    }

    fn on_list_page(&mut self, result: &Value, now: Instant) {
        match self.onboarding.add_page(result, self.cfg.max_pages) {
            onboarding::Step::Next => self.list_tools(now),
            onboarding::Step::Done { warning } => {
                if let Some(w) = warning {
                    self.emit(Event::Warning { message: w });
                }
                let tools = self.onboarding.take_tools();
                if tools.is_empty() && self.onboarding.schedule_retry(now, &self.cfg) {
                    self.info.phase = Phase::Listing;
                    return;
                }
                let changed = self.info.phase_was_ready_once;
                self.info.set_tools(tools);
                self.info.phase = Phase::Ready;
                let count = self.info.tools.len();
                self.emit(if changed { Event::ToolsChanged { tools: count } } else { Event::Ready { tools: count } });
                self.info.phase_was_ready_once = true;
            }
        }
    }

    fn onboarding_failed(&mut self, message: String) {
        self.info.onboarding_error = Some(message.clone());
        self.info.phase = Phase::Ready;
        self.emit(Event::Warning { message });
    }

    fn send_request(&mut self, method: &str, params: Option<Value>, origin: Origin, timeout: Duration, now: Instant) {
        // Ids stay positive int32: the stock firmware reads them through `valueint`.
        self.next_id = if self.next_id >= i64::from(i32::MAX) { 1 } else { self.next_id + 1 };
        let id = self.next_id;
        let mut payload = json!({"jsonrpc": "2.0", "id": id, "method": method});
        if let Some(p) = params {
            payload["params"] = p;
        }
        // At most one onboarding step and one keepalive in flight: a new one supersedes the old (whose
        // answer then counts as late), so a device repeating its hello cannot grow the map.
        let kind = |o: Origin| match o {
            Origin::Caller(_) => None,
            Origin::Initialize | Origin::ListPage => Some(0),
            Origin::Keepalive => Some(1),
        };
        if let Some(k) = kind(origin) {
            self.pending.retain(|_, p| kind(p.origin) != Some(k));
        }
        self.pending.insert(id, Pending { origin, sent_at: now, deadline: now + timeout, timeout });
        self.send_payload(payload, now);
    }

    fn send_payload(&mut self, payload: Value, now: Instant) {
        let text = json!({"session_id": self.cfg.session_id, "type": "mcp", "payload": payload}).to_string();
        if self.trace {
            self.emit(Event::Traffic { direction: Direction::Out, payload, latency_ms: None });
        }
        self.send_text(text, now);
    }

    fn send_text(&mut self, text: String, now: Instant) {
        self.last_sent = now;
        self.info.counters.frames_out += 1;
        self.out.push(Output::Send(text));
    }

    fn emit(&mut self, e: Event) {
        self.out.push(Output::Event(e));
    }
}

fn truncate(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &s[..at]),
        None => s.to_string(),
    }
}

#[cfg(test)]
mod tests;
