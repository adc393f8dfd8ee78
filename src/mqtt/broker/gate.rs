//! Rate-limited logging for what any client can trigger at will (refusals, kicks): at most
//! [`PER_WINDOW`] lines per kind every [`WINDOW`] for all clients together, and the number left
//! out is told in the next line that gets through and counted in `/metrics` (refusal lines held
//! back, as [`crate::metrics::log_limit`] counts them).

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

pub const WINDOW: Duration = Duration::from_secs(10);
pub const PER_WINDOW: u64 = 10;

/// One kind of log line.
pub struct LogGate {
    window: AtomicU64,
    count: AtomicU64,
    suppressed: AtomicU64,
}

fn now_window() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_secs() / WINDOW.as_secs() + 1
}

impl LogGate {
    pub const fn new() -> Self {
        Self { window: AtomicU64::new(0), count: AtomicU64::new(0), suppressed: AtomicU64::new(0) }
    }

    /// `Some(lines left out since the last one)` when this line may be logged.
    pub fn allow(&self) -> Option<u64> {
        let w = now_window();
        if self.window.swap(w, Ordering::Relaxed) != w {
            self.count.store(0, Ordering::Relaxed);
        }
        if self.count.fetch_add(1, Ordering::Relaxed) < PER_WINDOW {
            Some(self.suppressed.swap(0, Ordering::Relaxed))
        } else {
            self.suppressed.fetch_add(1, Ordering::Relaxed);
            crate::metrics::log_lines_suppressed(crate::metrics::log_limit::Kind::Refusal, 1);
            None
        }
    }
}

impl Default for LogGate {
    fn default() -> Self {
        Self::new()
    }
}

/// `tracing::warn!` through a [`LogGate`] (a `static` per call site).
macro_rules! warn_limited {
    ($($arg:tt)+) => {{
        static GATE: $crate::mqtt::broker::gate::LogGate = $crate::mqtt::broker::gate::LogGate::new();
        if let Some(suppressed) = GATE.allow() {
            tracing::warn!(suppressed, $($arg)+);
        }
    }};
}
pub(crate) use warn_limited;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flood_is_cut_to_a_few_lines_and_counted() {
        let g = LogGate::new();
        let allowed = (0..1000).filter(|_| g.allow().is_some()).count() as u64;
        // A window boundary may fall inside the loop: at most two windows' worth.
        assert!((PER_WINDOW..=2 * PER_WINDOW).contains(&allowed), "{allowed}");
        assert!(g.suppressed.load(Ordering::Relaxed) > 0 || allowed > PER_WINDOW);
    }
}
