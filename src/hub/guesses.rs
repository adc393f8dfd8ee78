//! Wrong tokens per peer: a cap on guessing at the host listener's credentials.
//!
//! Every bearer token the host listener checks (the control API's control and remote tokens,
//! the dashboard's, `/mcp`'s `MCPDEV_MCP_TOKEN`) is 256 random bits, so guessing one is hopeless;
//! what a flood of guesses costs is the hub's time and its log. Rules:
//! - Each peer (an IPv4 address; an IPv6 /64, which one host owns whole) has a bucket of
//!   [`BURST`] wrong tokens, refilled at one per [`REFILL`]. A peer whose bucket is empty gets
//!   429 with `Retry-After` for *every* token it sends, right or wrong, until it refills: a
//!   guess that cannot be checked cannot succeed.
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

struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Bucket {
    fn level(&self, now: Instant) -> f64 {
        (self.tokens + now.duration_since(self.at).as_secs_f64() / REFILL.as_secs_f64()).min(BURST)
    }
}

#[derive(Default)]
pub struct Guesses {
    peers: Mutex<HashMap<IpAddr, Bucket>>,
}

/// The key a peer is followed by (an IPv4 address, an IPv6 /64).
pub fn key(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        v4 @ IpAddr::V4(_) => v4,
        IpAddr::V6(v6) => IpAddr::V6((u128::from(v6) & !u128::from(u64::MAX)).into()),
    }
}

impl Guesses {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<IpAddr, Bucket>> {
        // Nothing under this lock can panic; a poisoned one is still consistent.
        self.peers.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// `Err(retry after)` when `ip` may not have a token checked now (logged, counted).
    pub fn check(&self, ip: IpAddr, path: &str) -> Result<(), Duration> {
        let now = Instant::now();
        let level = self.lock().get(&key(ip)).map_or(BURST, |b| b.level(now));
        if level >= 1.0 {
            return Ok(());
        }
        let retry = REFILL.mul_f64(1.0 - level);
        crate::metrics::refused(crate::metrics::Refused::TokenGuesses);
        if crate::metrics::log_limit::allow(crate::metrics::log_limit::Kind::Refusal, &format!("token guesses {}", key(ip))) {
            tracing::warn!(peer = %ip, path, "refused a token from a peer that sent {BURST} wrong ones: it may send one more in {} s", retry.as_secs() + 1);
        }
        Err(retry)
    }

    /// Counts a wrong token from `ip`.
    pub fn wrong(&self, ip: IpAddr) {
        let now = Instant::now();
        let mut peers = self.lock();
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
        let attacker: IpAddr = "10.0.0.9".parse().unwrap();
        for _ in 0..BURST as usize {
            assert!(g.check(attacker, "/").is_ok());
            g.wrong(attacker);
        }
        let retry = g.check(attacker, "/").expect_err("the burst is spent");
        assert!(retry <= REFILL && retry > Duration::ZERO, "{retry:?}");
        assert!(g.check("10.0.0.10".parse().unwrap(), "/").is_ok(), "another peer is not held up");
        // An IPv6 host owns its /64: another address in it is the same peer.
        let v6: IpAddr = "2001:db8::1".parse().unwrap();
        for _ in 0..BURST as usize {
            g.wrong(v6);
        }
        assert!(g.check("2001:db8::2".parse().unwrap(), "/").is_err());
        assert!(g.check("2001:db8:0:1::2".parse().unwrap(), "/").is_ok());
    }

    #[test]
    fn the_table_stays_bounded() {
        let g = Guesses::default();
        for i in 0..(MAX_PEERS as u32 + 100) {
            g.wrong(IpAddr::V4(i.into()));
        }
        assert!(g.lock().len() <= MAX_PEERS);
    }
}
