//! A device relayed to its own upstream voice backend (`serve --upstream`): one task owns the
//! device's socket, the upstream's socket and the device's session, so the hub watches and calls
//! the device while the upstream holds its conversation.
//!
//! Rules it enforces:
//! - **Every frame passes, in order, unchanged**: the device's text and binary messages go up,
//!   the upstream's come down, with the same payload bytes (re-framed: a relay unmasks what the
//!   device sent and masks what it sends up, as RFC 6455 requires). The only change is an
//!   upstream request id that collides with one in flight ([`calls`]), and its answer's id back.
//!   WebSocket pings are answered on each hop, not passed on.
//! - **The upstream sees nothing the hub did**: the hub's requests go to the device alone, and the
//!   device's answers to them (and to ids nobody asked) never go up. The device's session is fed
//!   everything the device says (hello, notifications, its answers to the hub), and
//!   [`crate::session::relayed`] keeps it from answering anything itself.
//! - **Backpressure, bounded in bytes per peer**: a side is read only while the queue towards the
//!   other holds less than [`RELAY_HIGH_WATER`](super::ws_socket::RELAY_HIGH_WATER) bytes, so a
//!   slow reader slows the sender down to its own pace (through TCP), and each queue stays under
//!   [`RELAY_QUEUE_BYTES`](super::ws_socket::RELAY_QUEUE_BYTES). A peer that takes nothing for
//!   [`WRITE_DEADLINE`](super::ws_socket::WRITE_DEADLINE) ends the relay; a message over 1 MiB
//!   from either side ends it too.
//! - **One ends, both end**: the upstream closing (its close code is passed on) or failing closes
//!   the device's WebSocket, which the stock firmware acts on; the device leaving closes the
//!   upstream's session. The reason is logged (rate-limited per device) and in the
//!   `disconnected` event. The hub's calls in flight end with "disconnected"; the upstream's
//!   requests in flight get no answer from the hub (its own session ended).
//! - Answers from the device to ids nobody asked for are dropped, counted (`late_replies`) and
//!   logged at most once a second per device.

pub mod calls;
pub mod upstream;

use std::task::Poll;
use std::time::Instant;

use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite};
use tracing::{info, warn};

use self::calls::{Method, UpstreamCalls};
use super::handle::{Commands, DeviceEvent, DeviceHandle, InfoPublisher, Lifecycle, LinkEvent, LinkSetup, MalformedLog, Waiting, spawn_link};
use super::websocket::{after_step, carry_out, command, end_session, open_session, sleep_until};
use super::ws_socket::{Io, RELAY_HIGH_WATER, Socket};
use crate::session::{Direction, Event, Output, Peer, Session};
use crate::wire::ws_frame::{Incoming, Kind};

pub use calls::HUB_ID_BASE;

/// The close code a device gets when its upstream failed without one of its own (1011: the
/// server met a condition it cannot go on with).
pub const UPSTREAM_FAILED: u16 = 1011;

/// Which socket has something.
enum Side {
    Device(Io),
    Upstream(Io),
}

/// Starts the task relaying one device (after its WebSocket handshake) to its upstream (after
/// that one's); returns the device's handle. `upstream_name` is how the logs name the upstream.
pub fn spawn<D, U>(device: D, upstream: U, mut setup: LinkSetup, upstream_name: String, on_end: impl FnOnce() + Send + 'static) -> DeviceHandle
where
    D: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    U: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    setup.session.relayed = true;
    setup.session.id_base = HUB_ID_BASE;
    let (device_id, generation) = (setup.identity.device_id.clone(), setup.generation);
    spawn_link(device_id, generation, move |commands, publisher| run(device, upstream, commands, publisher, setup, upstream_name), on_end)
}

fn run<D, U>(device: D, upstream: U, mut commands: Commands, mut publisher: InfoPublisher, setup: LinkSetup, upstream_name: String) -> impl Future<Output = ()> + Send + 'static
where
    D: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    U: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let LinkSetup { identity, session: session_config, events, tracing, remote, mut until_hello, hello_timeout, generation: _ } = setup;
    let device_id = publisher.device_id().clone();
    let mut dev = Socket::relaying(device, false);
    let mut up = Socket::relaying(upstream, true);
    let mut session = open_session(identity, session_config, remote, &mut publisher, &events);
    session.set_upstream(&upstream_name);
    publisher.update(session.shared_info(), Instant::now());
    let hello_deadline = hello_timeout.map(|d| (tokio::time::Instant::now() + d, d));
    async move {
        let emit = |event: LinkEvent| {
            crate::metrics::device_event(event.name());
            let _ = events.send(std::sync::Arc::new(DeviceEvent { device_id: device_id.clone(), event }));
        };
        let mut waiting = Waiting::new();
        let mut malformed = MalformedLog::new(&device_id);
        let mut calls = UpstreamCalls::default();
        let mut relay = Relay { calls: &mut calls, device_id: &device_id[..] };
        // Which side is read first: each turn the other, so neither starves the other.
        let mut upstream_first = false;
        // Which side stalled (sent nothing more to be said goodbye to), and the close codes.
        let (mut dev_stalled, mut up_stalled, mut refused) = (false, false, false);
        let (mut dev_code, mut up_code): (Option<u16>, Option<u16>) = (None, None);
        let reason = loop {
            session.trace = tracing.enabled();
            let deadline = session.next_deadline().map(tokio::time::Instant::from_std);
            let awaiting_hello = hello_deadline.filter(|_| session.info().hello.is_none());
            let stalls = [dev.out.stall_deadline(), up.out.stall_deadline()];
            let timer = [deadline, stalls[0], stalls[1], publisher.refresh_at(), awaiting_hello.map(|(at, _)| at)].into_iter().flatten().min();
            upstream_first = !upstream_first;
            let outputs = tokio::select! {
                side = std::future::poll_fn(|cx| {
                    // A side is read only while the other's queue has room (backpressure).
                    let (read_dev, read_up) = (up.out.queued_bytes() < RELAY_HIGH_WATER, dev.out.queued_bytes() < RELAY_HIGH_WATER);
                    if upstream_first {
                        if let Poll::Ready(io) = up.poll_io_if(cx, read_up) {
                            return Poll::Ready(Side::Upstream(io));
                        }
                        return dev.poll_io_if(cx, read_dev).map(Side::Device);
                    }
                    if let Poll::Ready(io) = dev.poll_io_if(cx, read_dev) {
                        return Poll::Ready(Side::Device(io));
                    }
                    up.poll_io_if(cx, read_up).map(Side::Upstream)
                }) => match side {
                    Side::Device(Io::Read(messages, end)) => {
                        let mut outputs = Vec::new();
                        let mut closed = false;
                        for message in messages {
                            session.trace = tracing.enabled();
                            match message {
                                Incoming::Text(text) => relay.from_device(&text, &mut session, &mut up, &mut outputs, &emit, &mut up_stalled),
                                Incoming::Data(bytes) => {
                                    session.on_binary(bytes.len());
                                    push(&mut up, Kind::Binary, &bytes, &mut up_stalled);
                                }
                                Incoming::Binary(_) | Incoming::Pong => {}
                                Incoming::Ping(payload) => push(&mut dev, Kind::Pong, &payload, &mut dev_stalled),
                                Incoming::Close(code) => {
                                    dev_code = code;
                                    closed = true;
                                }
                            }
                        }
                        let end = if closed { Some("closed by the device".to_string()) } else { end };
                        if let Some(why) = end {
                            let _ = carry_out(outputs, &mut dev.out, &mut waiting, &mut malformed, &emit);
                            up_code = Some(dev_code.unwrap_or(1000));
                            break why;
                        }
                        if dev_stalled || up_stalled {
                            break stall_reason(&dev, &up, dev_stalled);
                        }
                        outputs
                    }
                    Side::Upstream(Io::Read(messages, end)) => {
                        let mut closed = None;
                        for message in messages {
                            session.trace = tracing.enabled();
                            match message {
                                Incoming::Text(text) => relay.from_upstream(text, &mut session, &mut dev, &emit, &mut dev_stalled),
                                Incoming::Data(bytes) => push(&mut dev, Kind::Binary, &bytes, &mut dev_stalled),
                                Incoming::Binary(_) | Incoming::Pong => {}
                                Incoming::Ping(payload) => push(&mut up, Kind::Pong, &payload, &mut up_stalled),
                                Incoming::Close(code) => closed = Some(code),
                            }
                        }
                        if let Some(code) = closed {
                            up_code = code;
                            dev_code = Some(code.unwrap_or(1000));
                            break format!("the upstream {upstream_name} closed the session{}", code.map(|c| format!(" (code {c})")).unwrap_or_default());
                        }
                        if let Some(why) = end {
                            dev_code = Some(UPSTREAM_FAILED);
                            up_stalled = true;
                            break format!("the upstream {upstream_name}: {why}");
                        }
                        if dev_stalled || up_stalled {
                            break stall_reason(&dev, &up, dev_stalled);
                        }
                        Vec::new()
                    }
                    Side::Device(Io::WriteFailed(why)) => {
                        dev_stalled = true;
                        up_code = Some(1001);
                        break why;
                    }
                    Side::Upstream(Io::WriteFailed(why)) => {
                        up_stalled = true;
                        dev_code = Some(UPSTREAM_FAILED);
                        break format!("the upstream {upstream_name}: {why}");
                    }
                },
                cmd = commands.recv() => match command(cmd, &mut session, &mut waiting, &tracing) {
                    Ok(outputs) => outputs,
                    Err((why, code)) => {
                        dev_code = code;
                        up_code = Some(1001);
                        break why;
                    }
                },
                _ = sleep_until(timer) => {
                    let now = tokio::time::Instant::now();
                    if let Some((at, waited)) = awaiting_hello
                        && at <= now
                    {
                        refused = true;
                        up_code = Some(1001);
                        break format!("no hello within {} ms", waited.as_millis());
                    }
                    if dev.out.stall_deadline().is_some_and(|d| d <= now) {
                        dev_stalled = true;
                        up_code = Some(1001);
                        break dev.out.stall_reason();
                    }
                    if up.out.stall_deadline().is_some_and(|d| d <= now) {
                        up_stalled = true;
                        dev_code = Some(UPSTREAM_FAILED);
                        break format!("{} ({upstream_name})", up.out.stall_reason());
                    }
                    if deadline.is_some_and(|d| d <= now) { session.on_tick(Instant::now()) } else { Vec::new() }
                }
            };
            after_step(&mut publisher, &session, &mut until_hello);
            if let Err(why) = carry_out(outputs, &mut dev.out, &mut waiting, &mut malformed, &emit) {
                dev_stalled = true;
                break why;
            }
        };
        end_session(&mut publisher, until_hello, &mut session, &mut waiting);
        let log = crate::metrics::log_limit::allow(crate::metrics::log_limit::Kind::Disconnect, &device_id);
        if log && (dev_stalled || up_stalled || refused) {
            warn!(device = %device_id, %reason, "ending a relayed device's session");
        }
        // Both goodbyes at once: neither side waits for the other's.
        tokio::join!(Box::pin(dev.finish(dev_stalled, dev_code)), Box::pin(up.finish(up_stalled, up_code)));
        if log {
            info!(device = %device_id, %reason, upstream = %upstream_name, "relayed device disconnected");
        }
        emit(LinkEvent::Link(Lifecycle::Disconnected { reason }));
    }
}

/// Queues a frame for one side; a queue over its cap marks that side as not reading.
fn push<S: AsyncRead + AsyncWrite + Unpin>(socket: &mut Socket<S>, kind: Kind, payload: &[u8], stalled: &mut bool) {
    let frame = socket.frame(kind, payload);
    if socket.out.push(frame).is_err() {
        *stalled = true;
    }
}

fn stall_reason<D: AsyncRead + AsyncWrite + Unpin, U: AsyncRead + AsyncWrite + Unpin>(dev: &Socket<D>, up: &Socket<U>, device: bool) -> String {
    if device {
        format!("the device stopped reading: over {} bytes wait to be sent", dev.out.queued_bytes())
    } else {
        format!("the upstream stopped reading: over {} bytes wait to be sent", up.out.queued_bytes())
    }
}

/// What the relay knows between frames.
struct Relay<'a> {
    calls: &'a mut UpstreamCalls,
    device_id: &'a str,
}

/// An MCP payload's parts the relay routes by.
struct Mcp<'a> {
    id: Option<&'a Value>,
    method: Option<&'a str>,
}

fn mcp_of(frame: &Value) -> Option<Mcp<'_>> {
    if frame.get("type").and_then(Value::as_str) != Some("mcp") {
        return None;
    }
    let payload = frame.get("payload")?;
    Some(Mcp { id: payload.get("id").filter(|id| !id.is_null()), method: payload.get("method").and_then(Value::as_str) })
}

/// `frame` with its payload's id set to `id`, as text (other fields kept in their order).
fn with_id(mut frame: Value, id: Value) -> String {
    if let Some(payload) = frame.get_mut("payload").and_then(Value::as_object_mut) {
        payload.insert("id".into(), id);
    }
    frame.to_string()
}

impl Relay<'_> {
    /// A text message from the device: an answer to an upstream request goes up (and an
    /// `initialize` answer is recorded); an answer to anything else is the session's alone;
    /// everything else goes up and to the session.
    fn from_device<U: AsyncRead + AsyncWrite + Unpin>(&mut self, text: &str, session: &mut Session, up: &mut Socket<U>, outputs: &mut Vec<Output>, emit: &impl Fn(LinkEvent), up_stalled: &mut bool) {
        let parsed: Option<Value> = serde_json::from_str(text).ok();
        let answer = parsed.as_ref().and_then(mcp_of).filter(|m| m.method.is_none()).and_then(|m| m.id.cloned());
        let Some(id) = answer else {
            outputs.extend(session.on_text(text, Instant::now()));
            return push(up, Kind::Text, text.as_bytes(), up_stalled);
        };
        match self.calls.on_answer(&id) {
            Some(answered) => {
                let frame = parsed.expect("an answer was parsed");
                if answered.method == Method::Initialize
                    && let Some(result) = frame.pointer("/payload/result")
                {
                    outputs.extend(session.observed_initialize(result, Instant::now()));
                }
                if session.trace {
                    let payload = frame.get("payload").cloned().unwrap_or_default();
                    emit(LinkEvent::Session(Event::Traffic { direction: Direction::In, by: Peer::Device, payload: crate::session::cut_for_viewers(&payload, text.len(), text), latency_ms: None }));
                }
                let text = match answered.upstream_id {
                    Some(theirs) => with_id(frame, theirs),
                    None => text.to_string(),
                };
                push(up, Kind::Text, text.as_bytes(), up_stalled);
            }
            None => {
                let late = session.info().counters.late_replies;
                outputs.extend(session.on_text(text, Instant::now()));
                if session.info().counters.late_replies > late && crate::metrics::log_limit::allow(crate::metrics::log_limit::Kind::Device, self.device_id) {
                    let id: String = id.to_string().chars().take(64).collect();
                    warn!(device = %self.device_id, id = ?id, "the device answered an id nobody asked (or asked no more): dropped, not passed to the upstream");
                }
            }
        }
    }

    /// A text message from the upstream: to the device, an upstream request whose id collides
    /// given a free one; traced as the upstream's.
    fn from_upstream<D: AsyncRead + AsyncWrite + Unpin>(&mut self, text: String, session: &mut Session, dev: &mut Socket<D>, emit: &impl Fn(LinkEvent), dev_stalled: &mut bool) {
        let parsed: Option<Value> = serde_json::from_str(&text).ok();
        let request = parsed.as_ref().and_then(mcp_of).and_then(|m| Some((m.id?.clone(), m.method?.to_string())));
        let evicted = self.calls.evicted;
        let translated = request.and_then(|(id, method)| self.calls.on_request(&id, &method, Instant::now()));
        if self.calls.evicted > evicted && crate::metrics::log_limit::allow(crate::metrics::log_limit::Kind::Device, self.device_id) {
            warn!(device = %self.device_id, in_flight = calls::MAX_IN_FLIGHT, "the upstream has more requests in flight than the relay keeps: the oldest is forgotten (its answer will be dropped)");
        }
        if session.trace
            && let Some(payload) = parsed.as_ref().and_then(|f| f.get("payload"))
        {
            emit(LinkEvent::Session(Event::Traffic { direction: Direction::Out, by: Peer::Upstream, payload: crate::session::cut_for_viewers(payload, text.len(), &text), latency_ms: None }));
        }
        let text = match (translated, parsed) {
            (Some(ours), Some(frame)) => with_id(frame, Value::from(ours)),
            _ => text,
        };
        push(dev, Kind::Text, text.as_bytes(), dev_stalled);
    }
}
