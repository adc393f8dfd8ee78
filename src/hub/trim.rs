//! Giving memory back after an onboarding burst: glibc's malloc keeps the pages a burst used in
//! its arenas (issue 24: 4.9 KB per device settled after a throttled onboarding, 5.3-7.9 KB after
//! a burst). Once devices have stopped arriving for a moment after at least [`BURST`] of them,
//! the hub calls `malloc_trim(0)`, which returns free pages at the top and inside every arena to
//! the system. Likewise once the hub's event ring, having held at least [`RING_WORTH`] for a
//! watcher that fell behind, has given most of it back (the watcher caught up or went away):
//! the memory a slow stream made the hub hold returns after the stream.
//!
//! The `mcpdev` binary allocates with mimalloc (src/main.rs), which gives back the pages it no
//! longer uses by itself; there these trims only reach what C code allocated with glibc's malloc,
//! and cost a walk of nearly empty arenas. They matter where the library runs on glibc's
//! allocator (the tests and benches that serve in-process).
//!
//! mimalloc keeps freed blocks in the pages of the thread that allocated them, and a page goes back
//! only once that thread frees or collects it: after 10,000 MCP tasks had ended, their pages
//! stayed in the async workers' heaps (14 MB in a debug build, issue 46.5). [`give_back`]
//! therefore also asks each worker to collect its own heap (`mi_collect`) the next time it has
//! nothing to do ([`collect_when_idle`], the runtime's park hook, which `serve` and `sim` set).
//!
//! Rules it enforces: never during a burst (trimming takes the arenas' locks, and a burst would
//! only take the pages back); at most once per quiet spell; off the async workers
//! (`spawn_blocking`), and a worker's collection only when it is idle; `malloc_trim` only where
//! the allocator is glibc's. `MCPDEV_HEAP_TRIM=0` turns it off (to measure what it does).

use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::Hub;

/// New connections since the last trim that make a burst worth trimming after.
pub const BURST: u64 = 256;
/// How long no device must have connected before the trim.
pub const QUIET: Duration = Duration::from_secs(2);
/// Bytes the event ring must have held for its draining to be worth a trim.
pub const RING_WORTH: usize = 4 << 20;

/// Whether this build can trim (glibc on Linux) and it was not turned off.
pub fn enabled() -> bool {
    cfg!(all(target_os = "linux", target_env = "gnu")) && std::env::var("MCPDEV_HEAP_TRIM").map_or(true, |v| v != "0")
}

/// Watches the registry's connection count and trims the heap after each burst, until the
/// runtime ends.
pub fn spawn(hub: Arc<Hub>) {
    if !enabled() {
        return;
    }
    tokio::spawn(async move {
        let mut plan = Plan::new(hub.registry.generations());
        let mut ring = RingPlan::default();
        let mut tick = tokio::time::interval(QUIET / 2);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let drained = ring.due(hub.registry.events.held_bytes());
            if plan.due(hub.registry.generations(), Instant::now()) || drained {
                let started = Instant::now();
                COLLECTS.fetch_add(1, Ordering::Relaxed);
                let freed = tokio::task::spawn_blocking(trim).await.unwrap_or(false);
                tracing::debug!(freed, took_ms = started.elapsed().as_millis() as u64, "heap trimmed after an onboarding burst");
            }
        }
    });
}

/// When to trim: after [`BURST`] new connections, once none came for [`QUIET`].
#[derive(Debug)]
pub struct Plan {
    trimmed_at: u64,
    last_seen: u64,
    changed_at: Option<Instant>,
}

impl Plan {
    pub fn new(generations: u64) -> Self {
        Self { trimmed_at: generations, last_seen: generations, changed_at: None }
    }

    /// Whether to trim now, given the connection count and the time.
    pub fn due(&mut self, generations: u64, now: Instant) -> bool {
        if generations != self.last_seen {
            self.last_seen = generations;
            self.changed_at = Some(now);
            return false;
        }
        let quiet = self.changed_at.is_some_and(|at| now.duration_since(at) >= QUIET);
        if quiet && generations.saturating_sub(self.trimmed_at) >= BURST {
            self.trimmed_at = generations;
            self.changed_at = None;
            return true;
        }
        false
    }
}

/// When to trim after the event ring drained: it held at least [`RING_WORTH`] (as sampled), and
/// holds less than an eighth of that now.
#[derive(Debug, Default)]
pub struct RingPlan {
    high: usize,
}

impl RingPlan {
    pub fn due(&mut self, held: usize) -> bool {
        self.high = self.high.max(held);
        if self.high >= RING_WORTH && held <= self.high / 8 {
            self.high = held;
            return true;
        }
        false
    }
}

/// How many times memory was asked back ([`give_back`]); each worker collects once per request.
static COLLECTS: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// The last request this thread collected for.
    static COLLECTED: Cell<u64> = const { Cell::new(0) };
}

/// Gives freed memory back: glibc's arenas at once (`malloc_trim`; call it off the async
/// workers), and each async worker's mimalloc heap when it next idles ([`collect_when_idle`]).
pub fn give_back() {
    if !enabled() {
        return;
    }
    COLLECTS.fetch_add(1, Ordering::Relaxed);
    trim();
}

/// The runtime's park hook in a process on mimalloc: a worker about to wait for work collects its
/// heap once after each [`give_back`] (the blocks other threads freed into its pages, and the
/// pages left empty, go back). Otherwise one atomic load.
pub fn collect_when_idle() {
    unsafe extern "C" {
        fn mi_collect(force: bool);
    }
    let wanted = COLLECTS.load(Ordering::Relaxed);
    if COLLECTED.with(|c| c.replace(wanted)) != wanted {
        // SAFETY: mimalloc's public API; it only walks this thread's own heap.
        unsafe { mi_collect(true) };
    }
}

/// `malloc_trim(0)`: whether memory was given back.
fn trim() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: malloc_trim has no preconditions; it takes the allocator's own locks.
        unsafe { libc::malloc_trim(0) == 1 }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trim_comes_once_the_ring_gave_back_what_a_slow_watcher_held() {
        let mut p = RingPlan::default();
        assert!(!p.due(RING_WORTH / 2) && !p.due(0), "too little to be worth it");
        assert!(!p.due(RING_WORTH * 4), "not while it is held");
        assert!(!p.due(RING_WORTH));
        assert!(p.due(RING_WORTH / 4));
        assert!(!p.due(0), "once");
    }

    #[test]
    fn a_trim_comes_once_after_a_burst_has_gone_quiet() {
        let t0 = Instant::now();
        let mut plan = Plan::new(10);
        // A burst: the count moves at every look.
        for (i, g) in (10..10 + BURST).step_by(64).enumerate() {
            assert!(!plan.due(g, t0 + Duration::from_secs(i as u64)), "never during a burst");
        }
        // The last of the burst arrives at `end`.
        let end = t0 + Duration::from_secs(5);
        assert!(!plan.due(10 + BURST, end));
        assert!(!plan.due(10 + BURST, end + QUIET - Duration::from_millis(1)), "not before the quiet time");
        assert!(plan.due(10 + BURST, end + QUIET));
        assert!(!plan.due(10 + BURST, end + QUIET * 10), "once per quiet spell");
        // A few devices later (fewer than a burst): nothing.
        plan.due(20 + BURST, end + QUIET * 11);
        assert!(!plan.due(20 + BURST, end + QUIET * 20));
    }
}
