//! Which hub serves which device when several hubs share one broker (I/O-free).
//!
//! Hubs read the uplinks through one shared subscription, so any hub may get any device message.
//! A device is served by exactly one hub, its **owner**, decided on the broker itself:
//! - each hub keeps a retained presence record `mcpdev/hubs/<hub>`, cleared by its last will;
//!   presence records, claims and forwarded messages are sealed with the hub secret
//!   ([`super::cluster_seal`]), and only those that open reach this module;
//! - a hub that gets a message from a device nobody (alive) owns publishes a retained claim
//!   `mcpdev/claims/<key>` = its id, holds the device's messages, and acts only once its own
//!   claim has come back from the broker and a short settle time has passed with no later claim;
//! - every hub applies every claim in the order the broker delivers them, and the **last claim
//!   wins**. All hubs see one order, so they agree; a hub that sees a later claim for a device it
//!   serves drops its session (it is served elsewhere now), and a hub whose own claim comes back
//!   last serves the device, even one it had let go meanwhile (a claim delayed behind a stalled
//!   broker, or sent again after a reconnect): it asks the device first;
//! - a hub that gets a message of a device another live hub owns passes it on to that hub
//!   (`mcpdev/fwd/<owner>/<key>`); only the owner publishes to the device;
//! - when a hub dies (its presence is cleared by its last will), each of its devices is taken
//!   over at once by one survivor, the same for every hub that sees the same live hubs
//!   ([`Claims::takeover`], rendezvous hashing): it claims the device like any other, and once
//!   the claim stands it starts the device's session and sends `initialize` without waiting for
//!   the device to talk. Two survivors that disagree both claim, and the last claim wins as above.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Keys noted with a time, each forgotten once older than `max_age`: the claims a hub sent and
/// has not seen back ([`crate::mqtt::hub`]), the claims it put back after a forgery
/// ([`super::cluster_seal::Restores`]). Bounded: entries older than `max_age` are swept whenever
/// the map has doubled, so it holds about two periods' worth of keys at most.
#[derive(Debug)]
pub struct Recent {
    at: HashMap<String, Instant>,
    sweep_at: usize,
    max_age: Duration,
}

impl Recent {
    pub fn new(max_age: Duration) -> Self {
        Self { at: HashMap::new(), sweep_at: 0, max_age }
    }

    /// Notes `key` at `now`.
    pub fn note(&mut self, key: &str, now: Instant) {
        self.at.insert(key.to_string(), now);
        if self.at.len() >= self.sweep_at {
            let max_age = self.max_age;
            self.at.retain(|_, t| now.duration_since(*t) < max_age);
            self.sweep_at = (self.at.len() * 2).max(1024);
        }
    }

    /// Whether `key` was noted less than `max_age` before `now`.
    pub fn is_recent(&self, key: &str, now: Instant) -> bool {
        self.at.get(key).is_some_and(|t| now.duration_since(*t) < self.max_age)
    }

    /// Forgets `key`; whether it had been noted less than `max_age` before `now`.
    pub fn take(&mut self, key: &str, now: Instant) -> bool {
        self.at.remove(key).is_some_and(|t| now.duration_since(t) < self.max_age)
    }

    pub fn len(&self) -> usize {
        self.at.len()
    }

    pub fn is_empty(&self) -> bool {
        self.at.is_empty()
    }
}

/// What to do with a device message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    Mine,
    Forward(String),
    /// Nobody alive owns the device: claim it.
    Claim,
}

/// Every claim this hub has seen, one entry a device of the cluster's broker (every hub holds
/// them all: ~19,000 at 100,000 devices on 6 hubs). The owner is one shared copy of its hub's id,
/// not a string a device (issue 46.3).
#[derive(Debug)]
pub struct Claims {
    me: String,
    owners: HashMap<Box<str>, Arc<str>>,
    /// The hub ids the owners share; those no claim names any more are dropped whenever the set
    /// has doubled (hubs get a new id each start).
    hub_ids: HashSet<Arc<str>>,
    prune_at: usize,
    alive: HashSet<String>,
}

impl Claims {
    pub fn new(me: impl Into<String>) -> Self {
        Self { me: me.into(), owners: HashMap::new(), hub_ids: HashSet::new(), prune_at: 64, alive: HashSet::new() }
    }

    /// The shared copy of a hub's id.
    fn hub_id(&mut self, hub: &str) -> Arc<str> {
        if let Some(id) = self.hub_ids.get(hub) {
            return id.clone();
        }
        if self.hub_ids.len() >= self.prune_at {
            self.hub_ids.retain(|id| Arc::strong_count(id) > 1);
            self.prune_at = (self.hub_ids.len() * 2).max(64);
        }
        let id: Arc<str> = Arc::from(hub);
        self.hub_ids.insert(id.clone());
        id
    }

    pub fn me(&self) -> &str {
        &self.me
    }

    pub fn owner(&self, key: &str) -> Option<&str> {
        self.owners.get(key).map(|h| &**h)
    }

    pub fn route(&self, key: &str) -> Route {
        match self.owners.get(key) {
            Some(h) if **h == *self.me => Route::Mine,
            Some(h) if self.alive.contains(&**h) => Route::Forward(h.to_string()),
            _ => Route::Claim,
        }
    }

    /// A claim (`Some(hub)`) or its removal (`None`), in broker order. Returns `true` when this
    /// hub owned the device and no longer does.
    pub fn on_claim(&mut self, key: &str, hub: Option<&str>) -> bool {
        let was_mine = self.owners.get(key).is_some_and(|h| **h == *self.me);
        match hub {
            Some(h) => {
                let h = self.hub_id(h);
                match self.owners.get_mut(key) {
                    Some(owner) => *owner = h,
                    None => {
                        self.owners.insert(key.into(), h);
                    }
                }
            }
            None => {
                self.owners.remove(key);
            }
        }
        was_mine && self.owner(key) != Some(self.me.as_str())
    }

    pub fn on_presence(&mut self, hub: &str, alive: bool) {
        if alive {
            self.alive.insert(hub.to_string());
        } else {
            self.alive.remove(hub);
        }
    }

    /// After reconnecting: presence is learned again from the broker.
    pub fn forget_presence(&mut self) {
        self.alive.clear();
    }

    /// The devices whose owner is not alive and that this hub is the one to take over (of the
    /// live hubs and this one, the highest rendezvous score for the device), without those
    /// already `claiming`.
    pub fn takeover(&self, claiming: &HashSet<String>) -> Vec<String> {
        let mut candidates: Vec<&str> = self.alive.iter().map(String::as_str).collect();
        if !self.alive.contains(&self.me) {
            candidates.push(&self.me);
        }
        self.owners
            .iter()
            .filter(|(k, h)| ***h != *self.me && !self.alive.contains(&***h) && !claiming.contains(&***k))
            .filter(|(k, _)| candidates.iter().max_by_key(|h| (score(k, h), **h)).is_some_and(|h| *h == self.me))
            .map(|(k, _)| k.to_string())
            .collect()
    }

    /// The devices this hub owns (those it still serves are claimed again after a reconnect, in
    /// case the broker restarted without keeping retained messages).
    pub fn mine(&self) -> Vec<String> {
        self.owners.iter().filter(|(_, h)| ***h == *self.me).map(|(k, _)| k.to_string()).collect()
    }
}

/// A stable score of a device for a hub (FNV-1a of both): every hub computes the same.
fn score(key: &str, hub: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in key.bytes().chain([0]).chain(hub.bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    // FNV's low bits mix poorly for inputs that differ at the end: finish with a mixer.
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^ (h >> 33)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two hubs that see the same claim stream agree on one owner, whatever the interleaving.
    #[test]
    fn last_claim_wins_and_both_hubs_agree() {
        let (mut a, mut b) = (Claims::new("a"), Claims::new("b"));
        for c in [&mut a, &mut b] {
            c.on_presence("a", true);
            c.on_presence("b", true);
            assert_eq!(c.route("k"), Route::Claim);
        }
        // Both claimed at once; the broker ordered a's claim first.
        for c in [&mut a, &mut b] {
            c.on_claim("k", Some("a"));
        }
        assert_eq!((a.route("k"), b.route("k")), (Route::Mine, Route::Forward("a".into())));
        assert!(a.on_claim("k", Some("b")), "a learns it lost the device");
        assert!(!b.on_claim("k", Some("b")));
        assert_eq!((a.route("k"), b.route("k")), (Route::Forward("b".into()), Route::Mine));
        assert_eq!((a.mine(), b.mine()), (vec![], vec!["k".to_string()]));
    }

    /// When a hub dies, every survivor that sees the same live hubs picks the same taker for
    /// each device, and the devices spread over the survivors.
    #[test]
    fn survivors_agree_on_who_takes_each_device_over() {
        let hubs = ["a", "b", "c"];
        let mut views: Vec<Claims> = hubs.iter().map(|h| Claims::new(*h)).collect();
        for v in &mut views {
            for h in hubs {
                v.on_presence(h, true);
            }
            for i in 0..300 {
                v.on_claim(&format!("k{i}"), Some("c"));
            }
            v.on_claim("mine-a", Some("a"));
            v.on_presence("c", false);
        }
        let none = HashSet::new();
        let (a, b) = (views[0].takeover(&none), views[1].takeover(&none));
        assert!(views[2].takeover(&none).is_empty(), "the dead hub's own view is not asked");
        assert_eq!(a.len() + b.len(), 300, "every device of the dead hub is taken, once");
        assert!(a.iter().all(|k| !b.contains(k)));
        assert!(a.len() > 100 && b.len() > 100, "spread: {} / {}", a.len(), b.len());
        assert!(!a.contains(&"mine-a".to_string()) && !b.contains(&"mine-a".to_string()), "a live hub's device stays");
        let claiming: HashSet<String> = a.iter().cloned().collect();
        assert!(views[0].takeover(&claiming).is_empty(), "a device already being claimed is not claimed again");
    }

    /// Issue 46.3: the owners share one copy of each hub's id, and the ids no claim names any
    /// more (hubs restart with a new one) are dropped, so the set stays bounded.
    #[test]
    fn claims_share_hub_ids_and_forget_those_no_claim_names() {
        let mut a = Claims::new("a");
        for i in 0..200 {
            a.on_claim(&format!("k{i}"), Some(if i % 2 == 0 { "h0" } else { "h1" }));
        }
        assert_eq!(a.hub_ids.len(), 2, "one copy a hub");
        assert!(Arc::ptr_eq(&a.owners["k0"], &a.owners["k2"]));
        for i in 0..1000 {
            a.on_claim("moving", Some(&format!("old{i}")));
        }
        assert!(a.hub_ids.len() <= 64, "{} ids kept", a.hub_ids.len());
        assert_eq!((a.owner("moving"), a.owner("k1"), a.owner("k0")), (Some("old999"), Some("h1"), Some("h0")));
    }

    #[test]
    fn a_dead_owner_frees_its_devices() {
        let mut a = Claims::new("a");
        a.on_presence("b", true);
        a.on_claim("k", Some("b"));
        assert_eq!(a.route("k"), Route::Forward("b".into()));
        a.on_presence("b", false);
        assert_eq!(a.route("k"), Route::Claim);
        a.on_claim("k", None);
        assert_eq!(a.owner("k"), None);
    }
}
