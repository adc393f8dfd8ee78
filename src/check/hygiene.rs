//! JSON-RPC hygiene: error codes, ids, ping, requests in flight, escaping, malformed input and
//! notifications (JSON-RPC 2.0; MCP spec: Basic protocol, Tools errors; reference §4.1, §4.7).

use serde_json::{Value, json};

use super::conn::{Conn, Frame, Silence};
use super::{Asked, Results, Status};

const REF_JSONRPC: &str = "JSON-RPC 2.0 §5.1 (error codes); MCP spec: Basic protocol";
const REF_TOOL_ERRORS: &str = "MCP spec: Tools (Error handling); xiaozhi-protocol.md §4.6";
const REF_IDS: &str = "JSON-RPC 2.0 §4 (id); xiaozhi-protocol.md §4.1";
const REF_PING: &str = "MCP spec: Utilities (Ping); xiaozhi-protocol.md §4.1";
const REF_ESCAPING: &str = "RFC 8259 §7; xiaozhi-protocol.md §4.7";
const REF_NOTIFY: &str = "JSON-RPC 2.0 §4.1 (notifications)";

fn code(reply: &Value) -> Option<i64> {
    reply["error"]["code"].as_i64()
}

/// `callable`: the tools `--call` selected; only those get a wrong-typed argument (a device that
/// does not validate would run the tool).
pub async fn check(conn: &mut Conn, tools: &[Value], callable: &[Value], r: &mut Results) {
    match conn.request("mcpdev/check-no-such-method", json!({})).await {
        Ok(reply) => match code(&reply.payload) {
            Some(-32601) => r.pass("hygiene.unknown_method", "an unknown method gets -32601", REF_JSONRPC),
            Some(c) => r.warn("hygiene.unknown_method", format!("an unknown method gets code {c}, not -32601"), REF_JSONRPC),
            None if reply.payload.get("error").is_some() => r.warn("hygiene.unknown_method", "an unknown method gets an error without a code", REF_JSONRPC),
            None => r.fail("hygiene.unknown_method", format!("an unknown method got a result: {:.120}", reply.payload.to_string()), REF_JSONRPC),
        },
        Err(why) => r.silence(&why, Asked::UnknownMethod, "hygiene.unknown_method", Status::Fail, format!("an unknown method: {why}"), REF_JSONRPC),
    }
    match conn.request("tools/call", json!({"name": "mcpdev-check.no-such-tool", "arguments": {}})).await {
        Ok(reply) if reply.payload["result"]["isError"] == true => r.pass("hygiene.unknown_tool", "an unknown tool gets an isError result", REF_TOOL_ERRORS),
        Ok(reply) => match code(&reply.payload) {
            Some(-32602) => r.pass("hygiene.unknown_tool", "an unknown tool gets -32602", REF_TOOL_ERRORS),
            Some(c) => r.warn("hygiene.unknown_tool", format!("an unknown tool gets code {c}, not -32602 (stock firmware: tolerated)"), REF_TOOL_ERRORS),
            None if reply.payload.get("error").is_some() => r.warn("hygiene.unknown_tool", "an unknown tool gets an error without a code", REF_TOOL_ERRORS),
            None => r.fail("hygiene.unknown_tool", format!("an unknown tool got a success: {:.120}", reply.payload.to_string()), REF_TOOL_ERRORS),
        },
        Err(why) => r.silence(&why, Asked::UnknownTool, "hygiene.unknown_tool", Status::Fail, format!("an unknown tool: {why}"), REF_TOOL_ERRORS),
    }
    invalid_params(conn, tools, callable, r).await;
    ids(conn, r).await;
    match conn.request("ping", json!({})).await {
        Ok(reply) if reply.payload["result"].is_object() => r.pass("hygiene.ping", "ping is answered", REF_PING),
        Ok(reply) => r.warn("hygiene.ping", format!("ping gets no empty result: {:.120}", reply.payload.to_string()), REF_PING),
        // On a device without ping, ping is an unknown method: one that gets no answer is counted
        // by hygiene.unknown_method when every unknown method goes unanswered.
        Err(Silence::Timeout) => r.unanswered(Asked::UnknownMethod, "hygiene.ping", Status::Warn, "ping is not answered (stock firmware: backends must not rely on ping)", REF_PING),
        Err(why) => r.fail("hygiene.ping", format!("ping: {why}"), REF_PING),
    }
    in_flight(conn, r).await;
    escaping(conn, r).await;
    let note = conn.envelope_text(r#"{"jsonrpc":"2.0","method":"notifications/mcpdev_check","params":{"n":1}}"#);
    super::initialize::no_reply(conn, note, r, "hygiene.notification_no_reply", "a notification", REF_NOTIFY).await;
    // Last: it may upset the device.
    if !conn.raw() {
        return r.skip("hygiene.malformed_json", super::NEEDS_RAW, REF_JSONRPC);
    }
    let broken = conn.envelope_text(r#"{"jsonrpc":"2.0","id":99,"method":"tools/list","params":{"cursor":"#);
    let broken = broken.trim_end_matches('}').to_string();
    match conn.frames_before_marker(broken).await {
        Ok(_) => r.pass("hygiene.malformed_json", "a malformed frame leaves the device connected and answering", REF_JSONRPC),
        Err(why) => r.fail("hygiene.malformed_json", format!("after a malformed frame: {why}"), REF_JSONRPC),
    }
}

/// A call whose arguments cannot be right: `arguments` that is not an object, and (when a tool
/// chosen with `--call` has a required property) a wrong type for it. Nothing runs when the
/// device validates. A device that runs the tool anyway only warns: no backend sends arguments
/// that are not an object, and the stock firmware itself defaults wrong types silently
/// (`calls.*.wrong_type`). Going silent on a wrong type fails (a backend passes a model's wrong
/// type on and waits for the answer); on non-object arguments, which none sends, it warns.
async fn invalid_params(conn: &mut Conn, tools: &[Value], callable: &[Value], r: &mut Results) {
    let id = "hygiene.invalid_params";
    let first = tools.first().and_then(|t| t["name"].as_str()).map(String::from);
    let asked = first.clone().map_or(Asked::UnknownTool, Asked::Tool);
    let name = first.map_or(json!("mcpdev-check.no-such-tool"), Value::from);
    const NEVER_SENT: &str = "no backend sends it; tolerated";
    const DEFAULTED: &str = "the stock firmware runs wrong types with defaults; tolerated";
    let mut attempts = vec![("arguments that are not an object".to_string(), json!({"name": name, "arguments": "not-an-object"}), asked, Status::Warn, NEVER_SENT)];
    if let Some((tool, prop, wrong)) = callable.iter().find_map(required_wrong_type) {
        attempts.push((format!("{prop}={wrong} for {tool}"), json!({"name": tool, "arguments": {prop.clone(): wrong}}), Asked::Tool(tool.clone()), Status::Fail, DEFAULTED));
    }
    // The first deviation that only warns, kept while the other attempts run.
    let mut warned: Option<(String, Option<Asked>)> = None;
    for (what, params, asked, if_silent, tolerated) in attempts {
        match conn.request("tools/call", params).await {
            Ok(reply) if reply.payload["result"]["isError"] == true || code(&reply.payload) == Some(-32602) => {}
            Ok(reply) if reply.payload.get("error").is_some() => {
                warned.get_or_insert((format!("{what} gets an error, but not -32602 (code {:?})", code(&reply.payload)), None));
            }
            Ok(reply) => {
                warned.get_or_insert((format!("{what} is accepted ({tolerated}): {:.120}", reply.payload.to_string()), None));
            }
            Err(why @ Silence::Timeout) if if_silent == Status::Warn => {
                warned.get_or_insert((format!("{what}: {why} ({tolerated})"), Some(asked)));
            }
            Err(why) => return r.silence(&why, asked, id, Status::Fail, format!("{what}: {why}"), REF_TOOL_ERRORS),
        }
    }
    match warned {
        None => r.pass(id, "invalid arguments get -32602 or isError", REF_TOOL_ERRORS),
        Some((why, None)) => r.warn(id, why, REF_TOOL_ERRORS),
        Some((why, Some(asked))) => r.unanswered(asked, id, Status::Warn, why, REF_TOOL_ERRORS),
    }
}

/// A required property of `tool` and a value of the wrong type for it.
fn required_wrong_type(tool: &Value) -> Option<(String, String, Value)> {
    let schema = &tool["inputSchema"];
    let required = schema["required"].as_array()?;
    required.iter().filter_map(Value::as_str).find_map(|p| {
        let wrong = match schema["properties"][p]["type"].as_str()? {
            "integer" | "number" | "boolean" => json!("mcpdev-check-not-a-number"),
            "string" => json!(12345),
            _ => return None,
        };
        Some((tool["name"].as_str()?.to_string(), p.to_string(), wrong))
    })
}

async fn ids(conn: &mut Conn, r: &mut Results) {
    let id = "hygiene.ids";
    if !conn.raw() {
        return r.skip(id, super::NEEDS_RAW, REF_IDS);
    }
    for sent in [json!(2_147_483_000), json!(0)] {
        match conn.request_with_id("tools/list", json!({"cursor": ""}), sent.clone()).await {
            Ok(_) => {}
            Err(why) => return r.fail(id, format!("numeric id {sent}: {why} (or echoed as something else)"), REF_IDS),
        }
    }
    let sent = json!("mcpdev-check-7");
    match conn.request_with_id("tools/list", json!({"cursor": ""}), sent.clone()).await {
        Ok(_) => r.pass(id, "numeric and string ids are echoed as sent", REF_IDS),
        Err(Silence::Timeout) => r.warn(id, "a string id gets no answer (stock firmware: backends use numeric ids)", REF_IDS),
        Err(why) => r.fail(id, format!("string id: {why}"), REF_IDS),
    }
}

async fn in_flight(conn: &mut Conn, r: &mut Results) {
    let id = "hygiene.in_flight";
    if !conn.raw() {
        return r.skip(id, super::NEEDS_RAW, REF_JSONRPC);
    }
    let started = std::time::Instant::now();
    let ids: Vec<Value> = (0..8).map(|_| json!(conn.fresh_id())).collect();
    for i in &ids {
        conn.send(&json!({"jsonrpc": "2.0", "id": i, "method": "tools/list", "params": {"cursor": ""}})).await;
    }
    let deadline = conn.timeout;
    for i in &ids {
        if let Err(why) = conn.wait_reply(i, started, deadline).await {
            return r.fail(id, format!("8 requests in flight: id {i}: {why}"), REF_JSONRPC);
        }
    }
    r.pass(id, "8 requests in flight come back with matching ids", REF_JSONRPC)
}

async fn escaping(conn: &mut Conn, r: &mut Results) {
    let id = "hygiene.error_escaping";
    if !conn.raw() {
        return r.skip(id, super::NEEDS_RAW, REF_ESCAPING);
    }
    let name = "mcpdev\"check\\tool";
    let rid = json!(conn.fresh_id());
    let req = json!({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": name, "arguments": {}}});
    match conn.frames_before_marker(conn.envelope_text(&req.to_string())).await {
        Ok(frames) => {
            if let Some(bad) = frames.iter().find_map(|f| if let Frame::Invalid(t) = f { Some(t) } else { None }) {
                r.fail(id, format!("an error message naming a tool with \" and \\ is not valid JSON: {bad:.160}"), REF_ESCAPING);
            } else if frames.iter().any(|f| matches!(f, Frame::Mcp(p) if p.get("id") == Some(&rid))) {
                r.pass(id, "error messages are escaped (valid JSON)", REF_ESCAPING);
            } else {
                // The same missing answer as an unknown tool's, when that one gets none either.
                r.unanswered(Asked::UnknownTool, id, Status::Fail, "a call of a tool named with \" and \\ got no answer", REF_ESCAPING);
            }
        }
        Err(why) => r.fail(id, format!("after a call of a tool named with \" and \\: {why}"), REF_ESCAPING),
    }
}
