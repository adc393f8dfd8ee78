//! The stand-ins this hub keeps for other hubs' devices ([`super::proxy`] makes them): at most
//! `--cluster-stand-ins` live at once ([`DEFAULT_MAX_PROXIES`]), each marked when it is asked
//! for, so the one used least recently is the one a new stand-in ends. Those made only to offer
//! every device of the others while they all fit, and never asked for, end once they no longer
//! fit ([`Proxies::end_unasked_offers`]): kept, they would be an arbitrary part of the cluster
//! (the first ready during a ramp), ~3 KB each (issue 46.3: ~3 MB a hub at 100,000 devices).

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::links::DeviceHandle;

/// Proxies alive at once, unless configured.
pub const DEFAULT_MAX_PROXIES: u32 = 1024;

/// A live proxy: its handle, when it was last asked for, and whether it was made only to be
/// offered and nobody asked for it since.
pub(super) struct Kept {
    pub(super) handle: DeviceHandle,
    pub(super) used: u64,
    pub(super) offered_only: bool,
}

/// The live proxies, by Device-Id.
pub struct Proxies {
    pub(super) max: usize,
    pub(super) map: Mutex<HashMap<String, Kept>>,
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

    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Kept>> {
        self.map
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The live proxy of a device, if there is one (marked as used).
    pub fn get(&self, device_id: &str) -> Option<DeviceHandle> {
        let now = self.clock.fetch_add(1, Ordering::Relaxed);
        let mut map = self.lock();
        let kept = map.get_mut(device_id).filter(|k| k.handle.is_connected())?;
        (kept.used, kept.offered_only) = (now, false);
        Some(kept.handle.clone())
    }

    /// Whether a device has a live proxy (not a use of it).
    pub fn has(&self, device_id: &str) -> bool {
        self.lock().get(device_id).is_some_and(|k| k.handle.is_connected())
    }

    /// Ends the proxies made only to be offered that nobody asked for; how many.
    pub fn end_unasked_offers(&self) -> usize {
        let mut ended = Vec::new();
        self.lock().retain(|_, k| {
            let end = k.offered_only;
            if end {
                ended.push(k.handle.clone());
            }
            !end
        });
        let n = ended.len();
        ended.into_iter().for_each(close);
        n
    }

    /// Every live proxy, by Device-Id.
    pub fn all(&self) -> Vec<DeviceHandle> {
        let mut v: Vec<DeviceHandle> = self
            .lock()
            .values()
            .map(|k| &k.handle)
            .filter(|h| h.is_connected())
            .cloned()
            .collect();
        v.sort_by(|a, b| a.device_id.cmp(&b.device_id));
        v
    }
}

/// Ends a proxy (its link task) in the background.
pub(super) fn close(handle: DeviceHandle) {
    tokio::spawn(async move { handle.close(crate::links::handle::CloseReason::Replaced).await });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::links::handle::test_handle;

    /// Stand-ins made only to offer the others' devices end once those no longer all fit, unless
    /// a host asked for them since; those made for a host stay (issue 46.3).
    #[tokio::test]
    async fn offered_stand_ins_nobody_asked_for_end_when_the_offer_stops() {
        let p = Proxies::new(8);
        let mut links = Vec::new();
        for (id, offered_only) in [("aa:00:00:00:00:01", true), ("aa:00:00:00:00:02", true), ("aa:00:00:00:00:03", false)] {
            let (handle, link) = test_handle(id, 1);
            links.push(link);
            p.lock().insert(id.to_string(), Kept { handle, used: 0, offered_only });
        }
        assert!(p.has("aa:00:00:00:00:02"), "a look is not a use");
        assert!(p.get("aa:00:00:00:00:02").is_some(), "asked for by a host");
        assert_eq!(p.end_unasked_offers(), 1);
        let left: Vec<String> = p.all().into_iter().map(|h| h.device_id).collect();
        assert_eq!(left, ["aa:00:00:00:00:02", "aa:00:00:00:00:03"]);
        assert_eq!(p.end_unasked_offers(), 0, "once");
    }
}
