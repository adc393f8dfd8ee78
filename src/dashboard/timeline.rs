//! What the dashboard remembers of each device beyond its description: where it connected from
//! and its latest lifecycle and onboarding events (the device page's timeline), fed by the hub's
//! event broadcast.
//!
//! Rules it enforces: bounded in every direction: at most [`PER_DEVICE`] events per device and
//! [`MAX_DEVICES`] devices (the least recently heard-of goes first); traffic and notifications are
//! not kept (the traffic pane streams them); a watcher that falls behind notes how many events it
//! missed instead of stopping. An event is kept as the hub broadcast it (a shared pointer to
//! it), and turned into JSON only when the page asks: a fleet's onboarding events held as JSON
//! trees cost about 2.5 KB per device.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use serde::Serialize;

use crate::hub::Hub;
use crate::links::handle::{DeviceEvent, LinkEvent, Lifecycle};

/// Events kept per device.
pub const PER_DEVICE: usize = 40;
/// Devices remembered.
pub const MAX_DEVICES: usize = 20_000;

#[derive(Debug, Clone, Serialize)]
pub struct Entry {
    /// Unix ms.
    pub at_ms: u64,
    /// The event, serialized as the control API's `watch` sends it.
    pub event: Arc<DeviceEvent>,
}

#[derive(Default)]
struct Book {
    /// By Device-Id (the events' own, shared): its last connection with an address (the event
    /// itself, which holds the address, kept even once it is no longer among the last events),
    /// its events, and when it was last heard of.
    devices: HashMap<Arc<str>, Device>,
    tick: u64,
}

/// What the timeline keeps of one device: its last connection with an address, its events, and
/// when it was last heard of.
type Device = (Option<Arc<DeviceEvent>>, VecDeque<Entry>, u64);

#[derive(Default)]
pub struct Timeline {
    book: Mutex<Book>,
}

fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// The address a connection event says the device came from.
fn address(event: &DeviceEvent) -> Option<&str> {
    match &event.event {
        LinkEvent::Link(Lifecycle::Connected { remote, .. }) => remote.as_deref(),
        _ => None,
    }
}

/// Whether the timeline keeps this kind of event.
fn kept(name: &str) -> bool {
    matches!(name, "connected" | "disconnected" | "hello" | "ready" | "tools_changed" | "onboarding_retry" | "onboarding_failed" | "warning" | "malformed" | "lagged")
}

impl Timeline {
    fn lock(&self) -> std::sync::MutexGuard<'_, Book> {
        // Nothing under this lock can panic; a poisoned one is still consistent.
        self.book.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts following the hub's events.
    pub fn follow(self: &Arc<Self>, hub: &Arc<Hub>) {
        let mut events = hub.registry.events.subscribe();
        let me = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                let ev = match events.recv().await {
                    Ok(ev) => ev,
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                        tracing::debug!(skipped = n, "the dashboard's timeline fell behind the hub's events");
                        continue;
                    }
                    Err(_) => return,
                };
                let Some(me) = me.upgrade() else { return };
                let name = ev.event.name();
                if !kept(name) {
                    continue;
                }
                me.add(ev);
            }
        });
    }

    fn add(&self, event: Arc<DeviceEvent>) {
        let device_id = &*event.device_id;
        let mut b = self.lock();
        b.tick += 1;
        let tick = b.tick;
        if !b.devices.contains_key(device_id) && b.devices.len() >= MAX_DEVICES {
            // The least recently heard-of device goes (a scan, once per new device beyond the cap).
            if let Some(oldest) = b.devices.iter().min_by_key(|(_, (_, _, t))| *t).map(|(k, _)| k.clone()) {
                b.devices.remove(&oldest);
            }
        }
        let entry = b.devices.entry(event.device_id.clone()).or_default();
        if address(&event).is_some() {
            entry.0 = Some(event.clone());
        }
        if entry.1.len() >= PER_DEVICE {
            entry.1.pop_front();
        }
        entry.1.push_back(Entry { at_ms: now_ms(), event });
        entry.2 = tick;
    }

    /// The address a device last connected from.
    pub fn remote(&self, device_id: &str) -> Option<String> {
        let connected = self.lock().devices.get(device_id).and_then(|d| d.0.clone())?;
        address(&connected).map(str::to_string)
    }

    /// A device's kept events, oldest first.
    pub fn events(&self, device_id: &str) -> Vec<Entry> {
        self.lock().devices.get(device_id).map(|d| d.1.iter().cloned().collect()).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(event: Lifecycle) -> Arc<DeviceEvent> {
        Arc::new(DeviceEvent { device_id: "d".into(), event: LinkEvent::Link(event) })
    }

    #[test]
    fn a_device_keeps_its_latest_events_and_its_address() {
        let t = Timeline::default();
        t.add(event(Lifecycle::Connected { transport: "websocket", client_id: None, remote: Some("10.0.0.2:5000".into()) }));
        // A connection without an address (an in-process device) does not erase the last one.
        t.add(event(Lifecycle::Connected { transport: "websocket", client_id: None, remote: None }));
        for i in 0..PER_DEVICE + 5 {
            t.add(event(Lifecycle::Disconnected { reason: i.to_string() }));
        }
        let ev = t.events("d");
        assert_eq!(ev.len(), PER_DEVICE);
        // As the page reads it: the event's JSON, as `watch` sends it.
        let last = serde_json::to_value(ev.last().unwrap()).unwrap();
        assert_eq!(last["event"]["event"], "disconnected");
        assert_eq!(last["event"]["reason"], (PER_DEVICE + 4).to_string());
        assert_eq!(t.remote("d").as_deref(), Some("10.0.0.2:5000"));
        assert!(t.events("other").is_empty());
        assert!(kept("onboarding_failed") && !kept("traffic") && !kept("notification"));
    }
}
