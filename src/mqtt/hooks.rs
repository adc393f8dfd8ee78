//! The HTTP authentication and authorization hooks EMQX 5 calls, so that EMQX asks the hub who
//! may connect and what each client may publish or subscribe to (`serve --mqtt-hooks ADDR`).
//!
//! The rules it enforces (tests in `tests/mqtt_hooks.rs`, listed in `docs/security.md`):
//! - **Only EMQX is heard**: every request must carry the shared secret
//!   (`MCPDEV_MQTT_HOOK_SECRET`, or a 0600 file named by `MCPDEV_MQTT_HOOK_SECRET_FILE`) in the
//!   [`SECRET_HEADER`] header, compared in constant time **before any of the body is read**;
//!   anything else gets 401 and is logged (rate-limited), and its connection closes. The listener
//!   binds loopback unless told otherwise, holds at most [`crate::hub::conn_cap::HOOKS_CONNECTIONS`]
//!   connections (half of them from one address; beyond, closed at once, counted and logged:
//!   [`crate::hub::conn_cap`]), reads headers within the hub's header deadline and at most
//!   [`MAX_BODY`] bytes of body within [`BODY_DEADLINE`], and answers at most [`MAX_IN_FLIGHT`]
//!   requests at once (503 beyond, which EMQX treats as `ignore`).
//! - **A device logs in as itself only**: its client id is its key (`GID_mcpdev@@@aa_bb_…`), its
//!   username the same, and its password the token of its current approval (or a shared
//!   `MCPDEV_DEVICE_TOKEN`, an explicit opt-in). Anything else is `deny`; a revoked device is
//!   denied from the moment the hub knows.
//! - **A device may publish to `mcpdev/up/<its client id>` and subscribe to
//!   `mcpdev/down/<its client id>`, nothing else**; a device that is no longer admitted may do
//!   neither.
//! - **Hubs** log in as `mcpdev-hub…` with the password every hub of the cluster derives from the
//!   shared hub secret ([`crate::hub::admission::Admission::hub_broker_password`]); only they may
//!   publish under `mcpdev/` (never as a device, on `mcpdev/up/…`) and subscribe to the hubs'
//!   topics (presence, claims, index, rpc, admission, forwarded messages) and to their cluster's
//!   share group of uplinks; never to a device's downlink or to plain uplinks. Never superuser.
//! - The answers are EMQX 5's: `200 {"result": "allow"|"deny", "is_superuser": false}`.

use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, Weak};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{ConnectInfo, DefaultBodyLimit, Request, State};
use axum::http::{HeaderMap, Response, StatusCode, header};
use axum::routing::post;
use serde_json::{Value, json};
use tokio::sync::Semaphore;
use tracing::{info, warn};

use super::topics;
use crate::hub::Hub;
use crate::hub::admission::refusal::LogLimit;

pub const SECRET_ENV: &str = "MCPDEV_MQTT_HOOK_SECRET";
pub const SECRET_FILE_ENV: &str = "MCPDEV_MQTT_HOOK_SECRET_FILE";
/// The header EMQX sends the secret in (set in its `headers` block).
pub const SECRET_HEADER: &str = "x-mcpdev-hook-secret";
pub const AUTHN_PATH: &str = "/mqtt/authn";
pub const AUTHZ_PATH: &str = "/mqtt/authz";
/// Usernames of hubs' broker logins.
pub const HUB_USERNAME_PREFIX: &str = "mcpdev-hub";
/// The largest request read (EMQX's are a few hundred bytes).
pub const MAX_BODY: usize = 4096;
/// Requests answered at once.
pub const MAX_IN_FLIGHT: usize = 256;
/// How long a hook request's body may take once its headers (and the secret) are in: EMQX sends
/// a few hundred bytes at once, and gives up on a hook after its own `request_timeout` (5 s).
pub const BODY_DEADLINE: std::time::Duration = std::time::Duration::from_secs(5);
/// A secret shorter than this is refused at start-up.
const MIN_SECRET: usize = 16;

/// The hook secret from the environment (or its file), or why there is none usable.
pub fn secret_from_env() -> Result<String, String> {
    let secret = match std::env::var(SECRET_FILE_ENV).ok().filter(|f| !f.is_empty()) {
        Some(file) => super::dynsec::secret_line(std::path::Path::new(&file)).map_err(|e| format!("{SECRET_FILE_ENV}: {e}"))?,
        None => std::env::var(SECRET_ENV).unwrap_or_default().trim().to_string(),
    };
    if secret.len() < MIN_SECRET {
        return Err(format!(
            "--mqtt-hooks needs a secret of at least {MIN_SECRET} characters in {SECRET_ENV} (or a 0600 file named by {SECRET_FILE_ENV}); EMQX sends it in the {SECRET_HEADER} header"
        ));
    }
    Ok(secret)
}

/// What a hook decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Allow,
    /// Denied, and why (for the log).
    Deny(String),
}

impl Decision {
    fn body(&self) -> Value {
        match self {
            Decision::Allow => json!({"result": "allow", "is_superuser": false}),
            Decision::Deny(_) => json!({"result": "deny", "is_superuser": false}),
        }
    }
}

fn field<'a>(req: &'a Value, name: &str) -> &'a str {
    req.get(name).and_then(Value::as_str).unwrap_or_default()
}

/// The Device-Id of a device client: its client id is its key and its username the same.
fn device_of(clientid: &str, username: &str) -> Result<String, String> {
    let id = topics::device_id_of(clientid).ok_or_else(|| format!("client id {clientid:?} is neither a hub's nor a device's (GID_mcpdev@@@aa_bb_cc_dd_ee_ff)"))?;
    if topics::key_for(&id).ok().as_deref() != Some(clientid) {
        return Err(format!("client id {clientid:?} is not a device key (GID_mcpdev@@@aa_bb_cc_dd_ee_ff)"));
    }
    if username != clientid {
        return Err(format!("a device's username must be its client id {clientid:?}"));
    }
    Ok(id)
}

fn is_hub(username: &str) -> bool {
    username.starts_with(HUB_USERNAME_PREFIX)
}

/// The authentication hook: a hub by the cluster's hub password, a device by its own token.
pub fn authenticate(hub: &Hub, req: &Value) -> Decision {
    let (clientid, username, password) = (field(req, "clientid"), field(req, "username"), field(req, "password"));
    if is_hub(username) {
        let ok = crate::hub::admission::constant_time_eq(password.as_bytes(), hub.admission.hub_broker_password().as_bytes());
        return if ok { Decision::Allow } else { Decision::Deny(format!("hub login {username:?} with a wrong password")) };
    }
    match device_of(clientid, username) {
        Ok(id) => match hub.admission.admits(&id, Some(password)) {
            Ok(()) => Decision::Allow,
            Err(refusal) => Decision::Deny(refusal.to_string()),
        },
        Err(e) => Decision::Deny(e),
    }
}

/// The authorization hook: devices their own two topics while admitted, hubs the cluster's.
pub fn authorize(hub: &Hub, group: &str, req: &Value) -> Decision {
    let (clientid, username, topic, action) = (field(req, "clientid"), field(req, "username"), field(req, "topic"), field(req, "action"));
    if is_hub(username) {
        // A hub reads its cluster's topics and uplinks through its cluster's share group only
        // (never a device's downlink, where hosts' call arguments go, nor another cluster's
        // group), and never publishes as a device.
        let ok = match action {
            "subscribe" => topic == topics::shared_uplinks(group) || (hub_filter(topic) && HUB_READS.iter().any(|p| topic.starts_with(p))),
            "publish" => hub_filter(topic) && !topic.starts_with(topics::UP),
            _ => false,
        };
        return if ok { Decision::Allow } else { Decision::Deny(format!("hub {username:?} may not {action} {topic:?}")) };
    }
    let id = match device_of(clientid, username) {
        Ok(id) => id,
        Err(e) => return Decision::Deny(e),
    };
    if !hub.admission.may_serve(&id) {
        return Decision::Deny(format!("{id} is not admitted"));
    }
    match action {
        "publish" if topic == topics::uplink(clientid) => Decision::Allow,
        "subscribe" if topic == topics::downlink(clientid) => Decision::Allow,
        _ => Decision::Deny(format!("device {clientid} may not {action} {topic:?}: only its own uplink and downlink")),
    }
}

/// The filters hubs subscribe to (presence, claims, forwarded messages, indexes, rpc, admission).
/// What a hub subscribes to beside its share group: the hubs' own topics.
const HUB_READS: [&str; 6] = [topics::HUBS, topics::CLAIMS, topics::FWD, topics::INDEX, topics::RPC, topics::ADMISSION];

fn hub_filter(topic: &str) -> bool {
    let Some(rest) = topic.strip_prefix("mcpdev/") else {
        return false;
    };
    // Wildcards only as whole trailing levels (`mcpdev/claims/+`, `mcpdev/fwd/<hub>/+`, `…/#`).
    let levels: Vec<&str> = rest.split('/').collect();
    levels.iter().enumerate().all(|(i, l)| !l.contains(['+', '#']) || *l == "+" || (*l == "#" && i == levels.len() - 1))
}

struct Hooks {
    hub: Weak<Hub>,
    secret: String,
    group: String,
    in_flight: Semaphore,
    log: Mutex<LogLimit>,
}

impl Hooks {
    fn log(&self, peer: &str, what: &str, why: &str) {
        let ip = peer.parse::<IpAddr>().ok();
        if let Some(suppressed) = self.log.lock().unwrap_or_else(std::sync::PoisonError::into_inner).may_log(ip) {
            warn!(peer, suppressed, "MQTT hook: {what} denied: {why}");
        }
    }
}

/// Binds `addr` and serves the hooks there (in the background); the address bound.
pub async fn serve(hub: Arc<Hub>, addr: SocketAddr, secret: String, group: String) -> anyhow::Result<SocketAddr> {
    let listener = crate::hub::listener::bind(addr, 1024).map_err(|e| anyhow::anyhow!("cannot bind the MQTT hooks listener {addr}: {e}"))?;
    let bound = listener.local_addr()?;
    if !bound.ip().is_loopback() {
        warn!(%bound, "the MQTT hooks listen beyond loopback: only requests carrying the hook secret are answered; keep it on a network only EMQX reaches");
    }
    let limits = hub.config.limits;
    let hooks = Arc::new(Hooks { hub: Arc::downgrade(&hub), secret, group, in_flight: Semaphore::new(MAX_IN_FLIGHT), log: Mutex::default() });
    let app = Router::new().route(AUTHN_PATH, post(authn)).route(AUTHZ_PATH, post(authz)).layer(DefaultBodyLimit::max(MAX_BODY)).with_state(hooks);
    let side = crate::hub::listener::Side::Capped(crate::hub::conn_cap::ConnCap::hooks());
    tokio::spawn(crate::hub::listener::serve(listener, app, side, limits, "MQTT hooks", None));
    info!(%bound, "MQTT hooks for EMQX: {AUTHN_PATH}, {AUTHZ_PATH}");
    Ok(bound)
}

async fn authn(State(hooks): State<Arc<Hooks>>, ConnectInfo(caller): ConnectInfo<SocketAddr>, request: Request) -> Response<Body> {
    answer(&hooks, caller, request, "login", authenticate).await
}

async fn authz(State(hooks): State<Arc<Hooks>>, ConnectInfo(caller): ConnectInfo<SocketAddr>, request: Request) -> Response<Body> {
    let group = hooks.group.clone();
    answer(&hooks, caller, request, "access", move |hub, req| authorize(hub, &group, req)).await
}

/// The secret first, from the headers alone; then the body, bounded in size and time; then the
/// decision.
async fn answer(hooks: &Hooks, caller: SocketAddr, request: Request, what: &str, decide: impl FnOnce(&Hub, &Value) -> Decision) -> Response<Body> {
    if !has_secret(request.headers(), &hooks.secret) {
        hooks.log(&caller.ip().to_string(), what, &format!("a request without the hook secret ({SECRET_HEADER})"));
        // Its body is never read: the connection closes with this answer.
        return reply(StatusCode::UNAUTHORIZED, json!({"error": format!("send the hook secret in the {SECRET_HEADER} header")}));
    }
    let Ok(_permit) = hooks.in_flight.try_acquire() else {
        return reply(StatusCode::SERVICE_UNAVAILABLE, json!({"error": "busy"}));
    };
    let announced = request.headers().get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<usize>().ok());
    if announced.is_some_and(|n| n > MAX_BODY) {
        return reply(StatusCode::PAYLOAD_TOO_LARGE, json!({"error": format!("a body over {MAX_BODY} bytes")}));
    }
    let body: Bytes = match tokio::time::timeout(BODY_DEADLINE, axum::body::to_bytes(request.into_body(), MAX_BODY)).await {
        Ok(Ok(body)) => body,
        Ok(Err(e)) => {
            let over = std::iter::successors(Some(&e as &dyn std::error::Error), |e| e.source()).any(|e| e.to_string().contains("length limit"));
            let status = if over { StatusCode::PAYLOAD_TOO_LARGE } else { StatusCode::BAD_REQUEST };
            return reply(status, json!({"error": format!("the body could not be read, or is over {MAX_BODY} bytes: {e}")}));
        }
        Err(_) => {
            hooks.log(&caller.ip().to_string(), what, &format!("a body that did not arrive within {BODY_DEADLINE:?}"));
            return reply(StatusCode::REQUEST_TIMEOUT, json!({"error": format!("the body did not arrive within {BODY_DEADLINE:?}")}));
        }
    };
    let req: Value = match serde_json::from_slice(&body) {
        Ok(v @ Value::Object(_)) => v,
        _ => {
            return reply(StatusCode::BAD_REQUEST, json!({"error": "the body must be a JSON object (EMQX: content-type application/json)"}));
        }
    };
    let Some(hub) = hooks.hub.upgrade() else {
        return reply(StatusCode::SERVICE_UNAVAILABLE, json!({"error": "the hub is stopping"}));
    };
    let decision = decide(&hub, &req);
    if let Decision::Deny(why) = &decision {
        hooks.log(field(&req, "peerhost"), &format!("{what} of {:?}", field(&req, "clientid")), why);
    }
    reply(StatusCode::OK, decision.body())
}

fn has_secret(headers: &HeaderMap, secret: &str) -> bool {
    let sent = headers.get(SECRET_HEADER).map(|v| v.as_bytes()).unwrap_or_default();
    crate::hub::admission::constant_time_eq(sent, secret.as_bytes())
}

fn reply(status: StatusCode, body: Value) -> Response<Body> {
    Response::builder().status(status).header(header::CONTENT_TYPE, "application/json").body(Body::from(body.to_string())).expect("static response")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hub_filters_are_the_clusters_topics_only() {
        for ok in ["mcpdev/claims/+", "mcpdev/hubs/+", "mcpdev/fwd/abc/+", "mcpdev/rpc/abc/#", "mcpdev/admission/+"] {
            assert!(hub_filter(ok), "{ok}");
        }
        for bad in ["#", "$SYS/#", "mcpdev/a#", "mcpdev/#/x", "other/+"] {
            assert!(!hub_filter(bad), "{bad}");
        }
    }

    #[test]
    fn a_device_is_its_key_with_the_same_username() {
        let key = "GID_mcpdev@@@aa_bb_cc_dd_ee_01";
        assert_eq!(device_of(key, key).as_deref(), Ok("aa:bb:cc:dd:ee:01"));
        assert!(device_of(key, "someone").is_err());
        assert!(device_of("GID_x@@@aa_bb_cc_dd_ee_01", "GID_x@@@aa_bb_cc_dd_ee_01").is_err(), "only the canonical key");
        assert!(device_of("mosquitto_sub-1", "mosquitto_sub-1").is_err());
    }
}
