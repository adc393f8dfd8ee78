//! A device's own `notifications/progress`, relayed to the host whose call it is about.
//!
//! Rules:
//! - Only a call whose host sent a `progressToken` asks the device for progress: the hub gives
//!   the device a token of its own (`mcpdev-<n>`, never the host's), in the call's `_meta`, and
//!   routes that token, for that device only, to the host's call while it runs ([`Route`]
//!   removes it however the call ends).
//! - What the device sends is data: its progress becomes the host's on the call's own scale
//!   (between "sent" and "answered", [`super::Stage`]), rising only (a value that does not rise
//!   is dropped, as are non-numbers); its message is passed on, cut to [`MESSAGE_MAX`] chars.
//! - Routes are at most one per call in flight; nothing that can panic runs under the lock.
//! - **Coalesced on the way out** ([`latest`], [`drain`]): a call's reports wait for its host in
//!   one slot that a newer report replaces, never in a queue, so a device that streams progress
//!   faster than its host reads costs the hub one report per call, whatever it sends (issue
//!   45.6). Reports only rise, so the latest says all the skipped ones did; the last one sent
//!   before the call ends is always delivered.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio::sync::watch;

/// Longest device progress message passed on, in chars.
pub const MESSAGE_MAX: usize = 200;

/// What a device reported: progress as a fraction of its total (when it gave one), and its
/// message.
#[derive(Debug, Clone, PartialEq)]
pub struct Reported {
    pub fraction: f64,
    pub message: Option<String>,
}

type Deliver = Arc<dyn Fn(Reported) + Send + Sync>;

/// The routes of the calls in flight that asked for progress.
#[derive(Default)]
pub struct Relay {
    routes: Mutex<HashMap<(String, String), Deliver>>,
}

static NEXT: AtomicU64 = AtomicU64::new(1);

/// One call's route; removed when dropped.
pub struct Route {
    relay: Arc<Relay>,
    key: (String, String),
    /// The token the device is given.
    pub token: String,
}

impl Drop for Route {
    fn drop(&mut self) {
        self.relay.lock().remove(&self.key);
    }
}

impl Relay {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), Deliver>> {
        self.routes.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A route for a call to `device_id`: what the device reports under the route's token goes
    /// to `deliver`.
    pub fn route(self: &Arc<Self>, device_id: &str, deliver: Deliver) -> Route {
        let token = format!("mcpdev-{}", NEXT.fetch_add(1, Ordering::Relaxed));
        let key = (device_id.to_string(), token.clone());
        self.lock().insert(key.clone(), deliver);
        Route { relay: self.clone(), key, token }
    }

    /// A device's `notifications/progress`: to its call's host, if it names a route of this
    /// device.
    pub fn device_progress(&self, device_id: &str, params: &Value) {
        let token = match params.get("progressToken") {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Number(n)) => n.to_string(),
            _ => return,
        };
        let Some(deliver) = self.lock().get(&(device_id.to_string(), token)).cloned() else { return };
        let Some(progress) = params.get("progress").and_then(Value::as_f64).filter(|p| p.is_finite() && *p >= 0.0) else { return };
        let fraction = match params.get("total").and_then(Value::as_f64).filter(|t| t.is_finite() && *t > 0.0) {
            Some(total) => (progress / total).min(1.0),
            // No total: a rising fraction that never reaches 1.
            None => progress / (progress + 1.0),
        };
        let message = params.get("message").and_then(Value::as_str).map(|m| m.chars().filter(|c| !c.is_control()).take(MESSAGE_MAX).collect());
        deliver(Reported { fraction, message });
    }
}

/// A call's reports on their way to its host: [`drain`] takes them from the receiver. Sending
/// replaces the report still waiting (if any) rather than queueing behind it.
pub fn latest<T>() -> (watch::Sender<Option<T>>, watch::Receiver<Option<T>>) {
    watch::channel(None)
}

/// Sends each report `rx` holds to the host with `send`, one at a time; reports that came while
/// one was being sent are skipped but the latest. Ends once the sender is gone and its last
/// report sent, or when `send` says the host cannot take any more (false).
pub async fn drain<T: Clone, F: Future<Output = bool>>(mut rx: watch::Receiver<Option<T>>, mut send: impl FnMut(T) -> F) {
    while rx.changed().await.is_ok() {
        let Some(report) = rx.borrow_and_update().clone() else { continue };
        if !send(report).await {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A host that does not read while a device sends 100,000 reports: one waits, the latest;
    /// the host then gets the one it was sending, the latest, and nothing else; the last report
    /// before the sender goes is delivered.
    #[tokio::test]
    async fn reports_for_a_slow_host_are_coalesced_to_the_latest_and_the_last_is_delivered() {
        let (tx, rx) = latest::<u32>();
        let (gate_tx, gate_rx) = tokio::sync::watch::channel(false);
        let got = Arc::new(Mutex::new(Vec::new()));
        let into = got.clone();
        let host = tokio::spawn(drain(rx, move |n| {
            into.lock().unwrap().push(n);
            let mut gate = gate_rx.clone();
            async move {
                // The host is stuck until the test opens the gate.
                let _ = gate.wait_for(|open| *open).await;
                true
            }
        }));
        tx.send_replace(Some(0));
        // The host took report 0 and is stuck sending it.
        while got.lock().unwrap().is_empty() {
            tokio::task::yield_now().await;
        }
        for n in 1..=100_000 {
            tx.send_replace(Some(n));
        }
        assert_eq!(*tx.borrow(), Some(100_000), "one report waits: the latest");
        drop(tx);
        gate_tx.send_replace(true);
        host.await.unwrap();
        assert_eq!(*got.lock().unwrap(), vec![0, 100_000]);
    }

    /// A host that is gone (send says false) ends the drain at once, whatever still comes.
    #[tokio::test]
    async fn a_host_that_is_gone_ends_the_drain() {
        let (tx, rx) = latest::<u32>();
        tx.send_replace(Some(1));
        let sent = Arc::new(Mutex::new(0));
        let count = sent.clone();
        drain(rx, move |_| {
            *count.lock().unwrap() += 1;
            async { false }
        })
        .await;
        tx.send_replace(Some(2));
        assert_eq!(*sent.lock().unwrap(), 1);
    }

    #[test]
    fn only_the_calls_own_device_and_token_reach_it_and_the_route_goes_with_the_call() {
        let relay = Arc::new(Relay::default());
        let got = Arc::new(Mutex::new(Vec::new()));
        let into = got.clone();
        let route = relay.route("dev-a", Arc::new(move |r| into.lock().unwrap().push(r)));
        relay.device_progress("dev-a", &serde_json::json!({"progressToken": route.token, "progress": 1, "total": 4, "message": "step\u{1b}[2J 1"}));
        // Another device with the same token, an unknown token, a bad value: nothing.
        relay.device_progress("dev-b", &serde_json::json!({"progressToken": route.token, "progress": 2}));
        relay.device_progress("dev-a", &serde_json::json!({"progressToken": "mcpdev-0", "progress": 2}));
        relay.device_progress("dev-a", &serde_json::json!({"progressToken": route.token, "progress": "x"}));
        assert_eq!(*got.lock().unwrap(), vec![Reported { fraction: 0.25, message: Some("step[2J 1".into()) }]);
        let token = route.token.clone();
        drop(route);
        relay.device_progress("dev-a", &serde_json::json!({"progressToken": token, "progress": 3}));
        assert_eq!(got.lock().unwrap().len(), 1);
        assert!(relay.lock().is_empty());
    }
}
