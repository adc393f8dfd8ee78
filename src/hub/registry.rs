//! The connected devices, by Device-Id; selection by id, alias or unique prefix.
//!
//! Devices are kept in Device-Id order, so a listing can be read a page at a time after a cursor
//! (the last Device-Id of the page before) in O(page), and the cursor stays valid while devices
//! come and go: a page never repeats a device and never skips one that stayed.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Duration;

use crate::links::changes;
use crate::links::handle::{CloseReason, EventSender, Tracing};
use crate::links::DeviceHandle;
use crate::session::{DeviceInfo, Phase};

/// Why a device selector matched no single device.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectError {
    #[error("no device is connected")]
    NoDevices,
    #[error("no connected device matches {0:?}")]
    NotFound(String),
    #[error("{count} devices are connected ({ids}); choose one with --device")]
    Ambiguous { count: usize, ids: String },
    #[error("device {0} is connected but has not finished onboarding (initialize, tools/list)")]
    NotReady(String),
    #[error("{selector:?} matches several devices ({ids}); give more of the id")]
    AmbiguousPrefix { selector: String, ids: String },
}

/// How many Device-Ids of devices that have left the registry remembers (oldest forgotten first).
pub const SEEN_MAX: usize = 16_384;

/// Events the hub keeps for watchers that fall behind.
pub const EVENT_RING: usize = 32_768;
/// Bytes of events (their JSON) the hub keeps for watchers that fall behind: a watcher further
/// behind is told how many it missed ([`crate::links::ring`]).
pub const EVENT_RING_BYTES: usize = 16 << 20;

pub struct Registry {
    devices: RwLock<BTreeMap<String, DeviceHandle>>,
    /// Devices that connected since the hub started (bounded: [`SEEN_MAX`]).
    seen: Mutex<Seen>,
    aliases: HashMap<String, String>,
    pub events: EventSender,
    pub tracing: Arc<Tracing>,
    generation: AtomicU64,
    /// Bumped whenever a device enters or leaves: a device's link starts before it is inserted,
    /// so its `ready` event can come first, and a waiter must also wake on the insertion.
    membership: tokio::sync::watch::Sender<u64>,
    /// What devices posted to the OTA endpoint, by Device-Id.
    pub ota: super::ota::OtaBook,
}

impl Registry {
    pub fn new(aliases: HashMap<String, String>) -> Self {
        // Long enough that a watcher (the control API's `watch`, the event log) keeps every event
        // of a few thousand devices onboarding at once (about four each) while it catches up:
        // 32,768 pointers, 1.3 MB, and at most 16 MiB of what they point at.
        let (events, _) = crate::links::ring::channel(EVENT_RING, EVENT_RING_BYTES);
        Self { devices: RwLock::default(), seen: Mutex::default(), aliases, events, tracing: Arc::default(), generation: AtomicU64::new(1), membership: tokio::sync::watch::Sender::new(0), ota: Default::default() }
    }

    pub fn next_generation(&self) -> u64 {
        self.generation.fetch_add(1, Ordering::Relaxed)
    }

    /// How many device connections were attached so far (each takes a generation).
    pub fn generations(&self) -> u64 {
        self.generation.load(Ordering::Relaxed)
    }

    /// Adds a device; returns the session it replaces (same Device-Id), which the caller closes.
    pub fn insert(&self, handle: DeviceHandle) -> Option<DeviceHandle> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner()).add(&handle.device_id);
        let id = handle.device_id.clone();
        let old = self.write().insert(id.clone(), handle);
        if let Some(n) = old.as_ref().map(DeviceHandle::complete_tools).filter(|n| *n > 0) {
            // The replaced connection is never removed by its own end: remember it now.
            self.seen.lock().unwrap_or_else(|e| e.into_inner()).remember_tools(&id, n);
        }
        changes::changed(&id);
        self.membership.send_modify(|n| *n += 1);
        old
    }

    /// Whether a device with this Device-Id connected since the hub started (it may be gone).
    pub fn was_seen(&self, device_id: &str) -> bool {
        self.seen.lock().unwrap_or_else(|e| e.into_inner()).ids.contains_key(device_id)
    }

    /// How many tools the device listed when the hub last knew it complete (its connection that
    /// is still registered, else the last one that ended); 0 when it never did. A new connection's
    /// first list that is shorter is listed again before the device is `ready` (a cache that was
    /// still filling answers short: see [`crate::session`]).
    pub fn known_tools(&self, device_id: &str) -> usize {
        if let Some(n) = self.get(device_id).map(|h| h.complete_tools()).filter(|n| *n > 0) {
            return n;
        }
        self.seen.lock().unwrap_or_else(|e| e.into_inner()).ids.get(device_id).map_or(0, |n| *n as usize)
    }

    /// The aliases from `mcpdev.toml`: alias -> Device-Id.
    pub fn aliases(&self) -> &HashMap<String, String> {
        &self.aliases
    }

    // Nothing that can panic runs under these locks; a poisoned one is still consistent.
    fn read(&self) -> RwLockReadGuard<'_, BTreeMap<String, DeviceHandle>> {
        self.devices.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, BTreeMap<String, DeviceHandle>> {
        self.devices.write().unwrap_or_else(|e| e.into_inner())
    }

    /// The connected device with exactly this Device-Id.
    pub fn get(&self, device_id: &str) -> Option<DeviceHandle> {
        self.read().get(device_id).cloned()
    }

    /// Removes a device, unless it was replaced by a newer connection meanwhile.
    pub fn remove(&self, device_id: &str, generation: u64) {
        let mut devices = self.write();
        if devices.get(device_id).is_some_and(|h| h.generation == generation) {
            let gone = devices.remove(device_id);
            drop(devices);
            if let Some(n) = gone.map(|h| h.complete_tools()).filter(|n| *n > 0) {
                self.seen.lock().unwrap_or_else(|e| e.into_inner()).remember_tools(device_id, n);
            }
            changes::changed(device_id);
            self.membership.send_modify(|n| *n += 1);
        }
    }

    /// Waits until the link `handle` stands for is out of the registry (its task removes it as
    /// it ends), or `limit` is over. Whether it is out.
    pub async fn wait_removed(&self, handle: &DeviceHandle, limit: Duration) -> bool {
        self.wait_membership(limit, |devices| devices.get(&handle.device_id).is_none_or(|h| h.generation != handle.generation)).await
    }

    /// Waits until a device `device_id` is in the registry (connected here, in any phase), or
    /// `limit` is over. Whether it is.
    pub async fn wait_present(&self, device_id: &str, limit: Duration) -> bool {
        self.wait_membership(limit, |devices| devices.contains_key(device_id)).await
    }

    /// Waits until `done` holds of the devices, looked at again whenever one enters or leaves,
    /// or `limit` is over. Whether it holds.
    async fn wait_membership(&self, limit: Duration, done: impl Fn(&BTreeMap<String, DeviceHandle>) -> bool) -> bool {
        let mut membership = self.membership.subscribe();
        let settled = async {
            loop {
                membership.mark_unchanged();
                if done(&self.read()) {
                    return;
                }
                // The sender lives in this registry: it is never dropped while `self` is here.
                if membership.changed().await.is_err() {
                    return;
                }
            }
        };
        tokio::time::timeout(limit, settled).await.is_ok()
    }

    /// Closes every device's link, saying `why`, and waits until each has ended (said its
    /// goodbye) or `limit` is over; returns how many were still connected then. A device that
    /// connects meanwhile is closed too.
    pub async fn close_all(&self, why: CloseReason, limit: Duration) -> usize {
        let deadline = tokio::time::Instant::now() + limit;
        let mut membership = self.membership.subscribe();
        loop {
            membership.mark_unchanged();
            let handles = self.handles();
            if handles.is_empty() {
                return 0;
            }
            let closing = handles.iter().filter(|h| h.is_connected()).map(|h| h.close(why));
            let _ = tokio::time::timeout_at(deadline, futures_util::future::join_all(closing)).await;
            if tokio::time::timeout_at(deadline, membership.changed()).await.is_err() {
                return self.len();
            }
        }
    }

    /// Every connected device, in Device-Id order.
    pub fn handles(&self) -> Vec<DeviceHandle> {
        self.read().values().cloned().collect()
    }

    /// Up to `limit` devices' descriptions in Device-Id order, after the Device-Id `after` (not
    /// included), and the cursor of the next page when more follow. Costs O(limit), whatever the
    /// fleet: the lock is held while `limit + 1` handles are cloned, never while a page is written.
    pub fn page(&self, after: Option<&str>, limit: usize) -> (Vec<Arc<DeviceInfo>>, Option<String>) {
        let (handles, next) = self.handles_after(after, limit);
        (handles.iter().filter_map(DeviceHandle::snapshot).collect(), next)
    }

    /// Up to `limit` (at least 1) handles in Device-Id order after the Device-Id `after`, and the
    /// cursor of the next page when more follow; O(limit), as [`Self::page`].
    pub fn handles_after(&self, after: Option<&str>, limit: usize) -> (Vec<DeviceHandle>, Option<String>) {
        let limit = limit.max(1);
        let start = after.map_or(Bound::Unbounded, Bound::Excluded);
        let mut handles: Vec<DeviceHandle> = self.read().range::<str, _>((start, Bound::Unbounded)).take(limit + 1).map(|(_, h)| h.clone()).collect();
        let more = handles.len() > limit;
        handles.truncate(limit);
        let next = more.then(|| handles.last().map(|h| h.device_id.clone())).flatten();
        (handles, next)
    }

    /// Every connected device, in no particular order (no sort: for a caller that only looks
    /// each one up).
    pub fn unsorted(&self) -> Vec<DeviceHandle> {
        self.read().values().cloned().collect()
    }

    /// A connected device for which `matches` holds (any one, without sorting the fleet).
    pub fn find(&self, matches: impl Fn(&DeviceHandle) -> bool) -> Option<DeviceHandle> {
        self.read().values().find(|h| matches(h)).cloned()
    }

    pub fn len(&self) -> usize {
        self.read().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every connected device's description, as its link last published it (never waits on a
    /// device).
    pub fn snapshots(&self) -> Vec<Arc<DeviceInfo>> {
        self.handles().iter().filter_map(DeviceHandle::snapshot).collect()
    }

    /// Resolves a selector: exact Device-Id, an alias, or a unique prefix (colons optional);
    /// with no selector, the only connected device. An id or an alias is one map lookup; a
    /// prefix is one range of the sorted map (no allocation per device), whatever the fleet.
    pub fn select(&self, selector: Option<&str>) -> Result<DeviceHandle, SelectError> {
        let devices = self.read();
        let Some(sel) = selector.map(str::trim).filter(|s| !s.is_empty()) else {
            return match devices.len() {
                0 => Err(SelectError::NoDevices),
                1 => Ok(devices.values().next().expect("one device").clone()),
                n => Err(SelectError::Ambiguous {
                    count: n,
                    ids: join_ids(devices.keys().take(AMBIGUOUS_SHOWN)) + &more(n),
                }),
            };
        };
        let wanted = self.aliases.get(sel).map_or(sel, String::as_str);
        if let Some(h) = devices.get(wanted) {
            return Ok(h.clone());
        }
        let not_found = || SelectError::NotFound(sel.to_string());
        let prefix = id_prefix(wanted).ok_or_else(not_found)?;
        if let Some(h) = devices.get(&prefix) {
            return Ok(h.clone());
        }
        let mut matching = devices
            .range::<str, _>((Bound::Included(prefix.as_str()), Bound::Unbounded))
            .take_while(|(id, _)| id.starts_with(&prefix));
        let Some((_, first)) = matching.next() else {
            return Err(not_found());
        };
        let others: Vec<&String> = matching
            .by_ref()
            .take(AMBIGUOUS_SHOWN - 1)
            .map(|(id, _)| id)
            .collect();
        if others.is_empty() {
            return Ok(first.clone());
        }
        let rest = matching.count();
        let ids = join_ids(std::iter::once(&first.device_id).chain(others.iter().copied()))
            + &more(others.len() + 1 + rest);
        Err(SelectError::AmbiguousPrefix {
            selector: sel.to_string(),
            ids,
        })
    }

    /// Waits up to `timeout` for a device matching `selector` to be connected and onboarded.
    pub async fn wait_ready(&self, selector: Option<&str>, timeout: Duration) -> Result<(DeviceHandle, Arc<DeviceInfo>), SelectError> {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut events = self.events.subscribe();
        let mut membership = self.membership.subscribe();
        loop {
            let last_error = match self.select(selector) {
                Ok(h) => match h.snapshot() {
                    Some(info) if info.phase == Phase::Ready => return Ok((h, info)),
                    _ => Some(SelectError::NotReady(h.device_id.clone())),
                },
                Err(e @ SelectError::Ambiguous { .. }) | Err(e @ SelectError::AmbiguousPrefix { .. }) => return Err(e),
                Err(e) => Some(e),
            };
            // Whatever comes first: an event of any device, or one entering or leaving.
            let woke = tokio::time::timeout_at(deadline, async {
                tokio::select! {
                    ev = events.recv() => ev.is_ok(),
                    _ = membership.changed() => true,
                }
            })
            .await;
            match woke {
                Err(_) => return Err(last_error.unwrap_or_else(|| SelectError::NotFound(selector.unwrap_or("").to_string()))),
                // Lagged or closed: listen afresh (the loop looks at the registry again first).
                Ok(false) => events = self.events.subscribe(),
                Ok(true) => {}
            }
        }
    }
}

/// Device-Ids seen, oldest first, at most [`SEEN_MAX`] (one copy of each, shared by both).
#[derive(Default)]
struct Seen {
    /// Device-Id -> how many tools its last complete list held (0: none known).
    ids: HashMap<Arc<str>, u32>,
    order: VecDeque<Arc<str>>,
}

impl Seen {
    fn remember_tools(&mut self, id: &str, tools: usize) {
        if let Some(n) = self.ids.get_mut(id) {
            *n = u32::try_from(tools).unwrap_or(u32::MAX);
        }
    }

    fn add(&mut self, id: &str) {
        if !self.ids.contains_key(id) {
            let id: Arc<str> = id.into();
            self.ids.insert(id.clone(), 0);
            self.order.push_back(id);
            while self.order.len() > SEEN_MAX {
                if let Some(old) = self.order.pop_front() {
                    self.ids.remove(&old);
                }
            }
        }
    }
}

/// Device-Ids named in an "ambiguous" error at most.
const AMBIGUOUS_SHOWN: usize = 10;

fn more(n: usize) -> String {
    if n > AMBIGUOUS_SHOWN {
        format!(" and {} more", n - AMBIGUOUS_SHOWN)
    } else {
        String::new()
    }
}

/// The Device-Id prefix (`aa:bb:c`) a selector stands for: its hex digits in any case, with or
/// without `:`, `-` or `_` between them; `None` if it holds anything else or is longer than an id.
pub fn id_prefix(selector: &str) -> Option<String> {
    let mut out = String::with_capacity(17);
    let mut digits = 0;
    for c in selector.trim().chars() {
        match c {
            ':' | '-' | '_' => continue,
            c if c.is_ascii_hexdigit() && digits < 12 => {
                if digits > 0 && digits % 2 == 0 {
                    out.push(':');
                }
                out.push(c.to_ascii_lowercase());
                digits += 1;
            }
            _ => return None,
        }
    }
    (digits > 0).then_some(out)
}

fn join_ids<'a>(ids: impl Iterator<Item = &'a String>) -> String {
    let mut v: Vec<&str> = ids.map(String::as_str).collect();
    v.sort_unstable();
    v.join(", ")
}
