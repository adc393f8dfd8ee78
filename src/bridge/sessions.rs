//! Caps on the MCP sessions the host listener holds: every `/mcp`, `/devices/<id>/mcp`, `/sse`
//! and `/devices/<id>/sse` session takes a [`Slot`] before rmcp (or the SSE transport) makes it,
//! and gives it back when the session's handler is dropped (`DELETE`, the stream closed, rmcp's
//! idle expiry), so what a peer can make the hub hold is bounded, and memory is returned when
//! sessions end.
//!
//! Rules:
//! - At most `total` sessions at once, and at most `per_peer` for one peer. A peer is the remote
//!   IP address of the connection. On the default loopback listener that is one peer, the hub's
//!   own user (other local users are refused by the owner check before this); in remote mode
//!   (`--allowed-host`), every holder of the MCP token shares the one token, so the address is
//!   what tells them apart.
//! - A request without `Mcp-Session-Id` (an `initialize`, or a sessionless 2026-07-28 request,
//!   held only while it runs) over a cap is refused with HTTP 503, `Retry-After`, and a JSON-RPC
//!   error naming the cap and what to do; the refusal is logged at most once per 5 s (with how
//!   many were not logged).
//! - A slot is counted in one small table under one lock; nothing that can panic runs under it.
//! - Memory comes back when sessions end: a session's allocations are freed with its handler,
//!   but glibc keeps freed pages in its arenas (20,000 sessions opened and ended left the hub at
//!   1.1 GB). Once [`TRIM_AFTER`] sessions have ended (or the last open one), the heap is trimmed
//!   (`malloc_trim`) a second later, off the async workers, at most once per that second.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::hub::budget::RateLimited;

/// Default cap on open MCP sessions, in total.
pub const DEFAULT_TOTAL: u32 = 512;
/// Default cap on open MCP sessions per peer address.
pub const DEFAULT_PER_PEER: u32 = 128;

/// The open sessions, by peer, within their caps.
pub struct SessionCaps {
    total: usize,
    per_peer: usize,
    open: Mutex<Open>,
    refusals: RateLimited,
}

#[derive(Default)]
struct Open {
    total: usize,
    by_peer: HashMap<IpAddr, usize>,
    /// Sessions ended since the heap was last trimmed, and whether a trim is planned.
    ended: usize,
    trim_planned: bool,
}

/// Sessions that end before the heap is trimmed (sooner when none is left open).
pub const TRIM_AFTER: usize = 64;

/// One open session's place within the caps; given back when dropped.
pub struct Slot {
    caps: Arc<SessionCaps>,
    peer: IpAddr,
}

/// Why a session was refused: the text an MCP client is sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused(pub String);

impl SessionCaps {
    pub fn new(total: u32, per_peer: u32) -> Arc<Self> {
        Arc::new(Self {
            total: total.max(1) as usize,
            per_peer: per_peer.max(1) as usize,
            open: Mutex::default(),
            refusals: RateLimited::new(Duration::from_secs(5)),
        })
    }

    /// A slot for a new session of `peer`, or why not (logged, rate-limited).
    pub fn acquire(self: &Arc<Self>, peer: IpAddr) -> Result<Slot, Refused> {
        let peer = peer.to_canonical();
        let refused = {
            let mut open = self.lock();
            let mine = open.by_peer.get(&peer).copied().unwrap_or(0);
            if mine >= self.per_peer {
                Some(format!(
                    "{mine} MCP sessions are open from {peer}, its cap (--mcp-max-sessions-per-peer {}); end sessions you no longer use (HTTP DELETE with their Mcp-Session-Id) or retry once they expire",
                    self.per_peer
                ))
            } else if open.total >= self.total {
                Some(format!(
                    "{} MCP sessions are open on this hub, its cap (--mcp-max-sessions {}); retry once sessions end or expire",
                    open.total, self.total
                ))
            } else {
                open.total += 1;
                *open.by_peer.entry(peer).or_insert(0) += 1;
                None
            }
        };
        match refused {
            None => Ok(Slot { caps: self.clone(), peer }),
            Some(why) => {
                if let Some(skipped) = self.refusals.allow() {
                    tracing::warn!(%peer, skipped, "MCP session refused: {why}");
                }
                Err(Refused(why))
            }
        }
    }

    /// Sessions open now, in total and for `peer`.
    pub fn open(&self, peer: IpAddr) -> (usize, usize) {
        let open = self.lock();
        (open.total, open.by_peer.get(&peer.to_canonical()).copied().unwrap_or(0))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Open> {
        self.open.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let trim = {
            let mut open = self.caps.lock();
            open.total = open.total.saturating_sub(1);
            if let Some(n) = open.by_peer.get_mut(&self.peer) {
                *n -= 1;
                if *n == 0 {
                    open.by_peer.remove(&self.peer);
                }
            }
            open.ended += 1;
            let due = (open.ended >= TRIM_AFTER || open.total == 0) && !open.trim_planned;
            if due {
                open.trim_planned = true;
                open.ended = 0;
            }
            due
        };
        if trim {
            plan_trim(self.caps.clone());
        }
    }
}

/// Trims the heap a second from now, off the async workers (no runtime: at once).
fn plan_trim(caps: Arc<SessionCaps>) {
    let done = move || {
        trim_heap();
        caps.lock().trim_planned = false;
    };
    match tokio::runtime::Handle::try_current() {
        Ok(rt) => {
            rt.spawn(async move {
                tokio::time::sleep(Duration::from_secs(1)).await;
                let _ = tokio::task::spawn_blocking(done).await;
            });
        }
        Err(_) => done(),
    }
}

/// Gives the freed pages of every glibc arena back to the system.
fn trim_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks the allocator's own arenas; any pad is valid.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_per_peer_and_in_total_and_slots_come_back() {
        let caps = SessionCaps::new(3, 2);
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let a1 = caps.acquire(a).unwrap();
        let _a2 = caps.acquire(a).unwrap();
        let Err(why) = caps.acquire(a) else { panic!("a third session of one peer") };
        assert!(why.0.contains("--mcp-max-sessions-per-peer 2"), "{why:?}");
        let _b1 = caps.acquire(b).unwrap();
        let Err(why) = caps.acquire(b) else { panic!("a fourth session in all") };
        assert!(why.0.contains("--mcp-max-sessions 3"), "{why:?}");
        drop(a1);
        assert_eq!(caps.open(a), (2, 1));
        let _b2 = caps.acquire(b).unwrap();
        assert_eq!(caps.open(b), (3, 2));
        // The same address as IPv4-mapped IPv6 is the same peer.
        assert!(caps.acquire("::ffff:10.0.0.2".parse().unwrap()).is_err());
    }
}
