//! Pending requests for admission, each bound to the peer that made it.
//!
//! - **A request is bound to its first requester**: Device-Id, Client-Id, device key (its hash),
//!   transport and address. A request that differs in any of them is a *separate* request with its
//!   own code, challenge and nonce, never a refresh of the first; two requests for one Device-Id
//!   are shown side by side as conflicting. A refresh keeps the code until it expires
//!   ([`CODE_LIFETIME`]).
//! - **What one peer can make the hub hold is capped**, by address and by network ([`prefix`]:
//!   the /24 of an IPv4 address, the /64 of an IPv6 one; an IPv4-mapped IPv6 address is its IPv4
//!   address). New requests per address are rate-limited ([`NEW_PER_SEC`], burst [`NEW_BURST`]);
//!   an address holds at most [`MAX_PER_PEER`] requests (a new one replaces its own oldest); a
//!   network at most [`MAX_PER_PREFIX`]; all together at most [`MAX_PENDING`].
//! - **An address's only request is never evicted.** When a network or the whole store is full,
//!   a request goes only from an address that holds more than one; among those, one that nobody
//!   was shown (`devices pending`, the dashboard) and that is not polling `/activate` goes first,
//!   then the busiest address's, then the oldest. When every address holds one, the *new* request
//!   is refused ([`Refusal::Busy`], 429 with `Retry-After` until the first code there expires), so
//!   a flood from any number of addresses costs at most [`MAX_PENDING`] requests and never a
//!   waiting device's code.
//! - What an unauthenticated check-in reports (board, chip, firmware) stays in its request,
//!   apart from the admitted device's own record, and is capped ([`MAX_REPORTED`] bytes).

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::refusal::{Crowded, Refusal};

/// Pending requests kept at most, in all.
pub const MAX_PENDING: usize = 256;
/// Pending requests one network ([`prefix`]) may hold.
pub const MAX_PER_PREFIX: usize = 64;
/// Pending requests one address may hold (a new one replaces its own oldest).
pub const MAX_PER_PEER: usize = 32;
/// New requests one address may open per second, sustained, and in a burst.
pub const NEW_PER_SEC: f64 = 5.0;
pub const NEW_BURST: f64 = 20.0;
/// How long an activation code stays valid.
pub const CODE_LIFETIME: Duration = Duration::from_secs(600);
/// The largest `reported` summary kept with a request.
pub const MAX_REPORTED: usize = 1024;
/// Addresses whose request rate is tracked at most.
const MAX_BUCKETS: usize = 4096;

/// How a pending device reached the hub.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Via {
    /// The OTA check-in: the device learns its token from the check-in's answer.
    Ota,
    /// A refused WebSocket: the device must be given its token by hand.
    Websocket,
    /// A WebSocket through a trusted gateway (its credential): no device token is needed.
    Gateway,
}

/// Who asked: what a request is bound to.
#[derive(Debug, Clone)]
pub struct Requester<'a> {
    pub device_id: &'a str,
    pub via: Via,
    pub client_id: Option<&'a str>,
    /// SHA-256 (hex) of the device key it sent, if it sent one.
    pub key_hash: Option<String>,
    pub remote: Option<SocketAddr>,
    /// What it reported about itself (board, chip, firmware), unauthenticated.
    pub reported: Option<Value>,
}

/// A device waiting for approval.
#[derive(Debug, Clone, Serialize)]
pub struct Pending {
    pub device_id: String,
    pub code: String,
    pub challenge: String,
    pub via: Via,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remote: Option<String>,
    /// Whether the request came with a device key (a proof beyond its Client-Id).
    pub device_key: bool,
    /// Unix ms of the first request with this code.
    pub since_ms: u64,
    /// How long the code stays valid, from now.
    pub expires_in_ms: u64,
    /// What the requester reported about itself: unauthenticated, for the person approving.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reported: Option<Value>,
    /// Why approving this request needs a second look: other requests for the same Device-Id, or
    /// an admitted binding it would replace (filled in when listed).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub conflicts: Vec<String>,
    #[serde(skip)]
    pub(super) key_hash: Option<String>,
    #[serde(skip)]
    pub(super) nonce: String,
    /// The requester's address, canonical (an IPv4-mapped IPv6 address is its IPv4 address).
    #[serde(skip)]
    pub(super) ip: Option<IpAddr>,
    #[serde(skip)]
    pub(super) since: Instant,
    /// A person was shown this code (it was listed), or its device polls `/activate` for it:
    /// evicted only after the requests that are neither.
    #[serde(skip)]
    pub(super) seen: bool,
}

impl Pending {
    fn same_requester(&self, r: &Requester<'_>) -> bool {
        self.device_id == r.device_id
            && self.via == r.via
            && self.client_id.as_deref() == r.client_id
            && self.key_hash == r.key_hash
            && self.ip == r.remote.map(|a| a.ip().to_canonical())
    }

    fn live(&self, now: Instant) -> bool {
        now.duration_since(self.since) < CODE_LIFETIME
    }

    pub(super) fn with_expiry(mut self, now: Instant) -> Self {
        self.expires_in_ms = CODE_LIFETIME.saturating_sub(now.duration_since(self.since)).as_millis() as u64;
        self
    }
}

/// The network an address is counted in: its /24 (IPv4, also IPv4-mapped IPv6) or its /64 (IPv6).
pub fn prefix(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V4(v4) => IpAddr::V4(Ipv4Addr::from(u32::from(v4) & !0xff)),
        IpAddr::V6(v6) => IpAddr::V6(Ipv6Addr::from(u128::from(v6) & !u128::from(u64::MAX))),
    }
}

/// The per-address rate of new requests (a token bucket).
struct Bucket {
    tokens: f64,
    at: Instant,
}

/// Every pending request, by code.
#[derive(Default)]
pub struct Requests {
    by_code: HashMap<String, Pending>,
    buckets: HashMap<IpAddr, Bucket>,
}

/// What [`Requests::open`] did.
pub enum Opened {
    /// A new request; `evicted` names the code it pushed out, if any.
    New { pending: Box<Pending>, evicted: Option<Box<Pending>> },
    /// The requester's own live request, refreshed.
    Existing(Box<Pending>),
}

impl Requests {
    fn expire(&mut self, now: Instant) {
        self.by_code.retain(|_, p| p.live(now));
    }

    /// The requester's live request, refreshed, or a new one (within the caps).
    pub fn open(&mut self, r: &Requester<'_>, now: Instant, now_ms: u64, random: &mut dyn FnMut() -> u64) -> Result<Opened, Refusal> {
        self.expire(now);
        if let Some(p) = self.by_code.values_mut().find(|p| p.same_requester(r)) {
            if r.reported.is_some() {
                p.reported = r.reported.clone();
            }
            return Ok(Opened::Existing(Box::new(p.clone().with_expiry(now))));
        }
        let ip = r.remote.map(|a| a.ip().to_canonical());
        if let Some(ip) = ip {
            self.take_token(ip, now)?;
        }
        let evicted = self.make_room(ip, now)?.map(Box::new);
        let code = loop {
            let c = format!("{:06}", random() % 1_000_000);
            if !self.by_code.contains_key(&c) {
                break c;
            }
        };
        let p = Pending {
            device_id: r.device_id.to_string(),
            code: code.clone(),
            challenge: format!("{:016x}{:016x}", random(), random()),
            via: r.via,
            client_id: r.client_id.map(str::to_string),
            remote: r.remote.map(|a| a.to_string()),
            device_key: r.key_hash.is_some(),
            since_ms: now_ms,
            expires_in_ms: 0,
            reported: r.reported.clone(),
            conflicts: Vec::new(),
            key_hash: r.key_hash.clone(),
            nonce: format!("{:016x}{:016x}", random(), random()),
            ip,
            since: now,
            seen: false,
        };
        self.by_code.insert(code, p.clone());
        Ok(Opened::New { pending: Box::new(p.with_expiry(now)), evicted })
    }

    /// Room for one more request from `ip`: the request it evicted, if any, or why there is none.
    /// An address at its own cap replaces its own; a full network or store gives up a request of
    /// an address that holds several, never an address's only one.
    fn make_room(&mut self, ip: Option<IpAddr>, now: Instant) -> Result<Option<Pending>, Refusal> {
        let mine = self.by_code.values().filter(|p| p.ip == ip).count();
        if ip.is_some() && mine >= MAX_PER_PEER {
            return Ok(self.evict(|p| p.ip == ip));
        }
        let net = ip.map(prefix);
        if let Some(net) = net
            && self.by_code.values().filter(|p| p.ip.map(prefix) == Some(net)).count() >= MAX_PER_PREFIX
        {
            let in_net = |p: &Pending| p.ip.map(prefix) == Some(net);
            return match self.evict(in_net) {
                Some(gone) => Ok(Some(gone)),
                None => Err(Refusal::Busy { retry_after_s: self.first_expiry(in_net, now), cap: Crowded::Network }),
            };
        }
        if self.by_code.len() >= MAX_PENDING {
            return match self.evict(|_| true) {
                Some(gone) => Ok(Some(gone)),
                None => Err(Refusal::Busy { retry_after_s: self.first_expiry(|_| true, now), cap: Crowded::Full }),
            };
        }
        Ok(None)
    }

    /// Removes the request, among those `among` takes, that matters least: only from an address
    /// holding more than one; one not seen before one seen, the busiest address's first, then
    /// the oldest. `None` when every address there holds one.
    fn evict(&mut self, among: impl Fn(&Pending) -> bool) -> Option<Pending> {
        let mut held: HashMap<Option<IpAddr>, usize> = HashMap::new();
        for p in self.by_code.values() {
            *held.entry(p.ip).or_default() += 1;
        }
        let code = self
            .by_code
            .values()
            .filter(|p| among(p) && held[&p.ip] > 1)
            .min_by_key(|p| (p.seen, std::cmp::Reverse(held[&p.ip]), p.since, p.code.clone()))
            .map(|p| p.code.clone())?;
        self.by_code.remove(&code)
    }

    /// Whole seconds (at least 1) until the first of the requests `among` takes expires.
    fn first_expiry(&self, among: impl Fn(&Pending) -> bool, now: Instant) -> u64 {
        let oldest = self.by_code.values().filter(|p| among(p)).map(|p| p.since).min().unwrap_or(now);
        CODE_LIFETIME.saturating_sub(now.duration_since(oldest)).as_secs_f64().ceil().max(1.0) as u64
    }

    fn take_token(&mut self, ip: IpAddr, now: Instant) -> Result<(), Refusal> {
        if self.buckets.len() >= MAX_BUCKETS && !self.buckets.contains_key(&ip) {
            self.buckets.retain(|_, b| now.duration_since(b.at) < Duration::from_secs(10));
            if self.buckets.len() >= MAX_BUCKETS {
                self.buckets.clear();
            }
        }
        let b = self.buckets.entry(ip).or_insert(Bucket { tokens: NEW_BURST, at: now });
        b.tokens = (b.tokens + now.duration_since(b.at).as_secs_f64() * NEW_PER_SEC).min(NEW_BURST);
        b.at = now;
        if b.tokens < 1.0 {
            return Err(Refusal::Busy { retry_after_s: 1, cap: Crowded::Rate });
        }
        b.tokens -= 1.0;
        Ok(())
    }

    /// The live request with `code`.
    pub fn by_code(&self, code: &str, now: Instant) -> Option<&Pending> {
        self.by_code.get(code).filter(|p| p.live(now))
    }

    /// Live requests for `device_id`.
    pub fn of_device<'a>(&'a self, device_id: &'a str, now: Instant) -> impl Iterator<Item = &'a Pending> + 'a {
        self.by_code.values().filter(move |p| p.device_id == device_id && p.live(now))
    }

    /// Every live request.
    pub fn live(&self, now: Instant) -> impl Iterator<Item = &Pending> + '_ {
        self.by_code.values().filter(move |p| p.live(now))
    }

    /// Marks the request with `code` as seen: a person was shown it, or its device polls for it.
    pub fn seen(&mut self, code: &str) {
        if let Some(p) = self.by_code.get_mut(code) {
            p.seen = true;
        }
    }

    pub fn remove(&mut self, code: &str) -> Option<Pending> {
        self.by_code.remove(code)
    }

    /// Drops every request for `device_id`.
    pub fn remove_device(&mut self, device_id: &str) {
        self.by_code.retain(|_, p| p.device_id != device_id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hub::admission::refusal::Crowded;

    fn counter() -> impl FnMut() -> u64 {
        let mut n = 0u64;
        move || {
            n += 7919;
            n
        }
    }

    fn req<'a>(device_id: &'a str, client_id: Option<&'a str>, remote: &str) -> Requester<'a> {
        Requester { device_id, via: Via::Ota, client_id, key_hash: None, remote: Some(remote.parse().unwrap()), reported: None }
    }

    fn code_of(o: Opened) -> String {
        match o {
            Opened::New { pending, .. } | Opened::Existing(pending) => pending.code.clone(),
        }
    }

    #[test]
    fn another_requester_for_the_same_device_is_another_request() {
        let mut rs = Requests::default();
        let (now, mut rnd) = (Instant::now(), counter());
        let victim = code_of(rs.open(&req("aa:00:00:00:00:01", Some("victim"), "10.0.0.5:1"), now, 0, &mut rnd).unwrap());
        assert_eq!(code_of(rs.open(&req("aa:00:00:00:00:01", Some("victim"), "10.0.0.5:2"), now, 0, &mut rnd).unwrap()), victim, "the same requester refreshes its request");
        let thief = code_of(rs.open(&req("aa:00:00:00:00:01", Some("thief"), "10.0.0.66:1"), now, 0, &mut rnd).unwrap());
        assert_ne!(thief, victim);
        let same_client_other_address = code_of(rs.open(&req("aa:00:00:00:00:01", Some("victim"), "10.0.0.66:1"), now, 0, &mut rnd).unwrap());
        assert_ne!(same_client_other_address, victim, "a request is bound to its address too");
        let mut ws = req("aa:00:00:00:00:01", Some("victim"), "10.0.0.5:1");
        ws.via = Via::Websocket;
        assert_ne!(code_of(rs.open(&ws, now, 0, &mut rnd).unwrap()), victim, "and to its transport");
        assert_eq!(rs.by_code(&victim, now).unwrap().client_id.as_deref(), Some("victim"), "the first requester's request is untouched");
        assert_eq!(rs.of_device("aa:00:00:00:00:01", now).count(), 4);
    }

    #[test]
    fn a_flooding_peer_is_slowed_and_evicts_only_its_own_requests() {
        let mut rs = Requests::default();
        let (mut now, mut rnd) = (Instant::now(), counter());
        let real = code_of(rs.open(&req("aa:00:00:00:00:01", Some("real"), "10.0.0.5:1"), now, 0, &mut rnd).unwrap());
        let mut busy = 0;
        for i in 0..2_000u32 {
            let id = format!("02:00:00:00:{:02x}:{:02x}", i / 256, i % 256);
            match rs.open(&req(&id, Some("x"), "10.6.6.6:1"), now, 0, &mut rnd) {
                Ok(_) => {}
                Err(Refusal::Busy { .. }) => busy += 1,
                Err(e) => panic!("{e}"),
            }
            now += Duration::from_millis(50); // 20 a second: four times the sustained rate
        }
        assert!(busy > 1_000, "the flood is slowed: {busy} refused");
        assert!(rs.live(now).filter(|p| p.ip == Some("10.6.6.6".parse().unwrap())).count() <= MAX_PER_PEER);
        assert!(rs.by_code(&real, now).is_some(), "the real device's code survives the flood");
    }

    #[test]
    fn a_full_book_evicts_from_the_busiest_peer() {
        let mut rs = Requests::default();
        let (now, mut rnd) = (Instant::now(), counter());
        let real = code_of(rs.open(&req("aa:00:00:00:00:01", Some("real"), "10.0.0.5:1"), now, 0, &mut rnd).unwrap());
        // Many peers, each within its own caps, fill the book; the busiest one pays.
        let mut n = 0u32;
        for peer in 0..40u32 {
            for _ in 0..if peer == 0 { 20 } else { 7 } {
                let id = format!("02:00:00:00:{:02x}:{:02x}", n / 256, n % 256);
                n += 1;
                let _ = rs.open(&req(&id, None, &format!("10.1.{peer}.1:1")), now, 0, &mut rnd).unwrap();
            }
        }
        assert!(rs.live(now).count() <= MAX_PENDING);
        assert!(rs.by_code(&real, now).is_some(), "a single request is never the one evicted");
        assert!(rs.live(now).filter(|p| p.ip == Some("10.1.0.1".parse().unwrap())).count() < 20, "the busiest peer lost requests");
    }

    /// Issue 31: one request from each of 1,000 addresses, in ten /24s, the real device's
    /// address among them (so it ties for "busiest"): its code survives; the flood is refused
    /// once its networks, then the store, are full.
    #[test]
    fn a_flood_from_a_thousand_addresses_never_evicts_an_addresss_only_request() {
        let mut rs = Requests::default();
        let (now, mut rnd) = (Instant::now(), counter());
        let real = code_of(rs.open(&req("aa:00:00:00:00:01", Some("real"), "127.0.0.1:1"), now, 0, &mut rnd).unwrap());
        let (mut network, mut full) = (0, 0);
        for i in 0..1_000u32 {
            let id = format!("02:00:00:00:{:02x}:{:02x}", i / 256, i % 256);
            match rs.open(&req(&id, None, &format!("127.0.{}.{}:1", i / 100, i % 100 + 2)), now, 0, &mut rnd) {
                Ok(Opened::New { evicted, .. }) => assert!(evicted.is_none(), "an address's only request was evicted"),
                Ok(Opened::Existing(_)) => panic!("a new requester refreshed another's request"),
                Err(Refusal::Busy { cap: Crowded::Network, retry_after_s }) => {
                    assert!((1..=CODE_LIFETIME.as_secs()).contains(&retry_after_s));
                    network += 1;
                }
                Err(Refusal::Busy { cap: Crowded::Full, .. }) => full += 1,
                Err(e) => panic!("{e}"),
            }
        }
        assert!(rs.by_code(&real, now).is_some(), "the real device's code survives");
        assert_eq!(rs.live(now).count(), MAX_PENDING);
        assert!(network > 0 && full > 0, "refused: {network} by network, {full} as full");
        for net in 0..10 {
            let prefix: IpAddr = format!("127.0.{net}.0").parse().unwrap();
            assert!(rs.live(now).filter(|p| p.ip.map(super::prefix) == Some(prefix)).count() <= MAX_PER_PREFIX);
        }
    }

    #[test]
    fn networks_are_slash_24_and_slash_64_and_a_mapped_address_is_its_ipv4_one() {
        let p = |s: &str| prefix(s.parse().unwrap());
        assert_eq!(p("10.1.2.3"), p("10.1.2.200"));
        assert_ne!(p("10.1.2.3"), p("10.1.3.3"));
        assert_eq!(p("::ffff:10.1.2.3"), p("10.1.2.9"), "IPv4-mapped IPv6 counts as IPv4");
        assert_eq!(p("2001:db8:0:1::5"), p("2001:db8:0:1:ffff::1"));
        assert_ne!(p("2001:db8:0:1::5"), p("2001:db8:0:2::5"));
        // The same device over IPv4 and IPv4-mapped IPv6 is one requester at one address.
        let mut rs = Requests::default();
        let (now, mut rnd) = (Instant::now(), counter());
        let a = code_of(rs.open(&req("aa:00:00:00:00:01", Some("c"), "10.0.0.5:1"), now, 0, &mut rnd).unwrap());
        assert_eq!(code_of(rs.open(&req("aa:00:00:00:00:01", Some("c"), "[::ffff:10.0.0.5]:2"), now, 0, &mut rnd).unwrap()), a);
        // A flood from one /64, one request per address, meets the network's cap.
        let mut refused = 0;
        for i in 0..(MAX_PER_PREFIX as u32 + 10) {
            let id = format!("02:00:00:00:{:02x}:{:02x}", i / 256, i % 256);
            if let Err(Refusal::Busy { cap: Crowded::Network, .. }) = rs.open(&req(&id, None, &format!("[2001:db8::{:x}]:1", i + 1)), now, 0, &mut rnd) {
                refused += 1;
            }
        }
        assert_eq!(refused, 10);
    }

    /// Behind one address (a NAT) several real devices wait; a person listed some, one polls
    /// `/activate`. A flood from that address replaces its unseen requests first.
    #[test]
    fn seen_and_polled_codes_are_kept_ahead_of_the_others() {
        let mut rs = Requests::default();
        let (mut now, mut rnd) = (Instant::now(), counter());
        let mut codes = Vec::new();
        for i in 0..4u32 {
            codes.push(code_of(rs.open(&req(&format!("aa:00:00:00:00:{i:02x}"), Some("real"), "10.0.0.5:1"), now, 0, &mut rnd).unwrap()));
        }
        rs.seen(&codes[0]);
        rs.seen(&codes[2]);
        for i in 0..200u32 {
            let id = format!("02:00:00:00:{:02x}:{:02x}", i / 256, i % 256);
            let _ = rs.open(&req(&id, Some("flood"), "10.0.0.5:1"), now, 0, &mut rnd);
            now += Duration::from_millis(250); // within the address's rate
        }
        assert_eq!(rs.live(now).filter(|p| p.ip == Some("10.0.0.5".parse().unwrap())).count(), MAX_PER_PEER);
        assert!(rs.by_code(&codes[0], now).is_some() && rs.by_code(&codes[2], now).is_some(), "the seen codes survive");
        assert!(rs.by_code(&codes[1], now).is_none() && rs.by_code(&codes[3], now).is_none(), "unseen ones of the same address went first");
    }

    #[test]
    fn codes_expire() {
        let mut rs = Requests::default();
        let (now, mut rnd) = (Instant::now(), counter());
        let code = code_of(rs.open(&req("aa:00:00:00:00:01", None, "10.0.0.5:1"), now, 0, &mut rnd).unwrap());
        assert!(rs.by_code(&code, now + CODE_LIFETIME).is_none());
        assert_ne!(code_of(rs.open(&req("aa:00:00:00:00:01", None, "10.0.0.5:1"), now + CODE_LIFETIME, 0, &mut rnd).unwrap()), code);
    }
}
