//! `initialize` and `notifications/initialized` (MCP lifecycle; reference §4.2).

use serde_json::Value;

use super::conn::{Conn, Frame};
use super::initialize_request::params;
use super::Results;

const REF_LIFECYCLE: &str = "MCP spec: Lifecycle (initialization)";
const REF_INIT: &str = "xiaozhi-protocol.md §4.2";
const KNOWN_VERSIONS: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

/// Through a hub that relays the device to `upstream`: every `initialize` check is skipped, and
/// says why (the other checks send nothing that changes the device's session with its upstream).
pub fn skip_relayed(upstream: &str, r: &mut Results) {
    let why = format!("skipped: the device is relayed to its upstream {upstream}, and an initialize from check would replace the upstream's vision URL on it; `mcpdev init` shows its answer to the upstream's own initialize");
    for id in ["initialize.vision", "initialize.protocol_version", "initialize.server_info", "initialize.capabilities_tools"] {
        r.skip(id, why.clone(), REF_INIT);
    }
}

/// Returns the `initialize` result when there is one.
pub async fn check(conn: &mut Conn, r: &mut Results) -> Option<Value> {
    let result = match conn.request("initialize", params()).await {
        Ok(reply) => match reply.payload.get("result") {
            Some(res) if res.is_object() => {
                r.pass("initialize.vision", "initialize with capabilities.vision is answered with a result", REF_INIT);
                Some(res.clone())
            }
            _ => {
                r.fail("initialize.vision", format!("initialize with capabilities.vision got no result: {}", reply.payload), REF_INIT);
                None
            }
        },
        Err(why) => {
            r.fail("initialize.vision", format!("initialize: {why}"), REF_INIT);
            None
        }
    };
    let missing = "skipped: initialize gave no result";
    match &result {
        Some(res) => match res["protocolVersion"].as_str() {
            Some(v) if KNOWN_VERSIONS.contains(&v) => r.pass("initialize.protocol_version", format!("protocolVersion {v}"), REF_LIFECYCLE),
            Some(v) => r.fail("initialize.protocol_version", format!("protocolVersion {v:?} is not an MCP version"), REF_LIFECYCLE),
            None => r.fail("initialize.protocol_version", "no protocolVersion in the answer", REF_LIFECYCLE),
        },
        None => r.skip("initialize.protocol_version", missing, REF_LIFECYCLE),
    }
    match &result {
        Some(res) if res["capabilities"]["tools"].is_object() => r.pass("initialize.capabilities_tools", "capabilities.tools is declared", REF_LIFECYCLE),
        Some(res) => r.fail("initialize.capabilities_tools", format!("capabilities.tools is missing (capabilities: {})", res["capabilities"]), REF_LIFECYCLE),
        None => r.skip("initialize.capabilities_tools", missing, REF_LIFECYCLE),
    }
    match &result {
        // A warning: backends log serverInfo and go on; hosts and people see a nameless device.
        Some(res) => match server_info_problem(&res["serverInfo"]) {
            None => r.pass("initialize.server_info", format!("serverInfo {} {}", res["serverInfo"]["name"], res["serverInfo"]["version"]), REF_LIFECYCLE),
            Some(problem) => r.warn("initialize.server_info", format!("{problem}: {:.200}", res["serverInfo"].to_string()), REF_LIFECYCLE),
        },
        None => r.skip("initialize.server_info", missing, REF_LIFECYCLE),
    }
    let note = conn.envelope_text(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    no_reply(conn, note, r, "initialize.initialized_no_reply", "notifications/initialized", REF_LIFECYCLE).await;
    result
}

/// What is wrong with `serverInfo`: its `name` must be a non-empty string (blank is empty),
/// its `version` a string.
pub fn server_info_problem(info: &Value) -> Option<&'static str> {
    match (info["name"].as_str(), info["version"].as_str()) {
        (None, _) => Some("serverInfo has no name"),
        (Some(n), _) if n.trim().is_empty() => Some("serverInfo.name is empty"),
        (_, None) => Some("serverInfo has no version"),
        _ => None,
    }
}

/// Sends `text` and passes when nothing answers it before the next request's reply.
pub async fn no_reply(conn: &mut Conn, text: String, r: &mut Results, id: &str, what: &str, reference: &'static str) {
    if !conn.raw() {
        return r.skip(id, super::NEEDS_RAW, reference);
    }
    match conn.frames_before_marker(text).await {
        Ok(frames) => {
            let replies: Vec<String> = frames
                .iter()
                .filter_map(|f| match f {
                    Frame::Mcp(p) if p.get("method").is_none() => Some(p.to_string()),
                    Frame::Invalid(t) => Some(t.clone()),
                    Frame::Mcp(_) => None,
                })
                .collect();
            match replies.first() {
                None => r.pass(id, format!("{what} gets no reply"), reference),
                Some(first) => r.fail(id, format!("{what} got a reply (a notification must not): {first:.200}"), reference),
            }
        }
        Err(why) => r.fail(id, format!("after {what}, the next request failed: {why}"), reference),
    }
}
