//! One connection to a broker (rumqttc): the broker URL, the client options, and a task that
//! polls the event loop, reconnects after errors (with a short backoff), and reports what
//! happened as [`ConnEvent`]s. Whoever owns the connection subscribes again on every
//! [`ConnEvent::Up`]: sessions are clean, so a broker restart forgets subscriptions.
//!
//! The event loop is never held up by a slow reader until [`BACKLOG_BYTES`] of messages wait for
//! it: the connection keeps its keepalive while the reader catches up, and past that bound it
//! stops reading (the broker holds the rest), so memory stays bounded whatever arrives. While the
//! reader keeps up, a message goes to it directly, without the backlog's extra task hop; the
//! order is always the broker's.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use rumqttc::{AsyncClient, ConnectionError, Event, LastWill, MqttOptions, Packet, Publish, Transport};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, watch};
use tracing::debug;

/// `mqtt://[user[:password]@]host[:port]` (1883) or `mqtts://…` (8883, TLS verified as every
/// client of mcpdev verifies: [`crate::tls::client`], the system's roots or `MCPDEV_CA_FILE`, or a
/// pinned fingerprint).
#[derive(Clone, PartialEq, Eq)]
pub struct BrokerUrl {
    pub host: String,
    pub port: u16,
    pub tls: bool,
    pub username: Option<String>,
    pub password: Option<String>,
}

/// Never shows the password.
impl std::fmt::Debug for BrokerUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{self}")
    }
}

impl std::fmt::Display for BrokerUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let scheme = if self.tls { "mqtts" } else { "mqtt" };
        let user = self.username.as_deref().map(|u| format!("{u}@")).unwrap_or_default();
        let host = if self.host.contains(':') { format!("[{}]", self.host) } else { self.host.clone() };
        write!(f, "{scheme}://{user}{host}:{}", self.port)
    }
}

/// Where a password may come from besides the URL (keeps it out of `ps` and shell history).
pub const PASSWORD_ENV: &str = "MCPDEV_MQTT_PASSWORD";

impl BrokerUrl {
    pub fn parse(url: &str) -> Result<Self, String> {
        let bad = |why: &str| format!("{url:?} is not a broker URL like mqtt://host:1883 or mqtts://user@host ({why})");
        let (tls, rest) = match url.split_once("://") {
            Some(("mqtt" | "tcp", rest)) => (false, rest),
            Some(("mqtts" | "ssl" | "tls", rest)) => (true, rest),
            Some((other, _)) => return Err(bad(&format!("unknown scheme {other:?}"))),
            None => (false, url),
        };
        let rest = rest.trim_end_matches('/');
        let (userinfo, hostport) = match rest.rsplit_once('@') {
            Some((u, h)) => (Some(u), h),
            None => (None, rest),
        };
        let (username, password) = match userinfo {
            Some(u) => match u.split_once(':') {
                Some((user, pass)) => (Some(user.to_string()), Some(pass.to_string())),
                None => (Some(u.to_string()), None),
            },
            None => (None, None),
        };
        let default_port = if tls { 8883 } else { 1883 };
        let (host, port) = if let Some(v6) = hostport.strip_prefix('[') {
            let (h, after) = v6.split_once(']').ok_or_else(|| bad("unclosed ["))?;
            let port = match after.strip_prefix(':') {
                Some(p) => p.parse().map_err(|_| bad("bad port"))?,
                None => default_port,
            };
            (h.to_string(), port)
        } else {
            match hostport.rsplit_once(':') {
                Some((h, p)) => (h.to_string(), p.parse().map_err(|_| bad("bad port"))?),
                None => (hostport.to_string(), default_port),
            }
        };
        if host.is_empty() || host.contains('/') {
            return Err(bad("no host"));
        }
        let password = password.or_else(|| std::env::var(PASSWORD_ENV).ok().filter(|p| !p.is_empty()));
        Ok(Self { host, port, tls, username, password })
    }

    /// Client options: clean session, the given keepalive, packets up to `max_packet` bytes.
    pub fn options(&self, client_id: &str, keepalive: Duration, max_packet: usize) -> MqttOptions {
        let mut o = MqttOptions::new(client_id, self.host.clone(), self.port);
        o.set_keep_alive(keepalive.max(Duration::from_secs(1)));
        o.set_clean_session(true);
        o.set_max_packet_size(max_packet, max_packet);
        if self.username.is_some() || self.password.is_some() {
            o.set_credentials(self.username.clone().unwrap_or_default(), self.password.clone().unwrap_or_default());
        }
        if self.tls {
            crate::tls::install_crypto_provider();
            match crate::tls::client::plain_config() {
                Ok(config) => {
                    o.set_transport(Transport::Tls(rumqttc::TlsConfiguration::Rustls(config)));
                }
                // Connecting then fails on the certificate, and says so; the trust's own problem is logged here.
                Err(e) => {
                    tracing::warn!("{e}; connecting to {self} with the system's roots only");
                    o.set_transport(Transport::tls_with_default_config());
                }
            }
        }
        o
    }
}

/// What a connection reports.
#[derive(Debug)]
pub enum ConnEvent {
    /// Connected (again): subscribe now.
    Up,
    /// The broker cannot be reached or the link broke; reconnecting.
    Down(String),
    /// The broker acknowledged a subscription.
    Subscribed,
    Message(Publish),
}

/// A connection and its reports. Dropping `events` stops it.
pub struct Connection {
    pub client: AsyncClient,
    /// `true` while connected.
    pub up: watch::Receiver<bool>,
    pub events: mpsc::Receiver<ConnEvent>,
}

/// Bytes of messages taken off the broker that the reader of [`Connection::events`] has not
/// read yet, beyond which the connection stops reading (the broker holds the rest). Below it the
/// event loop is polled while the reader catches up, so the keepalive ping goes out and its
/// answer is read in time: when the event loop waited on a full channel instead, a hub whose
/// reader fell behind a burst (a fleet joining: claims, index shards, thousands of uplinks) lost
/// its broker connection to its own keepalive, and the reconnect brought every retained claim
/// and index again.
pub const BACKLOG_BYTES: usize = 64 << 20;

/// What one event weighs against [`BACKLOG_BYTES`].
fn weight(event: &ConnEvent) -> u32 {
    match event {
        ConnEvent::Message(p) => (p.topic.len() + p.payload.len()).clamp(1, BACKLOG_BYTES) as u32,
        _ => 1,
    }
}

/// Starts connecting; the task reconnects until `events` is dropped.
pub fn connect(options: MqttOptions, will: Option<LastWill>) -> Connection {
    let mut options = options;
    if let Some(w) = will {
        options.set_last_will(w);
    }
    let (client, mut eventloop) = AsyncClient::new(options, 4096);
    // Small request/answer messages: no Nagle delay.
    let mut network = rumqttc::NetworkOptions::new();
    network.set_tcp_nodelay(true);
    eventloop.set_network_options(network);
    let (up_tx, up) = watch::channel(false);
    let (out, events) = mpsc::channel(4096);
    // The backlog: the event loop hands events to `tx` as long as the bytes not yet read stay
    // under BACKLOG_BYTES (each event holds its weight in permits until the reader has it); a
    // second task passes them on, in order, to the reader's bounded channel.
    // While nothing waits in the backlog and the reader's channel has room, an event goes
    // straight to the reader: one task hop less for every message (a hub-to-hub request and its
    // answer each cross one), and the order stays the broker's.
    let backlog = Arc::new(Semaphore::new(BACKLOG_BYTES));
    let queued = Arc::new(AtomicUsize::new(0));
    let (tx, mut backlogged) = mpsc::unbounded_channel::<(ConnEvent, OwnedSemaphorePermit)>();
    let direct = out.clone();
    let handed_on = queued.clone();
    tokio::spawn(async move {
        while let Some((event, permit)) = backlogged.recv().await {
            if out.send(event).await.is_err() {
                return;
            }
            drop(permit);
            handed_on.fetch_sub(1, Ordering::AcqRel);
        }
    });
    let tx = Backlog { tx, permits: backlog, direct, queued };
    tokio::spawn(async move {
        let mut backoff = Duration::from_millis(50);
        let mut reported_down = false;
        loop {
            let outcome = eventloop.poll().await;
            if let Ok(Event::Incoming(_)) = &outcome {
                heard_from_broker(&mut eventloop);
            }
            let event = match outcome {
                Ok(Event::Incoming(Packet::ConnAck(_))) => {
                    backoff = Duration::from_millis(50);
                    reported_down = false;
                    up_tx.send_replace(true);
                    ConnEvent::Up
                }
                Ok(Event::Incoming(Packet::Publish(p))) => ConnEvent::Message(p),
                Ok(Event::Incoming(Packet::SubAck(_))) => ConnEvent::Subscribed,
                Ok(_) => continue,
                Err(e) => {
                    requeue_held(&mut eventloop);
                    let was_up = up_tx.send_replace(false);
                    let why = describe(&e);
                    debug!(%why, "MQTT connection error");
                    if was_up || !reported_down {
                        reported_down = true;
                        if tx.send(ConnEvent::Down(why)).await.is_err() {
                            return;
                        }
                    }
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(2));
                    continue;
                }
            };
            if tx.send(event).await.is_err() {
                return;
            }
        }
    });
    Connection { client, up, events }
}

/// A packet came from the broker: the connection works, whether or not the answer to the last
/// ping is among what came.
///
/// rumqttc ends a connection when a keepalive period passes with no answer to its ping ("Last
/// pingreq isn't acked"), whatever else arrived meanwhile. The broker sends the answer after all
/// it queued for this client before it, so behind a burst (a fleet joining: claims, index shards,
/// uplinks; a reconnect's replay of every retained record) the answer came more than the 5 s
/// keepalive after the ping while messages kept arriving: at 100,000 devices on 6 hubs, 12
/// broker connections ended so in one run, each reconnect replaying every retained claim and
/// index to the hub again (more of the same burst), and the broker publishing the hub's will
/// (the others took its devices over). A packet read after the ping was sent (rumqttc sends a
/// ping only once every packet read before it was handed on) is taken as the answer: the
/// connection ends only when the broker sends nothing at all for a whole keepalive period.
fn heard_from_broker(eventloop: &mut rumqttc::EventLoop) {
    eventloop.state.await_pingresp = false;
}

/// After a connection error: a publish rumqttc holds back because its packet id collided with
/// one still in flight goes back to the queue, right after that one, with a fresh id.
///
/// rumqttc 0.25 keeps the held publish across a reconnect and takes nothing new until the
/// publish it waits on is acknowledged; when that one is not in the new connection, it never
/// is, and the connection ends every two keepalives ("Timeout while waiting to resolve
/// collision") for good: at 100,000 devices two hubs of six did that for minutes, cut off from
/// the cluster. Queued again, the held publish is sent in the new connection like any other.
fn requeue_held(eventloop: &mut rumqttc::EventLoop) {
    let Some(mut held) = eventloop.state.collision.take() else { return };
    let waited_on = held.pkid;
    held.pkid = 0;
    let after = eventloop.pending.iter().position(|r| matches!(r, rumqttc::Request::Publish(p) if p.pkid == waited_on)).map_or(0, |i| i + 1);
    debug!(topic = %held.topic, "MQTT: a publish held back by a packet-id collision is queued again");
    eventloop.pending.insert(after, rumqttc::Request::Publish(held));
}

/// The event loop's side of the backlog.
struct Backlog {
    tx: mpsc::UnboundedSender<(ConnEvent, OwnedSemaphorePermit)>,
    permits: Arc<Semaphore>,
    /// The reader's channel, for an event that need not wait behind the backlog.
    direct: mpsc::Sender<ConnEvent>,
    /// Events in the backlog not yet handed to the reader's channel.
    queued: Arc<AtomicUsize>,
}

impl Backlog {
    /// Hands `event` to the reader at once when nothing is backlogged and its channel has room,
    /// else queues it once the backlog has room for it; `Err` once the reader is gone.
    async fn send(&self, event: ConnEvent) -> Result<(), ()> {
        let event = if self.queued.load(Ordering::Acquire) == 0 {
            match self.direct.try_send(event) {
                Ok(()) => return Ok(()),
                Err(mpsc::error::TrySendError::Closed(_)) => return Err(()),
                Err(mpsc::error::TrySendError::Full(event)) => event,
            }
        } else {
            event
        };
        let permit = self.permits.clone().acquire_many_owned(weight(&event)).await.map_err(|_| ())?;
        self.queued.fetch_add(1, Ordering::AcqRel);
        self.tx.send((event, permit)).map_err(|_| ())
    }
}

fn describe(e: &ConnectionError) -> String {
    match e {
        ConnectionError::ConnectionRefused(code) => format!("the broker refused the connection ({code:?})"),
        ConnectionError::Io(io) => format!("{io}"),
        other => crate::tls::client::explain(other).unwrap_or_else(|| other.to_string()),
    }
}


#[cfg(test)]
mod tests {
    use super::*;

    fn publish(topic: &str, pkid: u16) -> Publish {
        let mut p = Publish::new(topic, rumqttc::QoS::AtLeastOnce, "x");
        p.pkid = pkid;
        p
    }

    fn topics(pending: &std::collections::VecDeque<rumqttc::Request>) -> Vec<(String, u16)> {
        pending.iter().map(|r| match r {
            rumqttc::Request::Publish(p) => (p.topic.clone(), p.pkid),
            other => panic!("{other:?}"),
        }).collect()
    }

    /// The stuck state seen at 100,000 devices: a held publish whose collision partner is not
    /// in the next connection. It goes back to the queue (a fresh id), nothing is held, so the
    /// event loop takes requests again; with its partner queued, it follows that one.
    #[tokio::test]
    async fn a_publish_held_by_a_collision_is_queued_again_after_a_connection_error() {
        let (_client, mut eventloop) = AsyncClient::new(MqttOptions::new("t", "127.0.0.1", 1), 8);
        eventloop.state.collision = Some(publish("held", 7));
        requeue_held(&mut eventloop);
        assert!(eventloop.state.collision.is_none());
        assert_eq!(topics(&eventloop.pending), [("held".to_string(), 0)]);

        let (_client, mut eventloop) = AsyncClient::new(MqttOptions::new("t", "127.0.0.1", 1), 8);
        eventloop.pending.extend([publish("a", 3), publish("partner", 7), publish("b", 9)].map(rumqttc::Request::Publish));
        eventloop.state.collision = Some(publish("held", 7));
        requeue_held(&mut eventloop);
        assert!(eventloop.state.collision.is_none());
        let order: Vec<(String, u16)> = [("a", 3), ("partner", 7), ("held", 0), ("b", 9)].iter().map(|(t, k)| (t.to_string(), *k)).collect();
        assert_eq!(topics(&eventloop.pending), order);
        // Nothing held: a second error changes nothing.
        requeue_held(&mut eventloop);
        assert_eq!(eventloop.pending.len(), 4);
    }

    /// Reads one MQTT packet's first byte, skipping its body.
    async fn read_packet(s: &mut tokio::net::TcpStream) -> Option<u8> {
        use tokio::io::AsyncReadExt;
        let kind = s.read_u8().await.ok()?;
        let (mut len, mut shift) = (0usize, 0);
        loop {
            let b = s.read_u8().await.ok()?;
            len |= usize::from(b & 0x7f) << shift;
            shift += 7;
            if b & 0x80 == 0 {
                break;
            }
        }
        let mut body = vec![0; len];
        s.read_exact(&mut body).await.ok()?;
        Some(kind)
    }

    /// A broker whose answers to pings are late, behind the messages it queued first (a burst):
    /// here each ping is followed by a message and never by its answer. The connection stays up
    /// while messages come after each ping (it ended at the second ping: "Last pingreq isn't
    /// acked"), and ends once the broker sends nothing for a keepalive period.
    #[tokio::test]
    async fn a_connection_that_hears_from_the_broker_after_each_ping_stays_up_and_a_silent_one_ends() {
        use tokio::io::AsyncWriteExt;
        const ANSWERED: usize = 3;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            assert_eq!(read_packet(&mut s).await, Some(0x10), "CONNECT");
            s.write_all(&[0x20, 2, 0, 0]).await.unwrap();
            let mut pings = 0;
            while let Some(kind) = read_packet(&mut s).await {
                if kind == 0xc0 {
                    pings += 1;
                    if pings <= ANSWERED {
                        // A QoS 0 message on topic "t", no answer to the ping.
                        s.write_all(&[0x30, 4, 0, 1, b't', b'p']).await.unwrap();
                    }
                }
            }
            std::future::pending::<()>().await;
        });
        let mut options = MqttOptions::new("t", "127.0.0.1", port);
        options.set_keep_alive(Duration::from_secs(1));
        let mut c = connect(options, None);
        let mut seen = Vec::new();
        while seen.last() != Some(&"down") {
            let event = tokio::time::timeout(Duration::from_secs(120), c.events.recv()).await.expect("an event").expect("open");
            seen.push(match event {
                ConnEvent::Up => "up",
                ConnEvent::Message(_) => "message",
                ConnEvent::Down(why) => {
                    assert!(why.contains("pingreq"), "{why}");
                    "down"
                }
                ConnEvent::Subscribed => "subscribed",
            });
        }
        assert_eq!(seen, ["up", "message", "message", "message", "down"]);
    }

    #[test]
    fn broker_urls() {
        let u = BrokerUrl::parse("mqtt://alice:secret@broker.lan:1884").unwrap();
        assert_eq!((u.host.as_str(), u.port, u.tls), ("broker.lan", 1884, false));
        assert_eq!((u.username.as_deref(), u.password.as_deref()), (Some("alice"), Some("secret")));
        assert_eq!(u.to_string(), "mqtt://alice@broker.lan:1884", "the password is never shown");
        assert_eq!(format!("{u:?}"), "mqtt://alice@broker.lan:1884");
        let t = BrokerUrl::parse("mqtts://broker.example").unwrap();
        assert_eq!((t.port, t.tls), (8883, true));
        assert_eq!(BrokerUrl::parse("127.0.0.1:1999").unwrap().port, 1999);
        assert_eq!(BrokerUrl::parse("mqtt://[::1]:2000").unwrap().host, "::1");
        assert!(BrokerUrl::parse("http://x").unwrap_err().contains("unknown scheme"));
        assert!(BrokerUrl::parse("mqtt://h:notaport").is_err());
        assert!(BrokerUrl::parse("mqtt://").is_err());
    }
}
