//! The tools an endpoint offers, kept and updated per device rather than rebuilt: each endpoint
//! (`/mcp`, each `/devices/<id>/mcp` in use) holds one catalogue, shared by all its sessions.
//!
//! Rules:
//! - **Updated by what changed, in O(what changed).** When the links' tools epoch moved, the
//!   catalogue asks the links' change log ([`changes`](crate::links::changes)) which devices
//!   changed since its own epoch, and looks at those only: it compares each one's connection and
//!   tool list by identity (a pointer: lists are interned, see
//!   [`ToolList`](crate::session::ToolList)) with what it holds, and a device that joined, left,
//!   reconnected or changed its tools is taken out and added again. The cost is those devices'
//!   tools, whatever the fleet's size. A catalogue that fell further behind than the log keeps
//!   (a fleet coming back at once) makes one full pass over the endpoint's devices instead, a
//!   pointer comparison each.
//! - **Nothing kept per tool when names are derived.** With `--mcp-names prefixed` (the default)
//!   a tool's name is `<prefix>.<tool>`, which names its device and its tool: the catalogue keeps
//!   one entry per device (its place, its connection, its shared list) and computes a page's
//!   names, and finds a called name by its prefix and the list's own index of names. Only names
//!   that were given one by one (`--mcp-names plain`, a device's own endpoint) are kept and
//!   indexed, since who got a plain name first is not derivable.
//! - **Stable order, stable cursors.** Entries are ordered by when their device joined (devices
//!   that join together in device-id order), then by the tool's place in the device's list; a
//!   device that re-lists keeps its place. A `tools/list` cursor names the next entry's place,
//!   not an index, so a listing in progress while devices come and go has no duplicates, never
//!   shows a tool of a device that left, and reaches devices that joined behind it.
//! - **Equal lists converted once.** Devices running the same firmware list the same tools (one
//!   interned list): its tools are converted to MCP tools once, with an index of their names, and
//!   every device that lists them shares both.
//! - **Names never move.** A prefixed name is its device's for good: a device whose `dev-<hex>`
//!   prefix is another device's alias offers nothing under it (logged), so no configuration
//!   gives one name to two devices. With `--mcp-names plain` a device gets its tool's own name if
//!   no connected device holds it, and keeps it while it stays connected (also across re-lists);
//!   a device that joins later with the same tool gets `<prefix>.<tool>`, and keeps that. A plain
//!   name that looks like another device's prefixed name (`dev-<hex>.…`, `<alias>.…`) is never
//!   given, so no device can squat another's tools; nor is a fleet tool's name
//!   (`search_devices`, …), so none can squat the hub's.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, RwLock};

use rmcp::model::Tool;
use serde_json::{Value, json};

use super::{Naming, Scope, naming};
use crate::links::DeviceHandle;
use crate::links::changes::{self, Changes};
use crate::session::ToolList;

/// One tool as an endpoint offers it, made when it is asked for (the catalogue keeps none): its
/// device, and its tool in the converted list that every device listing the same tools shares.
#[derive(Clone)]
pub struct Offered {
    /// The device that runs it; `None` for the hub's own `list_devices`.
    pub device: Option<Arc<DeviceHandle>>,
    /// Its list, converted; its own tool is at `at`, and is a valid MCP tool.
    converted: Arc<Converted>,
    at: usize,
}

impl Offered {
    fn converted(&self) -> &Tool {
        self.converted.tools[self.at].as_ref().expect("only valid tools are offered")
    }

    /// The tool's name on its device.
    pub fn device_name(&self) -> &str {
        &self.converted().name
    }

    /// Its arguments' schema.
    pub fn input_schema(&self) -> &Arc<rmcp::model::JsonObject> {
        &self.converted().input_schema
    }
}

/// An entry's place: the join order of its device (0: the hub's own tool), then its tool's
/// place in the device's list, from 1.
type Place = (u64, u32);

/// What decides which tools an endpoint offers, and under which names.
pub struct Rules<'a> {
    pub scope: &'a Scope,
    pub naming: Naming,
    pub user_tools: bool,
    pub aliases: &'a HashMap<String, String>,
}

/// A tool list's tools as MCP tools, converted once for every device that lists it.
struct Converted {
    /// The list itself (held, so that its identity stays the key of this conversion).
    list: ToolList,
    /// Each tool as an MCP tool; `None`: not a valid MCP tool, or a name the list has already.
    tools: Box<[Option<Tool>]>,
    /// Where each name is first in the list.
    by_name: HashMap<Box<str>, u32>,
}

impl Converted {
    fn new(list: ToolList, device_id: &str) -> Self {
        let mut by_name = HashMap::with_capacity(list.len());
        let mut tools = Vec::with_capacity(list.len());
        for (i, t) in list.iter().enumerate() {
            if by_name.contains_key(t.name.as_str()) {
                tracing::warn!(device = %device_id, tool = %t.name, "the device lists this tool twice; offering the first");
                tools.push(None);
                continue;
            }
            by_name.insert(t.name.as_str().into(), i as u32);
            let tool = to_tool(&t.name, &t.value());
            if tool.is_none() {
                tracing::warn!(device = %device_id, tool = %t.name, "the device's tool declaration is not a valid MCP tool; not offered");
            }
            tools.push(tool);
        }
        Self { list, tools: tools.into(), by_name }
    }
}

/// A device as the catalogue holds it: one entry, whatever its number of tools.
struct Joined {
    seq: u64,
    handle: Arc<DeviceHandle>,
    converted: Arc<Converted>,
    /// Its prefix when that is an alias (else `dev-` and its Device-Id's hex digits).
    alias: Option<Box<str>>,
    /// Its tools' names when they were given one by one (`None`: that tool is not offered);
    /// `None` when every tool is offered under its derived name, `<prefix>.<tool>`.
    given: Option<Box<[Option<Arc<str>>]>>,
    /// How many tools it offers.
    offered: usize,
}

impl Joined {
    /// Whether a name's prefix is this device's.
    fn answers_to(&self, prefix: &str) -> bool {
        match &self.alias {
            Some(alias) => **alias == *prefix,
            None => naming::is_default_prefix(prefix, &self.handle.device_id),
        }
    }

    fn prefix(&self) -> Cow<'_, str> {
        match &self.alias {
            Some(alias) => Cow::Borrowed(alias),
            None => Cow::Owned(naming::default_prefix(&self.handle.device_id)),
        }
    }
}

/// The hub's own tool on `/mcp`, at place (0, 0); no device's tool takes its name.
const HUB_TOOL: &str = "list_devices";

/// Every tool of one endpoint.
#[derive(Default)]
pub struct Catalogue {
    epoch: u64,
    next_seq: u64,
    /// Each device's join order, by Device-Id.
    devices: HashMap<String, u64>,
    /// The devices, in join order.
    joined: BTreeMap<u64, Joined>,
    /// The devices whose prefix is an alias, by alias (derived names only).
    aliased: HashMap<Box<str>, u64>,
    /// Names given one by one (empty with derived names: a call then hashes no name).
    index: HashMap<Arc<str>, Place>,
    /// The hub's own `list_devices` (on `/mcp`), at place (0, 0).
    hub_tool: Option<Arc<Converted>>,
    /// Each distinct tool list in use, converted, by the list's identity.
    templates: HashMap<usize, Template>,
    user_tools: bool,
    len: usize,
}

/// A list's conversion and how many devices use it.
struct Template {
    converted: Arc<Converted>,
    users: usize,
}

/// A `tools/list` page: its tools and the next page's cursor.
pub struct Page {
    pub tools: Vec<Tool>,
    pub next_cursor: Option<String>,
}

/// An entry as a listing walks it.
struct Entry<'a> {
    place: Place,
    name: Cow<'a, str>,
    converted: &'a Arc<Converted>,
    at: usize,
}

impl Entry<'_> {
    fn tool(self) -> Tool {
        let mut tool = self.converted.tools[self.at].clone().expect("only valid tools are offered");
        tool.name = self.name.into_owned().into();
        tool
    }
}

impl Catalogue {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The tool offered under `name`: a name given one by one, or a derived name read as its
    /// prefix (an alias, or `dev-<hex>`) and its device's tool.
    pub fn get(&self, name: &str) -> Option<Offered> {
        if name == HUB_TOOL
            && let Some(hub) = &self.hub_tool
        {
            return Some(Offered { device: None, converted: hub.clone(), at: 0 });
        }
        // An empty map (derived names) answers without hashing the name.
        if let Some(&(seq, at)) = self.index.get(name) {
            let j = self.joined.get(&seq)?;
            return Some(Offered { device: Some(j.handle.clone()), converted: j.converted.clone(), at: at as usize - 1 });
        }
        let (prefix, tool) = name.split_once('.')?;
        let seq = match self.aliased.get(prefix) {
            Some(&seq) => seq,
            None => *self.devices.get(naming::mac_in_prefix(prefix)?.as_str())?,
        };
        let j = self.joined.get(&seq)?;
        let at = *j.converted.by_name.get(tool)? as usize;
        if j.given.is_some() || !j.answers_to(prefix) || !self.derivable(j, at) || !naming::is_valid(name) {
            return None;
        }
        Some(Offered { device: Some(j.handle.clone()), converted: j.converted.clone(), at })
    }

    /// Whether a device whose names are derived offers its tool at `at` (if the name fits).
    fn derivable(&self, j: &Joined, at: usize) -> bool {
        j.converted.tools[at].is_some() && (self.user_tools || !j.converted.list[at].user_only)
    }

    /// Up to `size` tools from `cursor` on; an unreadable cursor is the error.
    pub fn page(&self, cursor: Option<&str>, size: usize) -> Result<Page, String> {
        let start = match cursor {
            None => (0, 0),
            Some(c) => parse_cursor(c).ok_or_else(|| format!("Invalid cursor: {c}"))?,
        };
        let mut entries = self.entries_from(start);
        let tools = entries.by_ref().take(size.max(1)).map(Entry::tool).collect();
        let next_cursor = entries.next().map(|e| format!("{}.{}", e.place.0, e.place.1));
        Ok(Page { tools, next_cursor })
    }

    /// The entries at `start` and after, in order.
    fn entries_from(&self, start: Place) -> impl Iterator<Item = Entry<'_>> {
        let hub = self.hub_tool.as_ref().filter(|_| start <= (0, 0));
        let hub = hub.map(|converted| Entry { place: (0, 0), name: Cow::Borrowed(HUB_TOOL), converted, at: 0 });
        let devices = self.joined.range(start.0.max(1)..).flat_map(move |(&seq, j)| {
            let from = if seq == start.0 { start.1.saturating_sub(1) as usize } else { 0 };
            let prefix = j.given.is_none().then(|| j.prefix());
            (from..j.converted.tools.len()).filter_map(move |at| {
                let name = match (&j.given, &prefix) {
                    (Some(given), _) => Cow::Borrowed(&**given[at].as_ref()?),
                    (None, Some(prefix)) if self.derivable(j, at) => Cow::Owned(naming::qualify(prefix, &j.converted.list[at].name)?),
                    _ => return None,
                };
                Some(Entry { place: (seq, at as u32 + 1), name, converted: &j.converted, at })
            })
        });
        hub.into_iter().chain(devices)
    }

    /// Every entry's name, in order, and what [`get`](Self::get) finds by that name (for tests:
    /// a listed name that is not found, or is found elsewhere, panics).
    #[cfg(test)]
    fn all(&self) -> Vec<(String, Offered)> {
        let found = |e: Entry<'_>| {
            let offered = self.get(&e.name).unwrap_or_else(|| panic!("{} is listed but not found", e.name));
            assert!(Arc::ptr_eq(&offered.converted, e.converted) && offered.at == e.at, "{} is found elsewhere", e.name);
            (e.name.into_owned(), offered)
        };
        self.entries_from((0, 0)).map(found).collect()
    }

    /// Brings the catalogue up to date, at `epoch`, with what changed since its own epoch: the
    /// devices named by `changes` (looked up with `one`), or every device of the endpoint (`all`).
    fn update(&mut self, epoch: u64, changes: Changes, rules: &Rules<'_>, devices: Devices<impl FnOnce() -> Vec<DeviceHandle>, impl Fn(&str) -> Option<DeviceHandle>>) {
        if self.next_seq == 0 {
            self.next_seq = 1;
            self.user_tools = rules.user_tools;
            if *rules.scope == Scope::All {
                let hub = ToolList::shared(vec![crate::session::ToolEntry::from_value(&list_devices_tool()).expect("list_devices is a tool")]);
                self.hub_tool = Some(Arc::new(Converted::new(hub, "hub")));
                self.len = 1;
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
        let joined = self.devices.get(&handle.device_id).and_then(|seq| self.joined.get(seq));
        joined.is_some_and(|j| j.handle.generation == handle.generation && j.converted.list.same_list(tools))
    }

    fn add_devices(&mut self, rules: &Rules<'_>, mut joining: Vec<(DeviceHandle, ToolList)>) {
        // Devices that join together take their places in device-id order.
        joining.sort_by(|a, b| a.0.device_id.cmp(&b.0.device_id));
        for (handle, tools) in joining {
            self.add_device(rules, handle, tools);
        }
    }

    /// Takes a device out, with its given names.
    fn remove_device(&mut self, device_id: &str) -> Option<Joined> {
        let seq = self.devices.remove(device_id)?;
        let joined = self.joined.remove(&seq)?;
        let identity = joined.converted.list.identity();
        if let Some(t) = self.templates.get_mut(&identity) {
            t.users -= 1;
            if t.users == 0 {
                self.templates.remove(&identity);
            }
        }
        if let Some(alias) = &joined.alias {
            self.aliased.remove(alias);
        }
        for name in joined.given.iter().flatten().flatten() {
            self.index.remove(name);
        }
        self.len -= joined.offered;
        Some(joined)
    }

    /// Adds (or adds again, after a re-list) a device's tools.
    fn add_device(&mut self, rules: &Rules<'_>, handle: DeviceHandle, tools: ToolList) {
        // A re-list on the same connection keeps the device's place and its names.
        let before = self.remove_device(&handle.device_id).filter(|j| j.handle.generation == handle.generation);
        let seq = before.as_ref().map_or_else(
            || {
                self.next_seq += 1;
                self.next_seq - 1
            },
            |j| j.seq,
        );
        let prefix = naming::prefix_for(&handle.device_id, rules.aliases);
        let converted = self.template(&tools, &handle.device_id);
        let derived = *rules.scope == Scope::All && rules.naming == Naming::Prefixed;
        let mut joined = Joined { seq, handle: Arc::new(handle), converted, alias: None, given: None, offered: 0 };
        if !derived {
            let kept = before.as_ref().map(kept_names).unwrap_or_default();
            joined.given = Some(self.give_names(rules, &joined, &prefix, &kept));
        } else if prefix != naming::default_prefix(&joined.handle.device_id) {
            joined.alias = Some(prefix.as_str().into());
            self.aliased.insert(prefix.as_str().into(), seq);
        } else if rules.aliases.contains_key(&prefix) {
            tracing::warn!(device = %joined.handle.device_id, prefix = %prefix, "another device's alias is this device's prefix; its tools are not offered on /mcp (change the alias in mcpdev.toml)");
            joined.given = Some(vec![None; tools.len()].into());
        }
        joined.offered = match &joined.given {
            Some(given) => given.iter().flatten().count(),
            None => self.count_derived(&joined, &prefix),
        };
        self.len += joined.offered;
        self.devices.insert(joined.handle.device_id.clone(), seq);
        self.joined.insert(seq, joined);
    }

    /// How many tools a device with derived names offers (a name that does not fit is logged).
    fn count_derived(&self, j: &Joined, prefix: &str) -> usize {
        let offered = (0..j.converted.tools.len()).filter(|&at| self.derivable(j, at));
        offered
            .filter(|&at| {
                let fits = naming::qualify(prefix, &j.converted.list[at].name).is_some();
                if !fits {
                    tracing::warn!(device = %j.handle.device_id, tool = %j.converted.list[at].name, "tool name does not fit MCP's name rules; not offered");
                }
                fits
            })
            .count()
    }

    /// Gives a device's tools their names one by one (a device's own endpoint, or plain names
    /// on `/mcp`), in the index: a name it had before this re-list if still free, else its own
    /// name where allowed, else the prefixed one.
    fn give_names(&mut self, rules: &Rules<'_>, j: &Joined, prefix: &str, kept: &HashMap<String, Arc<str>>) -> Box<[Option<Arc<str>>]> {
        let mut given = vec![None; j.converted.tools.len()];
        for (at, tool) in j.converted.list.iter().enumerate() {
            if j.converted.tools[at].is_none() || (!rules.user_tools && tool.user_only) {
                continue;
            }
            let name = match kept.get(tool.name.as_str()) {
                Some(name) if !self.index.contains_key(name) => Some(name.clone()),
                _ if self.plain_allowed(rules, &tool.name) => Some(tool.name.as_str().into()),
                _ => naming::qualify(prefix, &tool.name).map(Arc::from),
            };
            match name {
                Some(name) if self.index.contains_key(&name) => {
                    tracing::warn!(device = %j.handle.device_id, tool = %tool.name, "another tool holds this name; not offered")
                }
                Some(name) => {
                    self.index.insert(name.clone(), (j.seq, at as u32 + 1));
                    given[at] = Some(name);
                }
                None => tracing::warn!(device = %j.handle.device_id, tool = %tool.name, "tool name does not fit MCP's name rules; not offered"),
            }
        }
        given.into()
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
                    && name != HUB_TOOL
                    && !self.index.contains_key(name)
                    && !super::fleet::is_fleet_tool(name)
                    && name.split_once('.').is_none_or(|(prefix, _)| naming::device_for_prefix(prefix, rules.aliases).is_none())
            }
        }
    }

    /// The list's tools as MCP tools, converted on the first device that lists it; one more user.
    fn template(&mut self, tools: &ToolList, device_id: &str) -> Arc<Converted> {
        let t = self.templates.entry(tools.identity()).or_insert_with(|| Template { converted: Arc::new(Converted::new(tools.clone(), device_id)), users: 0 });
        t.users += 1;
        t.converted.clone()
    }
}

/// The names a device's tools were given, by the tool's own name (kept across a re-list).
fn kept_names(j: &Joined) -> HashMap<String, Arc<str>> {
    let given = j.given.iter().flat_map(|g| g.iter().enumerate());
    given.filter_map(|(at, name)| Some((j.converted.list[at].name.to_string(), name.clone()?))).collect()
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
