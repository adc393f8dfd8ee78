//! A cloneable handle to one connected device's link task.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::{broadcast, mpsc, oneshot};

use crate::session::{CallError, DeviceInfo, Event, SessionConfig};
use crate::wire::identity::Identity;

/// An event of one device, as the hub broadcasts it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct DeviceEvent {
    pub device_id: String,
    #[serde(flatten)]
    pub event: LinkEvent,
}

/// Session events plus the link's own: connected and disconnected.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(untagged)]
pub enum LinkEvent {
    Session(Event),
    Link(Lifecycle),
}

#[derive(Debug, Clone, serde::Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Lifecycle {
    Connected { transport: String, client_id: Option<String>, remote: Option<String> },
    Disconnected { reason: String },
}

pub(crate) enum Command {
    Request { ticket: u64, method: String, params: Option<Value>, timeout: Duration, reply: oneshot::Sender<Result<Value, CallError>> },
    Cancel(u64),
    Snapshot(oneshot::Sender<DeviceInfo>),
    Close,
}

/// Shared by every link of a process: how many watchers want traffic events.
#[derive(Debug, Default)]
pub struct Tracing {
    watchers: AtomicUsize,
}

impl Tracing {
    pub fn enabled(&self) -> bool {
        self.watchers.load(Ordering::Relaxed) > 0
    }

    /// Traffic is traced while the returned guard lives.
    pub fn watch(self: &Arc<Self>) -> TraceGuard {
        self.watchers.fetch_add(1, Ordering::Relaxed);
        TraceGuard(self.clone())
    }
}

pub struct TraceGuard(Arc<Tracing>);

impl Drop for TraceGuard {
    fn drop(&mut self) {
        self.0.watchers.fetch_sub(1, Ordering::Relaxed);
    }
}

static NEXT_TICKET: AtomicU64 = AtomicU64::new(1);

/// A handle to one device. Dropping it does not disconnect the device.
#[derive(Clone)]
pub struct DeviceHandle {
    pub device_id: String,
    /// Distinguishes a device's successive connections.
    pub generation: u64,
    pub(crate) commands: mpsc::Sender<Command>,
}

impl DeviceHandle {
    /// Sends a JSON-RPC request to the device and waits for its end: a result, the device's
    /// error, a timeout, or the device going away. Dropping the future cancels the wait (a late
    /// reply is then dropped by the session).
    pub async fn request(&self, method: &str, params: Option<Value>, timeout: Duration) -> Result<Value, CallError> {
        let ticket = NEXT_TICKET.fetch_add(1, Ordering::Relaxed);
        let (reply, rx) = oneshot::channel();
        let cmd = Command::Request { ticket, method: method.to_string(), params, timeout, reply };
        self.commands.send(cmd).await.map_err(|_| CallError::Disconnected)?;
        let guard = CancelOnDrop { commands: &self.commands, ticket: Some(ticket) };
        let outcome = rx.await.unwrap_or(Err(CallError::Disconnected));
        guard.disarm();
        outcome
    }

    /// The device's current description, or `None` if it is gone.
    pub async fn snapshot(&self) -> Option<DeviceInfo> {
        let (tx, rx) = oneshot::channel();
        self.commands.send(Command::Snapshot(tx)).await.ok()?;
        rx.await.ok()
    }

    /// Closes the device's connection (e.g. replaced by a newer one with the same Device-Id).
    pub async fn close(&self) {
        let _ = self.commands.send(Command::Close).await;
    }

    pub fn is_connected(&self) -> bool {
        !self.commands.is_closed()
    }
}

struct CancelOnDrop<'a> {
    commands: &'a mpsc::Sender<Command>,
    ticket: Option<u64>,
}

impl CancelOnDrop<'_> {
    fn disarm(mut self) {
        self.ticket = None;
    }
}

impl Drop for CancelOnDrop<'_> {
    fn drop(&mut self) {
        if let Some(t) = self.ticket {
            let _ = self.commands.try_send(Command::Cancel(t));
        }
    }
}

pub type EventSender = broadcast::Sender<DeviceEvent>;

/// Starts a link task: `body` serves the device, reading the handle's commands. Returns the
/// handle and a receiver that fires when the task has ended.
pub(crate) fn spawn_link<F, Fut>(device_id: String, generation: u64, body: F) -> (DeviceHandle, oneshot::Receiver<()>)
where
    F: FnOnce(mpsc::Receiver<Command>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (commands, rx) = mpsc::channel(64);
    let (done_tx, done_rx) = oneshot::channel();
    let task = body(rx);
    tokio::spawn(async move {
        task.await;
        let _ = done_tx.send(());
    });
    (DeviceHandle { device_id, generation, commands }, done_rx)
}

/// Callers waiting for a reply, by ticket.
pub(crate) type Waiting = std::collections::HashMap<u64, oneshot::Sender<Result<Value, CallError>>>;

/// Carries out the session outputs every link handles the same way — a caller's reply, an
/// event — and returns the text of an `Output::Send` for the link to put on its wire.
pub(crate) fn deliver(output: crate::session::Output, waiting: &mut Waiting, emit: &impl Fn(LinkEvent)) -> Option<String> {
    match output {
        crate::session::Output::Send(text) => Some(text),
        crate::session::Output::Reply { ticket, outcome } => {
            if let Some(tx) = waiting.remove(&ticket) {
                let _ = tx.send(outcome);
            }
            None
        }
        crate::session::Output::Event(e) => {
            if let Event::Malformed { reason, .. } = &e {
                tracing::warn!(%reason, "malformed message from a device");
            }
            tracing::debug!(?e, "device event");
            emit(LinkEvent::Session(e));
            None
        }
    }
}

/// What every link task needs, whatever carries the device (a socket, a broker).
pub struct LinkSetup {
    pub identity: Identity,
    pub session: SessionConfig,
    pub events: EventSender,
    pub tracing: Arc<Tracing>,
    pub generation: u64,
    pub remote: Option<String>,
    /// Held until the device's first hello (or its disconnect), then dropped: the hub's
    /// pre-hello connection permit.
    pub until_hello: Option<Box<dyn std::any::Any + Send + Sync>>,
    /// A device that has not said hello this long after connecting is disconnected.
    pub hello_timeout: Option<std::time::Duration>,
}
