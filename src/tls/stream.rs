//! The server side of a TLS connection that holds no buffer while it is idle: rustls's unbuffered
//! connection, with the buffers kept here and sized to what is in flight.
//!
//! rustls's buffered connection (what `tokio-rustls` drives) keeps a 4 KiB read buffer for each
//! connection for as long as it lives, and the queues beside it; over a fleet of idle devices
//! that was most of what a `wss://` device cost beyond a `ws://` one (issue 46). Here:
//!
//! Rules it enforces:
//! - **A buffer exists only while it holds bytes**: ciphertext received but not yet a whole
//!   record, plaintext decrypted but not yet read, ciphertext encrypted but not yet written. Each
//!   is freed, not only emptied, once drained: an idle connection holds rustls's state and
//!   nothing more.
//! - **Bounded by what is in flight**: the socket is read only when nothing decrypted waits to be
//!   read, [`READ_CHUNK`] bytes at a time, so what a peer makes the hub hold is one partial record
//!   (rustls refuses a record over 16 KiB + 2 KiB) and the plaintext of one read; a write
//!   encrypts at most [`WRITE_CHUNK`] bytes (one record) before what it made is written out.
//! - The handshake is rustls's own, with the same [`rustls::ServerConfig`] (versions, suites,
//!   session tickets, ALPN); a peer that does not speak TLS ends it with rustls's error, wrapped
//!   as `tokio-rustls` wraps it ([`std::io::ErrorKind::InvalidData`]), so callers tell it apart
//!   the same way.
//! - A peer's `close_notify`, or the socket's end, reads as the end of the stream; shutting down
//!   sends `close_notify` once, then shuts the socket's writing side.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use rustls::ServerConfig;
use rustls::server::{ServerConnectionData, UnbufferedServerConnection};
use rustls::unbuffered::{ConnectionState, EncodeError, EncryptError, InsufficientSizeError, WriteTraffic};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Bytes read from the socket at a time (into the stack, then kept only while a record is
/// incomplete).
pub const READ_CHUNK: usize = 8192;
/// Most plaintext one write encrypts: one TLS record.
pub const WRITE_CHUNK: usize = 16 * 1024;

/// A TLS server connection over `IO` (see the module's rules).
pub struct ServerStream<IO> {
    io: IO,
    conn: UnbufferedServerConnection,
    /// Ciphertext received and not yet taken by rustls (an incomplete record).
    incoming: Vec<u8>,
    /// Plaintext decrypted and not yet read, from `plain_at` on.
    plain: Vec<u8>,
    plain_at: usize,
    /// Ciphertext to write, from `out_at` on.
    outgoing: Vec<u8>,
    out_at: usize,
    /// The peer said `close_notify`, or its socket ended: reads return the end.
    read_ended: bool,
    /// `close_notify` was queued (once).
    close_sent: bool,
}

/// Where the connection stands once it has done all it can without the socket.
#[derive(Debug, PartialEq, Eq)]
enum Stand {
    /// Application data may be written; more needs bytes from the peer.
    Traffic,
    /// The handshake needs bytes from the peer.
    Blocked,
    /// The peer closed its side (`close_notify`).
    PeerClosed,
    /// Both sides closed.
    Closed,
}

/// What a step does once application data may be written: encrypt into the buffer it is given.
type Encrypt<'a> = &'a mut dyn FnMut(&mut WriteTraffic<'_, ServerConnectionData>, &mut Vec<u8>) -> io::Result<()>;

fn invalid(e: rustls::Error) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
}

/// Appends what `encode` writes to `out`, giving it the room it says it needs.
fn append<E>(out: &mut Vec<u8>, guess: usize, mut encode: impl FnMut(&mut [u8]) -> Result<usize, E>, needs: impl Fn(&E) -> Option<usize>) -> Result<(), E> {
    let start = out.len();
    out.resize(start + guess, 0);
    let written = match encode(&mut out[start..]) {
        Ok(n) => n,
        Err(e) => match needs(&e) {
            Some(required) => {
                out.resize(start + required, 0);
                match encode(&mut out[start..]) {
                    Ok(n) => n,
                    Err(e) => {
                        out.truncate(start);
                        return Err(e);
                    }
                }
            }
            None => {
                out.truncate(start);
                return Err(e);
            }
        },
    };
    out.truncate(start + written);
    Ok(())
}

fn encode_needs(e: &EncodeError) -> Option<usize> {
    match e {
        EncodeError::InsufficientSize(InsufficientSizeError { required_size }) => Some(*required_size),
        _ => None,
    }
}

fn encrypt_needs(e: &EncryptError) -> Option<usize> {
    match e {
        EncryptError::InsufficientSize(InsufficientSizeError { required_size }) => Some(*required_size),
        _ => None,
    }
}

fn encrypt_error(e: EncryptError) -> io::Error {
    io::Error::other(format!("TLS: {e}"))
}

/// Writes `out[*at..]` to `io` until it is all written (then frees it) or the socket is full.
fn poll_write_out<IO: AsyncWrite + Unpin>(io: &mut IO, out: &mut Vec<u8>, at: &mut usize, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
    while *at < out.len() {
        match ready!(Pin::new(&mut *io).poll_write(cx, &out[*at..]))? {
            0 => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
            n => *at += n,
        }
    }
    *out = Vec::new();
    *at = 0;
    Poll::Ready(Ok(()))
}

impl<IO: AsyncRead + AsyncWrite + Unpin> ServerStream<IO> {
    /// A connection that has not begun its handshake.
    pub fn new(io: IO, config: Arc<ServerConfig>) -> Result<Self, rustls::Error> {
        let conn = UnbufferedServerConnection::new(config)?;
        Ok(Self { io, conn, incoming: Vec::new(), plain: Vec::new(), plain_at: 0, outgoing: Vec::new(), out_at: 0, read_ended: false, close_sent: false })
    }

    /// The socket under the TLS.
    pub fn get_ref(&self) -> &IO {
        &self.io
    }

    /// Bytes of buffer it holds now: 0 while the connection is idle.
    pub fn buffered(&self) -> usize {
        self.incoming.capacity() + self.plain.capacity() + self.outgoing.capacity()
    }

    /// Runs the handshake to its end (the last flight written).
    pub fn poll_handshake(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        loop {
            let stand = ready!(self.poll_process(cx, None))?;
            if !self.conn.is_handshaking() {
                return poll_write_out(&mut self.io, &mut self.outgoing, &mut self.out_at, cx);
            }
            match stand {
                Stand::Traffic | Stand::Blocked => {
                    if ready!(self.poll_fill(cx))? == 0 {
                        return Poll::Ready(Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the peer closed the connection during the TLS handshake")));
                    }
                }
                Stand::PeerClosed | Stand::Closed => return Poll::Ready(Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the peer closed the connection during the TLS handshake"))),
            }
        }
    }

    /// Reads one chunk from the socket into `incoming`: the number of bytes (0: the socket ended).
    fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        let mut chunk = [0u8; READ_CHUNK];
        let mut buf = ReadBuf::new(&mut chunk);
        ready!(Pin::new(&mut self.io).poll_read(cx, &mut buf))?;
        let filled = buf.filled();
        self.incoming.extend_from_slice(filled);
        Poll::Ready(Ok(filled.len()))
    }

    /// Does all the connection can without reading the socket: handshake records encoded and
    /// written, received records decrypted into `plain`, and `encrypt` (when given, once
    /// application data may be sent) encrypted into `outgoing`. Pending only while a handshake
    /// flight waits for the socket to take it.
    fn poll_process(&mut self, cx: &mut Context<'_>, mut encrypt: Option<Encrypt<'_>>) -> Poll<io::Result<Stand>> {
        loop {
            let status = self.conn.process_tls_records(&mut self.incoming);
            let discard = status.discard;
            let mut state = match status.state {
                Ok(state) => state,
                Err(e) => return Poll::Ready(Err(invalid(e))),
            };
            let stand = match &mut state {
                ConnectionState::ReadTraffic(read) => {
                    while let Some(record) = read.next_record() {
                        let record = record.map_err(invalid)?;
                        self.plain.extend_from_slice(record.payload);
                    }
                    None
                }
                ConnectionState::ReadEarlyData(read) => {
                    while let Some(record) = read.next_record() {
                        let record = record.map_err(invalid)?;
                        self.plain.extend_from_slice(record.payload);
                    }
                    None
                }
                ConnectionState::EncodeTlsData(encode) => {
                    append(&mut self.outgoing, 0, |buf| encode.encode(buf), encode_needs).map_err(|e| io::Error::other(format!("TLS: {e}")))?;
                    None
                }
                ConnectionState::TransmitTlsData(_) => None,
                ConnectionState::BlockedHandshake => Some(Stand::Blocked),
                ConnectionState::WriteTraffic(write) => {
                    if let Some(encrypt) = encrypt.take() {
                        encrypt(write, &mut self.outgoing)?;
                    }
                    Some(Stand::Traffic)
                }
                ConnectionState::PeerClosed => Some(Stand::PeerClosed),
                ConnectionState::Closed => Some(Stand::Closed),
                _ => return Poll::Ready(Err(io::Error::other("TLS: a connection state this hub does not handle"))),
            };
            if let ConnectionState::TransmitTlsData(transmit) = state {
                // Not done until the socket took it all: dropped undone, the state comes again.
                if let Poll::Ready(r) = poll_write_out(&mut self.io, &mut self.outgoing, &mut self.out_at, cx) {
                    r?;
                    transmit.done();
                } else {
                    self.discard(discard);
                    return Poll::Pending;
                }
            } else {
                drop(state);
            }
            self.discard(discard);
            if let Some(stand) = stand {
                return Poll::Ready(Ok(stand));
            }
        }
    }

    /// Drops what rustls has taken from the front of `incoming`; the buffer itself once empty.
    fn discard(&mut self, n: usize) {
        if n == 0 {
            return;
        }
        if n >= self.incoming.len() {
            self.incoming = Vec::new();
        } else {
            self.incoming.drain(..n);
            if self.incoming.capacity() > 2 * self.incoming.len() + READ_CHUNK {
                self.incoming.shrink_to_fit();
            }
        }
    }

    /// Copies decrypted bytes into `buf`, freeing `plain` once drained. Whether any were there.
    fn take_plain(&mut self, buf: &mut ReadBuf<'_>) -> bool {
        let left = &self.plain[self.plain_at..];
        if left.is_empty() {
            return false;
        }
        let n = left.len().min(buf.remaining());
        buf.put_slice(&left[..n]);
        self.plain_at += n;
        if self.plain_at == self.plain.len() {
            self.plain = Vec::new();
            self.plain_at = 0;
        }
        true
    }
}

impl<IO: AsyncRead + AsyncWrite + Unpin> AsyncRead for ServerStream<IO> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        if buf.remaining() == 0 {
            return Poll::Ready(Ok(()));
        }
        loop {
            if me.take_plain(buf) || me.read_ended {
                return Poll::Ready(Ok(()));
            }
            match ready!(me.poll_process(cx, None))? {
                Stand::PeerClosed | Stand::Closed => me.read_ended = true,
                Stand::Traffic | Stand::Blocked if me.plain.is_empty() => {
                    if ready!(me.poll_fill(cx))? == 0 {
                        me.read_ended = true;
                    }
                }
                Stand::Traffic | Stand::Blocked => {}
            }
        }
    }
}

impl<IO: AsyncRead + AsyncWrite + Unpin> AsyncWrite for ServerStream<IO> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        let me = self.get_mut();
        // What an earlier write encrypted goes out first: at most one record waits here.
        ready!(poll_write_out(&mut me.io, &mut me.outgoing, &mut me.out_at, cx))?;
        if data.is_empty() {
            return Poll::Ready(Ok(0));
        }
        let take = data.len().min(WRITE_CHUNK);
        let mut done = false;
        let mut encrypt = |write: &mut WriteTraffic<'_, _>, out: &mut Vec<u8>| {
            append(out, take + 64, |buf| write.encrypt(&data[..take], buf), encrypt_needs).map_err(encrypt_error)?;
            done = true;
            Ok(())
        };
        loop {
            match ready!(me.poll_process(cx, Some(&mut encrypt)))? {
                Stand::Traffic => break,
                // After the peer's close_notify this side may still write (the next turn).
                Stand::PeerClosed => me.read_ended = true,
                Stand::Closed => return Poll::Ready(Err(io::ErrorKind::BrokenPipe.into())),
                Stand::Blocked => {
                    if ready!(me.poll_fill(cx))? == 0 {
                        return Poll::Ready(Err(io::ErrorKind::UnexpectedEof.into()));
                    }
                }
            }
        }
        if !done {
            return Poll::Ready(Err(io::Error::other("TLS: no application data may be sent yet")));
        }
        // Accepted: what the socket does not take now waits for the next write or flush.
        if let Poll::Ready(Err(e)) = poll_write_out(&mut me.io, &mut me.outgoing, &mut me.out_at, cx) {
            return Poll::Ready(Err(e));
        }
        Poll::Ready(Ok(take))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        ready!(poll_write_out(&mut me.io, &mut me.outgoing, &mut me.out_at, cx))?;
        Pin::new(&mut me.io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        if !me.close_sent {
            ready!(poll_write_out(&mut me.io, &mut me.outgoing, &mut me.out_at, cx))?;
            let mut close = |write: &mut WriteTraffic<'_, _>, out: &mut Vec<u8>| append(out, 64, |buf| write.queue_close_notify(buf), encrypt_needs).map_err(encrypt_error);
            // The peer's own close is told once, before the state that may write; whatever else
            // comes (both closed, or broken), the socket is shut below.
            for _ in 0..2 {
                match ready!(me.poll_process(cx, Some(&mut close))) {
                    Ok(Stand::PeerClosed) => me.read_ended = true,
                    _ => break,
                }
            }
            me.close_sent = true;
        }
        ready!(poll_write_out(&mut me.io, &mut me.outgoing, &mut me.out_at, cx))?;
        Pin::new(&mut me.io).poll_shutdown(cx)
    }
}
