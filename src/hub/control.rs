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
//! {"id":6,"op":"revoke","device":"aa:bb:…"}                    -> {"id":6,"ok":{device_id,revoked,disconnected}}
//! {"id":7,"op":"pending"}                                      -> {"id":7,"ok":[Pending…]}
//! {"id":8,"op":"admitted"}                                     -> {"id":8,"ok":{"approve_all":bool,"devices":[Admitted…]}}
//! {"id":9,"op":"stats"}                                        -> {"id":9,"ok":{"in_flight":N}}
//! ```
//! Errors: `{"kind": "no_devices|not_found|ambiguous|not_ready|timeout|device_error|disconnected|link_down|bad_request|busy",
//! "message": …, "rpc": {code,message,data}?}`.
//!
//! `devices` with a `limit` is one page, in Device-Id order, after the Device-Id `after`; `next`
//! is the `after` of the page that follows (null at the end). A page holds at most
//! [`MAX_DEVICES_PAGE`] devices, so what the hub builds for one answer is bounded whatever the
//! fleet; without a `limit` the answer is every device at once (the shape older clients read).
//!
//! One connection serves its requests concurrently in its own task, which also writes their
//! answers to the socket: at most [`MAX_IN_FLIGHT`] at a time (watches included; beyond that the
//! answer is `busy`), each at most [`MAX_REQUEST_BYTES`] long. A client that does not read its
//! answers for [`WRITE_DEADLINE`] is disconnected.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::State;
use axum::http::{Request, Response};
use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::Hub;
use super::registry::SelectError;
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
/// Longest the hub waits for a client to take one answer.
pub const WRITE_DEADLINE: Duration = Duration::from_secs(30);

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
    Rpc { device: Option<String>, method: String, params: Option<Value>, timeout_ms: u64 },
    Watch { device: Option<String>, #[serde(default)] traffic: bool },
    Approve { target: String, #[serde(default)] rebind: bool },
    Deny { code: String },
    Revoke { device: String },
    Pending,
    Admitted,
    /// This connection's own counters (for tests and diagnosis).
    Stats,
}

pub async fn link(State(hub): State<Arc<Hub>>, mut req: Request<Body>) -> Response<Body> {
    let (response, socket) = match upgrade::accept_raw(&mut req) {
        Ok(pair) => pair,
        Err(resp) => return resp,
    };
    tokio::spawn(async move {
        if let Some(io) = socket.await {
            serve(hub, io).await;
        }
    });
    response
}

/// One connection, in one task: it reads requests, polls those under way, and writes their
/// answers and its watches' events to the socket itself (no writer task between them).
async fn serve(hub: Arc<Hub>, io: upgrade::DeviceSocket) {
    let mut socket = Socket::with_write_deadline(io, WRITE_DEADLINE);
    // Watches send their events here; the loop takes them when it has room for them.
    let (tx, mut events) = mpsc::channel::<String>(256);
    // Requests under way, polled only here; each yields its answer (a finished request leaves
    // at once: nothing is kept per request). Answers, as frames, wait in `outbox` for room in the
    // socket's queue, and no new request or event is taken while one waits, so the outbox holds
    // at most MAX_IN_FLIGHT answers plus those of one read's requests. This loop never waits
    // outside its `select!`: a request under way is always polled, whatever the client is doing.
    let mut running = FuturesUnordered::new();
    let mut outbox = std::collections::VecDeque::<Vec<u8>>::new();
    let mut refused_busy = 0u64;
    loop {
        while outbox.front().is_some_and(|frame| socket.out.has_room(frame.len())) {
            let _ = socket.out.push(outbox.pop_front().expect("a front frame"));
        }
        // The size of the answer waiting for room, if one is.
        let waiting = outbox.front().map(Vec::len);
        let stall = socket.out.stall_deadline();
        tokio::select! {
            Some(answer) = running.next(), if !running.is_empty() => {
                let answer: Option<String> = answer;
                outbox.extend(answer.as_deref().map(ws_frame::text));
            }
            Some(event) = events.recv(), if waiting.is_none() => outbox.push_back(ws_frame::text(&event)),
            // While an answer waits for room, the socket is only written (until it fits), not read.
            io = std::future::poll_fn(|cx| match waiting {
                Some(len) => socket.poll_room(cx, len).map(|room| room.map_or_else(Io::WriteFailed, |()| Io::Read(Vec::new(), None))),
                None => socket.poll_io(cx),
            }) => {
                let (messages, end) = match io {
                    Io::Read(messages, end) => (messages, end),
                    Io::WriteFailed(_) => break,
                };
                let mut closed = false;
                for message in messages {
                    match message {
                        Incoming::Text(text) => match accept(&text, running.len(), &mut refused_busy) {
                            Ok(ControlRequest { id, op: Op::Stats }) => outbox.push_back(ws_frame::text(&json!({"id": id, "ok": {"in_flight": running.len()}}).to_string())),
                            Ok(req) => running.push(handle(hub.clone(), req, tx.clone())),
                            Err(answer) => outbox.push_back(ws_frame::text(&answer.to_string())),
                        },
                        Incoming::Ping(payload) => {
                            let _ = socket.out.push(ws_frame::pong(&payload));
                        }
                        Incoming::Close(_) => closed = true,
                        Incoming::Binary(_) | Incoming::Pong => {}
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
        }
    }
    if refused_busy > 0 {
        tracing::warn!(count = refused_busy, "a control client was refused {refused_busy} requests over the {MAX_IN_FLIGHT}-request limit");
    }
    drop(running);
    let stalled = socket.out.stall_deadline().is_some_and(|d| d <= tokio::time::Instant::now());
    socket.finish(stalled, None).await;
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
    }
    // A derived struct also reads an array as its fields in order; `ControlRequest` does not.
    if !text.trim_start().starts_with('{') {
        return None;
    }
    let Rpc { id, op, device, method, params, timeout_ms } = serde_json::from_str(text).ok()?;
    (op == "rpc").then_some(ControlRequest { id, op: Op::Rpc { device, method, params, timeout_ms } })
}

/// Serves one request; its answer's text, or `None` for a watch (which sends its own events on
/// `tx` until the client goes away).
///
/// Answers are written as text straight from what they describe, not built as a `Value` first:
/// a device's description holds its tool list as the device's own JSON, and `devices` holds
/// every device's (36 MB at 10,000 devices, several times that as a `Value` tree).
async fn handle(hub: Arc<Hub>, req: ControlRequest, tx: mpsc::Sender<String>) -> Option<String> {
    let id = req.id;
    let reply = match req.op {
        Op::Devices { after, limit: None } if after.is_none() => Ok(text_of(&hub.registry.snapshots().iter().map(|i| &**i).collect::<Vec<_>>())),
        Op::Devices { after, limit } => Ok(devices_page(&hub, after.as_deref(), limit.unwrap_or(MAX_DEVICES_PAGE))),
        Op::Device { device, wait_ms } => device_info(&hub, device.as_deref(), wait_ms).await,
        Op::Rpc { device, method, params, timeout_ms } => rpc(&hub, device.as_deref(), &method, params, timeout_ms).await.map(RawResult::into_text),
        Op::Watch { device, traffic } => {
            watch(&hub, id, device, traffic, tx).await;
            return None;
        }
        Op::Approve { target, rebind } => super::admission::approve_and_cut_over(&hub, &target, rebind).await.map(|a| with_device_url(&hub, &a)).map_err(bad_request),
        Op::Deny { code } => hub.admission.deny(&code).map(|p| text_of(&p)).map_err(bad_request),
        Op::Revoke { device } => super::admission::revoke_and_disconnect(&hub, &device).await.map(|v| v.to_string()).map_err(bad_request),
        Op::Pending => Ok(text_of(&hub.admission.pending())),
        Op::Admitted => Ok(json!({"approve_all": hub.admission.approve_all(), "devices": hub.admission.admitted().iter().map(super::admission::Admitted::public).collect::<Vec<_>>()}).to_string()),
        Op::Stats => Err(json!({"kind": "bad_request", "message": "stats is answered by the connection"})),
    };
    Some(match reply {
        // `ok` is JSON text already, and `id` a number: the envelope needs no escaping.
        Ok(ok) => format!(r#"{{"id":{id},"ok":{ok}}}"#),
        Err(e) => json!({"id": id, "error": e}).to_string(),
    })
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
            handle(hub, req, tx).await.unwrap_or_default()
        }
        Err(answer) => answer.to_string(),
    }
}

/// One page of `devices`: `{"devices":[…],"next":…}`.
fn devices_page(hub: &Hub, after: Option<&str>, limit: usize) -> String {
    #[derive(serde::Serialize)]
    struct Page<'a> {
        devices: Vec<&'a crate::session::DeviceInfo>,
        next: Option<String>,
    }
    let (infos, next) = hub.registry.page(after, limit.clamp(1, MAX_DEVICES_PAGE));
    text_of(&Page { devices: infos.iter().map(|i| &**i).collect(), next })
}

/// The JSON text of an answer. Serializing these types cannot fail (string keys, no floats
/// that JSON cannot hold); should it ever, the client gets `null` rather than a broken frame.
/// An approval's answer with the URL devices connect to (`approve` names it in its hint).
fn with_device_url(hub: &Hub, approved: &impl serde::Serialize) -> String {
    let mut v = serde_json::to_value(approved).unwrap_or_default();
    if let Some(o) = v.as_object_mut() {
        o.insert("device_url".into(), json!(hub.device_url()));
    }
    v.to_string()
}

fn text_of(value: &impl serde::Serialize) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| "null".to_string())
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

#[cfg(test)]
mod tests {
    use super::*;

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
