//! The connection cap of a listener that is not the device listener (the host listener, the
//! EMQX hooks): no listener can take the descriptors another needs.
//!
//! The rules it enforces:
//! - **A reserve per listener**: the descriptors the hub keeps beside device connections
//!   ([`super::budget::HOST_RESERVE`]) are shared out: [`HOST_CONNECTIONS`] for the host listener,
//!   [`HOOKS_CONNECTIONS`] for the hooks, [`LINK_CONNECTIONS`] for the cluster link (its own cap),
//!   and the rest for files, the broker connection and sockets the hub opens. A listener at its cap refuses the next connection at once (closed
//!   before anything is read), so a flood on one listener never starves another of descriptors.
//! - **Per peer**: one address holds at most its share ([`ConnCap::per_peer`]) of a listener's
//!   connections, so a flood from one address leaves room for the others (EMQX's nodes, another
//!   host).
//! - Every refusal is counted (`mcpdev_refusals_total{reason="connection_cap"}`) and logged, at
//!   most one line per listener per 5 s with how many were held back, saying which cap was full.
//! - A permit ends with its connection (it travels with the socket), never leaks.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::budget::RateLimited;

/// Connections the host listener (CLI, MCP hosts, dashboard) holds at most.
pub const HOST_CONNECTIONS: usize = 144;
/// Connections the EMQX hooks listener holds at most (EMQX keeps a pool of 8 per node by default).
pub const HOOKS_CONNECTIONS: usize = 32;
/// Connections the cluster link (`--cluster-link`) holds at most: one from each other hub, and
/// strangers that have not proven the hub secret yet.
pub const LINK_CONNECTIONS: usize = 48;

/// Why a connection was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CapRefusal {
    /// The listener holds its cap.
    Full(usize),
    /// This address holds its share.
    Peer(usize),
}

impl std::fmt::Display for CapRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CapRefusal::Full(n) => write!(f, "the listener holds its {n} connections"),
            CapRefusal::Peer(n) => write!(f, "this address holds its {n} connections"),
        }
    }
}

#[derive(Default)]
struct Open {
    total: usize,
    by_peer: HashMap<IpAddr, usize>,
}

/// One listener's connections, by peer address.
pub struct ConnCap {
    name: &'static str,
    total: usize,
    per_peer: usize,
    open: Mutex<Open>,
    log: RateLimited,
}

/// A connection admitted under a [`ConnCap`]; its place is given back when dropped.
pub struct CapPermit {
    cap: Arc<ConnCap>,
    peer: IpAddr,
}

impl Drop for CapPermit {
    fn drop(&mut self) {
        let mut open = self.cap.lock();
        open.total = open.total.saturating_sub(1);
        super::count_table::count_down(&mut open.by_peer, &self.peer);
    }
}

impl ConnCap {
    /// `total` connections at most for the listener `name`, `per_peer` from one address.
    pub fn new(name: &'static str, total: usize, per_peer: usize) -> Arc<Self> {
        Arc::new(Self { name, total: total.max(1), per_peer: per_peer.clamp(1, total.max(1)), open: Mutex::default(), log: RateLimited::new(Duration::from_secs(5)) })
    }

    /// The host listener's: its connections mostly come from loopback, one address for every
    /// local CLI, MCP host and browser, so one address may hold them all (who may hold how many
    /// sessions and streams is capped per person and token above this, in the bridge).
    pub fn host() -> Arc<Self> {
        Self::new("host", HOST_CONNECTIONS, HOST_CONNECTIONS)
    }

    /// The EMQX hooks': one EMQX node holds at most half.
    pub fn hooks() -> Arc<Self> {
        Self::new("MQTT hooks", HOOKS_CONNECTIONS, HOOKS_CONNECTIONS / 2)
    }

    pub fn per_peer(&self) -> usize {
        self.per_peer
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Open> {
        self.open.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Admits a connection from `peer`, or refuses it (counted and logged, rate-limited).
    pub fn admit(self: &Arc<Self>, peer: IpAddr) -> Result<CapPermit, CapRefusal> {
        let refusal = {
            let mut open = self.lock();
            let mine = open.by_peer.get(&peer).copied().unwrap_or(0);
            if open.total >= self.total {
                Some(CapRefusal::Full(self.total))
            } else if mine >= self.per_peer {
                Some(CapRefusal::Peer(self.per_peer))
            } else {
                open.total += 1;
                *open.by_peer.entry(peer).or_default() += 1;
                None
            }
        };
        match refusal {
            None => Ok(CapPermit { cap: self.clone(), peer }),
            Some(why) => {
                crate::metrics::refused(crate::metrics::Refused::ConnectionCap);
                if let Some(skipped) = self.log.allow() {
                    tracing::warn!(listener = self.name, %peer, skipped, "connection refused: {why} (a listener never takes the descriptors the others need)");
                }
                Err(why)
            }
        }
    }

    /// Open connections: in all, and from `peer`.
    pub fn open(&self, peer: IpAddr) -> (usize, usize) {
        let open = self.lock();
        (open.total, open.by_peer.get(&peer).copied().unwrap_or(0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listener_holds_its_cap_and_one_address_its_share() {
        let cap = ConnCap::new("t", 4, 2);
        let (a, b, c): (IpAddr, IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap(), "10.0.0.3".parse().unwrap());
        let a1 = cap.admit(a).unwrap();
        let _a2 = cap.admit(a).unwrap();
        assert_eq!(cap.admit(a).err(), Some(CapRefusal::Peer(2)), "one address holds its share");
        let _b1 = cap.admit(b).unwrap();
        let _b2 = cap.admit(b).unwrap();
        assert_eq!(cap.admit(c).err(), Some(CapRefusal::Full(4)), "the listener holds its cap");
        drop(a1);
        assert_eq!(cap.open(a), (3, 1), "a permit gives its place back");
        let _c1 = cap.admit(c).unwrap();
        assert_eq!(cap.open(c), (4, 1));
    }

    #[test]
    fn the_reserve_covers_every_listener_beside_the_devices() {
        let listeners = HOST_CONNECTIONS + HOOKS_CONNECTIONS + LINK_CONNECTIONS;
        assert!(listeners + 32 <= super::super::budget::HOST_RESERVE as usize, "{listeners} connections of the other listeners, and room for files and the hub's own sockets");
    }
}
