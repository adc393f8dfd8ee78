//! What each hub of a cluster tells the others, and the cluster view built from it (I/O-free
//! apart from [`publish_index`]).
//!
//! - `mcpdev/hubs/<hub>` (retained, cleared by the hub's last will): the hub is alive.
//! - `mcpdev/index/<hub>/<shard>` (retained, [`SHARDS`] shards): the devices it serves, one
//!   compact row each `[device_id, transport, phase, tool_count, connected_at_ms]` (~55 bytes),
//!   and beside them (`about`, the same order) what describes each device as every listing does
//!   (issue 46.4): `[host_tools, name]` (either may be null), the tools offered to MCP hosts
//!   ([`crate::session::ToolList::offered_count`], user-only ones left out) and its name
//!   ([`crate::session::DeviceInfo::name`], at most [`crate::session::MAX_NAME_CHARS`]
//!   characters, or null): ~15 bytes more for a short name. A hub of the previous version sends
//!   no `about` and ignores it: its rows read with no name and no host count, and it reads ours.
//!   A device's shard is a hash of its MAC, so one device that comes, goes or changes costs one
//!   shard (1/16 of the hub's index), never the whole index; a shard is republished at most every
//!   [`INDEX_PERIOD`] and only when it changed, and a hub publishes at most
//!   [`INDEX_BYTES_PER_SEC`] of index on average (a round that sent more waits longer), so a
//!   fleet joining at once cannot swamp the broker with indexes. A cluster at rest costs the
//!   broker nothing.
//! - **Bounded, and nothing left out silently**: a hub lists at most `--cluster-index-max`
//!   devices (the first in Device-Id order, not the first to arrive), and a shard at most what
//!   one MQTT packet holds. Each shard says how many of its devices it left out; the hub logs it
//!   when that starts, the other hubs show it in `devices` and find those devices on demand
//!   (they ask the hubs that left some out: [`crate::hub::remote::Cluster::find`]).
//! - **Authenticated**: a shard is `<HMAC-SHA256 hex>\n<body>`, the MAC keyed from the shared hub
//!   secret ([`Purpose::ClusterIndex`]); its body names its hub, shard and a sequence number. A
//!   shard with a wrong MAC (a broker client that is not a hub), filed under another hub or
//!   shard, or older than the one held (a replay), is refused: no one but a hub can list a
//!   device, nor make a hub forward requests to a device that is not there.
//!
//! Rules: a hub's index counts only while the hub is alive, as the view of the others holds it
//! ([`super::cluster_view`]: it survives this hub's own broker reconnect, and keeps ~30 bytes per
//! device of the other hubs). The index of a hub that died says which devices are *moving* (being
//! taken over) until a survivor lists them or [`DEAD_INDEX_GRACE`] passes, when a survivor clears
//! it from the broker. Rows are data: a row whose Device-Id is not a MAC is dropped, and every
//! field is bounded (a name to [`crate::session::MAX_NAME_CHARS`] characters, kept once per shard
//! that repeats it).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::hub::Hub;
use crate::hub::secret::{HubSecret, Purpose};
use crate::links::handle::tools_epoch;
use crate::wire::identity::{format_mac, parse_mac};

/// How often a hub looks whether its index changed.
pub const INDEX_PERIOD: Duration = Duration::from_millis(500);
/// Bytes of index one hub publishes a second, on average over its rounds: a round that sent `b`
/// bytes is followed by a pause of `b / INDEX_BYTES_PER_SEC` (at least [`INDEX_PERIOD`]), so a
/// hub whose index changes all the time (thousands of devices joining at once) republishes it
/// less often, never faster than the broker and the other hubs take it. Every hub receives
/// every other hub's index: at 6 hubs of ~17,000 devices each, a period of 0.5 s made ~12 MB/s
/// into the broker and ~70 MB/s out of it, which stalled Mosquitto for longer than the hubs'
/// keepalive and cut them off it. A hub's index is ~72 bytes a device (its row and `about`): under
/// this budget, ~1,800 devices still go out every [`INDEX_PERIOD`], and 20,000 devices that all
/// change take ~5 s.
pub const INDEX_BYTES_PER_SEC: usize = 256 * 1024;
/// Shards of one hub's index.
pub const SHARDS: u8 = 16;
/// Devices one hub lists in its index at most, unless configured (`--cluster-index-max`).
pub const DEFAULT_INDEX_MAX: u32 = 131_072;
/// How long the index of a hub that died is kept as "moving" before it is cleared.
pub const DEAD_INDEX_GRACE: Duration = Duration::from_secs(30);

const TRANSPORTS: [&str; 3] = ["websocket", "mqtt", "other"];
const PHASES: [&str; 6] = [
    "awaiting_hello",
    "initializing",
    "listing",
    "ready",
    "disconnected",
    "other",
];
pub(super) const READY: u8 = 3;

pub type Mac = [u8; 6];

/// One device in a hub's index (48 bytes; a name is shared by every row of its shard that
/// has it).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Row {
    pub mac: Mac,
    pub(super) transport: u8,
    pub(super) phase: u8,
    /// Every tool the device listed.
    pub tools: u32,
    /// The tools offered to MCP hosts (user-only ones left out); `None` from a hub too old to say.
    pub host_tools: Option<u32>,
    pub since_ms: u64,
    /// The device's name (bounded), if it gave one and its hub says.
    pub name: Option<Arc<str>>,
}

fn code(names: &[&str], s: &str) -> u8 {
    names
        .iter()
        .position(|n| *n == s)
        .unwrap_or(names.len() - 1) as u8
}

impl Row {
    pub fn new(
        device_id: &str,
        transport: &str,
        phase: &str,
        tools: u64,
        since_ms: u64,
    ) -> Option<Self> {
        let mac = parse_mac(device_id).ok()?;
        Some(Self {
            mac,
            transport: code(&TRANSPORTS, transport),
            phase: code(&PHASES, phase),
            tools: tools.min(u64::from(u32::MAX)) as u32,
            host_tools: None,
            since_ms,
            name: None,
        })
    }

    /// The row with what describes the device: its tools offered to hosts and its name (cut to
    /// [`crate::session::MAX_NAME_CHARS`] characters).
    pub fn described(self, host_tools: Option<u64>, name: Option<Arc<str>>) -> Self {
        let name = name.map(|n| if n.chars().count() > crate::session::MAX_NAME_CHARS { Arc::from(crate::session::bounded_name(&n)) } else { n });
        Self { host_tools: host_tools.map(|n| n.min(u64::from(u32::MAX)) as u32), name, ..self }
    }

    pub fn device_id(&self) -> String {
        format_mac(&self.mac)
    }

    pub fn transport(&self) -> &'static str {
        TRANSPORTS[usize::from(self.transport)]
    }

    pub fn phase(&self) -> &'static str {
        PHASES[usize::from(self.phase)]
    }

    pub fn is_ready(&self) -> bool {
        self.phase == READY
    }

    /// The row as a `devices` entry, `hub` first, then the hub's name when its operator gave one:
    /// the fields a local device's entry has with the same meaning
    /// ([`crate::hub::remote::summary_text`]).
    pub fn listing_text(&self, hub: &str, hub_name: Option<&str>) -> String {
        let hub_name = hub_name.map(|n| format!(r#""hub_name":{},"#, serde_json::Value::from(n))).unwrap_or_default();
        format!(
            r#"{{"hub":{},{hub_name}"device_id":"{}","name":{},"transport":"{}","phase":"{}","tool_count":{},"host_tools":{},"connected_at_ms":{}}}"#,
            serde_json::Value::from(hub),
            self.device_id(),
            serde_json::Value::from(self.name.as_deref()),
            self.transport(),
            self.phase(),
            self.tools,
            serde_json::Value::from(self.host_tools),
            self.since_ms
        )
    }

    /// Its `about` entry, `[host_tools, name]`.
    fn push_about(&self, out: &mut String) {
        use std::fmt::Write as _;
        let _ = write!(out, "[{},{}]", serde_json::Value::from(self.host_tools), serde_json::Value::from(self.name.as_deref()));
    }

    /// Bytes it adds to a shard: its row and its `about` entry with their commas.
    fn shard_bytes(&self) -> usize {
        let name = self.name.as_deref().map_or(4, |n| serde_json::Value::from(n).to_string().len());
        80 + 14 + name
    }

    fn push_json(&self, out: &mut String) {
        use std::fmt::Write as _;
        let _ = write!(
            out,
            r#"["{}","{}","{}",{},{}]"#,
            self.device_id(),
            self.transport(),
            self.phase(),
            self.tools,
            self.since_ms
        );
    }
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

/// Which shard a device is in (every hub computes the same).
pub fn shard_of(mac: &Mac) -> u8 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in mac {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    ((h ^ (h >> 33)) % u64::from(SHARDS)) as u8
}

/// One shard of a hub's index, as it travels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shard {
    pub seq: u64,
    /// The name the hub's operator gave it (`serve --hub-name`), carried by every shard.
    pub name: Option<String>,
    /// Devices of this shard the hub serves but did not list.
    pub left_out: u64,
    pub rows: Vec<Row>,
}

/// The shard's payload: its MAC, a newline, and its body.
pub fn shard_text(secret: &HubSecret, hub_id: &str, shard: u8, s: &Shard) -> String {
    let mut body = String::with_capacity(64 + s.rows.len() * 56);
    body.push_str(&format!(
        r#"{{"hub":{},"shard":{shard},"seq":{},"left_out":{},"#,
        serde_json::Value::from(hub_id),
        s.seq,
        s.left_out
    ));
    if let Some(name) = &s.name {
        body.push_str(&format!(r#""name":{},"#, serde_json::Value::from(name.as_str())));
    }
    body.push_str(r#""devices":["#);
    for (i, r) in s.rows.iter().enumerate() {
        if i > 0 {
            body.push(',');
        }
        r.push_json(&mut body);
    }
    body.push_str(r#"],"about":["#);
    for (i, r) in s.rows.iter().enumerate() {
        if i > 0 {
            body.push(',');
        }
        r.push_about(&mut body);
    }
    body.push_str("]}");
    let mac = secret.mac(Purpose::ClusterIndex, body.as_bytes());
    format!("{mac}\n{body}")
}

#[derive(Deserialize)]
struct Body<'a> {
    #[serde(borrow)]
    hub: std::borrow::Cow<'a, str>,
    shard: u8,
    seq: u64,
    #[serde(default)]
    left_out: u64,
    #[serde(default)]
    name: Option<String>,
    #[serde(borrow)]
    devices: Vec<&'a RawValue>,
    /// `[host_tools, name]` of each row, in the same order (absent from an older hub's shard;
    /// anything but an array is as absent).
    #[serde(default, borrow)]
    about: Option<&'a RawValue>,
}

/// A shard filed under `hub`/`shard`, checked: its MAC, then that it is the shard it is filed
/// as; rows that are not well-formed are dropped.
pub fn open_shard(
    secret: &HubSecret,
    hub: &str,
    shard: u8,
    payload: &[u8],
) -> Result<Shard, String> {
    let text = std::str::from_utf8(payload).map_err(|_| "not UTF-8".to_string())?;
    let (mac, body) = text.split_once('\n').ok_or("not a signed index shard")?;
    if !secret.verify_mac(Purpose::ClusterIndex, body.as_bytes(), mac) {
        return Err("its MAC does not match: it was not made by a hub with this hub secret".into());
    }
    let b: Body = serde_json::from_str(body)
        .map_err(|e| format!("an authenticated body that is not an index shard ({e})"))?;
    if b.hub != hub || b.shard != shard {
        return Err(format!(
            "the shard of hub {:?} #{} filed as {hub:?} #{shard}",
            b.hub, b.shard
        ));
    }
    // A name every device of a kind shares is kept once per shard.
    let mut names: HashMap<String, Arc<str>> = HashMap::new();
    let about: Vec<&RawValue> = b.about.and_then(|a| serde_json::from_str(a.get()).ok()).unwrap_or_default();
    let rows = b
        .devices
        .iter()
        .enumerate()
        .filter_map(|(i, raw)| {
            let (id, transport, phase, tools, since): (&str, &str, &str, u64, u64) =
                serde_json::from_str(raw.get()).ok()?;
            let row = Row::new(id, transport, phase, tools, since).filter(|r| shard_of(&r.mac) == shard)?;
            // An `about` entry that does not read leaves the row undescribed, not dropped.
            let about = about.get(i).and_then(|a| serde_json::from_str::<(Option<u64>, Option<String>)>(a.get()).ok());
            Some(match about {
                Some((host_tools, name)) => {
                    let name = name.map(|n| crate::session::bounded_name(&n)).map(|n| names.entry(n).or_insert_with_key(|k| Arc::from(k.as_str())).clone());
                    row.described(host_tools, name)
                }
                None => row,
            })
        })
        .collect();
    Ok(Shard {
        // Another hub's name is data like any: one that could carry escapes is dropped.
        name: b.name.filter(|n| valid_hub_name(n)),
        seq: b.seq,
        left_out: b.left_out,
        rows,
    })
}

/// This hub's devices as index shards (the first `max` in Device-Id order); each shard holds at
/// most `max_bytes` of rows (with their `about` entries), and says how many of its devices it
/// left out. The host tool count is with user-only tools left out, whatever the reading hub's
/// `--mcp-user-tools` (the row's `tool_count` counts them all).
pub fn shards_of(hub: &Hub, max: usize, max_bytes: usize) -> Vec<Shard> {
    let mut shards: Vec<Shard> = (0..SHARDS)
        .map(|_| Shard {
            name: None,
            seq: 0,
            left_out: 0,
            rows: Vec::new(),
        })
        .collect();
    let mut bytes = vec![0usize; usize::from(SHARDS)];
    // A name every device of a kind shares is kept once per round.
    let mut names: HashMap<String, Arc<str>> = HashMap::new();
    let (mut after, mut listed) = (None::<String>, 0usize);
    loop {
        let (page, next) = hub.registry.page(after.as_deref(), 1024);
        for info in &page {
            let phase = serde_json::to_value(info.phase)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            let Some(row) = Row::new(
                &info.device_id,
                info.transport,
                &phase,
                info.tools.len() as u64,
                info.connected_at_ms,
            ) else {
                continue;
            };
            let name = info.name().map(|n| names.entry(n).or_insert_with_key(|k| Arc::from(k.as_str())).clone());
            let row = row.described(Some(info.tools.offered_count(false) as u64), name);
            let n = usize::from(shard_of(&row.mac));
            let s = &mut shards[n];
            if listed >= max || bytes[n] + row.shard_bytes() > max_bytes {
                s.left_out += 1;
            } else {
                bytes[n] += row.shard_bytes();
                s.rows.push(row);
                listed += 1;
            }
        }
        match next {
            Some(n) => after = Some(n),
            None => break,
        }
    }
    shards
}

/// Publishes this hub's index, each shard whenever it changes (looked at every
/// [`INDEX_PERIOD`]), and every shard again whenever `republish` is bumped (a new broker
/// connection). Logs when devices start to be left out. Ends when `republish` is dropped.
pub fn publish_index(
    hub: std::sync::Weak<Hub>,
    hub_id: String,
    name: Option<String>,
    client: rumqttc::AsyncClient,
    mut republish: tokio::sync::watch::Receiver<u64>,
    max: usize,
    max_bytes: usize,
) {
    tokio::spawn(async move {
        let (mut epoch, mut seq) = (0u64, 0u64);
        // What each shard held when last sent, as a digest: the rows themselves cost ~70 bytes
        // for each device this hub serves (issue 46.3).
        let mut last: Vec<Option<u64>> = vec![None; usize::from(SHARDS)];
        let mut logged_left_out = 0u64;
        let mut pause = INDEX_PERIOD;
        loop {
            let forced = tokio::select! {
                r = republish.changed() => {
                    if r.is_err() {
                        return;
                    }
                    true
                }
                () = tokio::time::sleep(pause) => false,
            };
            pause = INDEX_PERIOD;
            let now = tools_epoch();
            if now == epoch && !forced {
                continue;
            }
            epoch = now;
            let Some(hub) = hub.upgrade() else { return };
            // A stopping hub's devices stay listed as they were: once its presence is cleared the
            // others see them move (and requests for them wait), not vanish (issue 45.4).
            if crate::hub::remote::of(&hub).is_some_and(|c| c.is_stopping()) {
                continue;
            }
            let shards = shards_of(&hub, max, max_bytes);
            let left_out: u64 = shards.iter().map(|s| s.left_out).sum();
            if left_out > 0 && (logged_left_out == 0 || left_out >= logged_left_out * 2) {
                tracing::warn!(
                    left_out,
                    listed = shards.iter().map(|s| s.rows.len()).sum::<usize>(),
                    "this hub serves more devices than its cluster index lists (--cluster-index-max {max}): the other hubs show how many are left out and find them on demand"
                );
                logged_left_out = left_out;
            } else if left_out == 0 {
                logged_left_out = 0;
            }
            let mut sent = 0usize;
            for (n, mut shard) in shards.into_iter().enumerate() {
                let digest = digest(&shard);
                let same = last[n] == Some(digest);
                if same && !forced {
                    continue;
                }
                // Later than every shard this hub sent before, across restarts too.
                seq = seq.max(crate::session::now_ms().saturating_mul(1000)) + 1;
                shard.seq = seq;
                shard.name.clone_from(&name);
                let text = shard_text(&hub.secret, &hub_id, n as u8, &shard);
                let bytes = text.len();
                if client
                    .try_publish(
                        format!("{}{hub_id}/{n}", super::topics::INDEX),
                        rumqttc::QoS::AtLeastOnce,
                        true,
                        text,
                    )
                    .is_err()
                {
                    // Queue full: try again next period.
                    epoch = 0;
                    continue;
                }
                sent += bytes;
                last[n] = Some(digest);
            }
            pause = index_pause(sent);
        }
    });
}

/// What a shard lists (its rows and how many it left out), as a 64-bit digest: two shards with
/// the same digest are taken as the same (`DefaultHasher::new`, SipHash with fixed keys; a
/// collision would only hold a changed shard back until its next change or republish).
fn digest(shard: &Shard) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::hash::DefaultHasher::new();
    shard.rows.hash(&mut h);
    shard.left_out.hash(&mut h);
    h.finish()
}

/// The pause after a round of index publishing that sent `sent` bytes
/// ([`INDEX_BYTES_PER_SEC`]).
pub fn index_pause(sent: usize) -> Duration {
    INDEX_PERIOD.max(Duration::from_secs_f64(sent as f64 / INDEX_BYTES_PER_SEC as f64))
}

#[cfg(test)]
#[path = "presence_tests.rs"]
mod tests;
