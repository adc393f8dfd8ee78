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

/// How many onboardings a device may cause in a window: at most `max` per `window`; the one after
/// that waits for the window to end. Kept by value (a link hands it on to the device's next link,
/// see [`super::SessionConfig::onboard_budget`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OnboardBudget {
    window_start: Option<Instant>,
    used: u32,
}

impl OnboardBudget {
    /// Takes one onboarding; `Err(when)` if the window's `max` are spent: the next may start then.
    pub fn take(&mut self, now: Instant, max: u32, window: Duration) -> Result<(), Instant> {
        match self.window_start {
            Some(start) if now.duration_since(start) < window => {}
            _ => *self = Self { window_start: Some(now), used: 0 },
        }
        let start = self.window_start.unwrap_or(now);
        if self.used >= max.max(1) {
            return Err(start + window);
        }
        self.used += 1;
        Ok(())
    }

    /// Whether the budget is as good as new at `now` (a record of it can be forgotten).
    pub fn is_fresh(&self, now: Instant, window: Duration) -> bool {
        self.window_start.is_none_or(|start| now.duration_since(start) >= window)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_onboard_budget_allows_max_per_window_then_names_when_the_next_may_start() {
        let t0 = Instant::now();
        let w = Duration::from_secs(30);
        let mut b = OnboardBudget::default();
        assert!(b.is_fresh(t0, w));
        for i in 0..4 {
            assert_eq!(b.take(t0 + Duration::from_secs(i), 4, w), Ok(()));
        }
        assert_eq!(b.take(t0 + Duration::from_secs(10), 4, w), Err(t0 + w));
        assert!(!b.is_fresh(t0 + Duration::from_secs(29), w));
        assert_eq!(b.take(t0 + w, 4, w), Ok(()), "a new window");
        assert!(b.is_fresh(t0 + w + w, w));
    }
}
