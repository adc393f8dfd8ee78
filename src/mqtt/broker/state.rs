//! The broker's routing state, free of I/O: who is connected with which rights, subscriptions,
//! shared groups, retained messages and wills. The connection tasks call it under a short lock;
//! nothing in here panics on any input (no indexing, no byte slicing, no `expect`), so the lock
//! is never poisoned by a client. Deliveries go out through each client's bounded queue with
//! `try_send`: a client whose queue is full is disconnected, and routing never waits for it.

use std::collections::{HashMap, HashSet};

use bytes::Bytes;
use rumqttc::mqttbytes::QoS;
use rumqttc::mqttbytes::v4::{Connect, ConnectReturnCode, Packet, PubAck, PubComp, PubRec, Publish, SubAck, SubscribeReasonCode, UnsubAck};
use tokio::sync::{mpsc, oneshot};
use tracing::debug;

use super::acl::Role;
use super::gate::warn_limited;
use super::topic;
use crate::mqtt::topics;

/// What a client can make the broker hold.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Connected clients.
    pub max_clients: usize,
    /// Subscriptions of one client, shared ones included.
    pub max_subscriptions: usize,
    /// Members of one shared group.
    pub max_group_members: usize,
    /// Retained messages, and their bytes (topic + payload).
    pub max_retained: usize,
    pub max_retained_bytes: usize,
    /// Packets queued for one client before it counts as not reading and is disconnected.
    pub hub_queue: usize,
    pub device_queue: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_clients: 10_000,
            max_subscriptions: 100,
            max_group_members: 64,
            max_retained: 10_000,
            max_retained_bytes: 16 << 20,
            hub_queue: 8192,
            device_queue: 256,
        }
    }
}

impl Limits {
    pub fn queue_for(&self, role: &Role) -> usize {
        match role {
            Role::Hub => self.hub_queue,
            Role::Device { .. } => self.device_queue,
        }
        .max(1)
    }
}

struct Will {
    topic: String,
    payload: Bytes,
    retain: bool,
}

struct Client {
    conn: u64,
    role: Role,
    tx: mpsc::Sender<Packet>,
    subs: HashSet<String>,
    /// `(group, filter)` of its shared subscriptions.
    shared: HashSet<(String, String)>,
    kick: Option<oneshot::Sender<()>>,
    will: Option<Will>,
}

#[derive(Default)]
struct Group {
    members: Vec<String>,
    next: usize,
}

/// What the connection task does after a packet.
#[derive(Debug, PartialEq, Eq)]
pub enum Next {
    Continue,
    /// The client said DISCONNECT: no will.
    Goodbye,
    /// Close the connection (the will is published); the reason is for the log.
    Close(String),
}

/// The routing state of one broker.
#[derive(Default)]
pub struct State {
    clients: HashMap<String, Client>,
    /// `(group, filter)` -> members, served in turn.
    groups: HashMap<(String, String), Group>,
    retained: HashMap<String, Bytes>,
    retained_bytes: usize,
    next_conn: u64,
    limits: Limits,
}

/// `$share/<group>/<filter>` -> `(group, filter)`.
pub fn shared_filter(path: &str) -> Option<(&str, &str)> {
    path.strip_prefix("$share/")?.split_once('/').filter(|(g, f)| !g.is_empty() && !f.is_empty())
}

impl State {
    pub fn new(limits: Limits) -> Self {
        Self { limits, ..Self::default() }
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    pub fn client_count(&self) -> usize {
        self.clients.len()
    }

    pub fn retained_count(&self) -> usize {
        self.retained.len()
    }

    /// Registers a client that passed authentication as `client_id` (never empty); a client
    /// already connected with that id is kicked (takeover, no will). The will is checked here:
    /// an invalid topic or one the role may not publish to refuses the CONNECT. The CONNACK is
    /// queued on `tx`. Returns the connection number that [`State::end`] and
    /// [`State::handle`] take.
    pub fn connect(&mut self, client_id: &str, connect: &Connect, role: Role, tx: mpsc::Sender<Packet>, kick: oneshot::Sender<()>) -> Result<u64, (ConnectReturnCode, String)> {
        let will = match &connect.last_will {
            Some(w) => {
                if let Err(why) = topic::valid_name(&w.topic) {
                    return Err((ConnectReturnCode::NotAuthorized, format!("invalid will topic: {why}")));
                }
                if !role.may_publish(&w.topic) {
                    return Err((ConnectReturnCode::NotAuthorized, format!("a will to {:?}, which this client may not publish to", w.topic)));
                }
                Some(Will { topic: w.topic.clone(), payload: w.message.clone(), retain: w.retain })
            }
            None => None,
        };
        if let Some(mut old) = self.clients.remove(client_id) {
            debug!(client = %client_id, "embedded broker: client id taken over by a new connection");
            if let Some(k) = old.kick.take() {
                let _ = k.send(());
            }
            self.leave_groups(client_id, &old.shared);
        } else if self.clients.len() >= self.limits.max_clients {
            return Err((ConnectReturnCode::ServiceUnavailable, format!("{} clients connected already", self.clients.len())));
        }
        if tx.try_send(Packet::ConnAck(rumqttc::mqttbytes::v4::ConnAck::new(ConnectReturnCode::Success, false))).is_err() {
            return Err((ConnectReturnCode::ServiceUnavailable, "no room for the CONNACK".into()));
        }
        self.next_conn += 1;
        let conn = self.next_conn;
        // Stock firmware never subscribes: subscribe it to its downlink, as EMQX auto_subscribe would.
        let subs = if topics::valid_key(client_id) { HashSet::from([topics::downlink(client_id)]) } else { HashSet::new() };
        self.clients.insert(client_id.to_string(), Client { conn, role, tx, subs, shared: HashSet::new(), kick: Some(kick), will });
        crate::metrics::set_broker_clients(self.clients.len());
        Ok(conn)
    }

    /// Disconnects every device client whose client id names `device_id` (a revocation; no
    /// will is published) and returns how many there were. Its later CONNECTs are refused by the
    /// authentication hook.
    pub fn kick_device(&mut self, device_id: &str) -> usize {
        let ids: Vec<String> = self
            .clients
            .iter()
            .filter(|(_, c)| matches!(&c.role, Role::Device { client_id } if topics::device_id_of(client_id).as_deref() == Some(device_id)))
            .map(|(id, _)| id.clone())
            .collect();
        for id in &ids {
            if let Some(mut c) = self.clients.remove(id) {
                if let Some(k) = c.kick.take() {
                    let _ = k.send(());
                }
                self.leave_groups(id, &c.shared);
            }
        }
        ids.len()
    }

    /// Whether `client_id` is gone (its DISCONNECT read, so every packet it sent before is
    /// routed) and every client's queue is taken by its writer: what a stopping hub waits for,
    /// so that the goodbyes it published reach the devices before the process ends.
    pub fn flushed_after(&self, client_id: &str) -> bool {
        !self.clients.contains_key(client_id) && self.clients.values().all(|c| c.tx.capacity() == c.tx.max_capacity())
    }

    /// The connection `conn` of `client_id` ended; unless it said goodbye (or was taken over or
    /// kicked, which removed it already), its will is published.
    pub fn end(&mut self, client_id: &str, conn: u64, goodbye: bool) {
        if self.clients.get(client_id).is_none_or(|c| c.conn != conn) {
            return;
        }
        let Some(c) = self.clients.remove(client_id) else { return };
        crate::metrics::set_broker_clients(self.clients.len());
        self.leave_groups(client_id, &c.shared);
        if !goodbye && let Some(w) = c.will {
            self.route(&w.topic, w.payload, w.retain);
        }
    }

    /// One packet from a connected client. Replies go to the client's queue.
    pub fn handle(&mut self, client_id: &str, conn: u64, packet: Packet) -> Next {
        let Some(c) = self.clients.get(client_id).filter(|c| c.conn == conn) else {
            return Next::Close("no longer registered".into());
        };
        let (role, tx) = (c.role.clone(), c.tx.clone());
        let reply = |p: Packet| {
            if tx.try_send(p).is_err() { Next::Close("its outbound queue is full (it does not read)".into()) } else { Next::Continue }
        };
        match packet {
            Packet::Publish(p) => {
                if let Err(why) = topic::valid_name(&p.topic) {
                    return Next::Close(format!("PUBLISH to an invalid topic name {:?}: {why}", short(&p.topic)));
                }
                if !role.may_publish(&p.topic) {
                    return Next::Close(format!("PUBLISH to {:?}, which this client may not publish to", short(&p.topic)));
                }
                let next = match p.qos {
                    QoS::AtMostOnce => Next::Continue,
                    QoS::AtLeastOnce => reply(Packet::PubAck(PubAck::new(p.pkid))),
                    QoS::ExactlyOnce => reply(Packet::PubRec(PubRec::new(p.pkid))),
                };
                // A device's uplink is a live message, never state to replay: a retained one would be
                // handed to every hub that subscribes later (a stale hello, a stale answer).
                let retain = p.retain && matches!(role, Role::Hub);
                self.route(&p.topic, p.payload, retain);
                next
            }
            Packet::PubRel(r) => reply(Packet::PubComp(PubComp::new(r.pkid))),
            Packet::Subscribe(sub) => {
                let mut codes = Vec::with_capacity(sub.filters.len());
                let mut retained = Vec::new();
                for f in &sub.filters {
                    match self.subscribe(client_id, &role, &f.path) {
                        Ok(found) => {
                            retained.extend(found);
                            codes.push(SubscribeReasonCode::Success(QoS::AtMostOnce));
                        }
                        Err(why) => {
                            warn_limited!(client = %client_id, filter = %short(&f.path), %why, "embedded broker: subscription refused");
                            codes.push(SubscribeReasonCode::Failure);
                        }
                    }
                }
                let mut next = reply(Packet::SubAck(SubAck::new(sub.pkid, codes)));
                for (topic, payload) in retained {
                    let mut p = Publish::from_bytes(topic, QoS::AtMostOnce, payload);
                    p.retain = true;
                    if next == Next::Continue {
                        next = reply(Packet::Publish(p));
                    }
                }
                next
            }
            Packet::Unsubscribe(u) => {
                for t in &u.topics {
                    self.unsubscribe(client_id, t);
                }
                reply(Packet::UnsubAck(UnsubAck::new(u.pkid)))
            }
            Packet::PingReq => reply(Packet::PingResp),
            Packet::Disconnect => Next::Goodbye,
            Packet::PubAck(_) | Packet::PubRec(_) | Packet::PubComp(_) => Next::Continue,
            other => Next::Close(format!("unexpected packet {:?}", packet_kind(&other))),
        }
    }

    /// Adds one subscription; the retained messages it matches.
    fn subscribe(&mut self, client_id: &str, role: &Role, path: &str) -> Result<Vec<(String, Bytes)>, String> {
        let (group, filter) = match shared_filter(path) {
            Some((g, _)) if g.contains(['+', '#']) => return Err(format!("invalid shared group {g:?}")),
            Some((g, f)) => (Some(g), f),
            None if path.starts_with("$share/") => return Err("a shared subscription needs $share/<group>/<filter>".into()),
            None => (None, path),
        };
        topic::valid_filter(filter).map_err(|why| format!("invalid filter: {why}"))?;
        if !role.may_subscribe(path) {
            return Err("not allowed for this client".into());
        }
        let max_subs = self.limits.max_subscriptions;
        let max_members = self.limits.max_group_members;
        let Some(c) = self.clients.get_mut(client_id) else { return Err("not connected".into()) };
        let new = match group {
            Some(g) => !c.shared.contains(&(g.to_string(), filter.to_string())),
            None => !c.subs.contains(filter),
        };
        if new && c.subs.len() + c.shared.len() >= max_subs {
            return Err(format!("more than {max_subs} subscriptions"));
        }
        match group {
            Some(g) => {
                let key = (g.to_string(), filter.to_string());
                let members = &mut self.groups.entry(key.clone()).or_default().members;
                if !members.iter().any(|m| m == client_id) {
                    if members.len() >= max_members {
                        return Err(format!("shared group {g:?} has {max_members} members already"));
                    }
                    members.push(client_id.to_string());
                }
                c.shared.insert(key);
                Ok(Vec::new())
            }
            None => {
                c.subs.insert(filter.to_string());
                Ok(self.retained.iter().filter(|(t, _)| topic::matches(t, filter)).map(|(t, b)| (t.clone(), b.clone())).collect())
            }
        }
    }

    fn unsubscribe(&mut self, client_id: &str, path: &str) {
        let Some(c) = self.clients.get_mut(client_id) else { return };
        match shared_filter(path) {
            Some((g, f)) => {
                let key = (g.to_string(), f.to_string());
                if c.shared.remove(&key) {
                    self.leave_groups(client_id, &HashSet::from([key]));
                }
            }
            None => {
                c.subs.remove(path);
            }
        }
    }

    fn leave_groups(&mut self, client_id: &str, shared: &HashSet<(String, String)>) {
        for key in shared {
            if let Some(g) = self.groups.get_mut(key) {
                g.members.retain(|m| m != client_id);
                if g.members.is_empty() {
                    self.groups.remove(key);
                }
            }
        }
    }

    /// Keeps (or, when empty, drops) a retained message within the limits.
    fn retain(&mut self, topic: &str, payload: &Bytes) {
        let old = self.retained.remove(topic).map_or(0, |b| topic.len() + b.len());
        self.retained_bytes = self.retained_bytes.saturating_sub(old);
        if payload.is_empty() {
            return;
        }
        let size = topic.len() + payload.len();
        if self.retained.len() >= self.limits.max_retained || self.retained_bytes.saturating_add(size) > self.limits.max_retained_bytes {
            warn_limited!(topic = %short(topic), "embedded broker: retained-message limit reached ({} messages, {} bytes); not kept", self.retained.len(), self.retained_bytes);
            return;
        }
        self.retained_bytes += size;
        self.retained.insert(topic.to_string(), payload.clone());
    }

    /// Delivers a publish (its topic valid) to every matching subscriber once, and to one member
    /// of each matching shared group. A subscriber that cannot take it is disconnected.
    pub fn route(&mut self, topic: &str, payload: Bytes, retain: bool) {
        if topic::valid_name(topic).is_err() {
            return;
        }
        if retain {
            self.retain(topic, &payload);
        }
        let publish = || Packet::Publish(Publish::from_bytes(topic, QoS::AtMostOnce, payload.clone()));
        let mut stuck = Vec::new();
        for (id, c) in &self.clients {
            if c.subs.iter().any(|f| topic::matches(topic, f)) && c.tx.try_send(publish()).is_err() {
                stuck.push(id.clone());
            }
        }
        for ((_, filter), g) in self.groups.iter_mut() {
            if g.members.is_empty() || !topic::matches(topic, filter) {
                continue;
            }
            g.next = g.next.wrapping_add(1) % g.members.len();
            if let Some(c) = g.members.get(g.next).and_then(|m| self.clients.get(m))
                && c.tx.try_send(publish()).is_err()
                && let Some(m) = g.members.get(g.next)
            {
                stuck.push(m.clone());
            }
        }
        for id in stuck {
            self.kick(&id, "its outbound queue is full (it does not read)");
        }
    }

    /// Disconnects a client now (no will).
    fn kick(&mut self, client_id: &str, why: &str) {
        let Some(mut c) = self.clients.remove(client_id) else { return };
        crate::metrics::set_broker_clients(self.clients.len());
        warn_limited!(client = %client_id, why, "embedded broker: disconnecting a client");
        if let Some(k) = c.kick.take() {
            let _ = k.send(());
        }
        self.leave_groups(client_id, &c.shared);
    }
}

/// A topic for a log line: at most 100 characters.
pub fn short(t: &str) -> String {
    let mut s: String = t.chars().take(100).collect();
    if s.len() < t.len() {
        s.push('…');
    }
    s
}

fn packet_kind(p: &Packet) -> &'static str {
    match p {
        Packet::Connect(_) => "CONNECT",
        Packet::ConnAck(_) => "CONNACK",
        Packet::SubAck(_) => "SUBACK",
        Packet::UnsubAck(_) => "UNSUBACK",
        Packet::PingResp => "PINGRESP",
        _ => "other",
    }
}
