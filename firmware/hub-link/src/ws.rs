//! The WebSocket transport: the upgrade with the xiaozhi headers, the hello, MCP, keepalive.
//!
//! **Keepalive.** Every [`Timing::ping`] the device sends a WebSocket *Ping* control frame. Every
//! RFC 6455 server answers it with a Pong below the application (tokio-tungstenite in the mcpdev
//! hub, Python `websockets` in xiaozhi-esp32-server), so no JSON message reaches the hub's
//! protocol code, and traffic flows both ways. If nothing at all (Pong or otherwise) arrives for
//! [`Timing::dead_after`], the link is taken for dead and the session ends. The device answers the
//! server's Pings too.

use alloc::string::String;
use alloc::vec::Vec;

use edge_http::ws::{MAX_BASE64_KEY_LEN, MAX_BASE64_KEY_RESPONSE_LEN, NONCE_LEN, upgrade_request_headers};
use edge_ws::FrameType;
use embassy_futures::select::{Either, select};
use embassy_sync::blocking_mutex::raw::RawMutex;
use embassy_time::{Duration, Instant, Timer, with_timeout};
use embedded_io_async::{Read, Write};
use log::info;
use mcp_device::DeviceLink;
use provisioning::HubUrl;
use ws_frames::{Frame, Frames};

use crate::tls::{LinkError, Stream};
use crate::{Board, End, Identity, Timing, http, queue_press, take_text};

/// One WebSocket session over a connected `socket` (plain or TLS), from the HTTP upgrade to the
/// end. `greeted` is set once the server said hello. `rx` is the receive buffer (the largest text
/// message accepted), `http_buf` holds the upgrade response headers.
#[allow(clippy::too_many_arguments)]
pub async fn session<T, S, M, const N: usize>(
    socket: &mut Stream<'_, T>,
    url: &HubUrl<'_>,
    id: &Identity,
    link: &mut DeviceLink<S>,
    board: &Board<'_, S, M, N>,
    timing: &Timing,
    rx: &mut [u8],
    http_buf: &mut [u8],
    greeted: &mut bool,
) -> End<LinkError<T::Error>>
where
    T: Read + Write,
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
    let authorization = id.authorization();
    if let Some(auth) = &authorization {
        headers.push(("Authorization", auth));
    }

    let upgraded = with_timeout(timing.connect, http::request(&mut *socket, "GET", url.path, &headers, &[], http_buf)).await;
    let head = match upgraded {
        Ok(Ok((head, _, _))) => head,
        Ok(Err(e)) => return End::Http(e),
        Err(_) => return End::Timeout("connecting to the hub"),
    };
    let mut accept_buf = [0u8; MAX_BASE64_KEY_RESPONSE_LEN];
    if !head.is_ws_upgrade_accepted(&nonce, &mut accept_buf) {
        return End::Rejected(head.code);
    }
    info!("hub: WebSocket open");

    let tx = Sender { random: board.random, timeout: timing.write };
    let mut out = String::new();
    if let Err(e) = tx.send(&mut *socket, FrameType::Text(false), link.hello().as_bytes()).await {
        return e;
    }
    let mut frames = Frames::default();
    let hello_deadline = Instant::now() + timing.hello;
    let mut last_rx = Instant::now();
    let mut next_ping = Instant::now() + timing.ping;
    let mut pings: u32 = 0;

    loop {
        let wake = if *greeted { next_ping } else { next_ping.min(hello_deadline) };
        let event = socket.read_or(&mut rx[frames.filled..], select(board.presses.receive(), Timer::at(wake))).await;
        out.clear();
        let (read, other) = event.split();
        if let Some(Either::First(presses)) = other {
            queue_press(link, presses);
        }
        match read {
            Some(Ok(0)) => return End::PeerClosed,
            Some(Ok(n)) => {
                frames.filled += n;
                last_rx = Instant::now();
                // Every complete frame in the buffer.
                loop {
                    match frames.next(rx) {
                        Ok(None) => break,
                        Ok(Some(Frame::Text(text))) => {
                            if let Err(end) = take_text(link, text, &mut out, greeted) {
                                return end;
                            }
                            frames.consume(rx);
                            if !out.is_empty() {
                                if let Err(e) = tx.send(&mut *socket, FrameType::Text(false), out.as_bytes()).await {
                                    return e;
                                }
                                out.clear();
                            }
                            if (board.reboot_requested)(link.server.state()) {
                                // The stock firmware reboots 1 s after answering.
                                Timer::after(Duration::from_secs(1)).await;
                                let _ = tx.send(&mut *socket, FrameType::Close, &1001u16.to_be_bytes()).await;
                                return End::Reboot;
                            }
                        }
                        Ok(Some(Frame::Ping(payload))) => {
                            let mut pong = [0u8; 125];
                            let len = payload.len().min(pong.len());
                            pong[..len].copy_from_slice(&payload[..len]);
                            frames.consume(rx);
                            if let Err(e) = tx.send(&mut *socket, FrameType::Pong, &pong[..len]).await {
                                return e;
                            }
                        }
                        Ok(Some(Frame::Close(code))) => {
                            let echo = code.unwrap_or(1000).to_be_bytes();
                            let _ = tx.send(&mut *socket, FrameType::Close, &echo).await;
                            return End::CloseFrame(code);
                        }
                        Ok(Some(Frame::Skipped)) => frames.consume(rx),
                        Err(why) => {
                            let _ = tx.send(&mut *socket, FrameType::Close, &1009u16.to_be_bytes()).await;
                            return End::Protocol(why.as_str());
                        }
                    }
                }
            }
            Some(Err(e)) => return End::Tcp(e),
            None => {
                let now = Instant::now();
                if !*greeted && now >= hello_deadline {
                    return End::Timeout("waiting for the server hello");
                }
                if now - last_rx >= timing.dead_after {
                    return End::Silent(timing.dead_after);
                }
                if now >= next_ping {
                    pings = pings.wrapping_add(1);
                    if let Err(e) = tx.send(&mut *socket, FrameType::Ping, &pings.to_be_bytes()).await {
                        return e;
                    }
                    next_ping = now + timing.ping;
                }
            }
        }
        // Notifications (from tools or the button) go out once the session is established.
        if *greeted {
            while link.next_notification(&mut out) {
                if let Err(e) = tx.send(&mut *socket, FrameType::Text(false), out.as_bytes()).await {
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
