//! No device text can write on the person's terminal (issue 22 item 4). Every human-mode command
//! runs on a pseudo-terminal against a device whose every string carries escape sequences
//! (clear-screen, window title, OSC 52 clipboard, OSC 8 link, `\r` + erase-line, U+202E, C1
//! CSI), and against an MCP server that does the same (`--url`). With NO_COLOR the CLI writes no
//! control of its own, so the output may hold no control character but newline, and no bidi
//! control, while the device's text is still shown, escaped. Identity fields that carry controls
//! are refused at the door, over the real WebSocket and OTA listeners, with no credential.

mod common;

use std::time::Duration;

use common::ota::http;
use common::pty::{PtyCommand, run_async};
use common::{HubProcess, mcpdev};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

const DEV: &str = "02:00:00:00:0e:01";

/// Every sequence the issue tried, in one string.
const EVIL: &str = "\u{1b}[2J\u{1b}]0;pwned\u{7}\u{1b}]52;c;cHduZWQ=\u{7}\u{1b}]8;;http://evil.example\u{1b}\\link\u{1b}]8;;\u{1b}\\\r\u{1b}[2K\u{202e}txet\u{9b}31m";

fn evil(label: &str) -> String {
    format!("{label}{EVIL}")
}

/// The output carries no control but newline and no bidi control, and (unless `shown` is empty)
/// shows the device's text escaped: the test sees that device text got there at all.
fn assert_safe(what: &str, code: Option<i32>, out: &str, shown: &str) {
    let bad: Vec<(usize, char)> = out.char_indices().filter(|(_, c)| mcpdev::wire::identity::is_control_text(*c) && *c != '\n').collect();
    assert!(bad.is_empty(), "{what} (exit {code:?}) wrote raw controls {bad:?}:\n{}", out.escape_debug());
    if !shown.is_empty() {
        assert!(out.contains(shown), "{what} (exit {code:?}) does not show the device's text {shown:?} escaped:\n{out}");
    }
}

/// A device whose every string is hostile: hello, serverInfo, tool names and descriptions, call
/// results, errors, notifications. It answers until the test ends; `notify` makes it send a
/// notification.
async fn hostile_device(url: &str) -> tokio::sync::mpsc::Sender<()> {
    let mut req = url.into_client_request().unwrap();
    req.headers_mut().insert("Device-Id", DEV.parse().unwrap());
    req.headers_mut().insert("Client-Id", "hostile-client".parse().unwrap());
    req.headers_mut().insert("Protocol-Version", "1".parse().unwrap());
    let (mut ws, _) = tokio_tungstenite::connect_async(req).await.expect("the device connects");
    let hello = json!({"type": "hello", "version": 1, "transport": "websocket",
        "features": {"mcp": true, evil("feature"): evil("on")},
        "audio_params": {"format": evil("opus"), "sample_rate": 16000, "channels": 1, "frame_duration": 60}});
    ws.send(Message::text(hello.to_string())).await.unwrap();
    let (tx, mut notify) = tokio::sync::mpsc::channel::<()>(4);
    tokio::spawn(async move {
        let mut session = String::new();
        loop {
            let m = tokio::select! {
                m = ws.next() => m,
                Some(()) = notify.recv() => {
                    let n = json!({"session_id": session, "type": "mcp", "payload": {"jsonrpc": "2.0", "method": "notifications/state_changed", "params": {"what": evil("notified")}}});
                    ws.send(Message::text(n.to_string())).await.unwrap();
                    continue;
                }
            };
            let Some(Ok(Message::Text(t))) = m else { return };
            let v: Value = serde_json::from_str(&t).unwrap();
            if v["type"] == "hello" {
                session = v["session_id"].as_str().unwrap_or_default().to_string();
            }
            let p = &v["payload"];
            if v["type"] != "mcp" || p.get("id").is_none() {
                continue;
            }
            let answer = match p["method"].as_str().unwrap_or_default() {
                "initialize" => json!({"result": {"protocolVersion": "2024-11-05", "capabilities": {"tools": {}}, "serverInfo": {"name": evil("server"), "version": evil("v")}}}),
                "tools/list" => json!({"result": {"tools": [
                    {"name": "self.evil_status", "description": evil("description"), "inputSchema": {"type": "object", "properties": {"mode": {"type": "string", "description": evil("param")}}}},
                    {"name": evil("self.name"), "description": "a tool whose name is hostile", "inputSchema": {"type": "object", "properties": {}}},
                ]}}),
                "tools/call" if p["params"]["arguments"]["mode"] == "fail" => json!({"error": {"code": -32000, "message": evil("error")}}),
                "tools/call" => json!({"result": {"content": [{"type": "text", "text": evil("result")}, {"type": "text", "text": json!({"nested": evil("json")}).to_string()}], "isError": false}}),
                _ => json!({"error": {"code": -32601, "message": evil("error")}}),
            };
            let mut payload = json!({"jsonrpc": "2.0", "id": p["id"]});
            payload.as_object_mut().unwrap().extend(answer.as_object().unwrap().clone());
            let reply = json!({"session_id": session, "type": "mcp", "payload": payload});
            if ws.send(Message::text(reply.to_string())).await.is_err() {
                return;
            }
        }
    });
    tx
}

/// An MCP server (Streamable HTTP, JSON answers) whose every string is hostile.
async fn hostile_mcp_server() -> String {
    use axum::http::{HeaderMap, StatusCode, header};
    use axum::response::IntoResponse;
    let app = axum::Router::new().route(
        "/mcp",
        axum::routing::post(|body: String| async move {
            let req: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
            if req.get("id").is_none() {
                return StatusCode::ACCEPTED.into_response();
            }
            let result = match req["method"].as_str().unwrap_or_default() {
                "initialize" => json!({"protocolVersion": req["params"]["protocolVersion"], "capabilities": {"tools": {}}, "serverInfo": {"name": evil("server"), "version": evil("v")}, "instructions": evil("instructions")}),
                "tools/list" => json!({"tools": [{"name": "evil", "description": evil("description"), "inputSchema": {"type": "object", "properties": {}}}]}),
                "tools/call" => json!({"content": [{"type": "text", "text": evil("result")}], "isError": false}),
                _ => json!({}),
            };
            let mut headers = HeaderMap::new();
            headers.insert(header::CONTENT_TYPE, "application/json".parse().unwrap());
            headers.insert("mcp-session-id", "s1".parse().unwrap());
            (headers, json!({"jsonrpc": "2.0", "id": req["id"], "result": result}).to_string()).into_response()
        })
        .get(|| async { StatusCode::METHOD_NOT_ALLOWED })
        .delete(|| async { StatusCode::OK }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}/mcp")
}

/// A system-info body whose board, chip and firmware are hostile (what `hello` shows as "(OTA)").
fn hostile_system_info() -> String {
    json!({"version": 2, "mac_address": DEV, "uuid": "5f0c2a8e-1111-4222-8333-944455556666", "chip_model_name": evil("chip"),
        "application": {"name": evil("firmware"), "version": evil("1")}, "board": {"type": evil("board"), "name": evil("board")}})
    .to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn no_device_text_reaches_the_terminal_raw() {
    let hub = HubProcess::start(&[], &[]).await;
    // An unauthenticated check-in reports a hostile board (not an identity field: taken).
    let (status, body) = http(&hub, "POST", "/xiaozhi/ota/", &[("Device-Id", DEV), ("Content-Type", "application/json")], &hostile_system_info()).await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let notify = hostile_device(&hub.device_url).await;
    let ready = mcpdev(&hub, &["tools", "list", "-d", DEV, "--wait", "20s", "--json"]).await;
    assert_eq!(ready.code, 0, "{ready:?}");
    // --json stays exact: the device's strings come back byte for byte.
    assert_eq!(ready.json()["tools"][0]["description"], evil("description"), "{}", ready.stdout);
    assert!(!ready.stdout.contains('\u{9b}') && !ready.stdout.contains('\u{202e}'), "JSON escapes C1 and bidi too: {:?}", ready.stdout);

    let env = [("MCPDEV_HUB", hub.host_url.as_str()), ("MCPDEV_RUNTIME_DIR", hub.runtime_dir.as_str()), ("NO_COLOR", "1")];
    let commands: [(&[&str], &str); 7] = [
        (&["tools", "list", "-d", DEV], "description\\e[2J\\e]0;pwned\\x07"),
        (&["init", "-d", DEV], "server\\e[2J"),
        (&["init", "-d", DEV, "--live"], "server\\e[2J"),
        (&["call", "self.evil_status", "-d", DEV], "result\\e[2J\\e]0;pwned\\x07\\e]52;c;cHduZWQ=\\x07\\e]8;;http://evil.example\\e\\link\\e]8;;\\e\\\\r\\e[2K\\u{202e}txet\\u{9b}31m"),
        (&["hello", "-d", DEV], "board\\e[2J"),
        (&["devices"], DEV),
        (&["call", "self.evil_status", "-d", DEV, "mode=x", "--json"], "\\u001b[2J"),
    ];
    for (args, shown) in commands {
        let (code, out) = run_async(args, &env, 250).await;
        assert_eq!(code, Some(0), "{out}");
        assert_safe(&args.join(" "), code, &out, shown);
    }
    // The device's error, quoted by the CLI on stderr; the hello table's other cells.
    let (code, out) = run_async(&["call", "self.evil_status", "mode=fail", "-d", DEV], &env, 250).await;
    assert_ne!(code, Some(0), "{out}");
    assert_safe("call that fails", code, &out, "error\\e[2J");
    let (code, out) = run_async(&["hello", "-d", DEV], &env, 250).await;
    for shown in ["chip\\e[2J", "firmware\\e[2J", "feature\\u001b[2J", "opus\\u001b[2J", "\\u{202e}"] {
        assert_safe("hello", code, &out, shown);
    }
    // check's human report quotes what the device said.
    let (code, out) = run_async(&["check", "-d", DEV, "--timeout", "3s"], &env, 120).await;
    assert!(matches!(code, Some(0 | 10)), "check ran: {out}");
    assert_safe("check", code, &out, "");

    // watch's human form: a notification and a call's traffic, each carrying the device's text.
    let mut watch = PtyCommand::spawn(&["watch", "--traffic", "-d", DEV, "--count", "3"], &env, 100);
    let watching = tokio::task::spawn_blocking(move || {
        let ok = watch.read_until("watching", Duration::from_secs(30));
        (ok, watch)
    });
    let (ok, watch) = watching.await.unwrap();
    assert!(ok, "watch started: {}", String::from_utf8_lossy(&watch.seen));
    notify.send(()).await.unwrap();
    assert_eq!(mcpdev(&hub, &["call", "self.evil_status", "-d", DEV]).await.code, 0);
    let (code, out) = tokio::task::spawn_blocking(move || watch.finish(Duration::from_secs(30))).await.unwrap();
    let out = String::from_utf8(out).unwrap();
    assert_eq!(code, Some(0), "{out}");
    assert_safe("watch", code, &out, "notified\\u001b[2J");
    assert!(out.contains("\\u{202e}"), "the bidi override is shown escaped: {out}");

    // A hostile MCP server through --url.
    let url = hostile_mcp_server().await;
    for (args, shown) in [
        (vec!["tools", "list", "--url", &url], "description\\e[2J"),
        (vec!["init", "--url", &url], "server\\e[2J"),
        (vec!["call", "evil", "--url", &url], "result\\e[2J"),
    ] {
        let (code, out) = run_async(&args, &[("NO_COLOR", "1")], 100).await;
        assert_eq!(code, Some(0), "{out}");
        assert_safe("--url", code, &out, shown);
    }
}

/// Control characters in identity fields are refused with a 400 that names the field, on the
/// WebSocket (headers, and the percent-decoded query string) and at OTA (header and body
/// `uuid`), with no credential at all; nothing of them reaches `devices pending`.
#[tokio::test(flavor = "multi_thread")]
async fn identity_fields_with_controls_are_refused_at_the_door() {
    let hub = HubProcess::start_admitting(&[], &[]).await;
    let addr = hub.device_url.trim_start_matches("ws://").split('/').next().unwrap().to_string();
    let ws_refusal = |query: &str, client_header: Option<&str>| {
        let mut req = format!("ws://{addr}/xiaozhi/v1/{query}").into_client_request().unwrap();
        if let Some(c) = client_header {
            req.headers_mut().insert("Client-Id", axum::http::HeaderValue::from_bytes(c.as_bytes()).unwrap());
        }
        async move {
            match tokio_tungstenite::connect_async(req).await {
                Err(tokio_tungstenite::tungstenite::Error::Http(resp)) => (resp.status().as_u16(), String::from_utf8_lossy(resp.body().as_deref().unwrap_or_default()).into_owned()),
                other => panic!("not refused: {:?}", other.map(|(_, r)| r.status())),
            }
        }
    };
    let mac = "02:00:00:00:0e:02";
    for (query, header, field) in [
        (format!("?device-id={mac}&client-id=%1b%5b2J%1b%5d0%3bpwned%07"), None, "Client-Id"),
        (format!("?device-id={mac}&client-id=ok%0d%1b%5b2K"), None, "Client-Id"),
        (format!("?device-id={mac}&client-id=%E2%80%AEtxet"), None, "Client-Id"),
        (format!("?device-id={mac}&client-id=%C2%9B31m"), None, "Client-Id"),
        (format!("?device-id={mac}%1b%5b2J"), None, "Device-Id"),
        (format!("?device-id={mac}"), Some("tab\there"), "Client-Id"),
        (format!("?device-id={mac}"), Some("\u{202e}txet"), "Client-Id"),
    ] {
        let (status, body) = ws_refusal(&query, header).await;
        assert_eq!(status, 400, "{query}: {body}");
        assert!(body.contains(field) && body.contains("control character"), "{query}: {body}");
    }
    // OTA: the Client-Id header, and the body's uuid.
    let info = |uuid: &str| json!({"mac_address": mac, "uuid": uuid, "application": {"name": "xiaozhi", "version": "1"}}).to_string();
    let (status, body) = http(&hub, "POST", "/xiaozhi/ota/", &[("Device-Id", mac), ("Client-Id", "tab\there")], &info("fine")).await;
    assert_eq!((status, String::from_utf8_lossy(&body).contains("Client-Id contains a control character")), (400, true), "{}", String::from_utf8_lossy(&body));
    let (status, body) = http(&hub, "POST", "/xiaozhi/ota/", &[("Device-Id", mac)], &info(&evil("uuid"))).await;
    assert_eq!((status, String::from_utf8_lossy(&body).contains("uuid contains a control character")), (400, true), "{}", String::from_utf8_lossy(&body));
    // Nothing was queued by those; a plain check-in is, and the table shows it.
    let env = [("MCPDEV_HUB", hub.host_url.as_str()), ("MCPDEV_RUNTIME_DIR", hub.runtime_dir.as_str()), ("NO_COLOR", "1")];
    let (code, out) = run_async(&["devices", "pending"], &env, 250).await;
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("0 request(s) waiting") || out.contains("0 device(s) waiting"), "a refused request is not pending: {out}");
    // What a check-in reports beside its identity (board, chip, firmware) is taken, and shown escaped.
    let reported = json!({"mac_address": mac, "uuid": "7d4e3f9a-1c2b-4a5d-9e8f-0a1b2c3d4e5f", "chip_model_name": evil("chip"),
        "application": {"name": evil("firmware"), "version": "1"}, "board": {"type": evil("board"), "name": evil("board")}});
    let (status, _) = http(&hub, "POST", "/xiaozhi/ota/", &[("Device-Id", mac), ("Client-Id", "7d4e3f9a-1c2b-4a5d-9e8f-0a1b2c3d4e5f")], &reported.to_string()).await;
    assert_eq!(status, 200);
    let (code, out) = run_async(&["devices", "pending"], &env, 400).await;
    assert_eq!(code, Some(0), "{out}");
    assert_safe("devices pending", code, &out, "7d4e3f9a-1c2b-4a5d-9e8f-0a1b2c3d4e5f");
    assert_safe("devices pending", code, &out, "\\e[2J");
}

/// A terminal that reports 0 columns (some CI runners, `script`): tables are laid out for 80,
/// not squeezed to nothing.
#[tokio::test(flavor = "multi_thread")]
async fn a_terminal_of_width_0_gets_80_columns() {
    let hub = HubProcess::start(&["--demo", "1"], &[]).await;
    assert_eq!(mcpdev(&hub, &["hello", "-d", "02:00:00:00:00:01", "--wait", "20s"]).await.code, 0);
    let env = [("MCPDEV_HUB", hub.host_url.as_str()), ("MCPDEV_RUNTIME_DIR", hub.runtime_dir.as_str()), ("NO_COLOR", "1")];
    let (code, out) = run_async(&["tools", "list", "-d", "02:00:00:00:00:01"], &env, 0).await;
    assert_eq!(code, Some(0), "{out}");
    let table: Vec<&str> = out.lines().filter(|l| l.starts_with(['┌', '│', '├', '└', '╞', '╭'])).collect();
    assert!(table.len() > 3, "a boxed table at a terminal: {out}");
    let widest = table.iter().map(|l| l.chars().count()).max().unwrap();
    assert_eq!(widest, 80, "laid out for 80 columns:\n{out}");
    assert!(out.contains("self.audio_speaker.set_volume"), "tool names whole:\n{out}");
}
