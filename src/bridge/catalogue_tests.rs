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
        c.update(epoch, what, &rules(), devices);
        (looked_up.get(), full.get())
    }
}

fn rules() -> Rules<'static> {
    static ALIASES: LazyLock<HashMap<String, String>> = LazyLock::new(HashMap::new);
    Rules { scope: &Scope::All, naming: Naming::Prefixed, user_tools: true, aliases: &ALIASES }
}

/// What a host sees: each tool's name and the device and tool it calls, in listing order.
fn offered(c: &Catalogue) -> Vec<(String, Option<String>, String)> {
    c.entries.values().map(|o| (o.name.to_string(), o.device.as_ref().map(|d| d.device_id.clone()), o.device_name().to_string())).collect()
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
