//! What watchers see of a device.
//!
//! Rules it enforces: what a device sent reaches watchers (the event ring, `watch`, the dashboard,
//! the MCP notifications resource) whole only up to [`VIEW_MAX_BYTES`] a frame; a bigger frame is
//! shown as its size, its JSON-RPC `id` and `method`, and the first [`VIEW_PREVIEW_CHARS`]
//! characters of its text ([`cut_for_viewers`]), so no watcher makes the hub hold a device's
//! megabytes.

use serde::Serialize;
use serde_json::Value;

/// The biggest frame watchers see whole.
pub const VIEW_MAX_BYTES: usize = 64 * 1024;
/// How much of a bigger frame's text they see.
pub const VIEW_PREVIEW_CHARS: usize = 1024;

/// What watchers are shown of a value a frame of `frame_bytes` carried, whose text is `text`:
/// the value itself when the frame is at most [`VIEW_MAX_BYTES`], else
/// `{"id", "method", "truncated": {"bytes", "preview"}}` (`id` and `method` when the value has
/// them, so a request and its response still pair up).
pub fn cut_for_viewers(value: &Value, frame_bytes: usize, text: &str) -> Box<Value> {
    if frame_bytes <= VIEW_MAX_BYTES {
        return Box::new(value.clone());
    }
    let preview: String = text.chars().take(VIEW_PREVIEW_CHARS).collect();
    let mut out = serde_json::Map::new();
    for key in ["jsonrpc", "id", "method"] {
        if let Some(v) = value.get(key).filter(|v| !v.is_object() && !v.is_array()) {
            let short = match v.as_str() {
                Some(s) if s.len() > 256 => Value::String(s.chars().take(256).collect()),
                _ => v.clone(),
            };
            out.insert(key.into(), short);
        }
    }
    out.insert("truncated".into(), serde_json::json!({"bytes": frame_bytes, "preview": preview}));
    Box::new(Value::Object(out))
}

/// The length of a value's JSON, without writing it anywhere.
fn json_len(v: &impl Serialize) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0 += b.len();
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut c = Count(0);
    let _ = serde_json::to_writer(&mut c, v);
    c.0
}

/// Who sent a frame `watch --traffic` shows: the device, the hub on its own (onboarding,
/// keepalives), a host through the hub (the CLI, an MCP host), or the device's upstream voice
/// backend (a relayed device, [`crate::links::relay`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Peer {
    Device,
    Hub,
    Host,
    Upstream,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// Device to hub.
    In,
    /// Hub to device.
    Out,
}

/// JSON a device sent, kept as its text and shared with the device's description: a hello held
/// as a `Value` tree in every event that carries it cost about 2 KB per device for as long as the
/// dashboard's timeline keeps the event.
#[derive(Debug, Clone, Serialize)]
#[serde(transparent)]
pub struct SharedJson(pub std::sync::Arc<serde_json::value::RawValue>);

impl SharedJson {
    pub fn from_value(v: &Value) -> Self {
        Self(serde_json::value::RawValue::from_string(v.to_string()).expect("a Value is valid JSON").into())
    }
}

impl PartialEq for SharedJson {
    fn eq(&self, other: &Self) -> bool {
        self.0.get() == other.0.get()
    }
}

/// One event of one device's session. Its JSON values are boxed: an event is kept per device
/// by the dashboard's timeline, and an inline `Value` (80 bytes with ordered maps) made every
/// event that size.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    Hello { hello: SharedJson },
    /// Onboarding finished: initialized and every tool listed.
    Ready { tools: usize },
    /// The tool list was listed again (after `notifications/tools/list_changed`, a confirmation
    /// re-list, a list that looked truncated, or `tools list --refresh`) and it changed.
    ToolsChanged { tools: usize },
    /// An onboarding step failed; it is sent again after `retry_in_ms` (attempt `attempt` of `of`).
    OnboardingRetry { attempt: u32, of: u32, error: String, retry_in_ms: u64 },
    /// Every onboarding attempt failed: the hub gave up. `error` names the step.
    OnboardingFailed { error: String, attempts: u32 },
    /// A device-initiated notification.
    Notification { method: String, params: Box<Value> },
    /// A message of another type (`listen`, `abort`, `goodbye`, unknown ones).
    Message { kind: String, message: Box<Value> },
    /// An MCP frame in either direction, with the round trip for replies (only while traced).
    /// `by` says who sent it; towards the device (`out`), a relayed device's upstream too.
    Traffic { direction: Direction, by: Peer, payload: Box<Value>, #[serde(skip_serializing_if = "Option::is_none")] latency_ms: Option<f64> },
    /// A frame that could not be read; the session goes on.
    Malformed { reason: String, text: String },
    /// A reply nobody waits for any more (after a timeout or cancel): dropped.
    LateReply { id: Box<Value> },
    Warning { message: String },
}

impl Event {
    /// Bytes the event's own data takes as JSON (its strings and values).
    pub fn weight(&self) -> usize {
        match self {
            Event::Hello { hello } => hello.0.get().len(),
            Event::Ready { .. } | Event::ToolsChanged { .. } => 0,
            Event::OnboardingRetry { error, .. } | Event::OnboardingFailed { error, .. } => error.len(),
            Event::Notification { method, params } => method.len() + json_len(params),
            Event::Message { kind, message } => kind.len() + json_len(message),
            Event::Traffic { payload, .. } => json_len(payload),
            Event::Malformed { reason, text } => reason.len() + text.len(),
            Event::LateReply { id } => json_len(id),
            Event::Warning { message } => message.len(),
        }
    }

    /// The `event` field it is serialized with, without serializing it.
    pub fn name(&self) -> &'static str {
        match self {
            Event::Hello { .. } => "hello",
            Event::Ready { .. } => "ready",
            Event::ToolsChanged { .. } => "tools_changed",
            Event::OnboardingRetry { .. } => "onboarding_retry",
            Event::OnboardingFailed { .. } => "onboarding_failed",
            Event::Notification { .. } => "notification",
            Event::Message { .. } => "message",
            Event::Traffic { .. } => "traffic",
            Event::Malformed { .. } => "malformed",
            Event::LateReply { .. } => "late_reply",
            Event::Warning { .. } => "warning",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_big_frame_reaches_viewers_as_its_size_id_method_and_a_preview() {
        let small = json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {"data": "hi"}});
        assert_eq!(*cut_for_viewers(&small, 100, &small.to_string()), small);
        let data = "y".repeat(VIEW_MAX_BYTES * 2);
        let big = json!({"jsonrpc": "2.0", "id": 7, "method": "m".repeat(10_000), "params": {"data": data}});
        let text = big.to_string();
        let cut = cut_for_viewers(&big, text.len(), &text);
        assert_eq!(cut["id"], 7);
        assert_eq!(cut["method"].as_str().unwrap().len(), 256, "a long method is cut too");
        assert_eq!(cut["truncated"]["bytes"], text.len());
        assert_eq!(cut["truncated"]["preview"].as_str().unwrap().chars().count(), VIEW_PREVIEW_CHARS);
        let ev = Event::Traffic { direction: Direction::In, by: Peer::Device, payload: cut, latency_ms: None };
        assert!(ev.weight() < 4 * VIEW_PREVIEW_CHARS, "{}", ev.weight());
    }

    #[test]
    fn every_events_name_is_the_one_it_is_serialized_with() {
        let events = [
            Event::Hello { hello: SharedJson::from_value(&json!({})) },
            Event::Ready { tools: 1 },
            Event::ToolsChanged { tools: 1 },
            Event::OnboardingRetry { attempt: 1, of: 2, error: String::new(), retry_in_ms: 1 },
            Event::OnboardingFailed { error: String::new(), attempts: 1 },
            Event::Notification { method: String::new(), params: Box::new(json!({})) },
            Event::Message { kind: String::new(), message: Box::new(json!({})) },
            Event::Traffic { direction: Direction::In, by: Peer::Upstream, payload: Box::new(json!({})), latency_ms: None },
            Event::Malformed { reason: String::new(), text: String::new() },
            Event::LateReply { id: Box::new(json!(1)) },
            Event::Warning { message: String::new() },
        ];
        for e in events {
            assert_eq!(serde_json::to_value(&e).unwrap()["event"], e.name(), "{e:?}");
        }
    }
}
