//! `mcpdev sim` (the built binary) against a WebSocket server in the test: headers, hello,
//! initialize, every tools/list page, calls, invalid calls, notifications, reconnects.

mod common;


use common::ws::{Backend, Conn};
use serde_json::{Value, json};

const MAC: &str = "aa:bb:cc:dd:ee:01";
const EXTRA: usize = 60;

fn mcp(id: Value, method: &str, params: Value) -> String {
    json!({"session_id": "sess-1", "type": "mcp", "payload": {"jsonrpc": "2.0", "id": id, "method": method, "params": params}})
        .to_string()
}

async fn greet(conn: &mut Conn) {
    let hello = conn.recv_text().await;
    assert_eq!(
        hello,
        r#"{"type":"hello","version":1,"features":{"mcp":true,"glyph_push":false},"transport":"websocket","audio_params":{"format":"opus","sample_rate":16000,"channels":1,"frame_duration":60}}"#
    );
    conn.send(r#"{"type":"hello","transport":"websocket","session_id":"sess-1","audio_params":{"format":"opus","sample_rate":24000,"channels":1,"frame_duration":60}}"#).await;
}

#[tokio::test]
async fn sim_walks_the_whole_client_flow() {
    let backend = Backend::start().await;
    let _sim = common::spawn_mcpdev(
        &["sim", "--url", &backend.url(), "--device-id", "AA:BB:CC:DD:EE:01", "--extra-tools", &EXTRA.to_string()],
        &[("MCPDEV_DEVICE_TOKEN", "s3cret")],
    );
    let mut conn = backend.accept().await;

    // The xiaozhi handshake headers; the token never appears in argv.
    assert_eq!(conn.header("authorization"), Some("Bearer s3cret"));
    assert_eq!(conn.header("protocol-version"), Some("1"));
    assert_eq!(conn.header("device-id"), Some(MAC));
    // A random Client-Id (not derived from the MAC, which anyone knows), kept in the state directory.
    let client_id = conn.header("client-id").expect("a Client-Id").to_string();
    assert!(uuid::Uuid::parse_str(&client_id).is_ok(), "{client_id}");
    assert_ne!(client_id, uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_OID, MAC.as_bytes()).to_string());
    greet(&mut conn).await;

    // initialize: the stock reply, whatever version is asked for.
    conn.send(&mcp(json!(1), "initialize", json!({"protocolVersion":"2025-06-18","capabilities":{"vision":{"url":"http://v/explain","token":"t"}}}))).await;
    assert_eq!(
        conn.recv_text().await,
        format!(
            r#"{{"session_id":"sess-1","type":"mcp","payload":{{"jsonrpc":"2.0","id":1,"result":{{"protocolVersion":"2024-11-05","capabilities":{{"tools":{{}}}},"serverInfo":{{"name":"mcpdev-sim","version":"{}"}}}}}}}}"#,
            env!("CARGO_PKG_VERSION")
        )
    );
    conn.send(r#"{"session_id":"sess-1","type":"mcp","payload":{"jsonrpc":"2.0","method":"notifications/initialized"}}"#).await;

    // tools/list over every page.
    let mut names = Vec::new();
    let mut cursor = String::new();
    let mut pages = 0;
    loop {
        pages += 1;
        conn.send(&mcp(json!(100 + pages), "tools/list", json!({"cursor": cursor}))).await;
        let reply = conn.recv_json().await;
        assert_eq!(reply["session_id"], "sess-1");
        assert_eq!(reply["payload"]["id"], 100 + pages);
        let result = &reply["payload"]["result"];
        assert!(result.to_string().len() <= 8000, "page {pages} is {} bytes", result.to_string().len());
        names.extend(result["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_string()));
        match result.get("nextCursor") {
            Some(Value::String(next)) => cursor = next.clone(),
            None => break,
            other => panic!("nextCursor is {other:?}"),
        }
        assert!(pages < 20, "paging does not end");
    }
    assert!(pages >= 3, "only {pages} pages");
    let mut expected: Vec<String> =
        ["self.get_device_status", "self.audio_speaker.set_volume", "self.screen.set_brightness", "self.screen.set_theme"]
            .map(String::from)
            .to_vec();
    expected.extend((1..=EXTRA).map(|n| format!("sim.extra.tool_{n:04}")));
    assert_eq!(names, expected, "every visible tool exactly once, in order; user-only tools hidden");

    // The stock schema shape, byte for byte.
    conn.send(&mcp(json!(2), "tools/list", json!({"cursor": "self.audio_speaker.set_volume", "withUserTools": true}))).await;
    let page = conn.recv_text().await;
    assert!(page.contains(r#"{"name":"self.audio_speaker.set_volume","description":"Set the volume of the audio speaker. If the current volume is unknown, you must call `self.get_device_status` tool first and then call this tool.","inputSchema":{"type":"object","properties":{"volume":{"type":"integer","minimum":0,"maximum":100}},"required":["volume"]}}"#), "{page}");
    assert!(page.contains(r#"{"name":"self.reboot","description":"Reboot the system.","inputSchema":{"type":"object","properties":{}},"annotations":{"audience":["user"]}}"#), "{page}");

    // A call, its reply, and the notification the state change emits.
    conn.send(&mcp(json!(3), "tools/call", json!({"name":"self.audio_speaker.set_volume","arguments":{"volume":50}}))).await;
    assert_eq!(
        conn.recv_text().await,
        r#"{"session_id":"sess-1","type":"mcp","payload":{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"true"}],"isError":false}}}"#
    );
    assert_eq!(
        conn.recv_text().await,
        r#"{"session_id":"sess-1","type":"mcp","payload":{"jsonrpc":"2.0","method":"notifications/state_changed","params":{"newState":50,"oldState":70,"what":"audio_speaker.volume"}}}"#
    );
    conn.send(&mcp(json!("status-1"), "tools/call", json!({"name":"self.get_device_status"}))).await;
    let status = conn.recv_json().await;
    assert_eq!(status["payload"]["id"], "status-1");
    let text: Value = serde_json::from_str(status["payload"]["result"]["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(text["audio_speaker"]["volume"], 50);

    // Invalid calls: exact errors, with codes.
    let cases = [
        (json!({"name":"self.audio_speaker.set_volume","arguments":{"volume":101}}), r#"{"code":-32602,"message":"Value exceeds maximum allowed: 100","data":{"argument":"volume"}}"#),
        (json!({"name":"self.audio_speaker.set_volume","arguments":{"volume":-1}}), r#"{"code":-32602,"message":"Value is below minimum allowed: 0","data":{"argument":"volume"}}"#),
        (json!({"name":"self.audio_speaker.set_volume","arguments":{}}), r#"{"code":-32602,"message":"Missing valid argument: volume","data":{"argument":"volume"}}"#),
        (json!({"name":"self.audio_speaker.set_volume","arguments":{"volume":"50"}}), r#"{"code":-32602,"message":"Invalid type for argument: volume (expected integer)","data":{"argument":"volume"}}"#),
        (json!({"name":"self.nope"}), r#"{"code":-32602,"message":"Unknown tool: self.nope"}"#),
        (json!({"arguments":{}}), r#"{"code":-32602,"message":"Missing name"}"#),
    ];
    for (i, (params, error)) in cases.into_iter().enumerate() {
        let id = 10 + i;
        conn.send(&mcp(json!(id), "tools/call", params)).await;
        assert_eq!(
            conn.recv_text().await,
            format!(r#"{{"session_id":"sess-1","type":"mcp","payload":{{"jsonrpc":"2.0","id":{id},"error":{error}}}}}"#)
        );
    }
    conn.send(&mcp(json!(20), "resources/list", json!({}))).await;
    assert_eq!(
        conn.recv_text().await,
        r#"{"session_id":"sess-1","type":"mcp","payload":{"jsonrpc":"2.0","id":20,"error":{"code":-32601,"message":"Method not implemented: resources/list"}}}"#
    );
    // Garbage and unknown types are ignored; the device still answers afterwards.
    conn.send("not json at all").await;
    conn.send(r#"{"type":"tts","state":"start"}"#).await;
    conn.send(&mcp(json!(21), "ping", json!({}))).await;
    assert_eq!(conn.recv_text().await, r#"{"session_id":"sess-1","type":"mcp","payload":{"jsonrpc":"2.0","id":21,"result":{}}}"#);

    // self.reboot answers, then the device drops the link and comes back with a new hello.
    conn.send(&mcp(json!(22), "tools/call", json!({"name":"self.reboot"}))).await;
    assert_eq!(
        conn.recv_text().await,
        r#"{"session_id":"sess-1","type":"mcp","payload":{"jsonrpc":"2.0","id":22,"result":{"content":[{"type":"text","text":"true"}],"isError":false}}}"#
    );
    conn.expect_closed().await;
    let mut conn = backend.accept().await;
    greet(&mut conn).await;

    // The server going away: the device reconnects (with backoff) and keeps its state.
    conn.close().await;
    let mut conn = backend.accept().await;
    greet(&mut conn).await;
    conn.send(&mcp(json!(30), "tools/call", json!({"name":"self.get_device_status"}))).await;
    let status = conn.recv_json().await;
    let text: Value = serde_json::from_str(status["payload"]["result"]["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(text["audio_speaker"]["volume"], 50, "state survives reconnects");
}

#[tokio::test]
async fn sim_runs_many_devices_with_distinct_ids() {
    let backend = Backend::start().await;
    let _sim = common::spawn_mcpdev(&["sim", "--url", &backend.url(), "--device-id", "02:00:00:00:00:fe", "--count", "3"], &[]);
    let mut ids = Vec::new();
    for _ in 0..3 {
        let conn = backend.accept().await;
        assert_eq!(conn.header("authorization"), None, "no token, no Authorization header");
        ids.push(conn.header("device-id").unwrap().to_string());
    }
    ids.sort();
    assert_eq!(ids, ["02:00:00:00:00:fe", "02:00:00:00:00:ff", "02:00:00:00:01:00"]);
}
