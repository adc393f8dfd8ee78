//! Caps on the MCP sessions the host listener holds: every `/mcp`, `/devices/<id>/mcp`, `/sse`
//! and `/devices/<id>/sse` session takes a [`Slot`] before rmcp (or the SSE transport) makes it,
//! and gives it back when the session's handler is dropped (`DELETE`, the stream closed, rmcp's
//! idle expiry), so what a peer can make the hub hold is bounded, and memory is returned when
//! sessions end.
//!
//! Rules:
//! - At most `total` sessions at once, at most `per_peer` for one peer, and at most `per_peer`
//!   for one person (a remote token, [`Principal::Person`]), from however many addresses. A peer
//!   is the remote IP address of the connection. On the default loopback listener that is one
//!   peer, the hub's own user (other local users are refused by the owner check before this); in
//!   remote mode (`--allowed-host`), every holder of the MCP token shares the one token, so the
//!   address is what tells them apart.
//! - A request without `Mcp-Session-Id` (an `initialize`, or a sessionless 2026-07-28 request,
//!   held only while it runs) over a cap is refused with HTTP 503, `Retry-After`, and a JSON-RPC
//!   error naming the cap and what to do; the refusal is logged at most once per 5 s (with how
//!   many were not logged).
//! - **A full cap makes room from sessions nobody uses.** A session whose host sent no request for
//!   `reclaim_idle` (30 s by default, `--mcp-reclaim-idle`) and that has no request or stream
//!   open is reclaimable: a new session over the per-peer cap closes that peer's least recently
//!   used reclaimable session, and one over the total cap the hub's, instead of being refused. A
//!   host that never ends its sessions (many clients send no `DELETE`) no longer locks out the
//!   next one, and rmcp's own idle expiry cannot do this, since the hub's notifications to a
//!   session (`list_changed` as devices come and go) keep it alive. The reclaimed session's host
//!   gets 404 on its next request and starts a new session, as the MCP specification has it.
//!   Each reclaim is logged (rate-limited). Only sessions the host is not using are taken: a
//!   host with a request under way or a `GET` stream open keeps its session.
//! - **A session belongs to the credential that opened it.** Only requests of the same
//!   [`Principal`] reach it (anyone else's get the 404 of an unknown session), and it is closed,
//!   its streams with it, the moment that credential is revoked ([`Lease`]).
//! - A slot is counted in one small table under one lock; nothing that can panic runs under it.
//! - Memory comes back when sessions end: a session's allocations are freed with its handler,
//!   but glibc keeps freed pages in its arenas (20,000 sessions opened and ended left the hub at
//!   1.1 GB). Once [`TRIM_AFTER`] sessions have ended (or the last open one), the heap is trimmed
//!   (`malloc_trim`) a second later, off the async workers, at most once per that second.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use rmcp::transport::streamable_http_server::session::SessionManager;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;

use tokio_util::sync::CancellationToken;

use crate::hub::budget::RateLimited;
use crate::hub::principal::{Lease, Principal};

/// Default cap on open MCP sessions, in total.
pub const DEFAULT_TOTAL: u32 = 512;
/// Default cap on open MCP sessions per peer address.
pub const DEFAULT_PER_PEER: u32 = 128;

/// Default time without a request after which a session may be reclaimed when a cap is full.
pub const DEFAULT_RECLAIM_IDLE: Duration = Duration::from_secs(30);

/// How long a new session waits for a reclaimed one to give its slot back.
const RECLAIM_WAIT: Duration = Duration::from_secs(2);

/// The open sessions, by peer, within their caps.
pub struct SessionCaps {
    total: usize,
    per_peer: usize,
    reclaim_idle: Duration,
    open: Mutex<Open>,
    refusals: RateLimited,
    reclaims: RateLimited,
    /// Woken whenever a slot is given back.
    released: tokio::sync::Notify,
}

#[derive(Default)]
struct Open {
    total: usize,
    by_peer: HashMap<IpAddr, usize>,
    /// Sessions of each person (by remote token id).
    by_person: HashMap<Arc<str>, usize>,
    /// Streamable HTTP sessions by id: what tells a reclaimable one.
    activity: HashMap<Arc<str>, Activity>,
    /// Sessions ended since the heap was last trimmed, and whether a trim is planned.
    ended: usize,
    trim_planned: bool,
}

/// What the host of one session is doing.
struct Activity {
    peer: IpAddr,
    /// When the host's last request began or ended.
    last: Instant,
    /// Its requests under way (a `GET` stream counts while it is open).
    busy: u32,
    /// Chosen for reclaiming already.
    closing: bool,
    sessions: Weak<LocalSessionManager>,
    /// Whose session it is: only that principal's requests reach it.
    principal: Principal,
}

/// Sessions that end before the heap is trimmed (sooner when none is left open).
pub const TRIM_AFTER: usize = 64;

/// One open session's place within the caps; given back when dropped.
pub struct Slot {
    caps: Arc<SessionCaps>,
    peer: IpAddr,
    /// The person whose session it is, when a remote token opened it.
    person: Option<Arc<str>>,
    /// The session id, once rmcp made the session ([`SessionCaps::register`]).
    id: Arc<OnceLock<Arc<str>>>,
    /// Cancelled when the slot is given back (the session ended).
    ended: CancellationToken,
}

impl Slot {
    /// Where the session's id goes once it is known (the slot itself moves into the handler).
    pub fn id_cell(&self) -> Arc<OnceLock<Arc<str>>> {
        self.id.clone()
    }

    /// Cancelled when the session ends, however it ends.
    pub fn ended(&self) -> CancellationToken {
        self.ended.clone()
    }
}

/// A request of a session's host under way: the session is not reclaimable until it is dropped.
pub struct Busy {
    caps: Arc<SessionCaps>,
    id: Arc<str>,
}

impl Drop for Busy {
    fn drop(&mut self) {
        if let Some(a) = self.caps.lock().activity.get_mut(&self.id) {
            a.busy = a.busy.saturating_sub(1);
            a.last = Instant::now();
        }
    }
}

/// Why a session was refused: the text an MCP client is sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused(pub String);

/// Which cap is full.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Full {
    Peer,
    Person,
    Total,
}

/// The person a principal is, if it is one.
fn person_of(principal: &Principal) -> Option<Arc<str>> {
    match principal {
        Principal::Person(id) => Some(id.clone()),
        _ => None,
    }
}

impl SessionCaps {
    pub fn new(total: u32, per_peer: u32) -> Arc<Self> {
        Self::with_reclaim(total, per_peer, DEFAULT_RECLAIM_IDLE)
    }

    /// Caps that reclaim sessions idle for `reclaim_idle` when full.
    pub fn with_reclaim(total: u32, per_peer: u32, reclaim_idle: Duration) -> Arc<Self> {
        Arc::new(Self {
            total: total.max(1) as usize,
            per_peer: per_peer.max(1) as usize,
            reclaim_idle,
            open: Mutex::default(),
            refusals: RateLimited::new(Duration::from_secs(5)),
            reclaims: RateLimited::new(Duration::from_secs(5)),
            released: tokio::sync::Notify::new(),
        })
    }

    /// A slot for a new session of `principal` from `peer`, or why not (logged, rate-limited).
    /// Never reclaims: for transports whose sessions cannot be (legacy SSE).
    pub fn acquire(self: &Arc<Self>, peer: IpAddr, principal: &Principal) -> Result<Slot, Refused> {
        let peer = peer.to_canonical();
        self.try_acquire(peer, principal).map_err(|(_, why)| self.refuse(peer, why))
    }

    /// A slot for a new Streamable HTTP session of `principal` from `peer`; when a cap is full,
    /// the least recently used reclaimable session in its way is closed first (module docs).
    pub async fn acquire_or_reclaim(self: &Arc<Self>, peer: IpAddr, principal: &Principal) -> Result<Slot, Refused> {
        let peer = peer.to_canonical();
        let (full, why) = match self.try_acquire(peer, principal) {
            Ok(slot) => return Ok(slot),
            Err(full) => full,
        };
        let Some((id, sessions, idle)) = self.reclaimable(peer, principal, full) else {
            return Err(self.refuse(peer, why));
        };
        if let Some(skipped) = self.reclaims.allow() {
            tracing::warn!(%peer, skipped, idle_s = idle.as_secs(), "MCP session reclaimed to make room for a new one: its host sent no request for {}s and has none open", idle.as_secs());
        }
        crate::metrics::count_mcp_session_reclaimed();
        let released = self.released.notified();
        tokio::pin!(released);
        released.as_mut().enable();
        let _ = sessions.close_session(&id.to_string().into()).await;
        let deadline = tokio::time::Instant::now() + RECLAIM_WAIT;
        loop {
            match self.try_acquire(peer, principal) {
                Ok(slot) => return Ok(slot),
                Err((_, why)) if tokio::time::Instant::now() >= deadline => return Err(self.refuse(peer, why)),
                Err(_) => {}
            }
            let _ = tokio::time::timeout_at(deadline, released.as_mut()).await;
            released.set(self.released.notified());
            released.as_mut().enable();
        }
    }

    /// Takes a slot, or says which cap is full and how to say so.
    fn try_acquire(self: &Arc<Self>, peer: IpAddr, principal: &Principal) -> Result<Slot, (Full, String)> {
        let mut open = self.lock();
        let person = person_of(principal);
        let theirs = person.as_ref().and_then(|p| open.by_person.get(p)).copied().unwrap_or(0);
        if theirs >= self.per_peer {
            return Err((
                Full::Person,
                format!(
                    "{theirs} MCP sessions are open for {}, the cap for one person (--mcp-max-sessions-per-peer {}, which counts per remote token too), and none has been idle for {}s; end sessions you no longer use (HTTP DELETE with their Mcp-Session-Id) or retry once they expire",
                    principal.describe(),
                    self.per_peer,
                    self.reclaim_idle.as_secs()
                ),
            ));
        }
        let mine = open.by_peer.get(&peer).copied().unwrap_or(0);
        if mine >= self.per_peer {
            return Err((
                Full::Peer,
                format!(
                    "{mine} MCP sessions are open from {peer}, its cap (--mcp-max-sessions-per-peer {}), and none has been idle for {}s; end sessions you no longer use (HTTP DELETE with their Mcp-Session-Id) or retry once they expire",
                    self.per_peer,
                    self.reclaim_idle.as_secs()
                ),
            ));
        }
        if open.total >= self.total {
            return Err((
                Full::Total,
                format!(
                    "{} MCP sessions are open on this hub, its cap (--mcp-max-sessions {}), and none has been idle for {}s; retry once sessions end or expire",
                    open.total,
                    self.total,
                    self.reclaim_idle.as_secs()
                ),
            ));
        }
        open.total += 1;
        *open.by_peer.entry(peer).or_insert(0) += 1;
        if let Some(p) = &person {
            *open.by_person.entry(p.clone()).or_insert(0) += 1;
        }
        Ok(Slot { caps: self.clone(), peer, person, id: Arc::default(), ended: CancellationToken::new() })
    }

    fn refuse(&self, peer: IpAddr, why: String) -> Refused {
        if let Some(skipped) = self.refusals.allow() {
            tracing::warn!(%peer, skipped, "MCP session refused: {why}");
        }
        Refused(why)
    }

    /// The least recently used session that may be reclaimed for a new one of `principal` from
    /// `peer` (among the peer's own, or the person's own, when that cap is full), marked as
    /// closing; its id, manager and idle time.
    fn reclaimable(&self, peer: IpAddr, principal: &Principal, full: Full) -> Option<(Arc<str>, Arc<LocalSessionManager>, Duration)> {
        let now = Instant::now();
        let mut open = self.lock();
        let in_the_way = |a: &Activity| match full {
            Full::Peer => a.peer == peer,
            Full::Person => a.principal == *principal,
            Full::Total => true,
        };
        let (id, a) = open
            .activity
            .iter_mut()
            .filter(|(_, a)| !a.closing && a.busy == 0 && in_the_way(a))
            .filter(|(_, a)| now.saturating_duration_since(a.last) >= self.reclaim_idle)
            .min_by_key(|(_, a)| a.last)?;
        let sessions = a.sessions.upgrade()?;
        a.closing = true;
        Some((id.clone(), sessions, now.saturating_duration_since(a.last)))
    }

    /// Records that `slot`'s session is `id`, held by `sessions` (after rmcp made it), opened by
    /// `principal` with the credential whose `lease` it ends with: when the lease ends (the
    /// credential was revoked), the session is closed at once, its streams with it.
    pub fn register(&self, slot: &OnceLock<Arc<str>>, ended: CancellationToken, id: &str, peer: IpAddr, principal: Principal, lease: Lease, sessions: &Arc<LocalSessionManager>) {
        let id: Arc<str> = id.into();
        if slot.set(id.clone()).is_err() {
            return;
        }
        let activity = Activity { peer: peer.to_canonical(), last: Instant::now(), busy: 0, closing: false, sessions: Arc::downgrade(sessions), principal: principal.clone() };
        self.lock().activity.insert(id.clone(), activity);
        let sessions = Arc::downgrade(sessions);
        tokio::spawn(async move {
            tokio::select! {
                () = ended.cancelled() => {}
                () = lease.end() => {
                    if let Some(sessions) = sessions.upgrade() {
                        tracing::info!(principal = %principal.describe(), "an MCP session ended: the credential that opened it was revoked");
                        let _ = sessions.close_session(&id.to_string().into()).await;
                    }
                }
            }
        });
    }

    /// Whose session `id` is, if the caps track it (a Streamable HTTP session).
    pub fn principal_of(&self, id: &str) -> Option<Principal> {
        self.lock().activity.get(id).map(|a| a.principal.clone())
    }

    /// A request of session `id`'s host begins; it ends when the guard is dropped. `None` for a
    /// session the caps do not track (unknown, or not Streamable HTTP).
    pub fn busy(self: &Arc<Self>, id: &str) -> Option<Busy> {
        let mut open = self.lock();
        let key = open.activity.get_key_value(id)?.0.clone();
        let a = open.activity.get_mut(&key)?;
        a.busy += 1;
        a.last = Instant::now();
        Some(Busy { caps: self.clone(), id: key })
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
        self.ended.cancel();
        let trim = {
            let mut open = self.caps.lock();
            if let Some(id) = self.id.get() {
                open.activity.remove(id);
            }
            open.total = open.total.saturating_sub(1);
            crate::hub::count_table::count_down(&mut open.by_peer, &self.peer);
            if let Some(p) = &self.person {
                crate::hub::count_table::count_down(&mut open.by_person, p);
            }
            open.ended += 1;
            let due = (open.ended >= TRIM_AFTER || open.total == 0) && !open.trim_planned;
            if due {
                open.trim_planned = true;
                open.ended = 0;
            }
            due
        };
        self.caps.released.notify_waiters();
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

/// Gives freed memory back to the system ([`crate::hub::trim::give_back`]: glibc's arenas now,
/// the async workers' mimalloc heaps when they next idle).
pub(super) fn trim_heap() {
    crate::hub::trim::give_back();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_per_peer_and_in_total_and_slots_come_back() {
        let caps = SessionCaps::new(3, 2);
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let a1 = caps.acquire(a, &Principal::Owner).unwrap();
        let _a2 = caps.acquire(a, &Principal::Owner).unwrap();
        let Err(why) = caps.acquire(a, &Principal::Owner) else { panic!("a third session of one peer") };
        assert!(why.0.contains("--mcp-max-sessions-per-peer 2"), "{why:?}");
        let _b1 = caps.acquire(b, &Principal::Owner).unwrap();
        let Err(why) = caps.acquire(b, &Principal::Owner) else { panic!("a fourth session in all") };
        assert!(why.0.contains("--mcp-max-sessions 3"), "{why:?}");
        drop(a1);
        assert_eq!(caps.open(a), (2, 1));
        let _b2 = caps.acquire(b, &Principal::Owner).unwrap();
        assert_eq!(caps.open(b), (3, 2));
        // The same address as IPv4-mapped IPv6 is the same peer.
        assert!(caps.acquire("::ffff:10.0.0.2".parse().unwrap(), &Principal::Owner).is_err());
    }

    /// A person is capped as a peer is, from however many addresses; others are not held up.
    #[test]
    fn one_person_from_many_addresses_meets_the_same_cap() {
        let caps = SessionCaps::new(100, 2);
        let alice = Principal::Person("aaaaaaaaaaaa".into());
        let _one = caps.acquire("10.0.0.1".parse().unwrap(), &alice).unwrap();
        let _two = caps.acquire("10.0.0.2".parse().unwrap(), &alice).unwrap();
        let Err(why) = caps.acquire("10.0.0.3".parse().unwrap(), &alice) else { panic!("a third session of one person") };
        assert!(why.0.contains("remote token aaaaaaaaaaaa") && why.0.contains("--mcp-max-sessions-per-peer 2"), "{why:?}");
        let bob = Principal::Person("bbbbbbbbbbbb".into());
        let _bobs = caps.acquire("10.0.0.3".parse().unwrap(), &bob).expect("another person is not held up");
        drop(_one);
        assert!(caps.acquire("10.0.0.4".parse().unwrap(), &alice).is_ok(), "a slot given back is hers again");
    }
}
