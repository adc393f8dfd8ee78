//! The connection cap of a listener that is not the device listener (the host listener, the
//! EMQX hooks): no listener can take the descriptors another needs.
//!
//! The rules it enforces:
//! - **A reserve per listener**: the descriptors the hub keeps beside device connections
//!   ([`super::budget::host_reserve`], 256 to 1,024) are shared out: [`HOOKS_CONNECTIONS`] for
//!   the hooks, [`LINK_CONNECTIONS`] for the cluster link (its own cap), [`OTHER_DESCRIPTORS`]
//!   for files, the broker connection and sockets the hub opens, and the rest for the host
//!   listener ([`ConnCap::host`]: 144 to 912 connections). A listener at its cap refuses the next connection at once (closed
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

/// Descriptors of the reserve kept for files, the broker connection and the hub's own sockets.
pub const OTHER_DESCRIPTORS: usize = 32;
/// Connections the EMQX hooks listener holds at most (EMQX keeps a pool of 8 per node by default).
pub const HOOKS_CONNECTIONS: usize = 32;
/// Connections the cluster link (`--cluster-link`) holds at most: one from each other hub, and
/// strangers that have not proven the hub secret yet.
pub const LINK_CONNECTIONS: usize = 48;

/// The host listener's cap under `fd_limit`: the reserve less the other listeners' and
/// [`OTHER_DESCRIPTORS`] (144 under the smallest reserve, 912 under the largest).
pub fn host_connections(fd_limit: Option<u64>) -> usize {
    let reserve = usize::try_from(super::budget::host_reserve(fd_limit)).unwrap_or(usize::MAX);
    reserve.saturating_sub(HOOKS_CONNECTIONS + LINK_CONNECTIONS + OTHER_DESCRIPTORS).max(16)
}

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

    /// The host listener's (CLI, MCP hosts, dashboard): what the descriptors kept beside the
    /// devices leave ([`host_connections`]). Its connections mostly come from loopback, one
    /// address for every local CLI, MCP host and browser, so one address may hold them all (who
    /// may hold how many sessions and streams is capped per person and token above this, in the
    /// bridge).
    pub fn host(fd_limit: Option<u64>) -> Arc<Self> {
        let total = host_connections(fd_limit);
        Self::new("host", total, total)
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
        use super::super::budget::host_reserve;
        for limit in [None, Some(300), Some(1024), Some(2048), Some(4096), Some(20_000), Some(1 << 20)] {
            let listeners = host_connections(limit) + HOOKS_CONNECTIONS + LINK_CONNECTIONS;
            assert!(listeners + OTHER_DESCRIPTORS <= host_reserve(limit) as usize, "{listeners} connections of the listeners, and room for files and the hub's own sockets, under {limit:?}");
        }
        assert_eq!(host_connections(Some(1024)), 144, "the smallest reserve");
        assert_eq!(host_connections(Some(20_000)), 912, "64 MCP hosts with two connections each fit, many times");
        assert_eq!(host_connections(Some(2048)), 512 - 112);
    }
}
