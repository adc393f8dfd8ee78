//! The OTA endpoint as a pass-through to the devices' own upstream OTA (`serve --upstream-ota`).
//!
//! Rules it enforces:
//! - The check-in goes to the upstream with the device's own body and headers (only
//!   [`FORWARDED`]: its identity, firmware and language, nothing of the hub's), and the answer
//!   comes back unchanged except [`rewrite`]: `websocket.url` points at this hub, and an `mqtt`
//!   block is removed (the relay speaks WebSocket; with no `websocket` block, one is added with
//!   an empty token). Activation codes, `server_time` and firmware offers are the upstream's.
//!   `POST …/activate` passes through the same way, unchanged.
//! - The hub's own admission still sees each check-in: it opens (or refreshes) the device's
//!   request, bound to its Device-Id and Client-Id, rate-limited per address (429), and keeps the
//!   system info of an approved binding only ([`super::admission`]).
//! - The upstream request ends within [`DEADLINE`], its answer is read up to [`MAX_ANSWER`]
//!   bytes, and a redirect is never followed: each of these is a 502 to the device that says
//!   why, logged (rate-limited) and counted (`mcpdev_refusals_total{reason="upstream"}`).

use std::sync::OnceLock;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, Response, StatusCode, header};
use serde_json::{Value, json};
use tracing::warn;

use crate::links::upgrade::plain;

/// The longest an upstream OTA request may take, answer included.
pub const DEADLINE: Duration = Duration::from_secs(10);
/// The largest upstream answer passed on.
pub const MAX_ANSWER: usize = 256 * 1024;
/// The device's headers the upstream OTA gets.
pub const FORWARDED: [&str; 8] = ["device-id", "client-id", "user-agent", "accept-language", "activation-version", "content-type", "authorization", "serial-number"];

/// One client for every pass-through: verified with the process's trust, no redirects, a deadline.
fn client() -> Result<&'static reqwest::Client, String> {
    static CLIENT: OnceLock<Result<reqwest::Client, String>> = OnceLock::new();
    CLIENT
        .get_or_init(|| crate::tls::client::reqwest_builder().redirect(reqwest::redirect::Policy::none()).timeout(DEADLINE).build().map_err(|e| format!("the upstream OTA client: {e}")))
        .as_ref()
        .map_err(Clone::clone)
}

/// The upstream's answer, rewritten for a device relayed through `hub_ws_url`.
pub fn rewrite(answer: &mut Value, hub_ws_url: &str) {
    let Some(fields) = answer.as_object_mut() else { return };
    let had_mqtt = fields.remove("mqtt").is_some();
    match fields.get_mut("websocket").and_then(Value::as_object_mut) {
        Some(ws) => {
            ws.insert("url".into(), Value::from(hub_ws_url));
        }
        None if had_mqtt => {
            fields.insert("websocket".into(), json!({"url": hub_ws_url, "token": "", "version": 1}));
        }
        None => {}
    }
}

/// `POST /xiaozhi/ota/`, passed to `upstream` (after the hub's admission saw it); the answer
/// rewritten for a device relayed through `hub_ws_url`.
pub async fn check_in(headers: &HeaderMap, body: Bytes, upstream: &reqwest::Url, hub_ws_url: &str, device_id: &str) -> Response<Body> {
    let (status, content_type, answer) = match forward(upstream, headers, body).await {
        Ok(a) => a,
        Err(why) => return refused(device_id, &why),
    };
    let body = match serde_json::from_slice::<Value>(&answer) {
        Ok(mut v) if status.is_success() => {
            rewrite(&mut v, hub_ws_url);
            Bytes::from(v.to_string())
        }
        _ => answer,
    };
    answer_with(status, content_type, body)
}

/// `POST /xiaozhi/ota/activate`, passed to the upstream's `activate` beside its OTA URL.
pub async fn activate(headers: HeaderMap, body: Bytes, upstream: &reqwest::Url) -> Response<Body> {
    let device = headers.get("device-id").and_then(|v| v.to_str().ok()).and_then(|d| crate::wire::identity::parse_mac(d).ok()).map_or_else(|| "-".to_string(), |m| crate::wire::identity::format_mac(&m));
    let target = match upstream.join("activate") {
        Ok(t) => t,
        Err(e) => return refused(&device, &format!("the upstream activation URL: {e}")),
    };
    match forward(&target, &headers, body).await {
        Ok((status, content_type, answer)) => answer_with(status, content_type, answer),
        Err(why) => refused(&device, &why),
    }
}

fn answer_with(status: StatusCode, content_type: Option<String>, body: Bytes) -> Response<Body> {
    let mut answer = Response::builder().status(status);
    if let Some(ct) = content_type {
        answer = answer.header(header::CONTENT_TYPE, ct);
    }
    answer.body(Body::from(body)).unwrap_or_else(|_| plain(StatusCode::BAD_GATEWAY, "the upstream's answer could not be passed on"))
}

/// A 502 saying why, logged and counted.
fn refused(device: &str, why: &str) -> Response<Body> {
    crate::metrics::refused(crate::metrics::Refused::Upstream);
    if crate::metrics::log_limit::allow(crate::metrics::log_limit::Kind::Refusal, device) {
        warn!(device, "OTA pass-through failed: {why}");
    }
    plain(StatusCode::BAD_GATEWAY, why)
}

/// POSTs `body` with the device's forwarded headers; the status, content type and body (at most
/// [`MAX_ANSWER`] bytes), or why not.
async fn forward(url: &reqwest::Url, headers: &HeaderMap, body: Bytes) -> Result<(StatusCode, Option<String>, Bytes), String> {
    let host = url.host_str().unwrap_or("-").to_string();
    let mut request = client()?.post(url.clone()).body(body);
    for name in FORWARDED {
        if let Some(v) = headers.get(name) {
            request = request.header(name, v.clone());
        }
    }
    let mut response = request.send().await.map_err(|e| format!("the upstream OTA {host} did not answer: {}", without_url(&e)))?;
    let status = StatusCode::from_u16(response.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
    if status.is_redirection() {
        return Err(format!("the upstream OTA {host} answered with a redirect ({status}), which the hub does not follow: set --upstream-ota to the URL it redirects to"));
    }
    let content_type = response.headers().get(header::CONTENT_TYPE.as_str()).and_then(|v| v.to_str().ok()).map(str::to_string);
    let mut read = Vec::new();
    while let Some(chunk) = tokio::time::timeout(DEADLINE, response.chunk()).await.map_err(|_| format!("the upstream OTA {host} did not finish its answer within {} s", DEADLINE.as_secs()))?.map_err(|e| format!("the upstream OTA {host}: {}", without_url(&e)))? {
        if read.len() + chunk.len() > MAX_ANSWER {
            return Err(format!("the upstream OTA {host} answered with more than {MAX_ANSWER} bytes; not passed on"));
        }
        read.extend_from_slice(&chunk);
    }
    Ok((status, content_type, Bytes::from(read)))
}

/// A reqwest error without its URL (which may carry a query).
fn without_url(e: &reqwest::Error) -> String {
    let mut e = std::error::Error::source(e).map(|s| s.to_string()).unwrap_or_else(|| e.to_string());
    e.truncate(300);
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_websocket_url_changes_and_mqtt_becomes_websocket() {
        let mut answer = json!({"server_time": {"timestamp": 1, "timezone_offset": 480}, "firmware": {"version": "2.0.0", "url": "https://up/fw.bin"},
            "activation": {"code": "123456", "message": "x", "challenge": "c"}, "websocket": {"url": "wss://up/xiaozhi/v1/", "token": "their-token", "version": 3}});
        let mut expected = answer.clone();
        rewrite(&mut answer, "ws://hub:8000/xiaozhi/v1/");
        expected["websocket"]["url"] = json!("ws://hub:8000/xiaozhi/v1/");
        assert_eq!(answer, expected);
        let mut mqtt_only = json!({"server_time": {"timestamp": 1}, "mqtt": {"endpoint": "mqtt.up:8883", "password": "p"}});
        rewrite(&mut mqtt_only, "ws://hub:8000/xiaozhi/v1/");
        assert_eq!(mqtt_only, json!({"server_time": {"timestamp": 1}, "websocket": {"url": "ws://hub:8000/xiaozhi/v1/", "token": "", "version": 1}}));
    }
}
