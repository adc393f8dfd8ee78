//! The tools an endpoint offers, kept rather than rebuilt: a catalogue is built once per change
//! of any device's tools, phase or presence (the links' tools epoch,
//! [`tools_epoch`](crate::links::handle::tools_epoch)) and shared by every session of its
//! endpoint, with an index by exposed name, so a `tools/list` page costs what the page holds
//! and a call finds its tool in one lookup.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rmcp::model::Tool;
use serde_json::{Value, json};

use super::{Naming, Scope, naming};
use crate::links::DeviceHandle;
use crate::links::handle::tools_epoch;

/// One tool as an endpoint offers it.
pub struct Offered {
    /// The name MCP clients call it by.
    pub name: String,
    /// The device that runs it; `None` for the hub's own `list_devices`.
    pub device: Option<DeviceHandle>,
    /// The tool's name on its device.
    pub device_name: String,
    /// As `tools/list` shows it.
    pub tool: Tool,
}

/// Every tool of one endpoint, in a stable order.
pub struct Catalogue {
    epoch: u64,
    entries: Vec<Offered>,
    index: HashMap<String, usize>,
}

impl Catalogue {
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn page(&self, start: usize, end: usize) -> &[Offered] {
        &self.entries[start.min(self.entries.len())..end.min(self.entries.len())]
    }

    pub fn get(&self, name: &str) -> Option<&Offered> {
        self.index.get(name).map(|&i| &self.entries[i])
    }
}

/// What decides which tools an endpoint offers, and under which names.
pub struct Rules<'a> {
    pub scope: &'a Scope,
    pub naming: Naming,
    pub user_tools: bool,
    pub aliases: &'a HashMap<String, String>,
}

/// Most catalogues kept at once (one per endpoint: `/mcp` and each `/devices/<id>/mcp` in use);
/// beyond it, outdated ones are dropped.
const KEPT_MAX: usize = 1024;

/// The catalogues of every endpoint, by scope.
#[derive(Default)]
pub struct Catalogues {
    by_scope: Mutex<HashMap<Scope, Arc<Catalogue>>>,
}

impl Catalogues {
    /// The endpoint's catalogue, built again only if a device's tools changed since.
    pub fn get(&self, rules: &Rules<'_>, devices: impl FnOnce() -> Vec<DeviceHandle>) -> Arc<Catalogue> {
        // Read the epoch first: a change while building makes the next caller build again.
        let epoch = tools_epoch();
        if let Some(c) = self.lock().get(rules.scope).filter(|c| c.epoch == epoch) {
            return c.clone();
        }
        let built = Arc::new(build(epoch, rules, devices()));
        let mut kept = self.lock();
        if kept.len() >= KEPT_MAX {
            kept.retain(|_, c| c.epoch == epoch);
            if kept.len() >= KEPT_MAX {
                kept.clear();
            }
        }
        kept.insert(rules.scope.clone(), built.clone());
        built
    }

    /// How many catalogues are kept (for tests).
    pub fn kept(&self) -> usize {
        self.lock().len()
    }

    // Nothing that can panic runs under this lock.
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Scope, Arc<Catalogue>>> {
        self.by_scope.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn build(epoch: u64, rules: &Rules<'_>, devices: Vec<DeviceHandle>) -> Catalogue {
    let mut c = Catalogue { epoch, entries: Vec::new(), index: HashMap::new() };
    if *rules.scope == Scope::All {
        add(&mut c, "list_devices".into(), None, "list_devices".into(), &list_devices_tool());
    }
    for handle in devices {
        let Some(info) = handle.snapshot() else { continue };
        let prefix = naming::prefix_for(&handle.device_id, rules.aliases);
        for tool in info.tools.iter().filter(|t| rules.user_tools || !t.user_only) {
            let plain = *rules.scope != Scope::All || (rules.naming == Naming::Plain && !c.index.contains_key(&tool.name));
            let name = if plain && naming::is_valid(&tool.name) { Some(tool.name.clone()) } else { naming::qualify(&prefix, &tool.name) };
            match name {
                Some(name) if c.index.contains_key(&name) => {
                    tracing::warn!(device = %handle.device_id, tool = %tool.name, "the device lists this tool twice; offering the first")
                }
                Some(name) => add(&mut c, name, Some(handle.clone()), tool.name.clone(), &tool.value()),
                None => tracing::warn!(device = %handle.device_id, tool = %tool.name, "tool name does not fit MCP's name rules; not offered"),
            }
        }
    }
    c
}

fn add(c: &mut Catalogue, name: String, device: Option<DeviceHandle>, device_name: String, device_tool: &Value) {
    let Some(tool) = to_tool(&name, device_tool) else {
        tracing::warn!(tool = %device_name, "the device's tool declaration is not a valid MCP tool; not offered");
        return;
    };
    c.index.insert(name.clone(), c.entries.len());
    c.entries.push(Offered { name, device, device_name, tool });
}

pub fn list_devices_tool() -> Value {
    json!({
        "name": "list_devices",
        "description": "List the devices connected to this mcpdev hub: id, tool prefix, transport, state and tool count.",
        "inputSchema": {"type": "object", "properties": {}},
        "annotations": {"readOnlyHint": true, "idempotentHint": true},
    })
}

fn to_tool(name: &str, device_tool: &Value) -> Option<Tool> {
    let mut v = device_tool.clone();
    v["name"] = json!(name);
    // xiaozhi's user-only marker is not a standard tool annotation: keep it out of `annotations`.
    if v.pointer("/annotations/audience").is_some()
        && let Some(a) = v.get_mut("annotations").and_then(Value::as_object_mut)
    {
        a.remove("audience");
    }
    if v.get("inputSchema").is_none_or(|s| !s.is_object()) {
        v["inputSchema"] = json!({"type": "object", "properties": {}});
    }
    serde_json::from_value(v).ok()
}
