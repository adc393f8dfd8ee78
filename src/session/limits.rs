//! A per-second budget for what a device can make the hub answer (hellos, requests).

use std::time::{Duration, Instant};

#[derive(Debug)]
pub(super) struct RateLimit {
    window_start: Instant,
    used: u32,
}

#[derive(Debug, PartialEq, Eq)]
pub(super) enum Verdict {
    Allow,
    /// The first refusal of this window (log it).
    FirstRefusal,
    Refused,
}

impl RateLimit {
    pub fn new(now: Instant) -> Self {
        Self { window_start: now, used: 0 }
    }

    /// Takes one from this second's budget of `per_sec`.
    pub fn take(&mut self, now: Instant, per_sec: u32) -> Verdict {
        if now.duration_since(self.window_start) >= Duration::from_secs(1) {
            self.window_start = now;
            self.used = 0;
        }
        self.used = self.used.saturating_add(1);
        match self.used {
            n if n <= per_sec => Verdict::Allow,
            n if n == per_sec.saturating_add(1) => Verdict::FirstRefusal,
            _ => Verdict::Refused,
        }
    }
}
