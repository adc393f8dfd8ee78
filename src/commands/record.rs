//! `watch --record FILE`: a device's session as NDJSON, for `sim --replay` (the format is in
//! `sim::replay`).
//!
//! Rules it enforces:
//! - Every recording replays. Attached to a device that is already onboarded, it first writes
//!   what the hub knows of it: the identity and hello, the `initialize` exchange, and every
//!   `tools/list` page as the device cut them, each line marked `"from_hub": true` (the hub's
//!   memory, not frames seen on the wire); then the traffic as it comes. Attached before the
//!   device connects, the identity comes from its `connected` and `hello` events and the
//!   onboarding is recorded as it happens.
//! - Never a token: the identity holds no `Authorization`, and the `initialize` the hub knows is
//!   written without the vision token it carried.
//! - Every line is flushed at once, so a watch ended by Ctrl-C leaves a complete file; the file is
//!   created private (0600) and a symbolic link at its path is never followed.

use serde_json::{Value, json};

use crate::exit::{CodedError, Exit};
use crate::links::hub_client::HubClient;

pub(crate) struct Recorder {
    file: std::io::BufWriter<std::fs::File>,
    path: std::path::PathBuf,
    client_id: Option<String>,
    transport: Option<String>,
    has_identity: bool,
}

impl Recorder {
    /// Opens the file and, if the hub knows the device already, writes what it knows.
    pub(crate) async fn create(path: &std::path::Path, client: &HubClient, device: Option<&str>) -> anyhow::Result<Self> {
        let file = open_record(path)?;
        let mut r = Self { file: std::io::BufWriter::new(file), path: path.to_path_buf(), client_id: None, transport: None, has_identity: false };
        if let Ok(info) = client.call(json!({"op": "device", "device": device, "wait_ms": 0})).await {
            let ts = humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string();
            for line in from_hub(&info, &ts) {
                r.write(&line)?;
                r.has_identity = true;
            }
        }
        Ok(r)
    }

    fn write(&mut self, line: &Value) -> anyhow::Result<()> {
        use std::io::Write;
        writeln!(self.file, "{line}").and_then(|()| self.file.flush()).map_err(|e| CodedError::new(Exit::Internal, format!("cannot write {}: {e}", self.path.display())).into())
    }

    /// One watch event (stamped with `ts`): the identity when the device says hello, every
    /// MCP frame after it.
    pub(crate) fn record(&mut self, ev: &Value) -> anyhow::Result<()> {
        match ev["event"].as_str() {
            Some("connected") => {
                self.client_id = ev["client_id"].as_str().map(str::to_string);
                self.transport = ev["transport"].as_str().map(str::to_string);
                Ok(())
            }
            Some("hello") if !self.has_identity => {
                self.has_identity = true;
                let line = json!({"ts": ev["ts"], "direction": "identity", "device_id": ev["device_id"], "client_id": self.client_id,
                    // The binary protocol version the device announced (its hello says the same as its header).
                    "protocol_version": ev["hello"]["version"], "transport": self.transport, "hello": ev["hello"]});
                self.write(&line)
            }
            Some("traffic") if self.has_identity => {
                let line = json!({"ts": ev["ts"], "direction": ev["direction"], "frame": ev["payload"]});
                self.write(&line)
            }
            _ => Ok(()),
        }
    }
}

/// What the hub knows of a device (its `device` description), as recording lines: the identity
/// and hello; the `initialize` exchange once the device answered it; every `tools/list` page once
/// it is ready (as the device paged them, `tool_pages`, or one page). Nothing for a device that
/// has not said hello. Each line is marked `"from_hub": true`.
pub(crate) fn from_hub(info: &Value, ts: &str) -> Vec<Value> {
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

/// Opens `watch --record`'s file for writing: created private (0600: the traffic carries the
/// vision token the hub hands the device), or an existing regular file truncated. A symbolic link
/// planted at the path (another user pointing it at a file of ours, in a shared /tmp) is never
/// followed: the open fails and nothing is written anywhere.
fn open_record(path: &std::path::Path) -> Result<std::fs::File, CodedError> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600).custom_flags(libc::O_NOFOLLOW);
    }
    options.open(path).map_err(|e| {
        let link = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
        let why = if link { "it is a symbolic link, which --record never follows; remove it or record elsewhere".to_string() } else { e.to_string() };
        CodedError::new(Exit::Usage, format!("cannot write {}: {why}", path.display()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::replay::Recording;

    fn info(tool_pages: Value) -> Value {
        json!({"device_id": "aa:bb:cc:dd:ee:81", "client_id": "c-1", "protocol_version": 1, "transport": "websocket", "phase": "ready",
            "hello": {"type": "hello", "version": 1, "features": {"mcp": true}}, "mcp_protocol_version": "2024-11-05",
            "server_info": {"name": "py-device", "version": "2"}, "capabilities": {"tools": {}},
            "tools": [{"name": "a"}, {"name": "b"}, {"name": "c"}], "tool_pages": tool_pages, "onboarding": {"failed": false}})
    }

    #[test]
    fn what_the_hub_knows_replays_page_by_page() {
        let lines = from_hub(&info(json!([{"tools": 2, "next_cursor": "c"}, {"tools": 1}])), "2026-11-27T12:00:00.000Z");
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
        let lines = from_hub(&info(json!([{"tools": 7, "next_cursor": "x"}])), "t");
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        let rec = Recording::parse(&text).unwrap();
        assert_eq!(rec.answer("tools/list", &json!({"cursor": ""})).unwrap().reply.as_ref().unwrap()["result"]["tools"].as_array().unwrap().len(), 3);
        let mut listing = info(Value::Null);
        listing["phase"] = json!("listing");
        assert!(from_hub(&listing, "t").iter().all(|l| l["frame"]["method"] != "tools/list"));
        assert!(from_hub(&json!({"device_id": "x", "hello": null}), "t").is_empty(), "no hello yet: the events will say it");
    }
}
