//! `sim --profile stock`: the firmware core (`mcp-device`) wrapped to behave like the stock
//! xiaozhi-esp32 2.4.2 firmware where it deviates from MCP (reference §4, checked against
//! `main/mcp_server.cc` at v2.4.2, whose code wins over its docs), so backends and `mcpdev check`
//! can be tested against those deviations without a board:
//!
//! - a request with a string `id` is dropped (§4.1: ids must be JSON numbers);
//! - any method but `initialize`, `tools/list` and `tools/call`, `ping` included, gets the error
//!   `Method not implemented: <method>` (§4.1), not `ping`'s empty result;
//! - errors carry no `code` (§4.7: `ReplyError` writes only `message`), so an unknown tool gets
//!   `{"message":"Unknown tool: <name>"}`;
//! - error messages are not JSON-escaped (§4.7): `Unknown tool: a"b` makes the frame invalid JSON;
//! - the last `tools/list` page says `"nextCursor":""` instead of leaving the key out;
//! - an argument of the wrong type that has a default silently gets the default (§4.6).
//!
//! Everything else is the core's own (standard) behaviour.

use mcp_device::{DeviceLink, Inbound, PropertyKind};
use serde_json::Value;

use super::tools::SimState;

/// [`on_text`] for [`Profile::Stock`](super::Profile::Stock), the core's own handling otherwise.
pub fn on_text_as(profile: super::Profile, link: &mut DeviceLink<SimState>, text: &str, out: &mut String) -> Inbound {
    if profile == super::Profile::Stock { on_text(link, text, out) } else { link.on_text(text, out) }
}

/// Like [`DeviceLink::on_text`], with the stock firmware's deviations.
pub fn on_text(link: &mut DeviceLink<SimState>, text: &str, out: &mut String) -> Inbound {
    let Ok(mut msg) = serde_json::from_str::<Value>(text) else {
        return link.on_text(text, out);
    };
    if msg["type"] != "mcp" || !msg["payload"].is_object() {
        return link.on_text(text, out);
    }
    let payload = &mut msg["payload"];
    if payload["id"].is_string() {
        return Inbound::Mcp { replied: false };
    }
    let method = payload["method"].as_str().unwrap_or_default().to_string();
    let known = matches!(method.as_str(), "initialize" | "tools/list" | "tools/call") || method.starts_with("notifications");
    if !known && let Some(id) = payload["id"].as_i64() {
        out.push_str(&reply_error(&msg["session_id"], &id.to_string(), &format!("Method not implemented: {method}")));
        return Inbound::Mcp { replied: true };
    }
    if payload["method"] == "tools/call" {
        default_wrong_types(link, payload);
    }
    let unknown_tool = payload["method"] == "tools/call"
        && payload["params"]["name"].as_str().is_some_and(|n| !link.server.tools().iter().any(|t| t.name == n));
    let raw_name = payload["params"]["name"].as_str().map(str::to_string);
    let start = out.len();
    let inbound = link.on_text(&msg.to_string(), out);
    if !matches!(inbound, Inbound::Mcp { replied: true }) {
        return inbound;
    }
    let Ok(mut reply) = serde_json::from_str::<Value>(&out[start..]) else { return inbound };
    let p = &mut reply["payload"];
    if unknown_tool && let (Some(name), Some(id)) = (raw_name, p.get("id").cloned()) {
        out.truncate(start);
        out.push_str(&reply_error(&reply["session_id"], &id.to_string(), &format!("Unknown tool: {name}")));
        return inbound;
    }
    // `ReplyError` writes no `code`.
    if let Some(error) = p.get_mut("error").and_then(Value::as_object_mut)
        && error.remove("code").is_some()
    {
        out.truncate(start);
        out.push_str(&reply.to_string());
        return inbound;
    }
    if p["result"]["tools"].is_array() && p["result"].get("nextCursor").is_none() {
        p["result"]["nextCursor"] = Value::String(String::new());
        out.truncate(start);
        out.push_str(&reply.to_string());
    }
    inbound
}

/// The firmware's `ReplyError`, in its envelope: built by concatenation, so `message` is not
/// JSON-escaped, and with no `code`.
fn reply_error(session_id: &Value, id: &str, message: &str) -> String {
    let session = serde_json::to_string(session_id).unwrap_or_else(|_| "\"\"".into());
    format!("{{\"session_id\":{session},\"type\":\"mcp\",\"payload\":{{\"jsonrpc\":\"2.0\",\"id\":{id},\"error\":{{\"message\":\"{message}\"}}}}}}")
}

/// Drops each argument whose JSON type does not match a declared property that has a default,
/// so the core uses the default, as the stock firmware does silently.
fn default_wrong_types(link: &DeviceLink<SimState>, payload: &mut Value) {
    let Some(name) = payload["params"]["name"].as_str().map(str::to_string) else { return };
    let Some(tool) = link.server.tools().iter().find(|t| t.name == name) else { return };
    let Some(args) = payload["params"]["arguments"].as_object_mut() else { return };
    for p in &tool.properties {
        let Some(v) = args.get(p.name.as_ref()) else { continue };
        let (has_default, matches) = match &p.kind {
            PropertyKind::Boolean { default } => (default.is_some(), v.is_boolean()),
            PropertyKind::Integer { default, .. } => (default.is_some(), v.is_number()),
            PropertyKind::String { default } => (default.is_some(), v.is_string()),
        };
        if has_default && !matches {
            args.remove(p.name.as_ref());
        }
    }
}
