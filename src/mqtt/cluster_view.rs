//! The cluster as one hub sees it (I/O-free): which hubs are alive and what each one's index
//! ([`super::presence`]) lists, kept for every device of the other hubs at ~30 bytes a device
//! (issue 46.3: a hub of 6 holds ~83,000 of 100,000).
//!
//! Rules:
//! - **Compact, as it came**: each shard of each hub is held as it was published, its MACs in
//!   one sorted array and beside them a 24-byte record (phase, transport, tool counts, since
//!   when, and its name as a number in the shard's own list of names, which a firmware's devices
//!   share). A new shard replaces the old one whole: no per-device map to update.
//! - **Found in order**: an id is one binary search in its shard ([`shard_of`]) of each hub, a
//!   prefix one range of every shard, a page of a listing a merge of the shards from where it
//!   starts: O(page × log shards), never O(devices).
//! - **One row a device**: a device two hubs list (while it moves) is shown once, as the live hub
//!   lists it (of two live ones, the hub whose shard came last).
//! - **A view survives this hub's own broker reconnect**: the hubs it knew stay alive (listed,
//!   reachable) while the new subscription replays the retained presence records, and only once
//!   that replay is complete ([`View::reconcile`]) is a hub whose record did not come back taken
//!   as gone. A dead hub's devices are *moving* until a survivor lists them or its index is
//!   cleared. This hub's own index is not kept.
//! - **Replays refused**: a shard older than the one held is ignored.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::ops::Bound;
use std::sync::Arc;

use super::presence::{Mac, READY, Row, Shard, shard_of};
use crate::hub::remote::Located;
use crate::wire::identity::parse_mac;

/// What a shard says of one device, beside its MAC (24 bytes).
#[derive(Debug, Clone, Copy)]
struct Held {
    since_ms: u64,
    tools: u32,
    /// [`NONE`]: not said.
    host_tools: u32,
    /// Its place in the shard's names, [`NONE`]: no name.
    name: u32,
    transport: u8,
    phase: u8,
}

const NONE: u32 = u32::MAX;

/// One shard of another hub, as held: its devices sorted by MAC.
#[derive(Debug, Default)]
struct HeldShard {
    seq: u64,
    left_out: u64,
    /// When it came, in the view's count of shards taken: of two hubs that list a device, the
    /// one whose shard came last is where it is.
    taken: u64,
    macs: Vec<Mac>,
    rows: Vec<Held>,
    names: Vec<Arc<str>>,
}

impl HeldShard {
    fn new(shard: Shard, taken: u64) -> Self {
        let mut rows = shard.rows;
        // A hub sends its rows sorted, one per device; rows from elsewhere are sorted here, and
        // a MAC given twice is kept once.
        rows.sort_by_key(|r| r.mac);
        rows.dedup_by_key(|r| r.mac);
        let mut names: Vec<Arc<str>> = Vec::new();
        let mut held = Vec::with_capacity(rows.len());
        let mut macs = Vec::with_capacity(rows.len());
        for r in rows {
            let name = r.name.as_ref().map_or(NONE, |n| {
                let at = names.iter().position(|k| Arc::ptr_eq(k, n) || **k == **n).unwrap_or_else(|| {
                    names.push(n.clone());
                    names.len() - 1
                });
                at as u32
            });
            macs.push(r.mac);
            held.push(Held {
                since_ms: r.since_ms,
                tools: r.tools,
                host_tools: r.host_tools.map_or(NONE, |n| n.min(NONE - 1)),
                name,
                transport: r.transport,
                phase: r.phase,
            });
        }
        names.shrink_to_fit();
        Self { seq: shard.seq, left_out: shard.left_out, taken, macs, rows: held, names }
    }

    fn row(&self, i: usize) -> Row {
        let h = self.rows[i];
        Row {
            mac: self.macs[i],
            transport: h.transport,
            phase: h.phase,
            tools: h.tools,
            host_tools: (h.host_tools != NONE).then_some(h.host_tools),
            since_ms: h.since_ms,
            name: self.names.get(h.name as usize).cloned(),
        }
    }

    /// Where `bound` starts in the sorted MACs.
    fn start(&self, bound: Bound<Mac>) -> usize {
        match bound {
            Bound::Included(m) => self.macs.partition_point(|x| *x < m),
            Bound::Excluded(m) => self.macs.partition_point(|x| *x <= m),
            Bound::Unbounded => 0,
        }
    }
}

#[derive(Debug, Default)]
struct HubIndex {
    shards: HashMap<u8, HeldShard>,
    rows: usize,
    /// The name its last shard gave it.
    name: Option<Arc<str>>,
}

impl HubIndex {
    fn left_out(&self) -> u64 {
        self.shards.values().map(|s| s.left_out).sum()
    }
}

/// One device as a hub's shard lists it.
#[derive(Clone, Copy)]
struct Entry<'a> {
    hub: &'a Arc<str>,
    shard: &'a HeldShard,
    at: usize,
    /// Whether its hub is alive and not this one.
    listed: bool,
}

impl Entry<'_> {
    fn mac(&self) -> Mac {
        self.shard.macs[self.at]
    }

    fn row(&self) -> Row {
        self.shard.row(self.at)
    }

    fn is_ready(&self) -> bool {
        self.shard.rows[self.at].phase == READY
    }

    /// Which of two entries of one device is shown: a live hub's, then the later shard's.
    fn rank(&self) -> (bool, u64) {
        (self.listed, self.shard.taken)
    }
}

/// The entries in a range of MACs of every shard of every hub, in MAC order, one a device
/// ([`Entry::rank`] picks): a merge of the shards' sorted arrays.
struct Merged<'a> {
    cursors: Vec<(Entry<'a>, usize)>,
    heap: BinaryHeap<Reverse<(Mac, usize)>>,
    hi: Bound<Mac>,
}

impl<'a> Merged<'a> {
    fn below_hi(&self, mac: &Mac) -> bool {
        match self.hi {
            Bound::Included(h) => *mac <= h,
            Bound::Excluded(h) => *mac < h,
            Bound::Unbounded => true,
        }
    }

    /// Pushes cursor `c`'s device at its position, if there is one in range.
    fn push(&mut self, c: usize) {
        let (e, end) = self.cursors[c];
        if e.at < end {
            let mac = e.mac();
            if self.below_hi(&mac) {
                self.heap.push(Reverse((mac, c)));
            }
        }
    }
}

impl<'a> Iterator for Merged<'a> {
    type Item = Entry<'a>;

    fn next(&mut self) -> Option<Entry<'a>> {
        let Reverse((mac, c)) = self.heap.pop()?;
        let mut best = self.cursors[c].0;
        self.cursors[c].0.at += 1;
        self.push(c);
        while let Some(Reverse((m, d))) = self.heap.peek().copied()
            && m == mac
        {
            self.heap.pop();
            let other = self.cursors[d].0;
            if other.rank() > best.rank() {
                best = other;
            }
            self.cursors[d].0.at += 1;
            self.push(d);
        }
        Some(best)
    }
}

/// The cluster as one hub sees it: which hubs are alive and what each one serves.
#[derive(Debug, Default)]
pub struct View {
    me: String,
    alive: HashSet<String>,
    /// Hubs alive when this hub's broker connection came back whose presence record the new
    /// subscription has not replayed yet ([`Self::resync`]); still alive until [`Self::reconcile`].
    unconfirmed: HashSet<String>,
    hubs: HashMap<Arc<str>, HubIndex>,
    /// Shards taken so far ([`HeldShard::taken`]).
    taken: u64,
}

impl View {
    pub fn new(me: &str) -> Self {
        Self {
            me: me.to_string(),
            ..Self::default()
        }
    }

    pub fn is_alive(&self, hub: &str) -> bool {
        self.alive.contains(hub)
    }

    /// A presence record came or went; returns whether this changed anything.
    pub fn on_presence(&mut self, hub: &str, alive: bool) -> bool {
        self.unconfirmed.remove(hub);
        if alive {
            self.alive.insert(hub.to_string())
        } else {
            self.alive.remove(hub)
        }
    }

    /// This hub's broker connection came back: presence is learned again from the retained
    /// records the new subscription replays, but what is known stays until [`Self::reconcile`]
    /// (the view shrank to the hubs replayed so far: at 100,000 devices a listing through a hub
    /// that had just reconnected showed 43,905 of ~75,000 devices).
    pub fn resync(&mut self) {
        // Not this hub: its own record comes back after the replay (it publishes it on the new
        // connection, after subscribing), and it is alive whatever the broker holds.
        self.unconfirmed = self.alive.iter().filter(|h| **h != self.me).cloned().collect();
    }

    /// The new subscription's retained replay is complete: the hubs whose presence record did not
    /// come back went away while this hub was cut off, and are gone now (returned, sorted).
    pub fn reconcile(&mut self) -> Vec<String> {
        let mut gone: Vec<String> = self.unconfirmed.drain().collect();
        for hub in &gone {
            self.alive.remove(hub);
        }
        gone.sort();
        gone
    }

    /// One shard of a hub's index (`None`: cleared). A shard older than the one held is a
    /// replay: ignored (`false`). This hub's own index is not kept.
    pub fn on_shard(&mut self, hub: &str, shard: u8, new: Option<Shard>) -> bool {
        if hub == self.me {
            return true;
        }
        let name: Arc<str> = self
            .hubs
            .get_key_value(hub)
            .map_or_else(|| Arc::from(hub), |(k, _)| k.clone());
        let index = self.hubs.entry(name).or_default();
        if let (Some(held), Some(n)) = (index.shards.get(&shard), new.as_ref())
            && n.seq < held.seq
        {
            return false;
        }
        if let Some(old) = index.shards.remove(&shard) {
            index.rows -= old.macs.len();
        }
        if let Some(n) = &new {
            index.name = n.name.as_deref().map(Arc::from);
        }
        if let Some(n) = new.filter(|n| !n.rows.is_empty() || n.left_out > 0) {
            self.taken += 1;
            let held = HeldShard::new(n, self.taken);
            index.rows += held.macs.len();
            index.shards.insert(shard, held);
        }
        if index.shards.is_empty() {
            self.hubs.remove(hub);
        }
        true
    }

    /// Hubs whose index is kept though they are not alive.
    pub fn dead_indexes(&self) -> Vec<String> {
        self.hubs
            .keys()
            .filter(|h| !self.alive.contains(&***h))
            .map(|h| h.to_string())
            .collect()
    }

    /// The other live hubs.
    pub fn peers(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .alive
            .iter()
            .filter(|h| **h != self.me)
            .cloned()
            .collect();
        v.sort();
        v
    }

    fn listed(&self, hub: &str) -> bool {
        hub != self.me && self.alive.contains(hub)
    }

    /// The other live hubs' devices the index lists.
    pub fn remote_count(&self) -> usize {
        self.hubs
            .iter()
            .filter(|(h, _)| self.listed(h))
            .map(|(_, i)| i.rows)
            .sum()
    }

    /// The other live hubs that serve devices their index does not list, with how many.
    pub fn unlisted(&self) -> Vec<(String, u64)> {
        let mut v: Vec<(String, u64)> = self
            .hubs
            .iter()
            .filter(|(h, _)| self.listed(h))
            .map(|(h, i)| (h.to_string(), i.left_out()))
            .filter(|(_, n)| *n > 0)
            .collect();
        v.sort();
        v
    }

    /// Every device of the other hubs (live or not) with a MAC from `lo` to `hi`, in MAC order,
    /// one entry a device.
    fn merged(&self, lo: Bound<Mac>, hi: Bound<Mac>) -> Merged<'_> {
        let mut m = Merged { cursors: Vec::new(), heap: BinaryHeap::new(), hi };
        for (hub, index) in &self.hubs {
            let listed = self.listed(hub);
            for shard in index.shards.values() {
                let at = shard.start(lo);
                m.cursors.push((Entry { hub, shard, at, listed }, shard.macs.len()));
                m.push(m.cursors.len() - 1);
            }
        }
        m
    }

    /// The entry of one device, if a hub lists it ([`Entry::rank`] picks among several).
    fn entry(&self, mac: &Mac) -> Option<Entry<'_>> {
        let n = shard_of(mac);
        self.hubs
            .iter()
            .filter_map(|(hub, index)| {
                let shard = index.shards.get(&n)?;
                let at = shard.macs.binary_search(mac).ok()?;
                Some(Entry { hub, shard, at, listed: self.listed(hub) })
            })
            .max_by_key(Entry::rank)
    }

    /// Up to `limit` of the other live hubs' devices after the Device-Id `after`, in Device-Id
    /// order, each as `(device_id, hub, row)`. O(limit × log shards) (plus rows of dead hubs
    /// passed over).
    pub fn page(&self, after: Option<&str>, limit: usize) -> Vec<(String, Arc<str>, Row)> {
        let start = match after.map(parse_mac) {
            Some(Ok(mac)) => Bound::Excluded(mac),
            Some(Err(_)) => match after.and_then(crate::hub::registry::id_prefix) {
                Some(p) => Bound::Included(bounds(&p).0),
                None => return Vec::new(),
            },
            None => Bound::Unbounded,
        };
        self.merged(start, Bound::Unbounded)
            .filter(|e| e.listed)
            .take(limit)
            .map(|e| {
                let row = e.row();
                (row.device_id(), e.hub.clone(), row)
            })
            .collect()
    }

    /// The name a hub's operator gave it, from its index.
    pub fn hub_name(&self, hub: &str) -> Option<Arc<str>> {
        self.hubs.get(hub).and_then(|i| i.name.clone())
    }

    /// The index row of a device and the live hub that lists it.
    pub fn row(&self, device_id: &str) -> Option<(Arc<str>, Row)> {
        let e = self.entry(&parse_mac(device_id).ok()?)?;
        e.listed.then(|| (e.hub.clone(), e.row()))
    }

    /// The other live hubs' ready devices, if there are at most `max` of them (else none: they
    /// are offered on demand, not in arrival order).
    pub fn remote_ready(&self, max: usize) -> Vec<String> {
        let ready: Vec<String> = self
            .merged(Bound::Unbounded, Bound::Unbounded)
            .filter(|e| e.listed && e.is_ready())
            .take(max + 1)
            .map(|e| e.row().device_id())
            .collect();
        if ready.len() > max { Vec::new() } else { ready }
    }

    /// Where another hub serves the device `selector` names (see [`Located`]): an id or alias
    /// is one lookup, a prefix one range of the sorted index.
    pub fn locate(&self, selector: Option<&str>, aliases: &HashMap<String, String>) -> Located {
        let Some(sel) = selector.map(str::trim).filter(|s| !s.is_empty()) else {
            return Self::one_of(self.merged(Bound::Unbounded, Bound::Unbounded));
        };
        let wanted = aliases.get(sel).map_or(sel, String::as_str);
        let Some(prefix) = crate::hub::registry::id_prefix(wanted) else {
            return Located::Nowhere;
        };
        let (lo, hi) = bounds(&prefix);
        let found = if lo == hi {
            Self::one_of(self.entry(&lo).into_iter())
        } else {
            Self::one_of(self.merged(Bound::Included(lo), Bound::Included(hi)))
        };
        match found {
            Located::Nowhere => {}
            found => return found,
        }
        // Not listed: its hub is not alive (this hub's own index is not kept).
        let mut moving = self.merged(Bound::Included(lo), Bound::Included(hi)).filter(|e| !e.listed);
        match (moving.next(), moving.next()) {
            (Some(e), None) => Located::Moving {
                device_id: e.row().device_id(),
            },
            _ => Located::Nowhere,
        }
    }

    /// The one device of the other live hubs among `entries`, or which several match.
    fn one_of<'a>(entries: impl Iterator<Item = Entry<'a>>) -> Located {
        let mut live = entries.filter(|e| e.listed);
        let Some(first) = live.next() else {
            return Located::Nowhere;
        };
        let others: Vec<String> = live
            .by_ref()
            .take(9)
            .map(|e| e.row().device_id())
            .collect();
        if others.is_empty() {
            return Located::Remote {
                hub: first.hub.to_string(),
                device_id: first.row().device_id(),
            };
        }
        let rest = live.count();
        let mut ids = std::iter::once(first.row().device_id())
            .chain(others)
            .collect::<Vec<_>>()
            .join(", ");
        if rest > 0 {
            ids.push_str(&format!(" and {rest} more"));
        }
        Located::Ambiguous(ids)
    }
}

/// The lowest and highest MAC that start with a Device-Id prefix (`aa:b`).
pub fn bounds(prefix: &str) -> (Mac, Mac) {
    let digits: Vec<u8> = prefix
        .bytes()
        .filter_map(|c| (c as char).to_digit(16).map(|d| d as u8))
        .collect();
    let (mut lo, mut hi) = ([0u8; 6], [0xffu8; 6]);
    for (i, d) in digits.iter().take(12).enumerate() {
        let (byte, high) = (i / 2, i % 2 == 0);
        if high {
            lo[byte] = d << 4;
            hi[byte] = (d << 4) | 0x0f;
        } else {
            lo[byte] |= d;
            hi[byte] = (hi[byte] & 0xf0) | d;
        }
    }
    (lo, hi)
}

/// Shared between the dispatcher (which feeds it) and the control API (which reads it).
pub type SharedView = Arc<std::sync::Mutex<View>>;

#[cfg(test)]
#[path = "cluster_view_tests.rs"]
mod tests;
