//! `sim --replay FILE`: a virtual device that plays back a session recorded with
//! `watch --record FILE`, so backends (and `check`) can be tested against a real device's
//! recorded behaviour without the device.
//!
//! The recording is NDJSON: the first line is the identity (`direction:"identity"`, Device-Id,
//! Client-Id, Protocol-Version, transport, the hello; never a token), then one line per MCP frame
//! (`ts`, `direction` `out` = sent to the device, `in` = sent by it, `frame` = the JSON-RPC payload).
//!
//! Lines marked `"from_hub": true` are what the hub knew of a device that was onboarded already
//! when the recording started (its `initialize` exchange and `tools/list` pages); they replay as
//! any other.
//!
//! Each request is answered by the recorded reply to the same method and params (ids rewritten);
//! `initialize` matches by method alone (its params carry the backend's own vision token), a
//! `tools/list` page by its cursor alone. The
//! device notifications recorded after a reply are sent after it. A request that was never
//! recorded gets the error `-32601` naming the closest recorded request.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tracing::{info, warn};

/// The largest recording `sim --replay` reads.
const MAX_BYTES: u64 = 64 << 20;

/// One recorded request and what the device did about it.
#[derive(Debug, Clone)]
pub struct Exchange {
    pub method: String,
    pub params: Value,
    /// The reply without its id: `{"result":…}` or `{"error":…}`; `None` if it never came.
    pub reply: Option<Value>,
    pub latency: Duration,
    /// Device notifications recorded after the reply, before the next request.
    pub notifications: Vec<Value>,
}

#[derive(Debug, Clone)]
pub struct Recording {
    pub identity: Value,
    pub exchanges: Vec<Exchange>,
}

fn ts_ms(line: &Value) -> Option<f64> {
    let t = humantime::parse_rfc3339(line["ts"].as_str()?).ok()?;
    Some(t.duration_since(std::time::UNIX_EPOCH).ok()?.as_secs_f64() * 1000.0)
}

impl Recording {
    pub fn load(path: &std::path::Path) -> Result<Self, String> {
        let meta = std::fs::metadata(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        if meta.len() > MAX_BYTES {
            return Err(format!("{} is {} bytes; recordings of more than {MAX_BYTES} bytes are refused", path.display(), meta.len()));
        }
        let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        Self::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    pub fn parse(text: &str) -> Result<Self, String> {
        let mut lines = text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty());
        let (_, first) = lines.next().ok_or("the recording is empty (record one with `mcpdev watch --record FILE`)")?;
        let identity: Value = serde_json::from_str(first).map_err(|e| format!("line 1 is not JSON: {e}"))?;
        if identity["direction"] != "identity" || !identity["device_id"].is_string() {
            return Err("line 1 is not the identity line (direction \"identity\", device_id, hello) `watch --record` writes".into());
        }
        let mut exchanges: Vec<Exchange> = Vec::new();
        // Request id → (index in exchanges, sent at ms).
        let mut open: Vec<(Value, usize, Option<f64>)> = Vec::new();
        let mut last_replied: Option<usize> = None;
        for (n, line) in lines {
            let v: Value = serde_json::from_str(line).map_err(|e| format!("line {} is not JSON: {e}", n + 1))?;
            let frame = &v["frame"];
            match (v["direction"].as_str(), frame.get("method").and_then(Value::as_str), frame.get("id")) {
                (Some("out"), Some(method), Some(id)) => {
                    exchanges.push(Exchange { method: method.into(), params: frame.get("params").cloned().unwrap_or(Value::Null), reply: None, latency: Duration::ZERO, notifications: Vec::new() });
                    open.push((id.clone(), exchanges.len() - 1, ts_ms(&v)));
                    last_replied = None;
                }
                (Some("in"), None, Some(id)) => {
                    if let Some(pos) = open.iter().position(|(i, _, _)| i == id) {
                        let (_, idx, sent) = open.remove(pos);
                        let mut reply = frame.clone();
                        if let Some(o) = reply.as_object_mut() {
                            o.remove("id");
                            o.remove("jsonrpc");
                        }
                        exchanges[idx].reply = Some(reply);
                        if let (Some(a), Some(b)) = (sent, ts_ms(&v)) {
                            exchanges[idx].latency = Duration::from_secs_f64(((b - a) / 1000.0).max(0.0));
                        }
                        last_replied = Some(idx);
                    }
                }
                (Some("in"), Some(_), None) => {
                    if let Some(idx) = last_replied {
                        exchanges[idx].notifications.push(frame.clone());
                    }
                }
                _ => {}
            }
        }
        Ok(Self { identity, exchanges })
    }

    /// The recorded exchange for a request: same method and params, else (for `initialize`) the
    /// same method; else the error naming the closest recorded request.
    pub fn answer(&self, method: &str, params: &Value) -> Result<&Exchange, String> {
        let answered = |e: &&Exchange| e.reply.is_some();
        if let Some(e) = self.exchanges.iter().filter(answered).find(|e| e.method == method && &e.params == params) {
            return Ok(e);
        }
        // A page is the page its cursor names, whoever asks (backends differ in `withUserTools`).
        let cursor = |p: &Value| p.get("cursor").and_then(Value::as_str).unwrap_or_default().to_string();
        if method == "tools/list"
            && let Some(e) = self.exchanges.iter().filter(answered).find(|e| e.method == method && cursor(&e.params) == cursor(params))
        {
            return Ok(e);
        }
        if method == "initialize"
            && let Some(e) = self.exchanges.iter().filter(answered).find(|e| e.method == method)
        {
            return Ok(e);
        }
        let asked = format!("{method} {}", params);
        let closest = self
            .exchanges
            .iter()
            .filter(answered)
            .map(|e| format!("{} {}", e.method, e.params))
            .min_by_key(|c| strsim::levenshtein(c, &asked))
            .unwrap_or_else(|| "none (the recording holds no answered request)".to_string());
        Err(format!("mcpdev replay: the recording holds no request {asked}; closest recorded request: {closest}"))
    }
}

/// Who the replaying device is: the recorded device, or (`sim --replay --device-id`) another
/// Device-Id with a Client-Id of its own, so it connects beside the recorded device rather than
/// in its place.
#[derive(Debug, Clone)]
pub struct As {
    pub device_id: String,
    pub client_id: Option<String>,
}

impl As {
    pub fn new(rec: &Recording, device_id: Option<&str>) -> Self {
        let recorded = rec.identity["device_id"].as_str().unwrap_or_default();
        match device_id.filter(|d| *d != recorded) {
            Some(other) => Self { device_id: other.to_string(), client_id: Some(uuid::Uuid::new_v4().to_string()) },
            None => Self { device_id: recorded.to_string(), client_id: rec.identity["client_id"].as_str().map(str::to_string) },
        }
    }
}

/// Connects to `url` as `who` with the recorded hello and answers from the recording until the
/// connection ends; `timing` replays the recorded latencies.
pub async fn run(url: &str, rec: &Recording, who: &As, token: Option<&str>, timing: bool) -> anyhow::Result<()> {
    let id = &rec.identity;
    let version = id["protocol_version"].as_u64().unwrap_or(1).clamp(1, 3) as u8;
    let request = super::client::device_request(url, token, &who.device_id, who.client_id.as_deref(), version)?;
    let (ws, _) = tokio_tungstenite::connect_async_with_config(request, Some(super::client::ws_config()), true).await?;
    let (mut tx, mut rx) = ws.split();
    let hello = if id["hello"].is_object() { id["hello"].clone() } else { json!({"type": "hello", "version": 1, "features": {"mcp": true}, "transport": "websocket"}) };
    tx.send(Message::text(hello.to_string())).await?;
    let mut session_id = String::new();
    while let Some(msg) = rx.next().await {
        let text = match msg? {
            Message::Text(t) => t,
            Message::Close(_) => break,
            _ => continue,
        };
        let Ok(v) = serde_json::from_str::<Value>(&text) else {
            warn!("ignored a frame that is not JSON");
            continue;
        };
        if v["type"] == "hello" {
            session_id = v["session_id"].as_str().unwrap_or_default().to_string();
            info!(device = %who.device_id, "connected (replaying {} recorded requests)", rec.exchanges.len());
            continue;
        }
        let p = &v["payload"];
        let (Some(method), Some(req_id)) = (p["method"].as_str(), p.get("id")) else { continue };
        let envelope = |payload: Value| crate::wire::envelope::mcp_text(&session_id, &payload);
        let params = p.get("params").cloned().unwrap_or(Value::Null);
        match rec.answer(method, &params) {
            Ok(e) => {
                if timing {
                    tokio::time::sleep(e.latency).await;
                }
                let mut reply = e.reply.clone().unwrap_or_default();
                reply["jsonrpc"] = json!("2.0");
                reply["id"] = req_id.clone();
                tx.send(Message::text(envelope(reply))).await?;
                for n in &e.notifications {
                    tx.send(Message::text(envelope(n.clone()))).await?;
                }
            }
            Err(why) => {
                warn!("{why}");
                let reply = json!({"jsonrpc": "2.0", "id": req_id, "error": {"code": -32601, "message": why}});
                tx.send(Message::text(envelope(reply))).await?;
            }
        }
    }
    Ok(())
}

/// What the hub knows of a device (its `device` description), as recording lines: the identity
/// and hello; the `initialize` exchange once the device answered it; every `tools/list` page once
/// it is ready (as the device paged them, `tool_pages`, or one page). Nothing for a device that
/// has not said hello. Each line is marked `"from_hub": true`.
pub fn hub_knowledge(info: &Value, ts: &str) -> Vec<Value> {
    if !info["hello"].is_object() {
        return Vec::new();
    }
    let mut lines = vec![json!({"ts": ts, "direction": "identity", "from_hub": true, "device_id": info["device_id"], "client_id": info["client_id"],
        "protocol_version": info["protocol_version"], "transport": info["transport"], "hello": info["hello"]})];
    let mut exchange = |id: String, method: &str, params: Value, result: Value| {
        lines.push(json!({"ts": ts, "direction": "out", "from_hub": true, "frame": {"jsonrpc": "2.0", "id": id, "method": method, "params": params}}));
        lines.push(json!({"ts": ts, "direction": "in", "from_hub": true, "frame": {"jsonrpc": "2.0", "id": id, "result": result}}));
    };
    if info["mcp_protocol_version"].is_string() || info["server_info"].is_object() {
        let mut result = serde_json::Map::new();
        for (key, field) in [("protocolVersion", "mcp_protocol_version"), ("capabilities", "capabilities"), ("serverInfo", "server_info")] {
            if !info[field].is_null() {
                result.insert(key.into(), info[field].clone());
            }
        }
        // The hub's request, less the vision token it carried.
        let params = json!({"protocolVersion": "2024-11-05", "clientInfo": {"name": "mcpdev", "version": env!("CARGO_PKG_VERSION")}});
        exchange("hub-initialize".into(), "initialize", params, Value::Object(result));
    }
    let ready = info["phase"] == "ready" && info["onboarding"]["failed"] != true;
    let tools = info["tools"].as_array().filter(|_| ready);
    if let Some(tools) = tools {
        let marks = info["tool_pages"].as_array().filter(|m| m.iter().map(|p| p["tools"].as_u64().unwrap_or(0)).sum::<u64>() == tools.len() as u64);
        let pages: Vec<(usize, Option<&str>)> = match marks {
            Some(marks) => marks.iter().map(|p| (p["tools"].as_u64().unwrap_or(0) as usize, p["next_cursor"].as_str())).collect(),
            None => vec![(tools.len(), None)],
        };
        let (mut at, mut cursor) = (0, "");
        for (n, (count, next)) in pages.into_iter().enumerate() {
            let mut result = json!({"tools": tools[at..at + count]});
            if let Some(next) = next {
                result["nextCursor"] = json!(next);
            }
            exchange(format!("hub-tools-{}", n + 1), "tools/list", json!({"cursor": cursor, "withUserTools": true}), result);
            at += count;
            cursor = next.unwrap_or_default();
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    const REC: &str = r#"{"ts":"2026-11-23T10:00:00.000Z","direction":"identity","device_id":"aa:bb:cc:00:00:01","client_id":"c","protocol_version":1,"transport":"websocket","hello":{"type":"hello","version":1}}
{"ts":"2026-11-23T10:00:00.100Z","direction":"out","frame":{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"set_volume","arguments":{"volume":30}}}}
{"ts":"2026-11-23T10:00:00.150Z","direction":"in","frame":{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"true"}]}}}
{"ts":"2026-11-23T10:00:00.160Z","direction":"in","frame":{"jsonrpc":"2.0","method":"notifications/state_changed","params":{"v":30}}}
"#;

    #[test]
    fn requests_match_by_method_and_params_and_keep_latency_and_notifications() {
        let rec = Recording::parse(REC).unwrap();
        let e = rec.answer("tools/call", &json!({"name":"set_volume","arguments":{"volume":30}})).unwrap();
        assert_eq!(e.reply.as_ref().unwrap()["result"]["content"][0]["text"], "true");
        assert_eq!(e.latency, Duration::from_millis(50));
        assert_eq!(e.notifications.len(), 1);
        let err = rec.answer("tools/call", &json!({"name":"set_volume","arguments":{"volume":31}})).unwrap_err();
        assert!(err.contains("closest recorded request: tools/call {\"name\":\"set_volume\",\"arguments\":{\"volume\":30}}"), "{err}");
    }

    #[test]
    fn a_file_without_the_identity_line_is_refused() {
        assert!(Recording::parse("{\"direction\":\"out\"}\n").unwrap_err().contains("identity"));
        assert!(Recording::parse("").is_err());
    }

    fn info(tool_pages: Value) -> Value {
        json!({"device_id": "aa:bb:cc:dd:ee:81", "client_id": "c-1", "protocol_version": 1, "transport": "websocket", "phase": "ready",
            "hello": {"type": "hello", "version": 1, "features": {"mcp": true}}, "mcp_protocol_version": "2024-11-05",
            "server_info": {"name": "py-device", "version": "2"}, "capabilities": {"tools": {}},
            "tools": [{"name": "a"}, {"name": "b"}, {"name": "c"}], "tool_pages": tool_pages, "onboarding": {"failed": false}})
    }

    #[test]
    fn what_the_hub_knows_replays_page_by_page() {
        let lines = hub_knowledge(&info(json!([{"tools": 2, "next_cursor": "c"}, {"tools": 1}])), "2026-11-27T12:00:00.000Z");
        assert!(lines.iter().all(|l| l["from_hub"] == true), "{lines:?}");
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        assert!(!text.contains("token"), "{text}");
        let rec = Recording::parse(&text).unwrap();
        assert_eq!(rec.identity["device_id"], "aa:bb:cc:dd:ee:81");
        let init = rec.answer("initialize", &json!({"capabilities": {"vision": {"url": "u", "token": "t"}}})).unwrap();
        assert_eq!(init.reply.as_ref().unwrap()["result"]["serverInfo"]["name"], "py-device");
        let first = rec.answer("tools/list", &json!({"cursor": "", "withUserTools": true})).unwrap();
        assert_eq!(first.reply.as_ref().unwrap()["result"], json!({"tools": [{"name": "a"}, {"name": "b"}], "nextCursor": "c"}));
        let last = rec.answer("tools/list", &json!({"cursor": "c", "withUserTools": true})).unwrap();
        assert_eq!(last.reply.as_ref().unwrap()["result"], json!({"tools": [{"name": "c"}]}));
    }

    #[test]
    fn pages_that_do_not_add_up_give_one_page_and_an_unready_device_gives_no_list() {
        let lines = hub_knowledge(&info(json!([{"tools": 7, "next_cursor": "x"}])), "t");
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        let rec = Recording::parse(&text).unwrap();
        assert_eq!(rec.answer("tools/list", &json!({"cursor": ""})).unwrap().reply.as_ref().unwrap()["result"]["tools"].as_array().unwrap().len(), 3);
        let mut listing = info(Value::Null);
        listing["phase"] = json!("listing");
        assert!(hub_knowledge(&listing, "t").iter().all(|l| l["frame"]["method"] != "tools/list"));
        assert!(hub_knowledge(&json!({"device_id": "x", "hello": null}), "t").is_empty(), "no hello yet: the events will say it");
    }
}
