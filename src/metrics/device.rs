//! One device's calls, for the dashboard's devices page: counts, a latency histogram (for p50 and
//! p99) and the latest latencies (for its small plot). Fixed size, lock-free: a device's calls
//! cost a few atomic adds, whatever they carry. The tallies (about 270 bytes) are allocated at a
//! device's first call: most of a fleet is never called, and each device has its own.

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use serde::Serialize;

/// Upper bounds of the latency buckets, in milliseconds (the last bucket is everything above).
const BOUNDS_MS: [u32; 14] = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 30_000];
/// How many latest latencies are kept for the plot.
pub const RECENT: usize = 32;

#[derive(Default)]
pub struct DeviceCalls(std::sync::OnceLock<Box<Tallies>>);

#[derive(Default)]
struct Tallies {
    calls: AtomicU64,
    errors: AtomicU64,
    buckets: [AtomicU64; BOUNDS_MS.len() + 1],
    recent: [AtomicU32; RECENT],
    next: AtomicUsize,
}

/// What the devices page shows of a device's calls.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CallSummary {
    pub calls: u64,
    pub errors: u64,
    /// Upper bounds of the buckets holding the median and the 99th percentile, in ms (`None`
    /// before the first call; above the last bound: the last bound).
    pub p50_ms: Option<u32>,
    pub p99_ms: Option<u32>,
    /// The latest latencies in ms, oldest first.
    pub recent_ms: Vec<u32>,
}

impl DeviceCalls {
    pub fn record(&self, ok: bool, elapsed: Duration) {
        self.0.get_or_init(Box::default).record(ok, elapsed);
    }

    pub fn summary(&self) -> CallSummary {
        match self.0.get() {
            Some(t) => t.summary(),
            None => CallSummary { calls: 0, errors: 0, p50_ms: None, p99_ms: None, recent_ms: Vec::new() },
        }
    }
}

impl Tallies {
    fn record(&self, ok: bool, elapsed: Duration) {
        self.calls.fetch_add(1, Ordering::Relaxed);
        if !ok {
            self.errors.fetch_add(1, Ordering::Relaxed);
        }
        let ms = u32::try_from(elapsed.as_millis()).unwrap_or(u32::MAX);
        let bucket = BOUNDS_MS.iter().position(|b| ms <= *b).unwrap_or(BOUNDS_MS.len());
        self.buckets[bucket].fetch_add(1, Ordering::Relaxed);
        let at = self.next.fetch_add(1, Ordering::Relaxed);
        self.recent[at % RECENT].store(ms.max(1), Ordering::Relaxed);
    }

    fn summary(&self) -> CallSummary {
        let counts: Vec<u64> = self.buckets.iter().map(|b| b.load(Ordering::Relaxed)).collect();
        let total: u64 = counts.iter().sum();
        let quantile = |q: f64| -> Option<u32> {
            if total == 0 {
                return None;
            }
            let rank = ((total as f64) * q).ceil().max(1.0) as u64;
            let mut seen = 0;
            for (i, c) in counts.iter().enumerate() {
                seen += c;
                if seen >= rank {
                    return Some(BOUNDS_MS[i.min(BOUNDS_MS.len() - 1)]);
                }
            }
            BOUNDS_MS.last().copied()
        };
        let next = self.next.load(Ordering::Relaxed);
        let kept = next.min(RECENT);
        let recent_ms = (next - kept..next).map(|i| self.recent[i % RECENT].load(Ordering::Relaxed)).collect();
        CallSummary { calls: self.calls.load(Ordering::Relaxed), errors: self.errors.load(Ordering::Relaxed), p50_ms: quantile(0.5), p99_ms: quantile(0.99), recent_ms }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_come_from_the_buckets_and_recent_keeps_the_latest() {
        let d = DeviceCalls::default();
        assert_eq!(d.summary(), CallSummary { calls: 0, errors: 0, p50_ms: None, p99_ms: None, recent_ms: Vec::new() });
        assert!(d.0.get().is_none(), "nothing is allocated before the first call");
        for _ in 0..98 {
            d.record(true, Duration::from_millis(3));
        }
        d.record(false, Duration::from_millis(150));
        d.record(false, Duration::from_secs(60));
        let s = d.summary();
        assert_eq!((s.calls, s.errors), (100, 2));
        assert_eq!(s.p50_ms, Some(5));
        assert_eq!(s.p99_ms, Some(200));
        assert_eq!(s.recent_ms.len(), RECENT);
        assert_eq!(s.recent_ms[RECENT - 2..], [150, 60_000]);
    }
}
