//! Device bootstrap: the OTA endpoint a stock device POSTs to at boot (reference §3).
//!
//! With `--upstream-ota`, check-ins and `/activate` pass through to the devices' own upstream
//! OTA instead ([`super::ota_upstream`]).
//!
//! `POST /xiaozhi/ota/` answers with `server_time`, `websocket{url,token,version}`, `mqtt{…}` when
//! the hub runs MQTT (the device then prefers it), and `firmware{version,url,force}` when
//! `serve --firmware` offers one (the binary is served here too). Every URL is built from
//! `--public-host` or the hub's own address the request came in on, never from its `Host` header,
//! and the only token in the answer is the device's own ([`super::secret::Purpose::Device`]),
//! never a configured shared one. The body is capped ([`MAX_BODY`], 413 beyond); the system info
//! in it is kept by Device-Id in a store capped in entries and bytes ([`OtaBook`]) and shown by
//! `mcpdev hello`.
//!
//! Activation ([`super::admission`]): a device that is not admitted gets an `activation` block
//! (`message`, a 6-digit `code`, `challenge`, `timeout_ms`) for a request bound to it (Device-Id,
//! Client-Id, `Mcpdev-Device-Key` if sent, address), and beside it the connection settings with a
//! token bound to that request, which the hub refuses until that very code is approved. The stock
//! firmware shows and speaks the code and polls `POST /xiaozhi/ota/activate` (202 while pending,
//! 200 once a person ran `mcpdev devices approve CODE`), then checks in again; py-xiaozhi checks in
//! once and connects with the first answer's settings. Only the approved binding's check-ins get
//! its token and have their system info kept as the device's own; new requests per address are
//! rate-limited (429 with `Retry-After`).

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{ConnectInfo, DefaultBodyLimit, State};
use axum::http::{HeaderMap, Response, StatusCode, header};
use axum::routing::{get, post};
use serde_json::{Value, json};
use tracing::{info, warn};

use super::Hub;
use super::admission::{Activation, CheckIn, DEVICE_KEY_HEADER, Pending, Requester, Via, key_hash};
use super::listener::DevicePeer;
use crate::links::upgrade::plain;
use crate::wire::identity::{check_fields, format_mac, parse_mac};

/// The device WebSocket path (served by `devices`); here because the OTA answer points to it and
/// `devices` mounts these routes, so the dependency runs one way: devices -> ota.
pub const DEVICE_PATH: &str = "/xiaozhi/v1/";
pub const OTA_PATH: &str = "/xiaozhi/ota/";
pub const ACTIVATE_PATH: &str = "/xiaozhi/ota/activate";
pub const FIRMWARE_PATH: &str = "/xiaozhi/ota/firmware.bin";
/// The largest check-in body read (the stock system info is about 1.5 KB).
pub const MAX_BODY: usize = 64 * 1024;
/// Check-ins kept, and their bytes (the oldest are forgotten first).
pub const MAX_RECORDS: usize = 4096;
pub const MAX_RECORD_BYTES: usize = 16 * 1024 * 1024;

/// What the OTA answer needs from the hub's MQTT side, when it runs one (`serve --mqtt`, which
/// lives above the hub and sets [`Hub::mqtt`](super::Hub::mqtt)).
pub trait MqttOffer: Send + Sync {
    /// The `mqtt` block: endpoint, the device's client id and login, its topics. `device_token`
    /// is the approved binding's token when `admitted`, else a token bound to the check-in's own
    /// request: no broker accepts it until that request is approved, and a request nobody
    /// approved never gets any other credential (a shared login goes to approved bindings only).
    fn ota_settings(&self, device_id: &str, host: &str, device_token: &str, admitted: bool) -> Value;
    /// The device's approval changed (approved, re-bound, revoked, here or on another hub): bring
    /// the broker's per-device credential in line. `None` when the broker's logins are not the
    /// hub's to manage; else a receiver told once the broker has it.
    fn admission_changed(&self, device_id: &str) -> Option<tokio::sync::oneshot::Receiver<Result<(), String>>>;
    /// The device checked in: onboard it over MQTT without waiting for its hello.
    fn probe(&self, device_id: &str);
    /// The device was revoked: close its broker connection and drop its link. Whether a broker
    /// connection was closed (whether it had a link here, the registry says).
    fn cut_off(&self, device_id: &str) -> bool;
}

/// How the OTA endpoint answers.
#[derive(Debug, Clone, Default)]
pub struct OtaSettings {
    /// A firmware image to offer, and its version (dotted integers, compared by the device).
    pub firmware: Option<(PathBuf, String)>,
    /// `server_time.timezone_offset`, in minutes east of UTC.
    pub timezone_offset: i32,
    /// The name devices reach this machine by; default: the Host the device used.
    pub public_host: Option<String>,
}

/// What a device posted at its last check-in. Nothing here goes into a URL or an answer to
/// another device.
#[derive(Debug, Clone)]
pub struct OtaRecord {
    pub system_info: Value,
    pub client_id: Option<String>,
    /// The size of the body it came from (what the store counts).
    pub bytes: usize,
}

/// Check-ins by Device-Id, capped in entries and bytes; the oldest check-in is forgotten first.
#[derive(Debug)]
pub struct OtaBook {
    inner: Mutex<Book>,
    max_records: usize,
    max_bytes: usize,
}

#[derive(Debug, Default)]
struct Book {
    records: HashMap<String, (u64, OtaRecord)>,
    /// Check-in order: sequence number to Device-Id.
    order: BTreeMap<u64, String>,
    next: u64,
    bytes: usize,
}

impl Default for OtaBook {
    fn default() -> Self {
        Self::with_caps(MAX_RECORDS, MAX_RECORD_BYTES)
    }
}

impl OtaBook {
    pub fn with_caps(max_records: usize, max_bytes: usize) -> Self {
        Self { inner: Mutex::default(), max_records: max_records.max(1), max_bytes }
    }

    fn book(&self) -> std::sync::MutexGuard<'_, Book> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn record(&self, device_id: &str, r: OtaRecord) {
        let mut b = self.book();
        if let Some((seq, old)) = b.records.remove(device_id) {
            b.order.remove(&seq);
            b.bytes -= old.bytes;
        }
        while b.records.len() >= self.max_records || (b.bytes + r.bytes > self.max_bytes && !b.records.is_empty()) {
            let Some((_, oldest)) = b.order.pop_first() else { break };
            if let Some((_, gone)) = b.records.remove(&oldest) {
                b.bytes -= gone.bytes;
            }
        }
        let seq = b.next;
        b.next += 1;
        b.bytes += r.bytes;
        b.order.insert(seq, device_id.to_string());
        b.records.insert(device_id.to_string(), (seq, r));
    }

    pub fn get(&self, device_id: &str) -> Option<OtaRecord> {
        self.book().records.get(device_id).map(|(_, r)| r.clone())
    }

    pub fn system_info(&self, device_id: &str) -> Option<Value> {
        self.get(device_id).map(|r| r.system_info)
    }

    /// Check-ins kept, and the bytes they count for.
    pub fn usage(&self) -> (usize, usize) {
        let b = self.book();
        (b.records.len(), b.bytes)
    }
}

pub fn routes() -> Router<Arc<Hub>> {
    Router::new()
        .route(OTA_PATH, post(check_version).get(about).layer(DefaultBodyLimit::max(MAX_BODY)))
        .route("/xiaozhi/ota", post(check_version).get(about).layer(DefaultBodyLimit::max(MAX_BODY)))
        .route(ACTIVATE_PATH, post(activate))
        .route(FIRMWARE_PATH, get(firmware))
}

/// The OTA answer (reference §3.2); every section but `server_time` optional.
pub fn response(now_ms: u64, timezone_offset: i32, websocket: Option<Value>, mqtt: Option<Value>, firmware: Option<Value>) -> Value {
    let mut r = json!({"server_time": {"timestamp": now_ms, "timezone_offset": timezone_offset}});
    for (k, v) in [("firmware", firmware), ("websocket", websocket), ("mqtt", mqtt)] {
        if let Some(v) = v {
            r[k] = v;
        }
    }
    r
}

async fn check_version(State(hub): State<Arc<Hub>>, ConnectInfo(peer): ConnectInfo<DevicePeer>, headers: HeaderMap, body: Bytes) -> Response<Body> {
    let remote = peer.remote;
    let CheckInRequest { device_id, client_id, key_hash, system_info, reported } = match read_check_in(&|name| headers.get(name).and_then(|v| v.to_str().ok()), &body) {
        Ok(r) => r,
        Err(e) => {
            warn!(%remote, "OTA check-in refused: {e}");
            return plain(StatusCode::BAD_REQUEST, &e);
        }
    };
    let ota = &hub.config.ota;
    // From configuration or the hub's own address this request came in on: never the Host header.
    let name = hub.public_name(peer.local.map(|a| a.ip()));
    let base = format!("{name}:{}", hub.device_port);
    let requester = Requester { device_id: &device_id, via: Via::Ota, client_id: client_id.as_deref(), key_hash, remote: Some(remote), reported: Some(reported) };
    let check_in = match hub.admission.check_in(&requester) {
        Ok(c) => c,
        Err(busy) => {
            return Response::builder()
                .status(StatusCode::TOO_MANY_REQUESTS)
                .header(header::RETRY_AFTER, busy.retry_after_s().unwrap_or(1))
                .header(header::CONTENT_TYPE, "text/plain; charset=utf-8")
                .body(Body::from(format!("{busy}\n")))
                .expect("static response");
        }
    };
    // Every answer carries settings to connect with: the approved binding's token, or a token
    // bound to this requester's own request, which the hub refuses until that request's code is
    // approved (py-xiaozhi checks in once and then connects with what this first answer gave it).
    let (token, activation, admitted) = match &check_in {
        CheckIn::Admitted { token } => (token.clone(), None, true),
        CheckIn::Pending { pending, token } => (token.clone(), Some(activation_block(pending)), false),
    };
    // With TLS on, every URL handed out is wss:// or https:// (the device listener serves nothing else).
    let websocket = json!({"url": format!("{}://{base}{DEVICE_PATH}", hub.ws_scheme()), "token": token, "version": 1});
    let mqtt = hub.mqtt.get().map(|m| m.ota_settings(&device_id, &name, &token, admitted));
    let firmware = ota.firmware.as_ref().map(|(_, version)| json!({"version": version, "url": format!("{}://{base}{FIRMWARE_PATH}", hub.http_scheme()), "force": 0}));
    // Only the approved binding's report becomes the device's own (what `hello` shows); anyone
    // else's stays with its request.
    if admitted {
        hub.registry.ota.record(&device_id, OtaRecord { system_info, client_id, bytes: body.len() });
        if let Some(m) = hub.mqtt.get() {
            m.probe(&device_id);
        }
    }
    // Relayed devices get their upstream's answer; the hub's admission above still saw the
    // check-in (its request and code, its rate limit, an approved binding's record).
    if let Some(upstream) = hub.config.upstream.as_ref().and_then(|u| u.ota.clone()) {
        let hub_ws_url = format!("{}://{base}{DEVICE_PATH}", hub.ws_scheme());
        let code = activation.as_ref().and_then(|a| a["code"].as_str());
        info!(device = %device_id, %remote, admission_code = code.unwrap_or("-"), "OTA check-in passed to the upstream");
        return super::ota_upstream::check_in(&headers, body, &upstream, &hub_ws_url, &device_id).await;
    }
    let now_ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
    info!(device = %device_id, %remote, mqtt = mqtt.is_some(), activation = activation.is_some(), "OTA check-in");
    let mut body = response(now_ms, ota.timezone_offset, Some(websocket), mqtt, firmware);
    if let Some(a) = activation {
        body["activation"] = a;
    }
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body.to_string()))
        .expect("static response")
}

/// What an OTA check-in says, read from its headers and body (no I/O: the admission fuzz target
/// drives it with arbitrary input).
#[derive(Debug)]
pub struct CheckInRequest {
    /// The canonical MAC (`Device-Id`, else the body's `mac_address`).
    pub device_id: String,
    /// `Client-Id`, else the body's `uuid`; at most 64 characters.
    pub client_id: Option<String>,
    /// The hash of `Mcpdev-Device-Key`, when sent.
    pub key_hash: Option<String>,
    pub system_info: Value,
    /// Board, chip and firmware as reported, each capped (see [`reported`]).
    pub reported: Value,
}

/// Reads a check-in, or says what is wrong with it.
pub fn read_check_in<'a>(header: &dyn Fn(&str) -> Option<&'a str>, body: &[u8]) -> Result<CheckInRequest, String> {
    let system_info: Value = serde_json::from_slice(body).map_err(|e| format!("the body is not the device's system info JSON: {e}"))?;
    // Control characters in identity fields are refused at the door (they would reach terminals).
    let uuid = system_info.get("uuid").and_then(Value::as_str);
    check_fields([("Device-Id", header("device-id")), ("Client-Id", header("client-id")), ("uuid", uuid)]).map_err(|e| e.to_string())?;
    let raw_id = header("device-id").or_else(|| system_info.get("mac_address").and_then(Value::as_str));
    let mac = raw_id.and_then(|id| parse_mac(id).ok()).ok_or("send the Device-Id header (the MAC, aa:bb:cc:dd:ee:ff)")?;
    let client_id: Option<String> = header("client-id").or_else(|| system_info.get("uuid").and_then(Value::as_str)).map(|c| c.chars().take(64).collect());
    let key_hash = device_key(header)?;
    let reported = reported(&system_info, header("user-agent"));
    Ok(CheckInRequest { device_id: format_mac(&mac), client_id, key_hash, system_info, reported })
}

/// The hash of the device key a client sent (`Mcpdev-Device-Key`), or why it is not usable.
fn device_key<'a>(header: &dyn Fn(&str) -> Option<&'a str>) -> Result<Option<String>, String> {
    header(DEVICE_KEY_HEADER).map(key_hash).transpose()
}

/// What an unauthenticated check-in says about itself, for the person approving: board, chip and
/// firmware, each capped; kept with its request, never as the device's own record.
fn reported(system_info: &Value, user_agent: Option<&str>) -> Value {
    let s = |v: &Value| v.as_str().map(|t| t.chars().take(64).collect::<String>());
    let mut r = serde_json::Map::new();
    for (k, v) in [
        ("board", s(&system_info["board"]["type"]).or_else(|| s(&system_info["board"]["name"]))),
        ("chip", s(&system_info["chip_model_name"])),
        ("firmware", s(&system_info["application"]["version"]).map(|v| format!("{} {v}", s(&system_info["application"]["name"]).unwrap_or_default()).trim().to_string())),
        ("user_agent", user_agent.map(|u| u.chars().take(64).collect())),
    ] {
        if let Some(v) = v.filter(|v| !v.is_empty()) {
            r.insert(k.into(), Value::String(v));
        }
    }
    Value::Object(r)
}

/// The `activation` block for a pending device (reference §3.2; both `code` and `challenge`, or
/// the stock firmware gives up at once).
pub fn activation_block(p: &Pending) -> Value {
    json!({
        "message": format!("mcpdev: approve this device with `mcpdev devices approve {}`", p.code),
        "code": p.code,
        "challenge": p.challenge,
        "timeout_ms": p.expires_in_ms,
    })
}

/// `POST /xiaozhi/ota/activate`: 200 once this requester's request was approved, 202 while it is
/// pending (the stock firmware asks again after 3 s), 403 for another request's challenge, 404 when
/// it has none (it checks in again). The requester is its Device-Id, Client-Id and device key: an
/// impostor's poll never sees the victim's approval.
async fn activate(State(hub): State<Arc<Hub>>, ConnectInfo(remote): ConnectInfo<std::net::SocketAddr>, headers: HeaderMap, body: Bytes) -> Response<Body> {
    if let Some(upstream) = hub.config.upstream.as_ref().and_then(|u| u.ota.clone()) {
        return super::ota_upstream::activate(headers, body, &upstream).await;
    }
    let h = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let Some(device_id) = h("device-id").and_then(|id| parse_mac(id).ok()).map(|m| format_mac(&m)) else {
        warn!(%remote, "activation request without a usable Device-Id");
        return plain(StatusCode::BAD_REQUEST, "send the Device-Id header (the MAC, aa:bb:cc:dd:ee:ff)");
    };
    let key_hash = match device_key(&h) {
        Ok(k) => k,
        Err(e) => return plain(StatusCode::BAD_REQUEST, &e),
    };
    let client_id: Option<String> = h("client-id").map(|c| c.chars().take(64).collect());
    // The stock body is `{}`, or carries the challenge it was given.
    let sent = serde_json::from_slice::<Value>(&body).ok().and_then(|v| v.get("challenge").and_then(Value::as_str).map(str::to_string));
    match hub.admission.activation(&device_id, client_id.as_deref(), key_hash.as_deref(), sent.as_deref()) {
        Activation::Approved => {
            info!(device = %device_id, %remote, "activation: approved");
            plain(StatusCode::OK, "success")
        }
        Activation::Waiting(code) => plain(StatusCode::ACCEPTED, &format!("pending: approve this device with `mcpdev devices approve {code}`")),
        Activation::WrongChallenge => {
            warn!(device = %device_id, %remote, "activation request with another request's challenge");
            plain(StatusCode::FORBIDDEN, "this challenge is not the one this device was given: check in again for a new code")
        }
        Activation::Unknown => plain(StatusCode::NOT_FOUND, &format!("no activation is pending for device {device_id}: check in at {OTA_PATH} for a code")),
    }
}

async fn about() -> Response<Body> {
    plain(StatusCode::OK, "mcpdev OTA endpoint: devices POST their system info here and learn where to connect (websocket or mqtt).")
}

async fn firmware(State(hub): State<Arc<Hub>>) -> Response<Body> {
    let Some((path, _)) = &hub.config.ota.firmware else {
        return plain(StatusCode::NOT_FOUND, "this hub offers no firmware (serve --firmware FILE --firmware-version V)");
    };
    match tokio::fs::read(path).await {
        Ok(bytes) => Response::builder()
            .status(StatusCode::OK)
            .header(header::CONTENT_TYPE, "application/octet-stream")
            .header(header::CONTENT_LENGTH, bytes.len())
            .body(Body::from(bytes))
            .expect("static response"),
        Err(e) => plain(StatusCode::INTERNAL_SERVER_ERROR, &format!("cannot read the firmware {}: {e}", path.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn response_shape() {
        let r = response(1_754_611_200_000, 480, Some(json!({"url":"ws://h:1/xiaozhi/v1/","token":"","version":1})), None, None);
        assert_eq!(r["server_time"], json!({"timestamp": 1_754_611_200_000u64, "timezone_offset": 480}));
        assert!(r.get("mqtt").is_none() && r.get("firmware").is_none() && r.get("activation").is_none());
    }

    #[test]
    fn the_book_stays_within_its_caps_oldest_first() {
        let book = OtaBook::with_caps(10, 5_000);
        let rec = |bytes| OtaRecord { system_info: json!({}), client_id: None, bytes };
        for i in 0..1000 {
            book.record(&format!("aa:bb:cc:dd:{:02x}:{:02x}", i / 256, i % 256), rec(100));
        }
        assert_eq!(book.usage(), (10, 1000), "a flood of check-ins leaves the entry cap");
        assert!(book.get("aa:bb:cc:dd:03:e7").is_some() && book.get("aa:bb:cc:dd:03:dd").is_none(), "the newest stay, the oldest go");
        for i in 0..100 {
            book.record(&format!("aa:bb:cc:dd:ee:{i:02x}"), rec(1_900));
        }
        let (n, bytes) = book.usage();
        assert!(bytes <= 5_000 && n == 2, "{n} records, {bytes} bytes");
        // A device checking in again replaces its record, and is counted once.
        book.record("aa:bb:cc:dd:ee:63", rec(10));
        assert_eq!(book.usage(), (2, 1_910));
    }
}
