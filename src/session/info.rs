//! What the hub knows about a device: identity, hello, serverInfo, tools, counters.

use std::hash::Hasher;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;
use serde_json::Value;
use serde_json::value::RawValue;

use super::interned::{Content, Interned};
use super::tool_list::{ToolEntry, ToolList};
use crate::wire::identity::Identity;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    AwaitingHello,
    Initializing,
    Listing,
    Ready,
    Disconnected,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Counters {
    pub frames_in: u64,
    pub frames_out: u64,
    pub binary_frames: u64,
    pub binary_bytes: u64,
    pub malformed: u64,
    pub late_replies: u64,
    pub timeouts: u64,
    /// Device requests and hellos left unanswered because the device sent too many per second.
    pub unanswered: u64,
}

/// How onboarding (initialize, notifications/initialized, every tools/list page) is going.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct OnboardingStatus {
    /// The attempt under way or last made, counted from 1 (0: not started). A failed step
    /// (no answer in time, an error, a reply with neither result nor error) costs one attempt.
    pub attempt: u32,
    /// Attempts allowed before giving up.
    pub max_attempts: u32,
    /// Why the last failed step failed, naming the step.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// Every attempt failed; the hub gave up for now (it onboards the device again after 30 s,
    /// 60 s, 120 s, then every 5 min; a new hello or `tools list --refresh` starts over at once).
    pub failed: bool,
}

/// A snapshot-able description of one connected device.
#[derive(Debug, Clone, Serialize)]
pub struct DeviceInfo {
    pub device_id: String,
    pub client_id: Option<String>,
    /// `websocket`, `mqtt`, or `remote` (another hub's device, whatever it said).
    pub transport: &'static str,
    /// Where the device connects from: its IP address and port over WebSocket, the broker and its
    /// client id over MQTT (as the link saw it; absent for a device with no network peer).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    pub protocol_version: u8,
    pub session_id: String,
    pub phase: Phase,
    pub hello: Option<Arc<RawValue>>,
    pub mcp_protocol_version: Option<String>,
    pub server_info: Option<Arc<RawValue>>,
    pub capabilities: Option<Arc<RawValue>>,
    pub tools: ToolList,
    /// How the device paged its tools when it listed them in more than one page: the tools on
    /// each page and the `nextCursor` it gave (absent for a list of one page).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_pages: Option<Arc<[super::onboarding::PageMark]>>,
    /// Set when onboarding gave up: "onboarding failed at tools/list page 2: no answer within 10s".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub onboarding_error: Option<String>,
    pub onboarding: OnboardingStatus,
    /// Set when a cap (tools per device, bytes of the tool list, pages) cut the tool list short.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tools_warning: Option<String>,
    /// What the device posted to the OTA endpoint (board, chip, firmware), if it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub system_info: Option<Arc<RawValue>>,
    /// The upstream voice backend the hub relays this device to (`serve --upstream`), as
    /// `host:port`; absent for a device that talks to the hub alone.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upstream: Option<Box<str>>,
    /// Unix time in milliseconds.
    pub connected_at_ms: u64,
    pub last_seen_ms: u64,
    pub counters: Counters,
    #[serde(skip)]
    pub(super) phase_was_ready_once: bool,
    /// Bumped on every change a CLI can see (hello, phase, tools, onboarding state, warnings);
    /// not on counters or `last_seen_ms`.
    #[serde(skip)]
    version: u64,
}

/// The wall clock, in unix milliseconds.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// What the device said, kept as text. Shared (`Arc`): the description a link publishes is a
/// copy of the session's, and these are its largest parts.
fn raw(v: &Value) -> Option<Arc<RawValue>> {
    RawValue::from_string(v.to_string()).ok().map(Arc::from)
}

/// What devices of one firmware say alike (hello, `serverInfo`, `capabilities`), kept once for
/// all of them ([`super::interned`]).
static SAID_ALIKE: Interned<RawValue> = Interned::new();

impl Content for RawValue {
    fn hash_content(&self, h: &mut dyn Hasher) {
        h.write(self.get().as_bytes());
    }

    fn same_content(&self, other: &Self) -> bool {
        self.get() == other.get()
    }
}

/// [`raw`], shared with every device that said the same.
fn raw_alike(v: &Value) -> Option<Arc<RawValue>> {
    raw(v).map(|r| SAID_ALIKE.share(r))
}

impl DeviceInfo {
    pub fn new(identity: Identity, transport: &str, session_id: &str) -> Self {
        let now = now_ms();
        Self {
            device_id: identity.device_id,
            client_id: identity.client_id,
            transport: match transport {
                "websocket" => "websocket",
                "mqtt" => "mqtt",
                _ => "remote",
            },
            address: None,
            protocol_version: identity.protocol_version,
            session_id: session_id.to_string(),
            phase: Phase::AwaitingHello,
            hello: None,
            mcp_protocol_version: None,
            server_info: None,
            capabilities: None,
            tools: ToolList::default(),
            tool_pages: None,
            onboarding_error: None,
            onboarding: OnboardingStatus::default(),
            tools_warning: None,
            system_info: None,
            upstream: None,
            connected_at_ms: now,
            last_seen_ms: now,
            counters: Counters::default(),
            phase_was_ready_once: false,
            version: 0,
        }
    }

    /// A counter that changes whenever something a CLI can see changed (hello, phase, tools,
    /// onboarding state, warnings): a link can publish a new snapshot only when it moved.
    /// Counters and `last_seen_ms` do not bump it.
    pub fn version(&self) -> u64 {
        self.version
    }

    pub(super) fn bump(&mut self) {
        self.version += 1;
    }

    pub(super) fn set_phase(&mut self, phase: Phase) {
        if self.phase != phase {
            self.phase = phase;
            self.bump();
        }
    }

    pub(super) fn touch(&mut self) {
        self.last_seen_ms = now_ms();
    }

    pub(super) fn set_system_info(&mut self, info: Option<&Value>) {
        self.system_info = info.and_then(raw);
        self.bump();
    }

    pub(super) fn set_address(&mut self, address: Option<String>) {
        self.address = address;
        self.bump();
    }

    pub(super) fn set_hello(&mut self, hello: &Value) {
        self.hello = raw_alike(hello);
        self.bump();
    }

    pub(super) fn set_initialize(&mut self, result: &Value) {
        self.mcp_protocol_version = result.get("protocolVersion").and_then(Value::as_str).map(str::to_string);
        self.server_info = result.get("serverInfo").and_then(raw_alike);
        self.capabilities = result.get("capabilities").and_then(raw_alike);
        self.bump();
    }

    pub(super) fn set_tools(&mut self, tools: Vec<ToolEntry>) {
        self.tools = ToolList::shared(tools);
        self.bump();
    }

    pub(super) fn set_tool_pages(&mut self, marks: Vec<super::onboarding::PageMark>) {
        self.tool_pages = (!marks.is_empty()).then(|| marks.into());
    }

    pub fn tool(&self, name: &str) -> Option<&ToolEntry> {
        self.tools.iter().find(|t| t.name == name)
    }

    /// The `serverInfo.name`, if the device gave one.
    pub fn server_name(&self) -> Option<String> {
        let v: Value = serde_json::from_str(self.server_info.as_ref()?.get()).ok()?;
        v.get("name")?.as_str().map(str::to_string)
    }

    /// The device's name as every listing gives it, here or on another hub: its
    /// `serverInfo.name` cut to [`MAX_NAME_CHARS`] characters ([`bounded_name`]). Device text:
    /// passed on as a JSON string, never spliced into anything.
    pub fn name(&self) -> Option<String> {
        self.server_name().map(|n| bounded_name(&n))
    }
}

/// Longest device name a listing gives, in characters.
pub const MAX_NAME_CHARS: usize = 64;

/// `name` cut to its first [`MAX_NAME_CHARS`] characters.
pub fn bounded_name(name: &str) -> String {
    name.chars().take(MAX_NAME_CHARS).collect()
}
