//! One connected device, as an I/O-free state machine.
//!
//! The session owns everything about talking to one device that does not touch a socket:
//! request ids and request/response correlation for *every* consumer (the hub's onboarding, CLI
//! calls, MCP-bridge calls, keepalives), timeouts, dropping late replies, the onboarding flow
//! (hello -> server hello -> `initialize` with vision -> `notifications/initialized` ->
//! `tools/list` until the last page), the cached tool list, and the events watchers see.
//!
//! A link (WebSocket, MQTT) feeds it frames and time, and carries out the [`Output`]s it returns.
//!
//! # The onboarding flow
//!
//! How a device is onboarded, onboarded again when it may be a new instance, and listed again:
//! the rules are in [`onboarding_flow`]; a listing's own guards (cursor, page and size caps) in
//! [`onboarding`].
//!
//! # What a device can make the hub hold or send
//!
//! - Tools per device (`max_tools`, 1,000), bytes of the cached tool list (`max_tool_bytes`,
//!   1 MiB) and pages (`max_pages`, 100): beyond a cap the listing stops, what fits is kept,
//!   `tools_warning` says so and it is logged once.
//! - Every hello gets the server hello (stock devices say hello again when a voice session
//!   reopens); what it onboards again, and how often, is above. A device relayed to its own
//!   upstream is answered by the upstream, never by the session ([`relayed`]).
//! - Device requests get a -32601 error that never echoes more than 64 characters of the method.
//!   Hellos and requests together are answered at most `max_answers_per_sec` (20) times a
//!   second; the rest are counted (`counters.unanswered`) and logged once a second.

mod config;
mod events;
mod info;
mod interned;
mod limits;
mod onboarding;
mod onboarding_flow;
mod relayed;
mod tool_list;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::metrics::log_limit::Kind;

pub use events::{Direction, Event, Peer, SharedJson, VIEW_MAX_BYTES, VIEW_PREVIEW_CHARS, cut_for_viewers};
pub use info::{Counters, DeviceInfo, MAX_NAME_CHARS, OnboardingStatus, Phase, bounded_name, now_ms};
pub use limits::OnboardBudget;
pub use onboarding::PageMark;
pub use tool_list::{ToolEntry, ToolList};
pub use config::{ServerHello, SessionConfig, UdpHello, spread_keepalive};

/// The method a caller sends to make the session list the device's tools again (or, after a
/// failed onboarding, start onboarding over). It never reaches the device.
pub const REFRESH_METHOD: &str = "mcpdev/refresh_tools";

/// The page number [`Session::late_step`] gives `initialize`.
const INITIALIZE_STEP: u32 = u32::MAX;

use crate::wire::envelope::{self, DeviceMessage};
use crate::wire::identity::Identity;
use crate::wire::jsonrpc::{self, Id, RawResult, RpcError, RpcMessage};


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
    Reply { ticket: u64, outcome: Result<RawResult, CallError> },
    Event(Event),
}

/// A device's result as read: its text ([`envelope::fast_response`]) or a tree ([`envelope::parse`]).
/// Each reader takes the form it needs; neither is built from the other unless needed.
enum Answer<'a> {
    Text(&'a serde_json::value::RawValue),
    Tree(Value),
}

impl Answer<'_> {
    fn into_raw(self) -> RawResult {
        match self {
            // `fast_response` checked that the text parses as a `Value`.
            Answer::Text(raw) => RawResult::from_checked(raw),
            Answer::Tree(v) => RawResult::from_value(&v),
        }
    }

    fn into_value(self) -> Value {
        match self {
            Answer::Text(raw) => serde_json::from_str(raw.get()).unwrap_or(Value::Null),
            Answer::Tree(v) => v,
        }
    }
}

/// A request to the device: its payload is written straight from these fields, in this order.
#[derive(serde::Serialize)]
struct OutgoingRequest<'a> {
    jsonrpc: &'static str,
    id: i64,
    method: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    params: Option<&'a Value>,
}

/// Who is waiting for a reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Origin {
    /// Onboarding requests carry the generation of the listing they belong to: an answer to a
    /// listing that was started over is not taken for the new one.
    Initialize(u64),
    ListPage(u64),
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

/// Which onboarding step to send again.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Planned {
    Initialize,
    ListPage,
}

/// A caller waiting for a [`REFRESH_METHOD`] to finish.
#[derive(Debug)]
struct Waiter {
    ticket: u64,
    deadline: Instant,
    timeout: Duration,
}

/// One device's session.
pub struct Session {
    /// The hub-wide part of the configuration, shared ([`shared_config`]).
    cfg: std::sync::Arc<SessionConfig>,
    /// What is this session's own (its session id is its description's).
    server_hello: ServerHello,
    vision_token: Box<str>,
    keepalive: Duration,
    /// Shared with the description the link last published: a mutation copies it only while a
    /// published one still points at it (at most once per publication), so an idle device's
    /// description is one allocation, not two.
    info: std::sync::Arc<DeviceInfo>,
    next_id: i64,
    /// A B-tree: empty, it is 24 bytes and allocates nothing (a hash map is 48 inline).
    pending: BTreeMap<i64, Pending>,
    onboarding: onboarding::Listing,
    /// Bumped whenever initialize or a listing starts (over).
    generation: u64,
    /// The listing under way is a re-list of a ready device: the phase stays `ready`.
    background: bool,
    /// A re-list is under way (requests pending or an empty-list retry planned).
    relisting: bool,
    /// `list_changed` (or a refresh) came during a listing: list once more after it.
    relist_again: bool,
    /// A planned re-list (confirmation, or after a list that looked truncated).
    relist_at: Option<Instant>,
    /// When the last background re-list started.
    last_relist: Option<Instant>,
    confirm_planned: bool,
    /// The length of a shorter list not believed yet, and how many re-lists that cost.
    short_seen: Option<usize>,
    truncation_relists: u32,
    /// A failed onboarding step to send again, and when.
    retry_step: Option<(Instant, Planned)>,
    /// The last onboarding step that timed out, while it is being retried: its request id and
    /// page ([`INITIALIZE_STEP`] for `initialize`). Its answer, however late, is taken for the
    /// step's (a hub behind on its reading hears every answer late).
    late_step: Option<(i64, u32)>,
    /// After a failed onboarding: when to try again on the hub's own, and how many failed
    /// onboardings in a row came before (`failed_onboarding_retry`).
    retry_failed_at: Option<Instant>,
    failed_rounds: u8,
    /// The device may be a new instance (the link was down, it said goodbye, it checked in at
    /// OTA): its next message onboards it again.
    maybe_new_instance: bool,
    /// The device said goodbye since [`Session::take_goodbye`] was last asked.
    said_goodbye: bool,
    /// Onboardings spent in this window, and one put off until the window ends.
    onboard_budget: limits::OnboardBudget,
    deferred_onboarding: Option<Instant>,
    /// An onboarding without a hello, planned for a device that just connected.
    begin_at: Option<Instant>,
    /// This onboarding needed a retry: `ready` only once two listings in a row agree; the list
    /// waiting for its agreement, and the listings spent on agreeing.
    needs_agreement: bool,
    unconfirmed: Option<Vec<ToolEntry>>,
    agreement_relists: u32,
    /// What tells a first list that looks cut short ([`Self::looks_cut_short`]): the page size the
    /// device last used (tools on a page that had a `nextCursor`; 0: none seen), the tools the hub
    /// knew it to list before this connection, and a `list_changed` during this onboarding.
    page_size: u32,
    known_tools: u32,
    changed_while_onboarding: bool,
    waiters: Vec<Waiter>,
    answers: limits::RateLimit,
    cap_logged: bool,
    /// The latest time the link gave (for entry points that get none).
    now: Instant,
    last_sent: Instant,
    /// When set, every MCP frame is reported as an [`Event::Traffic`] (costly; only while watched).
    pub trace: bool,
    /// Who the frame being sent is from (a host's request, else the hub's own), for its trace.
    sender: Peer,
    out: Vec<Output>,
}


impl Session {
    pub fn new(identity: Identity, transport: &str, mut cfg: SessionConfig, now: Instant) -> Self {
        let keepalive = spread_keepalive(cfg.keepalive, cfg.keepalive_jitter_pct, &cfg.session_id);
        let mut info = DeviceInfo::new(identity, transport, &cfg.session_id);
        info.set_system_info(cfg.system_info.take().as_ref());
        let onboard_budget = std::mem::take(&mut cfg.onboard_budget);
        let next_id = std::mem::take(&mut cfg.id_base);
        let known_tools = u32::try_from(std::mem::take(&mut cfg.known_tools)).unwrap_or(u32::MAX);
        cfg.session_id = String::new();
        let server_hello = std::mem::take(&mut cfg.server_hello);
        let vision_token = std::mem::take(&mut cfg.vision_token).into_boxed_str();
        Self {
            next_id,
            cfg: config::shared_config(cfg),
            server_hello,
            vision_token,
            keepalive,
            info: std::sync::Arc::new(info),
            pending: BTreeMap::new(),
            onboarding: onboarding::Listing::default(),
            generation: 0,
            background: false,
            relisting: false,
            relist_again: false,
            relist_at: None,
            last_relist: None,
            confirm_planned: false,
            short_seen: None,
            truncation_relists: 0,
            retry_step: None,
            late_step: None,
            retry_failed_at: None,
            failed_rounds: 0,
            maybe_new_instance: false,
            said_goodbye: false,
            onboard_budget,
            deferred_onboarding: None,
            begin_at: None,
            needs_agreement: false,
            unconfirmed: None,
            agreement_relists: 0,
            page_size: 0,
            known_tools,
            changed_while_onboarding: false,
            waiters: Vec::new(),
            answers: limits::RateLimit::new(now),
            cap_logged: false,
            now,
            last_sent: now,
            trace: false,
            sender: Peer::Hub,
            out: Vec::new(),
        }
    }

    /// Records where the device connects from (its link knows; shown by `devices`).
    pub fn set_address(&mut self, address: Option<String>) {
        self.info_mut().set_address(address);
    }

    pub fn info(&self) -> &DeviceInfo {
        &self.info
    }

    /// The description itself, to publish without copying it.
    pub fn shared_info(&self) -> &std::sync::Arc<DeviceInfo> {
        &self.info
    }

    /// The description, to change: copied first if a published one still points at it.
    fn info_mut(&mut self) -> &mut DeviceInfo {
        std::sync::Arc::make_mut(&mut self.info)
    }

    pub fn device_id(&self) -> &str {
        &self.info.device_id
    }

    /// A text frame from the device.
    /// What a step produced. A request map left empty gives its node back (an emptied B-tree
    /// keeps its root): a fleet of idle devices would otherwise each keep one.
    fn drained(&mut self) -> Vec<Output> {
        if self.pending.is_empty() {
            self.pending = BTreeMap::new();
        }
        std::mem::take(&mut self.out)
    }

    pub fn on_text(&mut self, text: &str, now: Instant) -> Vec<Output> {
        self.now = now;
        self.info_mut().touch();
        self.info_mut().counters.frames_in += 1;
        // Marked before this message (a goodbye marks the one after it).
        let marked = self.maybe_new_instance;
        // A response with a result, unless traced (a trace shows the payload as a tree), is read
        // without building one: a caller gets the result's text as the device sent it.
        if !self.trace
            && let Some((id, result)) = envelope::fast_response(text)
        {
            self.on_response(id, Ok(Answer::Text(result)), now);
            self.after_message(marked, now);
            return self.drained();
        }
        match envelope::parse(text) {
            Err(e) => {
                self.info_mut().counters.malformed += 1;
                self.emit(Event::Malformed { reason: e.to_string(), text: truncate(text, 200) });
            }
            Ok(DeviceMessage::Hello(hello)) => self.on_hello(&hello.raw, now),
            Ok(DeviceMessage::Mcp { payload, .. }) => {
                if self.trace {
                    self.emit(Event::Traffic { direction: Direction::In, by: Peer::Device, payload: events::cut_for_viewers(&payload, text.len(), text), latency_ms: None });
                }
                match jsonrpc::classify(payload) {
                    Ok(RpcMessage::Response { id, outcome }) => self.on_response(id, outcome.map(Answer::Tree), now),
                    Ok(RpcMessage::Notification { method, params }) => self.on_notification(method, params, text, now),
                    Ok(RpcMessage::Request { id, method, .. }) => {
                        // A relayed device's requests are its upstream's to answer.
                        if !self.cfg.relayed && self.may_answer("requests", now) {
                            // Never echo unbounded device input: the method is cut to 64 characters.
                            let error = json!({"code": -32601, "message": format!("mcpdev does not handle {} requests", truncate(&method, 64))});
                            self.send_payload(&json!({"jsonrpc": "2.0", "id": id.to_value(), "error": error}), now);
                        }
                    }
                    Err(why) => {
                        self.info_mut().counters.malformed += 1;
                        self.emit(Event::Malformed { reason: why, text: truncate(text, 200) });
                    }
                }
            }
            Ok(DeviceMessage::SalvagedMcpError { id, error }) => {
                self.info_mut().counters.malformed += 1;
                self.emit(Event::Malformed {
                    reason: "device sent an error reply that is not valid JSON (unescaped quotes); recovered its message".into(),
                    text: truncate(text, 200),
                });
                self.on_response(id, Err(error), now);
            }
            Ok(DeviceMessage::Goodbye { .. }) => {
                // The device ended its session (an MQTT device before it reboots or sleeps): what
                // it sends next may be new firmware with other tools, so it is onboarded again.
                self.maybe_new_instance = self.info.phase != Phase::AwaitingHello;
                self.said_goodbye = true;
                self.emit(Event::Message {
                    kind: "goodbye".into(),
                    message: Box::new(json!({"type":"goodbye"})),
                })
            }
            Ok(DeviceMessage::Other { kind, raw }) => self.emit(Event::Message { kind: truncate(&kind, 64), message: events::cut_for_viewers(&raw, text.len(), text) }),
        }
        self.after_message(marked, now);
        self.drained()
    }

    /// A message from a device that may be a new instance, and was not a hello (which decides
    /// for itself): onboard it again now.
    fn after_message(&mut self, marked: bool, now: Instant) {
        if marked && std::mem::take(&mut self.maybe_new_instance) {
            self.onboard(now, "it may have restarted");
        }
    }

    /// The device may have restarted (it checked in at the OTA endpoint, which devices do at
    /// boot): its next message, whatever it is, onboards it again.
    pub fn may_have_restarted(&mut self) {
        if self.info.phase != Phase::AwaitingHello {
            self.maybe_new_instance = true;
        }
    }

    /// Starts onboarding without waiting for a hello: an MQTT device answers MCP while idle, and
    /// stock firmware says hello only when a voice session opens.
    /// Does nothing while onboarding runs or after it succeeded.
    pub fn begin(&mut self, now: Instant) -> Vec<Output> {
        self.now = now;
        if self.info.phase == Phase::AwaitingHello {
            self.onboard(now, "first");
        }
        self.drained()
    }

    /// [`Self::begin`] at `at`, unless a hello came first (a device that just connected may be
    /// about to say hello: one onboarding, not two).
    pub fn begin_at(&mut self, at: Instant) {
        if self.info.phase == Phase::AwaitingHello {
            self.begin_at = Some(at);
        }
    }

    /// Ends every waiting caller with `error` (the link is down for now); the session stays, and
    /// the next hello onboards the device again (it may have restarted meanwhile).
    pub fn fail_callers(&mut self, error: CallError) -> Vec<Output> {
        self.maybe_new_instance = self.info.phase != Phase::AwaitingHello;
        let callers: Vec<i64> = self.pending.iter().filter(|(_, p)| matches!(p.origin, Origin::Caller(_))).map(|(id, _)| *id).collect();
        for id in callers {
            if let Some(Pending { origin: Origin::Caller(ticket), .. }) = self.pending.remove(&id) {
                self.out.push(Output::Reply { ticket, outcome: Err(error.clone()) });
            }
        }
        for w in std::mem::take(&mut self.waiters) {
            self.out.push(Output::Reply { ticket: w.ticket, outcome: Err(error.clone()) });
        }
        self.drained()
    }

    /// A device message over the link's size limit: dropped, counted as malformed, and if it is
    /// the answer to a waiting request, that request ends with a [`CallError::Link`] that says why.
    pub fn on_oversize(&mut self, text: &str, limit: usize) -> Vec<Output> {
        let now = self.now;
        self.info_mut().touch();
        self.info_mut().counters.frames_in += 1;
        self.info_mut().counters.malformed += 1;
        let reason = format!("a {}-byte message is over the {limit}-byte payload limit; dropped", text.len());
        self.emit(Event::Malformed { reason: reason.clone(), text: truncate(text, 200) });
        let id = serde_json::from_str::<Value>(text).ok().and_then(|v| v.pointer("/payload/id").and_then(Value::as_i64));
        if let Some(p) = id.and_then(|id| self.pending.remove(&id)) {
            match p.origin {
                Origin::Caller(ticket) => self.out.push(Output::Reply {
                    ticket,
                    outcome: Err(CallError::Link(format!("the device's answer was dropped: {reason}"))),
                }),
                Origin::Initialize(g) | Origin::ListPage(g) if g == self.generation => {
                    self.step_failed(p.origin, format!("answer dropped: {reason}"), now)
                }
                Origin::Initialize(_) | Origin::ListPage(_) | Origin::Keepalive => {}
            }
        }
        self.drained()
    }

    /// A binary frame (audio): counted, never parsed as JSON.
    pub fn on_binary(&mut self, len: usize) {
        self.info_mut().touch();
        self.info_mut().counters.binary_frames += 1;
        self.info_mut().counters.binary_bytes += len as u64;
    }

    /// Sends a caller's request; the reply comes back as `Output::Reply { ticket, .. }`.
    /// [`REFRESH_METHOD`] is handled here: see the module docs.
    pub fn request(&mut self, ticket: u64, method: &str, params: Option<Value>, timeout: Duration, now: Instant) -> Vec<Output> {
        self.now = now;
        if method == REFRESH_METHOD {
            self.waiters.push(Waiter { ticket, deadline: now + timeout, timeout });
            self.refresh(now);
        } else {
            self.send_request(method, params, Origin::Caller(ticket), timeout, now);
        }
        self.drained()
    }

    /// A caller gave up (cancelled): stop waiting, and tell the device with
    /// `notifications/cancelled` naming the request it was sent (MCP's cancellation; the
    /// xiaozhi firmware and our device core ignore every notification, so it is harmless where
    /// it is not understood); a late reply will be dropped.
    pub fn cancel(&mut self, ticket: u64, now: Instant) -> Vec<Output> {
        let sent: Vec<i64> = self.pending.iter().filter(|(_, p)| p.origin == Origin::Caller(ticket)).map(|(id, _)| *id).collect();
        self.pending.retain(|_, p| p.origin != Origin::Caller(ticket));
        self.waiters.retain(|w| w.ticket != ticket);
        for id in sent {
            let note = serde_json::json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": id, "reason": "the caller gave up"}});
            self.send_payload(&note, now);
        }
        self.drained()
    }

    /// Time passed: timeouts, keepalive, list retries.
    pub fn on_tick(&mut self, now: Instant) -> Vec<Output> {
        self.now = now;
        let expired: Vec<i64> = self.pending.iter().filter(|(_, p)| p.deadline <= now).map(|(id, _)| *id).collect();
        for id in expired {
            let p = self.pending.remove(&id).expect("listed above");
            // Devices that do not answer `ping` (xiaozhi-sdk) are not counted as timing out.
            if p.origin != Origin::Keepalive {
                self.info_mut().counters.timeouts += 1;
            }
            match p.origin {
                Origin::Caller(ticket) => {
                    self.out.push(Output::Reply { ticket, outcome: Err(CallError::Timeout(p.timeout)) })
                }
                Origin::Initialize(g) | Origin::ListPage(g) if g == self.generation => {
                    if !self.background {
                        let page = if matches!(p.origin, Origin::Initialize(_)) { INITIALIZE_STEP } else { self.onboarding.page() as u32 };
                        self.late_step = Some((id, page));
                    }
                    self.step_failed(p.origin, format!("no answer within {:?}", p.timeout), now)
                }
                Origin::Initialize(_) | Origin::ListPage(_) | Origin::Keepalive => {}
            }
        }
        let (late, waiting): (Vec<Waiter>, Vec<Waiter>) = std::mem::take(&mut self.waiters).into_iter().partition(|w| w.deadline <= now);
        self.waiters = waiting;
        for w in late {
            self.out.push(Output::Reply { ticket: w.ticket, outcome: Err(CallError::Timeout(w.timeout)) });
        }
        if let Some((at, step)) = self.retry_step
            && at <= now
        {
            self.retry_step = None;
            match step {
                Planned::Initialize => self.send_initialize(now),
                Planned::ListPage => self.list_tools(now),
            }
        }
        if self.onboarding.retry_due(now) {
            self.list_tools(now);
        }
        if self.begin_at.is_some_and(|at| at <= now) {
            self.begin_at = None;
            if self.info.phase == Phase::AwaitingHello {
                self.onboard(now, "first");
            }
        }
        if self.retry_failed_at.is_some_and(|at| at <= now) {
            self.retry_failed_at = None;
            if self.info.onboarding.failed {
                self.onboard(now, "its last onboarding failed");
            }
        }
        if self.deferred_onboarding.is_some_and(|at| at <= now) {
            self.deferred_onboarding = None;
            self.onboard(now, "put off");
        }
        if self.relist_at.is_some_and(|at| at <= now) {
            self.relist_at = None;
            self.start_relist(now);
        }
        if self.keeps_alive() && now.duration_since(self.last_sent) >= self.keepalive {
            self.send_request("ping", None, Origin::Keepalive, self.cfg.onboarding_timeout, now);
        }
        self.drained()
    }

    /// How many requests await an answer (callers' and the session's own); the fuzz target checks
    /// it stays bounded.
    #[doc(hidden)]
    pub fn pending_requests(&self) -> usize {
        self.pending.len()
    }

    /// Whether the device said goodbye since this was last asked (an MQTT link then checks at
    /// once that it is still there: [`Self::probe`]).
    pub fn take_goodbye(&mut self) -> bool {
        std::mem::take(&mut self.said_goodbye)
    }

    /// A `ping` now, whatever the phase: any live device answers it (stock firmware with an
    /// error, which counts as hearing from it).
    pub fn probe(&mut self, now: Instant) -> Vec<Output> {
        self.now = now;
        self.send_request(
            "ping",
            None,
            Origin::Keepalive,
            self.cfg.onboarding_timeout,
            now,
        );
        self.drained()
    }

    /// The next moment `on_tick` has something to do.
    pub fn next_deadline(&self) -> Option<Instant> {
        let pending = self.pending.values().map(|p| p.deadline).min();
        let keepalive = self.keeps_alive().then(|| self.last_sent + self.keepalive);
        let waiters = self.waiters.iter().map(|w| w.deadline).min();
        [pending, keepalive, self.onboarding.retry_at(), self.retry_step.map(|(at, _)| at), self.relist_at, waiters, self.deferred_onboarding, self.begin_at, self.retry_failed_at].into_iter().flatten().min()
    }

    /// The link is gone: every waiting caller gets `Disconnected`.
    pub fn on_disconnect(&mut self) -> Vec<Output> {
        for (_, p) in std::mem::take(&mut self.pending) {
            if let Origin::Caller(ticket) = p.origin {
                self.out.push(Output::Reply { ticket, outcome: Err(CallError::Disconnected) });
            }
        }
        for w in std::mem::take(&mut self.waiters) {
            self.out.push(Output::Reply { ticket: w.ticket, outcome: Err(CallError::Disconnected) });
        }
        self.retry_step = None;
        self.relist_at = None;
        self.deferred_onboarding = None;
        self.begin_at = None;
        self.retry_failed_at = None;
        self.info_mut().set_phase(Phase::Disconnected);
        self.drained()
    }

    fn on_response(&mut self, id: Id, outcome: Result<Answer, RpcError>, now: Instant) {
        let pending = match id {
            Id::Num(n) => self.pending.remove(&n),
            Id::Str(_) => None,
        };
        let Some(p) = pending else {
            if let Some(origin) = self.take_late_step(&id, outcome.is_ok()) {
                self.step_answered(origin, outcome, now);
                return;
            }
            self.info_mut().counters.late_replies += 1;
            self.emit(Event::LateReply { id: Box::new(id.to_value()) });
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
                self.out.push(Output::Reply { ticket, outcome: outcome.map(Answer::into_raw).map_err(CallError::Device) });
            }
            Origin::Initialize(g) | Origin::ListPage(g) if g != self.generation => {
                // An answer to a listing that was started over: the new one asks again.
                self.info_mut().counters.late_replies += 1;
            }
            Origin::Initialize(_) | Origin::ListPage(_) => {
                // The step is answered: an older attempt's answer is no longer the step's.
                self.late_step = None;
                self.step_answered(p.origin, outcome, now);
            }
            Origin::Keepalive => {}
        }
    }

    /// The answer to the onboarding step under way (`initialize` or a `tools/list` page).
    fn step_answered(&mut self, origin: Origin, outcome: Result<Answer, RpcError>, now: Instant) {
        match (origin, outcome) {
            (Origin::Initialize(_), Ok(result)) => {
                self.info_mut().set_initialize(&result.into_value());
                self.send_payload(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}), now);
                self.onboarding = onboarding::Listing::default();
                self.list_tools(now);
            }
            (Origin::ListPage(_), Ok(result)) => self.on_list_page(&result.into_value(), now),
            (Origin::Initialize(_) | Origin::ListPage(_), Err(e)) => self.step_failed(origin, rpc_failure(&e), now),
            (Origin::Keepalive | Origin::Caller(_), _) => {}
        }
    }

    /// A reply to the step that timed out last ([`Self::late_step`]), while that step is still
    /// being retried: taken for the step's answer, its retry (planned or sent) dropped, and the
    /// attempt its timeout cost given back. None for any other reply, or an error reply.
    fn take_late_step(&mut self, id: &Id, ok: bool) -> Option<Origin> {
        let Id::Num(n) = id else { return None };
        let (_, page) = self.late_step.filter(|(late, _)| late == n)?;
        self.late_step = None;
        if !ok || self.background || self.info.onboarding.failed {
            return None;
        }
        let origin = match page {
            INITIALIZE_STEP if self.info.phase == Phase::Initializing => Origin::Initialize(self.generation),
            page if page != INITIALIZE_STEP && self.info.phase == Phase::Listing && self.onboarding.page() as u32 == page => Origin::ListPage(self.generation),
            _ => return None,
        };
        self.retry_step = None;
        self.pending.retain(|_, p| !matches!(p.origin, Origin::Initialize(_) | Origin::ListPage(_)));
        let status = &mut std::sync::Arc::make_mut(&mut self.info).onboarding;
        status.attempt = status.attempt.saturating_sub(1).max(1);
        self.info_mut().bump();
        if may_log(Kind::Onboarding, &self.info.device_id) {
            tracing::debug!(device = %self.info.device_id, "a late answer to an onboarding step that timed out is taken: the device answers slower than the onboarding timeout");
        }
        Some(origin)
    }

    /// A notification, from a frame whose text is `text`: watchers get its params cut to
    /// [`VIEW_MAX_BYTES`] ([`events::cut_for_viewers`]).
    fn on_notification(&mut self, method: String, params: Option<Value>, text: &str, now: Instant) {
        if method == "notifications/tools/list_changed" {
            if matches!(self.info.phase, Phase::Initializing | Phase::Listing) && !self.background {
                // The list under way may predate the change: it is listed again before `ready`.
                self.changed_while_onboarding = true;
            } else {
                self.start_relist(now);
            }
        }
        let params = events::cut_for_viewers(params.as_ref().unwrap_or(&Value::Null), text.len(), text);
        self.emit(Event::Notification { method: truncate(&method, 256), params });
    }

    fn send_request(&mut self, method: &str, params: Option<Value>, origin: Origin, timeout: Duration, now: Instant) {
        // Ids stay positive int32: the stock firmware reads them through `valueint`.
        self.next_id = if self.next_id >= i64::from(i32::MAX) { 1 } else { self.next_id + 1 };
        let id = self.next_id;
        // At most one onboarding step and one keepalive in flight: a new one supersedes the old (whose
        // answer then counts as late), so a device repeating its hello cannot grow the map.
        let kind = |o: Origin| match o {
            Origin::Caller(_) => None,
            Origin::Initialize(_) | Origin::ListPage(_) => Some(0),
            Origin::Keepalive => Some(1),
        };
        if let Some(k) = kind(origin) {
            self.pending.retain(|_, p| kind(p.origin) != Some(k));
        }
        self.pending.insert(id, Pending { origin, sent_at: now, deadline: now + timeout, timeout });
        self.sender = if matches!(origin, Origin::Caller(_)) { Peer::Host } else { Peer::Hub };
        self.send_payload(&OutgoingRequest { jsonrpc: "2.0", id, method, params: params.as_ref() }, now);
    }

    /// Sends a JSON-RPC payload in an `mcp` envelope, written straight from `payload`; a tree of
    /// it is built only for a trace.
    fn send_payload(&mut self, payload: &impl serde::Serialize, now: Instant) {
        let text = envelope::mcp_text(&self.info.session_id, payload);
        let by = std::mem::replace(&mut self.sender, Peer::Hub);
        if self.trace {
            let payload = serde_json::to_value(payload).unwrap_or_default();
            self.emit(Event::Traffic { direction: Direction::Out, by, payload: events::cut_for_viewers(&payload, text.len(), &text), latency_ms: None });
        }
        self.send_text(text, now);
    }

    fn send_text(&mut self, text: String, now: Instant) {
        self.last_sent = now;
        self.info_mut().counters.frames_out += 1;
        self.out.push(Output::Send(text));
    }

    fn emit(&mut self, e: Event) {
        self.out.push(Output::Event(e));
    }
}

/// Whether a log line of `kind` about this device may be written now (a device can trigger
/// these at will: they are rate-limited per device and summed up, [`crate::metrics::log_limit`]).
fn may_log(kind: Kind, device_id: &str) -> bool {
    crate::metrics::log_limit::allow(kind, device_id)
}

/// A device's error reply as a step failure, cut to a bounded length.
fn rpc_failure(e: &RpcError) -> String {
    if e.message == jsonrpc::EMPTY_REPLY {
        return e.message.clone();
    }
    format!("error reply: {}", truncate(&e.message, 200))
}

fn truncate(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &s[..at]),
        None => s.to_string(),
    }
}

#[cfg(test)]
mod fleet_tests;
#[cfg(test)]
mod gateway_tests;
#[cfg(test)]
mod relist_tests;
#[cfg(test)]
mod slow_device_tests;
#[cfg(test)]
mod tests;
