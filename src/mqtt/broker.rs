//! The embedded broker (`serve --mqtt embedded`): a small MQTT 3.1.1 broker in the hub's process,
//! so MQTT devices work with nothing else installed.
//!
//! It does what mcpdev's topic scheme needs and no more: QoS 0 delivery (QoS 1 and 2 publishes
//! are acknowledged, then delivered at QoS 0), `+`/`#` filters, retained messages, last wills,
//! shared subscriptions (`$share/<group>/<filter>`, round robin), client-id takeover, keepalive —
//! and the one thing general brokers need configuring for stock xiaozhi firmware, which never
//! sends SUBSCRIBE: every client is subscribed to `mcpdev/down/<its client id>` on connect (what
//! EMQX's `auto_subscribe` does with `mcpdev/down/${clientid}`).
//!
//! Packets are read and written with rumqttc's codec. With device tokens configured, a client
//! must give one of them as its MQTT password.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use rumqttc::mqttbytes::v4::{
    ConnAck, ConnectReturnCode, LastWill, Packet, PubAck, PubComp, PubRec, Publish, SubAck, SubscribeReasonCode, UnsubAck,
};
use rumqttc::mqttbytes::{self, QoS, matches, valid_filter, valid_topic};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};
use tracing::{debug, info, warn};

/// Approves a CONNECT's (client id, password).
pub type LoginCheck = Arc<dyn Fn(&str, &str) -> bool + Send + Sync>;

/// How the embedded broker runs.
#[derive(Clone)]
pub struct BrokerConfig {
    pub addr: SocketAddr,
    /// Accepted passwords; empty means any client may connect.
    pub passwords: Vec<String>,
    /// Also accepted: a login this check approves (client id, password), e.g. a device's own token.
    pub device_login: Option<LoginCheck>,
    /// The largest packet accepted or sent.
    pub max_packet: usize,
}

impl std::fmt::Debug for BrokerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BrokerConfig").field("addr", &self.addr).field("passwords", &self.passwords.len()).field("device_login", &self.device_login.is_some()).finish_non_exhaustive()
    }
}

/// A started broker; it serves until the process ends.
pub struct RunningBroker {
    pub addr: SocketAddr,
}

#[derive(Default)]
struct State {
    clients: HashMap<String, Client>,
    /// `(group, filter)` -> members, served in turn.
    groups: HashMap<(String, String), Group>,
    retained: HashMap<String, Bytes>,
    next_conn: u64,
}

struct Client {
    conn: u64,
    tx: mpsc::Sender<Packet>,
    subs: HashSet<String>,
    kick: Option<oneshot::Sender<()>>,
}

#[derive(Default)]
struct Group {
    members: Vec<String>,
    next: usize,
}

type Shared = Arc<Mutex<State>>;

/// Binds the listener and serves in the background.
pub async fn start(cfg: BrokerConfig) -> std::io::Result<RunningBroker> {
    let listener = TcpListener::bind(cfg.addr).await?;
    let addr = listener.local_addr()?;
    let state: Shared = Arc::default();
    let cfg = Arc::new(cfg);
    tokio::spawn(async move {
        loop {
            match listener.accept().await {
                Ok((stream, remote)) => {
                    let _ = stream.set_nodelay(true);
                    tokio::spawn(serve(state.clone(), cfg.clone(), stream, remote));
                }
                Err(e) => {
                    warn!("embedded broker: accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    });
    info!(%addr, "embedded MQTT broker listening");
    Ok(RunningBroker { addr })
}

/// Reads one packet, reading more bytes as needed.
async fn read_packet(rd: &mut (impl AsyncReadExt + Unpin), buf: &mut BytesMut, max: usize) -> Result<Packet, String> {
    loop {
        match Packet::read(buf, max) {
            Ok(p) => return Ok(p),
            Err(mqttbytes::Error::InsufficientBytes(n)) => {
                buf.reserve(n.max(1024));
                match rd.read_buf(buf).await {
                    Ok(0) => return Err("connection closed".into()),
                    Ok(_) => {}
                    Err(e) => return Err(e.to_string()),
                }
            }
            Err(e) => return Err(format!("malformed packet: {e:?}")),
        }
    }
}

async fn refuse(wr: &mut tokio::net::tcp::OwnedWriteHalf, code: ConnectReturnCode) {
    let mut out = BytesMut::new();
    if ConnAck::new(code, false).write(&mut out).is_ok() {
        let _ = wr.write_all(&out).await;
    }
}

async fn serve(state: Shared, cfg: Arc<BrokerConfig>, stream: TcpStream, remote: SocketAddr) {
    let (mut rd, mut wr) = stream.into_split();
    let mut buf = BytesMut::with_capacity(4096);
    let connect = match tokio::time::timeout(Duration::from_secs(10), read_packet(&mut rd, &mut buf, cfg.max_packet)).await {
        Ok(Ok(Packet::Connect(c))) => c,
        _ => return,
    };
    if connect.protocol != mqttbytes::Protocol::V4 {
        return refuse(&mut wr, ConnectReturnCode::RefusedProtocolVersion).await;
    }
    let accepted = |l: &mqttbytes::v4::Login| cfg.passwords.contains(&l.password) || cfg.device_login.as_ref().is_some_and(|check| check(&connect.client_id, &l.password));
    if !cfg.passwords.is_empty() && !connect.login.as_ref().is_some_and(accepted) {
        warn!(%remote, client = %connect.client_id, "embedded broker: refused a client without an accepted password");
        return refuse(&mut wr, ConnectReturnCode::BadUserNamePassword).await;
    }
    let client_id = if connect.client_id.is_empty() { format!("anon-{}", uuid::Uuid::new_v4().simple()) } else { connect.client_id.clone() };
    let (tx, mut rx) = mpsc::channel::<Packet>(1024);
    let (kick_tx, mut kick_rx) = oneshot::channel();
    let _ = tx.try_send(Packet::ConnAck(ConnAck::new(ConnectReturnCode::Success, false)));
    let conn = {
        let mut s = state.lock().expect("broker state");
        s.next_conn += 1;
        let conn = s.next_conn;
        if let Some(mut old) = s.clients.remove(&client_id) {
            debug!(client = %client_id, "embedded broker: client id taken over by a new connection");
            if let Some(k) = old.kick.take() {
                let _ = k.send(());
            }
            leave_groups(&mut s, &client_id);
        }
        // Stock firmware never subscribes: subscribe it to its downlink, as EMQX auto_subscribe would.
        let subs = HashSet::from([super::topics::downlink(&client_id)]);
        s.clients.insert(client_id.clone(), Client { conn, tx: tx.clone(), subs, kick: Some(kick_tx) });
        conn
    };
    debug!(%remote, client = %client_id, "embedded broker: client connected");
    let max = cfg.max_packet;
    let writer = tokio::spawn(async move {
        let mut out = BytesMut::with_capacity(4096);
        while let Some(p) = rx.recv().await {
            out.clear();
            if p.write(&mut out, max).is_err() || wr.write_all(&out).await.is_err() {
                break;
            }
        }
        let _ = wr.shutdown().await;
    });
    // A client silent for 1.5 keepalives is gone (MQTT 3.1.1 §3.1.2.10).
    let idle = match connect.keep_alive {
        0 => Duration::from_secs(24 * 3600),
        k => Duration::from_millis(u64::from(k) * 1500),
    };
    let mut graceful = false;
    loop {
        let packet = tokio::select! {
            r = tokio::time::timeout(idle, read_packet(&mut rd, &mut buf, cfg.max_packet)) => match r {
                Ok(Ok(p)) => p,
                Ok(Err(why)) => { debug!(client = %client_id, %why, "embedded broker: connection ends"); break; }
                Err(_) => { debug!(client = %client_id, "embedded broker: keepalive expired"); break; }
            },
            _ = &mut kick_rx => { graceful = true; break; }
        };
        match packet {
            Packet::Publish(p) => {
                match p.qos {
                    QoS::AtMostOnce => {}
                    QoS::AtLeastOnce => {
                        let _ = tx.try_send(Packet::PubAck(PubAck::new(p.pkid)));
                    }
                    QoS::ExactlyOnce => {
                        let _ = tx.try_send(Packet::PubRec(PubRec::new(p.pkid)));
                    }
                }
                if !valid_topic(&p.topic) || p.topic.is_empty() {
                    warn!(client = %client_id, topic = %p.topic, "embedded broker: publish to an invalid topic; closing");
                    break;
                }
                route(&state, &p.topic, p.payload, p.retain);
            }
            Packet::PubRel(r) => {
                let _ = tx.try_send(Packet::PubComp(PubComp::new(r.pkid)));
            }
            Packet::Subscribe(sub) => {
                let mut codes = Vec::with_capacity(sub.filters.len());
                let mut retained = Vec::new();
                {
                    let mut s = state.lock().expect("broker state");
                    for f in &sub.filters {
                        match shared_filter(&f.path) {
                            Some((group, filter)) if valid_filter(filter) => {
                                let g = s.groups.entry((group.to_string(), filter.to_string())).or_default();
                                if !g.members.contains(&client_id) {
                                    g.members.push(client_id.clone());
                                }
                                codes.push(SubscribeReasonCode::Success(QoS::AtMostOnce));
                            }
                            None if valid_filter(&f.path) => {
                                if let Some(c) = s.clients.get_mut(&client_id) {
                                    c.subs.insert(f.path.clone());
                                }
                                retained.extend(
                                    s.retained.iter().filter(|(t, _)| matches(t, &f.path)).map(|(t, b)| (t.clone(), b.clone())),
                                );
                                codes.push(SubscribeReasonCode::Success(QoS::AtMostOnce));
                            }
                            _ => codes.push(SubscribeReasonCode::Failure),
                        }
                    }
                }
                let _ = tx.try_send(Packet::SubAck(SubAck::new(sub.pkid, codes)));
                for (topic, payload) in retained {
                    let mut p = Publish::from_bytes(topic, QoS::AtMostOnce, payload);
                    p.retain = true;
                    let _ = tx.try_send(Packet::Publish(p));
                }
            }
            Packet::Unsubscribe(u) => {
                {
                    let mut s = state.lock().expect("broker state");
                    for t in &u.topics {
                        match shared_filter(t) {
                            Some((group, filter)) => {
                                if let Some(g) = s.groups.get_mut(&(group.to_string(), filter.to_string())) {
                                    g.members.retain(|m| *m != client_id);
                                }
                            }
                            None => {
                                if let Some(c) = s.clients.get_mut(&client_id) {
                                    c.subs.remove(t);
                                }
                            }
                        }
                    }
                }
                let _ = tx.try_send(Packet::UnsubAck(UnsubAck::new(u.pkid)));
            }
            Packet::PingReq => {
                let _ = tx.try_send(Packet::PingResp);
            }
            Packet::Disconnect => {
                graceful = true;
                break;
            }
            Packet::PubAck(_) | Packet::PubRec(_) | Packet::PubComp(_) => {}
            other => {
                warn!(client = %client_id, packet = ?other, "embedded broker: unexpected packet; closing");
                break;
            }
        }
    }
    {
        let mut s = state.lock().expect("broker state");
        if s.clients.get(&client_id).is_some_and(|c| c.conn == conn) {
            s.clients.remove(&client_id);
            leave_groups(&mut s, &client_id);
        }
    }
    drop(tx);
    let _ = writer.await;
    if !graceful
        && let Some(LastWill { topic, message, retain, .. }) = connect.last_will
    {
        route(&state, &topic, message, retain);
    }
    debug!(client = %client_id, "embedded broker: client gone");
}

fn leave_groups(s: &mut State, client_id: &str) {
    for g in s.groups.values_mut() {
        g.members.retain(|m| m != client_id);
    }
}

/// `$share/<group>/<filter>` -> `(group, filter)`.
fn shared_filter(path: &str) -> Option<(&str, &str)> {
    path.strip_prefix("$share/")?.split_once('/').filter(|(g, f)| !g.is_empty() && !f.is_empty())
}

/// Delivers a publish to every matching subscriber once, and to one member of each matching
/// shared group; keeps (or, when empty, drops) a retained message.
fn route(state: &Shared, topic: &str, payload: Bytes, retain: bool) {
    let mut s = state.lock().expect("broker state");
    if retain {
        if payload.is_empty() {
            s.retained.remove(topic);
        } else {
            s.retained.insert(topic.to_string(), payload.clone());
        }
    }
    let publish = || Packet::Publish(Publish::from_bytes(topic, QoS::AtMostOnce, payload.clone()));
    for c in s.clients.values() {
        if c.subs.iter().any(|f| matches(topic, f)) && c.tx.try_send(publish()).is_err() {
            debug!(topic, "embedded broker: a slow subscriber missed a message");
        }
    }
    let State { groups, clients, .. } = &mut *s;
    for ((_, filter), g) in groups.iter_mut() {
        if g.members.is_empty() || !matches(topic, filter) {
            continue;
        }
        g.next = (g.next + 1) % g.members.len();
        if let Some(c) = clients.get(&g.members[g.next]) {
            let _ = c.tx.try_send(publish());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_filters_are_split() {
        assert_eq!(shared_filter("$share/hubs/mcpdev/up/+"), Some(("hubs", "mcpdev/up/+")));
        assert_eq!(shared_filter("mcpdev/up/+"), None);
        assert_eq!(shared_filter("$share//x"), None);
    }
}
