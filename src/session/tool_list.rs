//! [`ToolList`]: a device's tools, shared between every device that lists the same ones.
//!
//! Devices running the same firmware list the same tools, byte for byte: a fleet of a thousand
//! of them would otherwise keep a thousand copies of one list, and every description the link
//! publishes (a snapshot per change) would copy it again. A list is interned by content when a
//! session sets it, so equal lists are one allocation, and cloning a description clones a
//! pointer.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::ops::Deref;
use std::sync::{Arc, Mutex, Weak};

use serde::Serialize;

use super::info::ToolEntry;

/// A device's tools in the order it listed them; cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct ToolList(Arc<[ToolEntry]>);

impl ToolList {
    /// The list, sharing the allocation of an equal list already in use anywhere in the process.
    pub fn shared(tools: Vec<ToolEntry>) -> Self {
        if tools.is_empty() {
            return Self::default();
        }
        Self(INTERNED.intern(tools))
    }

    /// Whether both are the same allocation (for tests: equal lists are shared).
    pub fn is_shared_with(&self, other: &ToolList) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Deref for ToolList {
    type Target = [ToolEntry];
    fn deref(&self) -> &[ToolEntry] {
        &self.0
    }
}

impl Serialize for ToolList {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

static INTERNED: Interner = Interner { lists: Mutex::new(None) };

/// Lists in use, by a hash of their JSON; weak, so a list nobody uses is freed. Dead entries are
/// swept whenever the table has doubled since the last sweep, so it stays within twice the
/// number of distinct lists alive.
struct Interner {
    lists: Mutex<Option<Table>>,
}

#[derive(Default)]
struct Table {
    by_hash: HashMap<u64, Vec<Weak<[ToolEntry]>>>,
    entries: usize,
    sweep_at: usize,
}

impl Interner {
    fn intern(&self, tools: Vec<ToolEntry>) -> Arc<[ToolEntry]> {
        let hash = content_hash(&tools);
        // Nothing under this lock can panic (hashing, string comparison, pushing); a poisoned
        // table is still a valid cache.
        let mut guard = self.lists.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let table = guard.get_or_insert_with(Table::default);
        let bucket = table.by_hash.entry(hash).or_default();
        if let Some(found) = bucket.iter().filter_map(Weak::upgrade).find(|l| same(l, &tools)) {
            return found;
        }
        let list: Arc<[ToolEntry]> = tools.into();
        bucket.push(Arc::downgrade(&list));
        table.entries += 1;
        if table.entries >= table.sweep_at {
            table.by_hash.retain(|_, lists| {
                lists.retain(|l| l.strong_count() > 0);
                !lists.is_empty()
            });
            table.entries = table.by_hash.values().map(Vec::len).sum();
            table.sweep_at = (table.entries * 2).max(64);
        }
        list
    }
}

fn content_hash(tools: &[ToolEntry]) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for t in tools {
        t.json.get().hash(&mut h);
    }
    h.finish()
}

/// Equal lists: the same tools as the device sent them, in the same order (the name and the
/// user-only mark come from that JSON).
fn same(a: &[ToolEntry], b: &[ToolEntry]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.json.get() == y.json.get())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn list(names: &[&str]) -> Vec<ToolEntry> {
        names.iter().map(|n| ToolEntry::from_value(&json!({"name": n, "inputSchema": {"type": "object"}})).unwrap()).collect()
    }

    #[test]
    fn equal_lists_share_one_allocation_and_different_ones_do_not() {
        let a = ToolList::shared(list(&["tool_list_test.a", "tool_list_test.b"]));
        let b = ToolList::shared(list(&["tool_list_test.a", "tool_list_test.b"]));
        let c = ToolList::shared(list(&["tool_list_test.b", "tool_list_test.a"]));
        assert!(a.is_shared_with(&b));
        assert!(!a.is_shared_with(&c), "the order is part of a list");
        assert_eq!(c.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), ["tool_list_test.b", "tool_list_test.a"]);
        assert_eq!(serde_json::to_value(&a).unwrap(), json!([{"name": "tool_list_test.a", "inputSchema": {"type": "object"}}, {"name": "tool_list_test.b", "inputSchema": {"type": "object"}}]));
    }

    #[test]
    fn a_list_nobody_uses_is_freed_and_the_table_stays_bounded() {
        let first = ToolList::shared(list(&["tool_list_test.gone"]));
        let weak = Arc::downgrade(&first.0);
        drop(first);
        assert!(weak.upgrade().is_none());
        for i in 0..1000 {
            let _ = ToolList::shared(list(&[&format!("tool_list_test.n{i}")]));
        }
        let live = INTERNED.lists.lock().unwrap().as_ref().map_or(0, |t| t.entries);
        assert!(live < 1000, "dead lists are swept: {live} entries after 1000 lists that died at once");
    }
}
