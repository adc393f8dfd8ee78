//! Opt-in calls (`--call GLOB`): each matching tool called with arguments built from its schema
//! (defaults, then each integer's minimum and maximum), and a wrong type for each argument that
//! has a default, which must be refused, not silently replaced by the default.
//!
//! User-only tools and tools whose names suggest a reboot, reset, upgrade or erase are called
//! only when named exactly (no wildcard).

use serde_json::{Map, Value, json};

use super::arguments::{argument_sets, plausible};
use super::conn::{Conn, Silence};
use super::{Asked, Options, Results, Status};

const REF_CALL: &str = "MCP spec: Tools (Calling tools); xiaozhi-protocol.md §4.6";

/// The tools `--call` selects: every safe tool a glob matches, and any tool named exactly.
pub fn selected<'a>(tools: &'a [Value], globs: &[String]) -> Vec<&'a Value> {
    tools
        .iter()
        .filter(|t| {
            let name = t["name"].as_str().unwrap_or_default();
            globs.iter().any(|g| g == name) || (super::safe_to_call(t) && globs.iter().any(|g| super::glob_match(g, name)))
        })
        .collect()
}

pub async fn check(conn: &mut Conn, tools: &[Value], opts: &Options, r: &mut Results) {
    if opts.call.is_empty() {
        return;
    }
    let chosen = selected(tools, &opts.call);
    if chosen.is_empty() {
        r.skip("calls", format!("no callable tool matches {}", opts.call.join(" ")), REF_CALL);
    }
    for tool in chosen {
        call_one(conn, tool, r).await;
        if opts.fuzz > 0 {
            super::fuzz::check(conn, tool, opts.fuzz, r).await;
        }
    }
}

async fn call_one(conn: &mut Conn, tool: &Value, r: &mut Results) {
    let name = tool["name"].as_str().unwrap_or_default();
    let id = format!("calls.{name}");
    let mut failed: Option<(Option<Silence>, String)> = None;
    for (what, args) in argument_sets(&tool["inputSchema"]) {
        match conn.request("tools/call", json!({"name": name, "arguments": args})).await {
            Ok(reply) if reply.payload["result"].is_object() => {}
            Ok(reply) => {
                failed = Some((None, format!("{what}: {:.160}", reply.payload["error"].to_string())));
                break;
            }
            Err(why) => {
                failed = Some((Some(why.clone()), format!("{what}: {why}")));
                break;
            }
        }
    }
    match failed {
        None => r.pass(&id, "answered with valid arguments (defaults, minimum, maximum)", REF_CALL),
        // This check owns the tool's missing answer: hygiene and fuzz calls of it count it no more.
        Some((Some(silence), why)) => r.silence(&silence, Asked::Tool(name.to_string()), &id, Status::Fail, why, REF_CALL),
        Some((None, why)) => r.warn(&id, format!("an error for valid arguments: {why}"), REF_CALL),
    }
    wrong_type_with_default(conn, tool, r).await;
}

/// A wrong type for an argument that has a default must be an error (the stock firmware uses
/// the default silently, so the caller never learns its value was ignored).
async fn wrong_type_with_default(conn: &mut Conn, tool: &Value, r: &mut Results) {
    let name = tool["name"].as_str().unwrap_or_default();
    let props = tool["inputSchema"]["properties"].as_object().cloned().unwrap_or_default();
    let Some((prop, wrong)) = props.iter().find_map(|(k, p)| {
        p.get("default")?;
        let wrong = if p["type"] == "string" { json!(12345) } else { json!("mcpdev-check-wrong-type") };
        Some((k.clone(), wrong))
    }) else {
        return;
    };
    let id = format!("calls.{name}.wrong_type");
    if let Some(by) = r.counted(&Asked::Tool(name.to_string())) {
        return r.skip(id, format!("skipped: {name} does not answer (counted once, by {by})"), REF_CALL);
    }
    let mut args: Map<String, Value> = props.iter().map(|(k, p)| (k.clone(), plausible(p))).collect();
    args.insert(prop.clone(), wrong.clone());
    match conn.request("tools/call", json!({"name": name, "arguments": args})).await {
        Ok(reply) if reply.payload.get("error").is_some() || reply.payload["result"]["isError"] == true => {
            r.pass(id, format!("{prop}={wrong} (wrong type) is refused"), REF_CALL)
        }
        Ok(_) => r.warn(id, format!("{prop}={wrong} (wrong type) is accepted: the default is used silently"), REF_CALL),
        Err(why) => r.silence(&why, Asked::Tool(name.to_string()), id, Status::Fail, format!("{prop}={wrong} (wrong type): {why}"), REF_CALL),
    }
}
