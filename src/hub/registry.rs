//! The connected devices, by Device-Id; selection by id, alias or unique prefix.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use tokio::sync::broadcast;

use crate::links::handle::{EventSender, Tracing};
use crate::links::{DeviceEvent, DeviceHandle};
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

pub struct Registry {
    devices: RwLock<HashMap<String, DeviceHandle>>,
    aliases: HashMap<String, String>,
    pub events: EventSender,
    pub tracing: Arc<Tracing>,
    generation: AtomicU64,
    /// What devices posted to the OTA endpoint, by Device-Id.
    pub ota: super::ota::OtaBook,
}

impl Registry {
    pub fn new(aliases: HashMap<String, String>) -> Self {
        let (events, _) = broadcast::channel(4096);
        Self { devices: RwLock::default(), aliases, events, tracing: Arc::default(), generation: AtomicU64::new(1), ota: Default::default() }
    }

    pub fn next_generation(&self) -> u64 {
        self.generation.fetch_add(1, Ordering::Relaxed)
    }

    /// Adds a device; returns the session it replaces (same Device-Id), which the caller closes.
    pub fn insert(&self, handle: DeviceHandle) -> Option<DeviceHandle> {
        self.devices.write().expect("registry lock").insert(handle.device_id.clone(), handle)
    }

    /// Removes a device, unless it was replaced by a newer connection meanwhile.
    pub fn remove(&self, device_id: &str, generation: u64) {
        let mut devices = self.devices.write().expect("registry lock");
        if devices.get(device_id).is_some_and(|h| h.generation == generation) {
            devices.remove(device_id);
        }
    }

    pub fn handles(&self) -> Vec<DeviceHandle> {
        let mut v: Vec<DeviceHandle> = self.devices.read().expect("registry lock").values().cloned().collect();
        v.sort_by(|a, b| a.device_id.cmp(&b.device_id));
        v
    }

    pub fn len(&self) -> usize {
        self.devices.read().expect("registry lock").len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub async fn snapshots(&self) -> Vec<DeviceInfo> {
        let mut out = Vec::new();
        for h in self.handles() {
            if let Some(info) = h.snapshot().await {
                out.push(info);
            }
        }
        out
    }

    /// Resolves a selector: exact Device-Id, an alias, or a unique prefix (colons optional);
    /// with no selector, the only connected device.
    pub fn select(&self, selector: Option<&str>) -> Result<DeviceHandle, SelectError> {
        let devices = self.devices.read().expect("registry lock");
        let Some(sel) = selector.map(str::trim).filter(|s| !s.is_empty()) else {
            return match devices.len() {
                0 => Err(SelectError::NoDevices),
                1 => Ok(devices.values().next().expect("one device").clone()),
                n => Err(SelectError::Ambiguous { count: n, ids: join_ids(devices.keys()) }),
            };
        };
        let wanted = self.aliases.get(sel).map_or(sel, String::as_str).to_ascii_lowercase();
        if let Some(h) = devices.get(&wanted) {
            return Ok(h.clone());
        }
        let bare = |s: &str| s.replace([':', '-', '_'], "");
        let matches: Vec<&DeviceHandle> = devices.values().filter(|h| bare(&h.device_id).starts_with(&bare(&wanted))).collect();
        match matches.as_slice() {
            [one] => Ok((*one).clone()),
            [] => Err(SelectError::NotFound(sel.to_string())),
            many => Err(SelectError::AmbiguousPrefix { selector: sel.to_string(), ids: join_ids(many.iter().map(|h| &h.device_id)) }),
        }
    }

    /// Waits up to `timeout` for a device matching `selector` to be connected and onboarded.
    pub async fn wait_ready(&self, selector: Option<&str>, timeout: Duration) -> Result<(DeviceHandle, DeviceInfo), SelectError> {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut events = self.events.subscribe();
        loop {
            let last_error = match self.select(selector) {
                Ok(h) => match h.snapshot().await {
                    Some(info) if info.phase == Phase::Ready => return Ok((h, info)),
                    _ => Some(SelectError::NotReady(h.device_id.clone())),
                },
                Err(e @ SelectError::Ambiguous { .. }) | Err(e @ SelectError::AmbiguousPrefix { .. }) => return Err(e),
                Err(e) => Some(e),
            };
            let next: Result<DeviceEvent, _> = match tokio::time::timeout_at(deadline, events.recv()).await {
                Ok(ev) => ev.map_err(|_| ()),
                Err(_) => {
                    return Err(last_error.unwrap_or_else(|| SelectError::NotFound(selector.unwrap_or("").to_string())));
                }
            };
            if next.is_err() {
                events = self.events.subscribe();
            }
        }
    }
}

fn join_ids<'a>(ids: impl Iterator<Item = &'a String>) -> String {
    let mut v: Vec<&str> = ids.map(String::as_str).collect();
    v.sort_unstable();
    v.join(", ")
}
