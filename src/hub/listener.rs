//! The hub's accept loops: each connection is served by hyper directly (axum::serve has no
//! header-read timeout), under a budget that a flood of slow or silent peers cannot exceed.
//!
//! - Headers must arrive within [`Limits::header_read_timeout`] (hyper closes the connection
//!   otherwise), and a request body within [`Limits::body_timeout`].
//! - The device listener admits a connection only within its [`Budget`](super::budget::Budget):
//!   a total below the descriptor limit (the host listener keeps a reserve), and a cap on
//!   connections that have not said hello, per peer address and in total. A connection over a
//!   pre-hello cap waits its turn, unread, within a deadline; one over the total, or over its
//!   address's share of the queue, is closed at once. Refusals are logged (rate-limited, the
//!   descriptor ceiling on its own line).
//! - Every other listener (the host listener, the EMQX hooks) admits a connection only within its
//!   own cap, in total and per peer address ([`super::conn_cap`]): its share of the descriptors
//!   the hub keeps beside device connections. A connection over it is closed at once, before
//!   anything is read, counted, and logged (rate-limited), so no listener starves another.
//! - The host listener notes the local user behind each loopback connection
//!   ([`super::owner::PeerUser`]), so that its routes can serve only the hub's user.
//! - Every request carries what the listener knows of its connection, in its extensions: the
//!   peer and the hub's own address it came in on ([`DevicePeer`], which the device routes build
//!   URLs from), and whether it came over TLS ([`Transport`]).
//! - With TLS ([`Tls`]), the handshake runs after the connection was admitted and before any
//!   request is read, within [`Tls::deadline`]: the device listener's permits (the total and the
//!   pre-hello slot) are held across it, so a peer that opens handshakes and never finishes them
//!   is capped and queued exactly like one that never says hello. A failed or late handshake is
//!   closed and logged (rate-limited), and counted in `mcpdev_refusals_total{reason="tls_handshake"}`.
//!   A plain-text request in its place is answered "use wss:// or https://" in plain HTTP
//!   ([`super::plain_at_tls`]), within the same deadline, and counted and logged the same way.

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::Request;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tower::ServiceExt as _;

use super::budget::{Admit, Budget, ConnPermit, HelloSlot, Refusal};
use super::conn_cap::{CapPermit, ConnCap};
use super::owner::PeerUser;

/// Deadlines every connection on both listeners lives by.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// A request's headers must be complete this long after the connection is ready to read one.
    pub header_read_timeout: Duration,
    /// A request's body must be complete this long after its headers.
    pub body_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self { header_read_timeout: Duration::from_secs(10), body_timeout: Duration::from_secs(60) }
    }
}

/// Which listener a loop serves: what it checks at accept time.
#[derive(Clone)]
pub enum Side {
    /// Devices: admitted within a budget; each connection carries a [`HelloSlot`].
    Devices(Arc<Budget>),
    /// The CLI and MCP hosts: each connection carries the [`PeerUser`] behind it.
    Host(Arc<ConnCap>),
    /// Another listener of the hub's (the EMQX hooks), within its cap.
    Capped(Arc<ConnCap>),
}

/// Connections the kernel queues for the device listener before they are accepted: a fleet
/// reconnecting after a hub restart arrives at once, and with the usual 128 the SYNs beyond it
/// were dropped and retried by the devices 1, 3, 7 and 15 s later (capped by the system's
/// `net.core.somaxconn`).
pub const DEVICE_BACKLOG: u32 = 4096;
/// The same for the host listener (the CLI, MCP hosts).
pub const HOST_BACKLOG: u32 = 1024;

/// Binds a listening socket with `backlog` (address reuse as std's `bind` sets it on Unix).
pub fn bind(addr: SocketAddr, backlog: u32) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() { tokio::net::TcpSocket::new_v4()? } else { tokio::net::TcpSocket::new_v6()? };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(backlog)
}

/// How a request reached the hub, in every request's extensions: over TLS or in plain text
/// (which tokens may travel over it, [`super::bearer`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transport {
    pub tls: bool,
}

/// Who a device connection is: the peer, and the hub's own address it came in on (URLs handed to
/// that device are built from the latter, never from its `Host` header).
#[derive(Debug, Clone, Copy)]
pub struct DevicePeer {
    pub remote: SocketAddr,
    pub local: Option<SocketAddr>,
}

/// A listener's TLS: every connection's handshake, within a deadline.
#[derive(Clone)]
pub struct Tls {
    /// Every connection's server configuration (certificate, versions, tickets, ALPN).
    pub config: Arc<rustls::ServerConfig>,
    /// The handshake must be complete this long after the connection was admitted.
    pub deadline: Duration,
}

/// Accepts connections until the listener fails for good; serves each on its own task (over TLS
/// when `tls` is given).
pub async fn serve(listener: TcpListener, app: Router, side: Side, limits: Limits, name: &'static str, tls: Option<Tls>) {
    let local = listener.local_addr().ok();
    let refusals = Arc::new(Refusals {
        ceiling: super::budget::RateLimited::new(Duration::from_secs(10)),
        peer: super::budget::RateLimited::new(Duration::from_secs(5)),
        handshake: super::budget::RateLimited::new(Duration::from_secs(5)),
    });
    let accept_errors = super::budget::RateLimited::new(Duration::from_secs(5));
    loop {
        let (tcp, remote) = match listener.accept().await {
            Ok(pair) => pair,
            Err(e) => {
                // EMFILE/ENFILE: back off a little so the loop does not spin while descriptors are out.
                if let Some(skipped) = accept_errors.allow() {
                    tracing::warn!(listener = name, skipped, "cannot accept a connection: {e}");
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let app = app.clone();
        let host_side = matches!(side, Side::Host(_));
        let cap = match &side {
            Side::Host(cap) | Side::Capped(cap) => match cap.admit(remote.ip()) {
                Ok(p) => Some(p),
                Err(_) => {
                    // Counted and logged by the cap; closed before anything is read.
                    drop(tcp);
                    continue;
                }
            },
            Side::Devices(_) => None,
        };
        let (permit, slot) = match &side {
            Side::Devices(budget) => match budget.admit(remote.ip()) {
                Ok(Admit::Now(permit, slot)) => (Some(permit), Some(slot)),
                Ok(Admit::Wait(permit, waiting)) => {
                    // Its request waits in the socket, unread, until a slot frees or the deadline.
                    let refusals = refusals.clone();
                    let tls = tls.clone();
                    tokio::spawn(async move {
                        match waiting.turn().await {
                            Ok(slot) => {
                                let conn = Conn { remote, app, limits, permit: Some(permit), cap: None, slot: Some(slot), user: None };
                                serve_one(tcp, conn, tls, &refusals, name).await;
                            }
                            Err(why) => refused(&refusals, name, remote, &why),
                        }
                    });
                    continue;
                }
                Err(why) => {
                    crate::metrics::refused(crate::metrics::Refused::ConnectionCap);
                    refused(&refusals, name, remote, &why);
                    drop(tcp);
                    continue;
                }
            },
            Side::Host(_) | Side::Capped(_) => (None, None),
        };
        let (tls, refusals) = (tls.clone(), refusals.clone());
        tokio::spawn(async move {
            let user = local.filter(|_| host_side).map(|local| PeerUser::of(local, remote));
            serve_one(tcp, Conn { remote, app, limits, permit, cap, slot, user }, tls, &refusals, name).await;
        });
    }
}

/// Rate-limited lines for refused device connections: one kind for the descriptor ceiling (an
/// operator must act), one for a peer over its caps.
struct Refusals {
    ceiling: super::budget::RateLimited,
    peer: super::budget::RateLimited,
    handshake: super::budget::RateLimited,
}

fn refused(refusals: &Refusals, name: &str, remote: SocketAddr, why: &Refusal) {
    let Refusals { ceiling, peer, .. } = refusals;
    match why {
        Refusal::Full(open) => {
            if let Some(skipped) = ceiling.allow() {
                tracing::warn!(listener = name, %remote, skipped, open, "device refused at the connection ceiling: {why}");
            }
        }
        _ => {
            if let Some(skipped) = peer.allow() {
                tracing::warn!(listener = name, %remote, skipped, "connection refused: {why}");
            }
        }
    }
}

/// One admitted connection and what it carries into its requests.
struct Conn {
    remote: SocketAddr,
    app: Router,
    limits: Limits,
    permit: Option<ConnPermit>,
    cap: Option<CapPermit>,
    slot: Option<HelloSlot>,
    user: Option<PeerUser>,
}

/// Serves one connection: its TLS handshake first when the listener has TLS (the permits held
/// across it), then HTTP.
async fn serve_one(mut tcp: TcpStream, conn: Conn, tls: Option<Tls>, refusals: &Refusals, name: &str) {
    no_delay(&tcp);
    // The hub's own address the connection came in on (the URLs a device is given are built from
    // that, never from its `Host` header).
    let local = tcp.local_addr().ok();
    let Some(tls) = tls else {
        return serve_http(tcp, local, conn, Transport { tls: false }).await;
    };
    // A plain ws:// or http:// request is told, in plain HTTP, to use wss:// or https://.
    let started = tokio::time::Instant::now();
    if super::plain_at_tls::answer_plain_http(&mut tcp, tls.deadline).await == super::plain_at_tls::FirstBytes::AnsweredPlain {
        crate::metrics::refused(crate::metrics::Refused::TlsHandshake);
        if let Some(skipped) = refusals.handshake.allow() {
            tracing::warn!(listener = name, remote = %conn.remote, skipped, "a plain-text request (ws:// or http://) on a TLS port: answered \"use wss:// or https://\"");
        }
        return;
    }
    match crate::tls::server::accept_by(&tls.config, tcp, started + tls.deadline, tls.deadline).await {
        Ok(stream) => serve_http(stream, local, conn, Transport { tls: true }).await,
        Err(e) => {
            crate::metrics::refused(crate::metrics::Refused::TlsHandshake);
            if let Some(skipped) = refusals.handshake.allow() {
                tracing::warn!(listener = name, remote = %conn.remote, skipped, "connection closed: {e}");
            }
        }
    }
}

async fn serve_http<IO>(io: IO, local: Option<SocketAddr>, conn: Conn, transport: Transport)
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let Conn { remote, app, limits, permit, cap, slot, user } = conn;
    let peer = DevicePeer { remote, local };
    let service = tower::service_fn(move |req: Request<hyper::body::Incoming>| {
        let mut req = req.map(|body| Body::new(Deadline::new(body, limits.body_timeout)));
        req.extensions_mut().insert(ConnectInfo(remote));
        req.extensions_mut().insert(ConnectInfo(peer));
        req.extensions_mut().insert(transport);
        if let Some(slot) = &slot {
            req.extensions_mut().insert(slot.clone());
        }
        if let Some(user) = &user {
            req.extensions_mut().insert(*user);
        }
        app.clone().oneshot(req)
    });
    // The permit travels with the socket, also into an upgraded WebSocket, and ends with it.
    let io = TokioIo::new(Held { io, _permit: permit, _cap: cap });
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .keep_alive(true)
        .serve_connection(io, TowerToHyperService::new(service))
        .with_upgrades();
    if let Err(e) = conn.await {
        tracing::debug!(%remote, "connection ended: {e}");
    }
}

/// Small request/response messages go out at once: with Nagle's algorithm, a second message sent
/// right after a first waits for the peer's delayed ACK (40 ms per onboarding step, measured).
fn no_delay(tcp: &TcpStream) {
    if let Err(e) = tcp.set_nodelay(true) {
        tracing::debug!("cannot set TCP_NODELAY: {e}");
    }
}

/// A socket that holds its connection permit for as long as it lives.
struct Held<IO> {
    io: IO,
    _permit: Option<ConnPermit>,
    _cap: Option<CapPermit>,
}

impl<IO: AsyncRead + Unpin> AsyncRead for Held<IO> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Held<IO> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
    fn poll_write_vectored(mut self: Pin<&mut Self>, cx: &mut Context<'_>, bufs: &[std::io::IoSlice<'_>]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

/// A request body that must be complete by a deadline; after it, reading fails (and the handler
/// answers with an error), so a peer that sends a byte a minute holds nothing for long.
struct Deadline {
    body: hyper::body::Incoming,
    sleep: Pin<Box<tokio::time::Sleep>>,
    limit: Duration,
}

impl Deadline {
    fn new(body: hyper::body::Incoming, limit: Duration) -> Self {
        Self { body, sleep: Box::pin(tokio::time::sleep(limit)), limit }
    }
}

#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive within {0:?}")]
struct BodyTimeout(Duration);

impl http_body::Body for Deadline {
    type Data = bytes::Bytes;
    type Error = axum::BoxError;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        if let Poll::Ready(frame) = Pin::new(&mut self.body).poll_frame(cx) {
            return Poll::Ready(frame.map(|f| f.map_err(Into::into)));
        }
        if self.sleep.as_mut().poll(cx).is_ready() {
            tracing::info!("request body refused: it did not arrive within {:?}", self.limit);
            return Poll::Ready(Some(Err(BodyTimeout(self.limit).into())));
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}
