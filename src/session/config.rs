//! How a session behaves, as its link configures it: what each session keeps of its own, and the
//! hub-wide rest that equal sessions share (one pointer per runtime thread, not a copy each).

use std::time::Duration;

use serde_json::Value;

use super::limits;

/// How a session behaves; the link fills it in. A session keeps what is its own (session id,
/// server hello, vision token, keepalive) and shares the rest, equal for every device of a hub
/// (the vision URL too, equal for the devices that came in on one address), with the other
/// sessions ([`shared_config`]): about 250 bytes a device.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionConfig {
    /// Our session id, sent in the server hello; devices echo it.
    pub session_id: String,
    /// The server hello to send when the device says hello.
    pub server_hello: ServerHello,
    /// `capabilities.vision` for `initialize` (xiaozhi-sdk ignores an initialize without both).
    pub vision_url: String,
    pub vision_token: String,
    /// Timeout of each onboarding request.
    pub onboarding_timeout: Duration,
    /// Send an MCP `ping` when nothing was sent for this long (the device drops a link after 120 s
    /// without incoming data; WebSocket pings are not relied on).
    pub keepalive: Duration,
    /// Each session pings a little earlier than `keepalive`, by up to this percentage, drawn from
    /// its session id ([`spread_keepalive`]): a fleet onboarded in one burst does not ping in one
    /// burst every minute, and the sessions' periods differ, so they drift further apart.
    pub keepalive_jitter_pct: u8,
    /// Give up listing after this many pages.
    pub max_pages: usize,
    /// When the list comes back empty, list again after this delay, up to `empty_list_retries` times.
    pub empty_list_retry: Duration,
    pub empty_list_retries: u32,
    /// Failed onboarding steps allowed before giving up (each failed step is sent again).
    pub onboarding_attempts: u32,
    /// The wait before the k-th retry of a failed step (the last one repeats).
    pub retry_backoff: &'static [Duration],
    /// After an onboarding failed (every attempt spent), the wait before the k-th new one while
    /// the device stays connected (the last one repeats; empty: never, only a hello or a refresh
    /// starts it over). A hub too busy to hear the answers in time, or a gateway still filling
    /// its cache, onboards the device later instead of leaving it without tools for good.
    pub failed_onboarding_retry: &'static [Duration],
    /// List the tools once more this long after the first complete listing (None: never).
    pub confirm_relist: Option<Duration>,
    /// Re-lists after a list that looked truncated, per session.
    pub max_relists: u32,
    /// Background re-lists start at most this often (later requests are coalesced into one).
    pub min_relist_interval: Duration,
    /// Caps on what one device's tool list may hold.
    pub max_tools: usize,
    pub max_tool_bytes: usize,
    /// Hellos and device requests answered per second at most.
    pub max_answers_per_sec: u32,
    /// The link cannot tell a new instance of the device from the old one (MQTT through a broker
    /// the hub does not run: it sees no CONNECT), so every hello may come from a new instance and
    /// onboards the device again, as xiaozhi-esp32-server does on each new session.
    pub hello_may_be_new_instance: bool,
    /// Onboardings (first and again) one device may cause: at most `max_onboardings` per
    /// `onboarding_window`; the next one waits for the window to end.
    pub max_onboardings: u32,
    pub onboarding_window: Duration,
    /// What the device's earlier links spent of that budget (a link that replaces another hands
    /// it on; fresh by default).
    pub onboard_budget: limits::OnboardBudget,
    /// After an onboarding that needed a retry, the wait before each listing that must agree
    /// with the one before.
    pub agreement_relist: Duration,
    /// Request ids start after this (a CLI that talks to a device some hub also serves picks a
    /// random base, so the two never take each other's replies).
    pub id_base: i64,
    /// The system info the device posted to the OTA endpoint, if it did.
    pub system_info: Option<Value>,
    /// The device is relayed to its own upstream voice backend ([`super::relayed`]): the hub
    /// never answers its hello or its requests, sends no keepalive and no `initialize`, and lists
    /// its tools with its own ids once the upstream initialized it.
    pub relayed: bool,
    /// How many tools the hub last knew this device to list (an earlier connection; 0: none).
    /// A first list shorter than that is not believed before a second listing agrees with it.
    pub known_tools: usize,
    /// The device answers through a cache that may still be filling (the xiaozhi MQTT gateway,
    /// told by its credential or its `from=mqtt_gateway` URL): a first list from it cannot be
    /// told complete, so it is never taken before a second listing agrees with it.
    pub behind_cache: bool,
}

/// The server hello a session answers a hello with. A WebSocket device's is written when it is
/// sent (from the session id), not kept for the device's lifetime: a fleet's hub holds thousands
/// of sessions, and each would hold its own copy of ~170 bytes.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum ServerHello {
    /// The WebSocket server hello ([`envelope::websocket_server_hello`]).
    #[default]
    WebSocket,
    /// MQTT's ([`envelope::udp_server_hello`]), also written when sent: what it needs is ~70
    /// bytes, its text ~330 (issue 46.3).
    Udp(Box<UdpHello>),
    /// This text, as it is (tests').
    Text(Box<str>),
}

/// What an MQTT device's server hello says beside its session id: where its audio goes.
#[derive(Debug, Clone, PartialEq)]
pub struct UdpHello {
    pub server: Box<str>,
    pub port: u16,
    pub ssrc: u32,
    /// AES-128-CTR, made for this session.
    pub key: [u8; 16],
}

/// The k-th wait (from 0) of a backoff schedule whose last wait repeats; None when it is empty.
pub(super) fn backoff(schedule: &[Duration], k: usize) -> Option<Duration> {
    schedule.get(k).or(schedule.last()).copied()
}

/// The default waits before the retries of a failed onboarding step.
const RETRY_BACKOFF: &[Duration] = &[Duration::from_millis(50), Duration::from_millis(200), Duration::from_secs(1), Duration::from_secs(3)];

/// The default waits before onboarding a device again after its onboarding failed.
const FAILED_ONBOARDING_RETRY: &[Duration] = &[Duration::from_secs(30), Duration::from_secs(60), Duration::from_secs(120), Duration::from_secs(300)];

impl From<&str> for ServerHello {
    fn from(text: &str) -> Self {
        Self::Text(text.into())
    }
}

impl From<String> for ServerHello {
    fn from(text: String) -> Self {
        Self::Text(text.into_boxed_str())
    }
}

impl SessionConfig {
    pub fn new(session_id: impl Into<String>, server_hello: impl Into<ServerHello>) -> Self {
        Self {
            session_id: session_id.into(),
            server_hello: server_hello.into(),
            vision_url: String::new(),
            vision_token: String::new(),
            onboarding_timeout: Duration::from_secs(10),
            keepalive: Duration::from_secs(60),
            keepalive_jitter_pct: 25,
            max_pages: 100,
            empty_list_retry: Duration::from_secs(2),
            empty_list_retries: 3,
            onboarding_attempts: 5,
            retry_backoff: RETRY_BACKOFF,
            failed_onboarding_retry: FAILED_ONBOARDING_RETRY,
            confirm_relist: Some(Duration::from_millis(1500)),
            max_relists: 3,
            min_relist_interval: Duration::from_secs(1),
            max_tools: 1000,
            max_tool_bytes: 1 << 20,
            max_answers_per_sec: 20,
            hello_may_be_new_instance: false,
            max_onboardings: 4,
            onboarding_window: Duration::from_secs(30),
            onboard_budget: limits::OnboardBudget::default(),
            agreement_relist: Duration::from_millis(1500),
            id_base: 0,
            system_info: None,
            relayed: false,
            known_tools: 0,
            behind_cache: false,
        }
    }
}

/// The keepalive period of the session `session_id`: `every`, less up to `jitter_pct` % of it,
/// spread evenly over sessions by a hash of the id (FNV-1a), never more than `every` (the device's
/// inactivity limit is what `every` is chosen against).
pub fn spread_keepalive(every: Duration, jitter_pct: u8, session_id: &str) -> Duration {
    let hash = session_id.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
    let fraction = (hash >> 11) as f64 / (1u64 << 53) as f64;
    every.saturating_sub(every.mul_f64(f64::from(jitter_pct.min(90)) / 100.0 * fraction))
}

/// The configuration's hub-wide part (its per-session fields taken out), shared with the sessions
/// created before it on this thread with an equal one: a hub's sessions hold one pointer per
/// runtime thread. Only the latest is remembered (weakly), which is what a hub creating its
/// sessions one by one needs; per thread, so no lock is taken and no other thread's sessions
/// can displace it.
pub(super) fn shared_config(cfg: SessionConfig) -> std::sync::Arc<SessionConfig> {
    thread_local! {
        static LATEST: std::cell::RefCell<std::sync::Weak<SessionConfig>> = const { std::cell::RefCell::new(std::sync::Weak::new()) };
    }
    LATEST.with(|latest| {
        if let Some(shared) = latest.borrow().upgrade().filter(|s| **s == cfg) {
            return shared;
        }
        let shared = std::sync::Arc::new(cfg);
        *latest.borrow_mut() = std::sync::Arc::downgrade(&shared);
        shared
    })
}
