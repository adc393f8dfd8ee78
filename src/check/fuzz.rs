//! `--fuzz N`: N generated argument sets per tool chosen with `--call`: each integer's bounds and
//! just outside them, wrong types, a missing required argument, long and non-ASCII strings. The
//! device must answer each within the timeout, refuse the out-of-range and incomplete ones, and
//! stay connected.

use serde_json::{Map, Value, json};

use super::arguments::plausible;
use super::conn::Conn;
use super::{Asked, Results, Status};

const REF: &str = "MCP spec: Tools (Error handling, Security: validate all tool inputs); xiaozhi-protocol.md §4.6";

/// What the device must do with an argument set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// Answer (a result or an error), within the timeout.
    Answer,
    /// Refuse: an error or `isError`.
    Refuse,
}

/// Up to `n` argument sets for a tool's schema, the boundary cases first, then random in-range
/// integers (seeded, so a run can be repeated).
pub fn cases(schema: &Value, n: usize) -> Vec<(String, Value, Expect)> {
    let props = schema["properties"].as_object().cloned().unwrap_or_default();
    let required: Vec<&str> = schema["required"].as_array().map(|r| r.iter().filter_map(Value::as_str).collect()).unwrap_or_default();
    let base: Map<String, Value> = props.iter().map(|(k, p)| (k.clone(), plausible(p))).collect();
    let with = |k: &str, v: Value| {
        let mut a = base.clone();
        a.insert(k.to_string(), v);
        Value::Object(a)
    };
    let mut out = Vec::new();
    for (k, p) in &props {
        let (lo, hi) = (p["minimum"].as_i64(), p["maximum"].as_i64());
        if let Some(lo) = lo {
            out.push((format!("{k}={lo} (minimum)"), with(k, json!(lo)), Expect::Answer));
            out.push((format!("{k}={} (below the minimum)", lo - 1), with(k, json!(lo - 1)), Expect::Refuse));
        }
        if let Some(hi) = hi {
            out.push((format!("{k}={hi} (maximum)"), with(k, json!(hi)), Expect::Answer));
            out.push((format!("{k}={} (above the maximum)", hi + 1), with(k, json!(hi + 1)), Expect::Refuse));
        }
        let wrong = if p["type"] == "string" { json!(12345) } else { json!("mcpdev-fuzz") };
        out.push((format!("{k}={wrong} (wrong type)"), with(k, wrong), Expect::Answer));
        if p["type"] == "string" {
            out.push((format!("{k}=<4000 characters>"), with(k, json!("x".repeat(4000))), Expect::Answer));
            out.push((format!("{k}=<non-ASCII>"), with(k, json!("ünïcødé 音量 🎵 \"\\\u{0}")), Expect::Answer));
        }
    }
    for k in &required {
        let mut a = base.clone();
        a.remove(*k);
        out.push((format!("{k} missing (required)"), Value::Object(a), Expect::Refuse));
    }
    let mut rng = fastrand::Rng::with_seed(0x6d63_7064);
    let ranged: Vec<(&String, i64, i64)> = props.iter().filter_map(|(k, p)| Some((k, p["minimum"].as_i64()?, p["maximum"].as_i64()?))).filter(|(_, lo, hi)| lo <= hi).collect();
    while out.len() < n && !ranged.is_empty() {
        let (k, lo, hi) = ranged[rng.usize(..ranged.len())];
        let v = rng.i64(lo..=hi);
        out.push((format!("{k}={v} (in range)"), with(k, json!(v)), Expect::Answer));
    }
    out.truncate(n);
    out
}

pub async fn check(conn: &mut Conn, tool: &Value, n: usize, r: &mut Results) {
    let name = tool["name"].as_str().unwrap_or_default();
    let id = format!("fuzz.{name}");
    if let Some(by) = r.counted(&Asked::Tool(name.to_string())) {
        return r.skip(id, format!("skipped: {name} does not answer (counted once, by {by})"), REF);
    }
    let sets = cases(&tool["inputSchema"], n);
    let total = sets.len();
    for (what, args, expect) in sets {
        match conn.request("tools/call", json!({"name": name, "arguments": args})).await {
            Ok(reply) => {
                let refused = reply.payload.get("error").is_some() || reply.payload["result"]["isError"] == true;
                if expect == Expect::Refuse && !refused {
                    return r.fail(id, format!("{what} is accepted: {:.120}", reply.payload["result"].to_string()), REF);
                }
            }
            Err(why) => return r.silence(&why, Asked::Tool(name.to_string()), id, Status::Fail, format!("{what}: {why}"), REF),
        }
    }
    r.pass(id, format!("{total} generated argument sets: each answered, out-of-range and incomplete ones refused"), REF)
}
