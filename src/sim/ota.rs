//! Bootstrapping like a stock device (reference §0, §3): POST the system info to the OTA URL,
//! then connect over what the answer says — MQTT when it has an `mqtt` section, else the
//! `websocket` URL and token. The answer's shape is checked as the firmware reads it.

use std::time::Duration;

use serde_json::{Value, json};
use tracing::{debug, info, warn};

use super::config::{MqttTarget, SimConfig, Stopped};
use crate::mqtt::conn::BrokerUrl;

/// The system info a device posts (the shape of `Board::GetSystemInfoJson`, §3.1).
pub fn system_info(cfg: &SimConfig) -> Value {
    json!({
        "version": 2,
        "language": "en-US",
        "flash_size": 4_194_304,
        "minimum_free_heap_size": "180000",
        "mac_address": cfg.device_id,
        "uuid": cfg.client_id,
        "chip_model_name": "mcpdev-sim",
        "chip_info": {"model": 0, "cores": 1, "revision": 0, "features": 0},
        "application": {"name": "mcpdev-sim", "version": env!("CARGO_PKG_VERSION"), "compile_time": "", "idf_version": "", "elf_sha256": ""},
        "partition_table": [],
        "ota": {"label": "ota_0"},
        "board": {"type": "mcpdev-sim", "name": "mcpdev-sim", "ssid": "mcpdev-sim", "rssi": -50, "channel": 1, "ip": "127.0.0.1", "mac": cfg.device_id},
    })
}

/// Asks the OTA endpoint until it answers (backing off like the firmware's retries), activates
/// like stock firmware when the answer carries an `activation` block (shows the code, polls
/// `/activate` until approved, then checks in again), and returns the configuration to connect
/// with.
pub async fn bootstrap(mut cfg: SimConfig, url: &str) -> Result<SimConfig, Stopped> {
    let mut answer = check_in_until_answered(&cfg, url).await?;
    while let Some(code) = answer["activation"]["code"].as_str() {
        info!(device = %cfg.device_id, "activation code {code}: approve this device with `mcpdev devices approve {code}`");
        if !activated(&cfg, url, answer["activation"]["challenge"].as_str()).await {
            warn!(device = %cfg.device_id, "the activation request is gone (expired or denied); checking in again");
        }
        answer = check_in_until_answered(&cfg, url).await?;
    }
    match apply(&mut cfg, &answer) {
        Ok(how) => info!(device = %cfg.device_id, "OTA: connecting over {how}"),
        Err(e) => warn!(device = %cfg.device_id, "OTA answer not usable ({e}); keeping {}", cfg.url),
    }
    Ok(cfg)
}

/// Polls `<ota>/activate` every 3 s as the firmware does: `true` once it answers 200, `false` when
/// the request is gone (404, 403) and the device must check in again.
async fn activated(cfg: &SimConfig, url: &str, challenge: Option<&str>) -> bool {
    let activate = format!("{}/activate", url.trim_end_matches('/'));
    let body = challenge.map_or_else(|| "{}".to_string(), |c| json!({"challenge": c}).to_string());
    let Ok(client) = crate::tls::client::reqwest_builder().build() else { return false };
    loop {
        let status = match with_headers(cfg, client.post(&activate)).body(body.clone()).timeout(Duration::from_secs(10)).send().await {
            Ok(r) => r.status().as_u16(),
            Err(e) => {
                debug!(device = %cfg.device_id, "activation poll failed: {e}");
                0
            }
        };
        match status {
            200 => return true,
            403 | 404 => return false,
            _ => tokio::time::sleep(Duration::from_secs(3)).await,
        }
    }
}

/// The stock headers of every OTA request, and the device key when the sim has one.
fn with_headers(cfg: &SimConfig, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
    let request = request
        .header("Activation-Version", "1")
        .header("Device-Id", &cfg.device_id)
        .header("Client-Id", &cfg.client_id)
        .header("User-Agent", concat!("mcpdev-sim/", env!("CARGO_PKG_VERSION")))
        .header("Accept-Language", "en-US")
        .header("Content-Type", "application/json");
    match &cfg.device_key {
        Some(key) => request.header(crate::hub::admission::DEVICE_KEY_HEADER, key),
        None => request,
    }
}

async fn check_in_until_answered(cfg: &SimConfig, url: &str) -> Result<Value, Stopped> {
    let mut wait = Duration::from_secs(1);
    loop {
        match check_version(cfg, url).await {
            Ok(v) => return Ok(v),
            Err(e) => {
                if let Some(stop) = final_refusal(url, &e) {
                    return Err(stop);
                }
                warn!(device = %cfg.device_id, "OTA check-in at {url} failed: {e:#}; retrying in {wait:?}");
            }
        }
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(Duration::from_secs(30));
    }
}

/// An OTA check-in that cannot succeed by trying again: a URL reqwest cannot use, or a 4xx
/// other than 408/429 (the stock firmware retries ten times; a simulator says why at once).
fn final_refusal(url: &str, e: &anyhow::Error) -> Option<Stopped> {
    if let Some(r) = e.downcast_ref::<reqwest::Error>()
        && r.is_builder()
    {
        return Some(Stopped::usage(format!("the OTA URL {url} cannot be used: {r}")));
    }
    let status = e.downcast_ref::<OtaStatus>()?;
    match status.0 {
        401 | 403 => Some(Stopped::auth(format!("the OTA endpoint {url} refused this device: {}", status.1))),
        400..=499 if !matches!(status.0, 408 | 429) => {
            Some(Stopped::usage(format!("the OTA endpoint {url} refused the check-in: {}", status.1)))
        }
        _ => None,
    }
}

/// A non-200 answer to the check-in: status and what the server said.
#[derive(Debug, thiserror::Error)]
#[error("status {0}: {1} (the firmware treats anything but 200 as an error)")]
struct OtaStatus(u16, String);

/// Takes the answer's `mqtt` (preferred) or `websocket` section, as the firmware does.
pub fn apply(cfg: &mut SimConfig, answer: &Value) -> Result<&'static str, String> {
    if let Some(m) = answer.get("mqtt").filter(|m| m.is_object()) {
        let s = |k: &str| m.get(k).and_then(Value::as_str).map(str::to_string).ok_or(format!("mqtt.{k} must be a string"));
        let endpoint = s("endpoint")?;
        // esp_mqtt uses TLS only on port 8883 (reference §2.1); the default port is 8883 too.
        let (host, port) = match endpoint.rsplit_once(':') {
            Some((h, p)) => (h.to_string(), p.parse::<u16>().map_err(|_| format!("mqtt.endpoint {endpoint:?} has a bad port"))?),
            None => (endpoint.clone(), 8883),
        };
        let username = s("username").ok().filter(|u| !u.is_empty());
        let password = s("password").ok().filter(|p| !p.is_empty());
        let broker = BrokerUrl { host, port, tls: port == 8883, username, password };
        let keepalive = m.get("keepalive").and_then(Value::as_u64).unwrap_or(240).min(u64::from(u16::MAX)) as u16;
        cfg.mqtt = Some(MqttTarget {
            broker,
            client_id: s("client_id")?,
            publish_topic: s("publish_topic")?,
            // Stock firmware ignores it and relies on the broker; the simulator subscribes to it.
            subscribe_topic: s("subscribe_topic")?,
            keepalive,
        });
        return Ok("MQTT");
    }
    if let Some(w) = answer.get("websocket").filter(|w| w.is_object()) {
        cfg.url = w.get("url").and_then(Value::as_str).ok_or("websocket.url must be a string")?.to_string();
        if let Some(token) = w.get("token").and_then(Value::as_str).filter(|t| !t.is_empty()) {
            cfg.token = Some(token.to_string());
        }
        return Ok("WebSocket");
    }
    Err("neither an mqtt nor a websocket section".into())
}

/// One `POST` with the stock headers (http:// or https://); the answer's JSON on status 200.
async fn check_version(cfg: &SimConfig, url: &str) -> anyhow::Result<Value> {
    let client = crate::tls::client::reqwest_builder().timeout(Duration::from_secs(10)).build()?;
    let response = with_headers(cfg, client.post(url))
        .body(system_info(cfg).to_string())
        .send()
        .await?;
    let status = response.status();
    if status != reqwest::StatusCode::OK {
        let body = response.text().await.unwrap_or_default();
        let reason = body.trim().chars().take(300).collect::<String>();
        return Err(OtaStatus(status.as_u16(), if reason.is_empty() { status.to_string() } else { reason }).into());
    }
    Ok(serde_json::from_slice(&response.bytes().await?)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mqtt_wins_over_websocket_and_tls_follows_port_8883() {
        let mut cfg = SimConfig::new("ws://old/xiaozhi/v1/", "02:00:00:00:00:01");
        let answer = json!({
            "websocket": {"url": "ws://h:8000/xiaozhi/v1/", "token": "", "version": 1},
            "mqtt": {"endpoint": "broker.lan:8883", "client_id": "c", "username": "", "password": "p",
                     "publish_topic": "up", "subscribe_topic": "down", "keepalive": 240},
        });
        assert_eq!(apply(&mut cfg, &answer), Ok("MQTT"));
        let m = cfg.mqtt.clone().unwrap();
        assert_eq!((m.broker.tls, m.broker.username, m.broker.password.as_deref()), (true, None, Some("p")));
        let mut ws = SimConfig::new("ws://old/xiaozhi/v1/", "02:00:00:00:00:01");
        assert_eq!(apply(&mut ws, &json!({"websocket": {"url": "ws://h:1/xiaozhi/v1/", "token": "t"}})), Ok("WebSocket"));
        assert_eq!((ws.url.as_str(), ws.token.as_deref()), ("ws://h:1/xiaozhi/v1/", Some("t")));
        assert!(apply(&mut ws, &json!({"server_time": {}})).is_err());
    }
}
