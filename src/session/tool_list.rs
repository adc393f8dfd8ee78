//! A device's tools: each [`ToolEntry`] kept as the device sent it, and the [`ToolList`] of them,
//! shared between every device that lists the same ones.
//!
//! Devices running the same firmware list the same tools, byte for byte: a fleet of a thousand
//! of them would otherwise keep a thousand copies of one list, and every description the link
//! publishes (a snapshot per change) would copy it again. A list is interned by content when a
//! session sets it ([`super::interned`]), so equal lists are one allocation, and cloning a
//! description clones a pointer.

use std::hash::{Hash, Hasher};
use std::ops::Deref;
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;
use serde_json::value::RawValue;

use super::interned::{Content, Interned};

/// One tool, kept as the device sent it (compact raw JSON: thousands of devices fit in memory).
#[derive(Debug, Clone)]
pub struct ToolEntry {
    pub name: String,
    pub user_only: bool,
    pub json: Box<RawValue>,
}

/// A tool serializes as the device sent it.
impl Serialize for ToolEntry {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.json.serialize(s)
    }
}

impl ToolEntry {
    /// A tool from its JSON; `None` without a string `name`.
    pub fn from_value(v: &Value) -> Option<Self> {
        let name = v.get("name")?.as_str()?.to_string();
        let user_only = v
            .pointer("/annotations/audience")
            .and_then(Value::as_array)
            .is_some_and(|a| a.len() == 1 && a[0] == "user");
        let json = RawValue::from_string(v.to_string()).ok()?;
        Some(Self { name, user_only, json })
    }

    /// Whether an MCP host is offered this tool: every tool with `user_tools`
    /// (`serve --mcp-user-tools`), else all but the user-only ones. The one definition every
    /// description of a device counts by, wherever the device is.
    pub fn is_offered(&self, user_tools: bool) -> bool {
        user_tools || !self.user_only
    }

    pub fn value(&self) -> Value {
        serde_json::from_str(self.json.get()).unwrap_or(Value::Null)
    }
}

/// A device's tools in the order it listed them; cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct ToolList(Arc<[ToolEntry]>);

impl ToolList {
    /// The list, sharing the allocation of an equal list already in use anywhere in the process.
    pub fn shared(tools: Vec<ToolEntry>) -> Self {
        if tools.is_empty() {
            return Self::default();
        }
        Self(intern(tools))
    }

    /// The very same list (one allocation): what a catalogue compares to tell that a device's
    /// tools did not change, without reading them.
    pub fn same_list(&self, other: &ToolList) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// The tools offered to MCP hosts ([`ToolEntry::is_offered`]), in the device's order.
    pub fn offered(&self, user_tools: bool) -> impl Iterator<Item = &ToolEntry> {
        self.0.iter().filter(move |t| t.is_offered(user_tools))
    }

    /// How many tools are offered to MCP hosts ([`ToolEntry::is_offered`]).
    pub fn offered_count(&self, user_tools: bool) -> usize {
        self.offered(user_tools).count()
    }

    /// The list's identity (its allocation's address), to key what is derived from it once for
    /// every device that lists it; valid while this list is held.
    pub fn identity(&self) -> usize {
        Arc::as_ptr(&self.0).cast::<ToolEntry>() as usize
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

/// Lists in use, by a hash of their tools' JSON.
static INTERNED: Interned<[ToolEntry]> = Interned::new();

impl Content for [ToolEntry] {
    fn hash_content(&self, mut h: &mut dyn Hasher) {
        for t in self {
            t.json.get().hash(&mut h);
        }
    }

    fn same_content(&self, other: &Self) -> bool {
        same(self, other)
    }
}

fn intern(tools: Vec<ToolEntry>) -> Arc<[ToolEntry]> {
    INTERNED.share(tools.into())
}

/// Equal lists: the same tools as the device sent them, in the same order (the name and the
/// user-only mark come from that JSON).
pub(super) fn same(a: &[ToolEntry], b: &[ToolEntry]) -> bool {
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
        assert!(Arc::ptr_eq(&a.0, &b.0));
        assert!(!Arc::ptr_eq(&a.0, &c.0), "the order is part of a list");
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
        let live = INTERNED.entries();
        assert!(live < 1000, "dead lists are swept: {live} entries after 1000 lists that died at once");
    }
}
