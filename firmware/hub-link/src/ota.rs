//! The OTA check-in (reference §3): the device POSTs its system info to an OTA endpoint (the
//! mcpdev hub's `/xiaozhi/ota/`, or any xiaozhi server's) and learns from the answer where to
//! connect: `mqtt{…}` when present (the stock firmware prefers it), else `websocket{url,token}`.
//!
//! An answer with an `activation` block (a hub that has not admitted this device yet) names a
//! code: the device logs it (it has no screen to show it on) and POSTs `<ota_url>activate`
//! every 3 s while the server answers 202 (10 s after any other status), as the stock firmware
//! does; once it answers 200, the device checks in again and gets its own token.
//!
//! Both the check-in and the polls carry the device key ([`crate::DEVICE_KEY_HEADER`]) when the
//! device has one: the hub binds the request to it, and hands the token only to a check-in that
//! shows the same key. The key goes nowhere else (not to the WebSocket, not to the broker). This firmware
//! does not flash what a `firmware` offer names (flash it with `mcpdev flash`); that is logged.

use alloc::string::{String, ToString};
use alloc::vec::Vec;

use embassy_time::{Duration, with_timeout};
use embedded_io_async::{Read, Write};
use log::info;
use provisioning::HubUrl;
use serde_json::Value;

use crate::mqtt::MqttSettings;
use crate::{End, Identity, Timing, http};

/// The largest OTA answer accepted.
const MAX_ANSWER: usize = 4096;

/// Where the OTA endpoint told the device to connect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Directions {
    WebSocket {
        url: String,
        /// The token the answer carries (empty: none).
        token: String,
    },
    Mqtt(MqttSettings),
    /// The server has not admitted this device: activate with this code first.
    Activate(Activation),
}

/// An OTA answer's `activation` block (reference §3.2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Activation {
    /// The code a person approves the device with (shown and spoken by stock devices).
    pub code: String,
    pub challenge: String,
    pub message: String,
}

/// How many activation polls before checking in again (the stock firmware's 10).
pub const ACTIVATION_TRIES: u32 = 10;

/// After an activation POST answered `status`: `None` when the device is activated, else how long
/// to wait before asking again (3 s while pending (202), 10 s after anything else).
pub fn activation_retry(status: u16) -> Option<Duration> {
    match status {
        200 => None,
        202 => Some(Duration::from_secs(3)),
        _ => Some(Duration::from_secs(10)),
    }
}

/// The activation path beside the OTA path: `/xiaozhi/ota/` -> `/xiaozhi/ota/activate`.
pub fn activate_path(ota_path: &str) -> String {
    if ota_path.ends_with('/') { alloc::format!("{ota_path}activate") } else { alloc::format!("{ota_path}/activate") }
}

/// An OTA answer: where to connect, and the server's clock (`server_time.timestamp`, Unix
/// milliseconds; 0 when absent).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub directions: Directions,
    pub server_time_ms: u64,
}

/// Reads an OTA answer. `mqtt` wins over `websocket`, as in the stock firmware; an answer with
/// neither is an error here (the stock firmware would fall back to settings saved earlier, which
/// this firmware does not keep).
pub fn directions(answer: &[u8]) -> Result<Directions, String> {
    read_answer(answer).map(|a| a.directions)
}

/// Reads an OTA answer, with the server's time.
pub fn read_answer(answer: &[u8]) -> Result<Answer, String> {
    // Parsed from a str, the way mcp-device parses, so the chip carries one copy of the parser.
    let answer = core::str::from_utf8(answer).map_err(|_| String::from("the answer is not UTF-8 text"))?;
    let answer: Value = serde_json::from_str(answer).map_err(|_| String::from("the answer is not JSON"))?;
    let server_time_ms = answer.get("server_time").and_then(|t| t.get("timestamp")).and_then(Value::as_u64).unwrap_or(0);
    directions_of(&answer).map(|directions| Answer { directions, server_time_ms })
}

fn directions_of(answer: &Value) -> Result<Directions, String> {
    if let Some(firmware) = answer.get("firmware").and_then(|f| f.get("version")).and_then(Value::as_str) {
        info!("ota: the server offers firmware {firmware}; flash it with `mcpdev flash` (this firmware does not update itself)");
    }
    // As the stock firmware: activation first, while the answer names a code or a challenge.
    if let Some(a) = answer.get("activation").filter(|a| a.get("code").is_some() || a.get("challenge").is_some()) {
        let text = |k: &str| a.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
        return Ok(Directions::Activate(Activation { code: text("code"), challenge: text("challenge"), message: text("message") }));
    }
    if let Some(mqtt) = answer.get("mqtt").filter(|m| m.is_object()) {
        return MqttSettings::from_ota(mqtt).map(Directions::Mqtt);
    }
    if let Some(ws) = answer.get("websocket").filter(|w| w.is_object()) {
        let url = ws.get("url").and_then(Value::as_str).unwrap_or_default();
        HubUrl::parse(url)
            .ok()
            .filter(|u| matches!(u.scheme, provisioning::Scheme::Ws | provisioning::Scheme::Wss))
            .ok_or_else(|| alloc::format!("websocket.url '{url}' is not a ws:// or wss:// URL"))?;
        let token = ws.get("token").and_then(Value::as_str).unwrap_or_default();
        return Ok(Directions::WebSocket { url: url.to_string(), token: token.to_string() });
    }
    Err("the answer has neither an mqtt nor a websocket section".into())
}

/// POSTs `system_info` (the stock body, reference §3.1) to the OTA endpoint over `stream` (`url`
/// names its host and path) with the stock headers, and reads the answer. `http_buf` holds the
/// response headers.
#[allow(clippy::too_many_arguments)]
pub async fn check_in<S: Read + Write>(
    stream: S,
    url: &HubUrl<'_>,
    id: &Identity,
    system_info: &str,
    user_agent: &str,
    timing: &Timing,
    http_buf: &mut [u8],
) -> Result<Answer, End<S::Error>> {
    match post(stream, url, url.path, id, system_info, user_agent, timing, http_buf).await? {
        (200, answer) => read_answer(&answer).map_err(End::Ota),
        (code, _) => Err(End::Rejected(code)),
    }
}

/// POSTs to `<ota_url>activate` (body `{}`: this device has no eFuse serial to sign the challenge
/// with) over `stream` and returns the status: 200 activated, 202 pending.
pub async fn activate<S: Read + Write>(
    stream: S,
    url: &HubUrl<'_>,
    id: &Identity,
    user_agent: &str,
    timing: &Timing,
    http_buf: &mut [u8],
) -> Result<u16, End<S::Error>> {
    let path = activate_path(url.path);
    post(stream, url, &path, id, "{}", user_agent, timing, http_buf).await.map(|(code, _)| code)
}

/// One POST with the stock headers to `path` on the OTA server; the status and (up to
/// [`MAX_ANSWER`] bytes of) the body.
#[allow(clippy::too_many_arguments)]
async fn post<S: Read + Write>(
    mut stream: S,
    url: &HubUrl<'_>,
    path: &str,
    id: &Identity,
    body: &str,
    user_agent: &str,
    timing: &Timing,
    http_buf: &mut [u8],
) -> Result<(u16, Vec<u8>), End<S::Error>> {
    let host = if url.explicit_port { alloc::format!("{}:{}", url.host, url.port) } else { String::from(url.host) };
    let mut headers = alloc::vec![
        ("Host", host.as_str()),
        ("Activation-Version", "1"),
        ("Device-Id", id.device_id.as_str()),
        ("Client-Id", id.client_id.as_str()),
        ("User-Agent", user_agent),
        ("Content-Type", "application/json"),
        ("Connection", "close"),
    ];
    if !id.device_key.is_empty() {
        headers.push((crate::DEVICE_KEY_HEADER, id.device_key.as_str()));
    }
    let answer = with_timeout(timing.connect, async {
        let (head, rest, read) = http::request(&mut stream, "POST", path, &headers, body.as_bytes(), http_buf).await?;
        let mut answer = Vec::new();
        http::read_body(&head, rest, read, &mut stream, &mut answer, MAX_ANSWER).await?;
        Ok::<_, edge_http::io::Error<S::Error>>((head.code, answer))
    })
    .await;
    match answer {
        Ok(Ok(pair)) => Ok(pair),
        Ok(Err(e)) => Err(End::Http(e)),
        Err(_) => Err(End::Timeout("talking to the OTA endpoint")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mqtt_wins_over_websocket() {
        let answer = br#"{"server_time":{"timestamp":1,"timezone_offset":0},
            "websocket":{"url":"ws://hub:8000/xiaozhi/v1/","token":"t","version":1},
            "mqtt":{"endpoint":"hub:1883","client_id":"GID_mcpdev@@@aa_bb_cc_dd_ee_ff","publish_topic":"mcpdev/up/x","subscribe_topic":"mcpdev/down/x"}}"#;
        let Directions::Mqtt(m) = directions(answer).unwrap() else { panic!("mqtt expected") };
        assert_eq!((m.host.as_str(), m.port, m.subscribe_topic.as_str()), ("hub", 1883, "mcpdev/down/x"));
    }

    #[test]
    fn websocket_with_its_token() {
        let answer = br#"{"websocket":{"url":"ws://hub:8000/xiaozhi/v1/","token":"abc","version":1}}"#;
        assert_eq!(
            directions(answer).unwrap(),
            Directions::WebSocket { url: "ws://hub:8000/xiaozhi/v1/".into(), token: "abc".into() }
        );
        let answer = br#"{"websocket":{"url":"ws://hub/","token":""}}"#;
        assert_eq!(directions(answer).unwrap(), Directions::WebSocket { url: "ws://hub/".into(), token: String::new() });
    }

    #[test]
    fn activation_comes_first_and_polls_like_the_stock_firmware() {
        let answer = br#"{"activation":{"message":"approve","code":"123456","challenge":"c1","timeout_ms":600000},
            "websocket":{"url":"ws://hub:8000/xiaozhi/v1/","token":"t"}}"#;
        let Directions::Activate(a) = directions(answer).unwrap() else { panic!("activation expected") };
        assert_eq!((a.code.as_str(), a.challenge.as_str(), a.message.as_str()), ("123456", "c1", "approve"));
        // A challenge alone asks for activation too; an empty block does not.
        assert!(matches!(directions(br#"{"activation":{"challenge":"c"}}"#).unwrap(), Directions::Activate(_)));
        assert!(matches!(directions(br#"{"activation":{},"websocket":{"url":"ws://h/"}}"#).unwrap(), Directions::WebSocket { .. }));
        assert_eq!(activation_retry(200), None);
        assert_eq!(activation_retry(202), Some(Duration::from_secs(3)));
        assert_eq!(activation_retry(404), Some(Duration::from_secs(10)));
        assert_eq!(activate_path("/xiaozhi/ota/"), "/xiaozhi/ota/activate");
        assert_eq!(activate_path("/ota"), "/ota/activate");
    }

    #[test]
    fn unusable_answers_say_why() {
        for (answer, why) in [
            (&b"<html>"[..], "not JSON"),
            (br#"{"server_time":{}}"#, "neither"),
            (br#"{"websocket":{"url":"http://hub/"}}"#, "websocket.url"),
            (br#"{"mqtt":{"endpoint":"hub:1883"}}"#, "client_id"),
        ] {
            let err = directions(answer).unwrap_err();
            assert!(err.contains(why), "{err}");
        }
    }
}
