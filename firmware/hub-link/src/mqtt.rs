//! The MQTT transport: an MQTT 3.1.1 client of a broker (the protocol level of esp-mqtt in the stock
//! firmware), packets encoded and decoded by `mqttrs`.
//!
//! One session: TCP connect, CONNECT (clean session, the keep-alive, user name and password when
//! set), CONNACK, then SUBSCRIBE to the downlink, publish the hello (`"transport":"udp"`) on the
//! uplink, and from then on every downlink message goes through the `DeviceLink` and every reply
//! and notification is published on the uplink, all at QoS 0 as the stock firmware does.
//!
//! Where it differs from the stock firmware, on purpose:
//! - It **subscribes** to its downlink. Stock devices stopped doing so in 2025 and need a broker
//!   that subscribes them (EMQX `auto_subscribe`, mcpdev's embedded broker); with the SUBSCRIBE,
//!   any broker (Mosquitto with no set-up at all) works. The hub's OTA answer names the topic.
//! - A missing server hello does not end the session: over MQTT the hub may speak MCP without one
//!   (it stays idle, or it was restarted). The hello is sent again every [`Timing::dead_after`]
//!   until a hub answers it.
//!
//! **Keepalive.** A PINGREQ every [`Timing::ping`] (or half the CONNECT keep-alive, if shorter);
//! every broker answers PINGRESP, so silence for [`Timing::dead_after`] means the link is dead.

use alloc::string::{String, ToString};
use alloc::vec;

use embassy_futures::select::{Either, select};
use embassy_sync::blocking_mutex::raw::RawMutex;
use embassy_time::{Duration, Instant, Timer, with_timeout};
use embedded_io_async::{Read, Write};
use log::{debug, info, warn};
use mcp_device::DeviceLink;
use mqttrs::{
    Connect, ConnectReturnCode, Packet, Pid, Protocol, Publish, QoS, QosPid, Subscribe, SubscribeReturnCodes,
    SubscribeTopic, decode_slice, encode_slice,
};
use provisioning::HubUrl;
use serde_json::Value;

use crate::tls::{LinkError, Stream};
use crate::{Board, End, Timing, queue_press, take_text};

/// Where and how to reach the hub through a broker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MqttSettings {
    pub host: String,
    pub port: u16,
    /// TLS was asked for (`mqtts://`, or port 8883, the only port on which esp-mqtt uses TLS).
    pub tls: bool,
    pub client_id: String,
    /// Sent when not empty.
    pub username: String,
    /// Sent when not empty.
    pub password: String,
    /// Every device message goes here.
    pub publish_topic: String,
    /// The downlink the device subscribes to; empty: rely on the broker to deliver (stock style).
    pub subscribe_topic: String,
    /// The CONNECT keep-alive, in seconds.
    pub keepalive: u16,
}

/// The keep-alive when nobody named one: the stock firmware's 240 s.
const DEFAULT_KEEPALIVE: u16 = 240;
/// The MQTT port of an OTA `endpoint` without one (the stock firmware's default, TLS).
const OTA_DEFAULT_PORT: u16 = 8883;

impl MqttSettings {
    /// Straight to a broker (`mqtt://host[:port]`) with mcpdev's topic scheme, which the hub
    /// uses too: client id `GID_mcpdev@@@<mac with _>`, uplink `mcpdev/up/<client id>`, downlink
    /// `mcpdev/down/<client id>`. The provisioned device token, if any, is the password.
    pub fn for_broker(url: &HubUrl<'_>, device_id: &str, token: &str) -> Self {
        let client_id = alloc::format!("GID_mcpdev@@@{}", device_id.to_ascii_lowercase().replace([':', '-'], "_"));
        Self {
            host: url.host.to_string(),
            port: url.port,
            tls: url.scheme.is_tls(),
            publish_topic: alloc::format!("mcpdev/up/{client_id}"),
            subscribe_topic: alloc::format!("mcpdev/down/{client_id}"),
            client_id,
            username: String::new(),
            password: token.to_string(),
            keepalive: DEFAULT_KEEPALIVE,
        }
    }

    /// From the `mqtt` object of an OTA answer (reference §2.1): `endpoint` is `host[:port]`
    /// (8883, with TLS, when there is no port); `publish_topic` and `client_id` are required;
    /// `subscribe_topic`, `username`, `password` and `keepalive` are optional.
    pub fn from_ota(mqtt: &Value) -> Result<Self, String> {
        let text = |key: &str| mqtt.get(key).and_then(Value::as_str).unwrap_or_default().to_string();
        let endpoint = text("endpoint");
        let (host, port) = split_endpoint(&endpoint).ok_or_else(|| alloc::format!("mqtt.endpoint '{endpoint}' is not host[:port]"))?;
        let settings = Self {
            host: host.to_string(),
            port,
            tls: port == OTA_DEFAULT_PORT,
            client_id: text("client_id"),
            username: text("username"),
            password: text("password"),
            publish_topic: text("publish_topic"),
            subscribe_topic: text("subscribe_topic"),
            keepalive: mqtt
                .get("keepalive")
                .and_then(Value::as_u64)
                .and_then(|k| u16::try_from(k).ok())
                .unwrap_or(DEFAULT_KEEPALIVE),
        };
        if settings.client_id.is_empty() {
            return Err("mqtt.client_id is missing".into());
        }
        if settings.publish_topic.is_empty() {
            return Err("mqtt.publish_topic is missing".into());
        }
        Ok(settings)
    }

    /// How often to send a PINGREQ: every `ping`, or half the keep-alive if that is shorter.
    fn ping_every(&self, ping: Duration) -> Duration {
        match self.keepalive {
            0 => ping,
            k => ping.min(Duration::from_millis(u64::from(k) * 500)),
        }
    }
}

/// `host`, `host:port` or `[v6]:port`.
fn split_endpoint(endpoint: &str) -> Option<(&str, u16)> {
    let (host, port) = if let Some(v6) = endpoint.strip_prefix('[') {
        let (host, after) = v6.split_once(']')?;
        (host, after.strip_prefix(':'))
    } else {
        match endpoint.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (endpoint, None),
        }
    };
    let port = match port {
        None => OTA_DEFAULT_PORT,
        Some(p) => p.parse::<u16>().ok().filter(|p| *p != 0)?,
    };
    (!host.is_empty() && !host.contains(['/', ' '])).then_some((host, port))
}

/// One session with the broker over a connected `socket` (plain or TLS). `greeted` is set once
/// the broker accepted the device (the link is up from then on, with or without a hub). `rx`
/// holds incoming packets: the largest message accepted; larger ones are skipped.
#[allow(clippy::too_many_arguments)]
pub async fn session<T, S, M, const N: usize>(
    socket: &mut Stream<'_, T>,
    settings: &MqttSettings,
    link: &mut DeviceLink<S>,
    board: &Board<'_, S, M, N>,
    timing: &Timing,
    rx: &mut [u8],
    greeted: &mut bool,
) -> End<LinkError<T::Error>>
where
    T: Read + Write,
    M: RawMutex,
{
    let tx = Sender { timeout: timing.write };
    let connect = Packet::Connect(Connect {
        protocol: Protocol::MQTT311,
        keep_alive: settings.keepalive,
        client_id: &settings.client_id,
        clean_session: true,
        last_will: None,
        username: Some(settings.username.as_str()).filter(|u| !u.is_empty()),
        password: Some(settings.password.as_bytes()).filter(|p| !p.is_empty()),
    });
    if let Err(e) = tx.send(&mut *socket, &connect).await {
        return e;
    }
    let mut inbox = Inbox::default();
    let len = match with_timeout(timing.connect, inbox.fill(&mut *socket, rx)).await {
        Ok(Ok(len)) => len,
        Ok(Err(e)) => return e,
        Err(_) => return End::Timeout("waiting for the broker's CONNACK"),
    };
    match decode_slice(&rx[..len]) {
        Ok(Some(Packet::Connack(ack))) if ack.code == ConnectReturnCode::Accepted => {}
        Ok(Some(Packet::Connack(ack))) => return End::BrokerRefused(return_code(ack.code)),
        _ => return End::Protocol("the broker's first packet was not a CONNACK"),
    }
    inbox.consume(rx, len);
    *greeted = true;
    info!("hub: MQTT broker accepted client '{}'", settings.client_id);

    if !settings.subscribe_topic.is_empty() {
        let mut topic_path = heapless::String::new();
        if topic_path.push_str(&settings.subscribe_topic).is_err() {
            return End::Protocol("the subscribe topic is longer than 256 bytes");
        }
        let mut topics = heapless::Vec::new();
        let _ = topics.push(SubscribeTopic { topic_path, qos: QoS::AtMostOnce });
        if let Err(e) = tx.send(&mut *socket, &Packet::Subscribe(Subscribe::new(Pid::new(), topics))).await {
            return e;
        }
    }
    if let Err(e) = tx.publish(&mut *socket, &settings.publish_topic, &link.hello()).await {
        return e;
    }

    let mut hub_said_hello = false;
    let mut out = String::new();
    let ping_every = settings.ping_every(timing.ping);
    let mut last_rx = Instant::now();
    let mut next_ping = Instant::now() + ping_every;
    let mut next_hello = Instant::now() + timing.hello;
    loop {
        let wake = if hub_said_hello { next_ping } else { next_ping.min(next_hello) };
        let event = socket.read_or(inbox.free(rx), select(board.presses.receive(), Timer::at(wake))).await;
        out.clear();
        let (read, other) = event.split();
        if let Some(Either::First(presses)) = other {
            queue_press(link, presses);
        }
        match read {
            Some(Ok(0)) => return End::PeerClosed,
            Some(Ok(n)) => {
                last_rx = Instant::now();
                inbox.received(rx, n);
                loop {
                    let len = match inbox.next(rx) {
                        Ok(Some(len)) => len,
                        Ok(None) => break,
                        Err(why) => return End::Protocol(why),
                    };
                    let reply = match decode_slice(&rx[..len]) {
                        Ok(Some(Packet::Publish(p))) => {
                            let ack = match p.qospid {
                                QosPid::AtMostOnce => None,
                                QosPid::AtLeastOnce(pid) => Some(Packet::Puback(pid)),
                                QosPid::ExactlyOnce(pid) => Some(Packet::Pubrec(pid)),
                            };
                            match core::str::from_utf8(p.payload) {
                                Ok(text) => {
                                    if let Err(end) = take_text(link, text, &mut out, &mut hub_said_hello) {
                                        return end;
                                    }
                                }
                                Err(_) => debug!("hub: a message on '{}' that is not UTF-8, ignored", p.topic_name),
                            }
                            ack
                        }
                        Ok(Some(Packet::Pubrel(pid))) => Some(Packet::Pubcomp(pid)),
                        Ok(Some(Packet::Suback(ack))) => {
                            if ack.return_codes.contains(&SubscribeReturnCodes::Failure) {
                                return End::Protocol("the broker refused the subscription to the downlink topic");
                            }
                            info!("hub: subscribed to '{}'", settings.subscribe_topic);
                            None
                        }
                        Ok(Some(Packet::Pingresp)) => None,
                        Ok(Some(Packet::Disconnect)) => return End::PeerClosed,
                        Ok(Some(other)) => {
                            debug!("hub: MQTT {:?} ignored", other.get_type());
                            None
                        }
                        Ok(None) | Err(_) => return End::Protocol("an MQTT packet that does not decode"),
                    };
                    inbox.consume(rx, len);
                    if let Some(ack) = reply
                        && let Err(e) = tx.send(&mut *socket, &ack).await
                    {
                        return e;
                    }
                    if !out.is_empty() {
                        if let Err(e) = tx.publish(&mut *socket, &settings.publish_topic, &out).await {
                            return e;
                        }
                        out.clear();
                    }
                    if (board.reboot_requested)(link.server.state()) {
                        // The stock firmware reboots 1 s after answering; over MQTT it says goodbye.
                        Timer::after(Duration::from_secs(1)).await;
                        let _ = tx.publish(&mut *socket, &settings.publish_topic, &link.goodbye()).await;
                        let _ = tx.write(&mut *socket, &DISCONNECT).await;
                        return End::Reboot;
                    }
                }
            }
            Some(Err(e)) => return End::Tcp(e),
            None => {
                let now = Instant::now();
                if now - last_rx >= timing.dead_after {
                    return End::Silent(timing.dead_after);
                }
                if !hub_said_hello && now >= next_hello {
                    warn!("hub: no server hello on the downlink yet; saying hello again");
                    if let Err(e) = tx.publish(&mut *socket, &settings.publish_topic, &link.hello()).await {
                        return e;
                    }
                    next_hello = now + timing.dead_after;
                }
                if now >= next_ping {
                    if let Err(e) = tx.write(&mut *socket, &PINGREQ).await {
                        return e;
                    }
                    next_ping = now + ping_every;
                }
            }
        }
        // Notifications (from tools or the button) go out once a hub is there to get them.
        if hub_said_hello {
            while link.next_notification(&mut out) {
                if let Err(e) = tx.publish(&mut *socket, &settings.publish_topic, &out).await {
                    return e;
                }
                out.clear();
            }
        }
    }
}

fn return_code(code: ConnectReturnCode) -> u8 {
    match code {
        ConnectReturnCode::Accepted => 0,
        ConnectReturnCode::RefusedProtocolVersion => 1,
        ConnectReturnCode::RefusedIdentifierRejected => 2,
        ConnectReturnCode::ServerUnavailable => 3,
        ConnectReturnCode::BadUsernamePassword => 4,
        ConnectReturnCode::NotAuthorized => 5,
    }
}

/// Encodes packets and writes them whole, within a time limit.
struct Sender {
    timeout: Duration,
}

/// PINGREQ and DISCONNECT, encoded (MQTT 3.1.1 §3.12 and §3.14: the packet type, no flags, no
/// remaining bytes; a test checks them against mqttrs). Sent as bytes because
/// `&Packet::Pingreq` is promoted to a constant as large as the largest packet: 1.3 KB of the
/// ESP32-C3 image each.
const PINGREQ: [u8; 2] = [0xC0, 0x00];
const DISCONNECT: [u8; 2] = [0xE0, 0x00];

impl Sender {
    async fn send<W: Write>(&self, socket: &mut W, packet: &Packet<'_>) -> Result<(), End<W::Error>> {
        let size = match packet {
            Packet::Publish(p) => p.topic_name.len() + p.payload.len() + 16,
            Packet::Connect(c) => {
                c.client_id.len() + c.username.map_or(0, str::len) + c.password.map_or(0, <[u8]>::len) + 32
            }
            Packet::Subscribe(s) => s.topics.iter().map(|t| t.topic_path.len() + 3).sum::<usize>() + 8,
            _ => 8,
        };
        let mut buf = vec![0u8; size];
        let Ok(len) = encode_slice(packet, &mut buf) else {
            return Err(End::Protocol("an MQTT packet that does not encode"));
        };
        self.write(socket, &buf[..len]).await
    }

    /// Writes one encoded packet.
    async fn write<W: Write>(&self, socket: &mut W, bytes: &[u8]) -> Result<(), End<W::Error>> {
        match with_timeout(self.timeout, async {
            socket.write_all(bytes).await?;
            socket.flush().await
        })
        .await
        {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(End::Tcp(e)),
            Err(_) => Err(End::Timeout("sending to the broker")),
        }
    }

    /// A QoS 0 publish of one text message.
    async fn publish<W: Write>(&self, socket: &mut W, topic: &str, text: &str) -> Result<(), End<W::Error>> {
        let publish =
            Publish { dup: false, qospid: QosPid::AtMostOnce, retain: false, topic_name: topic, payload: text.as_bytes() };
        self.send(socket, &Packet::Publish(publish)).await
    }
}

/// The receive buffer's bookkeeping: how much of it is filled, and how many bytes of a packet too
/// large for it are still to be skipped.
#[derive(Debug, Default)]
struct Inbox {
    filled: usize,
    skip: usize,
}

impl Inbox {
    /// Where the next read goes.
    fn free<'b>(&self, rx: &'b mut [u8]) -> &'b mut [u8] {
        &mut rx[self.filled..]
    }

    /// `n` bytes were read into [`Inbox::free`]; the ones of a skipped packet are dropped.
    fn received(&mut self, rx: &mut [u8], n: usize) {
        let dropped = n.min(self.skip);
        self.skip -= dropped;
        rx.copy_within(self.filled + dropped..self.filled + n, self.filled);
        self.filled += n - dropped;
    }

    /// The length of the complete packet at the start of the buffer, if there is one. A packet
    /// larger than the buffer is skipped (with a log line).
    fn next(&mut self, rx: &mut [u8]) -> Result<Option<usize>, &'static str> {
        let Some(len) = packet_len(&rx[..self.filled])? else { return Ok(None) };
        if len > rx.len() {
            warn!("hub: skipping an MQTT packet of {len} bytes (the limit is {})", rx.len());
            self.skip = len - self.filled;
            self.filled = 0;
            return Ok(None);
        }
        Ok((len <= self.filled).then_some(len))
    }

    fn consume(&mut self, rx: &mut [u8], len: usize) {
        rx.copy_within(len..self.filled, 0);
        self.filled -= len;
    }

    /// Reads until one complete packet is in the buffer; its length.
    async fn fill<R: Read>(&mut self, socket: &mut R, rx: &mut [u8]) -> Result<usize, End<R::Error>> {
        loop {
            if let Some(len) = self.next(rx).map_err(End::Protocol)? {
                return Ok(len);
            }
            match socket.read(self.free(rx)).await {
                Ok(0) => return Err(End::PeerClosed),
                Ok(n) => self.received(rx, n),
                Err(e) => return Err(End::Tcp(e)),
            }
        }
    }
}

/// The whole length (fixed header included) of the packet `buf` starts with, once its header is
/// complete; the remaining-length field is at most 4 bytes (MQTT 3.1.1 §2.2.3).
fn packet_len(buf: &[u8]) -> Result<Option<usize>, &'static str> {
    let mut remaining = 0usize;
    for i in 0..4 {
        let Some(&byte) = buf.get(1 + i) else { return Ok(None) };
        remaining |= usize::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Ok(Some(2 + i + remaining));
        }
    }
    Err("an MQTT remaining length longer than 4 bytes")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pingreq_and_disconnect_bytes_are_mqttrs_encodings() {
        for (packet, bytes) in [(Packet::Pingreq, PINGREQ), (Packet::Disconnect, DISCONNECT)] {
            let mut buf = [0u8; 8];
            let len = encode_slice(&packet, &mut buf).unwrap();
            assert_eq!(&buf[..len], bytes, "{packet:?}");
        }
    }

    #[test]
    fn settings_from_an_ota_answer() {
        let s = MqttSettings::from_ota(&json!({
            "endpoint": "192.168.1.5:1883", "client_id": "GID_x@@@aa_bb_cc_dd_ee_ff", "username": "u",
            "password": "p", "publish_topic": "mcpdev/up/x", "subscribe_topic": "mcpdev/down/x", "keepalive": 60
        }))
        .unwrap();
        assert_eq!((s.host.as_str(), s.port, s.tls, s.keepalive), ("192.168.1.5", 1883, false, 60));
        assert_eq!((s.username.as_str(), s.password.as_str()), ("u", "p"));
        assert_eq!(s.subscribe_topic, "mcpdev/down/x");
        // The stock defaults: port 8883 (TLS there only), keep-alive 240, no subscribe topic.
        let s = MqttSettings::from_ota(&json!({"endpoint": "mqtt.example", "client_id": "c", "publish_topic": "up"})).unwrap();
        assert_eq!((s.port, s.tls, s.keepalive, s.subscribe_topic.as_str()), (8883, true, 240, ""));
        let s = MqttSettings::from_ota(&json!({"endpoint": "[fe80::1]:1884", "client_id": "c", "publish_topic": "up"})).unwrap();
        assert_eq!((s.host.as_str(), s.port), ("fe80::1", 1884));
        for (bad, why) in [
            (json!({"client_id": "c", "publish_topic": "up"}), "endpoint"),
            (json!({"endpoint": "h:0", "client_id": "c", "publish_topic": "up"}), "endpoint"),
            (json!({"endpoint": "h:x", "client_id": "c", "publish_topic": "up"}), "endpoint"),
            (json!({"endpoint": "h", "publish_topic": "up"}), "client_id"),
            (json!({"endpoint": "h", "client_id": "c"}), "publish_topic"),
        ] {
            let err = MqttSettings::from_ota(&bad).unwrap_err();
            assert!(err.contains(why), "{bad}: {err}");
        }
    }

    #[test]
    fn settings_for_a_broker_follow_the_hub_topic_scheme() {
        let url = HubUrl::parse("mqtt://broker.lan").unwrap();
        let s = MqttSettings::for_broker(&url, "AA:BB:CC:DD:EE:01", "tok");
        assert_eq!(s.client_id, "GID_mcpdev@@@aa_bb_cc_dd_ee_01");
        assert_eq!(s.publish_topic, "mcpdev/up/GID_mcpdev@@@aa_bb_cc_dd_ee_01");
        assert_eq!(s.subscribe_topic, "mcpdev/down/GID_mcpdev@@@aa_bb_cc_dd_ee_01");
        assert_eq!((s.host.as_str(), s.port, s.tls, s.password.as_str()), ("broker.lan", 1883, false, "tok"));
        assert!(MqttSettings::for_broker(&HubUrl::parse("mqtts://b").unwrap(), "aa:bb:cc:dd:ee:01", "").tls);
        assert_eq!(s.ping_every(Duration::from_secs(30)), Duration::from_secs(30));
        let short = MqttSettings { keepalive: 20, ..s };
        assert_eq!(short.ping_every(Duration::from_secs(30)), Duration::from_secs(10));
    }

    #[test]
    fn packet_lengths() {
        assert_eq!(packet_len(&[]), Ok(None));
        assert_eq!(packet_len(&[0xd0]), Ok(None));
        assert_eq!(packet_len(&[0xd0, 0x00]), Ok(Some(2)));
        assert_eq!(packet_len(&[0x30, 0x80]), Ok(None));
        assert_eq!(packet_len(&[0x30, 0x80, 0x01]), Ok(Some(3 + 128)));
        assert_eq!(packet_len(&[0x30, 0xff, 0xff, 0xff, 0x7f]), Ok(Some(5 + 268_435_455)));
        assert!(packet_len(&[0x30, 0xff, 0xff, 0xff, 0xff, 0x01]).is_err());
    }

    #[test]
    fn an_oversized_packet_is_skipped_and_the_next_one_kept() {
        let mut rx = [0u8; 16];
        let mut inbox = Inbox::default();
        // A 40-byte publish (header 0x30, remaining 38), then a PINGRESP, arriving in pieces.
        let mut stream = vec![0x30, 38];
        stream.extend([7u8; 38]);
        stream.extend([0xd0, 0x00]);
        let mut fed = 0;
        let mut seen = vec![];
        while fed < stream.len() {
            let free = inbox.free(&mut rx);
            let n = free.len().min(stream.len() - fed).min(10);
            free[..n].copy_from_slice(&stream[fed..fed + n]);
            fed += n;
            inbox.received(&mut rx, n);
            while let Some(len) = inbox.next(&mut rx).unwrap() {
                seen.push(rx[..len].to_vec());
                inbox.consume(&mut rx, len);
            }
        }
        assert_eq!(seen, vec![vec![0xd0, 0x00]]);
        assert_eq!((inbox.filled, inbox.skip), (0, 0));
    }
}
