//! Count tables: how many of something each key holds (connections per address, streams per
//! person, tasks per owner), as the caps above them keep them.
//!
//! Rule it enforces: a key whose count reaches zero leaves the table, so a table holds only the
//! keys that hold something now, however many came and went.

use std::collections::HashMap;
use std::hash::Hash;

/// One less for `key` in a count table (the entry goes at zero).
pub fn count_down<K: Hash + Eq>(table: &mut HashMap<K, usize>, key: &K) {
    if let Some(n) = table.get_mut(key) {
        *n = n.saturating_sub(1);
        if *n == 0 {
            table.remove(key);
        }
    }
}
