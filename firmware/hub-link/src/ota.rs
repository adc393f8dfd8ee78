//! The OTA check-in (reference §3): the device POSTs its system info to an OTA endpoint (the
//! mcpdev hub's `/xiaozhi/ota/`, or any xiaozhi server's) and learns from the answer where to
//! connect: `mqtt{…}` when present (the stock firmware prefers it), else `websocket{url,token}`.
//!
//! This firmware does not flash what a `firmware` offer names (flash it with `mcpdev flash`), nor
//! show an `activation` code; both are logged.

use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::net::SocketAddr;

use edge_http::Method;
use edge_http::io::client::Connection;
use edge_nal::TcpConnect;
use embassy_time::with_timeout;
use embedded_io_async::{Read, Write};
use log::{info, warn};
use provisioning::HubUrl;
use serde_json::Value;

use crate::mqtt::MqttSettings;
use crate::{End, Identity, Timing};

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
}

/// Reads an OTA answer. `mqtt` wins over `websocket`, as in the stock firmware; an answer with
/// neither is an error here (the stock firmware would fall back to settings saved earlier, which
/// this firmware does not keep).
pub fn directions(answer: &[u8]) -> Result<Directions, String> {
    // Parsed from a str, the way mcp-device parses, so the chip carries one copy of the parser.
    let answer = core::str::from_utf8(answer).map_err(|_| String::from("the answer is not UTF-8 text"))?;
    let answer: Value = serde_json::from_str(answer).map_err(|_| String::from("the answer is not JSON"))?;
    if let Some(firmware) = answer.get("firmware").and_then(|f| f.get("version")).and_then(Value::as_str) {
        info!("ota: the server offers firmware {firmware}; flash it with `mcpdev flash` (this firmware does not update itself)");
    }
    if let Some(code) = answer.get("activation").and_then(|a| a.get("code")).and_then(Value::as_str) {
        warn!("ota: the server asks for activation with code {code}; this firmware has no screen to show it");
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

/// POSTs `system_info` (the stock body, reference §3.1) to the OTA endpoint at `addr` (`url`
/// names its host and path) with the stock headers, and reads the answer's directions. `http_buf`
/// holds the response headers.
#[allow(clippy::too_many_arguments)]
pub async fn check_in<T: TcpConnect>(
    tcp: &T,
    addr: SocketAddr,
    url: &HubUrl<'_>,
    id: &Identity,
    system_info: &str,
    user_agent: &str,
    timing: &Timing,
    http_buf: &mut [u8],
) -> Result<Directions, End<T::Error>> {
    let host = if url.explicit_port { alloc::format!("{}:{}", url.host, url.port) } else { String::from(url.host) };
    let length = system_info.len().to_string();
    let headers = [
        ("Host", host.as_str()),
        ("Activation-Version", "1"),
        ("Device-Id", id.device_id.as_str()),
        ("Client-Id", id.client_id.as_str()),
        ("User-Agent", user_agent),
        ("Content-Type", "application/json"),
        ("Content-Length", length.as_str()),
        ("Connection", "close"),
    ];
    let mut conn: Connection<'_, T, 16> = Connection::new(http_buf, tcp, addr);
    let answer = with_timeout(timing.connect, async {
        conn.initiate_request(true, Method::Post, url.path, &headers).await?;
        conn.write_all(system_info.as_bytes()).await?;
        conn.initiate_response().await?;
        let code = conn.headers()?.code;
        let mut answer = Vec::new();
        let mut chunk = [0u8; 512];
        loop {
            let n = conn.read(&mut chunk).await?;
            if n == 0 || answer.len() + n > MAX_ANSWER {
                break;
            }
            answer.extend_from_slice(&chunk[..n]);
        }
        Ok::<_, edge_http::io::Error<T::Error>>((code, answer))
    })
    .await;
    let _ = conn.close().await;
    match answer {
        Ok(Ok((200, answer))) => directions(&answer).map_err(End::Ota),
        Ok(Ok((code, _))) => Err(End::Rejected(code)),
        Ok(Err(e)) => Err(End::Http(e)),
        Err(_) => Err(End::Timeout("checking in at the OTA endpoint")),
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
