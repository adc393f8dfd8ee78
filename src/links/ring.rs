//! The hub's event ring: every device event, shared by whoever watches (the event log, the
//! dashboard's timeline and traffic streams, the control API's `watch`, the MCP notifier).
//!
//! Rules it enforces:
//! - **Bounded in count and in bytes**, whatever its readers do: at most `max_events` events and
//!   `max_bytes` of their weight ([`DeviceEvent::weight`], the length of their JSON). A reader
//!   that falls behind never holds more: the oldest events go, and that reader's next `recv`
//!   says how many it missed (`Lagged(n)`, tokio's own error), so every stream can tell its
//!   viewer "dropped n".
//! - **Nothing is kept that nobody will read**: an event read by every reader that existed when
//!   it was sent is dropped at once (as tokio's broadcast does), and a reader that goes away
//!   releases what only it still had to read. With no reader, `send` keeps nothing.
//! - The lock is held only to move pointers; an event is dropped outside it.
//!
//! The readers' API is tokio's broadcast's (`recv`, `try_recv`), with its error
//! types, so a watcher reads it as it read the channel it replaces.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

pub use tokio::sync::broadcast::error::{RecvError, TryRecvError};

use super::event::DeviceEvent;

/// One event in the ring, with how many readers have yet to read it.
struct Slot {
    event: Option<Arc<DeviceEvent>>,
    weight: usize,
    unread: usize,
}

struct State {
    slots: VecDeque<Slot>,
    /// The sequence number of `slots[0]`.
    head: u64,
    /// Weight of the events held.
    bytes: usize,
    receivers: usize,
    senders: usize,
}

struct Shared {
    state: Mutex<State>,
    notify: tokio::sync::Notify,
    max_events: usize,
    max_bytes: usize,
    /// The most bytes held at once so far.
    peak: AtomicUsize,
}

impl Shared {
    // Nothing that can panic runs under this lock; a poisoned one is still consistent.
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl State {
    fn tail(&self) -> u64 {
        self.head + self.slots.len() as u64
    }

    /// Drops the front slots every reader has read; returns their events (to drop unlocked).
    fn pop_read(&mut self, out: &mut Vec<Arc<DeviceEvent>>) {
        while self.slots.front().is_some_and(|s| s.unread == 0) {
            let slot = self.slots.pop_front().expect("a front slot");
            self.head += 1;
            if let Some(e) = slot.event {
                self.bytes -= slot.weight;
                out.push(e);
            }
        }
    }
}

/// Where links publish their events. Cloned into every link.
pub struct Sender {
    shared: Arc<Shared>,
}

/// One reader: its position in the ring.
pub struct Receiver {
    shared: Arc<Shared>,
    next: u64,
}

/// A ring of at most `max_events` events and `max_bytes` of their weight, and its first reader.
pub fn channel(max_events: usize, max_bytes: usize) -> (Sender, Receiver) {
    let state = State { slots: VecDeque::new(), head: 0, bytes: 0, receivers: 1, senders: 1 };
    let shared = Arc::new(Shared { state: Mutex::new(state), notify: tokio::sync::Notify::new(), max_events: max_events.max(1), max_bytes, peak: AtomicUsize::new(0) });
    (Sender { shared: shared.clone() }, Receiver { shared, next: 0 })
}

impl Sender {
    /// Publishes an event to every reader; how many readers there are (none: it was not kept).
    pub fn send(&self, event: Arc<DeviceEvent>) -> usize {
        let weight = event.weight();
        let mut dropped = Vec::new();
        let readers = {
            let mut s = self.shared.lock();
            if s.receivers == 0 {
                return 0;
            }
            let unread = s.receivers;
            s.slots.push_back(Slot { event: Some(event), weight, unread });
            s.bytes += weight;
            // Over a bound: the oldest go, read or not (their readers are told they lagged). The
            // newest event stays even if it alone is over the byte bound.
            while s.slots.len() > self.shared.max_events || (s.bytes > self.shared.max_bytes && s.slots.len() > 1) {
                let slot = s.slots.pop_front().expect("a front slot");
                s.head += 1;
                if let Some(e) = slot.event {
                    s.bytes -= slot.weight;
                    dropped.push(e);
                }
            }
            self.shared.peak.fetch_max(s.bytes, Ordering::Relaxed);
            unread
        };
        self.shared.notify.notify_waiters();
        drop(dropped);
        readers
    }

    /// A new reader, which sees the events sent from now on.
    pub fn subscribe(&self) -> Receiver {
        let mut s = self.shared.lock();
        s.receivers += 1;
        Receiver { shared: self.shared.clone(), next: s.tail() }
    }

    /// Bytes of events held now (what readers have yet to read).
    pub fn held_bytes(&self) -> usize {
        self.shared.lock().bytes
    }

    /// Events held now.
    pub fn held_events(&self) -> usize {
        self.shared.lock().slots.len()
    }

    /// The most bytes held at once since the ring was made.
    pub fn peak(&self) -> usize {
        self.shared.peak.load(Ordering::Relaxed)
    }

    /// The ring's bounds: events and bytes.
    pub fn bounds(&self) -> (usize, usize) {
        (self.shared.max_events, self.shared.max_bytes)
    }
}

impl Clone for Sender {
    fn clone(&self) -> Self {
        self.shared.lock().senders += 1;
        Self { shared: self.shared.clone() }
    }
}

impl Drop for Sender {
    fn drop(&mut self) {
        let last = {
            let mut s = self.shared.lock();
            s.senders -= 1;
            s.senders == 0
        };
        if last {
            self.shared.notify.notify_waiters();
        }
    }
}

impl Receiver {
    /// The next event, `Lagged(n)` when `n` events went before this reader read them, or
    /// `Empty`/`Closed`.
    pub fn try_recv(&mut self) -> Result<Arc<DeviceEvent>, TryRecvError> {
        let mut read = Vec::new();
        let got = {
            let mut s = self.shared.lock();
            if self.next < s.head {
                let missed = s.head - self.next;
                self.next = s.head;
                return Err(TryRecvError::Lagged(missed));
            }
            if self.next >= s.tail() {
                return Err(if s.senders == 0 { TryRecvError::Closed } else { TryRecvError::Empty });
            }
            let at = (self.next - s.head) as usize;
            let slot = &mut s.slots[at];
            slot.unread -= 1;
            let event = if slot.unread == 0 {
                let e = slot.event.take();
                let w = slot.weight;
                if e.is_some() {
                    s.bytes -= w;
                }
                e
            } else {
                slot.event.clone()
            };
            self.next += 1;
            s.pop_read(&mut read);
            event
        };
        drop(read);
        // A slot is emptied only when its last reader read it, so this reader found it full.
        got.ok_or(TryRecvError::Empty)
    }

    /// Waits for the next event (see [`Self::try_recv`]).
    pub async fn recv(&mut self) -> Result<Arc<DeviceEvent>, RecvError> {
        let shared = self.shared.clone();
        loop {
            let notified = shared.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            match self.try_recv() {
                Ok(e) => return Ok(e),
                Err(TryRecvError::Lagged(n)) => return Err(RecvError::Lagged(n)),
                Err(TryRecvError::Closed) => return Err(RecvError::Closed),
                Err(TryRecvError::Empty) => notified.await,
            }
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let mut released = Vec::new();
        {
            let mut s = self.shared.lock();
            s.receivers -= 1;
            let from = self.next.max(s.head);
            let (head, tail) = (s.head, s.tail());
            let mut freed = 0;
            for seq in from..tail {
                let slot = &mut s.slots[(seq - head) as usize];
                slot.unread -= 1;
                if slot.unread == 0
                    && let Some(e) = slot.event.take()
                {
                    freed += slot.weight;
                    released.push(e);
                }
            }
            s.bytes -= freed;
            s.pop_read(&mut released);
        }
        drop(released);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::links::event::{LinkEvent, Lifecycle};

    fn event(reason: &str) -> Arc<DeviceEvent> {
        Arc::new(DeviceEvent { device_id: "d".into(), event: LinkEvent::Link(Lifecycle::Disconnected { reason: reason.into() }) })
    }

    fn reason(e: &DeviceEvent) -> &str {
        match &e.event {
            LinkEvent::Link(Lifecycle::Disconnected { reason }) => reason,
            _ => "",
        }
    }

    #[test]
    fn readers_get_every_event_and_nothing_stays_once_all_have_read() {
        let (tx, mut a) = channel(16, 1 << 20);
        let mut b = tx.subscribe();
        for i in 0..3 {
            assert_eq!(tx.send(event(&i.to_string())), 2);
        }
        assert!(tx.held_bytes() > 0);
        for i in 0..3 {
            assert_eq!(reason(&a.try_recv().unwrap()), i.to_string());
        }
        assert_eq!(tx.held_events(), 3, "b has not read them");
        for i in 0..3 {
            assert_eq!(reason(&b.try_recv().unwrap()), i.to_string());
        }
        assert_eq!((tx.held_events(), tx.held_bytes()), (0, 0));
        assert!(matches!(a.try_recv(), Err(TryRecvError::Empty)));
    }

    /// The attacker: a reader that never reads while big events keep coming. The ring stays
    /// under its byte bound, the reader is told how many it missed, and the events it alone held
    /// go when it goes.
    #[test]
    fn a_reader_that_falls_behind_holds_at_most_the_bound_and_learns_what_it_missed() {
        let big = "x".repeat(10_000);
        let (tx, mut slow) = channel(1000, 50_000);
        let mut fast = tx.subscribe();
        for _ in 0..100 {
            tx.send(event(&big));
            assert!(fast.try_recv().is_ok());
            assert!(tx.held_bytes() <= 50_000, "{}", tx.held_bytes());
        }
        assert!(tx.peak() <= 50_000);
        let Err(TryRecvError::Lagged(n)) = slow.try_recv() else { panic!("the slow reader must be told it lagged") };
        let held = tx.held_events() as u64;
        assert_eq!(n + held, 100, "missed + still held = sent");
        drop(slow);
        assert_eq!((tx.held_events(), tx.held_bytes()), (0, 0), "what only the slow reader held is released");
    }

    #[test]
    fn with_no_reader_nothing_is_kept_and_a_closed_ring_says_so() {
        let (tx, rx) = channel(4, 1 << 20);
        drop(rx);
        assert_eq!(tx.send(event("x")), 0);
        assert_eq!(tx.held_events(), 0);
        let mut r = tx.subscribe();
        drop(tx);
        assert!(matches!(r.try_recv(), Err(TryRecvError::Closed)));
    }

    #[tokio::test]
    async fn recv_waits_for_the_next_event() {
        let (tx, mut rx) = channel(4, 1 << 20);
        let waiter = tokio::spawn(async move { rx.recv().await.map(|e| reason(&e).to_string()) });
        tokio::task::yield_now().await;
        tx.send(event("late"));
        assert_eq!(waiter.await.unwrap().unwrap(), "late");
        let mut r2 = tx.subscribe();
        drop(tx);
        assert!(matches!(r2.recv().await, Err(RecvError::Closed)));
    }
}
