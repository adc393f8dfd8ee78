//! The hub connection: a WebSocket with the xiaozhi headers, the hello, MCP through `mcp-device`,
//! a keepalive, and reconnecting with exponential backoff.
//!
//! Unlike the stock firmware, which opens its WebSocket only for a voice session, this connection
//! stays up, so the hub can use the device's MCP tools at any time.
//!
//! **Keepalive.** Every [`PING_PERIOD`] the device sends a WebSocket *Ping* control frame. Every
//! RFC 6455 server answers it with a Pong below the application (tokio-tungstenite and Python
//! `websockets` do it for the hub and xiaozhi-esp32-server), so no JSON message reaches the
//! hub's protocol code, and traffic flows both ways (NAT entries, the 120 s inactivity rules
//! on both ends stay satisfied). If nothing at all (Pong or otherwise) arrives for [`DEAD_AFTER`],
//! the link is considered dead and the device reconnects. The device also answers the server's
//! Pings.

use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use core::fmt;
use core::net::SocketAddr;

use edge_http::Method;
use edge_http::io::client::Connection;
use edge_http::ws::{MAX_BASE64_KEY_LEN, MAX_BASE64_KEY_RESPONSE_LEN, NONCE_LEN, upgrade_request_headers};
use edge_nal_embassy::{Tcp, TcpBuffers, TcpError};
use edge_ws::FrameType;
use embassy_futures::select::{Either3, select3};
use embassy_net::Stack;
use embassy_net::dns::DnsQueryType;
use embassy_sync::blocking_mutex::raw::CriticalSectionRawMutex;
use embassy_sync::channel::Channel;
use embassy_time::{Duration, Instant, Timer, with_timeout};
use embedded_io_async::{Read, Write};
use esp_hal::rng::Rng;
use log::{debug, info, warn};
use mcp_device::{DeviceLink, Inbound};
use provisioning::{HubUrl, Scheme};
use serde_json::json;
use static_cell::StaticCell;
use ws_frames::{Frame, Frames};

use crate::status;
use crate::tools::Board;

/// TCP connect plus the HTTP upgrade.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the server has to answer the hello (the stock firmware's 10 s).
const HELLO_TIMEOUT: Duration = Duration::from_secs(10);
/// How often the device sends a WebSocket Ping.
pub const PING_PERIOD: Duration = Duration::from_secs(30);
/// Silence after which the link is taken for dead: two missed Pongs and some slack.
pub const DEAD_AFTER: Duration = Duration::from_secs(75);
/// Longest a frame may take to leave the device.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// Reconnect delays: doubled after each failed attempt, reset once the server said hello.
const MIN_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// The largest incoming frame kept (larger binary frames are skipped, larger text frames end the
/// session); also the limit for a text message reassembled from fragments.
const RX_BUF_LEN: usize = 8 * 1024;
/// The HTTP upgrade response headers.
const HTTP_BUF_LEN: usize = 2048;
const TCP_TX_LEN: usize = 4096;
const TCP_RX_LEN: usize = 4096;

/// BOOT-button presses (their running count), from the button task to the connection.
pub static BUTTON_PRESSES: Channel<CriticalSectionRawMutex, u32, 8> = Channel::new();

/// How the device introduces itself in the upgrade request.
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

/// Why a connection ended.
enum End {
    Dns(embassy_net::dns::Error),
    NoAddress,
    Tcp(TcpError),
    Http(edge_http::io::Error<TcpError>),
    Rejected(u16),
    Timeout(&'static str),
    Ws(edge_ws::Error<TcpError>),
    PeerClosed,
    CloseFrame(Option<u16>),
    BadHello(String),
    Protocol(&'static str),
    Silent,
    Reboot,
}

impl fmt::Display for End {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            End::Dns(e) => write!(f, "DNS lookup failed: {e:?}"),
            End::NoAddress => write!(f, "DNS gave no IPv4 address"),
            End::Tcp(e) => write!(f, "TCP: {e}"),
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
            End::Silent => write!(f, "nothing received for {} s: link dead", DEAD_AFTER.as_secs()),
            End::Reboot => write!(f, "rebooting"),
        }
    }
}

impl From<TcpError> for End {
    fn from(e: TcpError) -> Self {
        End::Tcp(e)
    }
}
impl From<edge_http::io::Error<TcpError>> for End {
    fn from(e: edge_http::io::Error<TcpError>) -> Self {
        End::Http(e)
    }
}
impl From<edge_ws::Error<TcpError>> for End {
    fn from(e: edge_ws::Error<TcpError>) -> Self {
        End::Ws(e)
    }
}

/// Connects to the hub and keeps reconnecting, forever.
pub async fn run(stack: Stack<'static>, hub_url: String, id: Identity, mut link: DeviceLink<Board>) -> ! {
    let url = match HubUrl::parse(&hub_url) {
        Ok(u) if u.scheme == Scheme::Wss => crate::park(alloc::format!(
            "hub: {}: wss:// needs TLS, which this firmware does not include; provision a ws:// URL \
             (a TLS-terminating proxy can sit in front of the hub)",
            provisioning::loggable_url(&hub_url)
        ))
        .await,
        Ok(u) => u,
        // The provisioning decoder has checked the URL already.
        Err(e) => crate::park(alloc::format!("hub: {}: {e}", provisioning::loggable_url(&hub_url))).await,
    };
    static TCP_BUFFERS: StaticCell<TcpBuffers<1, TCP_TX_LEN, TCP_RX_LEN>> = StaticCell::new();
    let tcp = Tcp::new(stack, TCP_BUFFERS.init(TcpBuffers::new()));
    let mut rx = vec![0u8; RX_BUF_LEN];
    let mut http_buf = vec![0u8; HTTP_BUF_LEN];
    let mut backoff = MIN_BACKOFF;
    loop {
        if !stack.is_config_up() {
            info!("hub: waiting for Wi-Fi and DHCP");
            stack.wait_config_up().await;
        }
        let ip = stack.config_v4().map(|c| c.address.address());
        status::set_ipv4(ip);
        if let Some(ip) = ip {
            info!("hub: own address {ip}, connecting to {}", provisioning::loggable_url(&hub_url));
        }
        let mut greeted = false;
        let end = session(stack, &tcp, &url, &id, &mut link, &mut rx, &mut http_buf, &mut greeted).await;
        status::set_ipv4(None);
        if matches!(end, End::Reboot) {
            info!("hub: rebooting as asked");
            Timer::after(Duration::from_millis(100)).await; // let the log line out
            esp_hal::system::software_reset();
        }
        if greeted {
            backoff = MIN_BACKOFF;
            warn!("hub: connection ended: {end}");
        } else {
            warn!("hub: connection failed: {end}");
        }
        // ±25 % jitter, so a room full of devices does not reconnect in lockstep.
        let jitter = 750 + u64::from(Rng::new().random() % 501);
        let delay = Duration::from_millis(backoff.as_millis() * jitter / 1000);
        info!("hub: reconnecting in {} ms", delay.as_millis());
        Timer::after(delay).await;
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

/// One connection, from DNS to the end of the WebSocket.
#[allow(clippy::too_many_arguments)]
async fn session(
    stack: Stack<'static>,
    tcp: &Tcp<'static>,
    url: &HubUrl<'_>,
    id: &Identity,
    link: &mut DeviceLink<Board>,
    rx: &mut [u8],
    http_buf: &mut [u8],
    greeted: &mut bool,
) -> End {
    let addrs = match with_timeout(CONNECT_TIMEOUT, stack.dns_query(url.host, DnsQueryType::A)).await {
        Ok(Ok(a)) => a,
        Ok(Err(e)) => return End::Dns(e),
        Err(_) => return End::Timeout("resolving the hub's name"),
    };
    let Some(ip) = addrs.first() else { return End::NoAddress };
    let addr = SocketAddr::new((*ip).into(), url.port);
    // Logged as its IPv4 parts: formatting a `SocketAddr` links in IPv6 formatting (~1.7 KB).
    let ip = match addr.ip() {
        core::net::IpAddr::V4(v4) => v4,
        core::net::IpAddr::V6(_) => return End::NoAddress,
    };

    let rng = Rng::new();
    let mut nonce = [0u8; NONCE_LEN];
    rng.read(&mut nonce);
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

    let mut conn: Connection<'_, _, 16> = Connection::new(http_buf, tcp, addr);
    let upgraded = with_timeout(CONNECT_TIMEOUT, async {
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
    info!("hub: WebSocket open to {ip}:{}", url.port);

    let mut out = String::new();
    if let Err(e) = send(&mut socket, FrameType::Text(false), link.hello().as_bytes()).await {
        return e;
    }
    let mut frames = Frames::default();
    let hello_deadline = Instant::now() + HELLO_TIMEOUT;
    let mut last_rx = Instant::now();
    let mut next_ping = Instant::now() + PING_PERIOD;
    let mut pings: u32 = 0;

    loop {
        let wake = if *greeted { next_ping } else { next_ping.min(hello_deadline) };
        let event = select3(socket.read(&mut rx[frames.filled..]), BUTTON_PRESSES.receive(), Timer::at(wake)).await;
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
                                if let Err(e) = send(&mut socket, FrameType::Text(false), out.as_bytes()).await {
                                    return e;
                                }
                                out.clear();
                            }
                            if link.server.state().reboot_requested {
                                // The stock firmware reboots 1 s after answering.
                                Timer::after(Duration::from_secs(1)).await;
                                let _ = send(&mut socket, FrameType::Close, &1001u16.to_be_bytes()).await;
                                return End::Reboot;
                            }
                        }
                        Ok(Some(Frame::Ping(payload))) => {
                            let mut pong = [0u8; 125];
                            let len = payload.len().min(pong.len());
                            pong[..len].copy_from_slice(&payload[..len]);
                            frames.consume(rx);
                            if let Err(e) = send(&mut socket, FrameType::Pong, &pong[..len]).await {
                                return e;
                            }
                        }
                        Ok(Some(Frame::Close(code))) => {
                            let echo = code.unwrap_or(1000).to_be_bytes();
                            let _ = send(&mut socket, FrameType::Close, &echo).await;
                            return End::CloseFrame(code);
                        }
                        Ok(Some(Frame::Skipped)) => frames.consume(rx),
                        Err(why) => {
                            let _ = send(&mut socket, FrameType::Close, &1009u16.to_be_bytes()).await;
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
                if now - last_rx >= DEAD_AFTER {
                    return End::Silent;
                }
                if now >= next_ping {
                    pings = pings.wrapping_add(1);
                    if let Err(e) = send(&mut socket, FrameType::Ping, &pings.to_be_bytes()).await {
                        return e;
                    }
                    next_ping = now + PING_PERIOD;
                }
            }
        }
        // Notifications (from tools or the button) go out once the session is established.
        if *greeted {
            while link.next_notification(&mut out) {
                if let Err(e) = send(&mut socket, FrameType::Text(false), out.as_bytes()).await {
                    return e;
                }
                out.clear();
            }
        }
    }
}

/// Sends one frame, masked as a client must, with a fresh key.
async fn send<W: Write<Error = TcpError>>(socket: &mut W, kind: FrameType, payload: &[u8]) -> Result<(), End> {
    let mask = Some(Rng::new().random());
    match with_timeout(WRITE_TIMEOUT, async {
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
