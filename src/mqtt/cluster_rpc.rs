//! Hub-to-hub requests: the control API of one hub reaches a device another hub serves
//! ([`crate::hub::remote`]). The requests ride the hubs' own broker connections, under the
//! cluster's topics, or the serving hub's direct link when it offers one ([`super::hub_link`]):
//! the same sealed messages either way, opened and checked by the same code here, and a message
//! the link cannot take goes through the broker.
//!
//! - A request to hub `H`: `mcpdev/rpc/H/q`, `{"c": N, "from": me, "op": {control op}}`; its
//!   answers come back on `mcpdev/rpc/<me>/a` as the control API's own answers with `"id": N`
//!   (a watch sends many). `{"c": N, "from": me, "cancel": true}` ends a request early.
//! - **Correlated**: answers are matched by `c` to the request this hub made; an answer nobody
//!   waits for is dropped.
//! - **Authenticated**: every request and answer travels as `<HMAC-SHA256 hex>\n<text>`, keyed
//!   from the shared hub secret ([`Purpose::ClusterRpc`]): a broker client that is not a hub can
//!   neither make a hub reach a device nor answer a hub's request (a lookup, a call); what does
//!   not verify is dropped and logged (rate-limited).
//! - **Deadlines**: every request carries its own (`wait_ms`, `timeout_ms`), and the asking hub
//!   gives up after it plus a hop's grace with a `timeout` error, cancelling the request there;
//!   a request whose caller goes away first (a host that closes a blocking `tasks/result`) is
//!   cancelled there too. When the asked hub dies (its presence is cleared), every request waiting on it ends at once
//!   with `link_down`: a caller never waits for an answer that cannot come.
//! - **Caps**, per peer hub: at most [`MAX_SERVED_PER_PEER`] of its requests under way here
//!   (beyond that the answer is `busy`), each at most [`MAX_REQUEST_BYTES`]; at most
//!   [`MAX_WAITING`] requests of this hub waiting on others. Requests from a client that is not a
//!   live hub are dropped and logged (at most once per [`LOG_WINDOW`]).
//! - **Bounded answers**: one device, one result, `pending` (at most
//!   [`MAX_PENDING`](crate::hub::admission::MAX_PENDING)), a page of `devices`; the unpaged
//!   `devices` is refused (streamed only to a control connection).
//! - **One hop**: a forwarded request is served locally only
//!   ([`control::serve_forwarded`](crate::hub::control::serve_forwarded)); that includes the
//!   `task` op, an MCP task this hub holds asked for by a host of another hub.
//! - **Admission**: approvals and revocations are published retained under
//!   `mcpdev/admission/<device id>` as sealed records (MAC'd with a key derived from the shared
//!   hub secret, [`crate::hub::admission::record`]), so every hub (one that starts later too)
//!   applies them; a record that does not open is refused and logged.
//!
//! Every record on the cluster's topics is MAC'd with the hub secret (presence, claims and
//! forwarded messages in [`super::cluster_seal`]); what does not open is refused, logged
//! (rate-limited) and counted (`mcpdev_refusals_total{reason="cluster_record"}`). The broker's
//! ACL (hubs only; see docs/cluster.md for Mosquitto and EMQX) is a second line.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use rumqttc::{AsyncClient, QoS};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot, watch};
use tracing::warn;

use super::hub_link::{self, LinkReply, Links};
use super::cluster_view::{SharedView, View};
use super::presence;
use super::topics;
use crate::hub::remote::{Answer, Located, WatchItem};
use crate::hub::secret::{HubSecret, Purpose};
use crate::hub::{Hub, control};

/// Requests of one peer hub served here at once (watches included).
pub const MAX_SERVED_PER_PEER: usize = 256;
/// Requests of this hub waiting on others at once.
pub const MAX_WAITING: usize = 4096;
/// Longest request text taken from a peer.
pub const MAX_REQUEST_BYTES: usize = 1 << 20;
/// One log line per kind of refusal in this window.
const LOG_WINDOW: Duration = Duration::from_secs(10);
/// Rejected admission records logged one by one per [`LOG_WINDOW`] (then counted).
const RECORD_LOGS: u32 = 32;

enum Waiter {
    /// One answer; `progress`: where the serving hub's progress events for it go (a device's
    /// `notifications/progress` during a call, [`stop::forward`]'s callers that ask for them).
    Once { hub: String, reply: oneshot::Sender<Answer>, progress: Option<mpsc::Sender<Box<RawValue>>> },
    Stream { hub: String, items: mpsc::Sender<WatchItem> },
}

impl Waiter {
    fn hub(&self) -> &str {
        match self {
            Waiter::Once { hub, .. } | Waiter::Stream { hub, .. } => hub,
        }
    }

    /// Ends the wait with an error.
    fn fail(self, error: Value) {
        match self {
            Waiter::Once { reply, .. } => {
                let _ = reply.send(Err(error));
            }
            Waiter::Stream { items, .. } => {
                let _ = items.try_send(WatchItem::Error(error));
            }
        }
    }
}

#[derive(Default)]
struct Calls {
    waiting: HashMap<u64, Waiter>,
    /// Requests of peers under way here: (peer, c) -> the task serving it.
    served: HashMap<(String, u64), tokio::task::AbortHandle>,
    served_per_peer: HashMap<String, usize>,
    /// Per kind of refusal: when it was last logged, and how many since.
    refusal_logs: HashMap<&'static str, (Option<Instant>, u64)>,
    /// Rejected admission records: the window's start, lines logged in it, and those not logged.
    record_logs: Option<(Instant, u32, u64)>,
}

impl Calls {
    /// Requests of other hubs under way here (counted from their admission to their release).
    fn under_way(&self) -> usize {
        self.served_per_peer.values().sum()
    }

    /// Ends a served request's bookkeeping: whoever removes its entry (its own end, or a cancel)
    /// releases the peer's slot, once. The task, if it is still running, is the caller's to abort.
    fn release(&mut self, key: &(String, u64)) -> Option<tokio::task::AbortHandle> {
        let task = self.served.remove(key)?;
        if let Some(n) = self.served_per_peer.get_mut(&key.0) {
            *n = n.saturating_sub(1);
        }
        Some(task)
    }
}

/// This hub's place in the cluster: the view of the others, and requests to and from them.
pub struct ClusterNode {
    me: String,
    /// The name the operator gave this hub (`serve --hub-name`).
    name: Option<String>,
    hub: Weak<Hub>,
    client: AsyncClient,
    view: SharedView,
    calls: Mutex<Calls>,
    changed: watch::Sender<u64>,
    next: AtomicU64,
    /// This node, for the tasks it spawns (they must not keep it alive).
    this: Weak<ClusterNode>,
    /// Other hubs' devices offered through this hub's MCP endpoints.
    proxies: super::stand_ins::Proxies,
    /// A pass that makes proxies for the other hubs' ready devices is scheduled.
    offering: std::sync::atomic::AtomicBool,
    /// Bumped whenever the stand-ins made to offer the others' devices are ended: a pass that
    /// was making them stops, and ends what it made meanwhile.
    offers_ended: std::sync::atomic::AtomicU64,
    /// The shared hub secret: requests and answers are MAC'd with a key from it.
    secret: Arc<HubSecret>,
    /// Direct links to the hubs that offer one ([`hub_link`]): requests go there first.
    links: Arc<Links>,
    /// The cluster's admission records, applied in broker order ([`super::admission_sync`]).
    pub admissions: super::admission_sync::AdmissionSync,
    /// This hub is stopping: other hubs' requests are refused, typed ([`stop`]).
    stopping: std::sync::atomic::AtomicBool,
    /// Told when the last request under way here ends (a stopping hub waits for it).
    drained: tokio::sync::Notify,
    /// Other hubs that said they are stopping, and when: nothing more is sent to them.
    leaving: Mutex<HashMap<String, Instant>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// An answer from a peer, as the control API writes it.
#[derive(Deserialize)]
struct Reply {
    id: u64,
    #[serde(default)]
    ok: Option<Box<RawValue>>,
    #[serde(default)]
    error: Option<Value>,
    #[serde(default)]
    event: Option<Box<RawValue>>,
}

#[derive(Deserialize)]
struct Incoming {
    c: u64,
    from: String,
    #[serde(default)]
    op: Option<Map>,
    #[serde(default)]
    cancel: bool,
}

type Map = serde_json::Map<String, Value>;

fn seal(secret: &HubSecret, text: &str) -> String {
    format!(
        "{}\n{text}",
        secret.mac(Purpose::ClusterRpc, text.as_bytes())
    )
}

impl ClusterNode {
    /// `stand_ins`: other hubs' devices offered through this hub's MCP endpoints at once.
    pub fn new(
        me: &str,
        name: Option<String>,
        hub: Weak<Hub>,
        client: AsyncClient,
        stand_ins: usize,
        secret: Arc<HubSecret>,
    ) -> Arc<Self> {
        Arc::new_cyclic(|this: &Weak<Self>| Self {
            admissions: {
                let node = this.clone();
                let rejected: super::admission_sync::Rejected = Arc::new(move |device: &str, why: &str| {
                    if let Some(n) = node.upgrade() {
                        n.record_rejected(device, why);
                    }
                });
                super::admission_sync::AdmissionSync::start(me, hub.clone(), client.clone(), secret.clone(), rejected)
            },
            links: Links::new(me, secret.clone(), {
                let node = this.clone();
                Arc::new(move |payload: &[u8]| {
                    if let Some(node) = node.upgrade() {
                        node.on_answer(payload);
                    }
                })
            }),
            this: this.clone(),
            me: me.to_string(),
            name,
            hub,
            client,
            view: Arc::new(Mutex::new(View::new(me))),
            calls: Mutex::default(),
            changed: watch::Sender::new(0),
            next: AtomicU64::new(1),
            proxies: super::stand_ins::Proxies::new(stand_ins),
            offering: std::sync::atomic::AtomicBool::new(false),
            offers_ended: std::sync::atomic::AtomicU64::new(0),
            secret,
            stopping: std::sync::atomic::AtomicBool::new(false),
            drained: tokio::sync::Notify::new(),
            leaving: Mutex::default(),
        })
    }

    /// The topic filters this hub subscribes to for the cluster (with their QoS).
    pub fn subscriptions(&self) -> [(String, QoS); 3] {
        [
            // QoS 0, as every subscription of the hub (`mqtt::hub`'s `on_up` says why): an
            // admission record per device, 100,000 of them, must all reach a hub that joins.
            (format!("{}+/+", topics::INDEX), QoS::AtMostOnce),
            (format!("{}+", topics::ADMISSION), QoS::AtMostOnce),
            (format!("{}{}/+", topics::RPC, self.me), QoS::AtMostOnce),
        ]
    }

    fn bump(&self) {
        self.changed.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// A hub's presence record (empty: it went away). A hub that went away ends every request
    /// waiting on it and every request of it served here. A record that offers a direct link
    /// whose advertisement verifies has this hub's requests to it go there.
    pub fn on_presence(&self, hub: &str, record: &[u8]) {
        let alive = !record.is_empty();
        if topics::valid_key(hub) && hub != self.me {
            // An advertisement that does not verify changes nothing (a link that is up stays).
            if let Ok(advert) = self.link_advert(hub, record) {
                self.links.advertised(hub, advert);
            }
        }
        let changed = lock(&self.view).on_presence(hub, alive);
        if !alive && changed {
            tracing::info!(hub = %hub, "cluster: hub {hub}'s presence record was cleared (it stopped, or the broker lost it); its devices are not listed here until it is back, and its MQTT devices are taken over");
            self.gone(hub);
        } else if changed {
            self.bump();
        }
    }

    /// `hub` is gone: requests waiting on it end, its requests here are aborted, its index cleared later.
    fn gone(&self, hub: &str) {
        let mut calls = lock(&self.calls);
        let gone: Vec<u64> = calls.waiting.iter().filter(|(_, w)| w.hub() == hub).map(|(c, _)| *c).collect();
        for c in gone {
            if let Some(w) = calls.waiting.remove(&c) {
                w.fail(json!({"kind": "link_down", "message": format!("hub {hub}, which served the device, went away before answering; the other hubs take its MQTT devices over within seconds: try again")}));
            }
        }
        let theirs: Vec<(String, u64)> = calls.served.keys().filter(|(p, _)| p == hub).cloned().collect();
        for k in theirs {
            if let Some(task) = calls.served.remove(&k) {
                task.abort();
            }
        }
        calls.served_per_peer.remove(hub);
        drop(calls);
        self.clear_later(hub);
        self.bump();
    }

    /// The direct link `hub`'s presence record offers (`None`: none, or the hub went away); an
    /// error (logged) when it offers one whose advertisement does not verify.
    fn link_advert(&self, hub: &str, record: &[u8]) -> Result<Option<hub_link::Advert>, ()> {
        let Some(link) = serde_json::from_slice::<Value>(record).ok().and_then(|mut r| r.get_mut("link").map(Value::take)) else {
            return Ok(None);
        };
        hub_link::Advert::open(hub, &link, &self.secret).map(Some).map_err(|why| {
            self.refuse_log("link", &format!("the direct link hub {hub} offers ({why}); a link already up stays, else its requests go through the broker"));
        })
    }

    /// This hub's presence record: its id, and the direct link it offers.
    pub fn presence_record(&self, link: Option<&hub_link::Advert>) -> String {
        match link {
            Some(a) => json!({"hub": self.me, "link": a.to_json(&self.me, &self.secret)}).to_string(),
            None => json!({"hub": self.me}).to_string(),
        }
    }

    /// Where the index places a device: its hub and row.
    pub fn row(&self, device_id: &str) -> Option<(Arc<str>, presence::Row)> {
        lock(&self.view).row(device_id)
    }

    pub fn is_alive(&self, hub: &str) -> bool {
        lock(&self.view).is_alive(hub)
    }

    /// After reconnecting: what is known stays while the retained replay comes ([`View::resync`]),
    /// so the other hubs stay listed and reachable (over the direct link, or the broker once back).
    pub fn resync(&self) {
        lock(&self.view).resync();
    }

    /// Every subscription of the reconnect is acknowledged, so the retained presence records are
    /// all in: a hub whose record did not come back went away while this hub was cut off.
    pub fn reconcile(&self) {
        let (gone, peers) = { let mut v = lock(&self.view); (v.reconcile(), v.peers().len()) };
        tracing::info!(peers, gone = gone.len(), "cluster: the broker's presence records are all in; the view of the other hubs is up to date");
        for hub in gone {
            tracing::info!(hub = %hub, "cluster: hub {hub}'s presence record was no longer on the broker when this hub reconnected: it went away meanwhile; its devices are not listed here until it is back");
            self.links.advertised(&hub, None);
            self.gone(&hub);
        }
    }

    /// A retained index of a hub that is not alive is cleared after [`presence::DEAD_INDEX_GRACE`],
    /// if the hub is still gone then (every survivor does it; clearing twice is harmless).
    fn clear_later(&self, hub: &str) {
        let (view, client, hub) = (self.view.clone(), self.client.clone(), hub.to_string());
        tokio::spawn(async move {
            tokio::time::sleep(presence::DEAD_INDEX_GRACE).await;
            let gone = { !lock(&view).is_alive(&hub) };
            if gone {
                for n in 0..presence::SHARDS {
                    let _ = client.try_publish(
                        format!("{}{hub}/{n}", topics::INDEX),
                        QoS::AtLeastOnce,
                        true,
                        Vec::<u8>::new(),
                    );
                }
            }
        });
    }

    /// A message on one of [`Self::subscriptions`]; `false` if the topic is not the cluster's.
    pub fn on_message(&self, topic: &str, payload: &[u8]) -> bool {
        if let Some(rest) = topic.strip_prefix(topics::INDEX) {
            self.on_index(rest, payload);
        } else if let Some(rest) = topic.strip_prefix(topics::RPC) {
            match rest.strip_prefix(self.me.as_str()) {
                Some("/q") => self.on_request(payload, None),
                Some("/a") => self.on_answer(payload),
                _ => {}
            }
        } else if let Some(device) = topic.strip_prefix(topics::ADMISSION) {
            self.admissions.on_message(device, payload);
        } else {
            return false;
        }
        true
    }

    /// One shard of a hub's index (`<hub>/<shard>`), checked ([`presence::open_shard`]); a
    /// forged or replayed one is refused and logged.
    fn on_index(&self, place: &str, payload: &[u8]) {
        let Some((hub, shard)) = place.split_once('/') else {
            return;
        };
        let Some(shard) = shard.parse::<u8>().ok().filter(|n| *n < presence::SHARDS) else {
            return;
        };
        if !topics::valid_key(hub) || hub == self.me {
            return;
        }
        let new = if payload.is_empty() {
            None
        } else {
            let Some(h) = self.hub.upgrade() else { return };
            match presence::open_shard(&h.secret, hub, shard, payload) {
                Ok(s) => Some(s),
                Err(why) => {
                    return self.refuse_log(
                        "index",
                        &format!("an index shard filed as hub {hub:?}: {why}"),
                    );
                }
            }
        };
        let (taken, dead) = {
            let mut v = lock(&self.view);
            let taken = v.on_shard(hub, shard, new);
            (taken, !payload.is_empty() && !v.is_alive(hub))
        };
        if !taken {
            return self.refuse_log(
                "replay",
                &format!("an index shard of hub {hub:?} older than the one held (a replay)"),
            );
        }
        if dead {
            self.clear_later(hub);
        }
        self.bump();
        self.offer_later();
    }

    /// A cluster record refused by the MQTT side ([`super::cluster_seal`]): logged as
    /// [`Self::refuse_log`] does, and counted.
    pub fn refuse(&self, kind: &'static str, why: &str) {
        self.refuse_log(kind, why);
    }

    /// A presence record of `hub` that does not open: counted, and logged per hub (each hub
    /// that is not of this cluster is named, through the shared per-key limiter).
    pub fn refuse_hub(&self, hub: &str, why: &str) {
        crate::metrics::refused(crate::metrics::Refused::ClusterRecord);
        if crate::metrics::log_limit::allow(crate::metrics::log_limit::Kind::Refusal, &format!("cluster hub {}", hub.chars().take(64).collect::<String>())) {
            warn!("cluster: refused {why}");
        }
    }

    /// Logs a refusal: one line per kind per [`LOG_WINDOW`], with how many of that kind came;
    /// every one is counted (`mcpdev_refusals_total{reason="cluster_record"}`).
    fn refuse_log(&self, kind: &'static str, why: &str) {
        crate::metrics::refused(crate::metrics::Refused::ClusterRecord);
        let mut calls = lock(&self.calls);
        let now = Instant::now();
        let (last, count) = calls.refusal_logs.entry(kind).or_default();
        *count += 1;
        if last.is_none_or(|t| now.duration_since(t) >= LOG_WINDOW) {
            warn!(count = *count, "cluster: refused {why}");
            (*last, *count) = (Some(now), 0);
        }
    }

    /// A rejected admission record: each one logged, up to [`RECORD_LOGS`] per window (a flood
    /// is counted, and the count said with the next line).
    fn record_rejected(&self, device: &str, why: &str) {
        let mut calls = lock(&self.calls);
        let now = Instant::now();
        let (start, logged, skipped) = calls.record_logs.get_or_insert((now, 0, 0));
        if now.duration_since(*start) >= LOG_WINDOW {
            (*start, *logged) = (now, 0);
        }
        if *logged >= RECORD_LOGS {
            *skipped += 1;
            return;
        }
        *logged += 1;
        let suppressed = std::mem::take(skipped);
        drop(calls);
        warn!(device = %device.escape_debug(), suppressed, "cluster: an admission record for {:?} was rejected (not made by a hub of this cluster, or malformed): {why}", device.chars().take(64).collect::<String>());
    }

    /// `text` as it travels between hubs: its MAC, a newline, the text.
    fn seal(&self, text: &str) -> String {
        seal(&self.secret, text)
    }

    /// The text of a sealed message, if its MAC verifies (else logged, rate-limited).
    fn open<'a>(&self, payload: &'a [u8], what: &str) -> Option<&'a [u8]> {
        let opened = payload.iter().position(|b| *b == b'\n').and_then(|at| {
            let (mac, text) = (
                std::str::from_utf8(&payload[..at]).ok()?,
                &payload[at + 1..],
            );
            self.secret
                .verify_mac(Purpose::ClusterRpc, text, mac)
                .then_some(text)
        });
        if opened.is_none() {
            self.refuse_log(
                "mac",
                &format!(
                    "{what} that does not carry a valid MAC (not from a hub with this hub secret)"
                ),
            );
        }
        opened
    }

    /// Sends an answer to hub `to`: on the link its request came on while that is up, else
    /// through the broker.
    fn answer(&self, to: &str, text: String, link: Option<&LinkReply>) {
        send_answer(&self.client, to, self.seal(&text), link);
    }

    /// A sealed request, from the broker (`link` `None`) or from a proven peer hub on its link
    /// (whose answers go back there).
    fn on_request(&self, payload: &[u8], link: Option<(&str, LinkReply)>) {
        if payload.len() > MAX_REQUEST_BYTES {
            return self.refuse_log(
                "size",
                &format!(
                    "a request of {} bytes, over {MAX_REQUEST_BYTES}",
                    payload.len()
                ),
            );
        }
        let Some(payload) = self.open(payload, "a request") else {
            return;
        };
        let Ok(req) = serde_json::from_slice::<Incoming>(payload) else {
            return self.refuse_log("unreadable", "an unreadable request");
        };
        let (link_peer, reply) = link.unzip();
        // A peer that proved the hub secret on its direct link is a live hub, even while the
        // broker has no presence record of it (its own broker connection is being made again).
        if !topics::valid_key(&req.from)
            || !(link_peer == Some(req.from.as_str()) || lock(&self.view).is_alive(&req.from))
            || req.from == self.me
            || link_peer.is_some_and(|p| p != req.from)
        {
            return self.refuse_log(
                "sender",
                "a request from a client that is not a live hub of the cluster",
            );
        }
        let key = (req.from.clone(), req.c);
        if req.cancel {
            // The aborted task never reaches its own `served_done`: the slot is released here.
            if let Some(task) = lock(&self.calls).release(&key) {
                task.abort();
            }
            return;
        }
        let Some(mut op) = req.op else {
            return self.refuse_log("unreadable", "a request with no op");
        };
        {
            let mut calls = lock(&self.calls);
            // Under the lock a stopping hub counts what is under way with ([`stop`]).
            if self.stopping.load(Ordering::Acquire) {
                drop(calls);
                return self.answer(&req.from, stop::refusal(&self.me, req.c), reply.as_ref());
            }
            let n = calls.served_per_peer.entry(req.from.clone()).or_default();
            if *n >= MAX_SERVED_PER_PEER {
                drop(calls);
                self.refuse_log(
                    "busy",
                    &format!(
                        "hub {} has {MAX_SERVED_PER_PEER} requests under way here",
                        req.from
                    ),
                );
                let message = format!(
                    "hub {} has {MAX_SERVED_PER_PEER} requests of this hub under way; try again when some end",
                    self.me
                );
                return self.answer(
                    &req.from,
                    json!({"id": req.c, "error": {"kind": "busy", "message": message}}).to_string(),
                    reply.as_ref(),
                );
            }
            *n += 1;
        }
        let Some(hub) = self.hub.upgrade() else { return };
        op.insert("id".into(), Value::from(req.c));
        let text = Value::Object(op).to_string();
        let (client, to, c) = (self.client.clone(), req.from.clone(), req.c);
        let node = self.this.clone();
        let secret = self.secret.clone();
        // Registered before the task can end (its end takes the same lock).
        let mut calls = lock(&self.calls);
        let task = tokio::spawn(async move {
            let (tx, mut events) = mpsc::channel::<String>(256);
            let served = control::serve_forwarded(hub, &text, tx);
            tokio::pin!(served);
            let answer = loop {
                tokio::select! {
                    a = &mut served => break a,
                    Some(ev) = events.recv() => {
                        // A watch's events wait for room (on the link, or in the broker queue).
                        let sealed = seal(&secret, &ev);
                        let sealed = match &reply {
                            Some(r) => match r.send(sealed).await {
                                Ok(()) => continue,
                                Err(s) => s,
                            },
                            None => sealed,
                        };
                        let _ = client.publish(format!("{}{to}/a", topics::RPC), QoS::AtMostOnce, false, sealed).await;
                    }
                }
            };
            if let Some(a) = answer {
                send_answer(&client, &to, seal(&secret, &a), reply.as_ref());
            }
            if let Some(node) = node.upgrade() {
                node.served_done(&to, c);
            }
        });
        calls.served.insert(key, task.abort_handle());
    }

    fn served_done(&self, peer: &str, c: u64) {
        let mut calls = lock(&self.calls);
        calls.release(&(peer.to_string(), c));
        if calls.under_way() == 0 {
            self.drained.notify_waiters();
        }
    }

    fn on_answer(&self, payload: &[u8]) {
        let Some(payload) = self.open(payload, "an answer") else {
            return;
        };
        let Ok(reply) = serde_json::from_slice::<Reply>(payload) else {
            return;
        };
        let mut calls = lock(&self.calls);
        match calls.waiting.get(&reply.id) {
            None => {}
            Some(Waiter::Stream { items, .. }) => {
                let item = match (reply.ok, reply.event, reply.error) {
                    (Some(ok), _, _) => WatchItem::Ok(ok),
                    (_, Some(ev), _) => WatchItem::Event(ev),
                    (_, _, Some(e)) => WatchItem::Error(e),
                    _ => return,
                };
                let end = matches!(item, WatchItem::Error(_));
                // A watcher that does not keep up loses events, as a local one does.
                let _ = items.try_send(item);
                if end {
                    calls.waiting.remove(&reply.id);
                }
            }
            Some(Waiter::Once { progress, .. }) if reply.event.is_some() => {
                // Progress of the call under way: passed on (dropped when its reader lags, as
                // progress may be), the answer still awaited.
                if let (Some(p), Some(ev)) = (progress, reply.event) {
                    let _ = p.try_send(ev);
                }
            }
            Some(Waiter::Once { .. }) => {
                let Some(Waiter::Once { reply: tx, .. }) = calls.waiting.remove(&reply.id) else { return };
                let answer = match (reply.ok, reply.error) {
                    (Some(ok), _) => Ok(ok.get().to_string()),
                    (None, Some(e)) => Err(e),
                    (None, None) => Err(json!({"kind": "link_down", "message": "another hub answered with neither a result nor an error"})),
                };
                let _ = tx.send(answer);
            }
        }
    }

    /// Sends a request (or a cancel) to hub `to`: on its direct link when one is up, else through
    /// the broker. `None` if it could not be sent; else whether it went on the link.
    fn send(&self, to: &str, body: Value) -> Option<bool> {
        let sealed = match self.links.send(to, self.seal(&body.to_string())) {
            Ok(()) => return Some(true),
            Err(sealed) => sealed,
        };
        self.client.try_publish(format!("{}{to}/q", topics::RPC), QoS::AtMostOnce, false, sealed).ok().map(|()| false)
    }

    /// Registers a waiter and sends the request; the error answer if it cannot be sent.
    fn start_call(&self, to: &str, op: Value, waiter: Waiter) -> Result<u64, (Waiter, Value)> {
        // `unsent`: the request went nowhere, so it may go elsewhere ([`stop`]).
        if !lock(&self.view).is_alive(to) {
            return Err((waiter, json!({"kind": "link_down", "unsent": true, "message": format!("hub {to} is not in the cluster any more; try again")})));
        }
        if self.is_leaving(to) {
            return Err((waiter, json!({"kind": "hub_stopping", "unsent": true, "message": format!("hub {to} is stopping: the request was not sent; its devices are being taken over by the other hubs")})));
        }
        let c = self.next.fetch_add(1, Ordering::Relaxed);
        {
            let mut calls = lock(&self.calls);
            if calls.waiting.len() >= MAX_WAITING {
                return Err((waiter, json!({"kind": "busy", "message": format!("this hub has {MAX_WAITING} requests waiting on other hubs; try again when some end")})));
            }
            calls.waiting.insert(c, waiter);
        }
        let Some(on_link) = self.send(to, json!({"c": c, "from": self.me, "op": op})) else {
            let w = lock(&self.calls).waiting.remove(&c);
            let error = json!({"kind": "link_down", "message": "the hub's broker connection cannot take the request now (its queue is full, or it is reconnecting)"});
            return Err((w.unwrap_or(Waiter::Once { hub: String::new(), reply: oneshot::channel().0, progress: None }), error));
        };
        crate::metrics::cluster_request(on_link);
        Ok(c)
    }

    fn cancel(&self, to: &str, c: u64) {
        lock(&self.calls).waiting.remove(&c);
        self.send(to, json!({"c": c, "from": self.me, "cancel": true}));
    }
}

/// A request of this hub that waits on another: cancelled there when dropped before its answer
/// came (its deadline passed, or whoever waited on it went away, as a host that closes a blocking
/// `tasks/result`), so neither hub keeps a slot for an answer nobody reads.
struct Pending {
    node: Weak<ClusterNode>,
    to: String,
    c: Option<u64>,
}

impl Drop for Pending {
    fn drop(&mut self) {
        if let (Some(c), Some(n)) = (self.c, self.node.upgrade()) {
            n.cancel(&self.to, c);
        }
    }
}

/// A sealed answer to hub `to`: on `link` while it takes it, else through the broker.
fn send_answer(client: &AsyncClient, to: &str, sealed: String, link: Option<&LinkReply>) {
    let sealed = match link {
        Some(r) => match r.try_send(sealed) {
            Ok(()) => return,
            Err(sealed) => sealed,
        },
        None => sealed,
    };
    if let Err(e) = client.try_publish(format!("{}{to}/a", topics::RPC), QoS::AtMostOnce, false, sealed) {
        warn!(hub = %to, "cannot queue a cluster answer: {e}");
    }
}

impl hub_link::Serve for ClusterNode {
    fn request(&self, peer: &str, payload: &[u8], reply: LinkReply) {
        self.on_request(payload, Some((peer, reply)));
    }
}

impl ClusterNode {
    /// One forwarded request to hub `hub`, as sent: its answer, or the error that ended it.
    fn forward_once(&self, hub: &str, op: Value, deadline: Duration, progress: Option<mpsc::Sender<Box<RawValue>>>) -> BoxFuture<'static, Answer> {
        let (reply, rx) = oneshot::channel();
        let started = self.start_call(hub, op, Waiter::Once { hub: hub.to_string(), reply, progress });
        let (node, to) = (self.this.clone(), hub.to_string());
        async move {
            let c = match started {
                Ok(c) => c,
                Err((_, e)) => return Err(e),
            };
            // Given up before the answer (the deadline, or the caller went away): cancelled there.
            let mut pending = Pending { node, to, c: Some(c) };
            let answer = match tokio::time::timeout(deadline, rx).await {
                Ok(Ok(answer)) => answer,
                Ok(Err(_)) => Err(json!({"kind": "link_down", "message": format!("hub {} stopped before answering", pending.to)})),
                Err(_) => return Err(json!({"kind": "timeout", "hub": pending.to, "message": format!("the device is served by hub {}, which did not answer within {deadline:?}", pending.to)})),
            };
            pending.c = None;
            answer
        }
        .boxed()
    }
}

#[path = "cluster_stop.rs"]
mod stop;
#[path = "cluster_progress.rs"]
mod progress;
#[path = "cluster_remote.rs"]
mod remote;
