//! Wrong tokens per peer: a cap on guessing at the host listener's credentials.
//!
//! Every bearer token the host listener checks (the control API's control and remote tokens,
//! the dashboard's, `/mcp`'s `MCPDEV_MCP_TOKEN`) is 256 random bits, so guessing one is hopeless;
//! what a flood of guesses costs is the hub's time and its log. Rules:
//! - **A right token is never held up.** A presented token is recognised first (that costs one
//!   SHA-256 and constant-time compares, as a refusal does); only a wrong one meets these
//!   buckets. So a neighbour behind the same NAT or IPv6 /64 who floods wrong tokens never locks
//!   out the people who share its address ([`super::bearer`]).
//! - Each peer (an IPv4 address; an IPv6 /64, which one host owns whole) has a bucket of
//!   [`BURST`] wrong tokens, refilled at one per [`REFILL`]. A peer whose bucket is empty gets
//!   429 with `Retry-After` for every *wrong* token until it refills.
//! - The hub as a whole has a bucket of [`GLOBAL_BURST`] wrong tokens, refilled at one per
//!   [`GLOBAL_REFILL`]: a flood from many addresses is bounded too (and then gets 429).
//! - The refusal is counted (`mcpdev_refusals_total{reason="token_guesses"}`) and logged
//!   through the peer limiter of log lines ([`crate::metrics::log_limit`]: 5 per peer per 10 s,
//!   the rest summed up).
//! - At most [`MAX_PEERS`] peers are followed; beyond, those with full buckets are forgotten
//!   first, then the oldest.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Wrong tokens a peer may send in a burst.
pub const BURST: f64 = 10.0;
/// One more wrong token per this long.
pub const REFILL: Duration = Duration::from_secs(3);
/// Peers followed at most.
pub const MAX_PEERS: usize = 4096;
/// Wrong tokens all peers together may send in a burst.
pub const GLOBAL_BURST: f64 = 1000.0;
/// One more wrong token, from any peer, per this long (100 a second).
pub const GLOBAL_REFILL: Duration = Duration::from_millis(10);

struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Bucket {
    fn level(&self, now: Instant) -> f64 {
        self.level_of(now, BURST, REFILL)
    }

    fn level_of(&self, now: Instant, burst: f64, refill: Duration) -> f64 {
        (self.tokens + now.saturating_duration_since(self.at).as_secs_f64() / refill.as_secs_f64()).min(burst)
    }
}

struct Inner {
    peers: HashMap<IpAddr, Bucket>,
    /// Every peer's wrong tokens together.
    all: Bucket,
}

pub struct Guesses {
    inner: Mutex<Inner>,
}

impl Default for Guesses {
    fn default() -> Self {
        Self { inner: Mutex::new(Inner { peers: HashMap::new(), all: Bucket { tokens: GLOBAL_BURST, at: Instant::now() } }) }
    }
}

/// The key a peer is followed by (an IPv4 address, an IPv6 /64).
pub fn key(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        v4 @ IpAddr::V4(_) => v4,
        IpAddr::V6(v6) => IpAddr::V6((u128::from(v6) & !u128::from(u64::MAX)).into()),
    }
}

impl Guesses {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // Nothing under this lock can panic; a poisoned one is still consistent.
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// `Err(retry after)` when a wrong token from `ip` is over its peer's or the hub's cap now
    /// (logged, counted); only wrong tokens are asked about ([`super::bearer`]).
    pub fn check(&self, ip: IpAddr, path: &str) -> Result<(), Duration> {
        self.check_at(ip, path, Instant::now())
    }

    fn check_at(&self, ip: IpAddr, path: &str, now: Instant) -> Result<(), Duration> {
        let (peer, all) = {
            let inner = self.lock();
            (inner.peers.get(&key(ip)).map_or(BURST, |b| b.level(now)), inner.all.level_of(now, GLOBAL_BURST, GLOBAL_REFILL))
        };
        if peer >= 1.0 && all >= 1.0 {
            return Ok(());
        }
        crate::metrics::refused(crate::metrics::Refused::TokenGuesses);
        let (retry, log_key) = if peer < 1.0 { (REFILL.mul_f64(1.0 - peer), format!("token guesses {}", key(ip))) } else { (GLOBAL_REFILL.mul_f64(1.0 - all), "token guesses (all peers)".to_string()) };
        if crate::metrics::log_limit::allow(crate::metrics::log_limit::Kind::Refusal, &log_key) {
            if peer < 1.0 {
                tracing::warn!(peer = %ip, path, "refused a wrong token from a peer that sent {BURST} wrong ones: it may send one more in {} s (right tokens are not held up)", retry.as_secs() + 1);
            } else {
                tracing::warn!(peer = %ip, path, "refused a wrong token: all peers together sent {GLOBAL_BURST} wrong ones (right tokens are not held up)");
            }
        }
        Err(retry)
    }

    /// Counts a wrong token from `ip`.
    pub fn wrong(&self, ip: IpAddr) {
        self.wrong_at(ip, Instant::now());
    }

    fn wrong_at(&self, ip: IpAddr, now: Instant) {
        let mut inner = self.lock();
        let all = inner.all.level_of(now, GLOBAL_BURST, GLOBAL_REFILL);
        inner.all = Bucket { tokens: (all - 1.0).max(0.0), at: now };
        let peers = &mut inner.peers;
        if peers.len() >= MAX_PEERS && !peers.contains_key(&key(ip)) {
            peers.retain(|_, b| b.level(now) < BURST);
            if peers.len() >= MAX_PEERS
                && let Some(oldest) = peers.iter().min_by_key(|(_, b)| b.at).map(|(k, _)| *k)
            {
                peers.remove(&oldest);
            }
        }
        let bucket = peers.entry(key(ip)).or_insert(Bucket { tokens: BURST, at: now });
        bucket.tokens = (bucket.level(now) - 1.0).max(0.0);
        bucket.at = now;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_is_stopped_after_its_burst_and_others_are_not() {
        let g = Guesses::default();
        let t0 = Instant::now();
        let attacker: IpAddr = "10.0.0.9".parse().unwrap();
        for _ in 0..BURST as usize {
            assert!(g.check_at(attacker, "/", t0).is_ok());
            g.wrong_at(attacker, t0);
        }
        let retry = g.check_at(attacker, "/", t0).expect_err("the burst is spent");
        assert_eq!(retry, REFILL, "{retry:?}");
        // A controlled clock: one more wrong token is earned after REFILL, not before.
        assert!(g.check_at(attacker, "/", t0 + REFILL.mul_f64(0.9)).is_err());
        assert!(g.check_at(attacker, "/", t0 + REFILL).is_ok());
        g.wrong_at(attacker, t0 + REFILL);
        assert!(g.check_at(attacker, "/", t0 + REFILL).is_err(), "and it is spent again");
        assert!(g.check_at("10.0.0.10".parse().unwrap(), "/", t0).is_ok(), "another peer is not held up");
        // An IPv6 host owns its /64: another address in it is the same peer.
        let v6: IpAddr = "2001:db8::1".parse().unwrap();
        for _ in 0..BURST as usize {
            g.wrong_at(v6, t0);
        }
        assert!(g.check_at("2001:db8::2".parse().unwrap(), "/", t0).is_err());
        assert!(g.check_at("2001:db8:0:1::2".parse().unwrap(), "/", t0).is_ok());
    }

    #[test]
    fn a_flood_from_many_addresses_meets_the_hubs_cap() {
        let g = Guesses::default();
        let t0 = Instant::now();
        for i in 0..GLOBAL_BURST as u32 {
            g.wrong_at(IpAddr::V4((0x0a00_0000 + i).into()), t0);
        }
        let fresh: IpAddr = "192.0.2.1".parse().unwrap();
        assert!(g.check_at(fresh, "/", t0).is_err(), "a wrong token from a new address meets the hub's cap");
        assert!(g.check_at(fresh, "/", t0 + GLOBAL_REFILL).is_ok(), "which refills");
    }

    #[test]
    fn the_table_stays_bounded() {
        let g = Guesses::default();
        for i in 0..(MAX_PEERS as u32 + 100) {
            g.wrong(IpAddr::V4(i.into()));
        }
        assert!(g.lock().peers.len() <= MAX_PEERS);
    }
}
