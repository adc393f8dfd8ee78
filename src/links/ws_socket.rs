//! A device's WebSocket after the handshake, owned by its link task: messages are read with the
//! hub's own frame decoder ([`crate::wire::ws_frame`]) and frames are written from a bounded
//! queue, both from the one task, so a device costs one task and no buffer while it is idle.
//!
//! The queue holds at most [`OUT_QUEUE_FRAMES`] frames and [`OUT_QUEUE_BYTES`] bytes (one larger
//! frame passes alone), and a queue that makes no progress for [`WRITE_DEADLINE`] means the
//! device stopped reading: the link then disconnects it, saying so, and its callers end at once.
//!
//! A relay's sockets ([`Socket::relaying`], both sides of a device with an upstream) keep binary
//! payloads, and their queues are bounded in bytes alone, each queued frame counted with
//! [`FRAME_OVERHEAD`] bytes more than its length, so a flood of tiny frames is bounded too; a
//! relay reads one side only while the other side's queue is under [`RELAY_HIGH_WATER`] bytes.

use std::collections::VecDeque;
use std::mem::MaybeUninit;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::time::Instant;

use crate::wire::ws_frame::{self, Decoder, Incoming};

/// Most frames waiting to be written to one device.
pub const OUT_QUEUE_FRAMES: usize = 256;
/// Most bytes waiting to be written to one device (one larger frame passes alone).
pub const OUT_QUEUE_BYTES: usize = 4 << 20;
/// Longest the queue may wait for the device to take a byte before it counts as not reading.
pub const WRITE_DEADLINE: Duration = Duration::from_secs(10);
/// Largest message a device may send, as for every WebSocket the hub reads.
pub const MAX_MESSAGE: usize = 1 << 20;
/// How long a closing link lets the queue drain and says goodbye.
const CLOSE_GRACE: Duration = Duration::from_secs(2);
/// Bytes read at a time, into a buffer on the stack (not kept between reads).
const READ_CHUNK: usize = 8192;
/// Reads one wake-up may do before giving the other branches of the link a turn.
const READS_PER_WAKE: usize = 16;
/// What a queued frame costs beyond its bytes (its vector and the allocator's share), counted in
/// a relay's queue.
pub const FRAME_OVERHEAD: usize = 48;
/// A relay reads a side only while the queue towards the other is below this many bytes: one
/// wake's reads (at most `READS_PER_WAKE` × 8 KiB, and one message the decoder completes, at
/// most [`MAX_MESSAGE`]) then always fit under [`RELAY_QUEUE_BYTES`].
pub const RELAY_HIGH_WATER: usize = 256 << 10;
/// The most a relay's queue towards one peer holds, in bytes with overheads.
pub const RELAY_QUEUE_BYTES: usize = RELAY_HIGH_WATER + (READS_PER_WAKE * READ_CHUNK / 6) * (FRAME_OVERHEAD + 6) + MAX_MESSAGE + FRAME_OVERHEAD;

/// What the socket has for the link.
pub(crate) enum Io {
    /// Whole messages, and why the device can be read no more, if it cannot.
    Read(Vec<Incoming>, Option<String>),
    /// Writing failed: the connection is gone.
    WriteFailed(String),
}

pub(crate) struct Socket<S> {
    io: S,
    decoder: Decoder,
    pub(crate) out: Outbox,
}

/// What a queue may hold, how long it may stand still, and whom it feeds: the same for every
/// socket of a kind, so each socket holds a pointer to one static, not a copy (a copy is 56 bytes
/// more in every device's link task).
pub(crate) struct QueueLimits {
    deadline: Duration,
    /// Caps: frames, and bytes counted with `overhead` per frame (one larger frame passes alone).
    max_frames: usize,
    max_bytes: usize,
    overhead: usize,
    /// Who reads what is queued ("device", "upstream"), for the errors.
    peer: &'static str,
    /// This end is the client (a relay's upstream): its frames are masked.
    client: bool,
}

impl QueueLimits {
    /// A device's queue ([`OUT_QUEUE_FRAMES`], [`OUT_QUEUE_BYTES`]) with this write deadline.
    pub(crate) const fn device(deadline: Duration) -> Self {
        Self { deadline, max_frames: OUT_QUEUE_FRAMES, max_bytes: OUT_QUEUE_BYTES, overhead: 0, peer: "device", client: false }
    }

    /// A relay's queue towards `peer`, bounded in bytes alone ([`RELAY_QUEUE_BYTES`]).
    const fn relaying(peer: &'static str, client: bool) -> Self {
        Self { deadline: WRITE_DEADLINE, max_frames: usize::MAX, max_bytes: RELAY_QUEUE_BYTES, overhead: FRAME_OVERHEAD, peer, client }
    }
}

static DEVICE: QueueLimits = QueueLimits::device(WRITE_DEADLINE);
static RELAY_TO_DEVICE: QueueLimits = QueueLimits::relaying("device", false);
static RELAY_TO_UPSTREAM: QueueLimits = QueueLimits::relaying("upstream", true);

impl<S: AsyncRead + AsyncWrite + Unpin> Socket<S> {
    pub(crate) fn new(io: S) -> Self {
        Self::with_limits(io, &DEVICE)
    }

    /// A socket whose queue has these limits (e.g. a longer write deadline).
    pub(crate) fn with_limits(io: S, limits: &'static QueueLimits) -> Self {
        Self { io, decoder: Decoder::new(MAX_MESSAGE), out: Outbox::new(limits) }
    }

    /// One side of a relay: binary payloads kept, a server's frames read (and this end's masked)
    /// when `from_server` (the upstream; else the device), and a queue bounded in bytes
    /// ([`RELAY_QUEUE_BYTES`]).
    pub(crate) fn relaying(io: S, from_server: bool) -> Self {
        let limits = if from_server { &RELAY_TO_UPSTREAM } else { &RELAY_TO_DEVICE };
        Self { io, decoder: Decoder::relaying(MAX_MESSAGE, from_server), out: Outbox::new(limits) }
    }

    /// A frame as this end writes it (masked when it is the client).
    pub(crate) fn frame(&self, kind: ws_frame::Kind, payload: &[u8]) -> Vec<u8> {
        if self.out.limits.client { ws_frame::client_frame(kind, payload) } else { ws_frame::server_frame(kind, payload) }
    }

    /// Writes what is queued, as far as the peer takes it, then reads: ready once there are
    /// messages, an end, or a failed write.
    pub(crate) fn poll_io(&mut self, cx: &mut Context<'_>) -> Poll<Io> {
        self.poll_io_if(cx, true)
    }

    /// As [`Self::poll_io`], reading only when `may_read` (a relay holds a side back while the
    /// queue towards the other side is full: that side's progress wakes the task).
    pub(crate) fn poll_io_if(&mut self, cx: &mut Context<'_>, may_read: bool) -> Poll<Io> {
        if let Err(why) = self.out.poll_drain(&mut self.io, cx) {
            return Poll::Ready(Io::WriteFailed(why));
        }
        if !may_read {
            return Poll::Pending;
        }
        let mut buf = [MaybeUninit::<u8>::uninit(); READ_CHUNK];
        let mut messages = Vec::new();
        for _ in 0..READS_PER_WAKE {
            let mut read = ReadBuf::uninit(&mut buf);
            let end = match Pin::new(&mut self.io).poll_read(cx, &mut read) {
                Poll::Pending if messages.is_empty() => return Poll::Pending,
                Poll::Pending => break,
                Poll::Ready(Err(e)) => Some(format!("websocket error: {e}")),
                Poll::Ready(Ok(())) if read.filled().is_empty() => Some(format!("closed by the {}", self.out.limits.peer)),
                Poll::Ready(Ok(())) => self.decoder.feed(read.filled(), &mut messages).err().map(|e| format!("websocket error: {e}")),
            };
            if end.is_some() {
                return Poll::Ready(Io::Read(messages, end));
            }
            if !messages.is_empty() {
                break;
            }
        }
        if messages.is_empty() {
            // Read on at the next turn, without waiting for the socket to wake us.
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        Poll::Ready(Io::Read(messages, None))
    }

    /// Writes what is queued, without reading, until a frame of `len` bytes fits in the queue;
    /// an `Err` says the connection is gone. (While it does not fit, the queue is not empty, so
    /// a write is pending and the socket wakes the caller when it moves.)
    pub(crate) fn poll_room(&mut self, cx: &mut Context<'_>, len: usize) -> Poll<Result<(), String>> {
        if let Err(why) = self.out.poll_drain(&mut self.io, cx) {
            return Poll::Ready(Err(why));
        }
        if self.out.has_room(len) { Poll::Ready(Ok(())) } else { Poll::Pending }
    }

    /// Writes what is queued, without reading, until the queue holds at most `level` bytes (a
    /// streamed answer makes its next page then); an `Err` says the connection is gone.
    pub(crate) fn poll_drained_to(&mut self, cx: &mut Context<'_>, level: usize) -> Poll<Result<(), String>> {
        if let Err(why) = self.out.poll_drain(&mut self.io, cx) {
            return Poll::Ready(Err(why));
        }
        if self.out.queued_bytes() <= level { Poll::Ready(Ok(())) } else { Poll::Pending }
    }

    /// Says goodbye with a close frame (echoing the device's code, if it sent one) and lets the
    /// queue drain for a moment; at once when the device is not reading (nothing would get
    /// through).
    pub(crate) async fn finish(mut self, stalled: bool, code: Option<u16>) {
        if stalled {
            return;
        }
        let mut payload = Vec::new();
        if let Some(c) = code {
            payload.extend_from_slice(&c.to_be_bytes());
        }
        let goodbye = self.frame(ws_frame::Kind::Close, &payload);
        let _ = self.out.push(goodbye);
        let Self { io, out, .. } = &mut self;
        let drained = std::future::poll_fn(|cx| match out.poll_drain(io, cx) {
            Ok(()) if out.is_empty() => Poll::Ready(()),
            Ok(()) => Poll::Pending,
            Err(_) => Poll::Ready(()),
        });
        if tokio::time::timeout(CLOSE_GRACE, drained).await.is_ok() {
            let _ = tokio::time::timeout(CLOSE_GRACE, io.shutdown()).await;
        }
    }
}

/// Frames waiting to be written, with the caps and the deadline that tell a device that does not
/// read.
pub(crate) struct Outbox {
    frames: VecDeque<Vec<u8>>,
    /// Bytes of the front frame already written.
    written: usize,
    bytes: usize,
    /// When the queue last moved (or was started), while it holds anything.
    moved_at: Option<Instant>,
    unflushed: bool,
    limits: &'static QueueLimits,
}

impl Outbox {
    fn new(limits: &'static QueueLimits) -> Self {
        Self { frames: VecDeque::new(), written: 0, bytes: 0, moved_at: None, unflushed: false, limits }
    }

    /// Whether a frame of `len` bytes would be queued now.
    pub(crate) fn has_room(&self, len: usize) -> bool {
        let l = self.limits;
        self.frames.len() < l.max_frames && (self.bytes == 0 || self.bytes + len + l.overhead <= l.max_bytes)
    }

    /// Bytes queued (with the per-frame overheads a relay counts).
    pub(crate) fn queued_bytes(&self) -> usize {
        self.bytes
    }

    /// Queues a frame, or says why the device cannot take it.
    pub(crate) fn push(&mut self, frame: Vec<u8>) -> Result<(), String> {
        let (before, len, peer) = (self.bytes, frame.len(), self.limits.peer);
        if !self.has_room(len) {
            return Err(if self.frames.len() >= self.limits.max_frames {
                format!("the {peer} stopped reading: {} frames wait to be sent", self.limits.max_frames)
            } else {
                format!("the {peer} stopped reading: {before} bytes wait to be sent and {len} more do not fit under the {}-byte limit", self.limits.max_bytes)
            });
        }
        self.moved_at.get_or_insert_with(Instant::now);
        self.bytes += len + self.limits.overhead;
        self.frames.push_back(frame);
        Ok(())
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.frames.is_empty() && !self.unflushed
    }

    /// When the device counts as not reading, if nothing moves before.
    pub(crate) fn stall_deadline(&self) -> Option<Instant> {
        self.moved_at.map(|t| t + self.limits.deadline)
    }

    pub(crate) fn stall_reason(&self) -> String {
        let left = self.frames.front().map_or(0, |f| f.len() - self.written);
        format!("the {} stopped reading: a write of {left} bytes did not finish within {} s", self.limits.peer, self.limits.deadline.as_secs())
    }

    /// Writes frames until the socket takes no more; an `Err` says the connection is gone.
    fn poll_drain<S: AsyncWrite + Unpin>(&mut self, io: &mut S, cx: &mut Context<'_>) -> Result<(), String> {
        while let Some(front) = self.frames.front() {
            match Pin::new(&mut *io).poll_write(cx, &front[self.written..]) {
                Poll::Ready(Ok(0)) => {
                    return Err("websocket error: the connection closed while a frame was written".to_string());
                }
                Poll::Ready(Ok(n)) => {
                    self.written += n;
                    self.unflushed = true;
                    self.moved_at = Some(Instant::now());
                    if self.written == front.len() {
                        self.bytes -= front.len() + self.limits.overhead;
                        self.written = 0;
                        self.frames.pop_front();
                    }
                }
                Poll::Ready(Err(e)) => return Err(format!("websocket error: {e}")),
                Poll::Pending => return Ok(()),
            }
        }
        self.moved_at = None;
        // The queue is given back once written: an idle device holds no buffer.
        if self.frames.capacity() > 0 {
            self.frames = VecDeque::new();
        }
        if self.unflushed {
            match Pin::new(&mut *io).poll_flush(cx) {
                Poll::Ready(Ok(())) => self.unflushed = false,
                Poll::Ready(Err(e)) => return Err(format!("websocket error: {e}")),
                Poll::Pending => {}
            }
        }
        Ok(())
    }
}
