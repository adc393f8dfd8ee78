//! Who to tell when devices change: open MCP sessions (legacy, by their peer) and
//! `subscriptions/listen` streams (2026-07-28), each with the endpoint scope it came through.
//!
//! Rules (what a device or a slow MCP host can make the hub hold or send):
//! - **`list_changed` at most once a second.** Devices that join, leave or change their tools
//!   mark their scope; the marks are sent out at most once per [`FANOUT_EVERY`], one
//!   `notifications/tools/list_changed` per concerned session whatever the number of changes.
//!   `/mcp` in its fleet face is concerned only when the face switches ([`super::fleet`]).
//! - **Bounded per session.** Each session has a mailbox with one send under way at most; what
//!   comes meanwhile is coalesced: one `list_changed`, and each resource URI once (at most
//!   [`MAILBOX_URIS`]; more are dropped and counted). A send that does not complete within
//!   [`SEND_DEADLINE`] (a host that stopped reading) is given up, so a stuck session holds one
//!   mailbox and delays nobody else.
//! - **Subscriptions** are kept per session, each URI once, at most [`MAX_SUBSCRIPTIONS`].
//! - **Ended sessions** are dropped from the tables on every fan-out and whenever the table has
//!   doubled since the last sweep; a device's kept notifications go when it disconnects.
//! - **Kept notifications are bounded in bytes**: [`RECENT`] per device, at most
//!   [`RECENT_BYTES`] (their JSON) in all; the oldest go first, the sending device's, then
//!   any other's. A notification over [`crate::session::VIEW_MAX_BYTES`] is kept as its size and a
//!   preview (cut by the session).

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rmcp::RoleServer;
use rmcp::model::ResourceUpdatedNotificationParam;
use rmcp::service::{Peer, SubscriptionSink};
use serde_json::Value;

use super::Scope;
use crate::hub::Hub;
use crate::links::handle::{LinkEvent, Lifecycle};
use crate::session::Event;

/// How many device notifications each device's resource keeps.
const RECENT: usize = 50;
/// Bytes of notifications (their JSON) the resources keep in all.
pub const RECENT_BYTES: usize = 8 << 20;
/// `list_changed` goes out at most this often.
pub const FANOUT_EVERY: Duration = Duration::from_secs(1);
/// Resource URIs one session's mailbox holds while a send to it is under way.
pub const MAILBOX_URIS: usize = 256;
/// Resource subscriptions one session may hold.
pub const MAX_SUBSCRIPTIONS: usize = 4096;
/// A notification not taken by its session within this is given up.
pub const SEND_DEADLINE: Duration = Duration::from_secs(5);

/// Where notifications go: a legacy session's peer, or a listen stream.
#[derive(Clone)]
enum Target {
    Peer(Peer<RoleServer>),
    Sink(SubscriptionSink),
}

/// One notification.
enum Note {
    ListChanged,
    Updated(String),
}

impl Target {
    fn closed(&self) -> bool {
        match self {
            Target::Peer(p) => p.is_transport_closed(),
            Target::Sink(_) => false,
        }
    }

    async fn send(&self, note: Note) {
        // A session that ended meanwhile is dropped at the next sweep.
        match (self, note) {
            (Target::Peer(p), Note::ListChanged) => drop(p.notify_tool_list_changed().await),
            (Target::Peer(p), Note::Updated(uri)) => drop(p.notify_resource_updated(ResourceUpdatedNotificationParam::new(uri)).await),
            (Target::Sink(s), Note::ListChanged) => drop(s.notify_tool_list_changed().await),
            (Target::Sink(s), Note::Updated(uri)) => drop(s.notify_resource_updated(uri).await),
        }
    }
}

/// What waits for one session while a send to it is under way.
#[derive(Default)]
struct Mailbox {
    busy: bool,
    list_changed: bool,
    updated: Vec<String>,
    dropped: u64,
}

impl Mailbox {
    fn add(&mut self, note: Note) {
        match note {
            Note::ListChanged => self.list_changed = true,
            Note::Updated(uri) if self.updated.contains(&uri) => {}
            Note::Updated(_) if self.updated.len() >= MAILBOX_URIS => self.dropped += 1,
            Note::Updated(uri) => self.updated.push(uri),
        }
    }

    fn take(&mut self) -> Vec<Note> {
        let mut notes: Vec<Note> = std::mem::take(&mut self.updated).into_iter().map(Note::Updated).collect();
        if std::mem::take(&mut self.list_changed) {
            notes.push(Note::ListChanged);
        }
        notes
    }
}

/// One session or listen stream.
struct Outlet {
    scope: Scope,
    target: Target,
    mailbox: Mutex<Mailbox>,
    subscribed: Mutex<HashSet<String>>,
}

impl Outlet {
    fn new(scope: Scope, target: Target) -> Arc<Self> {
        Arc::new(Self { scope, target, mailbox: Mutex::default(), subscribed: Mutex::default() })
    }

    /// Queues a notification; starts a sender when none runs.
    fn deliver(self: &Arc<Self>, note: Note) {
        let start = {
            let mut m = lock(&self.mailbox);
            m.add(note);
            !std::mem::replace(&mut m.busy, true)
        };
        if start {
            let me = self.clone();
            tokio::spawn(async move { me.drain().await });
        }
    }

    async fn drain(&self) {
        loop {
            let notes = {
                let mut m = lock(&self.mailbox);
                let notes = m.take();
                if notes.is_empty() {
                    m.busy = false;
                    if m.dropped > 0 {
                        tracing::debug!(dropped = m.dropped, "an MCP session did not keep up with resource updates; some were coalesced away");
                        m.dropped = 0;
                    }
                    return;
                }
                notes
            };
            for note in notes {
                if tokio::time::timeout(SEND_DEADLINE, self.target.send(note)).await.is_err() {
                    tracing::debug!("an MCP session did not take a notification within {SEND_DEADLINE:?}; given up");
                }
            }
        }
    }

    fn concerned(&self, all: bool, devices: &HashSet<String>) -> bool {
        match &self.scope {
            Scope::All => all,
            Scope::Device(id) => devices.contains(id),
        }
    }
}

/// Sessions and listen streams, by key.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum Key {
    Session(u64),
    Listener(u64),
}

#[derive(Default)]
struct Outlets {
    by_key: HashMap<Key, Arc<Outlet>>,
    sweep_at: usize,
}

impl Outlets {
    fn insert(&mut self, key: Key, outlet: Arc<Outlet>) {
        if self.by_key.len() >= self.sweep_at {
            self.by_key.retain(|_, o| !o.target.closed());
            self.sweep_at = (self.by_key.len() * 2).max(64);
        }
        self.by_key.insert(key, outlet);
    }
}

#[derive(Default)]
pub struct Notifier {
    outlets: Mutex<Outlets>,
    recent: Mutex<Recent>,
    next_listener: std::sync::atomic::AtomicU64,
    /// How many `list_changed` fan-outs went out (for tests).
    fanouts: std::sync::atomic::AtomicU64,
    /// Devices' own progress, to the calls that asked for it.
    pub progress: Arc<super::progress::Relay>,
}

// Nothing that can panic runs under these locks.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Notifier {
    /// An MCP session (`session` tells one from another) to tell of changes in its scope.
    pub fn add_peer(&self, scope: Scope, session: u64, peer: Peer<RoleServer>) {
        lock(&self.outlets).insert(Key::Session(session), Outlet::new(scope, Target::Peer(peer)));
    }

    /// Forgets a session that ended (its peer, and with it the session's channel, go).
    pub fn remove_peer(&self, session: u64) {
        let gone = lock(&self.outlets).by_key.remove(&Key::Session(session));
        drop(gone);
    }

    pub fn add_listener(&self, scope: Scope, sink: SubscriptionSink) -> u64 {
        let key = self.next_listener.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        lock(&self.outlets).insert(Key::Listener(key), Outlet::new(scope, Target::Sink(sink)));
        key
    }

    pub fn remove_listener(&self, key: u64) {
        lock(&self.outlets).by_key.remove(&Key::Listener(key));
    }

    /// Subscribes a session to a resource; false when it holds [`MAX_SUBSCRIPTIONS`] already.
    pub fn subscribe(&self, scope: Scope, uri: String, session: u64, peer: Peer<RoleServer>) -> bool {
        let outlet = {
            let mut outlets = lock(&self.outlets);
            match outlets.by_key.get(&Key::Session(session)) {
                Some(o) => o.clone(),
                None => {
                    let o = Outlet::new(scope, Target::Peer(peer));
                    outlets.insert(Key::Session(session), o.clone());
                    o
                }
            }
        };
        let mut subscribed = lock(&outlet.subscribed);
        if subscribed.len() >= MAX_SUBSCRIPTIONS && !subscribed.contains(&uri) {
            return false;
        }
        subscribed.insert(uri);
        true
    }

    pub fn unsubscribe(&self, uri: &str, session: u64) {
        if let Some(o) = lock(&self.outlets).by_key.get(&Key::Session(session)) {
            lock(&o.subscribed).remove(uri);
        }
    }

    /// The device notifications kept for a device's resource.
    pub fn recent(&self, device_id: &str) -> Vec<Value> {
        lock(&self.recent).by_device.get(device_id).map(|q| q.iter().map(|(v, _)| v.clone()).collect()).unwrap_or_default()
    }

    /// How many `list_changed` fan-outs went out so far.
    pub fn fanouts(&self) -> u64 {
        self.fanouts.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Follows the hub's events until the hub is gone; tool changes go out at most once per
    /// [`FANOUT_EVERY`].
    pub fn spawn(self: &Arc<Self>, hub: &Arc<Hub>, fleet: Arc<super::fleet::Fleet>) {
        let mut events = hub.registry.events.subscribe();
        let me = self.clone();
        let hub = hub.clone();
        tokio::spawn(async move {
            let mut changed: HashSet<String> = HashSet::new();
            let mut last_fanout: Option<tokio::time::Instant> = None;
            let mut fanout_at: Option<tokio::time::Instant> = None;
            loop {
                let due = async {
                    match fanout_at {
                        Some(at) => tokio::time::sleep_until(at).await,
                        None => std::future::pending().await,
                    }
                };
                let ev = tokio::select! {
                    ev = events.recv() => ev,
                    () = due => {
                        fanout_at = None;
                        last_fanout = Some(tokio::time::Instant::now());
                        // `/mcp` in its fleet face hears only of a switch of face.
                        let all = fleet.announce(super::listed_count(&hub));
                        me.tools_changed(all, &std::mem::take(&mut changed));
                        continue;
                    }
                };
                let ev = match ev {
                    Ok(ev) => ev,
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(_) => return,
                };
                match &ev.event {
                    LinkEvent::Session(Event::Ready { .. } | Event::ToolsChanged { .. }) | LinkEvent::Link(Lifecycle::Disconnected { .. }) => {
                        if matches!(&ev.event, LinkEvent::Link(Lifecycle::Disconnected { .. })) {
                            lock(&me.recent).forget(&ev.device_id);
                        }
                        changed.insert(ev.device_id.to_string());
                        if fanout_at.is_none() {
                            let now = tokio::time::Instant::now();
                            fanout_at = Some(last_fanout.map_or(now, |at| (at + FANOUT_EVERY).max(now)));
                        }
                    }
                    LinkEvent::Session(Event::Notification { method, params }) => me.device_notification(&ev.device_id, method.clone(), (**params).clone()),
                    _ => {}
                }
            }
        });
    }

    /// One `list_changed` to every session whose scope holds a device that changed (`/mcp`'s
    /// sessions when `all`).
    fn tools_changed(&self, all: bool, devices: &HashSet<String>) {
        if devices.is_empty() {
            return;
        }
        self.fanouts.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let concerned: Vec<Arc<Outlet>> = {
            let mut outlets = lock(&self.outlets);
            outlets.by_key.retain(|_, o| !o.target.closed());
            outlets.by_key.values().filter(|o| o.concerned(all, devices)).cloned().collect()
        };
        for o in concerned {
            o.deliver(Note::ListChanged);
        }
    }

    fn device_notification(&self, device_id: &str, method: String, params: Value) {
        if method == "notifications/progress" {
            self.progress.device_progress(device_id, &params);
        }
        let kept = serde_json::json!({"method": method, "params": params, "received_at": humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string()});
        lock(&self.recent).keep(device_id, kept);
        let uri = super::notifications_uri(device_id);
        let concerned: Vec<Arc<Outlet>> = lock(&self.outlets)
            .by_key
            .iter()
            .filter(|(key, o)| matches!(key, Key::Listener(_)) || lock(&o.subscribed).contains(&uri))
            .map(|(_, o)| o.clone())
            .collect();
        for o in concerned {
            o.deliver(Note::Updated(uri.clone()));
        }
    }
}

/// The notifications kept for the devices' resources, and their bytes.
#[derive(Default)]
struct Recent {
    by_device: HashMap<String, VecDeque<(Value, usize)>>,
    bytes: usize,
}

impl Recent {
    fn keep(&mut self, device_id: &str, kept: Value) {
        let weight = kept.to_string().len();
        let q = self.by_device.entry(device_id.to_string()).or_default();
        q.push_back((kept, weight));
        self.bytes += weight;
        let mut over = q.len().saturating_sub(RECENT);
        while over > 0 || (self.bytes > RECENT_BYTES && q.len() > 1) {
            let Some((_, w)) = q.pop_front() else { break };
            self.bytes -= w;
            over = over.saturating_sub(1);
        }
        // Still over: the oldest of other devices go (any order; each device keeps its newest).
        while self.bytes > RECENT_BYTES {
            let Some(other) = self.by_device.iter_mut().find(|(k, q)| k.as_str() != device_id && !q.is_empty()).map(|(_, q)| q) else { break };
            if let Some((_, w)) = other.pop_front() {
                self.bytes -= w;
            }
        }
    }

    fn forget(&mut self, device_id: &str) {
        if let Some(q) = self.by_device.remove(device_id) {
            self.bytes -= q.iter().map(|(_, w)| w).sum::<usize>();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The attacker: devices that send big notifications as fast as they can. What the resources
    /// keep stays under its byte bound, and the newest is kept.
    #[test]
    fn kept_notifications_stay_under_their_byte_bound() {
        let mut r = Recent::default();
        let big = serde_json::json!({"preview": "z".repeat(60_000)});
        for i in 0..2_000 {
            r.keep(&format!("dev-{}", i % 300), big.clone());
            assert!(r.bytes <= RECENT_BYTES, "{}", r.bytes);
        }
        assert_eq!(r.bytes, r.by_device.values().flatten().map(|(_, w)| w).sum::<usize>());
        assert!(!r.by_device["dev-199"].is_empty(), "the newest notification is kept");
        r.forget("dev-199");
        assert_eq!(r.bytes, r.by_device.values().flatten().map(|(_, w)| w).sum::<usize>());
    }

    #[test]
    fn a_mailbox_coalesces_and_stays_bounded() {
        let mut m = Mailbox::default();
        for i in 0..10_000 {
            m.add(Note::ListChanged);
            m.add(Note::Updated(format!("mcpdev://devices/{}/notifications", i % (MAILBOX_URIS * 2))));
        }
        assert_eq!(m.updated.len(), MAILBOX_URIS);
        assert!(m.dropped > 0);
        let notes = m.take();
        assert_eq!(notes.len(), MAILBOX_URIS + 1);
        assert_eq!(notes.iter().filter(|n| matches!(n, Note::ListChanged)).count(), 1);
        assert!(m.take().is_empty());
    }
}
