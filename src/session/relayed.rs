//! A session whose device is relayed to its own upstream voice backend (`serve --upstream`,
//! [`crate::links::relay`]): the hub watches and calls the device without the upstream noticing.
//!
//! Rules it enforces (`SessionConfig::relayed`):
//! - **The upstream owns the conversation.** A hello is recorded and shown, never answered (the
//!   upstream's server hello reaches the device); the device's requests are not answered; no
//!   keepalive is sent (the upstream's session keeps the link busy, and the device's idle limit is
//!   the upstream's business).
//! - **No `initialize` of the hub's own**: it would hand the device the hub's vision URL in place
//!   of the upstream's. The device's answer to the upstream's `initialize` is recorded instead
//!   ([`Session::observed_initialize`]), and that answer starts the hub's listing, `tools/list` with
//!   the hub's own ids (answers to them never reach the upstream: the relay filters them). A
//!   device whose upstream never initializes it within [`LIST_GRACE`] of its hello is listed then.
//! - Re-lists (`list_changed`, `tools list --refresh`) are `tools/list` alone, within the
//!   session's usual budget.

use std::time::{Duration, Instant};

use serde_json::Value;

use super::{Output, Phase, Session};

/// How long after a relayed device's hello the hub lists its tools without having seen the
/// upstream's `initialize` answered (a backend that does not speak MCP to it, say).
pub const LIST_GRACE: Duration = Duration::from_secs(5);

impl Session {
    /// A relayed device said hello: recorded by the caller; its listing is planned.
    pub(super) fn relayed_hello(&mut self, now: Instant) {
        if self.info.phase == Phase::AwaitingHello {
            self.begin_at(now + LIST_GRACE);
        }
    }

    /// Names the upstream the device is relayed to (`host:port`), shown with the device.
    pub fn set_upstream(&mut self, name: &str) {
        let info = self.info_mut();
        info.upstream = Some(name.into());
        info.bump();
    }

    /// Whether the session pings the device when it was silent for its keepalive period.
    pub(super) fn keeps_alive(&self) -> bool {
        self.info.phase == Phase::Ready && !self.cfg.relayed
    }

    /// The device answered its upstream's `initialize` with `result`: recorded as the device's
    /// (`mcpdev init` shows it), and a device the hub has not listed yet is listed now.
    pub fn observed_initialize(&mut self, result: &Value, now: Instant) -> Vec<Output> {
        self.now = now;
        self.info_mut().set_initialize(result);
        if self.cfg.relayed && self.info.phase == Phase::AwaitingHello {
            self.onboard(now, "first");
        }
        self.drained()
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use serde_json::{Value, json};

    use super::super::{Output, Phase, Session, SessionConfig};
    use crate::wire::identity::Identity;

    fn relayed(now: Instant) -> Session {
        let mut cfg = SessionConfig::new("s1", crate::session::ServerHello::WebSocket);
        cfg.relayed = true;
        cfg.id_base = 1 << 30;
        cfg.confirm_relist = None;
        let identity = Identity { device_id: "aa:bb:cc:dd:ee:01".into(), client_id: Some("c".into()), token: None, protocol_version: 1 };
        Session::new(identity, "websocket", cfg, now)
    }

    fn sent(out: &[Output]) -> Vec<Value> {
        out.iter().filter_map(|o| if let Output::Send(t) = o { serde_json::from_str(t).ok() } else { None }).collect()
    }

    #[test]
    fn a_relayed_session_answers_nothing_and_lists_with_its_own_ids_once_the_upstream_initialized() {
        let now = Instant::now();
        let mut s = relayed(now);
        // The hello is recorded, never answered; a device request is not answered either.
        assert!(sent(&s.on_text(r#"{"type":"hello","version":1,"features":{"mcp":true}}"#, now)).is_empty());
        assert!(s.info().hello.is_some());
        assert!(sent(&s.on_text(r#"{"type":"mcp","payload":{"jsonrpc":"2.0","id":5,"method":"sampling/create"}}"#, now)).is_empty());
        // The device answered the upstream's initialize: recorded, and the hub lists, no initialize.
        let out = sent(&s.observed_initialize(&json!({"protocolVersion": "2024-11-05", "serverInfo": {"name": "dev", "version": "1"}}), now));
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!(out[0]["payload"]["method"], "tools/list");
        let id = out[0]["payload"]["id"].as_i64().unwrap();
        assert!(id > 1 << 30, "the hub's own id range: {id}");
        assert_eq!(s.info().mcp_protocol_version.as_deref(), Some("2024-11-05"));
        let answer = json!({"type": "mcp", "payload": {"jsonrpc": "2.0", "id": id, "result": {"tools": [{"name": "t", "description": "", "inputSchema": {"type": "object"}}]}}});
        s.on_text(&answer.to_string(), now);
        assert_eq!(s.info().phase, Phase::Ready);
        // No keepalive, however long the device is silent; a new voice session's hello is not
        // answered and does not onboard again.
        assert!(s.next_deadline().is_none(), "{:?}", s.next_deadline());
        assert!(sent(&s.on_tick(now + Duration::from_secs(600))).is_empty());
        assert!(sent(&s.on_text(r#"{"type":"hello","version":1,"features":{"mcp":true}}"#, now + Duration::from_secs(601))).is_empty());
    }

    #[test]
    fn a_relayed_device_nobody_initializes_is_listed_after_the_grace() {
        let now = Instant::now();
        let mut s = relayed(now);
        assert!(sent(&s.on_text(r#"{"type":"hello","version":1}"#, now)).is_empty());
        assert!(sent(&s.on_tick(now + super::LIST_GRACE - Duration::from_millis(1))).is_empty());
        let out = sent(&s.on_tick(now + super::LIST_GRACE));
        assert_eq!(out.iter().map(|v| v["payload"]["method"].clone()).collect::<Vec<_>>(), vec![json!("tools/list")]);
    }
}
