//! How many connections the device listener holds: a total kept below the descriptor limit (with
//! a reserve for the host listener, the broker and files), and a cap on connections that have not
//! said hello yet, per peer address and in total. A device's hello ends its pre-hello permit
//! ([`HelloSlot`], carried to the link as `LinkSetup::until_hello`).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Descriptors kept for everything but device connections: the host listener, the broker, files.
pub const HOST_RESERVE: u64 = 256;

/// The caps the device listener admits connections within.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caps {
    /// Open device-side connections at most (any state).
    pub max_connections: usize,
    /// Connections that have not said hello, from one peer address.
    pub pre_hello_per_peer: usize,
    /// Connections that have not said hello, in total.
    pub pre_hello_total: usize,
}

impl Default for Caps {
    fn default() -> Self {
        Self { max_connections: 100_000, pre_hello_per_peer: 16, pre_hello_total: 512 }
    }
}

impl Caps {
    /// The device side's total under a descriptor limit: the limit less [`HOST_RESERVE`].
    pub fn within_fd_limit(mut self, fd_limit: Option<u64>) -> Self {
        if let Some(limit) = fd_limit {
            let room = limit.saturating_sub(HOST_RESERVE).max(16);
            self.max_connections = self.max_connections.min(usize::try_from(room).unwrap_or(usize::MAX));
        }
        self
    }
}

/// Why a connection was not admitted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("{0} device-side connections are open (the limit, below the descriptor limit)")]
    Full(usize),
    #[error("{0} connections from this address have not said hello yet (--max-pre-hello-per-peer)")]
    PeerPreHello(usize),
    #[error("{0} connections have not said hello yet (--max-pre-hello)")]
    PreHello(usize),
}

#[derive(Debug, Default)]
pub struct Budget {
    caps: Caps,
    open: AtomicUsize,
    pre_hello: Mutex<PreHello>,
}

#[derive(Debug, Default)]
struct PreHello {
    total: usize,
    by_peer: HashMap<IpAddr, usize>,
}

impl Budget {
    pub fn new(caps: Caps) -> Arc<Self> {
        Arc::new(Self { caps, ..Default::default() })
    }

    pub fn caps(&self) -> Caps {
        self.caps
    }

    /// Connections open now, and those of them that have not said hello.
    pub fn counts(&self) -> (usize, usize) {
        (self.open.load(Ordering::Relaxed), self.lock().total)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, PreHello> {
        // Nothing under this lock can panic; recover anyway rather than poison the listener.
        self.pre_hello.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Admits a connection from `peer`, or says why not.
    pub fn admit(self: &Arc<Self>, peer: IpAddr) -> Result<(ConnPermit, HelloSlot), Refusal> {
        let open = self.open.fetch_add(1, Ordering::AcqRel);
        let conn = ConnPermit(self.clone());
        if open >= self.caps.max_connections {
            return Err(Refusal::Full(open));
        }
        let mut pre = self.lock();
        let from_peer = pre.by_peer.get(&peer).copied().unwrap_or(0);
        if from_peer >= self.caps.pre_hello_per_peer {
            return Err(Refusal::PeerPreHello(from_peer));
        }
        if pre.total >= self.caps.pre_hello_total {
            return Err(Refusal::PreHello(pre.total));
        }
        pre.total += 1;
        *pre.by_peer.entry(peer).or_insert(0) += 1;
        drop(pre);
        let hello = HelloPermit { budget: self.clone(), peer };
        Ok((conn, HelloSlot(Arc::new(Mutex::new(Some(hello))))))
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
}

impl Drop for HelloPermit {
    fn drop(&mut self) {
        let mut pre = self.budget.lock();
        pre.total = pre.total.saturating_sub(1);
        if let Some(n) = pre.by_peer.get_mut(&self.peer) {
            *n -= 1;
            if *n == 0 {
                pre.by_peer.remove(&self.peer);
            }
        }
    }
}

/// The pre-hello permit of one connection, in each of its requests' extensions: the WebSocket
/// route takes it for the device's link; otherwise it ends with the connection.
#[derive(Debug, Clone)]
pub struct HelloSlot(Arc<Mutex<Option<HelloPermit>>>);

impl HelloSlot {
    /// The permit, boxed the way `LinkSetup::until_hello` holds it.
    pub fn take(&self) -> Option<Box<dyn std::any::Any + Send + Sync>> {
        let permit = self.0.lock().unwrap_or_else(|e| e.into_inner()).take();
        permit.map(|p| Box::new(p) as Box<dyn std::any::Any + Send + Sync>)
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

/// A log line a peer can trigger at will, at most once per period, with a count of those skipped.
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
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pre_hello_caps_per_peer_and_total_and_release() {
        let budget = Budget::new(Caps { max_connections: 10, pre_hello_per_peer: 2, pre_hello_total: 3 });
        let a: IpAddr = "127.0.0.2".parse().unwrap();
        let b: IpAddr = "127.0.0.3".parse().unwrap();
        let a1 = budget.admit(a).unwrap();
        let a2 = budget.admit(a).unwrap();
        assert_eq!(budget.admit(a).unwrap_err(), Refusal::PeerPreHello(2));
        let b1 = budget.admit(b).unwrap();
        assert_eq!(budget.admit(b).unwrap_err(), Refusal::PreHello(3));
        assert_eq!(budget.counts(), (3, 3), "refused connections hold nothing");
        // a1 says hello: its permit goes, its connection stays.
        drop(a1.1.take());
        assert_eq!(budget.counts(), (3, 2));
        let a3 = budget.admit(a).unwrap();
        drop((a2, b1, a3));
        drop(a1);
        assert_eq!(budget.counts(), (0, 0));
    }

    #[test]
    fn total_is_capped_whatever_the_state() {
        let budget = Budget::new(Caps { max_connections: 2, pre_hello_per_peer: 10, pre_hello_total: 10 });
        let ip: IpAddr = "10.0.0.1".parse().unwrap();
        let (c1, s1) = budget.admit(ip).unwrap();
        let (_c2, _s2) = budget.admit(ip).unwrap();
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
