//! The device's connection to its hub, one session at a time: WebSocket upgrade with the xiaozhi
//! headers, the hello, MCP through `mcp-device`, keepalive, and the reconnect backoff.
//!
//! It is generic over the TCP stack ([`edge_nal::TcpConnect`]) and uses `embassy-time`, so the
//! firmware runs it on embassy-net while the host tests run the very same code over std sockets
//! against a real WebSocket server.
//!
//! Unlike the stock firmware, which opens its WebSocket only for a voice session, the device keeps
//! this connection up, so the hub can use its MCP tools at any time.
//!
//! **Keepalive.** Every [`Timing::ping`] the device sends a WebSocket *Ping* control frame. Every
//! RFC 6455 server answers it with a Pong below the application (tokio-tungstenite in the mcpdev
//! hub, Python `websockets` in xiaozhi-esp32-server), so no JSON message reaches the hub's
//! protocol code, and traffic flows both ways. If nothing at all (Pong or otherwise) arrives for
//! [`Timing::dead_after`], the link is taken for dead and the session ends. The device answers the
//! server's Pings too.
#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;
use core::net::SocketAddr;

use edge_http::Method;
use edge_http::io::client::Connection;
use edge_http::ws::{MAX_BASE64_KEY_LEN, MAX_BASE64_KEY_RESPONSE_LEN, NONCE_LEN, upgrade_request_headers};
use edge_nal::TcpConnect;
use edge_ws::FrameType;
use embassy_futures::select::{Either3, select3};
use embassy_sync::blocking_mutex::raw::RawMutex;
use embassy_sync::channel::Channel;
use embassy_time::{Duration, Instant, Timer, with_timeout};
use embedded_io_async::{Read, Write};
use log::{debug, info};
use mcp_device::{DeviceLink, Inbound};
use provisioning::HubUrl;
use serde_json::json;
use ws_frames::{Frame, Frames};

/// The time limits of a session.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// TCP connect plus the HTTP upgrade.
    pub connect: Duration,
    /// How long the server has to answer the hello (the stock firmware's 10 s).
    pub hello: Duration,
    /// How often the device sends a WebSocket Ping.
    pub ping: Duration,
    /// Silence after which the link is taken for dead.
    pub dead_after: Duration,
    /// Longest a frame may take to leave the device.
    pub write: Duration,
}

impl Default for Timing {
    /// The firmware's values: a Ping every 30 s, dead after 75 s (two missed Pongs and some slack,
    /// well inside the 120 s rule of xiaozhi devices and servers).
    fn default() -> Self {
        Self {
            connect: Duration::from_secs(10),
            hello: Duration::from_secs(10),
            ping: Duration::from_secs(30),
            dead_after: Duration::from_secs(75),
            write: Duration::from_secs(10),
        }
    }
}

/// How the device introduces itself in the upgrade request.
#[derive(Debug, Clone)]
pub struct Identity {
    /// `Device-Id`: the lower-case station MAC.
    pub device_id: String,
    /// `Client-Id`: a UUID.
    pub client_id: String,
    /// The `Authorization` value, when a token is provisioned.
    pub authorization: Option<String>,
}

impl Identity {
    /// `Bearer <token>`, or the token verbatim if it already contains a space (as the stock
    /// firmware does); `None` for an empty token.
    pub fn authorization_for(token: &str) -> Option<String> {
        match token {
            "" => None,
            t if t.contains(' ') => Some(String::from(t)),
            t => Some(alloc::format!("Bearer {t}")),
        }
    }
}

/// What a session needs from the board besides the MCP server.
pub struct Board<'a, S, M: RawMutex, const N: usize> {
    /// Random numbers: the WebSocket key and the frame masks.
    pub random: fn() -> u32,
    /// Whether a tool asked for a reboot (checked after every reply).
    pub reboot_requested: fn(&S) -> bool,
    /// BOOT-button presses (their running count), queued as notifications.
    pub presses: &'a Channel<M, u32, N>,
}

/// Why a session ended.
#[derive(Debug)]
pub enum End<E> {
    Tcp(E),
    Http(edge_http::io::Error<E>),
    Rejected(u16),
    Timeout(&'static str),
    Ws(edge_ws::Error<E>),
    PeerClosed,
    CloseFrame(Option<u16>),
    BadHello(String),
    Protocol(&'static str),
    Silent(Duration),
    /// A tool asked for a reboot; the reply went out and the socket was closed.
    Reboot,
}

impl<E: fmt::Debug> fmt::Display for End<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            End::Tcp(e) => write!(f, "TCP: {e:?}"),
            End::Http(e) => write!(f, "HTTP upgrade: {e:?}"),
            End::Rejected(401) => write!(f, "the hub refused the device (401): check the device token"),
            End::Rejected(code) => write!(f, "the hub answered the upgrade with HTTP {code}"),
            End::Timeout(what) => write!(f, "timed out {what}"),
            End::Ws(e) => write!(f, "WebSocket: {e:?}"),
            End::PeerClosed => write!(f, "the hub closed the TCP connection"),
            End::CloseFrame(Some(code)) => write!(f, "the hub closed the WebSocket ({code})"),
            End::CloseFrame(None) => write!(f, "the hub closed the WebSocket"),
            End::BadHello(why) => write!(f, "unusable server hello: {why}"),
            End::Protocol(why) => write!(f, "protocol error: {why}"),
            End::Silent(d) => write!(f, "nothing received for {} s: link dead", d.as_secs()),
            End::Reboot => write!(f, "rebooting as asked"),
        }
    }
}

/// Reconnect delays: from `min`, doubled after each attempt up to `max`, back to `min` after a
/// session that got a server hello; each with ±25 % jitter so a room full of devices does not
/// reconnect in lockstep.
#[derive(Debug, Clone)]
pub struct Backoff {
    min: Duration,
    max: Duration,
    next: Duration,
}

impl Default for Backoff {
    /// 1 s to 60 s.
    fn default() -> Self {
        Self::new(Duration::from_secs(1), Duration::from_secs(60))
    }
}

impl Backoff {
    pub fn new(min: Duration, max: Duration) -> Self {
        Self { min, max, next: min }
    }

    /// The delay before the next attempt; `greeted` says whether the last session got as far as
    /// the server hello; `random` is any random number (it only picks the jitter).
    pub fn delay(&mut self, greeted: bool, random: u32) -> Duration {
        if greeted {
            self.next = self.min;
        }
        let base = self.next;
        self.next = (self.next * 2).min(self.max);
        let permille = 750 + u64::from(random % 501);
        Duration::from_millis(base.as_millis() * permille / 1000)
    }
}

/// One connection to `addr`, from the TCP connect to the end of the WebSocket. `greeted` is set
/// once the server said hello. `rx` is the receive buffer (the largest text message accepted),
/// `http_buf` holds the upgrade response headers.
#[allow(clippy::too_many_arguments)]
pub async fn session<T, S, M, const N: usize>(
    tcp: &T,
    addr: SocketAddr,
    url: &HubUrl<'_>,
    id: &Identity,
    link: &mut DeviceLink<S>,
    board: &Board<'_, S, M, N>,
    timing: &Timing,
    rx: &mut [u8],
    http_buf: &mut [u8],
    greeted: &mut bool,
) -> End<T::Error>
where
    T: TcpConnect,
    M: RawMutex,
{
    let mut nonce = [0u8; NONCE_LEN];
    for chunk in nonce.chunks_mut(4) {
        chunk.copy_from_slice(&(board.random)().to_le_bytes());
    }
    let host = if url.explicit_port { alloc::format!("{}:{}", url.host, url.port) } else { String::from(url.host) };
    let mut key_buf = [0u8; MAX_BASE64_KEY_LEN];
    let mut headers: Vec<(&str, &str)> = upgrade_request_headers(Some(&host), None, None, &nonce, &mut key_buf)
        .into_iter()
        .filter(|(name, _)| !name.is_empty())
        .collect();
    headers.push(("Protocol-Version", "1"));
    headers.push(("Device-Id", &id.device_id));
    headers.push(("Client-Id", &id.client_id));
    if let Some(auth) = &id.authorization {
        headers.push(("Authorization", auth));
    }

    let mut conn: Connection<'_, T, 16> = Connection::new(http_buf, tcp, addr);
    let upgraded = with_timeout(timing.connect, async {
        conn.initiate_request(true, Method::Get, url.path, &headers).await?;
        conn.initiate_response().await
    })
    .await;
    match upgraded {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return End::Http(e),
        Err(_) => return End::Timeout("connecting to the hub"),
    }
    let mut accept_buf = [0u8; MAX_BASE64_KEY_RESPONSE_LEN];
    match conn.is_ws_upgrade_accepted(&nonce, &mut accept_buf) {
        Ok(true) => {}
        Ok(false) => return End::Rejected(conn.headers().map(|h| h.code).unwrap_or(0)),
        Err(e) => return End::Http(e),
    }
    let (mut socket, _) = conn.release();
    info!("hub: WebSocket open");

    let tx = Sender { random: board.random, timeout: timing.write };
    let mut out = String::new();
    if let Err(e) = tx.send(&mut socket, FrameType::Text(false), link.hello().as_bytes()).await {
        return e;
    }
    let mut frames = Frames::default();
    let hello_deadline = Instant::now() + timing.hello;
    let mut last_rx = Instant::now();
    let mut next_ping = Instant::now() + timing.ping;
    let mut pings: u32 = 0;

    loop {
        let wake = if *greeted { next_ping } else { next_ping.min(hello_deadline) };
        let event = select3(socket.read(&mut rx[frames.filled..]), board.presses.receive(), Timer::at(wake)).await;
        out.clear();
        match event {
            Either3::First(Ok(0)) => return End::PeerClosed,
            Either3::First(Ok(n)) => {
                frames.filled += n;
                last_rx = Instant::now();
                // Every complete frame in the buffer.
                loop {
                    match frames.next(rx) {
                        Ok(None) => break,
                        Ok(Some(Frame::Text(text))) => {
                            match link.on_text(text, &mut out) {
                                Inbound::Hello { session_id } => {
                                    *greeted = true;
                                    info!("hub: server hello, session '{session_id}'; MCP is up");
                                }
                                Inbound::BadHello(why) => return End::BadHello(why),
                                Inbound::Mcp { replied } => debug!("hub: MCP message (replied: {replied})"),
                                Inbound::Goodbye => info!("hub: the server ended the session"),
                                Inbound::Other { kind } => debug!("hub: '{kind}' message ignored"),
                                Inbound::Ignored(why) => debug!("hub: message ignored: {why}"),
                            }
                            frames.consume(rx);
                            if !out.is_empty() {
                                if let Err(e) = tx.send(&mut socket, FrameType::Text(false), out.as_bytes()).await {
                                    return e;
                                }
                                out.clear();
                            }
                            if (board.reboot_requested)(link.server.state()) {
                                // The stock firmware reboots 1 s after answering.
                                Timer::after(Duration::from_secs(1)).await;
                                let _ = tx.send(&mut socket, FrameType::Close, &1001u16.to_be_bytes()).await;
                                return End::Reboot;
                            }
                        }
                        Ok(Some(Frame::Ping(payload))) => {
                            let mut pong = [0u8; 125];
                            let len = payload.len().min(pong.len());
                            pong[..len].copy_from_slice(&payload[..len]);
                            frames.consume(rx);
                            if let Err(e) = tx.send(&mut socket, FrameType::Pong, &pong[..len]).await {
                                return e;
                            }
                        }
                        Ok(Some(Frame::Close(code))) => {
                            let echo = code.unwrap_or(1000).to_be_bytes();
                            let _ = tx.send(&mut socket, FrameType::Close, &echo).await;
                            return End::CloseFrame(code);
                        }
                        Ok(Some(Frame::Skipped)) => frames.consume(rx),
                        Err(why) => {
                            let _ = tx.send(&mut socket, FrameType::Close, &1009u16.to_be_bytes()).await;
                            return End::Protocol(why.as_str());
                        }
                    }
                }
            }
            Either3::First(Err(e)) => return End::Tcp(e),
            Either3::Second(presses) => {
                info!("button: BOOT pressed ({presses})");
                link.server.outbox().notify(
                    "notifications/state_changed",
                    &json!({"what": "button.boot", "oldState": "released", "newState": "pressed", "presses": presses}),
                );
            }
            Either3::Third(()) => {
                let now = Instant::now();
                if !*greeted && now >= hello_deadline {
                    return End::Timeout("waiting for the server hello");
                }
                if now - last_rx >= timing.dead_after {
                    return End::Silent(timing.dead_after);
                }
                if now >= next_ping {
                    pings = pings.wrapping_add(1);
                    if let Err(e) = tx.send(&mut socket, FrameType::Ping, &pings.to_be_bytes()).await {
                        return e;
                    }
                    next_ping = now + timing.ping;
                }
            }
        }
        // Notifications (from tools or the button) go out once the session is established.
        if *greeted {
            while link.next_notification(&mut out) {
                if let Err(e) = tx.send(&mut socket, FrameType::Text(false), out.as_bytes()).await {
                    return e;
                }
                out.clear();
            }
        }
    }
}

/// Sends frames masked as a client must, each with a fresh key, within a time limit.
struct Sender {
    random: fn() -> u32,
    timeout: Duration,
}

impl Sender {
    async fn send<W: Write>(&self, socket: &mut W, kind: FrameType, payload: &[u8]) -> Result<(), End<W::Error>> {
        let mask = Some((self.random)());
        match with_timeout(self.timeout, async {
            edge_ws::io::send(&mut *socket, kind, mask, payload).await?;
            socket.flush().await.map_err(edge_ws::Error::Io)
        })
        .await
        {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(End::Ws(e)),
            Err(_) => Err(End::Timeout("sending to the hub")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authorization_header() {
        assert_eq!(Identity::authorization_for(""), None);
        assert_eq!(Identity::authorization_for("abc").as_deref(), Some("Bearer abc"));
        assert_eq!(Identity::authorization_for("Token abc").as_deref(), Some("Token abc"));
    }

    #[test]
    fn backoff_doubles_caps_and_resets_after_a_greeting() {
        let mut b = Backoff::default();
        // random % 501 == 250 -> exactly the base delay.
        let exact = |b: &mut Backoff, greeted| b.delay(greeted, 250).as_millis();
        assert_eq!(exact(&mut b, false), 1000);
        assert_eq!(exact(&mut b, false), 2000);
        assert_eq!(exact(&mut b, false), 4000);
        for _ in 0..10 {
            exact(&mut b, false);
        }
        assert_eq!(exact(&mut b, false), 60_000);
        assert_eq!(exact(&mut b, true), 1000, "a session that got a server hello starts over");
        assert_eq!(exact(&mut b, false), 2000);
        // Jitter stays within ±25 %.
        let mut b = Backoff::default();
        assert_eq!(b.delay(false, 0).as_millis(), 750);
        let mut b = Backoff::default();
        assert_eq!(b.delay(false, 500).as_millis(), 1250);
    }
}
