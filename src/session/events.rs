//! What watchers see of a device.

use serde::Serialize;
use serde_json::Value;

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
    Traffic { direction: Direction, payload: Box<Value>, #[serde(skip_serializing_if = "Option::is_none")] latency_ms: Option<f64> },
    /// A frame that could not be read; the session goes on.
    Malformed { reason: String, text: String },
    /// A reply nobody waits for any more (after a timeout or cancel): dropped.
    LateReply { id: Box<Value> },
    Warning { message: String },
}

impl Event {
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
    fn every_events_name_is_the_one_it_is_serialized_with() {
        let events = [
            Event::Hello { hello: SharedJson::from_value(&json!({})) },
            Event::Ready { tools: 1 },
            Event::ToolsChanged { tools: 1 },
            Event::OnboardingRetry { attempt: 1, of: 2, error: String::new(), retry_in_ms: 1 },
            Event::OnboardingFailed { error: String::new(), attempts: 1 },
            Event::Notification { method: String::new(), params: Box::new(json!({})) },
            Event::Message { kind: String::new(), message: Box::new(json!({})) },
            Event::Traffic { direction: Direction::In, payload: Box::new(json!({})), latency_ms: None },
            Event::Malformed { reason: String::new(), text: String::new() },
            Event::LateReply { id: Box::new(json!(1)) },
            Event::Warning { message: String::new() },
        ];
        for e in events {
            assert_eq!(serde_json::to_value(&e).unwrap()["event"], e.name(), "{e:?}");
        }
    }
}
