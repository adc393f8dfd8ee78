//! The tools epoch and its change log: which devices' tools, phase or presence changed, so that
//! what is derived from every device's tools (the bridge's catalogues) is brought up to date by
//! looking at the devices that changed, not at the whole fleet.
//!
//! Rules it enforces:
//! - **Every change names its device.** The epoch moves only through [`changed`], which logs the
//!   device with the new epoch, under one lock: the log is in epoch order and [`since`] reads an
//!   epoch and the changes up to it together.
//! - **Read the epoch before the devices.** A change is made (published, inserted, removed)
//!   *before* it is logged, so whoever reads the changes up to epoch `e` and then the devices sees
//!   every change up to `e`; a change made meanwhile has a later epoch and is read next time.
//! - **Bounded.** The log keeps the last [`KEPT`] changes. A reader that fell further behind is
//!   told so ([`Changes::All`]) and makes a full pass: it never misses a change.

use std::collections::{HashSet, VecDeque};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// Changes the log keeps: a reader (an endpoint's catalogue, read on each MCP request) that is
/// more changes behind than this makes a full pass. A fleet coming back at once overflows it,
/// which costs one pass per read while it lasts.
pub const KEPT: usize = 4096;

/// What changed since an epoch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Changes {
    /// These devices (each once, in Device-Id order).
    Devices(Vec<String>),
    /// Too much for the log to say: look at every device.
    All,
}

/// A bounded log of which device changed at which epoch.
#[derive(Debug)]
pub struct Log {
    epoch: u64,
    kept: usize,
    entries: VecDeque<(u64, Box<str>)>,
    /// The latest epoch whose entry was dropped: the log answers for any epoch at or after it.
    dropped: u64,
}

impl Log {
    /// An empty log at epoch 1 that keeps `kept` changes.
    pub const fn new(kept: usize) -> Self {
        Self { epoch: 1, kept, entries: VecDeque::new(), dropped: 0 }
    }

    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Logs a change of `device_id`; returns the new epoch.
    pub fn changed(&mut self, device_id: &str) -> u64 {
        self.epoch += 1;
        if self.entries.len() >= self.kept.max(1)
            && let Some((e, _)) = self.entries.pop_front()
        {
            self.dropped = e;
        }
        self.entries.push_back((self.epoch, device_id.into()));
        self.epoch
    }

    /// The current epoch, and the devices that changed after `epoch`.
    pub fn since(&self, epoch: u64) -> (u64, Changes) {
        if epoch < self.dropped {
            return (self.epoch, Changes::All);
        }
        // Entries are in epoch order: the ones after `epoch` are the log's tail.
        let first = self.entries.partition_point(|(e, _)| *e <= epoch);
        let ids: HashSet<&str> = self.entries.range(first..).map(|(_, id)| &**id).collect();
        let mut ids: Vec<String> = ids.into_iter().map(str::to_string).collect();
        ids.sort_unstable();
        (self.epoch, Changes::Devices(ids))
    }
}

/// The process's log: every link and the registry log here.
static LOG: Mutex<Log> = Mutex::new(Log::new(KEPT));
/// The log's epoch, readable without its lock (every MCP request reads it).
static EPOCH: AtomicU64 = AtomicU64::new(1);

// Nothing under this lock can panic (a counter, a deque of strings); a poisoned log is still whole.
fn log() -> std::sync::MutexGuard<'static, Log> {
    LOG.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The current tools epoch: a cache built at epoch `e` is current while this is `e`.
pub fn epoch() -> u64 {
    EPOCH.load(Ordering::Acquire)
}

/// Says that `device_id`'s tools, phase or presence changed. Call after making the change.
pub fn changed(device_id: &str) {
    let mut log = log();
    let epoch = log.changed(device_id);
    EPOCH.store(epoch, Ordering::Release);
}

/// The current epoch and what changed after `epoch`. Read it *before* reading the devices.
pub fn since(epoch: u64) -> (u64, Changes) {
    log().since(epoch)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn devices(c: Changes) -> Vec<String> {
        match c {
            Changes::Devices(ids) => ids,
            Changes::All => panic!("expected the devices that changed, got a full pass"),
        }
    }

    #[test]
    fn a_reader_gets_each_device_that_changed_after_its_epoch_once() {
        let mut log = Log::new(16);
        let start = log.epoch();
        log.changed("b");
        log.changed("a");
        let (mid, _) = log.since(start);
        log.changed("b");
        log.changed("c");
        let (now, changes) = log.since(start);
        assert_eq!(now, start + 4);
        assert_eq!(devices(changes), ["a", "b", "c"]);
        assert_eq!(devices(log.since(mid).1), ["b", "c"]);
        assert_eq!(devices(log.since(now).1), Vec::<String>::new());
    }

    #[test]
    fn a_reader_that_missed_many_epochs_still_gets_them_all_while_the_log_holds_them() {
        let mut log = Log::new(100);
        let start = log.epoch();
        for i in 0..100 {
            log.changed(&format!("d{:03}", i % 40));
        }
        let ids = devices(log.since(start).1);
        assert_eq!(ids.len(), 40);
        assert_eq!(ids.first().map(String::as_str), Some("d000"));
    }

    #[test]
    fn a_reader_behind_an_overflowed_log_is_told_to_look_at_everything() {
        let mut log = Log::new(4);
        let start = log.epoch();
        for id in ["a", "b", "c", "d"] {
            log.changed(id);
        }
        assert_eq!(devices(log.since(start).1), ["a", "b", "c", "d"], "exactly full: still answers");
        log.changed("e");
        assert_eq!(log.since(start).1, Changes::All, "the change of a was dropped");
        // A reader that had seen a's change is still answered from the log.
        assert_eq!(devices(log.since(start + 1).1), ["b", "c", "d", "e"]);
    }

    #[test]
    fn the_process_log_moves_the_epoch_with_each_change() {
        let before = epoch();
        changed("02:00:00:00:ee:01");
        let (now, changes) = since(before);
        assert!(now > before && epoch() >= now);
        // Other tests change other devices meanwhile; this one's change is among them (or the
        // log overflowed, which a reader handles as a full pass).
        if let Changes::Devices(ids) = changes {
            assert!(ids.iter().any(|id| id == "02:00:00:00:ee:01"), "{ids:?}");
        }
    }
}
