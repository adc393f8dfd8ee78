//! The dashboard's traffic streams, capped in total, per principal and per address.
//!
//! Rules it enforces:
//! - At most [`MAX_STREAMS`] traffic streams at once on the hub, at most [`PER_PRINCIPAL`] for
//!   one principal (a person, by their remote token; the holders of the shared MCP token at one
//!   address; the hub's own user) and at most [`PER_PRINCIPAL`] from one address (an IPv4
//!   address, an IPv6 /64): one client that opens streams in a loop leaves room for the others.
//! - A stream over a cap is refused with 429 and the cap's name (the caller logs and counts it).
//! - A permit is given back when its stream ends, however it ends.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use crate::hub::principal::Principal;

/// Traffic streams open at once, in total.
pub const MAX_STREAMS: usize = 32;
/// Traffic streams open at once for one principal, and from one address.
pub const PER_PRINCIPAL: usize = 16;

#[derive(Default)]
struct Counts {
    total: usize,
    by_principal: HashMap<Principal, usize>,
    by_peer: HashMap<IpAddr, usize>,
}

/// The streams open now.
#[derive(Default)]
pub struct Streams {
    open: Mutex<Counts>,
}

/// One open stream's place; given back when dropped.
pub struct Permit {
    streams: Arc<Streams>,
    principal: Principal,
    peer: IpAddr,
}

impl Streams {
    fn lock(&self) -> std::sync::MutexGuard<'_, Counts> {
        // Nothing under this lock can panic; a poisoned one is still consistent.
        self.open.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A place for a stream of `principal` from `peer`, or why not.
    pub fn open(self: &Arc<Self>, principal: &Principal, peer: IpAddr) -> Result<Permit, String> {
        let peer = crate::hub::guesses::key(peer);
        let mut c = self.lock();
        if c.total >= MAX_STREAMS {
            return Err(format!("{MAX_STREAMS} traffic streams are open on this hub, its cap; close a device page"));
        }
        if c.by_principal.get(principal).copied().unwrap_or(0) >= PER_PRINCIPAL {
            return Err(format!("{PER_PRINCIPAL} traffic streams are open for {}, the cap for one client; close a device page", principal.describe()));
        }
        if c.by_peer.get(&peer).copied().unwrap_or(0) >= PER_PRINCIPAL {
            return Err(format!("{PER_PRINCIPAL} traffic streams are open from {peer}, the cap for one address; close a device page"));
        }
        c.total += 1;
        *c.by_principal.entry(principal.clone()).or_insert(0) += 1;
        *c.by_peer.entry(peer).or_insert(0) += 1;
        Ok(Permit { streams: self.clone(), principal: principal.clone(), peer })
    }

    /// Streams open now.
    pub fn in_use(&self) -> usize {
        self.lock().total
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        let mut c = self.streams.lock();
        c.total = c.total.saturating_sub(1);
        crate::hub::count_table::count_down(&mut c.by_principal, &self.principal);
        crate::hub::count_table::count_down(&mut c.by_peer, &self.peer);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_client_cannot_take_every_stream() {
        let streams = Arc::new(Streams::default());
        let carol = Principal::Person("cccccccccccc".into());
        let mut held = Vec::new();
        for i in 0..PER_PRINCIPAL {
            held.push(streams.open(&carol, IpAddr::V4((0x0a00_0000 + i as u32).into())).unwrap());
        }
        let why = streams.open(&carol, "192.0.2.9".parse().unwrap()).err().unwrap();
        assert!(why.contains("remote token cccccccccccc"), "{why}");
        // Another person behind one of carol's addresses still gets a stream.
        let dave = Principal::Person("dddddddddddd".into());
        let _dave = streams.open(&dave, "10.0.0.0".parse().unwrap()).expect("another person");
        assert_eq!(streams.in_use(), PER_PRINCIPAL + 1);
        held.pop();
        assert!(streams.open(&carol, "192.0.2.9".parse().unwrap()).is_ok(), "a place given back is taken again");
        // One address is capped too, whoever it is; and the hub in total.
        let other = Arc::new(Streams::default());
        let at = |i: u32, from: &str| other.open(&Principal::SharedToken(IpAddr::V4(i.into())), from.parse().unwrap());
        let from_one: Vec<_> = (0..PER_PRINCIPAL as u32).map(|i| at(i, "192.0.2.1").unwrap()).collect();
        let why = at(99, "192.0.2.1").err().unwrap();
        assert!(why.contains("from 192.0.2.1"), "{why}");
        let from_two: Vec<_> = (0..(MAX_STREAMS - PER_PRINCIPAL) as u32).map(|i| at(100 + i, "192.0.2.2").unwrap()).collect();
        assert!(at(999, "192.0.2.3").err().unwrap().contains("on this hub"));
        drop((from_one, from_two));
        assert_eq!(other.in_use(), 0, "every place comes back");
    }
}
