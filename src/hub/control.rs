//! The small control API the CLI uses, on the loopback host listener: one WebSocket at
//! `/api/v1/link`, JSON requests tagged with an `id`, answered out of order.
//!
//! ```text
//! {"id":1,"op":"devices"}                                      -> {"id":1,"ok":[DeviceInfo…]}
//! {"id":1,"op":"devices","limit":200,"after":"aa:bb…"}         -> {"id":1,"ok":{"devices":[DeviceInfo…],"next":"aa:bc…"|null}}
//! {"id":2,"op":"device","device":"aa:bb","wait_ms":5000}        -> {"id":2,"ok":DeviceInfo}
//! {"id":3,"op":"rpc","device":"aa:bb","method":"tools/call","params":{…},"timeout_ms":30000}
//!                                                               -> {"id":3,"ok":result} | {"id":3,"error":{…}}
//! {"id":4,"op":"watch","device":null,"traffic":true}           -> {"id":4,"event":{…}} …
//! {"id":5,"op":"approve","target":"123456"|"aa:bb:…"}          -> {"id":5,"ok":{device_id,via,token?,device_url}}
//! {"id":6,"op":"revoke","device":"aa:bb:…"}                    -> {"id":6,"ok":{device_id,revoked,was,was_admitted,disconnected}}
//! {"id":7,"op":"pending"}                                      -> {"id":7,"ok":[Pending…]}
//! {"id":8,"op":"admitted"}                                     -> {"id":8,"ok":{"approve_all":bool,"devices":[Admitted…]}}
//! {"id":9,"op":"stats"}                                        -> {"id":9,"ok":{"in_flight":N}}
//! ```
//! Another hub of the cluster may also send (over the cluster's RPC, never a control connection):
//! ```text
//! {"id":10,"op":"task","method":"tasks/result","task":"<hub>/<hex>","owner":"10.0.0.7"|"person:<id>","wait_ms":62000}
//!                                                               -> {"id":10,"ok":{"result":…}|{"error":{JSON-RPC error}}}
//! ```
//! Errors: `{"kind": "no_devices|not_found|ambiguous|not_ready|timeout|device_error|disconnected|link_down|bad_request|busy",
//! "message": …, "rpc": {code,message,data}?}`.
//!
//! `devices` with a `limit` is one page, in Device-Id order, after the Device-Id `after`; `next`
//! is the `after` of the page that follows (null at the end). A page holds at most
//! [`MAX_DEVICES_PAGE`] devices. Without a `limit` the answer is every device in one message
//! (the shape older clients read), and `admitted` every approved device: both are *streamed*,
//! one WebSocket message sent in fragments made as the socket takes them ([`super::listing`]),
//! so what the hub holds for any answer is bounded whatever the fleet. The other answers are
//! bounded by what they describe: one device, one call's result (the device's, at most its
//! link's message limit), `pending` at most [`super::admission::MAX_PENDING`] requests a hub.
//!
//! In a cluster of hubs ([`super::remote`]), `devices` lists every hub's devices (each with its
//! `hub`; pages run over the whole cluster in Device-Id order), and `device`, `rpc`, `watch` and
//! `revoke` for a device another hub serves are passed to that hub; approvals and revocations
//! hold on every hub (sealed admission records, [`super::admission::record`]).
//!
//! One connection serves its requests concurrently in its own task, which also writes their
//! answers to the socket: at most [`MAX_IN_FLIGHT`] at a time (watches included; beyond that the
//! answer is `busy`), each at most [`MAX_REQUEST_BYTES`] long. A client that does not read its
//! answers for [`WRITE_DEADLINE`] is disconnected; a streamed answer's fragments go through the
//! same queue, under the same deadline, and no other answer is written between them.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::State;
use axum::http::{Request, Response};
use futures_util::{FutureExt, StreamExt};
use futures_util::stream::FuturesUnordered;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::Hub;
use super::listing::{self, Reply, STREAM_LOW_WATER, Streamed, text_of};
use super::registry::SelectError;
use super::remote::{self, Cluster, Located};
use crate::links::upgrade;
use crate::links::ws_socket::{Io, Socket};
use crate::session::CallError;
use crate::wire::jsonrpc::RawResult;
use crate::wire::ws_frame::{self, Incoming};

/// Most requests one connection may have under way (watches count).
pub const MAX_IN_FLIGHT: usize = 256;
/// Longest request text.
pub const MAX_REQUEST_BYTES: usize = 1 << 20;
/// Most devices in one page of `devices`.
pub const MAX_DEVICES_PAGE: usize = 1000;
/// Watch events one connection queues for its socket (beyond them, the ring's bound holds).
pub const WATCH_QUEUE: usize = 16;
/// Longest the hub waits for a client to take one answer.
pub const WRITE_DEADLINE: Duration = Duration::from_secs(30);
static LIMITS: crate::links::ws_socket::QueueLimits = crate::links::ws_socket::QueueLimits::device(WRITE_DEADLINE);

#[derive(Debug, PartialEq, Deserialize)]
struct ControlRequest {
    id: u64,
    #[serde(flatten)]
    op: Op,
}

#[derive(Debug, PartialEq, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
enum Op {
    Devices { #[serde(default)] after: Option<String>, #[serde(default)] limit: Option<usize> },
    Device { device: Option<String>, #[serde(default)] wait_ms: u64 },
    /// `progress`: the device's `notifications/progress` under the call's token come back as
    /// events while it runs (asked by another hub for its host, [`progress`]).
    Rpc { device: Option<String>, method: String, params: Option<Value>, timeout_ms: u64, #[serde(default)] progress: bool },
    Watch { device: Option<String>, #[serde(default)] traffic: bool },
    Approve { target: String, #[serde(default)] rebind: bool },
    Deny { code: String },
    Revoke { device: String },
    Pending,
    Admitted,
    /// This connection's own counters (for tests and diagnosis).
    Stats,
    /// An MCP task this hub holds, for a host another hub serves: served only for another hub
    /// of the cluster ([`serve_forwarded`]), never on a control connection (which could claim
    /// any owner).
    Task { method: String, task: String, owner: String, wait_ms: u64 },
}

pub async fn link(State(hub): State<Arc<Hub>>, mut req: Request<Body>) -> Response<Body> {
    // A connection lives only as long as the credential that opened it
    // (`control_auth::require_token` put it here): a remote token's revocation closes it
    // ([`super::principal`]).
    let credential = req.extensions().get::<super::bearer::Credential>().cloned();
    let lease = super::principal::lease(&hub, credential.as_ref());
    let (response, socket) = match upgrade::accept_raw(&mut req) {
        Ok(pair) => pair,
        Err(resp) => return resp,
    };
    tokio::spawn(async move {
        if let Some(io) = socket.await {
            serve(hub, io, credential, lease).await;
        }
    });
    response
}

/// One connection, in one task: it reads requests, polls those under way, and writes their
/// answers and its watches' events to the socket itself (no writer task between them).
async fn serve(hub: Arc<Hub>, io: upgrade::DeviceSocket, credential: Option<super::bearer::Credential>, lease: super::principal::Lease) {
    let mut socket = Socket::with_limits(io, &LIMITS);
    // Revoked between its check and now: closed at once (1008, policy violation: the credential
    // is no longer valid).
    let mut close_code = lease.is_ended().then_some(1008);
    // Watches send their events here; the loop takes them when it has room for them. Short: a
    // watch that waits here stops reading the hub's event ring, which drops what it cannot keep
    // and tells the watch how many it missed (a `lagged` event), so a client that reads slowly
    // makes the hub hold at most this many events (each cut to the viewers' frame size) beyond
    // the ring's bound and the socket's queue.
    let (tx, mut events) = mpsc::channel::<String>(WATCH_QUEUE);
    // Requests under way, polled only here; each yields its answer (a finished request leaves
    // at once: nothing is kept per request). Answers, as frames, wait in `outbox` for room in the
    // socket's queue, and no new request or event is taken while one waits, so the outbox holds
    // at most MAX_IN_FLIGHT answers plus those of one read's requests. This loop never waits
    // outside its `select!`: a request under way is always polled, whatever the client is doing.
    let mut running = FuturesUnordered::new();
    let mut outbox = std::collections::VecDeque::<Out>::new();
    let mut refused_busy = 0u64;
    while close_code.is_none() {
        let waiting = write_what_fits(&mut socket, &mut outbox);
        let stall = socket.out.stall_deadline();
        tokio::select! {
            Some(answer) = running.next(), if !running.is_empty() => {
                let answer: Option<Reply> = answer;
                outbox.extend(answer.map(Out::from));
            }
            Some(event) = events.recv(), if waiting.is_none() => outbox.push_back(Out::Frame(ws_frame::text(&event))),
            // While an answer waits, the socket is only written (until it fits, or a streamed
            // answer's next fragment may be made), not read.
            io = std::future::poll_fn(|cx| {
                let written = match waiting {
                    Some(Wait::Room(len)) => socket.poll_room(cx, len),
                    Some(Wait::Drain) => socket.poll_drained_to(cx, STREAM_LOW_WATER),
                    None => return socket.poll_io(cx),
                };
                written.map(|room| room.map_or_else(Io::WriteFailed, |()| Io::Read(Vec::new(), None)))
            }) => {
                let (messages, end) = match io {
                    Io::Read(messages, end) => (messages, end),
                    Io::WriteFailed(_) => break,
                };
                let mut closed = false;
                for message in messages {
                    match message {
                        Incoming::Text(text) => match accept(&text, running.len(), &mut refused_busy) {
                            Ok(ControlRequest { id, op: Op::Stats }) => outbox.push_back(Out::Frame(ws_frame::text(&json!({"id": id, "ok": {"in_flight": running.len()}}).to_string()))),
                            Ok(req) => running.push(handle(hub.clone(), req, tx.clone(), super::remote::of(&hub))),
                            Err(answer) => outbox.push_back(Out::Frame(ws_frame::text(&answer.to_string()))),
                        },
                        Incoming::Ping(payload) => {
                            let _ = socket.out.push(ws_frame::pong(&payload));
                        }
                        Incoming::Close(_) => closed = true,
                        Incoming::Binary(_) | Incoming::Data(_) | Incoming::Pong => {}
                    }
                }
                if closed || end.is_some() {
                    break;
                }
            }
            () = crate::links::websocket::sleep_until(stall) => {
                if socket.out.stall_deadline().is_some_and(|d| d <= tokio::time::Instant::now()) {
                    tracing::warn!("control client did not read its answers for {} s; disconnecting it", WRITE_DEADLINE.as_secs());
                    break;
                }
            }
            () = lease.end() => {
                if let Some(super::bearer::Credential::Remote(h)) = &credential {
                    tracing::info!(token = %h.name, id = %h.id, "remote token revoked: its control connection is closed");
                }
                close_code = Some(1008);
            }
        }
    }
    if refused_busy > 0 {
        tracing::warn!(count = refused_busy, "a control client was refused {refused_busy} requests over the {MAX_IN_FLIGHT}-request limit");
    }
    drop(running);
    let stalled = socket.out.stall_deadline().is_some_and(|d| d <= tokio::time::Instant::now());
    socket.finish(stalled, close_code).await;
}

/// What waits to be written to a control connection: a whole frame, or a streamed answer.
enum Out {
    Frame(Vec<u8>),
    Stream(Streamed),
}

impl From<Reply> for Out {
    fn from(reply: Reply) -> Self {
        match reply {
            Reply::Text(text) => Self::Frame(ws_frame::text(&text)),
            Reply::Streamed(s) => Self::Stream(s),
        }
    }
}

/// Why the front of the outbox waits: a frame for room in the socket's queue, a streamed answer
/// for the queue to drain to [`STREAM_LOW_WATER`].
#[derive(Clone, Copy)]
enum Wait {
    Room(usize),
    Drain,
}

/// Moves what fits from `outbox` to the socket's queue, in order: whole frames while there is
/// room for them, a streamed answer's fragments (made here, one at a time) while the queue is at
/// most [`STREAM_LOW_WATER`]. What the front still waits for, if anything is left.
fn write_what_fits<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(socket: &mut Socket<S>, outbox: &mut std::collections::VecDeque<Out>) -> Option<Wait> {
    loop {
        match outbox.front_mut()? {
            Out::Frame(frame) if socket.out.has_room(frame.len()) => {
                if let Some(Out::Frame(frame)) = outbox.pop_front() {
                    let _ = socket.out.push(frame);
                }
            }
            Out::Frame(frame) => return Some(Wait::Room(frame.len())),
            Out::Stream(s) if socket.out.queued_bytes() <= STREAM_LOW_WATER => match s.next_frame() {
                // A fragment is at most a few hundred KiB: it fits a queue this low.
                Some(frame) => {
                    let _ = socket.out.push(frame);
                }
                None => {
                    outbox.pop_front();
                }
            },
            Out::Stream(_) => return Some(Wait::Drain),
        }
    }
}

/// A request to serve, or the answer that refuses it (unreadable, too long, too many under way).
fn accept(text: &str, in_flight: usize, refused_busy: &mut u64) -> Result<ControlRequest, Value> {
    let id_of = |text: &str| serde_json::from_str::<Value>(text).ok().and_then(|v| v.get("id").cloned()).unwrap_or(Value::Null);
    if text.len() > MAX_REQUEST_BYTES {
        let message = format!("the request is {} bytes, over the {MAX_REQUEST_BYTES}-byte limit", text.len());
        return Err(json!({"id": Value::Null, "error": {"kind": "bad_request", "message": message}}));
    }
    let req = match rpc_request(text) {
        Some(req) => req,
        None => serde_json::from_str(text).map_err(|e| json!({"id": id_of(text), "error": {"kind": "bad_request", "message": e.to_string()}}))?,
    };
    if in_flight >= MAX_IN_FLIGHT && !matches!(req.op, Op::Stats) {
        if *refused_busy == 0 {
            tracing::warn!("a control client has {MAX_IN_FLIGHT} requests under way; refusing more until some end");
        }
        *refused_busy += 1;
        let message = format!("{MAX_IN_FLIGHT} requests of this connection are under way; wait for some to end, or open another connection");
        return Err(json!({"id": req.id, "error": {"kind": "busy", "message": message}}));
    }
    Ok(req)
}

/// The request the CLI sends most, `rpc`, read as one flat struct. `ControlRequest` reads any
/// request, but serde buffers a tagged, flattened enum as a tree of its own first, which cost more
/// than the rest of the request's reading. `None` for anything else, or anything this does not
/// read as `ControlRequest` would (then `ControlRequest` reads it, and explains what is wrong).
fn rpc_request(text: &str) -> Option<ControlRequest> {
    #[derive(Deserialize)]
    struct Rpc<'a> {
        id: u64,
        op: &'a str,
        device: Option<String>,
        method: String,
        params: Option<Value>,
        timeout_ms: u64,
        #[serde(default)]
        progress: bool,
    }
    // A derived struct also reads an array as its fields in order; `ControlRequest` does not.
    if !text.trim_start().starts_with('{') {
        return None;
    }
    let Rpc { id, op, device, method, params, timeout_ms, progress } = serde_json::from_str(text).ok()?;
    (op == "rpc").then_some(ControlRequest { id, op: Op::Rpc { device, method, params, timeout_ms, progress } })
}

/// Serves one request; its answer's text, or `None` for a watch (which sends its own events on
/// `tx` until the client goes away). With `cluster`, a device no local selector matches is looked
/// up among the other hubs and the request forwarded there ([`super::remote`]); requests other
/// hubs forwarded come with `None` and are served here only.
///
/// Answers are written as text straight from what they describe, not built as a `Value` first:
/// a device's description holds its tool list as the device's own JSON, and `devices` holds
/// every device's (36 MB at 10,000 devices, several times that as a `Value` tree).
async fn handle(hub: Arc<Hub>, req: ControlRequest, tx: mpsc::Sender<String>, cluster: Option<Arc<dyn Cluster>>) -> Option<Reply> {
    let id = req.id;
    let cluster = cluster.as_ref();
    let reply = match req.op {
        Op::Devices { after: None, limit: None } => return Some(Reply::Streamed(listing::devices(hub, cluster.cloned(), id))),
        Op::Admitted => return Some(Reply::Streamed(listing::admitted(hub, id))),
        Op::Devices { after, limit } => Ok(devices_page(&hub, cluster, after.as_deref(), limit.unwrap_or(MAX_DEVICES_PAGE))),
        Op::Device { device, wait_ms } => match cluster {
            Some(c) => cluster_device(&hub, c, device.as_deref(), wait_ms).await,
            None => device_info(&hub, device.as_deref(), wait_ms).await,
        },
        Op::Rpc { device, method, params, timeout_ms, progress: relay } => {
            let timeout = Duration::from_millis(timeout_ms.clamp(1, 3_600_000));
            match remote::route(&hub, cluster, device.as_deref(), timeout).await {
                Ok(Some((to, device_id))) => forward(cluster, &to, json!({"op": "rpc", "device": device_id, "method": method, "params": params, "timeout_ms": timeout_ms}), timeout).await,
                Ok(None) if relay => progress::rpc_relaying(&hub, device.as_deref(), &method, params, timeout_ms, id, &tx).await.map(RawResult::into_text),
                Ok(None) => rpc(&hub, device.as_deref(), &method, params, timeout_ms).await.map(RawResult::into_text),
                Err(e) => Err(e),
            }
        }
        Op::Watch { device, traffic } => {
            match cluster {
                Some(c) => cluster_watch(&hub, c, id, device, traffic, tx).await,
                None => watch(&hub, id, device, traffic, tx).await,
            }
            return None;
        }
        Op::Approve { target, rebind } => cluster_approve(&hub, cluster, &target, rebind).await,
        Op::Deny { code } => cluster_deny(&hub, cluster, &code).await,
        Op::Revoke { device } => cluster_revoke(&hub, cluster, &device).await,
        Op::Pending => Ok(pending_text(&hub, cluster).await),
        Op::Stats => Err(json!({"kind": "bad_request", "message": "stats is answered by the connection"})),
        Op::Task { .. } => Err(json!({"kind": "bad_request", "message": "the task op is served only for another hub of the cluster; MCP hosts reach tasks through /mcp"})),
    };
    Some(Reply::Text(match reply {
        // `ok` is JSON text already, and `id` a number: the envelope needs no escaping.
        Ok(ok) => format!(r#"{{"id":{id},"ok":{ok}}}"#),
        Err(e) => json!({"id": id, "error": e}).to_string(),
    }))
}

/// One request answered outside a connection (the dashboard's admission page): the same ops,
/// read the same way, with the same answers. A `watch` needs a connection and is refused.
pub async fn answer_once(hub: Arc<Hub>, text: &str) -> String {
    match accept(text, 0, &mut 0) {
        Ok(ControlRequest { id, op: Op::Watch { .. } | Op::Stats }) => {
            json!({"id": id, "error": {"kind": "bad_request", "message": "this op needs a control connection"}}).to_string()
        }
        Ok(req) => {
            let (tx, _events) = mpsc::channel(1);
            let cluster = super::remote::of(&hub);
            handle(hub, req, tx, cluster).await.map(Reply::into_text).unwrap_or_default()
        }
        Err(answer) => answer.to_string(),
    }
}

/// One page of `devices`: `{"devices":[…],"next":…}` ([`listing::devices_after`]; in a cluster
/// with `unlisted`, the hubs that serve devices their index does not list, with how many:
/// `[{"hub":…,"devices":N}]`). O(limit), whatever the cluster.
fn devices_page(hub: &Hub, cluster: Option<&Arc<dyn Cluster>>, after: Option<&str>, limit: usize) -> String {
    let (rows, next) = listing::devices_after(hub, cluster, after, limit.clamp(1, MAX_DEVICES_PAGE));
    let unlisted = cluster.map(|c| format!(r#","unlisted":{}"#, unlisted_text(c.as_ref()))).unwrap_or_default();
    format!(r#"{{"devices":[{}],"next":{}{unlisted}}}"#, rows.join(","), text_of(&next))
}

/// The hubs that serve devices their index does not list: `[{"hub":…,"devices":N}]`.
fn unlisted_text(c: &dyn Cluster) -> String {
    Value::Array(
        c.unlisted()
            .into_iter()
            .map(|(hub, n)| json!({"hub": hub, "devices": n}))
            .collect(),
    )
    .to_string()
}

/// An approval's answer with the URL devices connect to (`approve` names it in its hint).
fn with_device_url(hub: &Hub, approved: &super::admission::Approval) -> String {
    let mut v = serde_json::to_value(approved).unwrap_or_default();
    if let Some(o) = v.as_object_mut() {
        o.insert("device_url".into(), json!(hub.device_url_for(approved.asked_from)));
    }
    v.to_string()
}

async fn device_info(hub: &Hub, device: Option<&str>, wait_ms: u64) -> Result<String, Value> {
    let (_, info) = hub.registry.wait_ready(device, Duration::from_millis(wait_ms)).await.map_err(select_error)?;
    Ok(text_of(&*info))
}

/// The device's result is passed on as the text it sent.
async fn rpc(hub: &Hub, device: Option<&str>, method: &str, params: Option<Value>, timeout_ms: u64) -> Result<RawResult, Value> {
    let handle = hub.registry.select(device).map_err(select_error)?;
    let timeout = Duration::from_millis(timeout_ms.clamp(1, 3_600_000));
    handle.request(method, params, timeout).await.map_err(|e| call_error(&handle.device_id, e))
}

async fn watch(hub: &Hub, id: u64, device: Option<String>, traffic: bool, tx: mpsc::Sender<String>) {
    let mut events = hub.registry.events.subscribe();
    let _trace = traffic.then(|| hub.registry.tracing.watch());
    let wanted = match device.as_deref() {
        None => None,
        Some(sel) => match hub.registry.select(Some(sel)) {
            Ok(h) => Some(h.device_id),
            // A device that is not here yet: match on the id as given, so its connect is seen.
            Err(_) => Some(sel.to_ascii_lowercase()),
        },
    };
    let _ = tx.send(json!({"id": id, "ok": {"watching": wanted}}).to_string()).await;
    loop {
        let ev = match events.recv().await {
            Ok(ev) => ev,
            Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                let _ = tx.send(json!({"id": id, "event": {"event": "lagged", "skipped": n}}).to_string()).await;
                continue;
            }
            Err(_) => return,
        };
        if wanted.as_ref().is_some_and(|w| !ev.device_id.starts_with(w.as_str())) {
            continue;
        }
        let is_traffic = matches!(&ev.event, crate::links::handle::LinkEvent::Session(crate::session::Event::Traffic { .. }));
        if is_traffic && !traffic {
            continue;
        }
        if tx.send(format!(r#"{{"id":{id},"event":{}}}"#, text_of(&*ev))).await.is_err() {
            return;
        }
    }
}

fn bad_request(message: String) -> Value {
    json!({"kind": "bad_request", "message": message})
}

fn select_error(e: SelectError) -> Value {
    let kind = match e {
        SelectError::NoDevices => "no_devices",
        SelectError::NotFound(_) => "not_found",
        SelectError::NotReady(_) => "not_ready",
        SelectError::Ambiguous { .. } | SelectError::AmbiguousPrefix { .. } => "ambiguous",
    };
    json!({"kind": kind, "message": e.to_string()})
}

fn call_error(device: &str, e: CallError) -> Value {
    match e {
        CallError::Device(rpc) => json!({"kind": "device_error", "message": rpc.message, "rpc": rpc.to_value()}),
        CallError::Timeout(d) => json!({"kind": "timeout", "message": format!("device {device} did not answer within {d:?}")}),
        CallError::Disconnected => json!({"kind": "disconnected", "message": format!("device {device} disconnected before answering")}),
        CallError::Link(why) => json!({"kind": "link_down", "message": format!("device {device}: {why}")}),
    }
}

// The cluster (issue 26): requests for devices other hubs serve.

/// A request another hub of the cluster forwarded: served here only, never forwarded again.
/// Only the device ops are taken (`device`, `rpc`, `watch`, `revoke`, `approve`, `deny`, `devices`, `pending`), and `task`; the answer is
/// the control answer's text, or `None` for a watch (its events go to `tx`).
pub async fn serve_forwarded(hub: Arc<Hub>, request: &str, tx: mpsc::Sender<String>) -> Option<String> {
    let mut refused = 0;
    let req = match accept(request, 0, &mut refused) {
        Ok(req) => req,
        Err(answer) => return Some(answer.to_string()),
    };
    if let Op::Task { method, task, owner, wait_ms } = &req.op {
        let id = req.id;
        return Some(match serve_task(&hub, method, task, owner, *wait_ms).await {
            Ok(ok) => format!(r#"{{"id":{id},"ok":{ok}}}"#),
            Err(e) => json!({"id": id, "error": e}).to_string(),
        });
    }
    if !matches!(req.op, Op::Device { .. } | Op::Rpc { .. } | Op::Watch { .. } | Op::Revoke { .. } | Op::Approve { .. } | Op::Deny { .. } | Op::Devices { .. } | Op::Pending) {
        return Some(json!({"id": req.id, "error": {"kind": "bad_request", "message": "this op is not served for another hub"}}).to_string());
    }
    // One answer to another hub is one message: the whole fleet is never built for it (hubs list
    // each other's devices from the index; a page is asked with a `limit`).
    if let Op::Devices { after: None, limit: None } = req.op {
        return Some(json!({"id": req.id, "error": {"kind": "bad_request", "message": "devices is served for another hub a page at a time: give a limit"}}).to_string());
    }
    handle(hub, req, tx, None).await.map(Reply::into_text)
}

/// The admission requests waiting on every hub of the cluster, each with the hub that holds it
/// (the hub a code must be approved on is found by the approval itself, through any hub). A hub
/// that does not answer within [`PENDING_WAIT`] is left out and logged: the list is what could be
/// read, never a wait on a dead hub.
async fn pending_text(hub: &Hub, cluster: Option<&Arc<dyn Cluster>>) -> String {
    let local = hub.admission.pending();
    let Some(c) = cluster else { return text_of(&local) };
    let mut rows: Vec<String> = local.iter().map(|p| remote::with_hub(&text_of(p), c.me())).collect();
    let peers = c.peers();
    let asked = peers.iter().map(|peer| c.forward(peer, json!({"op": "pending"}), PENDING_WAIT));
    for (peer, answer) in peers.iter().zip(futures_util::future::join_all(asked).await) {
        let listed = answer.map_err(|e| e.to_string()).and_then(|text| serde_json::from_str::<Vec<Value>>(&text).map_err(|e| e.to_string()));
        match listed {
            Ok(theirs) => rows.extend(theirs.iter().filter(|p| p.is_object()).map(|p| remote::with_hub(&p.to_string(), peer))),
            Err(why) => tracing::warn!(%peer, "the pending requests of another hub could not be read: {why}"),
        }
    }
    format!("[{}]", rows.join(","))
}

/// The `task` op: `tasks/get|result|cancel` of a task this hub holds, for `owner` (as the asking
/// hub saw the host: the address of the hub's own user, or `person:<token id>`, `shared:<address>`
/// for the credential it proved; [`crate::hub::principal`]), answered as this hub's MCP endpoints would answer it:
/// `{"result": …}` or `{"error": …}` (JSON-RPC). `tasks/result` waits at most `wait_ms` (at most
/// [`TASK_WAIT_MAX`]), then answers a JSON-RPC error saying the task is still working, so no
/// request outlives the one the asking hub waits on. A hub without MCP endpoints holds no task
/// (`not_found`).
async fn serve_task(hub: &Hub, method: &str, task: &str, owner: &str, wait_ms: u64) -> Result<String, Value> {
    if !matches!(method, "tasks/get" | "tasks/result" | "tasks/cancel") {
        return Err(bad_request(format!("the task op takes tasks/get, tasks/result or tasks/cancel, not {:?}", method.chars().take(40).collect::<String>())));
    }
    if owner.is_empty() || owner.len() > 80 || !owner.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(bad_request("the task op's owner must be an address, person:<id> or shared:<address>".into()));
    }
    let Some(desk) = hub.tasks.get().cloned() else {
        return Err(json!({"kind": "not_found", "message": "this hub runs no MCP endpoints, so it holds no tasks"}));
    };
    let wait = Duration::from_millis(wait_ms).min(TASK_WAIT_MAX);
    let answer = match tokio::time::timeout(wait, desk.answer(owner, method, task)).await {
        Ok(answer) => answer,
        Err(_) => {
            let message = format!("task {} was still working after {wait:?}, longer than the hub you asked waits for it (the hubs' --mcp-timeout differ); ask for its result again", task.chars().take(80).collect::<String>());
            Err(json!({"code": -32000, "message": message, "data": {"kind": "timeout"}}))
        }
    };
    Ok(match answer {
        Ok(result) => json!({"result": result}),
        Err(error) => json!({"error": error}),
    }
    .to_string())
}

/// Longest a forwarded `tasks/result` is waited on here.
const TASK_WAIT_MAX: Duration = Duration::from_secs(3600);

/// How long `pending` waits for each other hub of the cluster.
const PENDING_WAIT: Duration = Duration::from_secs(2);

async fn forward(cluster: Option<&Arc<dyn Cluster>>, to: &str, op: Value, deadline: Duration) -> Result<String, Value> {
    match cluster {
        Some(c) => c.forward(to, op, deadline + remote::HOP_GRACE).await,
        None => Err(json!({"kind": "link_down", "message": "this hub is in no cluster"})),
    }
}

/// `device` in a cluster: here if the device is (or comes) here, else on the hub that serves it,
/// waiting up to `wait_ms` for it to appear on either.
async fn cluster_device(hub: &Hub, c: &Arc<dyn Cluster>, device: Option<&str>, wait_ms: u64) -> Result<String, Value> {
    let until = tokio::time::Instant::now() + Duration::from_millis(wait_ms);
    let mut changed = c.changed();
    loop {
        let left = until.saturating_duration_since(tokio::time::Instant::now());
        if let Some((to, device_id)) = remote::route(hub, Some(c), device, left).await? {
            let op = json!({"op": "device", "device": device_id, "wait_ms": left.as_millis() as u64});
            return forward(Some(c), &to, op, left).await.map(|t| remote::with_hub(&t, &to));
        }
        tokio::select! {
            r = hub.registry.wait_ready(device, left) => {
                return r.map(|(_, info)| remote::with_hub(&text_of(&*info), c.me())).map_err(select_error);
            }
            woke = tokio::time::timeout_at(until, changed.changed()) => {
                if woke.is_err() {
                    return device_info(hub, device, 0).await;
                }
            }
        }
    }
}

/// `watch` in a cluster: a device served elsewhere is watched on its hub; with no device, every
/// hub's events come together.
async fn cluster_watch(hub: &Hub, c: &Arc<dyn Cluster>, id: u64, device: Option<String>, traffic: bool, tx: mpsc::Sender<String>) {
    if device.is_some() {
        if let Ok(Some((to, device_id))) = remote::route(hub, Some(c), device.as_deref(), Duration::ZERO).await {
            return remote_watch(c, to, id, json!({"op": "watch", "device": device_id, "traffic": traffic}), tx, true).await;
        }
        return watch(hub, id, device, traffic, tx).await;
    }
    let peers = c.peers().into_iter().map(|to| remote_watch(c, to, id, json!({"op": "watch", "device": null, "traffic": traffic}), tx.clone(), false).boxed());
    let all: Vec<_> = std::iter::once(watch(hub, id, None, traffic, tx.clone()).boxed()).chain(peers).collect();
    futures_util::future::join_all(all).await;
}

async fn remote_watch(c: &Arc<dyn Cluster>, to: String, id: u64, op: Value, tx: mpsc::Sender<String>, first: bool) {
    let (events, mut rx) = mpsc::channel(256);
    let running = c.watch(&to, op, events);
    let relay = async {
        while let Some(item) = rx.recv().await {
            let text = match item {
                remote::WatchItem::Ok(ok) if first => format!(r#"{{"id":{id},"ok":{}}}"#, ok.get()),
                remote::WatchItem::Ok(_) => continue,
                remote::WatchItem::Event(ev) => format!(r#"{{"id":{id},"event":{}}}"#, ev.get()),
                remote::WatchItem::Error(e) => json!({"id": id, "error": e}).to_string(),
            };
            if tx.send(text).await.is_err() {
                return;
            }
        }
    };
    tokio::join!(running, relay);
}

/// `approve`: here, or, in a cluster, for an activation code this hub did not hand out, on the
/// hub the device checked in with. The hub that approves publishes the approval's record to every
/// hub ([`publish_admission`]); the asking hub applies the record the answer carries at once, so
/// the device is let in here as soon as the answer is out.
async fn cluster_approve(hub: &Hub, cluster: Option<&Arc<dyn Cluster>>, target: &str, rebind: bool) -> Result<String, Value> {
    let here = super::admission::approve_and_cut_over(hub, target, rebind).await;
    let e = match here {
        Ok((a, broker)) => {
            let record = publish_admission(hub, &a.device_id);
            if let Err(message) = broker {
                return Err(json!({"kind": "broker_unconfirmed", "message": message}));
            }
            let mut v = serde_json::from_str::<Value>(&with_device_url(hub, &a)).unwrap_or_default();
            // Only for the hub that forwarded the approval (a forwarded request has no cluster).
            if cluster.is_none()
                && let Some(r) = record
            {
                v["record"] = Value::from(r);
            }
            return Ok(v.to_string());
        }
        Err(e) => e,
    };
    let Some(c) = cluster.filter(|_| super::admission::is_code(target.trim())) else { return Err(bad_request(e)) };
    for peer in c.peers() {
        let Ok(text) = c.forward(&peer, json!({"op": "approve", "target": target, "rebind": rebind}), Duration::from_secs(5)).await else { continue };
        let mut v = serde_json::from_str::<Value>(&text).unwrap_or_default();
        let device_id = v["device_id"].as_str().unwrap_or_default().to_string();
        if let Some(record) = v.as_object_mut().and_then(|o| o.remove("record"))
            && let Err(e) = super::admission::import_and_cut_off(hub, &device_id, record.as_str().unwrap_or_default().as_bytes()).await
        {
            tracing::warn!(hub = %peer, device = %device_id, "the approval's record from another hub was refused: {e}");
        }
        v["hub"] = Value::from(peer);
        return Ok(v.to_string());
    }
    Err(bad_request(format!("{e} (no other hub of the cluster has it either)")))
}

/// `deny`: here, or, in a cluster, on the hub that handed the code out.
async fn cluster_deny(hub: &Hub, cluster: Option<&Arc<dyn Cluster>>, code: &str) -> Result<String, Value> {
    let e = match hub.admission.deny(code) {
        Ok(p) => return Ok(text_of(&p)),
        Err(e) => e,
    };
    let Some(c) = cluster else { return Err(bad_request(e)) };
    for peer in c.peers() {
        if let Ok(text) = c.forward(&peer, json!({"op": "deny", "code": code}), Duration::from_secs(5)).await {
            return Ok(remote::with_hub(&text, &peer));
        }
    }
    Err(bad_request(format!("{e} (no other hub of the cluster has it either)")))
}

/// Publishes `device_id`'s current admission decision to the cluster, if this hub is in one;
/// the sealed record, for an answer to carry.
fn publish_admission(hub: &Hub, device_id: &str) -> Option<String> {
    let c = remote::of(hub)?;
    let record = hub.admission.record(device_id, c.me())?;
    c.publish_admission(device_id, &record);
    Some(record)
}

/// `revoke`: withdrawn here, published to every hub (each cuts the device off if it serves it),
/// and, in a cluster, asked of the hub that serves the device, for its confirmation that the
/// device is cut off.
async fn cluster_revoke(hub: &Hub, cluster: Option<&Arc<dyn Cluster>>, device: &str) -> Result<String, Value> {
    let mut answer = super::admission::revoke_and_disconnect(hub, device).await.map_err(bad_request)?;
    let Some(device_id) = answer["device_id"].as_str().map(str::to_string) else { return Ok(answer.to_string()) };
    publish_admission(hub, &device_id);
    let Some(c) = cluster else { return Ok(answer.to_string()) };
    let mut unconfirmed = None;
    if answer["disconnected"] != true
        && let Located::Remote { hub: to, device_id } = c.locate(Some(&device_id), hub.registry.aliases())
    {
        match forward(cluster, &to, json!({"op": "revoke", "device": device_id}), Duration::from_secs(8)).await {
            // Its answer confirms the device is cut off there: by this request, or by the record
            // published above if that reached it first (then this request found nothing to cut).
            Ok(_) => answer["disconnected"] = Value::Bool(true),
            Err(e) => unconfirmed = Some(json!({"kind": e["kind"], "message": format!("revoked on every hub, but hub {to} that serves {device_id} did not confirm cutting it off: {}", e["message"].as_str().unwrap_or_default())})),
        }
        answer["hub"] = Value::from(to);
    }
    match unconfirmed {
        Some(e) => Err(e),
        None => Ok(answer.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A client that reads nothing holds the hub to its socket's queue and a fragment, never the
    /// whole listing: a streamed answer's next fragment is made only once the queue drained, and
    /// the write deadline runs meanwhile (issue 46.2).
    #[tokio::test]
    async fn a_streamed_answer_waits_for_a_client_that_does_not_read() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        const ROWS: usize = 100_000;
        let (near, _far) = tokio::io::duplex(64 << 10);
        let mut socket = Socket::with_limits(near, &LIMITS);
        let row = format!("\"{}\"", "x".repeat(4000));
        let made = Arc::new(AtomicUsize::new(0));
        let counted = made.clone();
        let pages: listing::Pages = Box::new(move |after: Option<&str>, limit: usize| {
            let start = after.map_or(0, |a| a.parse::<usize>().unwrap_or(0) + 1);
            let end = (start + limit).min(ROWS);
            counted.fetch_add(end - start, Ordering::Relaxed);
            ((start..end).map(|_| row.clone()).collect(), (end < ROWS).then(|| (end - 1).to_string()))
        });
        let mut outbox = std::collections::VecDeque::from([Out::Stream(Streamed::new("[".into(), "]", pages))]);
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        for _ in 0..20 {
            assert!(matches!(write_what_fits(&mut socket, &mut outbox), Some(Wait::Drain)), "the answer waits for the client");
            if socket.poll_drained_to(&mut cx, STREAM_LOW_WATER).is_pending() {
                break;
            }
        }
        assert!(socket.poll_drained_to(&mut cx, STREAM_LOW_WATER).is_pending(), "the client took everything?");
        let bytes = made.load(Ordering::Relaxed) * 4003;
        let bound = STREAM_LOW_WATER + listing::FRAGMENT_BYTES + listing::STREAM_CHUNK * 4003 + (64 << 10);
        assert!(bytes <= bound, "{bytes} bytes of rows made for a client that reads nothing (bound {bound})");
        assert!(socket.out.stall_deadline().is_some(), "the write deadline runs");
    }

    /// The flat read of `rpc` takes only what the full one reads the same way.
    #[test]
    fn an_rpc_request_is_read_flat_only_where_the_full_read_agrees() {
        let flat = [
            r#"{"id":3,"op":"rpc","device":"aa:bb","method":"tools/call","params":{"name":"x","arguments":{"v":1}},"timeout_ms":30000}"#,
            r#" {"op":"rpc","id":4,"device":null,"method":"ping","params":null,"timeout_ms":1,"extra":[1,2]}"#,
            r#"{"id":5,"op":"rpc","method":"ping","timeout_ms":10}"#,
        ];
        for text in flat {
            let read = rpc_request(text).unwrap_or_else(|| panic!("not read flat: {text}"));
            assert_eq!(Some(read), serde_json::from_str::<ControlRequest>(text).ok(), "{text}");
        }
        let left_to_the_full_read = [
            r#"{"id":1,"op":"devices"}"#,
            r#"{"id":1,"op":"devices","limit":5,"after":"aa"}"#,
            r#"{"id":1,"op":"rp\u0063","method":"ping","timeout_ms":10}"#,
            r#"{"id":1,"op":"rpc","op":"rpc","method":"ping","timeout_ms":10}"#,
            r#"{"id":1,"op":"rpc","method":"ping"}"#,
            r#"{"id":"1","op":"rpc","method":"ping","timeout_ms":10}"#,
            r#"[1,"rpc",null,"ping",null,10]"#,
        ];
        for text in left_to_the_full_read {
            assert_eq!(rpc_request(text), None, "{text}");
        }
    }
}

#[path = "control_progress.rs"]
mod progress;
