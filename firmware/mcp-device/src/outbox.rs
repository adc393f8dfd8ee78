//! Device-initiated JSON-RPC notifications, queued until the transport drains them.

use alloc::collections::VecDeque;
use alloc::string::String;

use crate::json::{push_str_literal, push_value};

/// A bounded queue of notification texts (JSON-RPC, not yet wrapped in an envelope).
/// When full, the oldest is dropped: a device never runs out of memory because nobody listens.
#[derive(Debug)]
pub struct Outbox {
    queue: VecDeque<String>,
    capacity: usize,
    dropped: u32,
}

impl Default for Outbox {
    fn default() -> Self {
        Self::with_capacity(16)
    }
}

impl Outbox {
    pub fn with_capacity(capacity: usize) -> Self {
        Self { queue: VecDeque::new(), capacity: capacity.max(1), dropped: 0 }
    }

    /// Queues `{"jsonrpc":"2.0","method":METHOD,"params":PARAMS}`.
    pub fn notify(&mut self, method: &str, params: &serde_json::Value) {
        let mut s = String::new();
        s.push_str("{\"jsonrpc\":\"2.0\",\"method\":");
        push_str_literal(&mut s, method);
        s.push_str(",\"params\":");
        push_value(&mut s, params);
        s.push('}');
        self.push(s);
    }

    fn push(&mut self, notification: String) {
        if self.queue.len() == self.capacity {
            self.queue.pop_front();
            self.dropped = self.dropped.saturating_add(1);
        }
        self.queue.push_back(notification);
    }

    /// `notifications/state_changed` with `newState`/`oldState` (the shape and order the xiaozhi
    /// docs show) and `what`.
    ///
    /// The params are written as text, not through a `serde_json::Map`: the map's key order
    /// depends on whether some other crate in the build enables serde_json's `preserve_order`,
    /// and the text must not change with the build.
    pub fn state_changed(&mut self, what: &str, old: serde_json::Value, new: serde_json::Value) {
        let mut s = String::new();
        s.push_str("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/state_changed\",\"params\":{\"newState\":");
        push_value(&mut s, &new);
        s.push_str(",\"oldState\":");
        push_value(&mut s, &old);
        s.push_str(",\"what\":");
        push_str_literal(&mut s, what);
        s.push_str("}}");
        self.push(s);
    }

    pub fn pop(&mut self) -> Option<String> {
        self.queue.pop_front()
    }

    pub fn len(&self) -> usize {
        self.queue.len()
    }

    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// How many notifications were dropped because the queue was full.
    pub fn dropped(&self) -> u32 {
        self.dropped
    }
}
