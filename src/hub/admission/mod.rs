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
pub mod record;
pub mod refusal;
pub mod requests;

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

/// The token name an approval's nonce gives a Device-Id (`id` alone for files from before bindings,
/// demo devices and `--approve-all`).
fn bound(device_id: &str, nonce: &str) -> String {
    if nonce.is_empty() { device_id.to_string() } else { format!("{device_id}#{nonce}") }
}

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

    fn token_for(&self, purpose: Purpose, device_id: &str, nonce: &str) -> String {
        self.secret.token(purpose, &bound(device_id, nonce))
    }

    /// The nonce of `device_id`'s current approval: `Some("")` for devices admitted without one
    /// (demo devices, `--approve-all`, files from before bindings), `None` when it is not admitted.
    fn nonce_of(&self, state: &State, device_id: &str) -> Option<String> {
        if state.book.revoked.contains_key(device_id) {
            return None;
        }
        // The hub's own virtual devices hold their Device-Id for this run, over any approval.
        if state.book.resident.contains(device_id) {
            return Some(String::new());
        }
        if let Some(a) = state.book.admitted.get(device_id) {
            return Some(a.nonce.clone());
        }
        self.approve_all.then(String::new)
    }

    /// `device_id`'s current device token (WebSocket bearer, MQTT password), if it is admitted.
    pub fn device_token(&self, device_id: &str) -> Option<String> {
        let id = device_id.to_ascii_lowercase();
        let nonce = self.nonce_of(&lock(&self.state), &id)?;
        Some(self.token_for(Purpose::Device, &id, &nonce))
    }

    /// `device_id`'s current vision token: derived from its approval like its device token, so a
    /// revocation ends it too. A device that is not admitted gets one that matches nothing.
    pub fn vision_token(&self, device_id: &str) -> String {
        let id = device_id.to_ascii_lowercase();
        match self.nonce_of(&lock(&self.state), &id) {
            Some(nonce) => self.token_for(Purpose::Vision, &id, &nonce),
            None => self.token_for(Purpose::Vision, &id, &format!("{:016x}", random_u64())),
        }
    }

    /// Whether `token` is `device_id`'s current vision token (the device must still be admitted).
    pub fn verify_vision(&self, device_id: &str, token: &str) -> bool {
        let id = device_id.to_ascii_lowercase();
        let Some(nonce) = self.nonce_of(&lock(&self.state), &id) else { return false };
        constant_time_eq(self.token_for(Purpose::Vision, &id, &nonce).as_bytes(), token.trim().as_bytes())
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

    /// Whether a device presenting `token` as `device_id` is let in (WebSocket, MQTT).
    pub fn admits(&self, device_id: &str, token: Option<&str>) -> Result<(), Refusal> {
        let device_id = device_id.to_ascii_lowercase();
        let token = token.map(str::trim).filter(|t| !t.is_empty());
        let state = lock(&self.state);
        if state.book.revoked.contains_key(&device_id) {
            return Err(Refusal::Revoked { device_id });
        }
        // One of this hub's own virtual devices: nothing else may use its Device-Id, whatever the
        // mode (`--approve-all` or a shared token would let another device replace it, back and forth).
        if state.book.resident.contains(&device_id) {
            return match token {
                Some(t) if self.secret.verify(Purpose::Device, &device_id, t) => Ok(()),
                _ => Err(Refusal::Taken { device_id, resident: true }),
            };
        }
        if let Some(t) = token
            && self.shared_tokens.iter().any(|s| constant_time_eq(s.as_bytes(), t.as_bytes()))
        {
            return Ok(());
        }
        let Some(nonce) = self.nonce_of(&state, &device_id) else {
            // A token bound to one of its requests: that request waits for its code.
            let code = token.and_then(|t| {
                let now = Instant::now();
                state.requests.of_device(&device_id, now).find(|p| self.secret.verify(Purpose::Device, &bound(&device_id, &p.nonce), t)).map(|p| p.code.clone())
            });
            return Err(Refusal::NotAdmitted { device_id, code });
        };
        // With --approve-all and no shared tokens, anything not revoked goes; with shared tokens,
        // a device must send one of them or its own token.
        if self.approve_all && self.shared_tokens.is_empty() {
            return Ok(());
        }
        match token {
            None => Err(Refusal::NoToken { device_id }),
            Some(t) if self.secret.verify(Purpose::Device, &bound(&device_id, &nonce), t) => Ok(()),
            Some(_) => Err(Refusal::WrongToken { device_id }),
        }
    }

    /// A WebSocket through a gateway: `Some` when `token` is a gateway credential. The device must
    /// have been approved (by any path) and not revoked; otherwise a request `via: gateway` waits.
    pub fn admits_through_gateway(&self, device_id: &str, token: Option<&str>, client_id: Option<&str>, remote: Option<SocketAddr>) -> Option<Result<(), Refusal>> {
        let t = token.map(str::trim).filter(|t| !t.is_empty())?;
        if !self.gateway_tokens.iter().any(|g| constant_time_eq(g.as_bytes(), t.as_bytes())) {
            return None;
        }
        let device_id = device_id.to_ascii_lowercase();
        {
            let state = lock(&self.state);
            if state.book.revoked.contains_key(&device_id) {
                return Some(Err(Refusal::Revoked { device_id }));
            }
            if state.book.admitted.contains_key(&device_id) || state.book.resident.contains(&device_id) {
                return Some(Ok(()));
            }
        }
        let r = Requester { device_id: &device_id, via: Via::Gateway, client_id, key_hash: None, remote, reported: None };
        Some(match self.request(&r) {
            Ok(p) => Err(Refusal::NotAdmitted { device_id, code: Some(p.code) }),
            Err(busy) => Err(busy),
        })
    }

    /// Whether the hub may serve `device_id`'s MQTT uplinks (the broker checked its login; on an
    /// external broker the hub sees no login at all): admitted, or `--approve-all`, or shared
    /// tokens configured — and never when revoked.
    pub fn may_serve(&self, device_id: &str) -> bool {
        let id = device_id.to_ascii_lowercase();
        let state = lock(&self.state);
        !state.book.revoked.contains_key(&id) && (self.nonce_of(&state, &id).is_some() || !self.shared_tokens.is_empty())
    }

    /// The password hubs of a cluster log in with on a broker that asks a hub about every login
    /// (the EMQX hooks, [`crate::mqtt::hooks`]): every hub holding the shared hub secret derives
    /// the same one, and it is no device's token (derived from a name that is not a Device-Id).
    pub fn hub_broker_password(&self) -> String {
        self.secret.token(Purpose::Device, "mcpdev-hub")
    }

    /// The broker login of `device_id`'s current approval: its token, when a person bound it (a
    /// request approved, or a Device-Id approved out of band). `None` for a device that is not
    /// approved, revoked, or admitted only by a mode (`--approve-all`, demo devices, shared
    /// tokens): a broker holds per-device credentials for approved bindings only.
    pub fn broker_login(&self, device_id: &str) -> Option<String> {
        let id = device_id.to_ascii_lowercase();
        let state = lock(&self.state);
        if state.book.revoked.contains_key(&id) {
            return None;
        }
        let a = state.book.admitted.get(&id)?;
        Some(self.token_for(Purpose::Device, &id, &a.nonce))
    }

    /// Every approved binding's broker login, by Device-Id (what a broker's per-device
    /// credentials must be, see [`Self::broker_login`]).
    pub fn broker_logins(&self) -> Vec<(String, String)> {
        let state = lock(&self.state);
        state.book.admitted.values().filter(|a| !state.book.revoked.contains_key(&a.device_id)).map(|a| (a.device_id.clone(), self.token_for(Purpose::Device, &a.device_id, &a.nonce))).collect()
    }

    /// An MQTT CONNECT as a device: the Device-Id is the MAC in its client id
    /// (`GID_x@@@aa_bb_cc_dd_ee_ff[@@@uuid]`, or a bare MAC), the password its own token. For the
    /// embedded broker's `authenticate` hook.
    pub fn mqtt_login(&self, client_id: &str, password: &str) -> Result<String, String> {
        let id = client_id.split("@@@").find_map(|part| device_id(part).ok()).ok_or_else(|| format!("client id {client_id:?} names no Device-Id (a MAC)"))?;
        self.admits(&id, Some(password)).map(|()| id).map_err(|r| r.to_string())
    }

    /// An OTA check-in (`via: ota`). The approved binding gets its token; anyone else gets its own
    /// request (opened or refreshed) and a token bound to it.
    pub fn check_in(&self, r: &Requester<'_>) -> Result<CheckIn, Refusal> {
        let id = r.device_id;
        {
            let state = lock(&self.state);
            if !state.book.revoked.contains_key(id) {
                if let Some(a) = state.book.admitted.get(id) {
                    if a.via == Some(Via::Ota) && a.matches(r.client_id, r.key_hash.as_deref()) {
                        return Ok(CheckIn::Admitted { token: self.token_for(Purpose::Device, id, &a.nonce) });
                    }
                } else if self.approve_all {
                    return Ok(CheckIn::Admitted { token: self.token_for(Purpose::Device, id, "") });
                }
            }
        }
        let pending = self.request(r)?;
        let token = self.token_for(Purpose::Device, id, &pending.nonce);
        Ok(CheckIn::Pending { pending: Box::new(pending), token })
    }

    /// Records (or refreshes) a request for admission and returns it with its code.
    pub fn request(&self, r: &Requester<'_>) -> Result<Pending, Refusal> {
        let now = Instant::now();
        let opened = lock(&self.state).requests.open(r, now, now_ms(), &mut random_u64);
        let ip = r.remote.map(|a| a.ip());
        match opened {
            Ok(Opened::Existing(p)) => Ok(*p),
            Ok(Opened::New { pending, evicted }) => {
                if let Some(suppressed) = self.may_log(ip) {
                    if let Some(gone) = evicted {
                        warn!(device = %gone.device_id, remote = gone.remote.as_deref().unwrap_or("-"), "admission: too many requests held; dropped this one (its address held several)");
                    }
                    warn!(device = %pending.device_id, via = ?pending.via, remote = pending.remote.as_deref().unwrap_or("-"), suppressed,
                        "a device asks to be admitted: `mcpdev devices pending` shows it; approve it with `mcpdev devices approve {}`", pending.code);
                }
                Ok(*pending)
            }
            Err(refusal) => {
                // One line per address, per network, or for the whole store in each window: a
                // flood from many addresses is one line and a count.
                let (reason, key) = match &refusal {
                    Refusal::Busy { cap: Crowded::Network, .. } => (Refused::AdmissionNetwork, ip.map(requests::prefix)),
                    Refusal::Busy { cap: Crowded::Full, .. } => (Refused::AdmissionFull, Some(IpAddr::from([0u8; 4]))),
                    _ => (Refused::AdmissionRate, ip),
                };
                crate::metrics::refused(reason);
                if let Some(suppressed) = self.may_log(key) {
                    warn!(remote = r.remote.map(|a| a.to_string()).unwrap_or_else(|| "-".into()), suppressed, "admission request refused: {refusal}");
                }
                Err(refusal)
            }
        }
    }

    /// Where the `/activate` poll of this requester stands. `challenge`: the one the poll sent,
    /// if any (the stock body is `{}` without an eFuse serial).
    pub fn activation(&self, device_id: &str, client_id: Option<&str>, key_hash: Option<&str>, challenge: Option<&str>) -> Activation {
        let now = Instant::now();
        let mut state = lock(&self.state);
        // A lab bench asks for no activation: whoever polls is done (unless revoked).
        if self.approve_all && !state.book.admitted.contains_key(device_id) && !state.book.revoked.contains_key(device_id) {
            return Activation::Approved;
        }
        if let Some(a) = state.book.admitted.get(device_id)
            && !state.book.revoked.contains_key(device_id)
            && a.matches(client_id, key_hash)
            && challenge.is_none_or(|c| a.challenge.is_empty() || constant_time_eq(c.as_bytes(), a.challenge.as_bytes()))
        {
            return Activation::Approved;
        }
        let mine: Vec<&Pending> = state.requests.of_device(device_id, now).filter(|p| p.client_id.as_deref() == client_id && p.key_hash.as_deref() == key_hash).collect();
        if mine.is_empty() {
            return Activation::Unknown;
        }
        let polled = match challenge {
            Some(c) => mine.iter().find(|p| constant_time_eq(p.challenge.as_bytes(), c.as_bytes())).map(|p| p.code.clone()),
            None => mine.iter().min_by_key(|p| p.since).map(|p| p.code.clone()),
        };
        match polled {
            // A device polling for its code keeps it ahead of requests nobody looks at.
            Some(code) => {
                state.requests.seen(&code);
                Activation::Waiting(code)
            }
            None => Activation::WrongChallenge,
        }
    }

    /// Every live pending request, oldest first, each with its conflicts. Each is marked as shown
    /// to a person (`devices pending`, the dashboard): kept ahead of requests nobody saw.
    pub fn pending(&self) -> Vec<Pending> {
        let now = Instant::now();
        let mut state = lock(&self.state);
        let mut v: Vec<Pending> = state.requests.live(now).cloned().map(|p| p.with_expiry(now)).collect();
        for p in &v {
            state.requests.seen(&p.code);
        }
        v.sort_by(|a, b| a.since.cmp(&b.since).then_with(|| a.code.cmp(&b.code)));
        let all: Vec<(String, String, Option<String>, Option<String>)> = v.iter().map(|p| (p.device_id.clone(), p.code.clone(), p.client_id.clone(), p.remote.clone())).collect();
        for p in &mut v {
            for (id, code, client, remote) in &all {
                if *id == p.device_id && *code != p.code {
                    p.conflicts.push(format!(
                        "another request for this Device-Id: code {code} from Client-Id {} at {}",
                        client.as_deref().unwrap_or("(none)"),
                        remote.as_deref().unwrap_or("(unknown address)")
                    ));
                }
            }
            if let Some(a) = state.book.admitted.get(&p.device_id) {
                p.conflicts.push(format!("this Device-Id is admitted already ({}): approving this request replaces that binding and needs --rebind", describe(a)));
            }
            if state.book.revoked.contains_key(&p.device_id) {
                p.conflicts.push("this Device-Id was revoked".into());
            }
        }
        v
    }

    /// What the request store holds, as its eviction rules see it, without marking anything
    /// seen (for the fuzz target's invariants).
    pub(crate) fn waiting(&self) -> Vec<Waiting> {
        let now = Instant::now();
        lock(&self.state).requests.live(now).map(|p| Waiting { code: p.code.clone(), ip: p.ip, seen: p.seen }).collect()
    }

    /// Every approved device, by Device-Id.
    pub fn admitted(&self) -> Vec<Admitted> {
        lock(&self.state).book.admitted.values().cloned().collect()
    }

    /// Approves a pending code, or a Device-Id out of band, and keeps the approval on disk. An
    /// admitted device is bound again only with `rebind`.
    pub fn approve(&self, target: &str, rebind: bool) -> Result<Approval, String> {
        let wanted = target.trim();
        let now = Instant::now();
        let mut state = lock(&self.state);
        let request = if is_code(wanted) {
            let p = state.requests.by_code(wanted, now).cloned().ok_or_else(|| {
                format!("no device is waiting with code {wanted} (codes expire after {} minutes): `mcpdev devices pending` lists the waiting ones", CODE_LIFETIME.as_secs() / 60)
            })?;
            Some(p)
        } else {
            None
        };
        let id = match &request {
            Some(p) => p.device_id.clone(),
            None => device_id(wanted).map_err(|_| format!("{wanted:?} is neither a 6-digit activation code nor a Device-Id like aa:bb:cc:dd:ee:ff"))?,
        };
        if state.book.resident.contains(&id) {
            return Err(resident_refusal(&id, "approving it (or re-binding it) would give it a token it does not have and lock it out"));
        }
        let previous = state.book.admitted.get(&id).cloned();
        if let Some(prev) = &previous
            && !rebind
        {
            let what = match &request {
                Some(p) => format!("this request is from Client-Id {} at {}", p.client_id.as_deref().unwrap_or("(none)"), p.remote.as_deref().unwrap_or("(unknown address)")),
                None => "approving it by Device-Id issues a new token".into(),
            };
            return Err(format!(
                "{id} is admitted already ({}); {what}. If the device was really replaced or reset, run `mcpdev devices approve {wanted} --rebind`: the old binding's tokens stop working",
                describe(prev)
            ));
        }
        if previous.is_none() && state.book.admitted.len() >= MAX_ADMITTED {
            return Err(format!("{MAX_ADMITTED} devices are approved already: revoke some with `mcpdev devices revoke DEVICE-ID`"));
        }
        let at = next_time(&state, &id);
        let entry = match &request {
            Some(p) => Admitted {
                device_id: id.clone(),
                client_id: p.client_id.clone(),
                via: Some(p.via),
                approved_at_ms: at,
                key_hash: p.key_hash.clone(),
                nonce: p.nonce.clone(),
                challenge: p.challenge.clone(),
            },
            None => Admitted {
                device_id: id.clone(),
                client_id: None,
                via: None,
                approved_at_ms: at,
                key_hash: None,
                nonce: format!("{:016x}{:016x}", random_u64(), random_u64()),
                challenge: String::new(),
            },
        };
        let nonce = entry.nonce.clone();
        state.book.admitted.insert(id.clone(), entry);
        let was_revoked = state.book.revoked.remove(&id);
        if let Some(path) = &self.file
            && let Err(e) = state.book.save(path)
        {
            match previous {
                Some(prev) => state.book.admitted.insert(id.clone(), prev),
                None => state.book.admitted.remove(&id),
            };
            if let Some(at) = was_revoked {
                state.book.revoked.insert(id.clone(), at);
            }
            return Err(e);
        }
        match &request {
            Some(p) => {
                state.requests.remove(&p.code);
            }
            None => state.requests.remove_device(&id),
        }
        drop(state);
        let via = request.as_ref().map(|p| p.via);
        // Printed once for devices that cannot pick it up from an OTA check-in.
        let token = match via {
            Some(Via::Ota | Via::Gateway) => None,
            Some(Via::Websocket) | None => Some(self.token_for(Purpose::Device, &id, &nonce)),
        };
        let replaced = previous.as_ref().map(describe);
        info!(device = %id, via = ?via, rebind = replaced.is_some(), "admission: approved");
        Ok(Approval { device_id: id, via, token, replaced })
    }

    /// Refuses a pending request: its code is gone (the device may ask again, with a new code).
    pub fn deny(&self, code: &str) -> Result<Pending, String> {
        let code = code.trim();
        let now = Instant::now();
        let mut state = lock(&self.state);
        if state.requests.by_code(code, now).is_none() {
            return Err(format!("no device is waiting with code {code}: `mcpdev devices pending` lists the waiting ones"));
        }
        state.requests.remove(code).ok_or_else(|| format!("no device is waiting with code {code}"))
    }

    /// Withdraws an approval and remembers the revocation (the caller disconnects the device);
    /// `Ok` says how the device was admitted until now. The revocation is recorded either way.
    pub fn revoke(&self, id: &str) -> Result<WasAdmitted, String> {
        let id = device_id(id).map_err(|_| format!("{id:?} is not a Device-Id like aa:bb:cc:dd:ee:ff"))?;
        let mut state = lock(&self.state);
        if state.book.resident.contains(&id) {
            return Err(resident_refusal(&id, "revoking it would leave it locked out until the hub restarts; stop the hub, or run it without --demo"));
        }
        let prev = state.book.admitted.remove(&id);
        let was_resident = state.book.resident.remove(&id);
        let prev_revoked = state.book.revoked.get(&id).copied();
        let was = match () {
            _ if prev_revoked.is_some() && prev.is_none() => WasAdmitted::RevokedAlready,
            _ if prev.is_some() => WasAdmitted::Approved,
            _ if was_resident => WasAdmitted::InProcess,
            _ if self.approve_all => WasAdmitted::ApproveAll,
            _ if !self.shared_tokens.is_empty() => WasAdmitted::SharedToken,
            _ => WasAdmitted::NotAdmitted,
        };
        let at = next_time(&state, &id);
        state.book.remember_revoked(&id, at);
        if let Some(path) = &self.file
            && let Err(e) = state.book.save(path)
        {
            if let Some(p) = prev {
                state.book.admitted.insert(id.clone(), p);
            }
            if was_resident {
                state.book.resident.insert(id.clone());
            }
            match prev_revoked {
                Some(at) => state.book.revoked.insert(id.clone(), at),
                None => state.book.revoked.remove(&id),
            };
            return Err(e);
        }
        state.requests.remove_device(&id);
        Ok(was)
    }

    /// `device_id`'s current decision as a sealed [`Record`] for the other hubs of a cluster
    /// (`by`: this hub's name); `None` if nobody decided anything about it.
    pub fn record(&self, device_id: &str, by: &str) -> Option<String> {
        let id = device_id.to_ascii_lowercase();
        let held = held(&lock(&self.state), &id, by)?;
        Some(held.seal(&self.secret))
    }

    /// A sealed [`Record`] another hub made, filed under `device_id`: checked
    /// ([`Record::open`]), and applied only if it is later than what this hub holds (so an older
    /// approval never undoes a newer revocation). The caller cuts the device off when this says
    /// so ([`import_and_cut_off`]).
    pub fn import(&self, device_id: &str, payload: &[u8]) -> Result<Imported, String> {
        let record = Record::open(&self.secret, device_id, payload)?;
        let id = record.device_id.clone();
        let mut state = lock(&self.state);
        let current = held(&state, &id, "");
        if !record.supersedes(current.as_ref()) {
            let newer = current.filter(|c| c.supersedes(Some(&record))).is_some();
            return Ok(if newer { Imported::Older } else { Imported::Same });
        }
        let (prev, prev_revoked) = (state.book.admitted.get(&id).cloned(), state.book.revoked.get(&id).copied());
        if record.approved.is_some() && prev.is_none() && state.book.admitted.len() >= MAX_ADMITTED {
            return Err(format!("{MAX_ADMITTED} devices are approved already here"));
        }
        match &record.approved {
            Some(a) => {
                state.book.admitted.insert(id.clone(), a.clone());
                state.book.revoked.remove(&id);
            }
            None => {
                state.book.admitted.remove(&id);
                state.book.resident.remove(&id);
                state.book.remember_revoked(&id, record.at_ms);
            }
        }
        if let Some(path) = &self.file
            && let Err(e) = state.book.save(path)
        {
            match prev {
                Some(p) => state.book.admitted.insert(id.clone(), p),
                None => state.book.admitted.remove(&id),
            };
            match prev_revoked {
                Some(at) => state.book.revoked.insert(id.clone(), at),
                None => state.book.revoked.remove(&id),
            };
            return Err(e);
        }
        state.requests.remove_device(&id);
        drop(state);
        let cut = match &record.approved {
            None => true,
            // Another binding: the sessions of the old one go.
            Some(a) => prev.is_some_and(|p| p.nonce != a.nonce),
        };
        info!(device = %id, by = %record.by, approved = record.approved.is_some(), "admission: applied another hub's decision");
        Ok(Imported::Applied { device_id: id, revoked: record.approved.is_none(), cut })
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

/// A waiting request as the request store's eviction rules see it ([`Admission::waiting`]).
#[derive(Debug, Clone)]
pub(crate) struct Waiting {
    pub code: String,
    /// The requester's address, canonical.
    pub ip: Option<IpAddr>,
    /// Shown to a person, or polled for by its device.
    pub seen: bool,
}

/// How a device was let in until [`Admission::revoke`] recorded its revocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WasAdmitted {
    /// A person approved it.
    Approved,
    /// It ran inside the hub (`serve --demo`).
    InProcess,
    /// The hub admits every device (`serve --approve-all`).
    ApproveAll,
    /// A shared `MCPDEV_DEVICE_TOKEN` would have let it in.
    SharedToken,
    /// It was revoked already.
    RevokedAlready,
    /// Nothing let it in.
    NotAdmitted,
}

impl WasAdmitted {
    /// Whether anything let the device in before.
    pub fn admitted(self) -> bool {
        !matches!(self, WasAdmitted::RevokedAlready | WasAdmitted::NotAdmitted)
    }
}

/// What [`Admission::import`] did with a record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Imported {
    /// Applied; `cut`: the device's sessions are to be cut off (revoked, or bound anew).
    Applied { device_id: String, revoked: bool, cut: bool },
    /// This hub holds the same decision.
    Same,
    /// This hub holds a later decision (the record is stale: this hub's own is to be published
    /// again, so the broker ends on the latest).
    Older,
}

/// What `state` holds about `id`, as a record (`by` names the hub for a sealed copy).
fn held(state: &State, id: &str, by: &str) -> Option<Record> {
    if let Some(&at) = state.book.revoked.get(id) {
        return Some(Record { device_id: id.to_string(), at_ms: at, by: by.to_string(), approved: None });
    }
    let a = state.book.admitted.get(id)?;
    // Files from before bindings have no nonce: nothing another hub could verify tokens by.
    (!a.nonce.is_empty()).then(|| Record { device_id: id.to_string(), at_ms: a.approved_at_ms, by: by.to_string(), approved: Some(a.clone()) })
}

/// The time of a new decision about `id`: now, or just after the latest this hub knows of if its
/// clock is behind the hub that made that one (records are ordered by it: [`record`]).
fn next_time(state: &State, id: &str) -> u64 {
    let latest = state.book.revoked.get(id).copied().into_iter().chain(state.book.admitted.get(id).map(|a| a.approved_at_ms)).max();
    latest.map_or(now_ms(), |l| now_ms().max(l + 1))
}

/// Why `approve` and `revoke` leave one of the hub's own virtual devices alone.
fn resident_refusal(id: &str, what: &str) -> String {
    format!(
        "{id} is one of this hub's own virtual devices (serve --demo): it is admitted for this run and needs no approval; {what}. A device that uses this Device-Id too is another device: give it its own (`mcpdev sim --device-id 02:…`)"
    )
}

/// An admitted binding, for people: its Client-Id, transport and age.
fn describe(a: &Admitted) -> String {
    let via = match a.via {
        Some(Via::Ota) => "over OTA",
        Some(Via::Websocket) => "over WebSocket",
        Some(Via::Gateway) => "through a gateway",
        None => "by Device-Id",
    };
    format!("Client-Id {}, approved {via}{}", a.client_id.as_deref().unwrap_or("(none)"), if a.key_hash.is_some() { " with a device key" } else { "" })
}

/// Brings the broker's per-device credential of `device_id` in line with its approval, when the
/// hub manages them (Mosquitto dynamic security), and waits for it up to [`BROKER_SYNC_LIMIT`]:
/// the command that changed the approval returns once the broker knows (a new credential works,
/// a revoked one is gone and its session ended). A broker that is down is caught up with later.
async fn sync_broker(hub: &super::Hub, device_id: &str) {
    let Some(done) = hub.mqtt.get().and_then(|m| m.admission_changed(device_id)) else { return };
    match tokio::time::timeout(BROKER_SYNC_LIMIT, done).await {
        Ok(Ok(Ok(()))) => {}
        Ok(Ok(Err(e))) => warn!(device = %device_id, "the broker's credential for this device is not updated yet: {e}; retried at the next reconnect"),
        Ok(Err(_)) | Err(_) => warn!(device = %device_id, "the broker did not confirm this device's credential within {BROKER_SYNC_LIMIT:?}; it is updated in the background"),
    }
}

/// How long an approval or a revocation waits for the broker to confirm the device's credential.
pub const BROKER_SYNC_LIMIT: Duration = Duration::from_secs(5);

/// `mcpdev devices revoke`: withdraws the approval and cuts the device off on every path.
pub async fn revoke_and_disconnect(hub: &super::Hub, id: &str) -> Result<Value, String> {
    let was = hub.admission.revoke(id)?;
    let device_id = device_id(id)?;
    sync_broker(hub, &device_id).await;
    let disconnected = cut_off(hub, &device_id, crate::links::handle::CloseReason::Revoked).await;
    // `revoked`: the revocation is recorded (it always is, once `revoke` succeeds); `was`: what
    // let the device in until now.
    Ok(serde_json::json!({"device_id": device_id, "revoked": true, "was": was, "was_admitted": was.admitted(), "disconnected": disconnected}))
}

/// `mcpdev devices approve`: approves, and when the approval re-binds the device (`--rebind`),
/// cuts off the session that came in with the old binding's token.
pub async fn approve_and_cut_over(hub: &super::Hub, target: &str, rebind: bool) -> Result<Approval, String> {
    let approval = hub.admission.approve(target, rebind)?;
    sync_broker(hub, &approval.device_id).await;
    if approval.replaced.is_some() {
        cut_off(hub, &approval.device_id, crate::links::handle::CloseReason::Revoked).await;
    }
    Ok(approval)
}

/// Another hub's decision ([`Admission::import`]), applied; the device's sessions here are cut
/// off when it was revoked (or bound anew).
pub async fn import_and_cut_off(hub: &super::Hub, device_id: &str, payload: &[u8]) -> Result<Imported, String> {
    let imported = hub.admission.import(device_id, payload)?;
    if let Imported::Applied { device_id, .. } = &imported {
        sync_broker(hub, device_id).await;
    }
    if let Imported::Applied { device_id, cut: true, .. } = &imported
        && cut_off(hub, device_id, crate::links::handle::CloseReason::Revoked).await
    {
        info!(device = %device_id, "revoked through another hub of the cluster: disconnected it here");
    }
    Ok(imported)
}

/// Closes `device_id`'s WebSocket or MQTT session, its embedded-broker connection and its MQTT
/// link. Whether it had any.
async fn cut_off(hub: &super::Hub, device_id: &str, reason: crate::links::handle::CloseReason) -> bool {
    let handle = hub.registry.get(device_id);
    let mut disconnected = handle.is_some();
    if let Some(m) = hub.mqtt.get() {
        disconnected |= m.cut_off(device_id);
    }
    if let Some(h) = handle {
        info!(device = %device_id, ?reason, "admission changed: disconnecting the device");
        // A device that does not drain its socket must not hold the CLI up.
        if tokio::time::timeout(Duration::from_secs(5), h.close(reason)).await.is_err() {
            warn!(device = %device_id, "the device's session did not close within 5 s");
        }
        // The link leaves the registry as its task ends, a moment after the close (at once when
        // the MQTT dispatcher dropped it first): wait for that, so that whoever asks next (the
        // CLI's next `devices`) no longer sees a device this answer says is disconnected.
        if !hub.registry.wait_removed(&h, Duration::from_secs(2)).await {
            warn!(device = %device_id, "the device's link was still listed 2 s after it was closed");
        }
    }
    disconnected
}

#[cfg(test)]
mod tests {
    use super::*;

    fn on(dir: &Path) -> Admission {
        Admission::load(&AdmissionConfig { state_dir: Some(dir.to_path_buf()), ..Default::default() }, &[]).unwrap()
    }

    const A: &str = "aa:bb:cc:dd:ee:01";
    const B: &str = "aa:bb:cc:dd:ee:02";

    fn ota<'a>(device_id: &'a str, client_id: &'a str, remote: &str) -> Requester<'a> {
        Requester { device_id, via: Via::Ota, client_id: Some(client_id), key_hash: None, remote: Some(remote.parse().unwrap()), reported: None }
    }

    fn pending(c: CheckIn) -> (Pending, String) {
        match c {
            CheckIn::Pending { pending, token } => (*pending, token),
            CheckIn::Admitted { .. } => panic!("admitted, expected pending"),
        }
    }

    fn admitted_token(c: CheckIn) -> String {
        match c {
            CheckIn::Admitted { token } => token,
            CheckIn::Pending { pending, .. } => panic!("pending with code {}, expected admitted", pending.code),
        }
    }

    #[test]
    fn only_the_approved_requester_gets_in_and_keeps_its_token_across_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let adm = on(dir.path());
        let (victim, victim_token) = pending(adm.check_in(&ota(A, "uuid-victim", "10.0.0.5:1")).unwrap());
        let (thief, thief_token) = pending(adm.check_in(&ota(A, "uuid-thief", "10.0.0.66:1")).unwrap());
        assert_ne!(victim.code, thief.code, "another Client-Id is another request");
        assert_ne!(victim_token, thief_token);
        assert!(matches!(adm.admits(A, Some(&victim_token)), Err(Refusal::NotAdmitted { code: Some(c), .. }) if c == victim.code), "refused until approved, naming its code");
        assert_eq!(adm.activation(A, Some("uuid-victim"), None, None), Activation::Waiting(victim.code.clone()));
        let listed = adm.pending();
        assert!(listed.iter().all(|p| p.conflicts.iter().any(|c| c.contains("another request"))), "both are flagged: {listed:?}");

        let ok = adm.approve(&victim.code, false).unwrap();
        assert_eq!((ok.device_id.as_str(), ok.via, ok.token.is_none()), (A, Some(Via::Ota), true));
        assert_eq!(adm.admits(A, Some(&victim_token)), Ok(()), "the token of the first answer now works (py-xiaozhi)");
        assert!(adm.admits(A, Some(&thief_token)).is_err(), "the impostor's token never does");
        assert_eq!(adm.activation(A, Some("uuid-victim"), None, None), Activation::Approved);
        assert_ne!(adm.activation(A, Some("uuid-thief"), None, None), Activation::Approved);
        assert_eq!(admitted_token(adm.check_in(&ota(A, "uuid-victim", "10.0.0.7:1")).unwrap()), victim_token, "the stock device's next check-in gets it");
        let (_, again) = pending(adm.check_in(&ota(A, "uuid-thief", "10.0.0.66:1")).unwrap());
        assert_ne!(again, victim_token);
        // The impostor's request stays a conflict: approving it needs --rebind.
        let err = adm.approve(&thief.code, false).unwrap_err();
        assert!(err.contains("--rebind") && err.contains("uuid-thief"), "{err}");
        assert!(adm.pending().iter().any(|p| p.code == thief.code && p.conflicts.iter().any(|c| c.contains("admitted already"))));

        let restarted = on(dir.path());
        assert_eq!(restarted.admits(A, Some(&victim_token)), Ok(()), "kept across a restart");
        assert!(matches!(restarted.admits(B, Some(&victim_token)), Err(Refusal::NotAdmitted { .. })), "one device's token opens nothing else");
    }

    #[test]
    fn a_device_key_binds_beyond_the_client_id() {
        let adm = on(tempfile::tempdir().unwrap().path());
        let key = key_hash("0123456789abcdef0123").unwrap();
        let mut r = ota(A, "uuid-a", "10.0.0.5:1");
        r.key_hash = Some(key.clone());
        let (p, token) = pending(adm.check_in(&r).unwrap());
        assert!(p.device_key);
        adm.approve(&p.code, false).unwrap();
        assert_eq!(admitted_token(adm.check_in(&r).unwrap()), token);
        // Same MAC, same (sniffed or computed) Client-Id, no key: nothing.
        let (_, other) = pending(adm.check_in(&ota(A, "uuid-a", "10.0.0.5:1")).unwrap());
        assert_ne!(other, token);
        assert_ne!(adm.activation(A, Some("uuid-a"), None, None), Activation::Approved);
        assert!(key_hash("short").is_err() && key_hash("with space 0123456789").is_err());
    }

    #[test]
    fn approval_by_device_id_prints_a_token_that_ota_never_hands_out() {
        let adm = on(tempfile::tempdir().unwrap().path());
        let ok = adm.approve(A, false).unwrap();
        let token = ok.token.expect("printed once");
        assert_eq!(adm.admits(A, Some(&token)), Ok(()));
        for client in ["", "anything", "uuid-a"] {
            if let Ok(CheckIn::Admitted { .. }) = adm.check_in(&ota(A, client, "10.0.0.5:1")) {
                panic!("an OTA check-in with Client-Id {client:?} got the out-of-band token");
            }
        }
        let err = adm.approve(A, false).unwrap_err();
        assert!(err.contains("admitted already") && err.contains("--rebind"), "{err}");
        let again = adm.approve(A, true).unwrap();
        assert!(again.replaced.is_some());
        assert!(adm.admits(A, Some(&token)).is_err(), "a re-binding ends the old token");
        assert_eq!(adm.admits(A, Some(&again.token.unwrap())), Ok(()));
    }

    #[test]
    fn a_revocation_holds_on_every_path_and_a_new_approval_issues_new_tokens() {
        let dir = tempfile::tempdir().unwrap();
        let adm = Admission::load(&AdmissionConfig { state_dir: Some(dir.path().into()), gateway_tokens: vec!["gw-secret".into()], ..Default::default() }, &["shared".into()]).unwrap();
        let token = adm.approve(A, false).unwrap().token.unwrap();
        let vision = adm.vision_token(A);
        assert!(adm.verify_vision(A, &vision) && adm.may_serve(A));
        assert_eq!(adm.revoke(A).unwrap(), WasAdmitted::Approved);
        assert!(matches!(adm.admits(A, Some(&token)), Err(Refusal::Revoked { .. })));
        assert!(matches!(adm.admits(A, Some("shared")), Err(Refusal::Revoked { .. })), "a shared token does not bring it back");
        assert!(matches!(adm.admits_through_gateway(A, Some("gw-secret"), None, None), Some(Err(Refusal::Revoked { .. }))));
        assert!(!adm.verify_vision(A, &vision), "its vision token ends too");
        assert!(!adm.may_serve(A), "its MQTT uplinks are not served");
        assert!(adm.mqtt_login("GID_mcpdev@@@aa_bb_cc_dd_ee_01", &token).is_err());
        assert!(matches!(on(dir.path()).admits(A, Some(&token)), Err(Refusal::Revoked { .. })), "remembered across a restart");
        let new = adm.approve(A, false).unwrap().token.unwrap();
        assert_ne!(new, token, "re-approval issues a new token");
        assert!(adm.admits(A, Some(&token)).is_err() && adm.admits(A, Some(&new)).is_ok());
        assert_ne!(adm.vision_token(A), vision);
        let all = Admission::load(&AdmissionConfig { approve_all: true, ..Default::default() }, &[]).unwrap();
        assert_eq!(all.admits(B, None), Ok(()));
        assert_eq!(all.revoke(B).unwrap(), WasAdmitted::ApproveAll, "revoking on --approve-all says what let the device in");
        assert!(all.admits(B, None).is_err(), "--approve-all honours a revocation");
        assert_eq!(all.revoke(B).unwrap(), WasAdmitted::RevokedAlready);
    }

    #[test]
    fn a_gateway_credential_admits_only_approved_device_ids() {
        let adm = Admission::load(&AdmissionConfig { gateway_tokens: vec!["gw-secret".into()], ..Default::default() }, &[]).unwrap();
        assert!(adm.admits_through_gateway(A, Some("not-the-gateway"), None, None).is_none(), "not a gateway credential: the normal rules apply");
        let remote = Some("10.0.0.9:5000".parse().unwrap());
        let Some(Err(Refusal::NotAdmitted { code: Some(code), .. })) = adm.admits_through_gateway(A, Some("gw-secret"), None, remote) else { panic!("an unapproved Device-Id must wait") };
        assert!(matches!(adm.admits(A, Some("gw-secret")), Err(Refusal::NotAdmitted { .. })), "the credential is no device token");
        let ok = adm.approve(&code, false).unwrap();
        assert_eq!((ok.via, ok.token), (Some(Via::Gateway), None));
        assert_eq!(adm.admits_through_gateway(A, Some("gw-secret"), None, remote), Some(Ok(())));
        assert!(matches!(adm.admits_through_gateway(B, Some("gw-secret"), None, remote), Some(Err(Refusal::NotAdmitted { .. }))));
    }

    #[test]
    fn websocket_requests_get_the_token_on_approval_and_codes_are_checked() {
        let adm = on(tempfile::tempdir().unwrap().path());
        let r = Requester { device_id: B, via: Via::Websocket, client_id: None, key_hash: None, remote: Some("127.0.0.1:5".parse().unwrap()), reported: None };
        let p = adm.request(&r).unwrap();
        let wrong = if p.code == "000000" { "000001" } else { "000000" };
        assert!(adm.approve(wrong, false).unwrap_err().contains("no device is waiting"));
        assert!(adm.approve("nonsense", false).unwrap_err().contains("neither"));
        let token = adm.approve(&p.code, false).unwrap().token.unwrap();
        assert_eq!(adm.admits(B, Some(&token)), Ok(()));
        assert_eq!(adm.device_token(B), Some(token));
        assert_eq!(adm.admitted().len(), 1);
        let d = adm.request(&Requester { device_id: A, ..r }).unwrap();
        assert_eq!(adm.deny(&d.code).unwrap().device_id, A);
        assert!(adm.approve(&d.code, false).is_err(), "a denied code is gone");
    }

    #[test]
    fn modes_are_honoured() {
        let shared = Admission::load(&AdmissionConfig::default(), &["s3cret".into()]).unwrap();
        assert_eq!(shared.admits(A, Some("s3cret")), Ok(()));
        let resident = shared.admit_resident(B);
        assert_eq!(shared.admits(B, Some(&resident)), Ok(()), "in-process devices are admitted for this run");
        assert!(shared.admitted().is_empty(), "and not written down");
        assert!(shared.admits(A, Some("other")).is_err());
        let all = Admission::load(&AdmissionConfig { approve_all: true, ..Default::default() }, &[]).unwrap();
        assert_eq!(all.admits(A, None), Ok(()));
        assert!(matches!(all.check_in(&ota(A, "x", "10.0.0.1:1")), Ok(CheckIn::Admitted { .. })));
    }

    #[test]
    fn a_malformed_file_stops_the_hub_with_advice() {
        let dir = tempfile::tempdir().unwrap();
        crate::paths::write_private(&dir.path().join("admitted.json"), b"{oops").unwrap();
        let err = Admission::load(&AdmissionConfig { state_dir: Some(dir.path().to_path_buf()), ..Default::default() }, &[]).err().unwrap().to_string();
        assert!(err.contains("remove it"), "{err}");
    }

    #[test]
    fn a_file_from_before_bindings_keeps_its_tokens() {
        let dir = tempfile::tempdir().unwrap();
        let old = format!(r#"{{"version":1,"devices":[{{"device_id":"{A}","client_id":"uuid-a","approved_at_ms":1}}]}}"#);
        crate::paths::write_private(&dir.path().join("admitted.json"), old.as_bytes()).unwrap();
        let adm = on(dir.path());
        let legacy = adm.secret.token(Purpose::Device, A);
        assert_eq!(adm.admits(A, Some(&legacy)), Ok(()));
    }

    /// Two hubs with the same secret (a cluster): each one's decisions, imported by the other,
    /// give the same tokens there; a revocation made later holds whatever order the records
    /// arrive in; a record made with another secret is refused.
    #[test]
    fn a_decision_imported_from_another_hub_verifies_the_same_tokens_and_a_later_revocation_holds() {
        let (d1, d2, d3) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let h1 = on(d1.path());
        std::fs::copy(d1.path().join("hub-secret"), d2.path().join("hub-secret")).unwrap();
        let h2 = on(d2.path());
        let stranger = on(d3.path());
        let (p, token) = pending(h1.check_in(&ota(A, "uuid-a", "10.0.0.5:1")).unwrap());
        h1.approve(&p.code, false).unwrap();
        let approval = h1.record(A, "h1").unwrap();
        assert!(h2.admits(A, Some(&token)).is_err(), "not yet known on h2");
        assert_eq!(h2.import(A, approval.as_bytes()), Ok(Imported::Applied { device_id: A.into(), revoked: false, cut: false }));
        assert_eq!(h2.admits(A, Some(&token)), Ok(()), "the same token verifies on h2");
        assert_eq!(admitted_token(h2.check_in(&ota(A, "uuid-a", "10.0.0.5:1")).unwrap()), token, "and h2 hands the approved binding its token");
        assert_eq!(h2.import(A, approval.as_bytes()), Ok(Imported::Same));
        // Revoked through h2, whose record is later than the approval even if its clock is not.
        h2.revoke(A).unwrap();
        let revocation = h2.record(A, "h2").unwrap();
        assert!(matches!(h1.import(A, revocation.as_bytes()), Ok(Imported::Applied { revoked: true, cut: true, .. })));
        assert!(matches!(h1.admits(A, Some(&token)), Err(Refusal::Revoked { .. })));
        // The old approval replayed (a late delivery, or a replay by a broker client) is older.
        assert_eq!(h1.import(A, approval.as_bytes()), Ok(Imported::Older));
        assert!(matches!(h1.admits(A, Some(&token)), Err(Refusal::Revoked { .. })), "an older approval never undoes a newer revocation");
        // Survives h1's restart (the import is on disk).
        drop(h1);
        assert!(on(d1.path()).is_revoked(A));
        // A record sealed with another secret, or filed under another device, is refused.
        stranger.approve(B, false).unwrap();
        let forged = stranger.record(B, "evil").unwrap();
        assert!(h2.import(B, forged.as_bytes()).unwrap_err().contains("MAC"));
        assert!(h2.device_token(B).is_none());
        assert!(h2.import(B, revocation.as_bytes()).unwrap_err().contains("filed under"));
    }
}
