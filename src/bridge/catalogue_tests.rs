//! The catalogue brought up to date from the links' change log: only the devices that changed
//! are looked at, a catalogue that missed many epochs ends where a full pass would, an overflowed
//! log falls back to a full pass, and a device that came and went between two reads leaves nothing.

use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::LazyLock;

use serde_json::json;

use super::*;
use crate::links::changes::Log;
use crate::links::handle::{TestLink, test_handle};
use crate::session::{DeviceInfo, ToolEntry};
use crate::wire::identity::Identity;

fn tools(names: &[&str]) -> ToolList {
    let entries = names.iter().map(|n| ToolEntry::from_value(&json!({"name": n, "description": "a tool", "inputSchema": {"type": "object", "properties": {}}})).unwrap());
    ToolList::shared(entries.collect())
}

fn id(i: usize) -> String {
    format!("02:00:00:00:{:02x}:{:02x}", i / 256, i % 256)
}

/// A test fleet: the connected devices, their links (dropping one is the device leaving), and
/// the change log the catalogue reads.
struct Fleet {
    devices: BTreeMap<String, (DeviceHandle, TestLink)>,
    log: Log,
    generation: u64,
}

impl Fleet {
    fn new(kept: usize) -> Self {
        Self { devices: BTreeMap::new(), log: Log::new(kept), generation: 1 }
    }

    /// A device connects (again, if it was) with these tools.
    fn join(&mut self, device_id: &str, list: &ToolList) {
        self.generation += 1;
        let (handle, link) = test_handle(device_id, self.generation);
        self.relist(&link, device_id, list);
        self.devices.insert(device_id.to_string(), (handle, link));
        self.log.changed(device_id);
    }

    /// The device lists other tools on the same connection.
    fn change_tools(&mut self, device_id: &str, list: &ToolList) {
        let (_, link) = &self.devices[device_id];
        self.relist(link, device_id, list);
        self.log.changed(device_id);
    }

    fn relist(&self, link: &TestLink, device_id: &str, list: &ToolList) {
        let identity = Identity { device_id: device_id.to_string(), client_id: None, token: None, protocol_version: 1 };
        let mut info = DeviceInfo::new(identity, "websocket", "s");
        info.tools = list.clone();
        link.publish(info);
    }

    fn leave(&mut self, device_id: &str) {
        self.devices.remove(device_id);
        self.log.changed(device_id);
    }

    /// Brings `c` up to date from the log; returns how many devices it looked up one by one,
    /// and whether it made a full pass.
    fn update(&self, c: &mut Catalogue) -> (usize, bool) {
        self.update_by(c, &rules())
    }

    fn update_by(&self, c: &mut Catalogue, rules: &Rules<'_>) -> (usize, bool) {
        let (epoch, what) = self.log.since(c.epoch);
        let what = if c.next_seq == 0 { Changes::All } else { what };
        let (looked_up, full) = (Cell::new(0), Cell::new(false));
        let devices = Devices {
            all: || {
                full.set(true);
                self.devices.values().map(|(h, _)| h.clone()).collect()
            },
            one: |id: &str| {
                looked_up.set(looked_up.get() + 1);
                self.devices.get(id).map(|(h, _)| h.clone())
            },
        };
        c.update(epoch, what, rules, devices);
        (looked_up.get(), full.get())
    }
}

fn rules() -> Rules<'static> {
    static ALIASES: LazyLock<HashMap<String, String>> = LazyLock::new(HashMap::new);
    Rules { scope: &Scope::All, naming: Naming::Prefixed, user_tools: true, aliases: &ALIASES }
}

/// What a host sees: each tool's name and the device and tool it calls, in listing order.
fn offered(c: &Catalogue) -> Vec<(String, Option<String>, String)> {
    c.all().iter().map(|(name, o)| (name.clone(), o.device.as_ref().map(|d| d.device_id.clone()), o.device_name().to_string())).collect()
}

fn names(c: &Catalogue) -> Vec<String> {
    offered(c).into_iter().map(|(name, _, _)| name).collect()
}

fn as_set(c: &Catalogue) -> BTreeSet<(String, Option<String>, String)> {
    offered(c).into_iter().collect()
}

#[test]
fn a_join_in_a_large_fleet_looks_at_that_device_only() {
    let stock = tools(&["self.get_device_status", "self.audio_speaker.set_volume"]);
    let mut fleet = Fleet::new(64);
    for i in 0..2000 {
        fleet.join(&id(i), &stock);
    }
    let mut c = Catalogue::default();
    assert_eq!(fleet.update(&mut c), (0, true), "a new catalogue makes one full pass");
    assert_eq!(c.len(), 1 + 2 * 2000);
    let before = offered(&c);

    fleet.join("02:00:00:ff:00:01", &tools(&["self.lamp.on"]));
    assert_eq!(fleet.update(&mut c), (1, false), "one device changed: one looked up, no pass over the fleet");
    let after = offered(&c);
    assert_eq!(after.len(), before.len() + 1);
    assert_eq!(&after[..before.len()], &before[..], "nobody else's entries moved");
    assert_eq!(after.last().unwrap().0, "dev-020000ff0001.self.lamp.on", "the newcomer comes last");
    // Nothing changed: nothing is looked at.
    assert_eq!(fleet.update(&mut c), (0, false));

    fleet.leave("02:00:00:ff:00:01");
    assert_eq!(fleet.update(&mut c), (1, false));
    assert_eq!(offered(&c), before);
    assert!(c.get("dev-020000ff0001.self.lamp.on").is_none());
    assert_eq!(c.templates.len(), 1, "the list nobody uses any more is let go");
}

#[test]
fn a_catalogue_that_missed_many_epochs_ends_where_one_that_followed_every_change_does() {
    let (a, b) = (tools(&["self.a"]), tools(&["self.a", "self.b"]));
    let mut fleet = Fleet::new(1024);
    for i in 0..50 {
        fleet.join(&id(i), &a);
    }
    let (mut every, mut behind) = (Catalogue::default(), Catalogue::default());
    fleet.update(&mut every);
    fleet.update(&mut behind);
    let cursor = behind.page(None, 10).unwrap().next_cursor.unwrap();
    // Joins, leaves, re-lists, reconnections and a device that comes back: 120 changes.
    for i in 0..40 {
        match i % 4 {
            0 => fleet.leave(&id(i)),
            1 => fleet.change_tools(&id(i), &b),
            2 => fleet.join(&id(i), &a),
            _ => fleet.join(&id(100 + i), &b),
        }
        fleet.update(&mut every);
    }
    fleet.join(&id(0), &b);
    fleet.update(&mut every);
    let (looked_up, full) = fleet.update(&mut behind);
    assert!(!full, "the log still held every change");
    assert_eq!(looked_up, 40, "each device that changed, once");
    assert_eq!(as_set(&behind), as_set(&every));
    let mut fresh = Catalogue::default();
    fleet.update(&mut fresh);
    assert_eq!(as_set(&behind), as_set(&fresh));
    // The cursor taken before the changes still reads on, with no tool listed twice.
    let rest = behind.page(Some(&cursor), 10_000).unwrap().tools;
    let names: BTreeSet<_> = rest.iter().map(|t| t.name.to_string()).collect();
    assert_eq!(names.len(), rest.len());
}

#[test]
fn a_catalogue_behind_an_overflowed_log_makes_a_full_pass_and_misses_nothing() {
    let stock = tools(&["self.a"]);
    let mut fleet = Fleet::new(8);
    for i in 0..20 {
        fleet.join(&id(i), &stock);
    }
    let mut c = Catalogue::default();
    fleet.update(&mut c);
    // The first change (device 0 leaving) falls out of the log before the catalogue reads it.
    fleet.leave(&id(0));
    for i in 100..110 {
        fleet.join(&id(i), &stock);
    }
    let (_, full) = fleet.update(&mut c);
    assert!(full, "the log overflowed: a full pass");
    assert!(c.get(&format!("dev-{}.self.a", id(0).replace(':', ""))).is_none(), "the departure that fell out of the log is seen");
    assert_eq!(c.len(), 1 + 19 + 10);
    assert_eq!(fleet.update(&mut c), (0, false), "and then it is current");
}

#[test]
fn a_device_that_joined_and_left_between_two_reads_leaves_nothing_behind() {
    let stock = tools(&["self.a"]);
    let mut fleet = Fleet::new(64);
    fleet.join(&id(1), &stock);
    let mut c = Catalogue::default();
    fleet.update(&mut c);
    let before = offered(&c);
    let passing = tools(&["self.only_the_passing_device_has_this"]);
    fleet.join(&id(2), &passing);
    fleet.change_tools(&id(2), &stock);
    fleet.leave(&id(2));
    // And one that reconnected in between: its new connection is what is offered.
    fleet.leave(&id(1));
    fleet.join(&id(1), &stock);
    assert_eq!(fleet.update(&mut c), (2, false));
    assert_eq!(offered(&c).len(), before.len());
    assert!(offered(&c).iter().all(|(_, d, _)| d.as_deref() != Some(&id(2))));
    assert_eq!(c.templates.len(), 1, "no template is kept for the passing device's lists");
    let generation = fleet.devices[&id(1)].0.generation;
    assert!(c.get(&before[1].0).unwrap().device.as_ref().is_some_and(|d| d.generation == generation), "the new connection is called");
}

#[test]
fn a_derived_name_is_found_as_listed_and_no_other_spelling_is() {
    let list = tools(&["self.a", "self.a", "bad name", "self.b.c"]);
    let mut fleet = Fleet::new(64);
    fleet.join("02:00:00:00:00:ab", &list);
    fleet.join(&id(2), &tools(&["self.a"]));
    let mut c = Catalogue::default();
    fleet.update(&mut c);
    // `offered` also finds each listed name with `get`, at the same tool.
    assert_eq!(names(&c), ["list_devices", "dev-020000000002.self.a", "dev-0200000000ab.self.a", "dev-0200000000ab.self.b.c"]);
    assert_eq!(c.len(), 4);
    assert_eq!(c.get("dev-0200000000ab.self.b.c").unwrap().device_name(), "self.b.c");
    for name in [
        "DEV-0200000000ab.self.a",
        "dev-0200000000AB.self.a",
        "dev-02:00:00:00:00:ab.self.a",
        "dev-0200000000ab.bad name",
        "dev-0200000000ab.self.b",
        "dev-0200000000ab.",
        "dev-0200000000ab",
        "dev-020000000003.self.a",
        "dev-0200000000ab.self.a ",
        ".self.a",
        "self.a",
    ] {
        assert!(c.get(name).is_none(), "{name:?} is no tool's name");
    }
    assert!(c.index.is_empty(), "no name is kept for a derived one");
}

#[test]
fn an_alias_is_its_device_s_only_prefix_and_claims_the_name_it_spells() {
    let aliases = HashMap::from([("kitchen".to_string(), id(1)), ("dev-020000000002".to_string(), id(3))]);
    let rules = Rules { scope: &Scope::All, naming: Naming::Prefixed, user_tools: true, aliases: &aliases };
    let stock = tools(&["self.a"]);
    let mut fleet = Fleet::new(64);
    for i in 1..=3 {
        fleet.join(&id(i), &stock);
    }
    let mut c = Catalogue::default();
    fleet.update_by(&mut c, &rules);
    assert_eq!(names(&c), ["list_devices", "kitchen.self.a", "dev-020000000002.self.a"]);
    let called = |c: &Catalogue, name: &str| c.get(name).and_then(|o| o.device.map(|d| d.device_id.clone()));
    assert_eq!(called(&c, "kitchen.self.a"), Some(id(1)));
    assert_eq!(called(&c, "dev-020000000001.self.a"), None, "an aliased device answers to its alias only");
    assert_eq!(called(&c, "dev-020000000002.self.a"), Some(id(3)), "the alias's device, not the device whose MAC it spells");
    // The device that spells the alias stays out whichever order the two come in.
    fleet.leave(&id(3));
    fleet.update_by(&mut c, &rules);
    assert_eq!(called(&c, "dev-020000000002.self.a"), None);
    fleet.join(&id(3), &stock);
    fleet.update_by(&mut c, &rules);
    assert_eq!(called(&c, "dev-020000000002.self.a"), Some(id(3)));
    assert_eq!(c.len(), 3);
}

#[test]
fn user_only_tools_are_offered_only_when_asked_for() {
    let list = ToolList::shared(vec![
        ToolEntry::from_value(&json!({"name": "self.for_all", "inputSchema": {"type": "object"}})).unwrap(),
        ToolEntry::from_value(&json!({"name": "self.for_users", "inputSchema": {"type": "object"}, "annotations": {"audience": ["user"]}})).unwrap(),
    ]);
    let mut fleet = Fleet::new(64);
    fleet.join(&id(1), &list);
    for (naming, user_tools, expected) in [
        (Naming::Prefixed, false, vec!["list_devices", "dev-020000000001.self.for_all"]),
        (Naming::Prefixed, true, vec!["list_devices", "dev-020000000001.self.for_all", "dev-020000000001.self.for_users"]),
        (Naming::Plain, false, vec!["list_devices", "self.for_all"]),
    ] {
        let rules = Rules { scope: &Scope::All, naming, user_tools, aliases: &HashMap::new() };
        let mut c = Catalogue::default();
        fleet.update_by(&mut c, &rules);
        assert_eq!(names(&c), expected, "{naming:?}, user tools {user_tools}");
        assert_eq!(c.get("dev-020000000001.self.for_users").is_some(), user_tools && naming == Naming::Prefixed);
        assert!(c.get("self.for_users").is_none());
    }
}

#[test]
fn plain_names_are_kept_one_by_one_and_never_move() {
    let rules = Rules { scope: &Scope::All, naming: Naming::Plain, user_tools: true, aliases: &HashMap::new() };
    let (a, ab) = (tools(&["self.a"]), tools(&["self.a", "self.b"]));
    let mut fleet = Fleet::new(64);
    fleet.join(&id(2), &a);
    fleet.join(&id(1), &a);
    let mut c = Catalogue::default();
    fleet.update_by(&mut c, &rules);
    // Joined together: device-id order decides who gets the plain name.
    assert_eq!(names(&c), ["list_devices", "self.a", "dev-020000000002.self.a"]);
    // A re-list keeps the device's names; its new tool is plain, being free.
    fleet.change_tools(&id(2), &ab);
    fleet.update_by(&mut c, &rules);
    assert_eq!(names(&c), ["list_devices", "self.a", "dev-020000000002.self.a", "self.b"]);
    // The holder of `self.a` leaves: nobody else's name changes, and a newcomer gets the free name.
    fleet.leave(&id(1));
    fleet.join(&id(3), &a);
    fleet.update_by(&mut c, &rules);
    assert_eq!(names(&c), ["list_devices", "dev-020000000002.self.a", "self.b", "self.a"]);
    assert_eq!(c.get("self.a").unwrap().device.unwrap().device_id, id(3));
    assert_eq!(c.index.len(), c.len() - 1, "every plain-mode name is kept (the hub's own tool is not a given name)");
}

#[test]
fn a_listing_in_progress_while_devices_come_and_go_has_no_duplicates_and_no_departed_device() {
    let stock = tools(&["self.a", "self.b", "self.c"]);
    let prefix = |i: usize| format!("dev-{}.", id(i).replace(':', ""));
    let mut fleet = Fleet::new(1024);
    for i in (0..30).chain([200]) {
        fleet.join(&id(i), &stock);
    }
    let mut c = Catalogue::default();
    fleet.update(&mut c);
    let (mut seen, mut cursor, mut round) = (Vec::<String>::new(), None, 0);
    // Devices that left before the listing showed any of their tools.
    let mut unseen_gone = Vec::new();
    loop {
        let page = c.page(cursor.as_deref(), 4).unwrap();
        seen.extend(page.tools.iter().map(|t| t.name.to_string()));
        let Some(next) = page.next_cursor else { break };
        cursor = Some(next);
        // Between pages: a device ahead leaves, one behind leaves, one re-lists and one joins.
        round += 1;
        for i in [29usize.saturating_sub(round), round / 2] {
            if fleet.devices.contains_key(&id(i)) {
                fleet.leave(&id(i));
                if !seen.iter().any(|n| n.starts_with(&prefix(i))) {
                    unseen_gone.push(i);
                }
            }
        }
        fleet.change_tools(&id(200), &tools(&["self.a", "self.b", "self.c", &format!("self.new{round}")]));
        if round <= 40 {
            fleet.join(&id(100 + round), &stock);
        }
        fleet.update(&mut c);
    }
    let unique: BTreeSet<_> = seen.iter().collect();
    assert_eq!(unique.len(), seen.len(), "no tool is listed twice");
    assert!(unseen_gone.len() >= 5, "the test makes devices leave ahead of the listing ({unseen_gone:?})");
    for i in unseen_gone {
        assert!(!seen.iter().any(|n| n.starts_with(&prefix(i))), "device {i} had left when the listing came to it");
    }
    assert!(seen.iter().any(|n| n.starts_with(&prefix(100 + round.min(40)))), "a device that joined during the listing is reached");
    let relisted = seen.iter().filter(|n| n.starts_with(&format!("{}self.new", prefix(200)))).count();
    assert_eq!(relisted, 1, "a device that re-lists keeps its place and shows the list it had when the listing came to it");
}

#[test]
fn a_device_s_own_endpoint_offers_a_tool_named_like_the_hub_s() {
    let rules = Rules { scope: &Scope::Device(id(1)), naming: Naming::Prefixed, user_tools: true, aliases: &HashMap::new() };
    let mut fleet = Fleet::new(64);
    fleet.join(&id(1), &tools(&["list_devices", "self.a"]));
    let mut c = Catalogue::default();
    fleet.update_by(&mut c, &rules);
    assert_eq!(names(&c), ["list_devices", "self.a"]);
    assert_eq!(c.get("list_devices").unwrap().device.unwrap().device_id, id(1), "the device's, on its own endpoint");
    // On /mcp the hub's own tool keeps its name, and the device's is under its prefix.
    let mut all = Catalogue::default();
    fleet.update(&mut all);
    assert_eq!(names(&all), ["list_devices", "dev-020000000001.list_devices", "dev-020000000001.self.a"]);
    assert!(all.get("list_devices").unwrap().device.is_none());
}
