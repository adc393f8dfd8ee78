//! Per-device broker credentials on Mosquitto, through its dynamic-security plugin
//! (`mosquitto_dynamic_security.so`, managed over `$CONTROL/dynamic-security/v1`).
//!
//! The rules it enforces (tests in `tests/mqtt_dynsec.rs`, listed in `docs/security.md`):
//! - **Only an approved binding has a working login.** For each device a person approved, the
//!   broker holds a client whose username *and* only allowed client id are the device's key
//!   (`GID_mcpdev@@@aa_bb_…`), whose password is that binding's token, and whose one role (named
//!   like the client) lets it publish to `mcpdev/up/<key>` and subscribe to and receive
//!   `mcpdev/down/<key>`, and nothing else (explicit denies below those allows, so a broker whose
//!   default ACL access was opened still keeps devices off the hubs' topics).
//! - **A revocation removes the client** (the broker ends its session at once), **a re-bind
//!   replaces it** (the old session ends, the old password stops working).
//! - **The broker converges, without harm**: at every (re)connect of the admin connection, once
//!   the hub holds the cluster's current approvals (it has applied every admission record the
//!   broker keeps: [`super::admission_sync`]; until then it logs that it waits, and carries out
//!   only the decisions made or imported meanwhile), the hub lists the broker's clients and
//!   creates, replaces or removes every client it manages (usernames that start with
//!   [`MANAGED_PREFIX`]) until they match its approvals, so a hub restart, a broker restart, or a
//!   broker with a fresh dynamic-security file all end in the same state. So a hub that joins a
//!   running cluster never deletes the logins of devices other hubs approved, and one that restarts
//!   with a book older than a revocation never re-creates the revoked login, not for a moment.
//! - **A login the cluster vouches for is kept**: a client's description carries a fingerprint of
//!   its binding's token and a MAC of it with the hub secret, so any hub of the cluster can tell a
//!   login another hub made from a planted one. One this hub has no decision about (a broker that
//!   lost the records) is kept; a planted one, or one whose device this hub knows revoked, goes.
//!   Every hub of a cluster does this for every decision it applies (its own and the ones it
//!   imports), and each change is read back first, so repeating one is a no-op.
//! - Clients it does not manage (the hubs', the admin's) are never touched.
//! - The admin login comes from the environment or a file, never argv, and is never logged. Each
//!   call has a deadline ([`CALL_LIMIT`]); the work queue holds each device once.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use rumqttc::{AsyncClient, QoS};
use serde_json::{Value, json};
use tokio::sync::{Notify, mpsc, oneshot, watch};
use tracing::{info, warn};

use super::conn::{self, BrokerUrl, ConnEvent};
use super::topics;
use crate::hub::Hub;
use crate::hub::secret::{HubSecret, Purpose};

/// Where commands go, and where the broker answers (every admin connection hears every answer).
pub const CONTROL: &str = "$CONTROL/dynamic-security/v1";
pub const RESPONSE: &str = "$CONTROL/dynamic-security/v1/response";
/// The clients (and roles) the hub manages: the devices' keys.
pub const MANAGED_PREFIX: &str = "GID_mcpdev@@@";
/// The admin login (environment only). Without a username the hub's own broker login is used.
pub const ADMIN_USERNAME_ENV: &str = "MCPDEV_MQTT_ADMIN_USERNAME";
pub const ADMIN_PASSWORD_ENV: &str = "MCPDEV_MQTT_ADMIN_PASSWORD";
/// A file holding the admin password (its first line), instead of the environment.
pub const ADMIN_PASSWORD_FILE_ENV: &str = "MCPDEV_MQTT_ADMIN_PASSWORD_FILE";
/// How long the broker has to answer one batch of commands.
pub const CALL_LIMIT: Duration = Duration::from_secs(10);
/// How long a hub waits for the cluster's admission records before it says so in its log (it
/// goes on waiting: reconciling without them could delete logins the cluster approves, or bring
/// back revoked ones).
pub const CAUGHT_UP_WARN: Duration = Duration::from_secs(15);
/// Clients listed per page at reconciliation.
const PAGE: usize = 500;
/// The largest answer read (a page of 500 verbose clients is about 150 KB).
const MAX_PACKET: usize = 4 << 20;

/// The admin login from the environment, or `hub` (the hub's own URL) when none is set.
pub fn admin_url(hub: &BrokerUrl) -> Result<BrokerUrl, String> {
    let username = std::env::var(ADMIN_USERNAME_ENV).ok().filter(|u| !u.is_empty());
    let password = match std::env::var(ADMIN_PASSWORD_FILE_ENV).ok().filter(|f| !f.is_empty()) {
        Some(file) => Some(secret_line(std::path::Path::new(&file)).map_err(|e| format!("{ADMIN_PASSWORD_FILE_ENV}: {e}"))?),
        None => std::env::var(ADMIN_PASSWORD_ENV).ok().filter(|p| !p.is_empty()),
    };
    match (username, password) {
        (None, None) => Ok(hub.clone()),
        (Some(u), Some(p)) => Ok(BrokerUrl { username: Some(u), password: Some(p), ..hub.clone() }),
        _ => Err(format!("set both {ADMIN_USERNAME_ENV} and {ADMIN_PASSWORD_ENV} (or {ADMIN_PASSWORD_FILE_ENV}), or neither to manage devices with the hub's own broker login")),
    }
}

/// The first line of a private file (0600: [`crate::paths::read_private`] refuses others), trimmed.
pub fn secret_line(path: &std::path::Path) -> Result<String, String> {
    let bytes = crate::paths::read_private(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let text = String::from_utf8_lossy(&bytes);
    let line = text.lines().next().unwrap_or_default().trim().to_string();
    if line.is_empty() {
        return Err(format!("{} is empty", path.display()));
    }
    Ok(line)
}

/// What the broker's client for a device must say about the binding: a fingerprint of its token
/// (SHA-256, 16 hex digits), so the hub can tell a current credential from a stale one without
/// reading a password back, and a MAC of the key and fingerprint with the hub secret (16 hex
/// digits), so every hub of the cluster can tell a login a hub made from a planted one. It reveals
/// nothing usable: the token is 128 random-looking bits.
pub fn fingerprint(secret: &HubSecret, key: &str, token: &str) -> String {
    let d = ring::digest::digest(&ring::digest::SHA256, token.as_bytes());
    let hex: String = d.as_ref().iter().take(8).map(|b| format!("{b:02x}")).collect();
    format!("mcpdev binding {hex} {}", vouch(secret, key, &hex))
}

fn vouch(secret: &HubSecret, key: &str, fp: &str) -> String {
    secret.mac(Purpose::ClusterState, format!("dynsec\n{key}\n{fp}").as_bytes())[..16].to_string()
}

/// Whether the broker's client `have` for `key` was made by a hub of this cluster.
pub fn vouched(secret: &HubSecret, key: &str, have: &Value) -> bool {
    let words: Vec<&str> = have["textdescription"].as_str().unwrap_or_default().split(' ').collect();
    matches!(words.as_slice(), ["mcpdev", "binding", fp, mac] if crate::hub::secret::constant_time_eq(vouch(secret, key, fp).as_bytes(), mac.as_bytes()))
}

/// The role of a device's client: its own uplink and downlink, and explicit denies for the rest.
pub fn device_role(key: &str) -> Value {
    let (up, down) = (topics::uplink(key), topics::downlink(key));
    json!({"command": "createRole", "rolename": key, "textname": "mcpdev device", "acls": [
        {"acltype": "publishClientSend", "topic": up, "priority": 10, "allow": true},
        {"acltype": "subscribeLiteral", "topic": down, "priority": 10, "allow": true},
        {"acltype": "publishClientReceive", "topic": down, "priority": 10, "allow": true},
        {"acltype": "publishClientSend", "topic": "#", "priority": 0, "allow": false},
        {"acltype": "subscribePattern", "topic": "#", "priority": 0, "allow": false},
        {"acltype": "publishClientReceive", "topic": "#", "priority": 0, "allow": false},
    ]})
}

/// Whether the broker's client `have` is exactly what `key` with `token` must be.
fn is_current(secret: &HubSecret, have: &Value, key: &str, token: &str) -> bool {
    let roles: Vec<&str> = have["roles"].as_array().map(|r| r.iter().filter_map(|r| r["rolename"].as_str()).collect()).unwrap_or_default();
    have["clientid"] == key && have["textdescription"] == fingerprint(secret, key, token).as_str() && have["disabled"] != true && roles == [key]
}

/// The commands that take the broker from `have` to `want` for `key` (none when it is there).
pub fn changes(secret: &HubSecret, key: &str, want: Option<&str>, have: Option<&Value>) -> Vec<Value> {
    match (want, have) {
        (Some(token), Some(h)) if is_current(secret, h, key, token) => Vec::new(),
        (Some(token), have) => {
            let mut c = Vec::new();
            if have.is_some() {
                // Deleting ends the old binding's session at once.
                c.push(json!({"command": "deleteClient", "username": key}));
            }
            c.push(json!({"command": "deleteRole", "rolename": key}));
            c.push(device_role(key));
            c.push(json!({"command": "createClient", "username": key, "password": token, "clientid": key,
                "textname": "mcpdev device", "textdescription": fingerprint(secret, key, token), "roles": [{"rolename": key}]}));
            c
        }
        (None, Some(_)) => vec![json!({"command": "deleteClient", "username": key}), json!({"command": "deleteRole", "rolename": key})],
        (None, None) => Vec::new(),
    }
}

/// The hub's side: a queue of devices whose credential to bring in line, worked by one task on
/// its own admin connection.
pub struct Dynsec {
    queue: Mutex<Queue>,
    wake: Notify,
}

#[derive(Default)]
struct Queue {
    order: VecDeque<String>,
    queued: HashSet<String>,
    waiters: HashMap<String, Vec<oneshot::Sender<Result<(), String>>>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Dynsec {
    /// Connects as the admin (`admin`, client id `mcpdev-hub-<hub_id>-dynsec`) and reconciles at
    /// every connect once `caught_up` (this hub holds the cluster's approvals).
    pub fn start(hub: Weak<Hub>, admin: &BrokerUrl, hub_id: &str, caught_up: watch::Receiver<bool>) -> Arc<Self> {
        let me = Arc::new(Self { queue: Mutex::default(), wake: Notify::new() });
        let connection = conn::connect(admin.options(&format!("mcpdev-hub-{hub_id}-dynsec"), Duration::from_secs(30), MAX_PACKET), None);
        let admin = Admin { client: connection.client, events: connection.events, prefix: format!("mcpdev-{hub_id}-"), next: 0 };
        tokio::spawn(work(me.clone(), hub, admin, caught_up));
        me
    }

    /// Queues `device_id`; the receiver is told once the broker's credential matches its approval.
    pub fn sync(&self, device_id: &str) -> oneshot::Receiver<Result<(), String>> {
        let (tx, rx) = oneshot::channel();
        let mut q = lock(&self.queue);
        q.waiters.entry(device_id.to_string()).or_default().push(tx);
        if q.queued.insert(device_id.to_string()) {
            q.order.push_back(device_id.to_string());
        }
        drop(q);
        self.wake.notify_one();
        rx
    }

    fn next(&self) -> Option<String> {
        let mut q = lock(&self.queue);
        let id = q.order.pop_front()?;
        q.queued.remove(&id);
        Some(id)
    }

    fn finish(&self, device_id: &str, result: &Result<(), String>) {
        let waiters = lock(&self.queue).waiters.remove(device_id).unwrap_or_default();
        for w in waiters {
            let _ = w.send(result.clone());
        }
    }
}

/// The admin connection: commands out, answers matched by their `correlationData`.
struct Admin {
    client: AsyncClient,
    events: mpsc::Receiver<ConnEvent>,
    prefix: String,
    next: u64,
}

/// Why a call failed: the connection (reconcile after the reconnect) or the broker's answer.
#[derive(Debug)]
enum CallError {
    Lost(String),
    Refused(String),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Lost(why) => {
                write!(f, "the admin connection to the broker was lost ({why})")
            }
            CallError::Refused(why) => {
                write!(f, "the broker's dynamic-security plugin refused: {why}")
            }
        }
    }
}

impl Admin {
    /// Until connected and subscribed to the answers.
    async fn ready(&mut self) -> bool {
        loop {
            match self.events.recv().await {
                Some(ConnEvent::Up) => {
                    if self.client.subscribe(RESPONSE, QoS::AtLeastOnce).await.is_err() {
                        return false;
                    }
                }
                Some(ConnEvent::Subscribed) => return true,
                Some(ConnEvent::Down(why)) => {
                    warn!(%why, "dynamic security: the admin connection to the broker is down; retrying")
                }
                Some(ConnEvent::Message(_)) => {}
                None => return false,
            }
        }
    }

    /// Sends `commands` in one message and returns the broker's answer to each, in order.
    async fn call(&mut self, mut commands: Vec<Value>) -> Result<Vec<Value>, CallError> {
        let mut ids = Vec::with_capacity(commands.len());
        for c in &mut commands {
            self.next += 1;
            let id = format!("{}{}", self.prefix, self.next);
            c["correlationData"] = Value::String(id.clone());
            ids.push(id);
        }
        let body = json!({"commands": commands}).to_string();
        self.client.publish(CONTROL, QoS::AtLeastOnce, false, body).await.map_err(|e| CallError::Lost(e.to_string()))?;
        let mut answers: HashMap<String, Value> = HashMap::new();
        let deadline = tokio::time::Instant::now() + CALL_LIMIT;
        while answers.len() < ids.len() {
            let ev = tokio::time::timeout_at(deadline, self.events.recv())
                .await
                .map_err(|_| CallError::Lost(format!("no answer within {CALL_LIMIT:?}: is the dynamic-security plugin loaded, and may this login publish to {CONTROL}?")))?;
            match ev {
                Some(ConnEvent::Message(p)) if p.topic == RESPONSE => {
                    let v: Value = serde_json::from_slice(&p.payload).unwrap_or(Value::Null);
                    for r in v["responses"].as_array().into_iter().flatten() {
                        if let Some(id) = r["correlationData"].as_str().filter(|id| ids.iter().any(|i| i == id)) {
                            answers.insert(id.to_string(), r.clone());
                        }
                    }
                }
                Some(ConnEvent::Down(why)) => return Err(CallError::Lost(why)),
                Some(ConnEvent::Up) => return Err(CallError::Lost("reconnected".into())),
                Some(_) => {}
                None => return Err(CallError::Lost("the hub is stopping".into())),
            }
        }
        Ok(ids.into_iter().map(|id| answers.remove(&id).unwrap_or(Value::Null)).collect())
    }

    /// Applies `changes`, ignoring the "not found" of deletions (they clean up what may be there).
    async fn apply(&mut self, changes: Vec<Value>) -> Result<(), CallError> {
        if changes.is_empty() {
            return Ok(());
        }
        let answers = self.call(changes).await?;
        for a in answers {
            if let Some(e) = a["error"].as_str()
                && !(a["command"].as_str().is_some_and(|c| c.starts_with("delete")) && e.contains("not found"))
            {
                return Err(CallError::Refused(format!("{}: {e}", a["command"].as_str().unwrap_or("?"))));
            }
        }
        Ok(())
    }

    /// The broker's client `key`, if it has one.
    async fn get(&mut self, key: &str) -> Result<Option<Value>, CallError> {
        let a = self.call(vec![json!({"command": "getClient", "username": key})]).await?.remove(0);
        match a["error"].as_str() {
            Some(e) if e.contains("not found") => Ok(None),
            Some(e) => Err(CallError::Refused(format!("getClient: {e}"))),
            None => Ok(Some(a["data"]["client"].clone())),
        }
    }

    /// Every client the hub manages, by username.
    async fn managed(&mut self) -> Result<HashMap<String, Value>, CallError> {
        let mut all = HashMap::new();
        let mut offset = 0usize;
        loop {
            let a = self.call(vec![json!({"command": "listClients", "verbose": true, "count": PAGE, "offset": offset})]).await?.remove(0);
            if let Some(e) = a["error"].as_str() {
                return Err(CallError::Refused(format!("listClients: {e}")));
            }
            let page = a["data"]["clients"].as_array().cloned().unwrap_or_default();
            let total = a["data"]["totalCount"].as_u64().unwrap_or(0) as usize;
            offset += page.len();
            for c in page {
                if let Some(name) = c["username"].as_str().filter(|u| u.starts_with(MANAGED_PREFIX)) {
                    all.insert(name.to_string(), c.clone());
                }
            }
            if offset >= total || a["data"]["clients"].as_array().is_none_or(Vec::is_empty) {
                return Ok(all);
            }
        }
    }
}

/// The device's key, and its approved binding's token if it has one.
fn wanted(hub: &Hub, device_id: &str) -> Option<(String, Option<String>)> {
    Some((topics::key_for(device_id).ok()?, hub.admission.broker_login(device_id)))
}

/// What reconciling did: logins made or replaced, removed, and kept (vouched for by the cluster,
/// about devices this hub has no decision on).
#[derive(Debug, Default)]
struct Reconciled {
    made: usize,
    removed: usize,
    kept: usize,
}

/// Brings every managed client in line with the approvals (see the module's rules).
async fn reconcile(admin: &mut Admin, hub: &Weak<Hub>) -> Result<Reconciled, CallError> {
    let mut have = admin.managed().await?;
    let Some(hub) = hub.upgrade() else {
        return Ok(Reconciled::default());
    };
    let want: Vec<(String, String)> = hub.admission.broker_logins().into_iter().filter_map(|(id, t)| Some((topics::key_for(&id).ok()?, t))).collect();
    let decided: HashSet<String> = hub.admission.decided().iter().filter_map(|id| topics::key_for(id).ok()).collect();
    let secret = hub.secret.clone();
    drop(hub);
    let mut done = Reconciled::default();
    for (key, token) in want {
        let h = have.remove(&key);
        let c = changes(&secret, &key, Some(&token), h.as_ref());
        done.made += usize::from(!c.is_empty());
        admin.apply(c).await?;
    }
    for (key, h) in have {
        // Approved by a hub of the cluster, and this hub knows nothing against it.
        if !decided.contains(&key) && vouched(&secret, &key, &h) {
            done.kept += 1;
            continue;
        }
        done.removed += 1;
        admin.apply(changes(&secret, &key, None, Some(&h))).await?;
    }
    Ok(done)
}

/// What the log says once a device's broker login is as its approval wants: it matches an
/// approval, or it was deleted (or never was) because the device is not approved.
fn settled(approved: bool, had_login: bool) -> &'static str {
    match (approved, had_login) {
        (true, _) => "dynamic security: the device's broker login matches its approval",
        (false, true) => "dynamic security: the device's broker login was deleted (the device is not approved)",
        (false, false) => "dynamic security: the device has no broker login (it is not approved)",
    }
}

async fn work(me: Arc<Dynsec>, hub: Weak<Hub>, mut admin: Admin, mut caught_up: watch::Receiver<bool>) {
    'connection: loop {
        if !admin.ready().await {
            return;
        }
        let mut reconciled = false;
        let warn_at = tokio::time::Instant::now() + CAUGHT_UP_WARN;
        let mut warned = false;
        if !*caught_up.borrow() {
            info!("dynamic security: waiting until this hub holds the cluster's admission records before reconciling the broker's device logins");
        }
        loop {
            if !reconciled && *caught_up.borrow() {
                reconciled = true;
                match reconcile(&mut admin, &hub).await {
                    Ok(r) => info!(made = r.made, removed = r.removed, kept = r.kept, "dynamic security: the broker's device logins match the approvals"),
                    Err(e) => {
                        warn!("dynamic security: cannot reconcile the broker's device logins: {e}");
                        if let CallError::Lost(_) = e {
                            continue 'connection;
                        }
                    }
                }
            }
            let Some(id) = me.next() else {
                // Idle: keep reading the connection (every admin hears every answer), until work.
                tokio::select! {
                    _ = me.wake.notified() => continue,
                    r = caught_up.changed(), if !reconciled => {
                        if r.is_err() {
                            return;
                        }
                        continue;
                    }
                    () = tokio::time::sleep_until(warn_at), if !reconciled && !warned => {
                        warned = true;
                        warn!("dynamic security: this hub has not received the cluster's admission records within {CAUGHT_UP_WARN:?} (is its broker connection up?); the broker's device logins are not reconciled until it has, so none is deleted or brought back on an old list");
                        continue;
                    }
                    ev = admin.events.recv() => match ev {
                        Some(ConnEvent::Down(why)) => {
                            warn!(%why, "dynamic security: the admin connection to the broker is down; retrying");
                            continue 'connection;
                        }
                        None => return,
                        Some(_) => continue,
                    },
                }
            };
            let Some(h) = hub.upgrade() else { return };
            let Some((key, want)) = wanted(&h, &id) else {
                me.finish(&id, &Err(format!("{id} is not a Device-Id")));
                continue;
            };
            drop(h);
            let Some(secret) = hub.upgrade().map(|h| h.secret.clone()) else { return };
            let result = async {
                let have = admin.get(&key).await?;
                admin.apply(changes(&secret, &key, want.as_deref(), have.as_ref())).await.map(|()| have.is_some())
            }
            .await;
            match &result {
                Ok(had) => info!(device = %id, key, "{}", settled(want.is_some(), *had)),
                Err(e) => warn!(device = %id, "dynamic security: {e}"),
            }
            me.finish(&id, &result.as_ref().map(|_| ()).map_err(ToString::to_string));
            if let Err(CallError::Lost(_)) = result {
                // The reconnect reconciles everything, this device included.
                continue 'connection;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    /// Issue 45.8: a deleted login is said to be deleted, never to match an approval.
    #[test]
    fn a_deleted_login_is_said_deleted() {
        assert!(super::settled(true, false).contains("matches its approval"));
        for had in [true, false] {
            let line = super::settled(false, had);
            assert!(!line.contains("matches") && line.contains("not approved"), "{line}");
        }
        assert!(super::settled(false, true).contains("deleted"));
    }

    use super::*;

    const KEY: &str = "GID_mcpdev@@@aa_bb_cc_dd_ee_01";

    #[test]
    fn a_current_client_needs_no_change_and_anything_else_is_replaced_or_removed() {
        let s = HubSecret::from_bytes(&[7; 32]);
        let create = changes(&s, KEY, Some("t1"), None);
        assert_eq!(create.iter().map(|c| c["command"].as_str().unwrap()).collect::<Vec<_>>(), ["deleteRole", "createRole", "createClient"]);
        let client = &create[2];
        assert_eq!((client["username"].as_str(), client["clientid"].as_str(), client["password"].as_str()), (Some(KEY), Some(KEY), Some("t1")));
        let have = json!({"username": KEY, "clientid": KEY, "textdescription": fingerprint(&s, KEY, "t1"), "roles": [{"rolename": KEY}]});
        assert!(changes(&s, KEY, Some("t1"), Some(&have)).is_empty(), "repeating a sync is a no-op");
        let rebind = changes(&s, KEY, Some("t2"), Some(&have));
        assert_eq!(rebind[0]["command"], "deleteClient", "a new binding replaces the client, ending its session");
        for tampered in [json!({"clientid": "other"}), json!({"disabled": true}), json!({"roles": []})] {
            let mut h = have.clone();
            h.as_object_mut().unwrap().extend(tampered.as_object().unwrap().clone());
            assert!(!changes(&s, KEY, Some("t1"), Some(&h)).is_empty(), "{h}");
        }
        assert_eq!(changes(&s, KEY, None, Some(&have))[0]["command"], "deleteClient");
        assert!(changes(&s, KEY, None, None).is_empty());
        assert!(!fingerprint(&s, KEY, "t1").contains("t1") && fingerprint(&s, KEY, "t1") != fingerprint(&s, KEY, "t2"));
    }

    /// A login made by a hub of this cluster is recognised by every hub of it, and by no other:
    /// a planted one, one moved to another device, or one of another cluster is not.
    #[test]
    fn a_login_the_cluster_made_is_vouched_for_and_a_planted_one_is_not() {
        let (s, other) = (HubSecret::from_bytes(&[7; 32]), HubSecret::from_bytes(&[8; 32]));
        let made = json!({"textdescription": fingerprint(&s, KEY, "t1")});
        assert!(vouched(&s, KEY, &made) && vouched(&HubSecret::from_bytes(&[7; 32]), KEY, &made));
        assert!(!vouched(&other, KEY, &made), "another cluster's");
        assert!(!vouched(&s, "GID_mcpdev@@@aa_bb_cc_dd_ee_02", &made), "moved to another device");
        for planted in [json!({}), json!({"textdescription": "mcpdev binding 0011223344556677"}), json!({"textdescription": "mcpdev binding 0011223344556677 0011223344556677"})] {
            assert!(!vouched(&s, KEY, &planted), "{planted}");
        }
    }

    #[test]
    fn the_admin_password_file_must_be_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("admin.pw");
        crate::paths::write_private(&file, b"s3cret-admin\nignored\n").unwrap();
        assert_eq!(secret_line(&file).as_deref(), Ok("s3cret-admin"));
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = secret_line(&file).unwrap_err();
        assert!(e.contains("chmod 600") && !e.contains("s3cret"), "{e}");
        crate::paths::write_private(&file, b"\n").unwrap();
        assert!(secret_line(&file).unwrap_err().contains("empty"));
    }

    #[test]
    fn a_device_role_allows_its_own_two_topics_only() {
        let role = device_role(KEY);
        let acls = role["acls"].as_array().unwrap();
        let allowed: Vec<&str> = acls.iter().filter(|a| a["allow"] == true).map(|a| a["topic"].as_str().unwrap()).collect();
        assert_eq!(allowed, [format!("mcpdev/up/{KEY}"), format!("mcpdev/down/{KEY}"), format!("mcpdev/down/{KEY}")]);
        assert!(acls.iter().filter(|a| a["allow"] == false).all(|a| a["topic"] == "#" && a["priority"] == 0));
    }
}
