//! The one limiter for every log line a peer can trigger (a device that reconnects in a loop, an
//! address that is refused over and over): per key (a Device-Id or an address), at most
//! [`PER_WINDOW`] lines a [`WINDOW`]; the rest are counted, summed up in one line once the
//! window is over ("device X connected 16,000 more times in the last 10 s"), and counted in
//! `/metrics` as `mcpdev_log_lines_suppressed_total{kind}`.
//!
//! Rules it enforces:
//! - **Bounded memory per kind, whatever the flood**: at most [`MAX_KEYS`] keys are followed at
//!   once; beyond them, lines are counted together, in one summary of their own.
//!   A key is forgotten once its window is over (after its summary), so a flood from many
//!   addresses leaves nothing behind.
//! - **Nothing is silently lost**: every line held back is in a summary and in the counter.
//! - Summaries are written by [`summarise_due`], which the hub runs every second
//!   ([`spawn_summaries`]); a key that comes back after its window writes its summary first.
//! - The same [`Limiter`] serves other sinks with their own tally (the `serve` event log).

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{LazyLock, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How long a key's budget of lines lasts.
pub const WINDOW: Duration = Duration::from_secs(10);
/// Lines one key may write in a window.
pub const PER_WINDOW: u32 = 5;
/// Keys followed at once, per kind of line.
pub const MAX_KEYS: usize = 1024;

/// What a log line is about: the `kind` label of the suppressed-lines counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// A device connected (or replaced its previous session).
    Connect,
    /// A device disconnected or was disconnected.
    Disconnect,
    /// A device's onboarding: started again, or deferred because it asks too often.
    Onboarding,
    /// Another warning about what a device did (too many requests, a cap reached, malformed
    /// messages).
    Device,
    /// A connection or request refused (admission, identity, caps), by address.
    Refusal,
    /// A device lifecycle event of `serve`'s event log (stderr, or NDJSON with `--json`).
    Event,
}

impl Kind {
    pub const ALL: [Kind; 6] = [Kind::Connect, Kind::Disconnect, Kind::Onboarding, Kind::Device, Kind::Refusal, Kind::Event];

    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Connect => "connect",
            Kind::Disconnect => "disconnect",
            Kind::Onboarding => "onboarding",
            Kind::Device => "device",
            Kind::Refusal => "refusal",
            Kind::Event => "event",
        }
    }

    fn index(self) -> usize {
        Kind::ALL.iter().position(|k| *k == self).unwrap_or(0)
    }
}

/// One key's window.
#[derive(Debug)]
struct Slot<S> {
    start: Instant,
    logged: u32,
    held: u64,
    tally: S,
}

/// What a window held back, to be summed up.
#[derive(Debug, PartialEq, Eq)]
pub struct Held<K, S> {
    /// The key, or `None` for the keys beyond [`MAX_KEYS`] counted together.
    pub key: Option<K>,
    /// Lines held back.
    pub count: u64,
    /// How long the window ran.
    pub over: Duration,
    pub tally: S,
}

/// Lines per key per window, with a tally `S` of what each key held back.
#[derive(Debug)]
pub struct Limiter<K, S> {
    window: Duration,
    per_window: u32,
    max_keys: usize,
    keys: HashMap<K, Slot<S>>,
    overflow: Option<Slot<S>>,
}

impl<K: Hash + Eq + Clone, S: Default> Limiter<K, S> {
    pub fn new(window: Duration, per_window: u32, max_keys: usize) -> Self {
        Self { window, per_window, max_keys, keys: HashMap::new(), overflow: None }
    }

    /// Whether a line about `key` may be written at `now`. When not, `hold` adds it to the key's
    /// tally. A window of the key's that is over is returned, to be summed up first.
    pub fn check(&mut self, key: &K, now: Instant, hold: impl FnOnce(&mut S)) -> (bool, Option<Held<K, S>>) {
        let mut ended = None;
        if let Some(slot) = self.keys.get_mut(key)
            && now.duration_since(slot.start) >= self.window
        {
            let old = std::mem::replace(slot, Slot { start: now, logged: 0, held: 0, tally: S::default() });
            ended = (old.held > 0).then(|| Held { key: Some(key.clone()), count: old.held, over: now.duration_since(old.start), tally: old.tally });
        }
        if !self.keys.contains_key(key) && self.keys.len() >= self.max_keys {
            self.keys.retain(|_, s| now.duration_since(s.start) < self.window || s.held > 0);
        }
        let slot = if self.keys.contains_key(key) || self.keys.len() < self.max_keys {
            self.keys.entry(key.clone()).or_insert_with(|| Slot { start: now, logged: 0, held: 0, tally: S::default() })
        } else {
            // Beyond the keys followed: every line is counted together, none logged one by one.
            let slot = self.overflow.get_or_insert_with(|| Slot { start: now, logged: 0, held: 0, tally: S::default() });
            slot.logged = self.per_window;
            slot
        };
        if slot.logged < self.per_window {
            slot.logged += 1;
            return (true, ended);
        }
        slot.held += 1;
        hold(&mut slot.tally);
        (false, ended)
    }

    /// The windows that are over at `now` and held lines back, taken out; keys whose window is
    /// over are forgotten.
    pub fn due(&mut self, now: Instant) -> Vec<Held<K, S>> {
        let window = self.window;
        let mut out = Vec::new();
        let over: Vec<K> = self.keys.iter().filter(|(_, s)| now.duration_since(s.start) >= window).map(|(k, _)| k.clone()).collect();
        for k in over {
            if let Some(s) = self.keys.remove(&k)
                && s.held > 0
            {
                out.push(Held { key: Some(k), count: s.held, over: now.duration_since(s.start), tally: s.tally });
            }
        }
        if self.overflow.as_ref().is_some_and(|s| now.duration_since(s.start) >= window)
            && let Some(s) = self.overflow.take()
            && s.held > 0
        {
            out.push(Held { key: None, count: s.held, over: now.duration_since(s.start), tally: s.tally });
        }
        out
    }

    /// Whether `key` is followed one by one (not counted with the keys beyond [`MAX_KEYS`]).
    pub fn follows(&self, key: &K) -> bool {
        self.keys.contains_key(key)
    }

    /// Keys followed now.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

type LineLimiter = Limiter<Box<str>, ()>;

static LINES: LazyLock<[Mutex<LineLimiter>; Kind::ALL.len()]> = LazyLock::new(|| std::array::from_fn(|_| Mutex::new(Limiter::new(WINDOW, PER_WINDOW, MAX_KEYS))));

fn lines(kind: Kind) -> MutexGuard<'static, LineLimiter> {
    // Nothing that can panic runs under these locks; a poisoned one is still consistent.
    LINES[kind.index()].lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Whether a log line of `kind` about `key` (a Device-Id, an address) may be written now. A line
/// held back is counted, and summed up later by [`summarise_due`].
pub fn allow(kind: Kind, key: &str) -> bool {
    let (log, ended) = lines(kind).check(&Box::from(key), Instant::now(), |()| {});
    if let Some(h) = ended {
        write_summary(kind, &h);
    }
    if !log {
        super::log_lines_suppressed(kind, 1);
    }
    log
}

/// Writes one line per key whose window is over and held lines back (and one for the keys
/// counted together).
pub fn summarise_due() {
    let now = Instant::now();
    for kind in Kind::ALL {
        let due = lines(kind).due(now);
        for h in &due {
            write_summary(kind, h);
        }
    }
}

/// Runs [`summarise_due`] every second on the current runtime, once per process.
pub fn spawn_summaries() {
    static STARTED: std::sync::Once = std::sync::Once::new();
    STARTED.call_once(|| {
        tokio::spawn(async {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                summarise_due();
            }
        });
    });
}

/// What a summary says held back: "connected 16,000 more times", "12 more refusal lines".
fn what(kind: Kind, n: u64) -> String {
    match kind {
        Kind::Connect => format!("connected {n} more times"),
        Kind::Disconnect => format!("disconnected {n} more times"),
        Kind::Onboarding => format!("{n} more onboarding lines"),
        Kind::Device => format!("{n} more warnings about what it sent (malformed frames, too many requests, caps)"),
        Kind::Refusal => format!("{n} more refusals"),
        Kind::Event => format!("{n} more events"),
    }
}

fn write_summary(kind: Kind, h: &Held<Box<str>, ()>) {
    let secs = h.over.as_secs().max(1);
    let key = h.key.as_deref().unwrap_or("-");
    let what = what(kind, h.count);
    match &h.key {
        Some(_) => tracing::warn!(kind = kind.as_str(), key, suppressed = h.count, "{key}: {what} in the last {secs} s (not logged one by one)"),
        None => tracing::warn!(kind = kind.as_str(), suppressed = h.count, "{what} in the last {secs} s from devices or addresses beyond the {MAX_KEYS} followed one by one (not logged)"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_writes_its_lines_then_counts_and_is_summed_up_once_its_window_is_over() {
        let t0 = Instant::now();
        let mut l: Limiter<&str, u64> = Limiter::new(WINDOW, PER_WINDOW, 8);
        let logged = (0..16_000).filter(|_| l.check(&"dev", t0, |n| *n += 1).0).count();
        assert_eq!(logged, PER_WINDOW as usize);
        assert!(l.due(t0 + WINDOW / 2).is_empty(), "not before the window is over");
        let due = l.due(t0 + WINDOW);
        assert_eq!(due, vec![Held { key: Some("dev"), count: 16_000 - u64::from(PER_WINDOW), over: WINDOW, tally: 16_000 - u64::from(PER_WINDOW) }]);
        assert!(l.is_empty(), "a key whose window is over is forgotten");
        // A key that comes back after its window (before a summary ran) gets its summary first.
        for _ in 0..10 {
            l.check(&"dev", t0 + WINDOW, |_| {});
        }
        let (log, ended) = l.check(&"dev", t0 + WINDOW * 3, |_| {});
        assert!(log);
        assert_eq!(ended.map(|h| h.count), Some(10 - u64::from(PER_WINDOW)));
    }

    /// The attacker: a flood from many addresses. The limiter follows at most its cap of keys;
    /// the rest are counted together, and nothing is left once the windows are over.
    #[test]
    fn a_flood_from_many_addresses_stays_bounded_and_is_counted() {
        let t0 = Instant::now();
        let mut l: Limiter<String, ()> = Limiter::new(WINDOW, 2, 100);
        let mut logged = 0;
        for i in 0..10_000 {
            for _ in 0..3 {
                logged += usize::from(l.check(&format!("10.0.{}.{}", i / 256, i % 256), t0, |()| {}).0);
            }
        }
        assert_eq!(l.len(), 100);
        assert_eq!(logged, 200, "only the keys followed write lines");
        let due = l.due(t0 + WINDOW);
        let total: u64 = due.iter().map(|h| h.count).sum();
        assert_eq!(total + logged as u64, 30_000, "every line is logged or counted");
        let other = due.iter().find(|h| h.key.is_none()).expect("the keys beyond the cap, together");
        assert_eq!(other.count, 9_900 * 3);
        assert!(l.is_empty() && l.overflow.is_none());
    }
}
