//! How many connections the device listener holds: a total kept below the descriptor limit (with
//! a reserve for the host listener, the broker and files), and a cap on connections that have not
//! said hello yet, per peer address and in total. A device's hello ends its pre-hello permit
//! ([`HelloSlot`], carried to the link as `LinkSetup::until_hello`).
//!
//! Rules it enforces:
//! - A connection beyond a pre-hello cap **waits its turn** ([`Budget::enter`]) instead of being
//!   reset: a fleet behind one address (a NAT, a hub restart) comes back at the rate its hellos
//!   free slots. It waits at most [`Caps::queue_timeout`], then is closed.
//! - **An address far away that proves itself gets more slots.** A slot is held from accept to
//!   hello, so one address is let in at most at `cap / hello latency` (Little's law): 16 slots
//!   admit thousands a second on a LAN, but 160 a second over a 100 ms path, and a fleet behind a
//!   distant NAT would take a minute to come back. Each hello that comes within [`QUICK_HELLO`]
//!   raises its address's cap by one (as TCP's slow start grows its window) while the cap is below
//!   the address's *fastest* hello latency × [`ADMIT_RATE`] (the path's delay, not the hub's own
//!   queueing: on a busy hub more slots only lengthen the queue), up to half of the total
//!   (`pre_hello_total / 2`); each of its connections that ends without a hello halves what it had
//!   gained. So a peer that holds slots without saying hello falls back to `pre_hello_per_peer`
//!   after a few, and an address that has nothing held or waiting is forgotten, gain and all.
//! - The per-peer defence stays: one address holds at most its cap of slots (never more than
//!   half of the total, so others always have the rest), and at most
//!   [`Caps::queued_per_peer`] connections waiting (by default half of the device-connection
//!   cap, so one address can never take every descriptor); beyond that it is refused at once.
//!   Slots are handed out round robin between the addresses that wait, so one address's queue
//!   never delays another's turn by more than one slot each.
//! - The total is a hard ceiling (descriptors): a connection over it is refused at once
//!   ([`Refusal::Full`]), never queued.
//! - A waiter that gives up (deadline, dropped task) never leaks a slot: a grant sent to it as it
//!   left is taken back ([`Waiting`]'s `Drop`). No lock is held across anything that can panic or
//!   wait; a permit is never dropped while the lock is held.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

/// Descriptors kept for everything but device connections (the host listener, the broker,
/// files) under the smallest descriptor limits: a quarter of the limit, at least this …
pub const HOST_RESERVE_MIN: u64 = 256;
/// … and at most this, under a limit of 4,096 or more (or an unknown one): room for 64 MCP hosts
/// with a POST connection and a GET stream each and more, all from one loopback address.
pub const HOST_RESERVE_MAX: u64 = 1024;

/// The descriptors kept beside device connections under `fd_limit`.
pub fn host_reserve(fd_limit: Option<u64>) -> u64 {
    fd_limit.map_or(HOST_RESERVE_MAX, |limit| (limit / 4).clamp(HOST_RESERVE_MIN, HOST_RESERVE_MAX))
}

/// A hello that comes within this after its connection got its pre-hello slot may raise its
/// address's cap by one (a hello is a round trip: milliseconds on a LAN, 100-300 ms far away).
pub const QUICK_HELLO: Duration = Duration::from_secs(1);

/// The rate, in hellos a second, at which one address's slots should let its devices in: its cap
/// grows while it is below its fastest hello latency × this (2,000/s: 10,000 devices in 5 s).
pub const ADMIT_RATE: f64 = 2000.0;

/// The caps the device listener admits connections within.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caps {
    /// Open device-side connections at most (any state, waiting ones included).
    pub max_connections: usize,
    /// Connections that have not said hello, from one peer address.
    pub pre_hello_per_peer: usize,
    /// Connections that have not said hello, in total.
    pub pre_hello_total: usize,
    /// Connections from one address waiting for a pre-hello slot; 0: half of `max_connections`.
    pub queued_per_peer: usize,
    /// How long a connection waits for a pre-hello slot before it is closed.
    pub queue_timeout: Duration,
}

impl Default for Caps {
    fn default() -> Self {
        Self { max_connections: 100_000, pre_hello_per_peer: 16, pre_hello_total: 512, queued_per_peer: 0, queue_timeout: Duration::from_secs(10) }
    }
}

impl Caps {
    /// The device side's total under a descriptor limit: the limit less [`host_reserve`].
    pub fn within_fd_limit(mut self, fd_limit: Option<u64>) -> Self {
        if let Some(limit) = fd_limit {
            let room = limit.saturating_sub(host_reserve(fd_limit)).max(16);
            self.max_connections = self.max_connections.min(usize::try_from(room).unwrap_or(usize::MAX));
        }
        self
    }

    /// Connections one address may have waiting: as set, else half of the total, and never more
    /// than the total leaves room for.
    pub fn queued_per_peer(&self) -> usize {
        let half = (self.max_connections / 2).max(1);
        if self.queued_per_peer == 0 { half } else { self.queued_per_peer.min(self.max_connections) }
    }
}

/// Why a connection was not admitted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("{0} device-side connections are open: the limit, kept below the open-file limit (raise it: see docs/hub.md, \"Descriptor limits\")")]
    Full(usize),
    #[error("{0} connections from this address are already waiting for a turn to say hello (--max-queued-per-peer)")]
    PeerQueue(usize),
    #[error("it waited {0:?} for a turn to say hello (--max-pre-hello-per-peer, --max-pre-hello, --accept-queue-timeout)")]
    Waited(Duration),
}

/// A device ceiling below this many is a warning at start-up (else a note).
pub const FEW_DEVICES: usize = 1_000;

#[derive(Debug, Default)]
pub struct Budget {
    /// Whether the warning that the devices are near the ceiling was given (once per run).
    near_ceiling_said: std::sync::atomic::AtomicBool,
    caps: Caps,
    /// The soft open-file limit in force (`None`: unknown), which `caps.max_connections` is under.
    fd_limit: Option<u64>,
    open: AtomicUsize,
    pre_hello: Mutex<PreHello>,
}

/// A slot handed to a waiter (no `Drop`: one that cannot be delivered is undone under the lock).
#[derive(Debug)]
struct Granted;

#[derive(Debug, Default)]
struct PreHello {
    /// Pre-hello permits held, in total.
    total: usize,
    /// Connections waiting, in total (live ones).
    waiting: usize,
    by_peer: HashMap<IpAddr, Peer>,
    /// Addresses with waiters, in the order they get their next slot (each at most once).
    turns: VecDeque<IpAddr>,
}

#[derive(Debug, Default)]
struct Peer {
    /// Pre-hello permits this address holds.
    held: usize,
    /// Slots gained above `pre_hello_per_peer` by quick hellos.
    gained: usize,
    /// Its fastest hello (from slot to hello) so far: the path's delay.
    fastest: Option<Duration>,
    /// Its waiters, oldest first; some may have given up (closed), and are skipped.
    queue: VecDeque<oneshot::Sender<Granted>>,
    /// Waiters that have not given up.
    live: usize,
    /// Whether it is in `turns`.
    listed: bool,
}

impl Peer {
    /// How many pre-hello slots the address may hold now.
    fn cap(&self, caps: &Caps) -> usize {
        let base = caps.pre_hello_per_peer;
        (base + self.gained).min(base.max(caps.pre_hello_total / 2))
    }

    /// A slot of this address ended: a quick hello may raise its cap (while the path's delay
    /// needs more slots for [`ADMIT_RATE`]), no hello halves its gain.
    fn ended(&mut self, how: Ended, caps: &Caps) {
        match how {
            Ended::Hello(took) if took <= QUICK_HELLO => {
                let fastest = self.fastest.map_or(took, |f| f.min(took));
                self.fastest = Some(fastest);
                let wanted = (fastest.as_secs_f64() * ADMIT_RATE).ceil() as usize;
                if self.cap(caps) < wanted.min(caps.pre_hello_per_peer.max(caps.pre_hello_total / 2)) {
                    self.gained += 1;
                }
            }
            Ended::NoHello => self.gained /= 2,
            Ended::Hello(_) | Ended::Unused => {}
        }
    }
}

/// How a pre-hello slot ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ended {
    /// The device said hello this long after its slot was granted.
    Hello(Duration),
    /// The connection ended (or was refused) before a hello.
    NoHello,
    /// Granted to a waiter that had left: never used.
    Unused,
}

impl PreHello {
    fn forget_if_idle(&mut self, peer: IpAddr) {
        if self.by_peer.get(&peer).is_some_and(|p| p.held == 0 && p.queue.is_empty()) {
            self.by_peer.remove(&peer);
        }
    }

    /// Hands free slots to waiters, one address at a time, round robin.
    fn dispatch(&mut self, caps: &Caps) {
        while self.total < caps.pre_hello_total {
            let Some(ip) = self.turns.pop_front() else { return };
            let Some(peer) = self.by_peer.get_mut(&ip) else { continue };
            peer.listed = false;
            if peer.held >= peer.cap(caps) {
                // Listed again when one of its slots frees.
                continue;
            }
            while let Some(tx) = peer.queue.pop_front() {
                if tx.send(Granted).is_ok() {
                    peer.held += 1;
                    peer.live -= 1;
                    self.total += 1;
                    self.waiting -= 1;
                    break;
                }
                // It gave up; its `Drop` already took it off `live`.
            }
            if peer.queue.is_empty() {
                self.forget_if_idle(ip);
            } else {
                peer.listed = true;
                self.turns.push_back(ip);
            }
        }
    }

    fn list(&mut self, ip: IpAddr) {
        if let Some(peer) = self.by_peer.get_mut(&ip)
            && !peer.listed
            && !peer.queue.is_empty()
        {
            peer.listed = true;
            self.turns.push_back(ip);
        }
    }
}

/// What [`Budget::admit`] decided.
#[derive(Debug)]
pub enum Admit {
    /// Admitted: its connection permit and its pre-hello permit.
    Now(ConnPermit, HelloSlot),
    /// Over a pre-hello cap: it waits its turn ([`Waiting::turn`]).
    Wait(ConnPermit, Waiting),
}

impl Budget {
    pub fn new(caps: Caps) -> Arc<Self> {
        Arc::new(Self { caps, ..Default::default() })
    }

    /// The budget of a hub whose open-file limit is `fd_limit`: its total is kept below it.
    pub fn under_fd_limit(caps: Caps, fd_limit: Option<u64>) -> Arc<Self> {
        Arc::new(Self { caps: caps.within_fd_limit(fd_limit), fd_limit, ..Default::default() })
    }

    pub fn caps(&self) -> Caps {
        self.caps
    }

    /// The open-file limit the total was kept under, if it is known.
    pub fn fd_limit(&self) -> Option<u64> {
        self.fd_limit
    }

    /// Whether the open-file limit, not `--max-device-connections`, sets the device ceiling.
    pub fn limited_by_descriptors(&self, configured: usize) -> bool {
        self.caps.max_connections < configured
    }

    /// Connections open now, and those of them that have not said hello.
    pub fn counts(&self) -> (usize, usize) {
        (self.open.load(Ordering::Relaxed), self.lock().total)
    }

    /// Connections waiting for a pre-hello slot now.
    pub fn waiting(&self) -> usize {
        self.lock().waiting
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, PreHello> {
        // Nothing under this lock can panic; recover anyway rather than poison the listener.
        self.pre_hello.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Admits a connection from `peer`, queues it for a pre-hello slot, or says why not (at once).
    pub fn admit(self: &Arc<Self>, peer: IpAddr) -> Result<Admit, Refusal> {
        let open = self.open.fetch_add(1, Ordering::AcqRel);
        let conn = ConnPermit(self.clone());
        if open >= self.caps.max_connections {
            return Err(Refusal::Full(open));
        }
        // Once per run, when the devices come near the ceiling: time to raise it.
        if open + 1 >= self.caps.max_connections - self.caps.max_connections / 10 && !self.near_ceiling_said.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                "{} device-side connections are open, near the ceiling of {}: raise --max-device-connections or the open-file limit (docs/hub.md, \"Descriptor limits\")",
                open + 1,
                self.caps.max_connections
            );
        }
        let mut pre = self.lock();
        let total = pre.total;
        let entry = pre.by_peer.entry(peer).or_default();
        // Nobody from this address waits before it (FIFO per address), and there is room.
        if entry.queue.is_empty() && entry.held < entry.cap(&self.caps) && total < self.caps.pre_hello_total {
            entry.held += 1;
            pre.total += 1;
            drop(pre);
            return Ok(Admit::Now(conn, self.slot(peer)));
        }
        let queued = self.caps.queued_per_peer();
        if entry.queue.len() >= queued {
            // Waiters that gave up stay in the queue until their turn; clear them out once they
            // are half of it, so a peer that connects and leaves cannot grow it.
            if entry.live < entry.queue.len() / 2 {
                entry.queue.retain(|tx| !tx.is_closed());
            }
            if entry.queue.len() >= queued {
                let n = entry.live;
                pre.forget_if_idle(peer);
                return Err(Refusal::PeerQueue(n));
            }
        }
        let (tx, rx) = oneshot::channel();
        entry.queue.push_back(tx);
        entry.live += 1;
        pre.waiting += 1;
        pre.list(peer);
        // A slot may be free for someone already (this address over its own cap, another not).
        pre.dispatch(&self.caps);
        drop(pre);
        Ok(Admit::Wait(conn, Waiting { budget: self.clone(), peer, rx: Some(rx) }))
    }

    fn slot(self: &Arc<Self>, peer: IpAddr) -> HelloSlot {
        let permit = HelloPermit { budget: self.clone(), peer, granted: Instant::now(), hello: AtomicBool::new(false) };
        HelloSlot(Arc::new(Mutex::new(Some(permit))))
    }

    /// A pre-hello permit of `peer` ended (`how`): its slot goes to the next waiter.
    fn release(&self, peer: IpAddr, how: Ended) {
        let mut pre = self.lock();
        pre.total = pre.total.saturating_sub(1);
        if let Some(p) = pre.by_peer.get_mut(&peer) {
            p.held = p.held.saturating_sub(1);
            p.ended(how, &self.caps);
        }
        pre.list(peer);
        pre.dispatch(&self.caps);
        pre.forget_if_idle(peer);
    }
}

/// A connection waiting for a pre-hello slot. Dropping it (the deadline passed, the task ended)
/// gives back a slot granted to it meanwhile.
#[derive(Debug)]
pub struct Waiting {
    budget: Arc<Budget>,
    peer: IpAddr,
    rx: Option<oneshot::Receiver<Granted>>,
}

impl Waiting {
    /// Waits for this connection's turn, at most the queue timeout.
    pub async fn turn(mut self) -> Result<HelloSlot, Refusal> {
        let timeout = self.budget.caps.queue_timeout;
        let rx = self.rx.as_mut().expect("taken only here and in drop");
        match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(Granted)) => {
                self.rx = None;
                Ok(self.budget.slot(self.peer))
            }
            // The sender is only dropped by a queue clean-up, which drops closed ones: not this.
            Ok(Err(_)) | Err(_) => Err(Refusal::Waited(timeout)),
        }
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        let Some(mut rx) = self.rx.take() else { return };
        rx.close();
        if let Ok(Granted) = rx.try_recv() {
            // Granted as it gave up: the slot is passed on.
            self.budget.release(self.peer, Ended::Unused);
            return;
        }
        let mut pre = self.budget.lock();
        pre.waiting = pre.waiting.saturating_sub(1);
        if let Some(p) = pre.by_peer.get_mut(&self.peer) {
            p.live = p.live.saturating_sub(1);
            if p.live == 0 {
                // Nobody left waiting from this address: drop the closed entries now.
                p.queue.clear();
            }
        }
        pre.forget_if_idle(self.peer);
    }
}

/// One open device-side connection; released when dropped (with the socket).
#[derive(Debug)]
pub struct ConnPermit(Arc<Budget>);

impl Drop for ConnPermit {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::AcqRel);
    }
}

/// One connection that has not said hello; released when dropped (at hello, or with the socket).
#[derive(Debug)]
pub struct HelloPermit {
    budget: Arc<Budget>,
    peer: IpAddr,
    granted: Instant,
    hello: AtomicBool,
}

impl crate::links::handle::UntilHello for HelloPermit {
    fn hello(&self) {
        self.hello.store(true, Ordering::Relaxed);
    }
}

impl Drop for HelloPermit {
    fn drop(&mut self) {
        let how = if self.hello.load(Ordering::Relaxed) { Ended::Hello(self.granted.elapsed()) } else { Ended::NoHello };
        self.budget.release(self.peer, how);
    }
}

/// The pre-hello permit of one connection, in each of its requests' extensions: the WebSocket
/// route takes it for the device's link; otherwise it ends with the connection.
#[derive(Debug, Clone)]
pub struct HelloSlot(Arc<Mutex<Option<HelloPermit>>>);

impl HelloSlot {
    /// The permit, boxed the way `LinkSetup::until_hello` holds it.
    pub fn take(&self) -> Option<Box<dyn crate::links::handle::UntilHello>> {
        let permit = self.0.lock().unwrap_or_else(|e| e.into_inner()).take();
        permit.map(|p| Box::new(p) as Box<dyn crate::links::handle::UntilHello>)
    }
}

/// Raises the soft `RLIMIT_NOFILE` to the hard limit; returns the soft limit in force after.
pub fn raise_fd_limit() -> Option<u64> {
    #[cfg(unix)]
    {
        let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        // SAFETY: getrlimit/setrlimit only read and write the struct we pass.
        if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
            return None;
        }
        if lim.rlim_cur < lim.rlim_max {
            let raised = libc::rlimit { rlim_cur: lim.rlim_max, rlim_max: lim.rlim_max };
            // SAFETY: as above.
            if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
                lim.rlim_cur = lim.rlim_max;
            } else {
                tracing::warn!(soft = lim.rlim_cur, hard = lim.rlim_max, "cannot raise the open-file limit: {}", std::io::Error::last_os_error());
            }
        }
        #[allow(clippy::unnecessary_cast, reason = "rlim_t is not u64 on every unix")]
        let soft = lim.rlim_cur as u64;
        Some(if lim.rlim_cur == libc::RLIM_INFINITY { u64::MAX } else { soft })
    }
    #[cfg(not(unix))]
    None
}

/// A log line any peer can trigger at will, at most once per period for all peers together, with
/// a count of those skipped (also counted in `/metrics` as refusal lines held back, as
/// [`crate::metrics::log_limit`] counts those it holds back per key).
#[derive(Debug)]
pub struct RateLimited {
    start: Instant,
    period_ms: u64,
    next_ms: AtomicU64,
    skipped: AtomicU64,
}

impl RateLimited {
    pub fn new(period: Duration) -> Self {
        Self { start: Instant::now(), period_ms: period.as_millis() as u64, next_ms: AtomicU64::new(0), skipped: AtomicU64::new(0) }
    }

    /// `Some(skipped since the last line)` when a line may be written now.
    pub fn allow(&self) -> Option<u64> {
        let now = self.start.elapsed().as_millis() as u64;
        let next = self.next_ms.load(Ordering::Relaxed);
        if now >= next && self.next_ms.compare_exchange(next, now + self.period_ms, Ordering::AcqRel, Ordering::Relaxed).is_ok() {
            return Some(self.skipped.swap(0, Ordering::AcqRel));
        }
        self.skipped.fetch_add(1, Ordering::Relaxed);
        crate::metrics::log_lines_suppressed(crate::metrics::log_limit::Kind::Refusal, 1);
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caps(max_connections: usize, per_peer: usize, total: usize, queued: usize) -> Caps {
        Caps { max_connections, pre_hello_per_peer: per_peer, pre_hello_total: total, queued_per_peer: queued, queue_timeout: Duration::from_secs(5) }
    }

    fn now(a: Result<Admit, Refusal>) -> (ConnPermit, HelloSlot) {
        match a {
            Ok(Admit::Now(c, s)) => (c, s),
            other => panic!("expected an admission now, got {other:?}"),
        }
    }

    fn wait(a: Result<Admit, Refusal>) -> (ConnPermit, Waiting) {
        match a {
            Ok(Admit::Wait(c, w)) => (c, w),
            other => panic!("expected a wait, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn over_the_pre_hello_caps_a_connection_waits_its_turn_and_gets_it() {
        let budget = Budget::new(caps(100, 2, 3, 4));
        let a: IpAddr = "127.0.0.2".parse().unwrap();
        let b: IpAddr = "127.0.0.3".parse().unwrap();
        let a1 = now(budget.admit(a));
        let _a2 = now(budget.admit(a));
        // Over the per-peer cap: waits, holding no slot.
        let (_c3, w3) = wait(budget.admit(a));
        let b1 = now(budget.admit(b));
        // The total (3) is reached: another address waits too.
        let (_cb2, wb2) = wait(budget.admit(b));
        assert_eq!(budget.counts(), (5, 3));
        assert_eq!(budget.waiting(), 2);
        // a1 says hello. b's waiter got in line for the total before a's own cap let a's waiter
        // back in, so the slot is b's turn (round robin between addresses, not one queue).
        drop(a1.1.take());
        let sb2 = tokio::time::timeout(Duration::from_secs(1), wb2.turn()).await.expect("granted at once").unwrap();
        assert_eq!(budget.counts(), (5, 3));
        // b1's connection ends before hello: a's waiter is next.
        drop(b1);
        let s3 = tokio::time::timeout(Duration::from_secs(1), w3.turn()).await.expect("granted at once").unwrap();
        assert_eq!(budget.waiting(), 0);
        drop((s3, sb2));
        assert_eq!(budget.counts().1, 1, "only a2's slot is still held");
    }

    #[tokio::test]
    async fn one_address_queues_its_share_and_no_more_and_others_still_get_in() {
        let budget = Budget::new(caps(100, 1, 10, 3));
        let flood: IpAddr = "10.0.0.1".parse().unwrap();
        let _held = now(budget.admit(flood));
        let waiters: Vec<_> = (0..3).map(|_| wait(budget.admit(flood))).collect();
        assert_eq!(budget.admit(flood).unwrap_err(), Refusal::PeerQueue(3));
        assert_eq!(budget.counts().0, 4, "a refused connection holds nothing");
        // Another address is not behind the flood.
        let other: IpAddr = "10.0.0.2".parse().unwrap();
        let _in = now(budget.admit(other));
        drop(waiters);
        assert_eq!(budget.waiting(), 0);
        let _again = wait(budget.admit(flood));
        // The default share: half of the connection cap.
        assert_eq!(caps(1000, 1, 1, 0).queued_per_peer(), 500);
    }

    #[tokio::test]
    async fn a_waiter_is_closed_at_the_deadline_and_leaves_nothing_behind() {
        let budget = Budget::new(Caps { queue_timeout: Duration::from_millis(100), ..caps(100, 1, 10, 8) });
        let ip: IpAddr = "10.0.0.9".parse().unwrap();
        let held = now(budget.admit(ip));
        let (conn, w) = wait(budget.admit(ip));
        let started = Instant::now();
        assert_eq!(w.turn().await.unwrap_err(), Refusal::Waited(Duration::from_millis(100)));
        assert!(started.elapsed() >= Duration::from_millis(100));
        drop(conn);
        assert_eq!(budget.waiting(), 0);
        drop(held);
        assert_eq!(budget.counts(), (0, 0));
        assert!(budget.lock().by_peer.is_empty(), "an idle address is forgotten");
    }

    #[tokio::test]
    async fn a_slot_granted_to_a_waiter_that_left_is_passed_on() {
        let budget = Budget::new(caps(100, 1, 10, 8));
        let ip: IpAddr = "10.0.0.7".parse().unwrap();
        let held = now(budget.admit(ip));
        let (_c1, w1) = wait(budget.admit(ip));
        let (_c2, w2) = wait(budget.admit(ip));
        // The slot is granted to w1 while nobody polls it; then w1 goes without taking it.
        drop(held);
        drop(w1);
        let s2 = tokio::time::timeout(Duration::from_secs(1), w2.turn()).await.expect("passed on").unwrap();
        assert_eq!(budget.counts().1, 1);
        drop(s2);
        assert_eq!(budget.counts().1, 0);
    }

    #[tokio::test]
    async fn waiters_that_left_do_not_grow_the_queue() {
        let budget = Budget::new(caps(10_000, 1, 10, 4));
        let ip: IpAddr = "10.0.0.5".parse().unwrap();
        let _held = now(budget.admit(ip));
        let keep = wait(budget.admit(ip));
        for _ in 0..1000 {
            drop(wait(budget.admit(ip)));
        }
        assert!(budget.lock().by_peer[&ip].queue.len() <= 4, "{}", budget.lock().by_peer[&ip].queue.len());
        assert_eq!(budget.waiting(), 1);
        drop(keep);
    }

    /// Admits connections from `ip` until one has to wait; returns those admitted.
    fn fill(budget: &Arc<Budget>, ip: IpAddr) -> Vec<(ConnPermit, HelloSlot)> {
        let mut admitted = Vec::new();
        loop {
            match budget.admit(ip) {
                Ok(Admit::Now(c, s)) => admitted.push((c, s)),
                Ok(Admit::Wait(..)) => return admitted,
                Err(e) => panic!("refused: {e}"),
            }
        }
    }

    /// Each device says hello, `after` its slot was granted (as over a path with that delay).
    fn say_hello(admitted: Vec<(ConnPermit, HelloSlot)>, after: Duration) {
        for (_conn, slot) in admitted {
            let mut permit = slot.0.lock().unwrap().take().expect("the permit");
            permit.granted -= after;
            crate::links::handle::UntilHello::hello(&permit);
        }
    }

    #[tokio::test]
    async fn hellos_over_a_fast_path_leave_the_cap_as_it_is() {
        let budget = Budget::new(caps(1000, 2, 8, 100));
        let lan: IpAddr = "10.0.0.4".parse().unwrap();
        let anchor = now(budget.admit(lan));
        for _ in 0..3 {
            let admitted = fill(&budget, lan);
            assert_eq!(admitted.len(), 1, "2 slots: 2 × 1 / 0.5 ms is more than ADMIT_RATE already");
            say_hello(admitted, Duration::from_micros(500));
        }
        drop(anchor);
    }

    #[tokio::test]
    async fn quick_hellos_over_a_slow_path_raise_an_address_cap_up_to_half_the_total_and_silence_takes_it_back() {
        let budget = Budget::new(caps(1000, 2, 8, 100));
        let nat: IpAddr = "10.0.0.1".parse().unwrap();
        let other: IpAddr = "10.0.0.2".parse().unwrap();
        // One connection of the address stays open throughout: an address with nothing open or
        // waiting is forgotten, gain and all.
        let anchor = now(budget.admit(nat));
        let first = fill(&budget, nat);
        assert_eq!(first.len(), 1, "the configured cap (2) to start with");
        // A slot whose hello came (100 ms after: a far NAT) frees itself and one more.
        say_hello(first, Duration::from_millis(100));
        let second = fill(&budget, nat);
        assert_eq!(second.len(), 2);
        say_hello(second, Duration::from_millis(100));
        let third = fill(&budget, nat);
        assert_eq!(third.len(), 3, "never more than half of the total (8)");
        // The other half is still there for everyone else.
        let others = fill(&budget, other);
        assert_eq!(others.len(), 2);
        // Connections that end without a hello halve the gain, each.
        drop(third);
        let after_silence = fill(&budget, nat);
        assert_eq!(after_silence.len(), 1, "back to the configured cap");
        drop((after_silence, others, anchor));
        assert_eq!(budget.counts(), (0, 0));
        assert!(budget.lock().by_peer.is_empty(), "an idle address is forgotten, gain and all");
    }

    #[tokio::test]
    async fn a_hello_lets_a_waiter_of_the_same_address_in_with_one_more() {
        let budget = Budget::new(caps(1000, 1, 10, 100));
        let nat: IpAddr = "10.0.0.3".parse().unwrap();
        let (c1, s1) = now(budget.admit(nat));
        let (_c2, w2) = wait(budget.admit(nat));
        let (_c3, w3) = wait(budget.admit(nat));
        say_hello(vec![(c1, s1)], Duration::from_millis(100));
        let t2 = tokio::time::timeout(Duration::from_secs(1), w2.turn()).await.expect("granted").unwrap();
        let t3 = tokio::time::timeout(Duration::from_secs(1), w3.turn()).await.expect("granted too: the cap grew").unwrap();
        assert_eq!(budget.counts().1, 2);
        drop((t2, t3));
    }

    #[test]
    fn total_is_capped_whatever_the_state() {
        let budget = Budget::new(caps(2, 10, 10, 0));
        let ip: IpAddr = "10.0.0.1".parse().unwrap();
        let (c1, s1) = now(budget.admit(ip));
        let (_c2, _s2) = now(budget.admit(ip));
        drop(s1.take());
        assert_eq!(budget.admit(ip).unwrap_err(), Refusal::Full(2));
        drop(c1);
        assert!(budget.admit(ip).is_ok());
        assert_eq!(Caps::default().within_fd_limit(Some(1024)).max_connections, 768);
    }

    #[test]
    fn rate_limited_lines_count_what_they_skip() {
        let log = RateLimited::new(Duration::from_secs(3600));
        assert_eq!(log.allow(), Some(0));
        assert_eq!(log.allow(), None);
        assert_eq!(log.allow(), None);
        assert_eq!(log.skipped.load(Ordering::Relaxed), 2);
    }
}
