//! Why a device was not let in, and the refusal log that one peer cannot flood.
//!
//! - Every [`Refusal`]'s `Display` says what to do next.
//! - [`LogLimit`]: one line per peer address per [`LOG_WINDOW`]; the lines it held back are
//!   counted and reported with the next one. The peers it remembers are capped ([`MAX_LOG_PEERS`]).

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// One refusal log line per peer address in this window (the rest are counted).
pub const LOG_WINDOW: Duration = Duration::from_secs(10);
const MAX_LOG_PEERS: usize = 4096;

/// Why a device was not let in; its `Display` says what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// Not approved (yet): approve it with the code or its Device-Id.
    NotAdmitted { device_id: String, code: Option<String> },
    /// Approved, but it sent no token.
    NoToken { device_id: String },
    /// Approved, but the token is not this device's token.
    WrongToken { device_id: String },
    /// Its approval was withdrawn (`mcpdev devices revoke`); only a new approval lets it in.
    Revoked { device_id: String },
    /// Too many requests for admission, from this address or its network or in all: try again
    /// later (HTTP 429 with `Retry-After`).
    Busy { retry_after_s: u64, cap: Crowded },
}

/// Which cap a refused request for admission met.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Crowded {
    /// Its address asks too fast.
    Rate,
    /// Its network (the /24 or /64) holds as many requests as it may, one per address.
    Network,
    /// The hub holds as many requests as it keeps, one per address.
    Full,
}

impl Refusal {
    /// For a refusal that a later try may not meet ([`Refusal::Busy`]): when to try again.
    pub fn retry_after_s(&self) -> Option<u64> {
        match self {
            Refusal::Busy { retry_after_s, .. } => Some(*retry_after_s),
            _ => None,
        }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::NotAdmitted { device_id, code: Some(code) } => write!(
                f,
                "device {device_id} is not admitted (no device token is accepted for it yet): approve it with `mcpdev devices approve {code}` (the code this device was given), then give the device the token that prints"
            ),
            Refusal::NotAdmitted { device_id, code: None } => {
                write!(f, "device {device_id} is not admitted (no device token is accepted for it yet): approve it with `mcpdev devices approve {device_id}`")
            }
            Refusal::NoToken { device_id } => write!(
                f,
                "device {device_id} sent no token: send its own token as `Authorization: Bearer <token>` (its OTA check-in hands it out; `mcpdev devices approve {device_id} --rebind` prints a new one)"
            ),
            Refusal::WrongToken { device_id } => write!(
                f,
                "the token is not this device's current token (device {device_id}); each device has its own, and a new approval replaces it: `mcpdev devices approve {device_id} --rebind` prints a new one"
            ),
            Refusal::Revoked { device_id } => write!(
                f,
                "device {device_id} was revoked: it gets in again only after a new approval (`mcpdev devices pending`, then `mcpdev devices approve CODE`)"
            ),
            Refusal::Busy { retry_after_s, cap: Crowded::Rate } => {
                write!(f, "too many admission requests from this address: try again in {retry_after_s} s")
            }
            Refusal::Busy { retry_after_s, cap: Crowded::Network } => write!(
                f,
                "too many devices of this network (its /24 or /64) wait for approval: try again in {retry_after_s} s; the hub's owner can approve or deny them (`mcpdev devices pending`)"
            ),
            Refusal::Busy { retry_after_s, cap: Crowded::Full } => write!(
                f,
                "the hub holds as many admission requests as it keeps: try again in {retry_after_s} s; the hub's owner can approve or deny them (`mcpdev devices pending`), or approve this device by its Device-Id"
            ),
        }
    }
}

/// At most one log line per peer address per [`LOG_WINDOW`].
#[derive(Default)]
pub struct LogLimit {
    peers: HashMap<IpAddr, (Instant, u64)>,
}

impl LogLimit {
    /// `Some(lines suppressed since the last one)` when a line about `remote` may be logged now.
    pub fn may_log(&mut self, remote: Option<IpAddr>) -> Option<u64> {
        let Some(ip) = remote else { return Some(0) };
        let now = Instant::now();
        if self.peers.len() >= MAX_LOG_PEERS && !self.peers.contains_key(&ip) {
            self.peers.retain(|_, (at, _)| now.duration_since(*at) < LOG_WINDOW);
            if self.peers.len() >= MAX_LOG_PEERS {
                self.peers.clear();
            }
        }
        match self.peers.get_mut(&ip) {
            Some((at, n)) if now.duration_since(*at) < LOG_WINDOW => {
                *n += 1;
                None
            }
            Some((at, n)) => {
                *at = now;
                Some(std::mem::take(n))
            }
            None => {
                self.peers.insert(ip, (now, 0));
                Some(0)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_peer_per_window_and_the_rest_counted() {
        let mut log = LogLimit::default();
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        assert_eq!(log.may_log(Some(a)), Some(0));
        assert_eq!(log.may_log(Some(a)), None);
        assert_eq!(log.may_log(Some(a)), None);
        assert_eq!(log.may_log(Some(b)), Some(0), "another peer is not held back by the first");
        assert_eq!(log.may_log(None), Some(0));
        for i in 0..(MAX_LOG_PEERS as u32 + 10) {
            log.may_log(Some(IpAddr::from(i.to_be_bytes())));
        }
        assert!(log.peers.len() <= MAX_LOG_PEERS, "the peers remembered stay capped");
    }
}
