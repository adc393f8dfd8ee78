//! A cloneable handle to one connected device's link task.
//!
//! Nothing a caller does through a handle waits on the device: the link publishes the device's
//! description whenever it changes ([`DeviceHandle::snapshot`] reads it without asking the task),
//! requests are queued with a deadline, and the link task never blocks on a device's socket.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::sync::oneshot;

use super::mailbox;
pub use super::event::{DeviceEvent, Lifecycle, LinkEvent};

use crate::session::{CallError, DeviceInfo, Event, Phase, SessionConfig};
use crate::wire::identity::Identity;
use crate::wire::jsonrpc::RawResult;

/// What a handle asks of its link. Commands travel boxed ([`Commands`]): a tokio channel
/// allocates its slots in blocks of 32 up front, for every device, so a slot's size is paid 32
/// times per device (3.5 KB with requests inline, 256 B with a pointer per slot).
pub(crate) enum Command {
    Request(Request),
    Cancel(u64),
    Close(CloseReason),
}

/// Why the hub closes a device's link: said in the log and the `disconnected` event, and (over
/// WebSocket) in the close frame's code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseReason {
    /// A newer connection with the same Device-Id took its place.
    Replaced,
    /// `mcpdev devices revoke` withdrew its approval.
    Revoked,
    /// The hub is shutting down (SIGINT or SIGTERM).
    Shutdown,
}

impl CloseReason {
    /// The reason, as the log and the `disconnected` event say it.
    pub fn says(self) -> &'static str {
        match self {
            CloseReason::Replaced => "replaced by a newer connection of the same device",
            CloseReason::Revoked => "its approval was revoked (mcpdev devices revoke)",
            CloseReason::Shutdown => "the hub is shutting down",
        }
    }

    /// The WebSocket close code (RFC 6455 §7.4.1): 1001 going away, 1008 policy violation.
    pub fn close_code(self) -> Option<u16> {
        match self {
            CloseReason::Replaced => None,
            CloseReason::Revoked => Some(1008),
            CloseReason::Shutdown => Some(1001),
        }
    }
}

/// Why a link ends when its handles are all gone (nobody can reach it any more).
pub(crate) const HANDLES_DROPPED: &str = "shut down by the hub";

/// A link's queue of commands, as its task reads it.
pub(crate) type Commands = mailbox::Receiver<Box<Command>>;

/// A request for the device, as a link task takes it.
pub(crate) struct Request {
    pub ticket: u64,
    pub method: String,
    pub params: Option<Value>,
    pub timeout: Duration,
    pub reply: oneshot::Sender<Result<RawResult, CallError>>,
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

pub use super::changes::epoch as tools_epoch;
use super::changes;

/// Longest a caller waits for room in a link's command queue beyond its own timeout (a link
/// task drains its queue without waiting on the device, so this is a backstop).
const QUEUE_GRACE: Duration = Duration::from_secs(1);

/// A handle to one device. Dropping it does not disconnect the device.
#[derive(Clone)]
pub struct DeviceHandle {
    pub device_id: String,
    /// Distinguishes a device's successive connections.
    pub generation: u64,
    pub(crate) commands: mailbox::Sender<Box<Command>>,
    info: Arc<Published>,
    /// This connection's calls, for the dashboard (counted in [`Self::request`]).
    pub calls: Arc<crate::metrics::DeviceCalls>,
}

impl DeviceHandle {
    /// Sends a JSON-RPC request to the device and waits for its end: a result, the device's
    /// error, a timeout, or the device going away. It always ends within `timeout` (plus a
    /// second at most), whatever the device does. Dropping the future cancels the wait (a late
    /// reply is then dropped by the session).
    pub async fn request(&self, method: &str, params: Option<Value>, timeout: Duration) -> Result<RawResult, CallError> {
        let started = std::time::Instant::now();
        let outcome = self.request_uncounted(method, params, timeout).await;
        let counted = match &outcome {
            Ok(result) if method == "tools/call" && result.is_tool_error() => crate::metrics::Outcome::ToolError,
            Ok(_) => crate::metrics::Outcome::Ok,
            Err(CallError::Device(_)) => crate::metrics::Outcome::DeviceError,
            Err(CallError::Timeout(_)) => crate::metrics::Outcome::Timeout,
            Err(CallError::Disconnected) => crate::metrics::Outcome::Disconnected,
            Err(CallError::Link(_)) => crate::metrics::Outcome::LinkDown,
        };
        crate::metrics::call_done(counted, started.elapsed());
        self.calls.record(counted == crate::metrics::Outcome::Ok, started.elapsed());
        outcome
    }

    async fn request_uncounted(&self, method: &str, params: Option<Value>, timeout: Duration) -> Result<RawResult, CallError> {
        let deadline = tokio::time::Instant::now() + timeout;
        let ticket = NEXT_TICKET.fetch_add(1, Ordering::Relaxed);
        let (reply, rx) = oneshot::channel();
        let cmd = Box::new(Command::Request(Request { ticket, method: method.to_string(), params, timeout, reply }));
        // The queue has room nearly always: a timer only when it has none.
        match self.commands.try_send(cmd) {
            Ok(()) => {}
            Err(mailbox::TrySendError::Closed(_)) => return Err(CallError::Disconnected),
            Err(mailbox::TrySendError::Full(cmd)) => match tokio::time::timeout_at(deadline, self.commands.send(cmd)).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => return Err(CallError::Disconnected),
                Err(_) => return Err(CallError::Timeout(timeout)),
            },
        }
        let guard = CancelOnDrop { commands: &self.commands, ticket: Some(ticket) };
        // The session times the request out itself; this is the backstop should it not.
        let outcome = match tokio::time::timeout_at(deadline + QUEUE_GRACE, rx).await {
            Ok(reply) => reply.unwrap_or(Err(CallError::Disconnected)),
            Err(_) => return Err(CallError::Timeout(timeout)),
        };
        guard.disarm();
        outcome
    }

    /// The device's current description, or `None` if it is gone. Reads what the link last
    /// published: it never waits on the device's task.
    pub fn snapshot(&self) -> Option<Arc<DeviceInfo>> {
        if self.commands.is_closed() {
            return None;
        }
        self.info.get()
    }

    /// How many tools the device listed the last time its list was complete (onboarding did not
    /// fail, the list was not empty); 0 if never. Kept after the device is gone.
    pub fn complete_tools(&self) -> usize {
        self.info.1.load(Ordering::Relaxed) as usize
    }

    /// Whether the device finished onboarding (a cheap read, as [`Self::snapshot`]).
    pub fn phase(&self) -> Option<Phase> {
        if self.commands.is_closed() {
            return None;
        }
        self.info.get().map(|i| i.phase)
    }

    /// Closes the device's connection, saying `why` (a newer one with the same Device-Id, a
    /// revocation, the hub's shutdown).
    pub async fn close(&self, why: CloseReason) {
        let _ = tokio::time::timeout(QUEUE_GRACE, self.commands.send(Box::new(Command::Close(why)))).await;
    }

    pub fn is_connected(&self) -> bool {
        !self.commands.is_closed()
    }
}

/// A handle with no link task behind it, for tests of what reads handles (the bridge's
/// catalogue): the description it shows is set by hand, and dropping the [`TestLink`] is the
/// device going away.
#[cfg(test)]
pub(crate) fn test_handle(device_id: &str, generation: u64) -> (DeviceHandle, TestLink) {
    let (commands, rx) = mailbox::channel(1);
    let info = Arc::new(Published::default());
    let handle = DeviceHandle { device_id: device_id.to_string(), generation, commands, info: info.clone(), calls: Arc::default() };
    (handle, TestLink { _commands: rx, info })
}

/// The link side of a [`test_handle`].
#[cfg(test)]
pub(crate) struct TestLink {
    _commands: Commands,
    info: Arc<Published>,
}

#[cfg(test)]
impl TestLink {
    /// Publishes `info` as the device's description (without logging a change).
    pub(crate) fn publish(&self, info: DeviceInfo) {
        self.info.set(Some(Arc::new(info)));
    }
}

struct CancelOnDrop<'a> {
    commands: &'a mailbox::Sender<Box<Command>>,
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
            let _ = self.commands.try_send(Box::new(Command::Cancel(t)));
        }
    }
}

/// Events are shared, not copied: each slot of the hub's ring holds a pointer, so the ring can be
/// long enough for a fleet's onboarding burst without holding a copy of every event per slot; it
/// is bounded in bytes too ([`super::ring`]).
pub type EventSender = super::ring::Sender;

/// Starts a link task: `body` serves the device, reading the handle's commands and publishing
/// the device's description. `on_end` runs in the task once it has ended, normally or not (a
/// panicking link is caught and logged, and the device is gone either way); by then the handle
/// says it is not connected.
pub(crate) fn spawn_link<F, Fut>(device_id: String, generation: u64, body: F, on_end: impl FnOnce() + Send + 'static) -> DeviceHandle
where
    F: FnOnce(Commands, InfoPublisher) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (commands, rx) = mailbox::channel(64);
    let info = Arc::new(Published::default());
    // One copy of the id for the task's whole life: its publisher, its events and its end.
    let id: Arc<str> = device_id.as_str().into();
    // One task per device: its end, a panic included, is seen by the task itself. A combinator,
    // not an `async` block: a block would hold the link's future twice (as what it captured and
    // as what it awaits), for as long as the device is connected.
    let body = futures_util::FutureExt::catch_unwind(std::panic::AssertUnwindSafe(body(rx, InfoPublisher::new(info.clone(), id.clone()))));
    tokio::spawn(futures_util::FutureExt::map(body, move |ended| {
        if let Err(panic) = ended {
            let what = panic.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| panic.downcast_ref::<String>().cloned()).unwrap_or_default();
            tracing::error!(device = %id, "the device's link task panicked: {what}");
        }
        changes::changed(&id);
        on_end();
    }));
    DeviceHandle { device_id, generation, commands, info, calls: Arc::default() }
}

/// Longest a description's counters may lag behind the device (tools and phase never lag).
const COUNTERS_REFRESH: Duration = Duration::from_secs(1);

/// The description a link last published, as its handles read it: a plain lock around a pointer,
/// held only to copy or swap the pointer (a watch channel costs 344 bytes per device, for
/// wake-ups nobody waits on).
#[derive(Default)]
/// The description (none once the device is gone), and how many tools the device listed the last
/// time its list was complete (kept after it is gone: what the registry remembers of it).
pub(crate) struct Published(std::sync::Mutex<Option<Arc<DeviceInfo>>>, std::sync::atomic::AtomicU32);

impl Published {
    fn get(&self) -> Option<Arc<DeviceInfo>> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    fn set(&self, info: Option<Arc<DeviceInfo>>) {
        if let Some(i) = info.as_ref().filter(|i| !i.onboarding.failed && !i.tools.is_empty()) {
            self.1.store(u32::try_from(i.tools.len()).unwrap_or(u32::MAX), Ordering::Relaxed);
        }
        let old = std::mem::replace(&mut *self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner), info);
        // The old description is freed after the lock is let go.
        drop(old);
    }
}

/// The link's side of [`DeviceHandle::snapshot`]: publishes the session's description at once
/// when what a client can see changed ([`DeviceInfo::version`]: hello, phase, tools…), and its
/// counters at most once per [`COUNTERS_REFRESH`], so a busy device does not copy its description
/// per frame.
pub(crate) struct InfoPublisher {
    published: Arc<Published>,
    /// Whose changes it logs ([`changes::changed`]); its link's events share it.
    device_id: Arc<str>,
    version: Option<u64>,
    published_at: Instant,
    /// Counters changed since the last publication.
    stale: bool,
    /// The sum of the counters it watches, as last seen: they only grow, so any change moves it.
    seen: u64,
}

impl InfoPublisher {
    pub(crate) fn new(published: Arc<Published>, device_id: Arc<str>) -> Self {
        Self { published, device_id, version: None, published_at: Instant::now(), stale: false, seen: 0 }
    }

    /// The device's id, shared (for its link's events).
    pub(crate) fn device_id(&self) -> &Arc<str> {
        &self.device_id
    }

    /// Call after each step of the session, before carrying out its outputs (so whoever hears
    /// an event reads a description at least as new). Returns whether it published.
    pub(crate) fn update(&mut self, info: &Arc<DeviceInfo>, now: Instant) -> bool {
        let c = &info.counters;
        let seen = c.frames_in.wrapping_add(c.frames_out).wrapping_add(c.binary_frames).wrapping_add(c.timeouts);
        let reshaped = self.version != Some(info.version());
        if reshaped {
            self.version = Some(info.version());
        } else if seen != self.seen || self.stale {
            self.stale = true;
            self.seen = seen;
            if now < self.published_at + COUNTERS_REFRESH {
                return false;
            }
        } else {
            return false;
        }
        self.seen = seen;
        self.stale = false;
        self.published_at = now;
        // The session's own description (it copies it before its next change): an idle device's
        // description is one allocation.
        self.published.set(Some(info.clone()));
        // After publishing: whoever sees the new epoch reads the new description.
        if reshaped {
            changes::changed(&self.device_id);
        }
        true
    }

    /// The device is gone: snapshots say `None` from now on. Call before announcing the
    /// disconnect, so whoever hears it no longer sees the device.
    pub(crate) fn gone(&mut self) {
        self.published.set(None);
        changes::changed(&self.device_id);
    }

    /// When stale counters are due to be published (a link calls [`Self::update`] then).
    pub(crate) fn refresh_at(&self) -> Option<tokio::time::Instant> {
        self.stale.then(|| tokio::time::Instant::from_std(self.published_at + COUNTERS_REFRESH))
    }
}

/// Callers waiting for a reply, by ticket. A B-tree, not a hash map: an empty one is 24 bytes
/// with nothing allocated (a hash map is 48, inline in every link task), and it is dropped once
/// emptied ([`deliver`]), so an idle device holds no table however many calls it answered.
pub(crate) type Waiting = std::collections::BTreeMap<u64, oneshot::Sender<Result<RawResult, CallError>>>;

/// The link is down: each caller gets what the session's disconnect produced for it, and anyone
/// still waiting (a request whose reply was never produced) learns the device is gone.
pub(crate) fn end_callers(on_disconnect: Vec<crate::session::Output>, waiting: &mut Waiting) {
    for o in on_disconnect {
        if let crate::session::Output::Reply { ticket, outcome } = o
            && let Some(tx) = waiting.remove(&ticket)
        {
            let _ = tx.send(outcome);
        }
    }
    for (_, tx) in std::mem::take(waiting) {
        let _ = tx.send(Err(CallError::Disconnected));
    }
}

/// Logs a device's malformed messages through the hub's one limiter of lines a peer can trigger
/// ([`crate::metrics::log_limit`], per Device-Id: a few lines, then a count summed up).
#[derive(Debug)]
pub(crate) struct MalformedLog<'a> {
    device_id: &'a str,
}

impl<'a> MalformedLog<'a> {
    pub(crate) fn new(device_id: &'a str) -> Self {
        Self { device_id }
    }

    fn record(&mut self, reason: &str) {
        if crate::metrics::log_limit::allow(crate::metrics::log_limit::Kind::Device, self.device_id) {
            tracing::warn!(device = %self.device_id, %reason, "malformed message from a device");
        }
    }
}

/// Carries out the session outputs every link handles the same way — a caller's reply, an
/// event — and returns the text of an `Output::Send` for the link to put on its wire.
pub(crate) fn deliver(output: crate::session::Output, waiting: &mut Waiting, malformed: &mut MalformedLog<'_>, emit: &impl Fn(LinkEvent)) -> Option<String> {
    match output {
        crate::session::Output::Send(text) => Some(text),
        crate::session::Output::Reply { ticket, outcome } => {
            if let Some(tx) = waiting.remove(&ticket) {
                let _ = tx.send(outcome);
            }
            if waiting.is_empty() {
                // An emptied B-tree keeps its root node: given back.
                *waiting = Waiting::new();
            }
            None
        }
        crate::session::Output::Event(e) => {
            if let Event::Malformed { reason, .. } = &e {
                malformed.record(reason);
            }
            tracing::debug!(?e, "device event");
            emit(LinkEvent::Session(e));
            None
        }
    }
}

/// What a WebSocket link holds until its device says hello (see [`LinkSetup::until_hello`]).
pub trait UntilHello: Send + Sync {
    /// The device said hello; the link drops this right after. Not called when the connection
    /// ends before a hello.
    fn hello(&self) {}
}

/// What every link task needs, whatever carries the device (a socket, a broker).
pub struct LinkSetup {
    pub identity: Identity,
    pub session: SessionConfig,
    pub events: EventSender,
    pub tracing: Arc<Tracing>,
    pub generation: u64,
    pub remote: Option<String>,
    /// Held by a WebSocket link until the device's first hello (told with
    /// [`UntilHello::hello`]) or its disconnect, then dropped: e.g. a permit of a listener's cap
    /// on connections that have not said hello.
    pub until_hello: Option<Box<dyn UntilHello>>,
    /// A WebSocket device that has not said hello within this is disconnected ("no hello
    /// within …"). `None`: no limit.
    pub hello_timeout: Option<Duration>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_events_name_is_the_one_it_is_serialized_with() {
        let events = [
            LinkEvent::Link(Lifecycle::Connected { transport: "websocket", client_id: None, remote: None }),
            LinkEvent::Link(Lifecycle::Disconnected { reason: String::new() }),
            LinkEvent::Session(Event::Ready { tools: 3 }),
        ];
        for event in events {
            let name = event.name();
            assert_eq!(serde_json::to_value(DeviceEvent { device_id: "d".into(), event }).unwrap()["event"], name);
        }
    }

    /// A link that panics is not a silent death: its end is signalled, so the hub forgets the
    /// device, and its callers end.
    #[tokio::test]
    async fn a_panicking_link_task_still_signals_its_end_and_ends_its_callers() {
        let before = tools_epoch();
        let (done_tx, done) = oneshot::channel();
        let body = |mut commands: Commands, _publisher| async move {
            let _ = commands.recv().await;
            panic!("a bug in a link");
        };
        let handle = spawn_link("02:00:00:00:00:99".into(), 1, body, move || {
            let _ = done_tx.send(());
        });
        let call = handle.request("tools/list", None, Duration::from_secs(5));
        let outcome = tokio::time::timeout(Duration::from_secs(5), call).await.expect("the call ended");
        assert!(matches!(outcome, Err(CallError::Disconnected)), "{outcome:?}");
        tokio::time::timeout(Duration::from_secs(5), done).await.expect("the end was signalled").expect("sent, not dropped");
        assert!(tools_epoch() > before);
        assert!(!handle.is_connected());
    }
}
