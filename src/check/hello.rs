//! The hello and its handshake headers (reference §1.1, §1.2).

use super::conn::Greeting;
use super::Results;

const REF_HEADERS: &str = "xiaozhi-protocol.md §1.1";
const REF_HELLO: &str = "xiaozhi-protocol.md §1.2";
const REF_HELLO_FIELDS: &str = "xiaozhi-protocol.md §1.2 (backends default a missing version, transport or audio_params)";

pub fn check(g: &Greeting, r: &mut Results) {
    if let Some(why) = g.no_hello {
        r.skip("hello.headers", why, REF_HEADERS);
        r.skip("hello.fields", why, REF_HELLO);
        return r.skip("hello.features_mcp", why, REF_HELLO);
    }
    let mut problems = Vec::new();
    match g.header("protocol-version") {
        Some("1" | "2" | "3") => {}
        Some(v) => problems.push(format!("Protocol-Version is {v:?}, not 1, 2 or 3")),
        None => problems.push("no Protocol-Version header".into()),
    }
    match g.header("device-id") {
        Some(id) if is_mac(id) => {}
        Some(id) => problems.push(format!("Device-Id {id:?} is not a MAC (aa:bb:cc:dd:ee:ff)")),
        None => problems.push("no Device-Id header".into()),
    }
    if g.header("client-id").is_none_or(|v| v.trim().is_empty()) {
        problems.push("no Client-Id header".into());
    }
    report(r, "hello.headers", problems, "Protocol-Version, Device-Id (a MAC) and Client-Id are sent", REF_HEADERS);

    let h = &g.hello;
    let mut problems = Vec::new();
    if h["transport"] != "websocket" {
        problems.push(format!("transport is {}, not \"websocket\"", h["transport"]));
    }
    if !h["version"].is_u64() {
        problems.push(format!("version is {}, not a number", h["version"]));
    }
    let audio = &h["audio_params"];
    for key in ["format", "sample_rate", "channels", "frame_duration"] {
        if audio.get(key).is_none() {
            problems.push(format!("audio_params.{key} is missing"));
        }
    }
    // Backends read what they need and default the rest (devices in the field send hellos without version,
    // transport or audio_params): a warning.
    if problems.is_empty() {
        r.pass("hello.fields", "transport, version and audio_params are present", REF_HELLO);
    } else {
        r.warn("hello.fields", format!("{} (backends default them)", problems.join("; ")), REF_HELLO_FIELDS);
    }

    match &h["features"]["mcp"] {
        serde_json::Value::Bool(true) => r.pass("hello.features_mcp", "features.mcp is true", REF_HELLO),
        other => r.fail("hello.features_mcp", format!("features.mcp is {other}, so backends never start MCP"), REF_HELLO),
    }
}

fn report(r: &mut Results, id: &str, problems: Vec<String>, ok: &str, reference: &'static str) {
    if problems.is_empty() {
        r.pass(id, ok, reference);
    } else {
        r.fail(id, problems.join("; "), reference);
    }
}

/// `aa:bb:cc:dd:ee:ff`: six pairs of hex digits.
pub fn is_mac(s: &str) -> bool {
    let parts: Vec<&str> = s.split(':').collect();
    parts.len() == 6 && parts.iter().all(|p| p.len() == 2 && p.bytes().all(|b| b.is_ascii_hexdigit()))
}
