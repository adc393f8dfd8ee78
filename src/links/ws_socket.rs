//! A device's WebSocket after the handshake, owned by its link task: messages are read with the
//! hub's own frame decoder ([`crate::wire::ws_frame`]) and frames are written from a bounded
//! queue, both from the one task, so a device costs one task and no buffer while it is idle.
//!
//! The queue holds at most [`OUT_QUEUE_FRAMES`] frames and [`OUT_QUEUE_BYTES`] bytes (one larger
//! frame passes alone), and a queue that makes no progress for [`WRITE_DEADLINE`] means the
//! device stopped reading: the link then disconnects it, saying so, and its callers end at once.

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

impl<S: AsyncRead + AsyncWrite + Unpin> Socket<S> {
    pub(crate) fn new(io: S) -> Self {
        Self::with_write_deadline(io, WRITE_DEADLINE)
    }

    /// A socket whose peer counts as not reading after `deadline` without taking a byte.
    pub(crate) fn with_write_deadline(io: S, deadline: Duration) -> Self {
        Self { io, decoder: Decoder::new(MAX_MESSAGE), out: Outbox::new(deadline) }
    }

    /// Writes what is queued, as far as the peer takes it, then reads: ready once there are
    /// messages, an end, or a failed write.
    pub(crate) fn poll_io(&mut self, cx: &mut Context<'_>) -> Poll<Io> {
        if let Err(why) = self.out.poll_drain(&mut self.io, cx) {
            return Poll::Ready(Io::WriteFailed(why));
        }
        let mut buf = [MaybeUninit::<u8>::uninit(); READ_CHUNK];
        let mut messages = Vec::new();
        for _ in 0..READS_PER_WAKE {
            let mut read = ReadBuf::uninit(&mut buf);
            let end = match Pin::new(&mut self.io).poll_read(cx, &mut read) {
                Poll::Pending if messages.is_empty() => return Poll::Pending,
                Poll::Pending => break,
                Poll::Ready(Err(e)) => Some(format!("websocket error: {e}")),
                Poll::Ready(Ok(())) if read.filled().is_empty() => Some("closed by the device".to_string()),
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

    /// Says goodbye with a close frame (echoing the device's code, if it sent one) and lets the
    /// queue drain for a moment; at once when the device is not reading (nothing would get
    /// through).
    pub(crate) async fn finish(mut self, stalled: bool, code: Option<u16>) {
        if stalled {
            return;
        }
        let _ = self.out.push(ws_frame::close(code));
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
    deadline: Duration,
}

impl Outbox {
    fn new(deadline: Duration) -> Self {
        Self { frames: VecDeque::new(), written: 0, bytes: 0, moved_at: None, unflushed: false, deadline }
    }

    /// Whether a frame of `len` bytes would be queued now.
    pub(crate) fn has_room(&self, len: usize) -> bool {
        self.frames.len() < OUT_QUEUE_FRAMES && (self.bytes == 0 || self.bytes + len <= OUT_QUEUE_BYTES)
    }

    /// Queues a frame, or says why the device cannot take it.
    pub(crate) fn push(&mut self, frame: Vec<u8>) -> Result<(), String> {
        let (before, len) = (self.bytes, frame.len());
        if !self.has_room(len) {
            return Err(if self.frames.len() >= OUT_QUEUE_FRAMES {
                format!("the device stopped reading: {OUT_QUEUE_FRAMES} frames wait to be sent")
            } else {
                format!("the device stopped reading: {before} bytes wait to be sent and {len} more do not fit under the {OUT_QUEUE_BYTES}-byte limit")
            });
        }
        self.moved_at.get_or_insert_with(Instant::now);
        self.bytes += len;
        self.frames.push_back(frame);
        Ok(())
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.frames.is_empty() && !self.unflushed
    }

    /// When the device counts as not reading, if nothing moves before.
    pub(crate) fn stall_deadline(&self) -> Option<Instant> {
        self.moved_at.map(|t| t + self.deadline)
    }

    pub(crate) fn stall_reason(&self) -> String {
        let left = self.frames.front().map_or(0, |f| f.len() - self.written);
        format!("the device stopped reading: a write of {left} bytes did not finish within {} s", self.deadline.as_secs())
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
                        self.bytes -= front.len();
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
