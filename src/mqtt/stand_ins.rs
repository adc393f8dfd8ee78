//! The stand-ins this hub keeps for other hubs' devices ([`super::proxy`] makes them): at most
//! `--cluster-stand-ins` live at once ([`DEFAULT_MAX_PROXIES`]), each marked when it is asked
//! for, so the one used least recently is the one a new stand-in ends.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::links::DeviceHandle;

/// Proxies alive at once, unless configured.
pub const DEFAULT_MAX_PROXIES: u32 = 1024;

/// The live proxies, by Device-Id, each with when it was last asked for.
pub struct Proxies {
    pub(super) max: usize,
    pub(super) map: Mutex<HashMap<String, (DeviceHandle, u64)>>,
    pub(super) clock: AtomicU64,
}

impl Proxies {
    pub fn new(max: usize) -> Self {
        Self {
            max: max.max(1),
            map: Mutex::default(),
            clock: AtomicU64::new(0),
        }
    }

    pub fn max(&self) -> usize {
        self.max
    }

    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (DeviceHandle, u64)>> {
        self.map
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The live proxy of a device, if there is one (marked as used).
    pub fn get(&self, device_id: &str) -> Option<DeviceHandle> {
        let now = self.clock.fetch_add(1, Ordering::Relaxed);
        let mut map = self.lock();
        let (h, used) = map.get_mut(device_id).filter(|(h, _)| h.is_connected())?;
        *used = now;
        Some(h.clone())
    }

    /// Every live proxy, by Device-Id.
    pub fn all(&self) -> Vec<DeviceHandle> {
        let mut v: Vec<DeviceHandle> = self
            .lock()
            .values()
            .map(|(h, _)| h)
            .filter(|h| h.is_connected())
            .cloned()
            .collect();
        v.sort_by(|a, b| a.device_id.cmp(&b.device_id));
        v
    }
}
