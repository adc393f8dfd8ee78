//! A device's WebSocket: one task that owns the device's session and its socket
//! ([`super::ws_socket`]), reading messages and writing frames.
//!
//! The task never waits on the device: what it sends goes to a bounded queue that is written as
//! far as the device takes it. A device that does not read (its socket buffers full) is
//! disconnected with the reason "the device stopped reading: …", and its callers end at once.

use std::time::Instant;

use tokio::io::{AsyncRead, AsyncWrite};
use tracing::{info, warn};

use super::handle::{Command, Commands, DeviceEvent, DeviceHandle, InfoPublisher, Lifecycle, LinkEvent, LinkSetup, MalformedLog, Request, Waiting, deliver, end_callers, spawn_link};

use super::ws_socket::{Io, Outbox, Socket};
use crate::session::{Output, Session};
use crate::wire::ws_frame::{self, Incoming};

/// The server hello a WebSocket device expects ([`crate::wire::envelope::websocket_server_hello`]).
pub fn server_hello(session_id: &str) -> String {
    crate::wire::envelope::websocket_server_hello(session_id)
}

/// Starts the task serving one device socket (after its WebSocket handshake); returns its handle.
/// `on_end` runs in the task when the link has ended.
pub fn spawn<S>(io: S, setup: LinkSetup, on_end: impl FnOnce() + Send + 'static) -> DeviceHandle
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (device_id, generation) = (setup.identity.device_id.clone(), setup.generation);
    spawn_link(device_id, generation, move |commands, publisher| run(io, commands, publisher, setup), on_end)
}

/// The link task: set up here, in plain code, so that the future holds only what it keeps using
/// (an `async fn` would keep its arguments, the whole setup included, for the device's lifetime).
fn run<S>(io: S, mut commands: Commands, mut publisher: InfoPublisher, setup: LinkSetup) -> impl Future<Output = ()> + Send + 'static
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    // The setup is taken apart: the session owns its identity and configuration.
    let LinkSetup { identity, session: session_config, events, tracing, remote, mut until_hello, hello_timeout, generation: _ } = setup;
    let device_id = publisher.device_id().clone();
    let mut socket = Socket::new(io);
    let mut session = open_session(identity, session_config, remote, &mut publisher, &events);
    // Boxed: 8 bytes in the future for a deadline that matters only until the hello (32 inline).
    let mut hello_deadline = hello_timeout.map(|d| Box::new((tokio::time::Instant::now() + d, d)));
    async move {
        let emit = |event: LinkEvent| {
            crate::metrics::device_event(event.name());
            let _ = events.send(std::sync::Arc::new(DeviceEvent { device_id: device_id.clone(), event }));
        };
        let mut waiting = Waiting::new();
        let mut malformed = MalformedLog::new(&device_id);
        // The device did not read (`stalled`), or broke a rule: say so at warning level.
        let (mut stalled, mut refused) = (false, false);
        // What the device's close frame said, to be echoed (RFC 6455 §5.5.1), or the hub's own
        // code when it closes the link (1001 at shutdown).
        let mut close_code: Option<u16> = None;
        let mut timer = Timer::default();
        let reason = loop {
            session.trace = tracing.enabled();
            let deadline = session.next_deadline().map(tokio::time::Instant::from_std);
            // Freed at the hello: it was needed only until then.
            if session.info().hello.is_some() {
                hello_deadline = None;
            }
            let awaiting_hello = hello_deadline.as_deref();
            // One timer for every deadline: which one came is sorted out when it fires.
            let stall = socket.out.stall_deadline();
            timer.set([deadline, stall, publisher.refresh_at(), awaiting_hello.map(|&(at, _)| at)].into_iter().flatten().min());
            let outputs = tokio::select! {
                io = std::future::poll_fn(|cx| socket.poll_io(cx)) => match io {
                    Io::Read(messages, end) => {
                        let mut outputs = Vec::new();
                        let (mut closed, mut unanswered) = (None, None);
                        for message in messages {
                            match message {
                                Incoming::Text(text) => {
                                    // Whether to trace is read when a frame is handled, not when the
                                    // loop last woke: a watcher that just subscribed sees the very
                                    // next frame.
                                    session.trace = tracing.enabled();
                                    outputs.extend(session.on_text(&text, Instant::now()));
                                }
                                Incoming::Binary(len) => session.on_binary(len),
                                Incoming::Data(bytes) => session.on_binary(bytes.len()),
                                Incoming::Ping(payload) => {
                                    if let Err(why) = socket.out.push(ws_frame::pong(&payload)) {
                                        unanswered = Some(why);
                                    }
                                }
                                Incoming::Pong => {}
                                Incoming::Close(code) => closed = Some(code),
                            }
                        }
                        if let Some(why) = unanswered {
                            stalled = true;
                            break why;
                        }
                        // A close frame ends the reading, whatever came after it.
                        if let Some(code) = closed {
                            close_code = code;
                        }
                        let end = closed.map(|_| "closed by the device".to_string()).or(end);
                        match end {
                            // What came before the end is still carried out (replies to callers).
                            Some(why) => {
                                let _ = carry_out(outputs, &mut socket.out, &mut waiting, &mut malformed, &emit);
                                break why;
                            }
                            None => outputs,
                        }
                    }
                    Io::WriteFailed(why) => {
                        stalled = true;
                        break why;
                    }
                },
                cmd = commands.recv() => match command(cmd, &mut session, &mut waiting, &tracing) {
                    Ok(outputs) => outputs,
                    Err((why, code)) => {
                        close_code = code;
                        break why;
                    }
                },
                () = timer.fired() => {
                    let now = tokio::time::Instant::now();
                    if let Some(&(at, waited)) = awaiting_hello
                        && at <= now
                    {
                        refused = true;
                        break format!("no hello within {} ms", waited.as_millis());
                    }
                    // The queue may have moved since its deadline was read.
                    if socket.out.stall_deadline().is_some_and(|d| d <= now) {
                        stalled = true;
                        break socket.out.stall_reason();
                    }
                    // Otherwise the session's deadline, or the counters' refresh (published below).
                    if deadline.is_some_and(|d| d <= now) { session.on_tick(Instant::now()) } else { Vec::new() }
                }
            };
            after_step(&mut publisher, &session, &mut until_hello);
            if let Err(why) = carry_out(outputs, &mut socket.out, &mut waiting, &mut malformed, &emit) {
                stalled = true;
                break why;
            }
        };
        end_session(&mut publisher, until_hello, &mut session, &mut waiting);
        // One budget of lines per disconnect (a device reconnecting in a loop is summed up).
        let log = crate::metrics::log_limit::allow(crate::metrics::log_limit::Kind::Disconnect, &device_id);
        if log && (stalled || refused) {
            warn!(device = %device_id, %reason, "disconnecting a device");
        }
        // Boxed: the goodbye runs once, and inline it would enlarge the future for the whole link.
        Box::pin(socket.finish(stalled, close_code)).await;
        if log {
            info!(device = %device_id, %reason, "device disconnected");
        }
        emit(LinkEvent::Link(Lifecycle::Disconnected { reason }));
    }
}

/// Starts a WebSocket device's session: its address noted, its description published, and the
/// `connected` event sent.
pub(super) fn open_session(identity: crate::wire::identity::Identity, config: crate::session::SessionConfig, remote: Option<String>, publisher: &mut InfoPublisher, events: &super::handle::EventSender) -> Session {
    let client_id = identity.client_id.clone();
    let mut session = Session::new(identity, "websocket", config, Instant::now());
    session.set_address(remote.clone());
    publisher.update(session.shared_info(), Instant::now());
    let connected = Lifecycle::Connected { transport: "websocket", client_id: client_id.map(Into::into), remote: remote.map(Into::into) };
    let _ = events.send(std::sync::Arc::new(DeviceEvent { device_id: publisher.device_id().clone(), event: LinkEvent::Link(connected) }));
    session
}

/// A command from the device's handles: the session's outputs, or why the link ends (and the
/// close code to end it with).
pub(super) fn command(cmd: Option<Box<Command>>, session: &mut Session, waiting: &mut Waiting, tracing: &super::handle::Tracing) -> Result<Vec<Output>, (String, Option<u16>)> {
    match cmd.map(|c| *c) {
        Some(Command::Request(request)) => {
            let Request { ticket, method, params, timeout, reply } = request;
            waiting.insert(ticket, reply);
            session.trace = tracing.enabled();
            Ok(session.request(ticket, &method, params, timeout, Instant::now()))
        }
        Some(Command::Cancel(ticket)) => {
            waiting.remove(&ticket);
            Ok(session.cancel(ticket, Instant::now()))
        }
        Some(Command::Close(why)) => Err((why.says().to_string(), why.close_code())),
        None => Err((super::handle::HANDLES_DROPPED.to_string(), None)),
    }
}

/// After each step, before its outputs are carried out: the description published (a caller
/// that gets its answer sees the description that came with it), and the pre-hello permit let go
/// at the hello.
pub(super) fn after_step(publisher: &mut InfoPublisher, session: &Session, until_hello: &mut Option<Box<dyn super::handle::UntilHello>>) {
    publisher.update(session.shared_info(), Instant::now());
    if until_hello.is_some() && session.info().hello.is_some() {
        until_hello.take().inspect(|held| held.hello());
    }
}

/// The link ended: the device is gone for its handles, and every caller ends.
pub(super) fn end_session(publisher: &mut InfoPublisher, until_hello: Option<Box<dyn super::handle::UntilHello>>, session: &mut Session, waiting: &mut Waiting) {
    publisher.gone();
    drop(until_hello);
    end_callers(session.on_disconnect(), waiting);
}

/// Carries out a session step's outputs; an `Err` says why the device must be disconnected.
pub(super) fn carry_out(outputs: Vec<Output>, out: &mut Outbox, waiting: &mut Waiting, malformed: &mut MalformedLog<'_>, emit: &impl Fn(LinkEvent)) -> Result<(), String> {
    for o in outputs {
        if let Some(text) = deliver(o, waiting, malformed, emit) {
            out.push(ws_frame::text(&text))?;
        }
    }
    Ok(())
}

/// A link's one timer, kept for the link's life and moved only when its deadline changes: a
/// timer made anew at every step of the loop (each frame, each request) is registered and
/// removed in the runtime's timer wheel each time, under its lock, twice per `tools/call`.
#[derive(Default)]
pub(crate) struct Timer {
    sleep: Option<std::pin::Pin<Box<tokio::time::Sleep>>>,
    armed: Option<tokio::time::Instant>,
}

impl Timer {
    /// The next deadline (none: never fires).
    pub(crate) fn set(&mut self, deadline: Option<tokio::time::Instant>) {
        if deadline == self.armed {
            return;
        }
        self.armed = deadline;
        if let Some(at) = deadline {
            match &mut self.sleep {
                Some(sleep) => sleep.as_mut().reset(at),
                None => self.sleep = Some(Box::pin(tokio::time::sleep_until(at))),
            }
        }
    }

    /// Completes when the deadline set last passes (at once if it has).
    pub(crate) async fn fired(&mut self) {
        match (&mut self.sleep, self.armed) {
            (Some(sleep), Some(_)) => sleep.as_mut().await,
            _ => std::future::pending().await,
        }
    }
}

pub(crate) async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The size of what `f` returns, without calling it.
    fn size_of_output<A, B, C, D, R>(_: fn(A, B, C, D) -> R) -> usize {
        std::mem::size_of::<R>()
    }

    /// An idle device's link task is this future inside a tokio task cell, a multiple of 128
    /// bytes with its header, trailer and the end's closure. Measured (debug, heaptrack): 1,232
    /// and 1,176 bytes took a cell of 1,408; 1,080 takes 1,280 (issue 46.3). The bound keeps it
    /// near that, over the hub's own socket type.
    #[test]
    fn a_device_link_task_stays_in_its_cell() {
        let size = size_of_output(run::<crate::links::upgrade::DeviceSocket>);
        eprintln!("the link task's future: {size} bytes");
        assert!(size <= 1104, "the link task's future grew to {size} bytes");
    }
}
