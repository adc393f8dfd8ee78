//! The tasks the hub holds for MCP hosts (MCP 2025-11-25, Tasks, experimental): a device tool
//! called with `params.task` runs here while the host polls, and its result is kept for the
//! task's TTL. This module is the store; [`super::task_rpc`] speaks the protocol.
//!
//! Rules:
//! - **Bound to the credential that made it, not the session.** A task belongs to its [`Owner`],
//!   the authorisation context it was created in ([`Principal`]): a person, by their remote
//!   token, from any address (two people behind one NAT, or both on loopback, never see each
//!   other's tasks); the holders of the one shared MCP token, told apart by their address; the
//!   hub's own user (control token, or a loopback hub that asks for no token), by address as
//!   well. Any session of that owner (a host that reconnected) reaches it; for anybody else a
//!   task id is answered exactly as an unknown one, and `tasks/list` shows only the owner's
//!   tasks.
//! - **It ends with its credential.** A task runs under the [`Lease`] of the credential that
//!   made it: when that is revoked, its call is cancelled and the task is forgotten at once
//!   (unknown to everyone from then on).
//! - **Ids can't be guessed, and say which hub holds them**: `<hub>/<128 random bits in hex>`,
//!   `<hub>` the hub's cluster id (`hub` outside a cluster); [`hub_of`] reads the hub back, and
//!   names none for an id of any other shape (so junk is never sent to another hub).
//! - **Caps.** At most [`Limits::per_session`] tasks held for one session (a session-less
//!   request counts as its owner's), at most [`Limits::per_owner`] for one owner (a tenth of the
//!   hub's cap, and at least two sessions' worth: one client that floods tasks from many
//!   sessions leaves room for every other), at most [`Limits::total`] on the hub, and at most
//!   [`RESULT_BYTES_MAX`] bytes of kept results: a task over a cap is refused with an error that
//!   names the cap (logged at most once per 5 s); a result over the byte budget fails its task
//!   with a message saying so, rather than being kept.
//! - **TTL.** The host's `ttl` is clamped to [`TTL_MAX`] (none given: [`TTL_DEFAULT`]); a task
//!   is forgotten (its call cancelled if it still runs) when its TTL from creation ends, by a
//!   sweep once a second and by every lookup, so a host that never fetches leaves nothing (a
//!   sweep that forgot [`TRIM_AFTER`] or more trims the heap, as ended sessions do).
//! - **Status lifecycle**: `working` then exactly one of `completed`, `failed` (the tool said
//!   `isError`, or the call ended in an error) or `cancelled`; a terminal status never changes.
//! - Nothing that can panic runs under the store's lock.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use serde_json::{Value, json};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::hub::budget::RateLimited;
use crate::hub::principal::{Lease, Principal};

/// Longest TTL a task is kept for, whatever the host asks.
pub const TTL_MAX: Duration = Duration::from_secs(3600);
/// The TTL of a task whose host gave none.
pub const TTL_DEFAULT: Duration = Duration::from_secs(300);
/// Poll interval the hub suggests.
pub const POLL_INTERVAL_MS: u64 = 500;
/// Bytes of results kept at once, in all.
pub const RESULT_BYTES_MAX: usize = 64 << 20;
/// Default cap on tasks held on the hub.
pub const DEFAULT_TOTAL: u32 = 10_000;
/// Default cap on tasks held for one session.
pub const DEFAULT_PER_SESSION: u32 = 256;
/// Tasks a `tasks/list` page holds.
pub const PAGE: usize = 100;
/// Tasks forgotten in one sweep after which the heap is trimmed.
pub const TRIM_AFTER: usize = 64;

/// The authorisation context a task is bound to (see the module's rules): a principal, and for
/// the hub's own user the address it was seen at.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Owner {
    principal: Principal,
    at: Option<IpAddr>,
}

impl Owner {
    /// The owner of what `principal` makes from `peer`.
    pub fn of(principal: &Principal, peer: IpAddr) -> Self {
        let at = matches!(principal, Principal::Owner).then(|| peer.to_canonical());
        Self { principal: principal.clone(), at }
    }

    /// As a forwarded request carries it to another hub: the address alone for the hub's own
    /// user (as hubs always said it), else the principal's own words ([`Principal::to_wire`]).
    pub fn to_wire(&self) -> String {
        match (&self.principal, self.at) {
            (Principal::Owner, Some(ip)) => ip.to_string(),
            (p, _) => p.to_wire(),
        }
    }

    /// Reads [`Self::to_wire`] back; `None` for anything else.
    pub fn from_wire(text: &str) -> Option<Self> {
        if let Ok(ip) = text.parse::<IpAddr>() {
            return Some(Self::of(&Principal::Owner, ip));
        }
        match Principal::from_wire(text)? {
            Principal::Owner => None,
            p => Some(Self { principal: p, at: None }),
        }
    }
}

/// Longest hub part of a task id taken (a cluster id is 12 hex digits; an operator's own id is
/// still short).
pub const HUB_PART_MAX: usize = 64;

/// The hub a task id names, if the id has the shape this module gives ids: `<hub>/<32 hex
/// digits>`, the hub part at most [`HUB_PART_MAX`] letters, digits, `-`, `_` or `.`. Anything
/// else (slashes, escapes, a huge hub part) names no hub, and is answered as an unknown id.
pub fn hub_of(id: &str) -> Option<&str> {
    let (hub, random) = id.split_once('/')?;
    let hub_ok = !hub.is_empty() && hub.len() <= HUB_PART_MAX && hub.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    let random_ok = random.len() == 32 && random.bytes().all(|b| b.is_ascii_hexdigit());
    (hub_ok && random_ok).then_some(hub)
}

/// Where a task was created: its owner, the session (if any) its per-session cap counts on, and
/// the lease of the credential it was made with (it ends when that is revoked).
#[derive(Debug, Clone)]
pub struct Requestor {
    pub owner: Owner,
    pub session: Option<Arc<str>>,
    pub lease: Lease,
}

#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub total: usize,
    pub per_session: usize,
    /// Tasks one owner may hold: derived from the other two ([`Limits::new`]).
    pub per_owner: usize,
}

impl Limits {
    /// The caps for `total` and `per_session`; one owner may hold a tenth of the total, and at
    /// least two sessions' worth (never more than the total).
    pub fn new(total: usize, per_session: usize) -> Self {
        let (total, per_session) = (total.max(1), per_session.max(1));
        Self { total, per_session, per_owner: (total / 10).max(2 * per_session).min(total) }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Self::new(DEFAULT_TOTAL as usize, DEFAULT_PER_SESSION as usize)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Working,
    Completed,
    Failed,
    Cancelled,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Working => "working",
            Status::Completed => "completed",
            Status::Failed => "failed",
            Status::Cancelled => "cancelled",
        }
    }

    pub fn is_terminal(self) -> bool {
        self != Status::Working
    }
}

/// What the underlying `tools/call` answered: its result, or its JSON-RPC error (each as JSON).
#[derive(Debug, Clone)]
pub enum Outcome {
    Result(Value),
    Error(Value),
}

/// A task's state as its watchers see it.
#[derive(Debug, Clone)]
pub struct State {
    pub status: Status,
    pub message: Option<String>,
    pub updated: SystemTime,
    pub outcome: Option<Arc<Outcome>>,
}

struct Entry {
    owner: Owner,
    /// Ends when the credential that made the task is revoked: the task is then forgotten.
    lease: Lease,
    session_key: SessionKey,
    created: SystemTime,
    expires: Instant,
    ttl: Duration,
    state: watch::Sender<State>,
    cancel: CancellationToken,
    /// Bytes of the kept result.
    bytes: usize,
}

impl Entry {
    /// Whether the task is still kept: its TTL has not ended, nor its credential.
    fn live(&self, now: Instant) -> bool {
        self.expires > now && !self.lease.is_ended()
    }
}

/// What a per-session cap counts on: the session, or the owner for session-less requests.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum SessionKey {
    Session(Arc<str>),
    Owner(Owner),
}

#[derive(Default)]
struct Inner {
    by_id: HashMap<Arc<str>, Entry>,
    per_session: HashMap<SessionKey, usize>,
    per_owner: HashMap<Owner, usize>,
    bytes: usize,
}

/// The hub's tasks.
pub struct Tasks {
    limits: Limits,
    inner: Mutex<Inner>,
    refusals: RateLimited,
}

/// A task just created: its id and what the call running it needs.
pub struct Created {
    pub id: Arc<str>,
    pub cancel: CancellationToken,
}

/// Why a task was not created: the text the host is sent.
#[derive(Debug)]
pub struct Refused(pub String);

/// A task as the protocol shows it (`Task`).
pub fn task_json(id: &str, created: SystemTime, ttl: Duration, state: &State) -> Value {
    let mut v = json!({
        "taskId": id,
        "status": state.status.as_str(),
        "createdAt": humantime::format_rfc3339_millis(created).to_string(),
        "lastUpdatedAt": humantime::format_rfc3339_millis(state.updated).to_string(),
        "ttl": ttl.as_millis() as u64,
    });
    if !state.status.is_terminal() {
        v["pollInterval"] = json!(POLL_INTERVAL_MS);
    }
    if let Some(m) = &state.message {
        v["statusMessage"] = json!(m);
    }
    v
}

impl Tasks {
    pub fn new(limits: Limits) -> Arc<Self> {
        let limits = Limits::new(limits.total, limits.per_session);
        Arc::new(Self { limits, inner: Mutex::default(), refusals: RateLimited::new(Duration::from_secs(5)) })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A new `working` task for `who`, kept for `ttl_ms` (clamped), its id naming `hub`.
    pub fn create(&self, who: &Requestor, hub: &str, ttl_ms: Option<u64>) -> Result<(Created, Value), Refused> {
        let ttl = ttl_ms.map_or(TTL_DEFAULT, Duration::from_millis).min(TTL_MAX);
        let id: Arc<str> = format!("{hub}/{}", random_hex()).into();
        let key = match &who.session {
            Some(s) => SessionKey::Session(s.clone()),
            None => SessionKey::Owner(who.owner.clone()),
        };
        let now = SystemTime::now();
        let state = State { status: Status::Working, message: Some("sent to the device".into()), updated: now, outcome: None };
        let shown = task_json(&id, now, ttl, &state);
        // Revoking the credential cancels the call.
        let cancel = who.lease.0.child_token();
        let refused = {
            let mut inner = self.lock();
            let full = |inner: &Inner| {
                inner.per_session.get(&key).copied().unwrap_or(0) >= self.limits.per_session
                    || inner.per_owner.get(&who.owner).copied().unwrap_or(0) >= self.limits.per_owner
                    || inner.by_id.len() >= self.limits.total
            };
            if full(&inner) {
                // Expired tasks give their places back before anything is refused.
                Self::sweep_locked(&mut inner);
            }
            let mine = inner.per_session.get(&key).copied().unwrap_or(0);
            let owners = inner.per_owner.get(&who.owner).copied().unwrap_or(0);
            if who.lease.is_ended() {
                Some("the credential this request was made with was revoked".to_string())
            } else if mine >= self.limits.per_session {
                let holder = match &key {
                    SessionKey::Session(_) => "this session".to_string(),
                    SessionKey::Owner(owner) => format!("{} (without a session)", owner.principal.describe()),
                };
                Some(format!(
                    "{holder} holds {mine} tasks, its cap (--mcp-max-tasks-per-session {}); fetch their results or cancel them, or wait for their TTL to end",
                    self.limits.per_session
                ))
            } else if inner.by_id.len() >= self.limits.total {
                Some(format!(
                    "the hub holds {} tasks, its cap (--mcp-max-tasks {}); retry once tasks end or their TTL passes",
                    inner.by_id.len(),
                    self.limits.total
                ))
            } else if owners >= self.limits.per_owner {
                Some(format!(
                    "{} holds {owners} tasks, the most one client may hold (a tenth of --mcp-max-tasks {}, and at least twice --mcp-max-tasks-per-session); fetch their results or cancel them, or wait for their TTL to end",
                    who.owner.principal.describe(),
                    self.limits.total
                ))
            } else {
                *inner.per_session.entry(key.clone()).or_insert(0) += 1;
                *inner.per_owner.entry(who.owner.clone()).or_insert(0) += 1;
                let entry = Entry {
                    owner: who.owner.clone(),
                    lease: who.lease.clone(),
                    session_key: key,
                    created: now,
                    expires: Instant::now() + ttl,
                    ttl,
                    state: watch::Sender::new(state),
                    cancel: cancel.clone(),
                    bytes: 0,
                };
                inner.by_id.insert(id.clone(), entry);
                None
            }
        };
        match refused {
            None => Ok((Created { id, cancel }, shown)),
            Some(why) => {
                if let Some(skipped) = self.refusals.allow() {
                    tracing::warn!(owner = %who.owner.to_wire(), skipped, "MCP task refused: {why}");
                }
                Err(Refused(why))
            }
        }
    }

    /// The task `id` if `owner` may see it and it has not expired (nor its credential ended).
    fn with<T>(&self, owner: &Owner, id: &str, f: impl FnOnce(&Entry) -> T) -> Option<T> {
        let now = Instant::now();
        let inner = self.lock();
        inner.by_id.get(id).filter(|e| e.owner == *owner && e.live(now)).map(f)
    }

    /// The task as `tasks/get` shows it.
    pub fn get(&self, owner: &Owner, id: &str) -> Option<Value> {
        self.with(owner, id, |e| task_json(id, e.created, e.ttl, &e.state.borrow()))
    }

    /// A watch on the task's state (for `tasks/result`, and to notify its session).
    pub fn watch(&self, owner: &Owner, id: &str) -> Option<watch::Receiver<State>> {
        self.with(owner, id, |e| e.state.subscribe())
    }

    /// Ends the task with what its call answered: `completed`, or `failed` when the tool said
    /// `isError` or the call ended in an error. A task already ended keeps its status.
    pub fn finish(&self, id: &str, outcome: Outcome) {
        let bytes = match &outcome {
            Outcome::Result(v) | Outcome::Error(v) => approx_bytes(v),
        };
        let (status, message) = match &outcome {
            Outcome::Result(v) if v.get("isError").and_then(Value::as_bool) == Some(true) => (Status::Failed, Some(first_text(v).unwrap_or("the tool reported an error").to_string())),
            Outcome::Result(_) => (Status::Completed, None),
            Outcome::Error(e) => (Status::Failed, Some(e.get("message").and_then(Value::as_str).unwrap_or("the call failed").to_string())),
        };
        let mut inner = self.lock();
        let budget_left = RESULT_BYTES_MAX.saturating_sub(inner.bytes);
        let Some(entry) = inner.by_id.get_mut(id) else { return };
        if entry.state.borrow().status.is_terminal() {
            return;
        }
        let (status, message, outcome, bytes) = if bytes > budget_left {
            let why = format!("the result ({bytes} bytes) was not kept: the hub holds {RESULT_BYTES_MAX} bytes of task results at most; fetch results sooner");
            let err = json!({"code": -32603, "message": why});
            (Status::Failed, Some(why), Outcome::Error(err), 0)
        } else {
            (status, message, outcome, bytes)
        };
        entry.bytes = bytes;
        entry.state.send_replace(State { status, message, updated: SystemTime::now(), outcome: Some(Arc::new(outcome)) });
        inner.bytes += bytes;
    }

    /// Notes a stage of a working task (`statusMessage`).
    pub fn stage(&self, id: &str, message: &str) {
        let inner = self.lock();
        if let Some(e) = inner.by_id.get(id) {
            e.state.send_if_modified(|s| {
                let change = !s.status.is_terminal() && s.message.as_deref() != Some(message);
                if change {
                    s.message = Some(message.to_string());
                    s.updated = SystemTime::now();
                }
                change
            });
        }
    }

    /// `tasks/cancel`: the task's call is stopped and the task is `cancelled`; its state after,
    /// or `Err(status)` when it had already ended, `None` when `owner` has no such task.
    pub fn cancel(&self, owner: &Owner, id: &str) -> Option<Result<Value, Status>> {
        let inner = self.lock();
        let e = inner.by_id.get(id).filter(|e| e.owner == *owner && e.live(Instant::now()))?;
        let status = e.state.borrow().status;
        if status.is_terminal() {
            return Some(Err(status));
        }
        e.cancel.cancel();
        let err = json!({"code": -32800, "message": "the task was cancelled by request; nothing more was waited for from the device"});
        e.state.send_replace(State {
            status: Status::Cancelled,
            message: Some("The task was cancelled by request.".into()),
            updated: SystemTime::now(),
            outcome: Some(Arc::new(Outcome::Error(err))),
        });
        Some(Ok(task_json(id, e.created, e.ttl, &e.state.borrow())))
    }

    /// One page of `owner`'s tasks, oldest first, after the task id `after`; and the cursor of
    /// the next page. `None` for a cursor that is no task of `owner`'s.
    pub fn list(&self, owner: &Owner, after: Option<&str>) -> Option<(Vec<Value>, Option<String>)> {
        let now = Instant::now();
        let inner = self.lock();
        let mut mine: Vec<(&Arc<str>, &Entry)> = inner.by_id.iter().filter(|(_, e)| e.owner == *owner && e.live(now)).collect();
        mine.sort_by(|a, b| a.1.created.cmp(&b.1.created).then_with(|| a.0.cmp(b.0)));
        let start = match after {
            None => 0,
            Some(c) => mine.iter().position(|(id, _)| &***id == c)? + 1,
        };
        let page: Vec<Value> = mine.iter().skip(start).take(PAGE).map(|(id, e)| task_json(id, e.created, e.ttl, &e.state.borrow())).collect();
        let next = (start + PAGE < mine.len()).then(|| mine[start + PAGE - 1].0.to_string());
        Some((page, next))
    }

    /// Forgets expired tasks and those whose credential was revoked (cancelling their calls);
    /// how many went.
    pub fn sweep(&self) -> usize {
        Self::sweep_locked(&mut self.lock())
    }

    fn sweep_locked(inner: &mut Inner) -> usize {
        let now = Instant::now();
        let expired: Vec<Arc<str>> = inner.by_id.iter().filter(|(_, e)| !e.live(now)).map(|(id, _)| id.clone()).collect();
        for id in &expired {
            if let Some(e) = inner.by_id.remove(id) {
                e.cancel.cancel();
                inner.bytes = inner.bytes.saturating_sub(e.bytes);
                crate::hub::count_table::count_down(&mut inner.per_session, &e.session_key);
                crate::hub::count_table::count_down(&mut inner.per_owner, &e.owner);
            }
        }
        if inner.by_id.is_empty() {
            inner.by_id.shrink_to_fit();
            inner.per_session.shrink_to_fit();
            inner.per_owner.shrink_to_fit();
        }
        expired.len()
    }

    /// Tasks held now, and bytes of results kept.
    pub fn held(&self) -> (usize, usize) {
        let inner = self.lock();
        (inner.by_id.len(), inner.bytes)
    }

    /// Sweeps once a second while `self` lives.
    pub fn spawn_sweeper(self: &Arc<Self>) {
        let weak = Arc::downgrade(self);
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                let mut tick = tokio::time::interval(Duration::from_secs(1));
                loop {
                    tick.tick().await;
                    let Some(tasks) = weak.upgrade() else { return };
                    // Many tasks gone at once: their pages go back to the system, as sessions'
                    // do (glibc keeps freed pages otherwise), off the async workers.
                    if tasks.sweep() >= TRIM_AFTER {
                        let _ = tokio::task::spawn_blocking(super::sessions::trim_heap).await;
                    }
                }
            });
        }
    }
}

/// 128 random bits, as hex.
fn random_hex() -> String {
    let mut bytes = [0u8; 16];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut bytes).unwrap_or_else(|_| bytes = uuid::Uuid::new_v4().into_bytes());
    const HEX: &[u8; 16] = b"0123456789abcdef";
    bytes.iter().flat_map(|b| [HEX[usize::from(b >> 4)] as char, HEX[usize::from(b & 15)] as char]).collect()
}

/// The first text block of a tool result.
fn first_text(v: &Value) -> Option<&str> {
    v.get("content")?.as_array()?.iter().find_map(|c| c.get("text")?.as_str())
}

/// Roughly what a JSON value takes to keep (its encoded length).
fn approx_bytes(v: &Value) -> usize {
    serde_json::to_vec(v).map_or(0, |b| b.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn who(ip: &str, session: &str) -> Requestor {
        Requestor { owner: Owner::of(&Principal::Owner, ip.parse().unwrap()), session: Some(session.into()), lease: Lease::for_the_run() }
    }

    #[test]
    fn a_task_is_its_owners_from_any_session_and_nobody_elses() {
        let tasks = Tasks::new(Limits::default());
        let a = who("10.0.0.1", "s1");
        let (made, shown) = tasks.create(&a, "hub", Some(60_000)).unwrap();
        assert_eq!(shown["status"], "working");
        assert!(made.id.starts_with("hub/") && made.id.len() == 4 + 32, "{}", made.id);
        // Another session of the same owner (a reconnect) sees it; another owner does not, just
        // as for an id nobody made.
        assert!(tasks.get(&a.owner, &made.id).is_some());
        let b = Owner::of(&Principal::Owner, "10.0.0.2".parse().unwrap());
        assert!(tasks.get(&b, &made.id).is_none());
        assert!(tasks.cancel(&b, &made.id).is_none());
        assert_eq!(tasks.list(&b, None).unwrap().0.len(), 0);
        assert_eq!(tasks.list(&a.owner, None).unwrap().0.len(), 1);
        tasks.finish(&made.id, Outcome::Result(json!({"content": [], "isError": false})));
        assert_eq!(tasks.get(&a.owner, &made.id).unwrap()["status"], "completed");
        // Terminal stays terminal.
        assert_eq!(tasks.cancel(&a.owner, &made.id).unwrap().unwrap_err(), Status::Completed);
        tasks.finish(&made.id, Outcome::Error(json!({"code": 1})));
        assert_eq!(tasks.get(&a.owner, &made.id).unwrap()["status"], "completed");
    }

    #[test]
    fn caps_per_session_and_in_total_and_ttl_frees_them() {
        let tasks = Tasks::new(Limits::new(3, 2));
        let a = who("10.0.0.1", "s1");
        tasks.create(&a, "hub", None).unwrap();
        tasks.create(&a, "hub", None).unwrap();
        let why = tasks.create(&a, "hub", None).err().unwrap();
        assert!(why.0.contains("--mcp-max-tasks-per-session 2"), "{why:?}");
        tasks.create(&who("10.0.0.1", "s2"), "hub", None).unwrap();
        let why = tasks.create(&who("10.0.0.1", "s3"), "hub", None).err().unwrap();
        assert!(why.0.contains("--mcp-max-tasks 3"), "{why:?}");
        // Expired tasks are gone at the next sweep, or when a cap would refuse, and their
        // places with them.
        let short = Tasks::new(Limits::new(1, 1));
        let (first, _) = short.create(&a, "hub", Some(0)).unwrap();
        assert!(short.get(&a.owner, &first.id).is_none());
        short.create(&a, "hub", Some(0)).unwrap();
        assert!(first.cancel.is_cancelled(), "an expired task's call is stopped");
        assert_eq!(short.sweep(), 1);
        assert_eq!(short.held(), (0, 0));
    }

    #[test]
    fn a_task_id_names_its_hub_and_junk_names_none() {
        let tasks = Tasks::new(Limits::default());
        let (made, _) = tasks.create(&who("10.0.0.1", "s1"), "3f2a9c01bb7e", None).unwrap();
        assert_eq!(hub_of(&made.id), Some("3f2a9c01bb7e"));
        let hex = "0".repeat(32);
        for junk in [
            format!("a/b/{hex}"),
            format!("/{hex}"),
            format!("{}/{hex}", "h".repeat(HUB_PART_MAX + 1)),
            format!("h\u{1b}[2J/{hex}"),
            format!("h\n/{hex}"),
            format!("h+/{hex}"),
            format!("h#/{hex}"),
            "h/0".into(),
            format!("h/{hex}0"),
            format!("h/{}", "z".repeat(32)),
            hex.clone(),
        ] {
            assert_eq!(hub_of(&junk), None, "{junk:?}");
        }
        assert_eq!(Owner::of(&Principal::Owner, "::ffff:10.0.0.1".parse().unwrap()).to_wire(), "10.0.0.1");
    }

    #[test]
    fn a_cancelled_task_stops_its_call_and_lists_page_by_page() {
        let tasks = Tasks::new(Limits::new(1000, 1000));
        let a = who("10.0.0.1", "s1");
        let (made, _) = tasks.create(&a, "hub", None).unwrap();
        let shown = tasks.cancel(&a.owner, &made.id).unwrap().unwrap();
        assert_eq!(shown["status"], "cancelled");
        assert!(made.cancel.is_cancelled());
        tasks.finish(&made.id, Outcome::Result(json!({"content": []})));
        assert_eq!(tasks.get(&a.owner, &made.id).unwrap()["status"], "cancelled");
        for _ in 0..(PAGE + 5) {
            tasks.create(&a, "hub", None).unwrap();
        }
        let (first, next) = tasks.list(&a.owner, None).unwrap();
        assert_eq!(first.len(), PAGE);
        let (second, end) = tasks.list(&a.owner, next.as_deref()).unwrap();
        assert_eq!((second.len(), end), (6, None));
        assert!(tasks.list(&a.owner, Some("hub/nope")).is_none());
    }

    fn person(id: &str, ip: &str, session: &str, lease: &Lease) -> Requestor {
        Requestor { owner: Owner::of(&Principal::Person(id.into()), ip.parse().unwrap()), session: Some(session.into()), lease: lease.clone() }
    }

    /// Issue 44, items 5 and 9: one client creating 10,000 tasks in a burst, from 40 sessions,
    /// cannot stop a second client from creating tasks; people behind one address never see each
    /// other's tasks, and a person's tasks follow them to any address.
    #[test]
    fn a_flood_of_tasks_from_one_client_leaves_room_for_another_and_people_see_only_their_own() {
        let tasks = Tasks::new(Limits::default());
        let (forever, carols) = (Lease::for_the_run(), Lease::for_the_run());
        let mut made = 0;
        for i in 0..10_000 {
            if tasks.create(&person("aaaaaaaaaaaa", "10.0.0.1", &format!("s{}", i % 40), &forever), "hub", None).is_ok() {
                made += 1;
            }
        }
        assert_eq!(made, Limits::default().per_owner, "the flooder meets its own cap");
        assert!(made < DEFAULT_TOTAL as usize / 2);
        let why = tasks.create(&person("aaaaaaaaaaaa", "10.0.0.9", "another", &forever), "hub", None).err().unwrap();
        assert!(why.0.contains("remote token aaaaaaaaaaaa holds"), "another address is the same person: {why:?}");
        // Carol, behind the same address, still creates tasks; the flooder cannot see them.
        let carol = person("cccccccccccc", "10.0.0.1", "c1", &carols);
        let (hers, _) = tasks.create(&carol, "hub", None).unwrap();
        let flooder = Owner::of(&Principal::Person("aaaaaaaaaaaa".into()), "10.0.0.1".parse().unwrap());
        assert!(tasks.get(&flooder, &hers.id).is_none(), "same address, another person");
        let carol_elsewhere = Owner::of(&Principal::Person("cccccccccccc".into()), "192.0.2.4".parse().unwrap());
        assert!(tasks.get(&carol_elsewhere, &hers.id).is_some(), "her task follows her to another address");
        // The shared MCP token's holders are told apart by address; the hub's own user too.
        let shared = |ip: &str| Owner::of(&Principal::SharedToken(ip.parse().unwrap()), ip.parse().unwrap());
        assert_ne!(shared("10.0.0.1"), shared("10.0.0.2"));
        assert_eq!(Owner::from_wire(&flooder.to_wire()), Some(flooder.clone()));
        assert_eq!(Owner::from_wire("10.0.0.1"), Some(Owner::of(&Principal::Owner, "10.0.0.1".parse().unwrap())));
        assert_eq!(Owner::from_wire("owner"), None, "the hub's own user is always at an address");
        // Revoking carol's token cancels her task's call and forgets it.
        carols.0.cancel();
        assert!(hers.cancel.is_cancelled(), "the call is cancelled with the credential");
        assert!(tasks.get(&carol_elsewhere, &hers.id).is_none(), "and the task is gone");
        assert!(tasks.create(&carol, "hub", None).is_err(), "a revoked credential makes no task");
    }
}
