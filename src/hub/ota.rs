//! Device bootstrap: the OTA endpoint a stock device POSTs to at boot (reference §3).
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
//! (`message`, a 6-digit `code`, `challenge`, `timeout_ms`) instead of any credentials; the stock
//! firmware shows and speaks the code and polls `POST /xiaozhi/ota/activate`, which answers 202
//! while the request is pending and 200 once a person ran `mcpdev devices approve CODE`. The next
//! check-in then carries `websocket.token` (and the MQTT password): the device's own token.

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
use super::admission::{Pending, Via};
use super::devices::DevicePeer;
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
    /// The `mqtt` block for an admitted device: endpoint, its client id and login, its topics.
    fn ota_settings(&self, device_id: &str, host: &str, device_token: &str) -> Value;
    /// The device checked in: onboard it over MQTT without waiting for its hello.
    fn probe(&self, device_id: &str);
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
    let h = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let system_info: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => return plain(StatusCode::BAD_REQUEST, &format!("the body is not the device's system info JSON: {e}")),
    };
    let uuid = system_info.get("uuid").and_then(Value::as_str);
    if let Err(e) = check_fields([("Device-Id", h("device-id")), ("Client-Id", h("client-id")), ("uuid", uuid)]) {
        super::devices::log_identity_refusal(remote, "OTA check-in", &e);
        return plain(StatusCode::BAD_REQUEST, &e.to_string());
    }
    let raw_id = h("device-id").or_else(|| system_info.get("mac_address").and_then(Value::as_str));
    let Some(mac) = raw_id.and_then(|id| parse_mac(id).ok()) else {
        warn!(%remote, "OTA request without a usable Device-Id");
        return plain(StatusCode::BAD_REQUEST, "send the Device-Id header (the MAC, aa:bb:cc:dd:ee:ff)");
    };
    let device_id = format_mac(&mac);
    let client_id = h("client-id").or_else(|| system_info.get("uuid").and_then(Value::as_str)).map(|c| c.chars().take(64).collect());
    let ota = &hub.config.ota;
    // From configuration or the hub's own address this request came in on: never the Host header.
    let name = hub.public_name(peer.local.map(|a| a.ip()));
    let base = format!("{name}:{}", hub.device_port);
    let (websocket, mqtt, activation) = match hub.admission.token_for_check_in(&device_id, client_id.as_deref()) {
        // Admitted: the device's own token, never a configured shared one (which would open every device).
        Some(token) => {
            let websocket = json!({"url": format!("ws://{base}{DEVICE_PATH}"), "token": token, "version": 1});
            (Some(websocket), hub.mqtt.get().map(|m| m.ota_settings(&device_id, &name, &token)), None)
        }
        // Not admitted: a code to approve, and nothing to connect with.
        None => {
            let p = hub.admission.request(&device_id, Via::Ota, client_id.as_deref(), Some(&remote.to_string()));
            (None, None, Some(activation_block(&p)))
        }
    };
    let firmware = ota.firmware.as_ref().map(|(_, version)| json!({"version": version, "url": format!("http://{base}{FIRMWARE_PATH}"), "force": 0}));
    hub.registry.ota.record(&device_id, OtaRecord { system_info, client_id, bytes: body.len() });
    if let Some(m) = hub.mqtt.get()
        && activation.is_none()
    {
        m.probe(&device_id);
    }
    let now_ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
    info!(device = %device_id, %remote, user_agent = h("user-agent").unwrap_or("-"), mqtt = mqtt.is_some(), activation = activation.is_some(), "OTA check-in");
    let mut body = response(now_ms, ota.timezone_offset, websocket, mqtt, firmware);
    if let Some(a) = activation {
        body["activation"] = a;
    }
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body.to_string()))
        .expect("static response")
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

/// `POST /xiaozhi/ota/activate`: 200 once the device is approved, 202 while its request is
/// pending (the stock firmware asks again after 3 s), 404 when it has none (it checks in again).
async fn activate(State(hub): State<Arc<Hub>>, ConnectInfo(remote): ConnectInfo<std::net::SocketAddr>, headers: HeaderMap, body: Bytes) -> Response<Body> {
    let h = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let Some(device_id) = h("device-id").and_then(|id| parse_mac(id).ok()).map(|m| format_mac(&m)) else {
        warn!(%remote, "activation request without a usable Device-Id");
        return plain(StatusCode::BAD_REQUEST, "send the Device-Id header (the MAC, aa:bb:cc:dd:ee:ff)");
    };
    if hub.admission.token_for_check_in(&device_id, h("client-id")).is_some() {
        info!(device = %device_id, %remote, "activation: approved");
        return plain(StatusCode::OK, "success");
    }
    let Some(p) = hub.admission.pending_of(&device_id) else {
        return plain(StatusCode::NOT_FOUND, &format!("no activation is pending for device {device_id}: check in at {OTA_PATH} for a code"));
    };
    // The stock body is `{}`, or carries the challenge it was given: it must be this request's.
    let sent = serde_json::from_slice::<Value>(&body).ok().and_then(|v| v.get("challenge").and_then(Value::as_str).map(str::to_string));
    if sent.is_some_and(|c| c != p.challenge) {
        warn!(device = %device_id, %remote, "activation request with another request's challenge");
        return plain(StatusCode::FORBIDDEN, "this challenge is not the one this device was given: check in again for a new code");
    }
    plain(StatusCode::ACCEPTED, &format!("pending: approve this device with `mcpdev devices approve {}`", p.code))
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
