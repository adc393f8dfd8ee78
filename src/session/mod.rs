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
//! # Onboarding that survives gateways
//!
//! The xiaozhi MQTT gateway answers MCP for a device from a cache it fills only after it asked the
//! device itself, so right after the hello it may answer `initialize` with an id-only reply
//! (`{"jsonrpc":"2.0","id":1}`), `tools/list` with an empty or partial list. The rules:
//!
//! - **A failed step is retried.** A reply with neither `result` nor `error`, an error reply, or
//!   no answer within `onboarding_timeout` fails the step (`initialize`, or `tools/list page N`);
//!   the same step is sent again after a backoff (`retry_backoff`: 50 ms, 200 ms, 1 s, 3 s), up to
//!   `onboarding_attempts` failed steps in all. Then onboarding has failed: `onboarding_error`
//!   names the step ("onboarding failed at tools/list page 2: no answer within 10s"), the phase is
//!   `ready` (so waiters stop waiting) with `onboarding.failed` set, and the CLI's `tools list`,
//!   `init` and `call` exit with code 9. The state (attempt k of n, last error, failed) is in
//!   [`DeviceInfo::onboarding`] and in [`Event::OnboardingRetry`] / [`Event::OnboardingFailed`].
//! - **An empty list is listed again** after `empty_list_retry` (2 s), up to `empty_list_retries`.
//! - **After a retry, two listings must agree.** An onboarding that needed a retry (a failed
//!   step, or an empty list) is not `ready` on its first complete list: the tools are listed again
//!   `agreement_relist` (1.5 s) later, and again until two listings in a row agree (at most
//!   `max_relists` more; then the last is taken, with a warning). Until then the phase stays
//!   `listing` and no tools are shown, so `tools list --wait` never returns the partial list a
//!   gateway gives after a retried `initialize`.
//! - **A first list that looks cut short is not shown.** The list that would make the device
//!   `ready` is held back, exactly as after a retry (listed again until two listings in a row
//!   agree, at most `max_relists` more, then the last is taken with a logged warning), when it
//!   looks cut short: its last page, without a `nextCursor`, is as long as a page the device sent
//!   with one (this listing or an earlier one); the device sent `tools/list_changed` while it was
//!   being listed; or it is shorter than the list the hub knew for this device before (an earlier
//!   onboarding of this session, or the device's earlier connection: `known_tools`). A cache still
//!   filling (the xiaozhi MQTT gateway's) answers with the pages it has so far; one that never
//!   stops looking partial costs at most `max_relists` listings. The rule is the same for every
//!   device. What it cannot see: a device's very first list, one page without a `nextCursor`,
//!   from a cache that sends no sign; the confirmation re-list below corrects that one.
//! - **One confirmation re-list.** `confirm_relist` (1.5 s) after the first complete listing of a
//!   clean onboarding, the tools are listed once more in the background. The device is `ready` at
//!   once; the re-list only replaces the tools when they differ ([`Event::ToolsChanged`]), and its
//!   failure is only a warning. A direct device pays one `tools/list` frame, nothing visible.
//! - **A list that looks truncated is listed again.** A re-list that finds fewer tools than the
//!   list before is not believed at once: it is listed again after 1 s, and the shorter list is
//!   taken only when two listings in a row agree on it (or after `max_relists` tries).
//! - **`notifications/tools/list_changed`** re-lists in the background; several during one
//!   listing give one more listing, not one each, and re-lists start at most once per
//!   `min_relist_interval` (1 s): a device that floods `list_changed` gets one listing a second,
//!   so the hub's work (and the bridge's catalogue and `list_changed` to MCP hosts) stays there.
//! - **Refresh on demand.** A caller's request for [`REFRESH_METHOD`] is not sent to the device:
//!   the session re-lists (or, after a failed onboarding, starts onboarding over) and answers
//!   `{"tools":[…], "onboarding_error"?, "refresh_error"?}` when it is done. `mcpdev tools list
//!   --refresh` and the MCP bridge use it through the ordinary `rpc` path.
//!
//! A well-behaved device is onboarded with no delay at all: hello, `initialize`,
//! `notifications/initialized`, `tools/list` back to back, `ready` on the last page.
//!
//! # Onboarding again: the device may be a new instance
//!
//! A device that restarted may run other firmware (other tools) and reads `capabilities.vision`
//! only in `initialize`, so it is onboarded again (from `initialize`; `ready` waits for the new
//! list) whenever it may be a new instance:
//!
//! - **every hello, on a link that cannot see the device's connections**
//!   (`hello_may_be_new_instance`: MQTT through a broker the hub does not run), as
//!   xiaozhi-esp32-server does on each session; also a hello during an onboarding, whose instance
//!   may be gone. Where the link sees connections (WebSocket, the embedded broker), a new
//!   instance comes on a new connection and gets a new session, so a hello on the same one is a
//!   new voice session and gets the server hello only;
//! - **the next message of any kind** after the link was down (an MQTT broker outage), a
//!   `goodbye`, or an OTA check-in ([`Session::may_have_restarted`]);
//! - a hello after a failed onboarding.
//!
//! Each onboarding, the first included, is taken from a budget of `max_onboardings` (4) per
//! `onboarding_window` (30 s), which a link hands on to the device's next link
//! (`onboard_budget`). Beyond it, one onboarding is planned for the end of the window, and that is
//! logged and shown as a warning: a device that says hello (or reconnects) in a loop costs at most
//! that, and no restart is missed.
//!
//! # What a device can make the hub hold or send
//!
//! - Tools per device (`max_tools`, 1,000), bytes of the cached tool list (`max_tool_bytes`,
//!   1 MiB) and pages (`max_pages`, 100): beyond a cap the listing stops, what fits is kept,
//!   `tools_warning` says so and it is logged once.
//! - Every hello gets the server hello (stock devices say hello again when a voice session
//!   reopens); what it onboards again, and how often, is above.
//! - Device requests get a -32601 error that never echoes more than 64 characters of the method.
//!   Hellos and requests together are answered at most `max_answers_per_sec` (20) times a
//!   second; the rest are counted (`counters.unanswered`) and logged once a second.

mod events;
mod info;
mod limits;
mod onboarding;
mod tool_list;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::metrics::log_limit::Kind;

pub use events::{Direction, Event, SharedJson, VIEW_MAX_BYTES, VIEW_PREVIEW_CHARS};
pub use info::{Counters, DeviceInfo, OnboardingStatus, Phase, ToolEntry, now_ms};
pub use limits::OnboardBudget;
pub use onboarding::PageMark;
pub use tool_list::ToolList;

/// The method a caller sends to make the session list the device's tools again (or, after a
/// failed onboarding, start onboarding over). It never reaches the device.
pub const REFRESH_METHOD: &str = "mcpdev/refresh_tools";

use crate::wire::envelope::{self, DeviceMessage};
use crate::wire::identity::Identity;
use crate::wire::jsonrpc::{self, Id, RawResult, RpcError, RpcMessage};

/// How a session behaves; the link fills it in. A session keeps what is its own (session id,
/// server hello, vision token, keepalive) and shares the rest, equal for every device of a hub
/// (the vision URL too, equal for the devices that came in on one address), with the other
/// sessions ([`shared_config`]): about 250 bytes a device.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionConfig {
    /// Our session id, sent in the server hello; devices echo it.
    pub session_id: String,
    /// The server hello to send when the device says hello.
    pub server_hello: ServerHello,
    /// `capabilities.vision` for `initialize` (xiaozhi-sdk ignores an initialize without both).
    pub vision_url: String,
    pub vision_token: String,
    /// Timeout of each onboarding request.
    pub onboarding_timeout: Duration,
    /// Send an MCP `ping` when nothing was sent for this long (the device drops a link after 120 s
    /// without incoming data; WebSocket pings are not relied on).
    pub keepalive: Duration,
    /// Each session pings a little earlier than `keepalive`, by up to this percentage, drawn from
    /// its session id ([`spread_keepalive`]): a fleet onboarded in one burst does not ping in one
    /// burst every minute, and the sessions' periods differ, so they drift further apart.
    pub keepalive_jitter_pct: u8,
    /// Give up listing after this many pages.
    pub max_pages: usize,
    /// When the list comes back empty, list again after this delay, up to `empty_list_retries` times.
    pub empty_list_retry: Duration,
    pub empty_list_retries: u32,
    /// Failed onboarding steps allowed before giving up (each failed step is sent again).
    pub onboarding_attempts: u32,
    /// The wait before the k-th retry of a failed step (the last one repeats).
    pub retry_backoff: &'static [Duration],
    /// List the tools once more this long after the first complete listing (None: never).
    pub confirm_relist: Option<Duration>,
    /// Re-lists after a list that looked truncated, per session.
    pub max_relists: u32,
    /// Background re-lists start at most this often (later requests are coalesced into one).
    pub min_relist_interval: Duration,
    /// Caps on what one device's tool list may hold.
    pub max_tools: usize,
    pub max_tool_bytes: usize,
    /// Hellos and device requests answered per second at most.
    pub max_answers_per_sec: u32,
    /// The link cannot tell a new instance of the device from the old one (MQTT through a broker
    /// the hub does not run: it sees no CONNECT), so every hello may come from a new instance and
    /// onboards the device again, as xiaozhi-esp32-server does on each new session.
    pub hello_may_be_new_instance: bool,
    /// Onboardings (first and again) one device may cause: at most `max_onboardings` per
    /// `onboarding_window`; the next one waits for the window to end.
    pub max_onboardings: u32,
    pub onboarding_window: Duration,
    /// What the device's earlier links spent of that budget (a link that replaces another hands
    /// it on; fresh by default).
    pub onboard_budget: limits::OnboardBudget,
    /// After an onboarding that needed a retry, the wait before each listing that must agree
    /// with the one before.
    pub agreement_relist: Duration,
    /// Request ids start after this (a CLI that talks to a device some hub also serves picks a
    /// random base, so the two never take each other's replies).
    pub id_base: i64,
    /// The system info the device posted to the OTA endpoint, if it did.
    pub system_info: Option<Value>,
    /// How many tools the hub last knew this device to list (an earlier connection; 0: none).
    /// A first list shorter than that is not believed before a second listing agrees with it.
    pub known_tools: usize,
}

/// The server hello a session answers a hello with. A WebSocket device's is written when it is
/// sent (from the session id), not kept for the device's lifetime: a fleet's hub holds thousands
/// of sessions, and each would hold its own copy of ~170 bytes.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum ServerHello {
    /// The WebSocket server hello ([`envelope::websocket_server_hello`]).
    #[default]
    WebSocket,
    /// This text, as it is (MQTT's, with its UDP block; tests').
    Text(Box<str>),
}

/// The default waits before the retries of a failed onboarding step.
const RETRY_BACKOFF: &[Duration] = &[Duration::from_millis(50), Duration::from_millis(200), Duration::from_secs(1), Duration::from_secs(3)];

impl From<&str> for ServerHello {
    fn from(text: &str) -> Self {
        Self::Text(text.into())
    }
}

impl From<String> for ServerHello {
    fn from(text: String) -> Self {
        Self::Text(text.into_boxed_str())
    }
}

impl SessionConfig {
    pub fn new(session_id: impl Into<String>, server_hello: impl Into<ServerHello>) -> Self {
        Self {
            session_id: session_id.into(),
            server_hello: server_hello.into(),
            vision_url: String::new(),
            vision_token: String::new(),
            onboarding_timeout: Duration::from_secs(10),
            keepalive: Duration::from_secs(60),
            keepalive_jitter_pct: 25,
            max_pages: 100,
            empty_list_retry: Duration::from_secs(2),
            empty_list_retries: 3,
            onboarding_attempts: 5,
            retry_backoff: RETRY_BACKOFF,
            confirm_relist: Some(Duration::from_millis(1500)),
            max_relists: 3,
            min_relist_interval: Duration::from_secs(1),
            max_tools: 1000,
            max_tool_bytes: 1 << 20,
            max_answers_per_sec: 20,
            hello_may_be_new_instance: false,
            max_onboardings: 4,
            onboarding_window: Duration::from_secs(30),
            onboard_budget: limits::OnboardBudget::default(),
            agreement_relist: Duration::from_millis(1500),
            id_base: 0,
            system_info: None,
            known_tools: 0,
        }
    }
}

/// The keepalive period of the session `session_id`: `every`, less up to `jitter_pct` % of it,
/// spread evenly over sessions by a hash of the id (FNV-1a), never more than `every` (the device's
/// inactivity limit is what `every` is chosen against).
pub fn spread_keepalive(every: Duration, jitter_pct: u8, session_id: &str) -> Duration {
    let hash = session_id.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
    let fraction = (hash >> 11) as f64 / (1u64 << 53) as f64;
    every.saturating_sub(every.mul_f64(f64::from(jitter_pct.min(90)) / 100.0 * fraction))
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
    pending: HashMap<i64, Pending>,
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
    out: Vec<Output>,
}

/// The configuration's hub-wide part (its per-session fields taken out), shared with the sessions
/// created before it on this thread with an equal one: a hub's sessions hold one pointer per
/// runtime thread. Only the latest is remembered (weakly), which is what a hub creating its
/// sessions one by one needs; per thread, so no lock is taken and no other thread's sessions
/// can displace it.
fn shared_config(cfg: SessionConfig) -> std::sync::Arc<SessionConfig> {
    thread_local! {
        static LATEST: std::cell::RefCell<std::sync::Weak<SessionConfig>> = const { std::cell::RefCell::new(std::sync::Weak::new()) };
    }
    LATEST.with(|latest| {
        if let Some(shared) = latest.borrow().upgrade().filter(|s| **s == cfg) {
            return shared;
        }
        let shared = std::sync::Arc::new(cfg);
        *latest.borrow_mut() = std::sync::Arc::downgrade(&shared);
        shared
    })
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
            cfg: shared_config(cfg),
            server_hello,
            vision_token,
            keepalive,
            info: std::sync::Arc::new(info),
            pending: HashMap::new(),
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
    /// What a step produced. A request map left empty gives its table back: a fleet of idle
    /// devices would otherwise each keep one sized for its onboarding.
    fn drained(&mut self) -> Vec<Output> {
        if self.pending.is_empty() && self.pending.capacity() > 0 {
            self.pending = HashMap::new();
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
                    self.emit(Event::Traffic { direction: Direction::In, payload: events::cut_for_viewers(&payload, text.len(), text), latency_ms: None });
                }
                match jsonrpc::classify(payload) {
                    Ok(RpcMessage::Response { id, outcome }) => self.on_response(id, outcome.map(Answer::Tree), now),
                    Ok(RpcMessage::Notification { method, params }) => self.on_notification(method, params, text, now),
                    Ok(RpcMessage::Request { id, method, .. }) => {
                        if self.may_answer("requests", now) {
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

    /// A caller gave up (cancelled): stop waiting; a late reply will be dropped.
    pub fn cancel(&mut self, ticket: u64) {
        self.pending.retain(|_, p| p.origin != Origin::Caller(ticket));
        self.waiters.retain(|w| w.ticket != ticket);
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
        if self.deferred_onboarding.is_some_and(|at| at <= now) {
            self.deferred_onboarding = None;
            self.onboard(now, "put off");
        }
        if self.relist_at.is_some_and(|at| at <= now) {
            self.relist_at = None;
            self.start_relist(now);
        }
        if self.info.phase == Phase::Ready && now.duration_since(self.last_sent) >= self.keepalive {
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
        let keepalive = (self.info.phase == Phase::Ready).then(|| self.last_sent + self.keepalive);
        let waiters = self.waiters.iter().map(|w| w.deadline).min();
        [pending, keepalive, self.onboarding.retry_at(), self.retry_step.map(|(at, _)| at), self.relist_at, waiters, self.deferred_onboarding, self.begin_at].into_iter().flatten().min()
    }

    /// The link is gone: every waiting caller gets `Disconnected`.
    pub fn on_disconnect(&mut self) -> Vec<Output> {
        for (_, p) in self.pending.drain() {
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
        self.info_mut().set_phase(Phase::Disconnected);
        self.drained()
    }

    fn on_response(&mut self, id: Id, outcome: Result<Answer, RpcError>, now: Instant) {
        let pending = match id {
            Id::Num(n) => self.pending.remove(&n),
            Id::Str(_) => None,
        };
        let Some(p) = pending else {
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
            Origin::Initialize(_) => match outcome {
                Ok(result) => {
                    self.info_mut().set_initialize(&result.into_value());
                    self.send_payload(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}), now);
                    self.onboarding = onboarding::Listing::default();
                    self.list_tools(now);
                }
                Err(e) => self.step_failed(p.origin, rpc_failure(&e), now),
            },
            Origin::ListPage(_) => match outcome {
                Ok(result) => self.on_list_page(&result.into_value(), now),
                Err(e) => self.step_failed(p.origin, rpc_failure(&e), now),
            },
            Origin::Keepalive => {}
        }
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

    /// A hello: answered with the server hello (rate-limited). It onboards the device (again)
    /// when it may be a new instance: see the module docs.
    fn on_hello(&mut self, hello: &Value, now: Instant) {
        if !self.may_answer("hellos", now) {
            return;
        }
        self.info_mut().set_hello(hello);
        let shared = self.info.hello.clone().map_or_else(|| SharedJson::from_value(hello), SharedJson);
        self.emit(Event::Hello { hello: shared });
        let server_hello = match &self.server_hello {
            ServerHello::WebSocket => envelope::websocket_server_hello(&self.info.session_id),
            ServerHello::Text(text) => text.to_string(),
        };
        self.send_text(server_hello, now);
        let marked = std::mem::take(&mut self.maybe_new_instance);
        let why = match () {
            _ if self.info.phase == Phase::AwaitingHello => "first",
            _ if marked => "it may have restarted",
            _ if self.cfg.hello_may_be_new_instance => "a hello the hub cannot tell from a new instance's",
            _ if self.info.onboarding.failed => "a hello after a failed onboarding",
            _ => return,
        };
        self.onboard(now, why);
    }

    /// Onboards the device (again) within its budget: beyond `max_onboardings` per
    /// `onboarding_window`, the onboarding waits for the window to end (one is planned at most),
    /// and that is logged.
    fn onboard(&mut self, now: Instant, why: &str) {
        if self.deferred_onboarding.is_some() {
            return;
        }
        match self.onboard_budget.take(now, self.cfg.max_onboardings, self.cfg.onboarding_window) {
            Ok(()) => {
                if self.info.phase != Phase::AwaitingHello && may_log(Kind::Onboarding, &self.info.device_id) {
                    tracing::info!(device = %self.info.device_id, "onboarding again: {why}");
                }
                self.start_onboarding(now);
            }
            Err(at) => {
                self.deferred_onboarding = Some(at);
                let message = format!(
                    "the device asks to be onboarded more than {} times in {} s ({why}); the next onboarding waits {} ms",
                    self.cfg.max_onboardings,
                    self.cfg.onboarding_window.as_secs(),
                    at.saturating_duration_since(now).as_millis()
                );
                if may_log(Kind::Onboarding, &self.info.device_id) {
                    tracing::warn!(device = %self.info.device_id, "{message}");
                }
                self.emit(Event::Warning { message });
            }
        }
    }

    /// Counts one hello or request the device sent; false when it sent too many this second.
    fn may_answer(&mut self, what: &str, now: Instant) -> bool {
        match self.answers.take(now, self.cfg.max_answers_per_sec) {
            limits::Verdict::Allow => true,
            verdict => {
                self.info_mut().counters.unanswered += 1;
                if verdict == limits::Verdict::FirstRefusal {
                    let message = format!(
                        "the device sends more than {} hellos and requests a second; the rest of this second's {what} are not answered",
                        self.cfg.max_answers_per_sec
                    );
                    if may_log(Kind::Device, &self.info.device_id) {
                        tracing::warn!(device = %self.info.device_id, "{message}");
                    }
                    self.emit(Event::Warning { message });
                }
                false
            }
        }
    }

    /// Starts onboarding (over): fresh attempts, `initialize` now.
    fn start_onboarding(&mut self, now: Instant) {
        self.generation += 1;
        self.background = false;
        self.relisting = false;
        self.relist_again = false;
        self.retry_step = None;
        self.relist_at = None;
        self.deferred_onboarding = None;
        self.begin_at = None;
        self.maybe_new_instance = false;
        // A new instance gets its own confirmation re-list, and agrees on its own lists.
        self.confirm_planned = false;
        self.short_seen = None;
        self.truncation_relists = 0;
        self.needs_agreement = false;
        self.unconfirmed = None;
        self.agreement_relists = 0;
        self.changed_while_onboarding = false;
        self.onboarding = onboarding::Listing::default();
        self.info_mut().onboarding_error = None;
        self.info_mut().onboarding = OnboardingStatus { attempt: 1, max_attempts: self.cfg.onboarding_attempts.max(1), last_error: None, failed: false };
        self.info_mut().bump();
        self.send_initialize(now);
    }

    fn send_initialize(&mut self, now: Instant) {
        self.info_mut().set_phase(Phase::Initializing);
        let params = json!({
            "protocolVersion": "2024-11-05",
            "capabilities": {"vision": {"url": self.cfg.vision_url, "token": self.vision_token}},
            "clientInfo": {"name": "mcpdev", "version": env!("CARGO_PKG_VERSION")},
        });
        self.send_request("initialize", Some(params), Origin::Initialize(self.generation), self.cfg.onboarding_timeout, now);
    }

    fn list_tools(&mut self, now: Instant) {
        if !self.background {
            self.info_mut().set_phase(Phase::Listing);
        }
        let params = json!({"cursor": self.onboarding.cursor(), "withUserTools": true});
        self.send_request("tools/list", Some(params), Origin::ListPage(self.generation), self.cfg.onboarding_timeout, now);
    }

    /// A refresh asked for by a caller: re-list a ready device, start a failed onboarding over;
    /// while onboarding runs, its end answers the caller.
    fn refresh(&mut self, now: Instant) {
        if self.info.onboarding.failed || self.info.phase == Phase::AwaitingHello {
            self.start_onboarding(now);
        } else if self.info.phase == Phase::Ready {
            self.start_relist(now);
        }
    }

    /// Lists the tools of a ready device again in the background (the phase stays `ready`); a
    /// request while a listing runs gives one more listing after it.
    fn start_relist(&mut self, now: Instant) {
        if self.info.phase != Phase::Ready || self.info.onboarding.failed {
            // Onboarding is under way (its listing is about to read the new list anyway) or gave
            // up (only a hello or a refresh starts it over).
            self.relist_again = self.info.phase != Phase::Ready;
            return;
        }
        if self.relisting {
            self.relist_again = true;
            return;
        }
        if let Some(next) = self.last_relist.map(|at| at + self.cfg.min_relist_interval)
            && now < next
        {
            // Too soon after the last one: one re-list then, whatever asks meanwhile.
            self.relist_at = Some(self.relist_at.map_or(next, |at| at.min(next)));
            return;
        }
        self.last_relist = Some(now);
        self.generation += 1;
        self.background = true;
        self.relisting = true;
        self.onboarding = onboarding::Listing::default();
        self.list_tools(now);
    }

    fn on_list_page(&mut self, result: &Value, now: Instant) {
        match self.onboarding.add_page(result, &self.cfg) {
            onboarding::Step::Next => self.list_tools(now),
            onboarding::Step::Done { warning } => {
                if let Some(w) = warning {
                    self.warn_listing(w);
                }
                let tools = self.onboarding.take_tools();
                if tools.is_empty() && !self.background && self.onboarding.schedule_retry(now, &self.cfg) {
                    self.needs_agreement = true;
                    self.info_mut().set_phase(Phase::Listing);
                    return;
                }
                let (full_page, size) = self.onboarding.ended_on_a_full_page(self.page_size as usize);
                if let Some(n) = size {
                    self.page_size = u32::try_from(n).unwrap_or(u32::MAX);
                }
                let marks = self.onboarding.take_marks();
                self.onboarding.finish();
                let settled = if self.background { self.relist_done(tools, marks, now) } else { self.first_list_done(tools, marks, full_page, now) };
                if settled {
                    self.answer_waiters(None);
                }
                if std::mem::take(&mut self.relist_again) {
                    self.start_relist(now);
                }
            }
        }
    }

    /// The end of onboarding: ready at once (one confirmation re-list planned), or, after an
    /// onboarding that needed a retry, once two listings in a row agree. False while a list waits
    /// for its agreement.
    fn first_list_done(&mut self, tools: Vec<ToolEntry>, marks: Vec<onboarding::PageMark>, full_page: bool, now: Instant) -> bool {
        if !self.needs_agreement
            && let Some(why) = self.looks_cut_short(tools.len(), full_page)
        {
            tracing::info!(device = %self.info.device_id, tools = tools.len(), "the first list looks cut short ({why}); listing again before the device is ready");
            self.needs_agreement = true;
        }
        self.changed_while_onboarding = false;
        if self.needs_agreement {
            let agreed = self.unconfirmed.take().is_some_and(|before| tool_list::same(&before, &tools));
            if !agreed && self.agreement_relists < self.cfg.max_relists {
                self.agreement_relists += 1;
                tracing::debug!(device = %self.info.device_id, tools = tools.len(), "onboarding needed a retry: listing again until two listings agree");
                self.unconfirmed = Some(tools);
                self.onboarding = onboarding::Listing::default();
                self.retry_step = Some((now + self.cfg.agreement_relist, Planned::ListPage));
                return false;
            }
            if !agreed {
                let warning = format!("no two listings in a row agreed ({} listings); took the last, {} tools", self.agreement_relists + 1, tools.len());
                if may_log(Kind::Device, &self.info.device_id) {
                    tracing::warn!(device = %self.info.device_id, "{warning}");
                }
                self.info_mut().tools_warning = Some(warning.clone());
                self.emit(Event::Warning { message: warning });
            }
            // Agreed: that was the confirmation.
            self.confirm_planned = true;
        }
        let changed = self.info.phase_was_ready_once;
        self.info_mut().set_tools(tools);
        self.info_mut().set_tool_pages(marks);
        self.info_mut().set_phase(Phase::Ready);
        // From now on this session's own list is what a later one is held against.
        self.known_tools = 0;
        let count = self.info.tools.len();
        self.emit(if changed { Event::ToolsChanged { tools: count } } else { Event::Ready { tools: count } });
        self.info_mut().phase_was_ready_once = true;
        if let Some(after) = self.cfg.confirm_relist
            && !self.confirm_planned
        {
            self.confirm_planned = true;
            self.relist_at = Some(now + after);
        }
        true
    }

    /// A background re-list finished: a shorter list is believed only when two agree on it.
    /// False while a shorter list waits for its confirmation.
    fn relist_done(&mut self, tools: Vec<ToolEntry>, marks: Vec<onboarding::PageMark>, now: Instant) -> bool {
        self.relisting = false;
        self.background = false;
        let (before, after) = (self.info.tools.len(), tools.len());
        if after < before && self.short_seen != Some(after) && self.truncation_relists < self.cfg.max_relists {
            self.truncation_relists += 1;
            self.short_seen = Some(after);
            if may_log(Kind::Onboarding, &self.info.device_id) {
            tracing::info!(device = %self.info.device_id, "tools/list gave {after} tools after {before}; listing again to tell a truncated list from a shorter one");
            }
            self.relist_at = Some(now + Duration::from_secs(1));
            return false;
        }
        self.short_seen = None;
        let same = tool_list::same(&tools, &self.info.tools);
        if !same {
            self.info_mut().set_tools(tools);
            self.info_mut().set_tool_pages(marks);
            self.emit(Event::ToolsChanged { tools: after });
        }
        true
    }

    /// Why a first list (the one that would make the device `ready`) looks cut short, if it
    /// does: its last page is exactly as long as a page the device sent with a `nextCursor` (a
    /// cache answering with the pages it has so far), the device said its tools changed while
    /// they were being listed, or it is shorter than the list the hub knew for this device
    /// before (this session's earlier onboarding, or its earlier connection).
    fn looks_cut_short(&self, tools: usize, full_page: bool) -> Option<String> {
        if full_page {
            return Some("its last page, without a nextCursor, is as long as a page the device sent with one".into());
        }
        if self.changed_while_onboarding {
            return Some("the device sent tools/list_changed while it was being listed".into());
        }
        let before = if self.info.phase_was_ready_once { self.info.tools.len() } else { 0 }.max(self.known_tools as usize);
        (tools < before).then(|| format!("{tools} tools, fewer than the {before} this device listed before"))
    }

    /// A cap or a device quirk cut the listing short: warn (a cap is logged once per session).
    fn warn_listing(&mut self, warning: String) {
        if self.onboarding.capped() {
            if !self.cap_logged {
                self.cap_logged = true;
                if may_log(Kind::Device, &self.info.device_id) {
                    tracing::warn!(device = %self.info.device_id, "{warning}");
                }
            }
            self.info_mut().tools_warning = Some(warning.clone());
            self.info_mut().bump();
        }
        self.emit(Event::Warning { message: warning });
    }

    /// Answers every refresh waiter with the tool list as it is now.
    fn answer_waiters(&mut self, refresh_error: Option<&str>) {
        if self.waiters.is_empty() {
            return;
        }
        let mut answer = json!({"tools": self.info.tools});
        if let Some(e) = &self.info.onboarding_error {
            answer["onboarding_error"] = json!(e);
        }
        if let Some(e) = &self.info.tools_warning {
            answer["tools_warning"] = json!(e);
        }
        if let Some(e) = refresh_error {
            answer["refresh_error"] = json!(e);
        }
        let answer = RawResult::from_value(&answer);
        for w in std::mem::take(&mut self.waiters) {
            self.out.push(Output::Reply { ticket: w.ticket, outcome: Ok(answer.clone()) });
        }
    }

    /// An onboarding step failed: send it again after a backoff, or give up when the attempts
    /// are spent. A failed background re-list keeps the tools listed before.
    fn step_failed(&mut self, origin: Origin, error: String, now: Instant) {
        let (step, planned) = match origin {
            Origin::Initialize(_) => ("initialize".to_string(), Planned::Initialize),
            _ => (format!("tools/list page {}", self.onboarding.page()), Planned::ListPage),
        };
        let what = format!("{step}: {error}");
        if self.background {
            self.background = false;
            self.relisting = false;
            let message = format!("listing the tools again failed at {what}; kept the {} tools listed before", self.info.tools.len());
            self.emit(Event::Warning { message: message.clone() });
            self.answer_waiters(Some(&message));
            return;
        }
        let status = &mut std::sync::Arc::make_mut(&mut self.info).onboarding;
        status.last_error = Some(what.clone());
        if status.attempt < status.max_attempts {
            let delay = self.cfg.retry_backoff.get(status.attempt as usize - 1).or(self.cfg.retry_backoff.last()).copied().unwrap_or_default();
            status.attempt += 1;
            let (attempt, of) = (status.attempt, status.max_attempts);
            self.info_mut().bump();
            self.needs_agreement = true;
            self.retry_step = Some((now + delay, planned));
            self.emit(Event::OnboardingRetry { attempt, of, error: what, retry_in_ms: delay.as_millis() as u64 });
            return;
        }
        status.failed = true;
        let attempts = status.attempt;
        let message = format!("onboarding failed at {what} ({attempts} attempts)");
        if may_log(Kind::Onboarding, &self.info.device_id) {
            tracing::warn!(device = %self.info.device_id, "{message}");
        }
        // Keep what a listing that failed part-way found, unless an earlier list had more.
        let partial = self.onboarding.take_tools();
        if partial.len() > self.info.tools.len() {
            self.info_mut().set_tools(partial);
        }
        self.info_mut().onboarding_error = Some(message.clone());
        self.info_mut().set_phase(Phase::Ready);
        self.info_mut().bump();
        self.emit(Event::OnboardingFailed { error: message, attempts });
        self.answer_waiters(None);
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
        self.send_payload(&OutgoingRequest { jsonrpc: "2.0", id, method, params: params.as_ref() }, now);
    }

    /// Sends a JSON-RPC payload in an `mcp` envelope, written straight from `payload`; a tree of
    /// it is built only for a trace.
    fn send_payload(&mut self, payload: &impl serde::Serialize, now: Instant) {
        let text = envelope::mcp_text(&self.info.session_id, payload);
        if self.trace {
            let payload = serde_json::to_value(payload).unwrap_or_default();
            self.emit(Event::Traffic { direction: Direction::Out, payload: events::cut_for_viewers(&payload, text.len(), &text), latency_ms: None });
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
mod tests;
