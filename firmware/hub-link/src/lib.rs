//! The device's connection to its hub, one session at a time, over either transport of xiaozhi
//! devices, with MCP through `mcp-device`:
//! - [`ws`]: a WebSocket with the xiaozhi headers, the hello, keepalive Pings;
//! - [`mqtt`]: an MQTT 3.1.1 client of a broker, with the uplink/downlink topics and the UDP hello;
//! - [`ota`]: the check-in at an OTA endpoint that tells the device which of the two to use;
//! - [`Backoff`]: the reconnect delays.
//!
//! It is generic over the TCP stack ([`edge_nal::TcpConnect`]) and uses `embassy-time`, so the
//! firmware runs it on embassy-net while the host tests run the very same code over std sockets
//! against a real WebSocket server, a real MQTT broker and the real mcpdev hub.
//!
//! Unlike the stock firmware, which opens its WebSocket only for a voice session, the device keeps
//! its connection up, so the hub can use its MCP tools at any time.
#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

pub mod connect;
pub mod fuzz;
mod http;
pub mod mqtt;
pub mod ota;
pub mod tls;
pub mod ws;

use alloc::string::String;
use core::fmt;

use embassy_sync::blocking_mutex::raw::RawMutex;
use embassy_sync::channel::Channel;
use embassy_time::Duration;
use log::{debug, info};
use mcp_device::{DeviceLink, Inbound};
use serde_json::{Map, Value};

/// The time limits of a session.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// TCP connect plus the HTTP upgrade or the MQTT CONNECT; also the whole OTA check-in.
    pub connect: Duration,
    /// How long the server has to answer the hello (the stock firmware's 10 s).
    pub hello: Duration,
    /// How often the device sends a keepalive (a WebSocket Ping, an MQTT PINGREQ).
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

/// The header that carries [`Identity::device_key`] (the mcpdev hub's `Mcpdev-Device-Key`).
pub const DEVICE_KEY_HEADER: &str = "Mcpdev-Device-Key";

/// How the device introduces itself in the upgrade request and at OTA check-ins.
#[derive(Clone)]
pub struct Identity {
    /// `Device-Id`: the lower-case station MAC.
    pub device_id: String,
    /// `Client-Id`: a UUID.
    pub client_id: String,
    /// The device token (empty: none): the `Authorization` header over WebSocket, the password
    /// over MQTT straight to a broker.
    pub token: String,
    /// A per-device secret (empty: none), sent as [`DEVICE_KEY_HEADER`] with OTA check-ins and
    /// `/activate` polls: the hub binds the admission request to it, so a stranger who knows the
    /// MAC and the Client-Id cannot collect this device's token. Only the OTA endpoint gets it.
    pub device_key: String,
}

/// The token and the device key stay out of logs.
impl fmt::Debug for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shown = |s: &str| if s.is_empty() { "(none)" } else { "(redacted)" };
        f.debug_struct("Identity")
            .field("device_id", &self.device_id)
            .field("client_id", &self.client_id)
            .field("token", &shown(&self.token))
            .field("device_key", &shown(&self.device_key))
            .finish()
    }
}

impl Identity {
    /// The `Authorization` header's value, when there is a token.
    pub fn authorization(&self) -> Option<String> {
        Self::authorization_for(&self.token)
    }

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
    /// Random numbers: the WebSocket key and the frame masks, the backoff jitter.
    pub random: fn() -> u32,
    /// Whether a tool asked for a reboot (checked after every reply).
    pub reboot_requested: fn(&S) -> bool,
    /// The system info posted at an OTA check-in (the stock body, reference §3.1).
    pub system_info: fn(&S) -> String,
    /// The `User-Agent` of an OTA check-in: `<board>/<version>`.
    pub user_agent: &'a str,
    /// BOOT-button presses (their running count), queued as notifications.
    pub presses: &'a Channel<M, u32, N>,
    /// The hub CA from the provisioning record: with it the device connects only over TLS, to
    /// that hub; without it, only in plain text.
    pub trust: Option<&'a tls::Trust>,
}

/// Why a session ended.
#[derive(Debug)]
pub enum End<E> {
    Tcp(E),
    Http(edge_http::io::Error<E>),
    Rejected(u16),
    /// The broker refused the CONNECT (the MQTT 3.1.1 return code).
    BrokerRefused(u8),
    /// The OTA endpoint's answer could not be used.
    Ota(String),
    /// A host name did not resolve (the host, why).
    Resolve(String, &'static str),
    /// Settings this firmware cannot use (TLS without a CA, a bad URL); retrying will not help
    /// until they change.
    Unusable(String),
    /// A plain URL (shown) for a device that has a hub CA: refused, never connected to.
    Downgrade(String),
    /// The TLS handshake failed or the hub's certificate was refused (the reason).
    Tls(String),
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
            End::Tcp(e) => write!(f, "connection: {e:?}"),
            End::Http(e) => write!(f, "HTTP upgrade: {e:?}"),
            End::Rejected(401) => write!(f, "the hub refused the device (401): check the device token"),
            End::Rejected(code) => write!(f, "the hub answered with HTTP {code}"),
            End::BrokerRefused(4) => write!(f, "the broker refused the user name or password (4): check the device token"),
            End::BrokerRefused(5) => write!(f, "the broker refused the device as not authorized (5)"),
            End::BrokerRefused(2) => write!(f, "the broker refused the client id (2)"),
            End::BrokerRefused(code) => write!(f, "the broker refused the connection (return code {code})"),
            End::Ota(why) => write!(f, "OTA check-in: {why}"),
            End::Resolve(host, why) => write!(f, "DNS lookup of {host}: {why}"),
            End::Unusable(why) => write!(f, "{why}"),
            End::Downgrade(url) => write!(
                f,
                "refused {url}: this device has its hub's CA and talks to the hub only over TLS (wss://, https://, mqtts://); a plain connection would be a downgrade"
            ),
            End::Tls(why) => write!(f, "{why}"),
            End::Timeout(what) => write!(f, "timed out {what}"),
            End::Ws(e) => write!(f, "WebSocket: {e:?}"),
            End::PeerClosed => write!(f, "the hub or broker closed the TCP connection"),
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

/// What a session of either transport does with one incoming text message: the link handles it
/// (a reply lands in `out`) and it is logged. `Err` ends the session.
fn take_text<S, E>(link: &mut DeviceLink<S>, text: &str, out: &mut String, greeted: &mut bool) -> Result<(), End<E>> {
    match link.on_text(text, out) {
        Inbound::Hello { session_id } => {
            *greeted = true;
            info!("hub: server hello, session '{session_id}'; MCP is up");
        }
        Inbound::BadHello(why) => return Err(End::BadHello(why)),
        Inbound::Mcp { replied } => debug!("hub: MCP message (replied: {replied})"),
        Inbound::Goodbye => info!("hub: the server ended the session"),
        Inbound::Other { kind } => debug!("hub: '{kind}' message ignored"),
        Inbound::Ignored(why) => debug!("hub: message ignored: {why}"),
    }
    Ok(())
}

/// A BOOT-button press (the running count) becomes a `state_changed` notification.
fn queue_press<S>(link: &mut DeviceLink<S>, presses: u32) {
    info!("button: BOOT pressed ({presses})");
    // Inserted one by one, not with `json!` (which goes through `serde_json::to_value`, a
    // serializer the firmware otherwise does not link) nor `Map::from_iter` (which sorts).
    let mut params = Map::new();
    params.insert(String::from("what"), Value::from("button.boot"));
    params.insert(String::from("oldState"), Value::from("released"));
    params.insert(String::from("newState"), Value::from("pressed"));
    params.insert(String::from("presses"), Value::from(presses));
    link.server.outbox().notify(
        "notifications/state_changed",
        &Value::Object(params),
    );
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
    fn debug_hides_the_token_and_the_device_key() {
        let id = Identity {
            device_id: "aa:bb:cc:dd:ee:ff".into(),
            client_id: "c".into(),
            token: "tok-secret".into(),
            device_key: "key-secret-0123456789".into(),
        };
        let text = alloc::format!("{id:?}");
        assert!(!text.contains("secret") && text.contains("aa:bb:cc:dd:ee:ff") && text.contains("(redacted)"), "{text}");
        let none = Identity { token: String::new(), device_key: String::new(), ..id };
        assert!(alloc::format!("{none:?}").contains("device_key: \"(none)\""));
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
