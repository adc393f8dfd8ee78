//! Events per second over the last minutes, for the dashboard's plots: one slot a second, in a
//! fixed ring (no allocation when counting, nothing kept beyond [`SECONDS`]).

use std::sync::atomic::{AtomicU64, Ordering};

/// How far back the ring reaches.
pub const SECONDS: usize = 300;

/// Counts per second; a slot is reused once its second is [`SECONDS`] old.
pub struct RateRing {
    /// The second (since the hub started) each slot counts, plus one (0: never used).
    second: [AtomicU64; SECONDS],
    count: [AtomicU64; SECONDS],
}

impl Default for RateRing {
    fn default() -> Self {
        Self { second: std::array::from_fn(|_| AtomicU64::new(0)), count: std::array::from_fn(|_| AtomicU64::new(0)) }
    }
}

impl RateRing {
    /// One event in second `now`.
    pub fn add(&self, now: u64) {
        let slot = (now % SECONDS as u64) as usize;
        let tag = now + 1;
        // The first event of a new second takes the slot over; a race between two such events
        // at most loses one count.
        if self.second[slot].swap(tag, Ordering::AcqRel) != tag {
            self.count[slot].store(0, Ordering::Release);
        }
        self.count[slot].fetch_add(1, Ordering::AcqRel);
    }

    /// Counts for the [`SECONDS`] seconds up to and including `now`, oldest first.
    pub fn series(&self, now: u64) -> Vec<u64> {
        (0..SECONDS as u64)
            .map(|back| {
                let Some(second) = now.checked_sub(SECONDS as u64 - 1 - back) else { return 0 };
                let slot = (second % SECONDS as u64) as usize;
                if self.second[slot].load(Ordering::Acquire) == second + 1 { self.count[slot].load(Ordering::Acquire) } else { 0 }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_land_in_their_second_and_old_ones_are_forgotten() {
        let r = RateRing::default();
        r.add(5);
        r.add(5);
        r.add(7);
        let s = r.series(7);
        assert_eq!(s.len(), SECONDS);
        assert_eq!(&s[SECONDS - 3..], &[2, 0, 1]);
        // The slot of second 5 is reused by second 305: the old count is gone, not added to.
        r.add(305);
        let s = r.series(310);
        assert_eq!(s[SECONDS - 6], 1);
        assert_eq!(s.iter().sum::<u64>(), 1, "second 7 is older than the window");
    }
}
