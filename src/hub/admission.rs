//! Device admission: a device is admitted, not merely connected (the xiaozhi activation flow).
//!
//! - By default a device is admitted when a person approved its Device-Id (`mcpdev devices
//!   approve CODE|DEVICE-ID`; kept in `admitted.json` in [`crate::paths::state_dir`]) **and** it
//!   presents its own token ([`HubSecret`], [`Purpose::Device`] of its Device-Id) over WebSocket
//!   and as its MQTT password. One device's token opens nothing else.
//! - A device that is not admitted becomes *pending* with a 6-digit code: the OTA check-in hands it
//!   out in an `activation` block (the stock firmware shows and speaks it), and a refused
//!   WebSocket names it in the 401. Pending entries are bounded ([`MAX_PENDING`], oldest dropped)
//!   and a code expires after [`CODE_LIFETIME`].
//! - `serve --approve-all` (a lab bench) admits everything; shared `MCPDEV_DEVICE_TOKEN`s stay
//!   accepted for any Device-Id (explicit opt-in, not bound to a device).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use tracing::{info, warn};

use super::secret::{HubSecret, Purpose};
use crate::wire::identity::{format_mac, parse_mac};

/// Pending requests kept at most; the oldest is dropped for a new one.
pub const MAX_PENDING: usize = 256;
/// Approved devices kept at most (the file stays small; approving more is refused).
pub const MAX_ADMITTED: usize = 10_000;
/// How long an activation code stays valid.
pub const CODE_LIFETIME: Duration = Duration::from_secs(600);
/// The largest `admitted.json` read at start-up.
const MAX_FILE: u64 = 4 << 20;
/// One refusal log line per peer address in this window (the rest are counted).
const LOG_WINDOW: Duration = Duration::from_secs(10);
const MAX_LOG_PEERS: usize = 4096;

/// How the hub admits devices.
#[derive(Debug, Clone, Default)]
pub struct AdmissionConfig {
    /// Every device is admitted (`serve --approve-all`).
    pub approve_all: bool,
    /// Where `hub-secret` and `admitted.json` live; `None`: an in-memory secret and no file
    /// (in-process hubs, benches).
    pub state_dir: Option<PathBuf>,
}

/// Why a device was not let in; its `Display` says what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// Not approved (yet): approve it with the code or its Device-Id.
    NotAdmitted { device_id: String, code: Option<String> },
    /// Approved, but it sent no token.
    NoToken { device_id: String },
    /// Approved, but the token is not this device's token.
    WrongToken { device_id: String },
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::NotAdmitted { device_id, code: Some(code) } => write!(
                f,
                "device {device_id} is not admitted (no device token is accepted for it yet): approve it with `mcpdev devices approve {code}` (or `mcpdev devices approve {device_id}`), then give the device the token that prints"
            ),
            Refusal::NotAdmitted { device_id, code: None } => {
                write!(f, "device {device_id} is not admitted (no device token is accepted for it yet): approve it with `mcpdev devices approve {device_id}`")
            }
            Refusal::NoToken { device_id } => write!(
                f,
                "device {device_id} sent no token: send its own token as `Authorization: Bearer <token>` (its OTA check-in hands it out; `mcpdev devices approve {device_id}` prints it)"
            ),
            Refusal::WrongToken { device_id } => write!(
                f,
                "the token is not this device's token (device {device_id}); each device has its own: `mcpdev devices approve {device_id}` prints it"
            ),
        }
    }
}

/// How a pending device reached the hub.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Via {
    /// The OTA check-in: the device learns its token from its next check-in.
    Ota,
    /// A refused WebSocket: the device must be given its token by hand.
    Websocket,
}

/// A device waiting for approval.
#[derive(Debug, Clone, Serialize)]
pub struct Pending {
    pub device_id: String,
    pub code: String,
    pub challenge: String,
    pub via: Via,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remote: Option<String>,
    /// Unix ms of the first request with this code.
    pub since_ms: u64,
    /// How long the code stays valid, from now.
    pub expires_in_ms: u64,
    #[serde(skip)]
    since: Option<Instant>,
}

/// An approved device, as kept in `admitted.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Admitted {
    pub device_id: String,
    /// The Client-Id seen when it was approved, if any: an OTA check-in with another Client-Id
    /// does not get this device's token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    pub approved_at_ms: u64,
}

/// What `approve` did.
#[derive(Debug, Clone, Serialize)]
pub struct Approval {
    pub device_id: String,
    /// How the device asked, if it did.
    pub via: Option<Via>,
    /// The device's token, for devices that cannot learn it from an OTA check-in (pending over
    /// WebSocket, or approved by Device-Id before it asked).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
}

#[derive(Debug, Serialize, Deserialize)]
struct File {
    version: u32,
    devices: Vec<Admitted>,
}

#[derive(Default)]
struct Book {
    admitted: BTreeMap<String, Admitted>,
    /// Devices that run inside the hub (`serve --demo`): admitted for this run, never written.
    resident: HashSet<String>,
    pending: HashMap<String, Pending>,
}

#[derive(Default)]
struct LogLimit {
    peers: HashMap<IpAddr, (Instant, u64)>,
}

pub struct Admission {
    approve_all: bool,
    shared_tokens: Vec<String>,
    secret: std::sync::Arc<HubSecret>,
    file: Option<PathBuf>,
    book: Mutex<Book>,
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
        return now_ms().wrapping_mul(6_364_136_223_846_793_005);
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

impl Admission {
    /// Loads the hub secret and the approved devices. Fails on an unreadable or malformed
    /// `admitted.json` (say what to do), never silently forgetting approvals.
    /// `shared_tokens` (`MCPDEV_DEVICE_TOKEN`) are accepted for any Device-Id.
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
        let mut book = Book::default();
        if let Some(path) = &file {
            for a in read_file(path)? {
                book.admitted.insert(a.device_id.clone(), a);
            }
        }
        Ok(Self {
            approve_all: config.approve_all,
            shared_tokens: shared_tokens.to_vec(),
            secret: std::sync::Arc::new(secret),
            file,
            book: Mutex::new(book),
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

    /// Where approvals are kept (`None` for an in-memory hub).
    pub fn file(&self) -> Option<&Path> {
        self.file.as_deref()
    }

    /// The hub secret every per-device token comes from (shared with the vision endpoint).
    pub fn secret(&self) -> std::sync::Arc<HubSecret> {
        self.secret.clone()
    }

    /// `device_id`'s own token: its WebSocket bearer token and MQTT password.
    pub fn device_token(&self, device_id: &str) -> String {
        self.secret.token(Purpose::Device, device_id)
    }

    /// Admits a device that runs inside this hub (`serve --demo`) for this run, whatever the
    /// mode, and returns its token.
    pub fn admit_resident(&self, device_id: &str) -> String {
        let id = device_id.to_ascii_lowercase();
        lock(&self.book).resident.insert(id.clone());
        self.device_token(&id)
    }

    /// Whether a device presenting `token` as `device_id` is let in (WebSocket, MQTT).
    /// With `--approve-all`, every device is let in, or with shared tokens configured too, every
    /// device that presents one of them (or its own token).
    pub fn admits(&self, device_id: &str, token: Option<&str>) -> Result<(), Refusal> {
        let token = token.map(str::trim).filter(|t| !t.is_empty());
        if let Some(t) = token
            && self.shared_tokens.iter().any(|s| constant_time_eq(s.as_bytes(), t.as_bytes()))
        {
            return Ok(());
        }
        if self.approve_all {
            let own = token.is_some_and(|t| self.secret.verify(Purpose::Device, &device_id.to_ascii_lowercase(), t));
            return match (self.shared_tokens.is_empty(), own, token) {
                (true, _, _) | (false, true, _) => Ok(()),
                (false, false, None) => Err(Refusal::NoToken { device_id: device_id.to_ascii_lowercase() }),
                (false, false, Some(_)) => Err(Refusal::WrongToken { device_id: device_id.to_ascii_lowercase() }),
            };
        }
        let device_id = device_id.to_ascii_lowercase();
        let known = {
            let book = lock(&self.book);
            book.admitted.contains_key(&device_id) || book.resident.contains(&device_id)
        };
        if !known {
            return Err(Refusal::NotAdmitted { device_id, code: None });
        }
        match token {
            None => Err(Refusal::NoToken { device_id }),
            Some(t) if self.secret.verify(Purpose::Device, &device_id, t) => Ok(()),
            Some(_) => Err(Refusal::WrongToken { device_id }),
        }
    }

    /// The password the hub's own MQTT client uses on the embedded broker (not a device's token:
    /// derived from a name that is not a Device-Id).
    pub fn hub_broker_password(&self) -> String {
        self.secret.token(Purpose::Device, "mcpdev-hub")
    }

    /// An MQTT CONNECT as a device: the Device-Id is the MAC in its client id
    /// (`GID_x@@@aa_bb_cc_dd_ee_ff[@@@uuid]`, or a bare MAC), the password its own token. For the
    /// embedded broker's `authenticate` hook.
    pub fn mqtt_login(&self, client_id: &str, password: &str) -> Result<String, String> {
        let id = client_id.split("@@@").find_map(|part| device_id(part).ok()).ok_or_else(|| format!("client id {client_id:?} names no Device-Id (a MAC)"))?;
        self.admits(&id, Some(password)).map(|()| id).map_err(|r| r.to_string())
    }

    /// The OTA check-in's view: `Some(token)` when this device is admitted (and, if it was
    /// approved with a Client-Id, asks with the same one); `None` when it must activate.
    pub fn token_for_check_in(&self, device_id: &str, client_id: Option<&str>) -> Option<String> {
        if self.approve_all {
            return Some(self.device_token(device_id));
        }
        let book = lock(&self.book);
        let a = book.admitted.get(device_id)?;
        match (&a.client_id, client_id) {
            (Some(kept), Some(asked)) if kept != asked => None,
            (Some(_), None) => None,
            _ => Some(self.device_token(device_id)),
        }
    }

    /// Records (or refreshes) `device_id`'s request for admission and returns it with its code.
    /// The code stays the same until it expires, so a device that asks again shows the same one.
    pub fn request(&self, device_id: &str, via: Via, client_id: Option<&str>, remote: Option<&str>) -> Pending {
        let mut book = lock(&self.book);
        let now = Instant::now();
        book.pending.retain(|_, p| p.since.is_some_and(|s| now.duration_since(s) < CODE_LIFETIME));
        if let Some(p) = book.pending.get_mut(device_id) {
            // An OTA check-in upgrades a WebSocket request (the device will learn its token).
            if via == Via::Ota {
                p.via = Via::Ota;
            }
            if client_id.is_some() {
                p.client_id = client_id.map(str::to_string);
            }
            return with_expiry(p.clone(), now);
        }
        if book.pending.len() >= MAX_PENDING
            && let Some(oldest) = book.pending.values().min_by_key(|p| p.since).map(|p| p.device_id.clone())
        {
            warn!(device = %oldest, "admission: {MAX_PENDING} devices pending; dropping the oldest request");
            book.pending.remove(&oldest);
        }
        let code = loop {
            let c = format!("{:06}", random_u64() % 1_000_000);
            if !book.pending.values().any(|p| p.code == c) {
                break c;
            }
        };
        let p = Pending {
            device_id: device_id.to_string(),
            code,
            challenge: format!("{:016x}{:016x}", random_u64(), random_u64()),
            via,
            client_id: client_id.map(str::to_string),
            remote: remote.map(str::to_string),
            since_ms: now_ms(),
            expires_in_ms: 0,
            since: Some(now),
        };
        book.pending.insert(device_id.to_string(), p.clone());
        drop(book);
        let ip = remote.and_then(|r| r.parse::<std::net::SocketAddr>().ok()).map(|a| a.ip());
        if let Some(suppressed) = self.may_log(ip) {
            warn!(device = %device_id, via = ?via, remote = remote.unwrap_or("-"), suppressed, "a device asks to be admitted: approve it with `mcpdev devices approve {}`", p.code);
        }
        with_expiry(p, now)
    }

    /// The pending request of `device_id`, if it has an unexpired one.
    pub fn pending_of(&self, device_id: &str) -> Option<Pending> {
        let now = Instant::now();
        let book = lock(&self.book);
        book.pending.get(device_id).filter(|p| p.since.is_some_and(|s| now.duration_since(s) < CODE_LIFETIME)).cloned().map(|p| with_expiry(p, now))
    }

    /// Every unexpired pending request, oldest first.
    pub fn pending(&self) -> Vec<Pending> {
        let now = Instant::now();
        let book = lock(&self.book);
        let mut v: Vec<Pending> =
            book.pending.values().filter(|p| p.since.is_some_and(|s| now.duration_since(s) < CODE_LIFETIME)).cloned().map(|p| with_expiry(p, now)).collect();
        v.sort_by_key(|p| p.since_ms);
        v
    }

    /// Every approved device, by Device-Id.
    pub fn admitted(&self) -> Vec<Admitted> {
        lock(&self.book).admitted.values().cloned().collect()
    }

    /// Approves a pending code or a Device-Id, and keeps the approval on disk.
    pub fn approve(&self, code_or_id: &str) -> Result<Approval, String> {
        let wanted = code_or_id.trim();
        let now = Instant::now();
        let mut book = lock(&self.book);
        let pending = if is_code(wanted) {
            let found = book.pending.values().find(|p| p.code == wanted && p.since.is_some_and(|s| now.duration_since(s) < CODE_LIFETIME)).cloned();
            Some(found.ok_or_else(|| {
                format!("no device is waiting with code {wanted} (codes expire after {} minutes): `mcpdev devices pending` lists the waiting ones", CODE_LIFETIME.as_secs() / 60)
            })?)
        } else {
            let id = device_id(wanted).map_err(|_| format!("{wanted:?} is neither a 6-digit activation code nor a Device-Id like aa:bb:cc:dd:ee:ff"))?;
            Some(book.pending.get(&id).cloned().unwrap_or(Pending {
                device_id: id,
                code: String::new(),
                challenge: String::new(),
                via: Via::Websocket,
                client_id: None,
                remote: None,
                since_ms: 0,
                expires_in_ms: 0,
                since: None,
            }))
        };
        let p = pending.expect("set above");
        if !book.admitted.contains_key(&p.device_id) && book.admitted.len() >= MAX_ADMITTED {
            return Err(format!("{MAX_ADMITTED} devices are approved already: revoke some with `mcpdev devices revoke DEVICE-ID`"));
        }
        let asked = p.since.is_some();
        let entry = Admitted { device_id: p.device_id.clone(), client_id: p.client_id.clone(), approved_at_ms: now_ms() };
        let previous = book.admitted.insert(p.device_id.clone(), entry);
        if let Err(e) = self.save(&book) {
            match previous {
                Some(prev) => book.admitted.insert(p.device_id.clone(), prev),
                None => book.admitted.remove(&p.device_id),
            };
            return Err(e);
        }
        book.pending.remove(&p.device_id);
        let token = (p.via == Via::Websocket).then(|| self.device_token(&p.device_id));
        Ok(Approval { device_id: p.device_id, via: asked.then_some(p.via), token })
    }

    /// Withdraws an approval (the caller disconnects the device). `Ok(false)`: it was not approved.
    pub fn revoke(&self, id: &str) -> Result<bool, String> {
        let id = device_id(id).map_err(|_| format!("{id:?} is not a Device-Id like aa:bb:cc:dd:ee:ff"))?;
        let mut book = lock(&self.book);
        book.pending.remove(&id);
        let Some(prev) = book.admitted.remove(&id) else { return Ok(false) };
        if let Err(e) = self.save(&book) {
            book.admitted.insert(id, prev);
            return Err(e);
        }
        Ok(true)
    }

    fn save(&self, book: &Book) -> Result<(), String> {
        let Some(path) = &self.file else { return Ok(()) };
        let file = File { version: 1, devices: book.admitted.values().cloned().collect() };
        let text = serde_json::to_vec_pretty(&file).map_err(|e| e.to_string())?;
        crate::paths::write_private(path, &text).map_err(|e| format!("cannot write {}: {e}", path.display()))
    }

    /// Logs a refusal, at most once per peer address per [`LOG_WINDOW`] (the rest are counted
    /// and the count is given with the next line).
    pub fn log_refusal(&self, remote: Option<IpAddr>, what: &str, refusal: &Refusal) {
        if let Some(suppressed) = self.may_log(remote) {
            let remote = remote.map(|r| r.to_string()).unwrap_or_else(|| "-".into());
            warn!(%remote, suppressed, "{what} refused: {refusal}");
        }
    }

    /// `Some(lines suppressed since the last one)` when a line about `remote` may be logged now.
    fn may_log(&self, remote: Option<IpAddr>) -> Option<u64> {
        let Some(ip) = remote else { return Some(0) };
        let mut log = lock(&self.log);
        let now = Instant::now();
        if log.peers.len() >= MAX_LOG_PEERS && !log.peers.contains_key(&ip) {
            log.peers.retain(|_, (at, _)| now.duration_since(*at) < LOG_WINDOW);
            if log.peers.len() >= MAX_LOG_PEERS {
                log.peers.clear();
            }
        }
        match log.peers.get_mut(&ip) {
            Some((at, n)) if now.duration_since(*at) < LOG_WINDOW => {
                *n += 1;
                None
            }
            Some((at, n)) => {
                *at = now;
                Some(std::mem::take(n))
            }
            None => {
                log.peers.insert(ip, (now, 0));
                Some(0)
            }
        }
    }
}

/// `mcpdev devices revoke`: withdraws the approval and closes the device's session, if it has one.
pub async fn revoke_and_disconnect(hub: &super::Hub, id: &str) -> Result<serde_json::Value, String> {
    let revoked = hub.admission.revoke(id)?;
    let device_id = device_id(id)?;
    let handle = hub.registry.get(&device_id);
    let disconnected = handle.is_some();
    if let Some(h) = handle {
        info!(device = %device_id, "admission revoked: disconnecting the device");
        // A device that does not drain its socket must not hold the CLI up.
        if tokio::time::timeout(Duration::from_secs(5), h.close(crate::links::handle::CloseReason::Revoked)).await.is_err() {
            warn!(device = %device_id, "the revoked device's session did not close within 5 s");
        }
    }
    Ok(serde_json::json!({"device_id": device_id, "revoked": revoked, "disconnected": disconnected}))
}

fn with_expiry(mut p: Pending, now: Instant) -> Pending {
    let age = p.since.map_or(Duration::ZERO, |s| now.duration_since(s));
    p.expires_in_ms = CODE_LIFETIME.saturating_sub(age).as_millis() as u64;
    p
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn read_file(path: &Path) -> anyhow::Result<Vec<Admitted>> {
    let fix = || format!("fix it or remove it (every device must then be approved again): {}", path.display());
    match std::fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Ok(m) if m.len() > MAX_FILE => anyhow::bail!("{} is larger than {MAX_FILE} bytes; {}", path.display(), fix()),
        _ => {}
    }
    let bytes = crate::paths::read_private(path).map_err(|e| anyhow::anyhow!("cannot read the approved devices {}: {e}", path.display()))?;
    let file: File = serde_json::from_slice(&bytes).map_err(|e| anyhow::anyhow!("the approved devices file is not valid ({e}); {}", fix()))?;
    let mut out = Vec::with_capacity(file.devices.len().min(MAX_ADMITTED));
    for mut a in file.devices.into_iter().take(MAX_ADMITTED) {
        a.device_id = device_id(&a.device_id).map_err(|e| anyhow::anyhow!("{e} in {}; {}", path.display(), fix()))?;
        out.push(a);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn on(dir: &Path) -> Admission {
        Admission::load(&AdmissionConfig { state_dir: Some(dir.to_path_buf()), ..Default::default() }, &[]).unwrap()
    }

    const A: &str = "aa:bb:cc:dd:ee:01";
    const B: &str = "aa:bb:cc:dd:ee:02";

    #[test]
    fn only_an_approved_device_with_its_own_token_is_admitted() {
        let dir = tempfile::tempdir().unwrap();
        let adm = on(dir.path());
        let ta = adm.device_token(A);
        assert!(matches!(adm.admits(A, Some(&ta)), Err(Refusal::NotAdmitted { .. })));
        let p = adm.request(A, Via::Ota, Some("uuid-a"), None);
        assert!(is_code(&p.code) && !p.challenge.is_empty());
        assert_eq!(adm.request(A, Via::Ota, Some("uuid-a"), None).code, p.code, "the code is stable while it lives");
        assert_eq!(adm.token_for_check_in(A, Some("uuid-a")), None);
        let ok = adm.approve(&p.code).unwrap();
        assert_eq!((ok.device_id.as_str(), ok.via, ok.token.is_none()), (A, Some(Via::Ota), true));
        assert!(adm.pending().is_empty());
        assert_eq!(adm.admits(A, Some(&ta)), Ok(()));
        assert!(matches!(adm.admits(A, None), Err(Refusal::NoToken { .. })));
        assert!(matches!(adm.admits(A, Some(&adm.device_token(B))), Err(Refusal::WrongToken { .. })));
        assert_eq!(adm.token_for_check_in(A, Some("uuid-a")), Some(ta.clone()));
        assert_eq!(adm.mqtt_login("GID_mcpdev@@@aa_bb_cc_dd_ee_01@@@uuid-a", &ta), Ok(A.to_string()));
        assert!(adm.mqtt_login("GID_mcpdev@@@aa_bb_cc_dd_ee_02", &ta).is_err(), "A's token opens nothing else");
        assert!(adm.mqtt_login("GID_mcpdev@@@aa_bb_cc_dd_ee_01", &adm.hub_broker_password()).is_err());
        assert_eq!(adm.token_for_check_in(A, Some("another")), None, "another Client-Id does not get the token");
        // Kept across a restart, with the same tokens; gone after revoke.
        let again = on(dir.path());
        assert_eq!(again.admits(A, Some(&ta)), Ok(()));
        assert!(again.revoke(A).unwrap());
        assert!(matches!(on(dir.path()).admits(A, Some(&ta)), Err(Refusal::NotAdmitted { .. })));
    }

    #[test]
    fn websocket_requests_get_the_token_on_approval_and_codes_are_checked() {
        let dir = tempfile::tempdir().unwrap();
        let adm = on(dir.path());
        let p = adm.request(B, Via::Websocket, None, Some("127.0.0.1:5"));
        let wrong = if p.code == "000000" { "000001" } else { "000000" };
        assert!(adm.approve(wrong).unwrap_err().contains("no device is waiting"));
        assert!(adm.approve("nonsense").unwrap_err().contains("neither"));
        assert_eq!(adm.approve(B).unwrap().token, Some(adm.device_token(B)));
        assert_eq!(adm.admitted().len(), 1);
    }

    #[test]
    fn pending_is_bounded_and_modes_are_honoured() {
        let adm = Admission::load(&AdmissionConfig::default(), &[]).unwrap();
        for i in 0..MAX_PENDING + 10 {
            let id = format!("02:00:00:00:{:02x}:{:02x}", i / 256, i % 256);
            adm.request(&id, Via::Websocket, None, None);
        }
        assert_eq!(adm.pending().len(), MAX_PENDING);
        assert!(adm.pending_of("02:00:00:00:00:00").is_none(), "the oldest was dropped");
        let shared = Admission::load(&AdmissionConfig::default(), &["s3cret".into()]).unwrap();
        assert_eq!(shared.admits(A, Some("s3cret")), Ok(()));
        let resident = shared.admit_resident(B);
        assert_eq!(shared.admits(B, Some(&resident)), Ok(()), "in-process devices are admitted for this run");
        assert!(shared.admitted().is_empty(), "and not written down");
        assert!(shared.admits(A, Some("other")).is_err());
        let all = Admission::load(&AdmissionConfig { approve_all: true, ..Default::default() }, &[]).unwrap();
        assert_eq!(all.admits(A, None), Ok(()));
        assert!(all.token_for_check_in(A, None).is_some());
    }

    #[test]
    fn a_malformed_file_stops_the_hub_with_advice() {
        let dir = tempfile::tempdir().unwrap();
        crate::paths::write_private(&dir.path().join("admitted.json"), b"{oops").unwrap();
        let err = Admission::load(&AdmissionConfig { state_dir: Some(dir.path().to_path_buf()), ..Default::default() }, &[]).err().unwrap().to_string();
        assert!(err.contains("remove it"), "{err}");
    }
}
