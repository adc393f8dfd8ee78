//! [`Interned`]: one allocation for equal values that many devices hold.
//!
//! Devices running the same firmware say the same things byte for byte: the same tools, the
//! same hello, the same `serverInfo` and `capabilities`. A fleet of thousands would otherwise
//! keep thousands of copies of each. A value is looked up by content when a session keeps it,
//! and an equal one already alive anywhere in the process is shared instead.
//!
//! Rules:
//! - The table holds values weakly: a value nobody uses is freed. Dead entries are swept whenever
//!   the table has doubled since the last sweep, so it stays within twice the number of distinct
//!   values alive.
//! - The hash is keyed at random per process, so a device cannot choose values that all land in
//!   one bucket; equal hashes are still compared in full.
//! - Nothing under the table's lock can panic (hashing, comparing, pushing); a poisoned lock is
//!   still a valid cache and is used as such.
//! - Only values that many devices share belong here: a value each device has its own (an OTA
//!   report with its MAC) would cost a table entry and save nothing.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher, RandomState};
use std::sync::{Arc, Mutex, PoisonError, Weak};

/// What makes two values equal here, and feeds the hash.
pub(super) trait Content {
    fn hash_content(&self, h: &mut dyn Hasher);
    fn same_content(&self, other: &Self) -> bool;
}

/// A table of values in use, by a hash of their content.
pub(super) struct Interned<T: ?Sized> {
    table: Mutex<Option<Table<T>>>,
}

struct Table<T: ?Sized> {
    keys: RandomState,
    by_hash: HashMap<u64, Vec<Weak<T>>>,
    entries: usize,
    sweep_at: usize,
}

impl<T: ?Sized + Content> Interned<T> {
    pub(super) const fn new() -> Self {
        Self { table: Mutex::new(None) }
    }

    /// The live value equal to `value` (which is then dropped), or `value`, now shared.
    pub(super) fn share(&self, value: Arc<T>) -> Arc<T> {
        let mut guard = self.table.lock().unwrap_or_else(PoisonError::into_inner);
        let table = guard.get_or_insert_with(|| Table { keys: RandomState::new(), by_hash: HashMap::new(), entries: 0, sweep_at: 64 });
        let mut hasher = table.keys.build_hasher();
        value.hash_content(&mut hasher);
        let bucket = table.by_hash.entry(hasher.finish()).or_default();
        if let Some(found) = bucket.iter().filter_map(Weak::upgrade).find(|v| v.same_content(&value)) {
            drop(guard);
            return found;
        }
        bucket.push(Arc::downgrade(&value));
        table.entries += 1;
        if table.entries >= table.sweep_at {
            table.by_hash.retain(|_, values| {
                values.retain(|v| v.strong_count() > 0);
                !values.is_empty()
            });
            table.entries = table.by_hash.values().map(Vec::len).sum();
            table.sweep_at = (table.entries * 2).max(64);
        }
        value
    }

    /// Entries in the table, the dead ones not yet swept included.
    #[cfg(test)]
    pub(super) fn entries(&self) -> usize {
        self.table.lock().unwrap_or_else(PoisonError::into_inner).as_ref().map_or(0, |t| t.entries)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Content for str {
        fn hash_content(&self, h: &mut dyn Hasher) {
            h.write(self.as_bytes());
        }

        fn same_content(&self, other: &Self) -> bool {
            self == other
        }
    }

    static TEXTS: Interned<str> = Interned::new();

    fn text(s: &str) -> Arc<str> {
        TEXTS.share(s.into())
    }

    #[test]
    fn equal_values_share_one_allocation_and_different_ones_do_not() {
        let a = text("interned_test.same");
        let b = text(&String::from("interned_test.same"));
        let c = text("interned_test.other");
        assert!(Arc::ptr_eq(&a, &b));
        assert!(!Arc::ptr_eq(&a, &c));
        assert_eq!(&*c, "interned_test.other");
    }

    #[test]
    fn a_value_nobody_uses_is_freed_and_the_table_stays_bounded() {
        let first = text("interned_test.gone");
        let weak = Arc::downgrade(&first);
        drop(first);
        assert!(weak.upgrade().is_none(), "the table does not keep a value alive");
        for i in 0..1000 {
            let _ = text(&format!("interned_test.n{i}"));
        }
        let live = TEXTS.entries();
        assert!(live < 1000, "dead values are swept: {live} entries after 1000 values that died at once");
    }

    /// A text whose hash is its length only: texts of one length collide.
    struct Colliding(String);

    impl Content for Colliding {
        fn hash_content(&self, h: &mut dyn Hasher) {
            h.write_usize(self.0.len());
        }

        fn same_content(&self, other: &Self) -> bool {
            self.0 == other.0
        }
    }

    #[test]
    fn values_whose_hashes_collide_are_told_apart_by_content() {
        static COLLIDING: Interned<Colliding> = Interned::new();
        let make = |s: &str| COLLIDING.share(Arc::new(Colliding(s.to_string())));
        let (a, b) = (make("interned_test.a"), make("interned_test.b"));
        assert_eq!((a.0.as_str(), b.0.as_str()), ("interned_test.a", "interned_test.b"));
        assert!(!Arc::ptr_eq(&a, &b));
        assert!(Arc::ptr_eq(&a, &make("interned_test.a")));
    }
}
