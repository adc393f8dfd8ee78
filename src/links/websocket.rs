//! A device's WebSocket: one task that owns the device's session and reads the socket, and a
//! writer task that puts frames on it.
//!
//! The session's task never waits on the device: what it sends goes to a bounded queue
//! ([`OUT_QUEUE_FRAMES`], [`OUT_QUEUE_BYTES`]) that the writer drains with a deadline per write
//! ([`WRITE_DEADLINE`]). A device that does not read (its socket buffers full) is disconnected
//! with the reason "the device stopped reading: …", and its callers end at once.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures_util::{Sink, SinkExt, Stream, StreamExt};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::{self, Message};
use tracing::{info, warn};

use super::handle::{Command, DeviceEvent, DeviceHandle, InfoPublisher, Lifecycle, LinkEvent, LinkSetup, MalformedLog, Request, Waiting, deliver, spawn_link};
use crate::session::{CallError, Output, Session};

/// Most frames waiting to be written to one device.
pub const OUT_QUEUE_FRAMES: usize = 256;
/// Most bytes waiting to be written to one device (one larger frame passes alone).
pub const OUT_QUEUE_BYTES: usize = 4 << 20;
/// Longest one write to a device may take before the device counts as not reading.
pub const WRITE_DEADLINE: Duration = Duration::from_secs(10);
/// How long a closing link lets the writer flush what is queued and say goodbye.
const CLOSE_GRACE: Duration = Duration::from_secs(2);

/// The server hello a WebSocket device expects (reference §1.3): `transport` must be the string
/// "websocket" (the stock firmware crashes otherwise), and xiaozhi-sdk needs `session_id` and
/// `audio_params`.
pub fn server_hello(session_id: &str) -> String {
    serde_json::json!({
        "type": "hello",
        "transport": "websocket",
        "session_id": session_id,
        "audio_params": {"format": "opus", "sample_rate": 24000, "channels": 1, "frame_duration": 60},
    })
    .to_string()
}

/// Starts the task serving one device socket; returns its handle and a receiver that fires when
/// the link has ended.
pub fn spawn<S>(ws: S, setup: LinkSetup) -> (DeviceHandle, oneshot::Receiver<()>)
where
    S: Stream<Item = Result<Message, tungstenite::Error>> + Sink<Message, Error = tungstenite::Error> + Unpin + Send + 'static,
{
    let (device_id, generation) = (setup.identity.device_id.clone(), setup.generation);
    spawn_link(device_id, generation, move |commands, publisher| run(ws, commands, publisher, setup))
}

/// The sending half: a bounded queue to a task that owns the socket's sink.
struct Writer {
    queue: mpsc::Sender<String>,
    queued_bytes: Arc<AtomicUsize>,
    failed: oneshot::Receiver<String>,
    task: JoinHandle<()>,
}

impl Writer {
    fn start<K>(sink: K) -> Self
    where
        K: Sink<Message, Error = tungstenite::Error> + Unpin + Send + 'static,
    {
        let (queue, rx) = mpsc::channel(OUT_QUEUE_FRAMES);
        let queued_bytes = Arc::new(AtomicUsize::new(0));
        let (failed_tx, failed) = oneshot::channel();
        let task = tokio::spawn(write_all(sink, rx, queued_bytes.clone(), failed_tx));
        Self { queue, queued_bytes, failed, task }
    }

    /// Queues a frame, or says why the device cannot take it.
    fn enqueue(&self, text: String) -> Result<(), String> {
        let len = text.len();
        let before = self.queued_bytes.fetch_add(len, Ordering::AcqRel);
        let refuse = |why: String| {
            self.queued_bytes.fetch_sub(len, Ordering::AcqRel);
            Err(why)
        };
        if before > 0 && before + len > OUT_QUEUE_BYTES {
            return refuse(format!("the device stopped reading: {before} bytes wait to be sent and {len} more do not fit under the {OUT_QUEUE_BYTES}-byte limit"));
        }
        match self.queue.try_send(text) {
            Ok(()) => Ok(()),
            Err(mpsc::error::TrySendError::Full(_)) => refuse(format!("the device stopped reading: {OUT_QUEUE_FRAMES} frames wait to be sent")),
            Err(mpsc::error::TrySendError::Closed(_)) => refuse("the socket writer ended".to_string()),
        }
    }

    /// Lets the writer flush and close the socket for a moment, then stops it (at once when
    /// the device is not reading: nothing would get through).
    async fn finish(self, stalled: bool) {
        let Self { queue, mut task, .. } = self;
        drop(queue);
        if stalled || tokio::time::timeout(CLOSE_GRACE, &mut task).await.is_err() {
            task.abort();
        }
    }
}

async fn write_all<K>(mut sink: K, mut queue: mpsc::Receiver<String>, queued_bytes: Arc<AtomicUsize>, failed: oneshot::Sender<String>)
where
    K: Sink<Message, Error = tungstenite::Error> + Unpin,
{
    while let Some(text) = queue.recv().await {
        let len = text.len();
        let why = match tokio::time::timeout(WRITE_DEADLINE, sink.send(Message::text(text))).await {
            Ok(Ok(())) => {
                queued_bytes.fetch_sub(len, Ordering::AcqRel);
                continue;
            }
            Ok(Err(e)) => format!("websocket error: {e}"),
            Err(_) => format!("the device stopped reading: a write of {len} bytes did not finish within {} s", WRITE_DEADLINE.as_secs()),
        };
        let _ = failed.send(why);
        return;
    }
    let _ = sink.close().await;
}

async fn run<S>(ws: S, mut commands: mpsc::Receiver<Command>, mut publisher: InfoPublisher, setup: LinkSetup)
where
    S: Stream<Item = Result<Message, tungstenite::Error>> + Sink<Message, Error = tungstenite::Error> + Unpin + Send + 'static,
{
    // The setup is taken apart: the session owns its identity and configuration (the link task
    // lives as long as the device, and a second copy of each would too).
    let LinkSetup { identity, session: session_config, events, tracing, remote, mut until_hello, hello_timeout, generation: _ } = setup;
    let device_id = identity.device_id.clone();
    let emit = |event: LinkEvent| {
        let _ = events.send(std::sync::Arc::new(DeviceEvent { device_id: device_id.clone(), event }));
    };
    let (sink, mut stream) = ws.split();
    let mut writer = Writer::start(sink);
    let client_id = identity.client_id.clone();
    let mut session = Session::new(identity, "websocket", session_config, Instant::now());
    publisher.update(session.info(), Instant::now());
    emit(LinkEvent::Link(Lifecycle::Connected {
        transport: "websocket".into(),
        client_id,
        remote,
    }));
    let hello_deadline = hello_timeout.map(|d| (tokio::time::Instant::now() + d, d));
    let mut waiting: Waiting = HashMap::new();
    let mut malformed = MalformedLog::new(&device_id);
    // The device did not read (`stalled`), or broke a rule: say so at warning level.
    let (mut stalled, mut refused) = (false, false);
    let reason = loop {
        session.trace = tracing.enabled();
        let deadline = session.next_deadline().map(tokio::time::Instant::from_std);
        let awaiting_hello = hello_deadline.filter(|_| session.info().hello.is_none());
        let outputs = tokio::select! {
            frame = stream.next() => match frame {
                Some(Ok(Message::Text(text))) => {
                    // Whether to trace is read when a frame is handled, not when the loop last
                    // woke: a watcher that just subscribed sees the very next frame.
                    session.trace = tracing.enabled();
                    session.on_text(&text, Instant::now())
                }
                Some(Ok(Message::Binary(b))) => { session.on_binary(b.len()); Vec::new() }
                Some(Ok(Message::Close(_))) | None => break "closed by the device".to_string(),
                Some(Ok(_)) => continue,
                Some(Err(e)) => break format!("websocket error: {e}"),
            },
            cmd = commands.recv() => match cmd {
                Some(Command::Request(request)) => {
                    let Request { ticket, method, params, timeout, reply } = *request;
                    waiting.insert(ticket, reply);
                    session.trace = tracing.enabled();
                    session.request(ticket, &method, params, timeout, Instant::now())
                }
                Some(Command::Cancel(ticket)) => { waiting.remove(&ticket); session.cancel(ticket); continue; }
                Some(Command::Close) | None => break "replaced or shut down by the hub".to_string(),
            },
            why = &mut writer.failed => {
                stalled = true;
                break why.unwrap_or_else(|_| "the socket writer ended".to_string());
            }
            _ = sleep_until(deadline) => session.on_tick(Instant::now()),
            _ = sleep_until(publisher.refresh_at()) => Vec::new(),
            _ = sleep_until(awaiting_hello.map(|(at, _)| at)) => {
                let waited = awaiting_hello.map_or(Duration::ZERO, |(_, d)| d);
                refused = true;
                break format!("no hello within {} ms", waited.as_millis());
            }
        };
        publisher.update(session.info(), Instant::now());
        if until_hello.is_some() && session.info().hello.is_some() {
            until_hello = None;
        }
        if let Err(why) = carry_out(outputs, &writer, &mut waiting, &mut malformed, &emit) {
            stalled = true;
            break why;
        }
    };
    publisher.gone();
    drop(until_hello);
    for o in session.on_disconnect() {
        if let Output::Reply { ticket, outcome } = o
            && let Some(tx) = waiting.remove(&ticket)
        {
            let _ = tx.send(outcome);
        }
    }
    // Anyone still waiting (a request whose reply was never produced) learns it now.
    for (_, tx) in waiting.drain() {
        let _ = tx.send(Err(CallError::Disconnected));
    }
    malformed.summarise();
    if stalled || refused {
        warn!(device = %device_id, %reason, "disconnecting a device");
    }
    drop(stream);
    writer.finish(stalled).await;
    info!(device = %device_id, %reason, "device disconnected");
    emit(LinkEvent::Link(Lifecycle::Disconnected { reason }));
}

/// Carries out a session step's outputs; an `Err` says why the device must be disconnected.
fn carry_out(outputs: Vec<Output>, writer: &Writer, waiting: &mut Waiting, malformed: &mut MalformedLog, emit: &impl Fn(LinkEvent)) -> Result<(), String> {
    for o in outputs {
        if let Some(text) = deliver(o, waiting, malformed, emit) {
            writer.enqueue(text)?;
        }
    }
    Ok(())
}

pub(crate) async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}
