//! The tools an endpoint offers, kept and updated per device rather than rebuilt: each endpoint
//! (`/mcp`, each `/devices/<id>/mcp` in use) holds one catalogue, shared by all its sessions.
//!
//! Rules:
//! - **Updated by what changed, in O(what changed).** When the links' tools epoch moved, the
//!   catalogue asks the links' change log ([`changes`](crate::links::changes)) which devices
//!   changed since its own epoch, and looks at those only: it compares each one's connection and
//!   tool list by identity (a pointer: lists are interned, see
//!   [`ToolList`](crate::session::ToolList)) with what it holds, and a device that joined, left,
//!   reconnected or changed its tools has its entries removed and added again. The cost is those
//!   devices' tools, whatever the fleet's size. A catalogue that fell further behind than the log
//!   keeps (a fleet coming back at once) makes one full pass over the endpoint's devices instead,
//!   a pointer comparison each.
//! - **Stable order, stable cursors.** Entries are ordered by when their device joined (devices
//!   that join together in device-id order), then by the device's own order; a device that
//!   re-lists keeps its place. A `tools/list` cursor names the next entry's place, not an index,
//!   so a listing in progress while devices come and go has no duplicates, never shows a tool of
//!   a device that left, and reaches devices that joined behind it.
//! - **Equal lists converted once.** Devices running the same firmware list the same tools (one
//!   interned list): its tools are converted to MCP tools once, and each device's entries share
//!   their schemas (`Arc`), differing only by name.
//! - **Names never move.** With `--mcp-names plain` a device gets its tool's own name if no
//!   connected device holds it, and keeps it while it stays connected (also across re-lists);
//!   a device that joins later with the same tool gets `<prefix>.<tool>`, and keeps that. A
//!   plain name that looks like another device's prefixed name (`dev-<hex>.…`, `<alias>.…`) is
//!   never given, so no device can squat another's tools; nor is a fleet tool's name
//!   (`search_devices`, …), so none can squat the hub's.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, RwLock};

use rmcp::model::Tool;
use serde_json::{Value, json};

use super::{Naming, Scope, naming};
use crate::links::DeviceHandle;
use crate::links::changes::{self, Changes};
use crate::session::ToolList;

/// One tool as an endpoint offers it: its name, its device, and its tool in the converted list
/// that every device listing the same tools shares (an entry costs its name and a few pointers,
/// kept in the catalogue's tree itself; a copy is a few reference counts).
#[derive(Clone)]
pub struct Offered {
    /// The name MCP clients call it by; the index's key is the same allocation.
    pub name: Arc<str>,
    /// The device that runs it (one handle per device, shared by its entries); `None` for the
    /// hub's own `list_devices`.
    pub device: Option<Arc<DeviceHandle>>,
    /// Its list, converted; its own tool is at `at`, and is a valid MCP tool.
    converted: Arc<[Option<Tool>]>,
    at: usize,
}

impl Offered {
    fn converted(&self) -> &Tool {
        self.converted[self.at].as_ref().expect("only valid tools are offered")
    }

    /// The tool's name on its device.
    pub fn device_name(&self) -> &str {
        &self.converted().name
    }

    /// Its arguments' schema.
    pub fn input_schema(&self) -> &Arc<rmcp::model::JsonObject> {
        &self.converted().input_schema
    }

    /// As `tools/list` shows it (under the name it is offered by).
    pub fn tool(&self) -> Tool {
        let mut tool = self.converted().clone();
        tool.name = self.name.to_string().into();
        tool
    }
}

/// An entry's place: the join order of its device, then its order on the device.
type Place = (u64, u32);

/// What decides which tools an endpoint offers, and under which names.
pub struct Rules<'a> {
    pub scope: &'a Scope,
    pub naming: Naming,
    pub user_tools: bool,
    pub aliases: &'a HashMap<String, String>,
}

/// A device as the catalogue holds it (its entries' names are in `entries`).
struct Joined {
    seq: u64,
    generation: u64,
    tools: ToolList,
}

/// Every tool of one endpoint.
#[derive(Default)]
pub struct Catalogue {
    epoch: u64,
    next_seq: u64,
    devices: HashMap<String, Joined>,
    entries: BTreeMap<Place, Offered>,
    index: HashMap<Arc<str>, Place>,
    /// Each distinct tool list in use, as MCP tools, by the list's identity.
    templates: HashMap<usize, Template>,
}

/// A tool list's tools as MCP tools (`None`: not a valid MCP tool), and how many devices use it.
struct Template {
    _list: ToolList,
    tools: Arc<[Option<Tool>]>,
    users: usize,
}

/// A `tools/list` page: its tools and the next page's cursor.
pub struct Page {
    pub tools: Vec<Tool>,
    pub next_cursor: Option<String>,
}

impl Catalogue {
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn get(&self, name: &str) -> Option<Offered> {
        self.index.get(name).and_then(|p| self.entries.get(p)).cloned()
    }

    /// Up to `size` tools from `cursor` on; an unreadable cursor is the error.
    pub fn page(&self, cursor: Option<&str>, size: usize) -> Result<Page, String> {
        let start = match cursor {
            None => (0, 0),
            Some(c) => parse_cursor(c).ok_or_else(|| format!("Invalid cursor: {c}"))?,
        };
        let mut range = self.entries.range(start..);
        let tools = range.by_ref().take(size.max(1)).map(|(_, o)| o.tool()).collect();
        let next_cursor = range.next().map(|(p, _)| format!("{}.{}", p.0, p.1));
        Ok(Page { tools, next_cursor })
    }

    /// Brings the catalogue up to date, at `epoch`, with what changed since its own epoch: the
    /// devices named by `changes` (looked up with `one`), or every device of the endpoint (`all`).
    fn update(&mut self, epoch: u64, changes: Changes, rules: &Rules<'_>, devices: Devices<impl FnOnce() -> Vec<DeviceHandle>, impl Fn(&str) -> Option<DeviceHandle>>) {
        if self.next_seq == 0 {
            self.next_seq = 1;
            if *rules.scope == Scope::All {
                let converted: Arc<[Option<Tool>]> = Arc::new([to_tool("list_devices", &list_devices_tool())]);
                self.insert((0, 0), "list_devices".into(), None, &converted, 0);
            }
        }
        self.epoch = epoch;
        let ids = match changes {
            Changes::All => return self.full_pass(rules, (devices.all)()),
            Changes::Devices(ids) => ids,
        };
        let mut joining = Vec::new();
        for id in ids {
            let now = (devices.one)(&id).and_then(|h| h.snapshot().map(|info| (h, info)));
            match now {
                Some((handle, info)) => {
                    if !self.holds(&handle, &info.tools) {
                        joining.push((handle, info.tools.clone()));
                    }
                }
                None => drop(self.remove_device(&id)),
            }
        }
        self.add_devices(rules, joining);
    }

    /// Compares every device of the endpoint with what the catalogue holds (a pointer each).
    fn full_pass(&mut self, rules: &Rules<'_>, devices: Vec<DeviceHandle>) {
        let mut present: HashMap<&str, ()> = HashMap::with_capacity(devices.len());
        let mut joining: Vec<(DeviceHandle, ToolList)> = Vec::new();
        for handle in &devices {
            let Some(info) = handle.snapshot() else { continue };
            present.insert(&handle.device_id, ());
            if !self.holds(handle, &info.tools) {
                joining.push((handle.clone(), info.tools.clone()));
            }
        }
        let gone: Vec<String> = self.devices.keys().filter(|id| !present.contains_key(id.as_str())).cloned().collect();
        for id in gone {
            self.remove_device(&id);
        }
        self.add_devices(rules, joining);
    }

    /// Whether the catalogue holds this connection of the device with this tool list.
    fn holds(&self, handle: &DeviceHandle, tools: &ToolList) -> bool {
        self.devices.get(&handle.device_id).is_some_and(|j| j.generation == handle.generation && j.tools.same_list(tools))
    }

    fn add_devices(&mut self, rules: &Rules<'_>, mut joining: Vec<(DeviceHandle, ToolList)>) {
        // Devices that join together take their places in device-id order.
        joining.sort_by(|a, b| a.0.device_id.cmp(&b.0.device_id));
        for (handle, tools) in joining {
            self.add_device(rules, handle, tools);
        }
    }

    /// Takes a device's entries out; returns it and them.
    fn remove_device(&mut self, device_id: &str) -> Option<(Joined, Vec<Offered>)> {
        let joined = self.devices.remove(device_id)?;
        if let Some(t) = self.templates.get_mut(&joined.tools.identity()) {
            t.users -= 1;
            if t.users == 0 {
                self.templates.remove(&joined.tools.identity());
            }
        }
        let places: Vec<Place> = self.entries.range((joined.seq, 0)..(joined.seq + 1, 0)).map(|(p, _)| *p).collect();
        let mut removed = Vec::with_capacity(places.len());
        for p in places {
            if let Some(o) = self.entries.remove(&p) {
                self.index.remove(&o.name);
                removed.push(o);
            }
        }
        Some((joined, removed))
    }

    /// Adds (or adds again, after a re-list) a device's tools.
    fn add_device(&mut self, rules: &Rules<'_>, handle: DeviceHandle, tools: ToolList) {
        // A re-list on the same connection keeps the device's place and its names.
        let before = self.remove_device(&handle.device_id).filter(|(j, _)| j.generation == handle.generation);
        let (seq, kept) = match before {
            Some((j, removed)) => (j.seq, removed.iter().map(|o| (o.device_name().to_string(), o.name.clone())).collect()),
            None => {
                self.next_seq += 1;
                (self.next_seq - 1, HashMap::new())
            }
        };
        let prefix = naming::prefix_for(&handle.device_id, rules.aliases);
        let template = self.template(&tools);
        let handle = Arc::new(handle);
        for (i, tool) in tools.iter().enumerate().filter(|(_, t)| rules.user_tools || !t.user_only) {
            let name = match kept.get(tool.name.as_str()) {
                Some(name) if !self.index.contains_key(name) => Some(name.clone()),
                _ if self.plain_allowed(rules, &tool.name) => Some(tool.name.as_str().into()),
                _ => naming::qualify(&prefix, &tool.name).map(Arc::from),
            };
            match name {
                Some(name) if self.index.contains_key(&name) => {
                    tracing::warn!(device = %handle.device_id, tool = %tool.name, "the device lists this tool twice; offering the first")
                }
                Some(name) => self.insert((seq, i as u32 + 1), name, Some(handle.clone()), &template, i),
                None => tracing::warn!(device = %handle.device_id, tool = %tool.name, "tool name does not fit MCP's name rules; not offered"),
            }
        }
        self.devices.insert(handle.device_id.clone(), Joined { seq, generation: handle.generation, tools });
    }

    /// Whether a tool may be offered under its own name: always on a device's own endpoint; on
    /// `/mcp` with plain naming, if no device holds the name and it does not look prefixed.
    fn plain_allowed(&self, rules: &Rules<'_>, name: &str) -> bool {
        if !naming::is_valid(name) {
            return false;
        }
        match rules.scope {
            Scope::Device(_) => true,
            Scope::All => {
                rules.naming == Naming::Plain
                    && !self.index.contains_key(name)
                    && !super::fleet::is_fleet_tool(name)
                    && name.split_once('.').is_none_or(|(prefix, _)| naming::device_for_prefix(prefix, rules.aliases).is_none())
            }
        }
    }

    /// The list's tools as MCP tools, converted on the first device that lists it; one more user.
    fn template(&mut self, tools: &ToolList) -> Arc<[Option<Tool>]> {
        let t = self.templates.entry(tools.identity()).or_insert_with(|| Template {
            _list: tools.clone(),
            tools: tools.iter().map(|t| to_tool(&t.name, &t.value())).collect(),
            users: 0,
        });
        t.users += 1;
        t.tools.clone()
    }

    /// Offers the tool at `at` of a converted list under `name`, at `place`.
    fn insert(&mut self, place: Place, name: Arc<str>, device: Option<Arc<DeviceHandle>>, converted: &Arc<[Option<Tool>]>, at: usize) {
        if converted.get(at).is_none_or(Option::is_none) {
            tracing::warn!(tool = %name, "the device's tool declaration is not a valid MCP tool; not offered");
            return;
        }
        self.index.insert(name.clone(), place);
        self.entries.insert(place, Offered { name, device, converted: converted.clone(), at });
    }
}

fn parse_cursor(c: &str) -> Option<Place> {
    let (seq, i) = c.split_once('.')?;
    Some((seq.parse().ok()?, i.parse().ok()?))
}

/// Most catalogues kept at once (one per endpoint: `/mcp` and each `/devices/<id>/mcp` in use);
/// beyond it, those of devices no longer connected are dropped.
const KEPT_MAX: usize = 1024;

/// The catalogues of every endpoint, by scope.
#[derive(Default)]
pub struct Catalogues {
    by_scope: Mutex<HashMap<Scope, Arc<RwLock<Catalogue>>>>,
}

/// Where a catalogue finds its endpoint's devices.
pub struct Devices<A, O> {
    /// Every connected device of the endpoint (for a full pass).
    pub all: A,
    /// The connected device with this Device-Id, if the endpoint offers it.
    pub one: O,
}

/// A catalogue, read-locked: nothing that can panic runs while it is held.
pub type Reading<'a> = std::sync::RwLockReadGuard<'a, Catalogue>;

impl Catalogues {
    /// The endpoint's catalogue, brought up to date first if a device changed since.
    pub fn read<T>(&self, rules: &Rules<'_>, devices: Devices<impl FnOnce() -> Vec<DeviceHandle>, impl Fn(&str) -> Option<DeviceHandle>>, f: impl FnOnce(&Catalogue) -> T) -> T {
        let epoch = changes::epoch();
        let kept = self.kept_for(rules.scope);
        {
            let c = kept.read().unwrap_or_else(std::sync::PoisonError::into_inner);
            if c.epoch == epoch && c.next_seq != 0 {
                return f(&c);
            }
        }
        let mut c = kept.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        if c.epoch != epoch || c.next_seq == 0 {
            // The epoch and its changes are read before the devices: a change made meanwhile
            // has a later epoch, and the next caller applies it.
            let (now, what) = changes::since(c.epoch);
            let what = if c.next_seq == 0 { Changes::All } else { what };
            c.update(now, what, rules, devices);
        }
        f(&c)
    }

    fn kept_for(&self, scope: &Scope) -> Arc<RwLock<Catalogue>> {
        let mut kept = self.lock();
        if let Some(c) = kept.get(scope) {
            return c.clone();
        }
        if kept.len() >= KEPT_MAX {
            kept.retain(|s, c| *s == Scope::All || c.read().is_ok_and(|c| !c.devices.is_empty()));
            if kept.len() >= KEPT_MAX {
                kept.retain(|s, _| *s == Scope::All);
            }
        }
        kept.entry(scope.clone()).or_default().clone()
    }

    /// How many catalogues are kept (for tests).
    pub fn kept(&self) -> usize {
        self.lock().len()
    }

    // Nothing that can panic runs under this lock.
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Scope, Arc<RwLock<Catalogue>>>> {
        self.by_scope.lock().unwrap_or_else(|e| e.into_inner())
    }
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

#[cfg(test)]
#[path = "catalogue_tests.rs"]
mod tests;
