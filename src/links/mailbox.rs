//! A device link's command queue: its handles send, the link's one task receives.
//!
//! It does for this one use what tokio's bounded `mpsc` does, in a fraction of the memory a hub
//! holding thousands of devices pays per device: tokio's channel is about 800 bytes before a
//! command is sent (cache-padded counters and a first block of 32 slots), this is a lock around a
//! queue that holds no buffer while empty, a waker for the receiver and a `Notify` for senders.
//! Receiving is a poll ([`Receiver::recv`] is a `poll_fn`, 16 bytes): a link's `select!` holds
//! it for the device's lifetime, and a `Notify` wait would be 64 more.
//!
//! - [`Sender::send`] waits for room; [`Sender::try_send`] says `Full` instead.
//! - [`Receiver::recv`] returns `None` once every sender is gone and the queue is empty.
//! - Once the receiver is gone, sends fail (waiting ones included), the queued items are dropped,
//!   and [`Sender::is_closed`] says so.
//!
//! The lock is held only to move an item in or out; nothing that can panic runs under it.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};

use futures_util::task::AtomicWaker;
use tokio::sync::Notify;

struct Shared<T> {
    state: Mutex<State<T>>,
    capacity: usize,
    /// Wakes the receiver: an item arrived, or the last sender went.
    arrived: AtomicWaker,
    /// Wakes senders waiting for room, or for the news that the receiver is gone.
    room: Notify,
    senders: AtomicUsize,
}

struct State<T> {
    queue: VecDeque<T>,
    closed: bool,
}

impl<T> Shared<T> {
    fn lock(&self) -> MutexGuard<'_, State<T>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A queue of at most `capacity` items.
pub(crate) fn channel<T>(capacity: usize) -> (Sender<T>, Receiver<T>) {
    let shared = Arc::new(Shared {
        state: Mutex::new(State { queue: VecDeque::new(), closed: false }),
        capacity,
        arrived: AtomicWaker::new(),
        room: Notify::new(),
        senders: AtomicUsize::new(1),
    });
    (Sender { shared: shared.clone() }, Receiver { shared })
}

/// Why an item was not queued; it comes back.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum TrySendError<T> {
    Full(T),
    Closed(T),
}

pub struct Sender<T> {
    shared: Arc<Shared<T>>,
}

impl<T> Sender<T> {
    /// Queues `item` if there is room and the receiver is there.
    pub(crate) fn try_send(&self, item: T) -> Result<(), TrySendError<T>> {
        let mut state = self.shared.lock();
        if state.closed {
            return Err(TrySendError::Closed(item));
        }
        if state.queue.len() >= self.shared.capacity {
            return Err(TrySendError::Full(item));
        }
        state.queue.push_back(item);
        drop(state);
        self.shared.arrived.wake();
        Ok(())
    }

    /// Queues `item`, waiting for room; gives it back if the receiver is gone.
    pub(crate) async fn send(&self, mut item: T) -> Result<(), T> {
        loop {
            // Registered before looking, so room made after the look wakes this wait.
            let room = self.shared.room.notified();
            let mut room = std::pin::pin!(room);
            room.as_mut().enable();
            match self.try_send(item) {
                Ok(()) => return Ok(()),
                Err(TrySendError::Closed(back)) => return Err(back),
                Err(TrySendError::Full(back)) => item = back,
            }
            room.await;
        }
    }

    /// Whether the receiver is gone.
    pub(crate) fn is_closed(&self) -> bool {
        self.shared.lock().closed
    }
}

impl<T> Clone for Sender<T> {
    fn clone(&self) -> Self {
        self.shared.senders.fetch_add(1, Ordering::Relaxed);
        Self { shared: self.shared.clone() }
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        if self.shared.senders.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.shared.arrived.wake();
        }
    }
}

pub struct Receiver<T> {
    shared: Arc<Shared<T>>,
}

impl<T> Receiver<T> {
    /// The next item, or `None` once every sender is gone and nothing is queued. Cancel-safe: an
    /// item is only taken when this returns it.
    pub(crate) fn recv(&mut self) -> impl Future<Output = Option<T>> + '_ {
        std::future::poll_fn(|cx| self.poll_recv(cx))
    }

    /// [`Self::recv`] as a poll: registered before the second look, so an item or the last
    /// sender's going that comes between the looks wakes it.
    pub(crate) fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<T>> {
        if let Some(item) = self.look() {
            return Poll::Ready(item);
        }
        self.shared.arrived.register(cx.waker());
        match self.look() {
            Some(item) => Poll::Ready(item),
            None => Poll::Pending,
        }
    }

    /// An item, or `Some(None)` once every sender is gone and nothing is queued.
    fn look(&self) -> Option<Option<T>> {
        if let Some(item) = self.take() {
            self.shared.room.notify_one();
            return Some(Some(item));
        }
        (self.shared.senders.load(Ordering::Acquire) == 0).then_some(None)
    }
}

impl<T> Receiver<T> {
    fn take(&self) -> Option<T> {
        let mut state = self.shared.lock();
        let item = state.queue.pop_front();
        if state.queue.is_empty() && state.queue.capacity() > 0 {
            // An idle device keeps no buffer.
            state.queue = VecDeque::new();
        }
        item
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        let left = {
            let mut state = self.shared.lock();
            state.closed = true;
            std::mem::take(&mut state.queue)
        };
        // Dropped outside the lock: an item's drop may do anything.
        drop(left);
        self.shared.room.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    const LIMIT: Duration = Duration::from_secs(5);

    #[tokio::test]
    async fn items_arrive_in_order_and_a_full_queue_says_so() {
        let (tx, mut rx) = channel(2);
        tx.try_send(1).unwrap();
        tx.send(2).await.unwrap();
        assert_eq!(tx.try_send(3), Err(TrySendError::Full(3)));
        assert_eq!(rx.recv().await, Some(1));
        tx.try_send(3).unwrap();
        assert_eq!((rx.recv().await, rx.recv().await), (Some(2), Some(3)));
    }

    #[tokio::test]
    async fn a_send_waits_for_room_and_completes_when_an_item_is_taken() {
        let (tx, mut rx) = channel(1);
        tx.try_send(1).unwrap();
        let waiting = tokio::spawn({
            let tx = tx.clone();
            async move { tx.send(2).await }
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        assert_eq!(rx.recv().await, Some(1));
        tokio::time::timeout(LIMIT, waiting).await.expect("the send got room").unwrap().unwrap();
        assert_eq!(rx.recv().await, Some(2));
    }

    #[tokio::test]
    async fn recv_ends_once_every_sender_is_gone_and_the_queue_is_empty() {
        let (tx, mut rx) = channel(4);
        let other = tx.clone();
        tx.try_send(1).unwrap();
        drop(tx);
        let waiting = tokio::spawn(async move { (rx.recv().await, rx.recv().await) });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "one sender is left");
        drop(other);
        assert_eq!(tokio::time::timeout(LIMIT, waiting).await.expect("recv ended").unwrap(), (Some(1), None));
    }

    #[tokio::test]
    async fn without_the_receiver_sends_fail_waiting_ones_too_and_queued_items_are_dropped() {
        let (tx, rx) = channel(1);
        let (reply, replied) = tokio::sync::oneshot::channel::<()>();
        tx.try_send(Some(reply)).unwrap();
        let waiting = tokio::spawn({
            let tx = tx.clone();
            async move { tx.send(None).await }
        });
        tokio::task::yield_now().await;
        assert!(!tx.is_closed());
        drop(rx);
        assert!(tx.is_closed());
        assert!(matches!(tokio::time::timeout(LIMIT, waiting).await.expect("the waiting send ended").unwrap(), Err(None)));
        assert!(replied.await.is_err(), "the queued item was dropped");
        assert!(matches!(tx.try_send(None), Err(TrySendError::Closed(None))));
    }

    /// Many senders on a small queue, on several threads: every item arrives exactly once.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn every_item_of_many_senders_arrives_once() {
        let (tx, mut rx) = channel(3);
        let senders: Vec<_> = (0..8u32)
            .map(|s| {
                let tx = tx.clone();
                tokio::spawn(async move {
                    for i in 0..500u32 {
                        tx.send(s * 1000 + i).await.unwrap();
                    }
                })
            })
            .collect();
        drop(tx);
        let mut got = Vec::new();
        while let Some(v) = tokio::time::timeout(LIMIT, rx.recv()).await.expect("no item lost or stuck") {
            got.push(v);
        }
        for s in senders {
            s.await.unwrap();
        }
        got.sort_unstable();
        let want: Vec<u32> = (0..8u32).flat_map(|s| (0..500).map(move |i| s * 1000 + i)).collect();
        assert_eq!(got, want);
    }
}
