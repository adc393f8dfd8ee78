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
