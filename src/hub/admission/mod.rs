//! Device admission: a device is admitted, not merely connected (the xiaozhi activation flow).
//!
//! The rules (each shown by a test named in `docs/security.md`):
//! - **A device is admitted when a person approved one request of it** (`mcpdev devices approve
//!   CODE`) **and it presents that approval's token** over WebSocket and as its MQTT password.
//!   The approval is a binding ([`book::Admitted`]): Device-Id, Client-Id, device key, transport,
//!   and a random nonce every token of it is derived from ([`HubSecret`], `id#nonce`). One
//!   device's token opens nothing else, and a new approval's tokens replace the old ones.
//! - **A request is bound to its requester** ([`requests`]): another Client-Id, key, transport or
//!   address for the same MAC is another request with its own code, shown as a conflict. Approving
//!   the victim's code never enables an impostor's request.
//! - **Tokens go only to the approved binding.** Every check-in gets a token bound to its *own*
//!   request (so py-xiaozhi, which checks in once, connects as soon as it is approved); the hub
//!   refuses that token until that very request is approved. After approval, only an OTA check-in
//!   with the approved Client-Id (and device key, when one was proved) gets the token again. An
//!   approval by Device-Id prints the token once, for out-of-band use, and never hands it out over
//!   OTA. Re-binding an admitted device to another requester needs `--rebind`.
//! - **A gateway is trusted as a gateway** (`MCPDEV_GATEWAY_TOKEN`): its credential stands in for
//!   the device token of Device-Ids a person approved, and opens a request for the others. It
//!   never admits a Device-Id nobody approved.
//! - **A revocation holds on every path**: the approval and its nonce are gone (old tokens stop
//!   working, device and vision), and the Device-Id is remembered as revoked, so shared tokens,
//!   gateway credentials and `--approve-all` do not let it back in until a new approval. The
//!   caller cuts its sessions ([`revoke_and_disconnect`]).
//! - `serve --approve-all` (a lab bench) admits every device that was not revoked; shared
//!   `MCPDEV_DEVICE_TOKEN`s are accepted for any Device-Id that was not revoked (explicit opt-in).
//! - No lock is held across anything that can panic or wait: the book and the requests are plain
//!   data behind one mutex, and disk writes happen with the state they write.

pub mod book;
mod carry_out;
mod check_in;
mod decisions;
pub mod record;
pub mod refusal;
mod relayed;
pub mod requests;
mod tokens;

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::Serialize;
use serde_json::Value;
use tracing::{info, warn};

pub use book::{Admitted, MAX_ADMITTED};
pub use record::Record;
pub use refusal::{Crowded, Refusal};
pub use requests::{CODE_LIFETIME, MAX_PENDING, Pending, Requester, Via};
pub use carry_out::{BROKER_SYNC_LIMIT, approve_and_cut_over, carry_out_import, import_and_cut_off, revoke_and_disconnect};
pub(crate) use check_in::Waiting;
pub use decisions::{Imported, WasAdmitted};

use super::secret::{HubSecret, Purpose};
use crate::metrics::Refused;
use crate::wire::identity::{format_mac, parse_mac};
use book::Book;
use refusal::LogLimit;
use requests::{Opened, Requests};

/// The header a client that can prove more than its Client-Id sends with each check-in: a random
/// secret it keeps (mcpdev's sim and firmware do); the hub keeps only its SHA-256.
pub const DEVICE_KEY_HEADER: &str = "mcpdev-device-key";

/// How the hub admits devices.
#[derive(Debug, Clone, Default)]
pub struct AdmissionConfig {
    /// Every device is admitted (`serve --approve-all`).
    pub approve_all: bool,
    /// Where `hub-secret` and `admitted.json` live; `None`: an in-memory secret and no file
    /// (in-process hubs, benches).
    pub state_dir: Option<PathBuf>,
    /// Gateway credentials (`MCPDEV_GATEWAY_TOKEN`): accepted in place of the device token of an
    /// approved Device-Id.
    pub gateway_tokens: Vec<String>,
}

/// What `approve` did.
#[derive(Debug, Clone, Serialize)]
pub struct Approval {
    pub device_id: String,
    /// How the device asked, if it did.
    pub via: Option<Via>,
    /// The device's token, for devices that cannot learn it from an OTA check-in (pending over
    /// WebSocket, or approved by Device-Id): printed once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// The binding this approval replaced (`--rebind`), described.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replaced: Option<String>,
    /// The address the request came from, for the hint of what URL the device should use.
    #[serde(skip)]
    pub asked_from: Option<std::net::IpAddr>,
}

/// What an OTA check-in gets.
#[derive(Debug, Clone)]
pub enum CheckIn {
    /// The approved binding: its token; its report may be kept as the device's own.
    Admitted { token: String },
    /// Not (yet) approved: its request and a token bound to that request, refused until the
    /// request's code is approved.
    Pending { pending: Box<Pending>, token: String },
}

/// Where an `/activate` poll stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Activation {
    /// The poller's request was approved.
    Approved,
    /// Its request waits, with this code.
    Waiting(String),
    /// It sent a challenge that is none of its requests'.
    WrongChallenge,
    /// It has no request.
    Unknown,
}

struct State {
    book: Book,
    requests: Requests,
}

pub struct Admission {
    approve_all: bool,
    shared_tokens: Vec<String>,
    gateway_tokens: Vec<String>,
    secret: Arc<HubSecret>,
    file: Option<PathBuf>,
    state: Mutex<State>,
    log: Mutex<LogLimit>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

fn random_u64() -> u64 {
    use ring::rand::SecureRandom;
    let mut b = [0u8; 8];
    // The system random source failing is not something to admit devices through: fall back to
    // the clock, which only makes a code guessable, never a device admitted.
    if ring::rand::SystemRandom::new().fill(&mut b).is_err() {
        return now_ms().wrapping_mul(6_364_136_223_846_793_005) ^ u64::from(std::process::id());
    }
    u64::from_le_bytes(b)
}

/// A Device-Id as the hub keeps it (lower-case MAC), or why it is not one.
pub fn device_id(s: &str) -> Result<String, String> {
    parse_mac(s).map(|m| format_mac(&m))
}

/// Whether `s` is an activation code (6 digits).
pub fn is_code(s: &str) -> bool {
    s.len() == 6 && s.bytes().all(|b| b.is_ascii_digit())
}

/// The hash the hub keeps of a device key, or why the key is not usable (16 to 128 visible ASCII
/// characters).
pub fn key_hash(key: &str) -> Result<String, String> {
    let key = key.trim();
    if !(16..=128).contains(&key.len()) || !key.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(format!("the {DEVICE_KEY_HEADER} header must be 16 to 128 visible ASCII characters"));
    }
    let digest = ring::digest::digest(&ring::digest::SHA256, key.as_bytes());
    Ok(digest.as_ref().iter().map(|b| format!("{b:02x}")).collect())
}

pub(crate) use super::secret::constant_time_eq;

impl Admission {
    /// Loads the hub secret and the approved devices. Fails on an unreadable or malformed
    /// `admitted.json` (say what to do), never silently forgetting approvals.
    /// `shared_tokens` (`MCPDEV_DEVICE_TOKEN`) are accepted for any Device-Id not revoked.
    pub fn load(config: &AdmissionConfig, shared_tokens: &[String]) -> anyhow::Result<Self> {
        let (secret, file) = match &config.state_dir {
            None => (HubSecret::ephemeral(), None),
            Some(dir) => {
                let secret = match HubSecret::load_or_create(&dir.join("hub-secret")) {
                    Ok(s) => s,
                    // A lab bench still runs when the state directory is unusable.
                    Err(e) if config.approve_all => {
                        warn!("{e}; using a secret that lasts only for this run");
                        HubSecret::ephemeral()
                    }
                    Err(e) => return Err(e),
                };
                (secret, Some(dir.join("admitted.json")))
            }
        };
        let book = match &file {
            Some(path) => Book::load(path)?,
            None => Book::default(),
        };
        let clean = |v: &[String]| v.iter().map(|t| t.trim().to_string()).filter(|t| !t.is_empty()).collect::<Vec<_>>();
        Ok(Self {
            approve_all: config.approve_all,
            shared_tokens: clean(shared_tokens),
            gateway_tokens: clean(&config.gateway_tokens),
            secret: Arc::new(secret),
            file,
            state: Mutex::new(State { book, requests: Requests::default() }),
            log: Mutex::default(),
        })
    }

    /// Admits every device (lab bench).
    pub fn approve_all(&self) -> bool {
        self.approve_all
    }

    /// Whether shared (not per-device) tokens are accepted.
    pub fn has_shared_tokens(&self) -> bool {
        !self.shared_tokens.is_empty()
    }

    /// Whether gateway credentials are configured.
    pub fn has_gateways(&self) -> bool {
        !self.gateway_tokens.is_empty()
    }

    /// Where approvals are kept (`None` for an in-memory hub).
    pub fn file(&self) -> Option<&Path> {
        self.file.as_deref()
    }

    /// The hub secret every per-device token comes from.
    pub fn secret(&self) -> Arc<HubSecret> {
        self.secret.clone()
    }

    /// Whether `device_id`'s approval was withdrawn (and not given again).
    pub fn is_revoked(&self, device_id: &str) -> bool {
        lock(&self.state).book.revoked.contains_key(&device_id.to_ascii_lowercase())
    }

    /// Whether `device_id` is one of this hub's own virtual devices (`serve --demo`).
    pub fn is_resident(&self, device_id: &str) -> bool {
        lock(&self.state).book.resident.contains(&device_id.to_ascii_lowercase())
    }

    /// Admits a device that runs inside this hub (`serve --demo`) for this run, whatever the
    /// mode, and returns its token.
    pub fn admit_resident(&self, device_id: &str) -> String {
        let id = device_id.to_ascii_lowercase();
        let mut state = lock(&self.state);
        state.book.resident.insert(id.clone());
        state.book.revoked.remove(&id);
        self.token_for(Purpose::Device, &id, "")
    }

    /// Logs a refusal, at most once per peer address per [`refusal::LOG_WINDOW`] (the rest are
    /// counted and the count is given with the next line).
    pub fn log_refusal(&self, remote: Option<IpAddr>, what: &str, refusal: &Refusal) {
        if let Some(suppressed) = self.may_log(remote) {
            let remote = remote.map(|r| r.to_string()).unwrap_or_else(|| "-".into());
            warn!(%remote, suppressed, "{what} refused: {refusal}");
        }
    }

    fn may_log(&self, remote: Option<IpAddr>) -> Option<u64> {
        lock(&self.log).may_log(remote)
    }
}

#[cfg(test)]
mod tests;
