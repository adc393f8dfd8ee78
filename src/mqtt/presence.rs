//! What each hub of a cluster tells the others, and the cluster view built from it (I/O-free
//! apart from [`publish_index`]).
//!
//! - `mcpdev/hubs/<hub>` (retained, cleared by the hub's last will): the hub is alive.
//! - `mcpdev/index/<hub>` (retained): the devices it serves, one compact row each
//!   `[device_id, transport, phase, tool_count, connected_at_ms]` (~60 bytes), republished at most
//!   every [`INDEX_PERIOD`] and only when some device came, went, or changed phase or tools.
//!   A cluster at rest costs the broker nothing; one device's change costs one index of its
//!   hub. At most [`MAX_INDEX`] rows (~1 MB) per hub; beyond that the index says how many it left
//!   out, and those devices are reachable only through their own hub.
//!
//! Rules: a hub's index counts only while the hub is alive; the index of a hub that died says
//! which devices are *moving* (being taken over) until a survivor lists them or
//! [`DEAD_INDEX_GRACE`] passes, when a survivor clears it from the broker. Rows from the broker
//! are data: a row that is not a well-formed Device-Id is dropped, and every field is bounded.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::hub::Hub;
use crate::hub::remote::Located;
use crate::links::handle::tools_epoch;
use crate::wire::identity::{format_mac, parse_mac};

/// How often a hub looks whether its index changed.
pub const INDEX_PERIOD: Duration = Duration::from_millis(500);
/// Rows one hub's index holds at most.
pub const MAX_INDEX: usize = 16_384;
/// How long the index of a hub that died is kept as "moving" before it is cleared.
pub const DEAD_INDEX_GRACE: Duration = Duration::from_secs(30);

/// One device in a hub's index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    pub device_id: String,
    pub transport: String,
    pub phase: String,
    pub tools: u64,
    pub since_ms: u64,
}

/// A hub's index as published: compact rows, and the name its operator gave it, if any.
pub fn index_text(hub_id: &str, name: Option<&str>, rows: &[Row], left_out: usize) -> String {
    let rows: Vec<Value> = rows.iter().map(|r| json!([r.device_id, r.transport, r.phase, r.tools, r.since_ms])).collect();
    let mut v = json!({"hub": hub_id, "devices": rows, "left_out": left_out});
    if let Some(name) = name {
        v["name"] = json!(name);
    }
    v.to_string()
}

/// The longest hub name (`serve --hub-name`).
pub const MAX_HUB_NAME: usize = 32;

/// Whether `name` is a hub name a hub may give itself and show another's by: 1 to
/// [`MAX_HUB_NAME`] ASCII letters, digits, `.`, `-` or `_`, starting with a letter or digit
/// (it lands in tables, logs and JSON as it is: nothing to escape, nothing that reads as a flag).
pub fn valid_hub_name(name: &str) -> bool {
    (1..=MAX_HUB_NAME).contains(&name.len())
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
}

/// The name in a published index, if it has a valid one (another hub's is data like any).
pub fn parse_index_name(payload: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Named {
        name: Option<String>,
    }
    serde_json::from_slice::<Named>(payload).ok()?.name.filter(|n| valid_hub_name(n))
}

/// The rows of a published index; malformed rows are dropped.
pub fn parse_index(payload: &[u8]) -> Vec<Row> {
    let Ok(v) = serde_json::from_slice::<Value>(payload) else { return Vec::new() };
    let short = |v: &Value| v.as_str().filter(|s| s.len() <= 32).map(str::to_string);
    v["devices"]
        .as_array()
        .map(|rows| {
            rows.iter()
                .take(MAX_INDEX)
                .filter_map(|r| {
                    let device_id = format_mac(&parse_mac(r.get(0)?.as_str()?).ok()?);
                    Some(Row { device_id, transport: short(r.get(1)?)?, phase: short(r.get(2)?)?, tools: r.get(3)?.as_u64()?, since_ms: r.get(4)?.as_u64().unwrap_or(0) })
                })
                .collect()
        })
        .unwrap_or_default()
}

/// This hub's devices as index rows (and how many were left out over [`MAX_INDEX`]).
pub fn rows_of(hub: &Hub) -> (Vec<Row>, usize) {
    let snapshots = hub.registry.snapshots();
    let left_out = snapshots.len().saturating_sub(MAX_INDEX);
    let rows = snapshots
        .iter()
        .take(MAX_INDEX)
        .map(|i| {
            let phase = serde_json::to_value(i.phase).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default();
            Row { device_id: i.device_id.clone(), transport: i.transport.to_string(), phase, tools: i.tools.len() as u64, since_ms: i.connected_at_ms }
        })
        .collect();
    (rows, left_out)
}

/// Publishes this hub's index whenever it changes (looked at every [`INDEX_PERIOD`]), and again
/// whenever `republish` is bumped (a new broker connection). Ends when `republish` is dropped.
pub fn publish_index(hub: std::sync::Weak<Hub>, hub_id: String, name: Option<String>, client: rumqttc::AsyncClient, mut republish: tokio::sync::watch::Receiver<u64>) {
    tokio::spawn(async move {
        let topic = format!("{}{hub_id}", super::topics::INDEX);
        let (mut epoch, mut last) = (0u64, String::new());
        loop {
            let forced = tokio::select! {
                r = republish.changed() => {
                    if r.is_err() {
                        return;
                    }
                    true
                }
                () = tokio::time::sleep(INDEX_PERIOD) => false,
            };
            let now = tools_epoch();
            if now == epoch && !forced {
                continue;
            }
            epoch = now;
            let Some(hub) = hub.upgrade() else { return };
            let (rows, left_out) = rows_of(&hub);
            let text = index_text(&hub_id, name.as_deref(), &rows, left_out);
            if text != last || forced {
                if client.try_publish(topic.clone(), rumqttc::QoS::AtLeastOnce, true, text.clone()).is_err() {
                    // Queue full: try again next period.
                    epoch = 0;
                    continue;
                }
                last = text;
            }
        }
    });
}

/// The cluster as one hub sees it: which hubs are alive and what each one serves.
#[derive(Debug, Default)]
pub struct View {
    me: String,
    alive: HashSet<String>,
    indexes: HashMap<String, Vec<Row>>,
    /// Device-Id -> the hub whose index lists it last.
    by_device: HashMap<String, String>,
    /// Hub id -> the name its operator gave it, from its index.
    names: HashMap<String, String>,
}

impl View {
    pub fn new(me: &str) -> Self {
        Self { me: me.to_string(), ..Self::default() }
    }

    pub fn is_alive(&self, hub: &str) -> bool {
        self.alive.contains(hub)
    }

    /// A presence record came or went; returns whether this changed anything.
    pub fn on_presence(&mut self, hub: &str, alive: bool) -> bool {
        if alive { self.alive.insert(hub.to_string()) } else { self.alive.remove(hub) }
    }

    pub fn forget_presence(&mut self) {
        self.alive.clear();
    }

    /// The name a hub's index gave it (none: it has none, or its index was cleared).
    pub fn set_name(&mut self, hub: &str, name: Option<String>) {
        match name {
            Some(n) => self.names.insert(hub.to_string(), n),
            None => self.names.remove(hub),
        };
    }

    /// A hub's index (empty rows: cleared).
    pub fn on_index(&mut self, hub: &str, rows: Vec<Row>) {
        if let Some(old) = self.indexes.remove(hub) {
            for r in old {
                if self.by_device.get(&r.device_id).is_some_and(|h| h == hub) {
                    self.by_device.remove(&r.device_id);
                }
            }
        }
        if rows.is_empty() {
            return;
        }
        for r in &rows {
            self.by_device.insert(r.device_id.clone(), hub.to_string());
        }
        self.indexes.insert(hub.to_string(), rows);
    }

    /// Hubs whose index is kept though they are not alive.
    pub fn dead_indexes(&self) -> Vec<String> {
        self.indexes.keys().filter(|h| !self.alive.contains(*h)).cloned().collect()
    }

    /// The other live hubs.
    pub fn peers(&self) -> Vec<String> {
        let mut v: Vec<String> = self.alive.iter().filter(|h| **h != self.me).cloned().collect();
        v.sort();
        v
    }

    /// The other live hubs' devices, as `devices` rows.
    pub fn remote_devices(&self) -> Vec<Value> {
        let mut out = Vec::new();
        for hub in self.peers() {
            for r in self.indexes.get(&hub).into_iter().flatten() {
                let mut row = json!({"hub": hub, "device_id": r.device_id, "transport": r.transport, "phase": r.phase, "tool_count": r.tools, "connected_at_ms": r.since_ms});
                if let Some(name) = self.names.get(&hub) {
                    row["hub_name"] = json!(name);
                }
                out.push(row);
            }
        }
        out
    }

    /// The index row of a device and the live hub that lists it.
    pub fn row(&self, device_id: &str) -> Option<(String, Row)> {
        let hub = self.by_device.get(device_id).filter(|h| self.alive.contains(*h))?;
        let row = self.indexes.get(hub)?.iter().find(|r| r.device_id == device_id)?;
        Some((hub.clone(), row.clone()))
    }

    /// The other live hubs' ready devices (at most `max`).
    pub fn remote_ready(&self, max: usize) -> Vec<String> {
        self.peers_rows().filter(|(_, r)| r.phase == "ready").map(|(_, r)| r.device_id.clone()).take(max).collect()
    }

    /// Where another hub serves the device `selector` names (see [`Located`]).
    pub fn locate(&self, selector: Option<&str>, aliases: &HashMap<String, String>) -> Located {
        let remote = |hub: &String| *hub != self.me;
        let Some(sel) = selector.map(str::trim).filter(|s| !s.is_empty()) else {
            let all: Vec<(&String, &Row)> = self.peers_rows().collect();
            return match all.as_slice() {
                [] => Located::Nowhere,
                [(hub, row)] => Located::Remote { hub: (*hub).clone(), device_id: row.device_id.clone() },
                many => Located::Ambiguous(join(many.iter().map(|(_, r)| r.device_id.as_str()))),
            };
        };
        let wanted = aliases.get(sel).map_or(sel, String::as_str).to_ascii_lowercase();
        if let Some(hub) = self.by_device.get(&wanted).filter(|h| remote(h)) {
            return match self.alive.contains(hub) {
                true => Located::Remote { hub: hub.clone(), device_id: wanted },
                false => Located::Moving { device_id: wanted },
            };
        }
        let bare = |s: &str| s.replace([':', '-', '_'], "");
        let prefix = bare(&wanted);
        if prefix.is_empty() {
            return Located::Nowhere;
        }
        let matching: Vec<(&String, &Row)> = self.peers_rows().filter(|(_, r)| bare(&r.device_id).starts_with(&prefix)).collect();
        match matching.as_slice() {
            [(hub, row)] => return Located::Remote { hub: (*hub).clone(), device_id: row.device_id.clone() },
            [] => {}
            many => return Located::Ambiguous(join(many.iter().map(|(_, r)| r.device_id.as_str()))),
        }
        let moving: Vec<&Row> = self.indexes.iter().filter(|(h, _)| !self.alive.contains(*h) && remote(h)).flat_map(|(_, rows)| rows).filter(|r| bare(&r.device_id).starts_with(&prefix)).collect();
        match moving.as_slice() {
            [one] => Located::Moving { device_id: one.device_id.clone() },
            _ => Located::Nowhere,
        }
    }

    fn peers_rows(&self) -> impl Iterator<Item = (&String, &Row)> {
        self.indexes.iter().filter(|(h, _)| **h != self.me && self.alive.contains(*h)).flat_map(|(h, rows)| rows.iter().map(move |r| (h, r)))
    }
}

fn join<'a>(ids: impl Iterator<Item = &'a str>) -> String {
    let mut v: Vec<&str> = ids.collect();
    v.sort_unstable();
    v.join(", ")
}

/// Shared between the dispatcher (which feeds it) and the control API (which reads it).
pub type SharedView = Arc<std::sync::Mutex<View>>;

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: &str) -> Row {
        Row { device_id: id.into(), transport: "mqtt".into(), phase: "ready".into(), tools: 3, since_ms: 7 }
    }

    #[test]
    fn an_index_round_trips_and_hostile_rows_are_dropped() {
        let text = index_text("h1", Some("rack-2.east"), &[row("aa:00:00:00:00:01")], 0);
        assert_eq!(parse_index(text.as_bytes()), vec![row("aa:00:00:00:00:01")]);
        assert_eq!(parse_index_name(text.as_bytes()).as_deref(), Some("rack-2.east"));
        assert_eq!(parse_index_name(index_text("h1", None, &[], 0).as_bytes()), None);
        for hostile in [r#"{"name":"\u001b[31mred"}"#, r#"{"name":"-flag"}"#, r#"{"name":"<b>x</b>"}"#, r#"{"name":""}"#, r#"{"name":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}"#, r#"{"name":7}"#] {
            assert_eq!(parse_index_name(hostile.as_bytes()), None, "{hostile}");
        }
        let hostile = br#"{"devices":[["<script>","mqtt","ready",1,1],["AA-00-00-00-00-02","mqtt","ready",1,1],["aa:00:00:00:00:03","x","yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy",1,1],"nope",[]]}"#;
        let rows = parse_index(hostile);
        assert_eq!(rows.iter().map(|r| r.device_id.as_str()).collect::<Vec<_>>(), ["aa:00:00:00:00:02"]);
        assert!(parse_index(b"not json").is_empty());
    }

    #[test]
    fn devices_are_located_on_live_hubs_and_moving_when_their_hub_died() {
        let mut v = View::new("me");
        for h in ["me", "b", "c"] {
            v.on_presence(h, true);
        }
        v.on_index("b", vec![row("aa:00:00:00:00:01"), row("aa:00:00:00:01:02")]);
        v.on_index("c", vec![row("bb:00:00:00:00:03")]);
        v.on_index("me", vec![row("cc:00:00:00:00:04")]);
        let none = HashMap::new();
        assert_eq!(v.locate(Some("aa:00:00:00:00:01"), &none), Located::Remote { hub: "b".into(), device_id: "aa:00:00:00:00:01".into() });
        assert_eq!(v.locate(Some("bb00"), &none), Located::Remote { hub: "c".into(), device_id: "bb:00:00:00:00:03".into() });
        assert!(matches!(v.locate(Some("aa:00"), &none), Located::Ambiguous(ids) if ids.contains("aa:00:00:00:01:02")));
        assert_eq!(v.locate(Some("cc:00:00:00:00:04"), &none), Located::Nowhere, "this hub's own devices are never remote");
        let aliases = HashMap::from([("lamp".to_string(), "BB:00:00:00:00:03".to_string())]);
        assert_eq!(v.locate(Some("lamp"), &aliases), Located::Remote { hub: "c".into(), device_id: "bb:00:00:00:00:03".into() });
        assert_eq!(v.remote_devices().len(), 3);

        v.on_presence("b", false);
        assert_eq!(v.locate(Some("aa:00:00:00:00:01"), &none), Located::Moving { device_id: "aa:00:00:00:00:01".into() });
        assert_eq!(v.locate(Some("aa0000000102"), &none), Located::Moving { device_id: "aa:00:00:00:01:02".into() });
        assert_eq!(v.dead_indexes(), ["b"]);
        assert_eq!(v.remote_devices().len(), 1, "a dead hub's devices are not listed");
        // Taken over by c, listed there before b's index is cleared: c is where it is.
        v.on_index("c", vec![row("bb:00:00:00:00:03"), row("aa:00:00:00:00:01")]);
        v.on_index("b", Vec::new());
        assert_eq!(v.locate(Some("aa:00:00:00:00:01"), &none), Located::Remote { hub: "c".into(), device_id: "aa:00:00:00:00:01".into() });
        assert_eq!(v.locate(Some("aa:00:00:00:01:02"), &none), Located::Nowhere);
    }
}
