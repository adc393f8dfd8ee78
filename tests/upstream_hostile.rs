//! `serve --upstream` against its adversaries: an upstream that uses the hub's ids, reuses its
//! own, sends a frame over the limit, never reads, cannot be reached or redirects its OTA; a
//! device that answers ids nobody asked; a device nobody approved. Each bound is per peer, and
//! each refusal is logged.

mod common;

use std::time::Duration;

use common::upstream::{FakeUpstream, TOKEN};
use common::ws::DEADLINE;
use common::{HubProcess, mcpdev, spawn_mcpdev};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

const D1: &str = "02:00:00:00:00:81";
const HUB_ID_BASE: i64 = 1 << 30;

fn status_call(id: Value) -> Value {
    json!({"type": "mcp", "payload": {"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "self.get_device_status", "arguments": {}}}})
}

#[tokio::test]
async fn an_upstream_using_the_hubs_ids_or_its_own_twice_gets_each_answer_and_the_hub_its_own() {
    let mut up = FakeUpstream::start().await;
    let hub = HubProcess::start(&["--upstream", &up.ws_url.clone(), "--upstream-plain"], &[]).await;
    let _sim = spawn_mcpdev(&["sim", "--url", &hub.device_url, "--device-id", D1], &[("MCPDEV_DEVICE_TOKEN", TOKEN)]);
    let mut conn = up.next_conn().await;
    conn.listed().await;
    // Ids the hub uses for its own requests (it counts from HUB_ID_BASE + 1), and one id twice.
    let ids: Vec<Value> = (1..=12).map(|i| json!(HUB_ID_BASE + i)).chain([json!(7), json!(7), json!("s")]).collect();
    let cli = mcpdev(&hub, &["tools", "list", "--refresh", "-d", D1, "--json"]);
    for id in &ids {
        conn.send(status_call(id.clone()));
    }
    let cli2 = mcpdev(&hub, &["call", "self.audio_speaker.set_volume", "volume=17", "-d", D1, "--json"]);
    let mut answered = Vec::new();
    for _ in &ids {
        let v = loop {
            let v = conn.recv_json().await;
            if v["type"] == "mcp" && v["payload"].get("method").is_none() {
                break v;
            }
        };
        assert!(v["payload"]["result"]["content"][0]["text"].as_str().unwrap_or_default().contains("audio_speaker"), "an answer to the upstream's call, not to the hub's: {v}");
        answered.push(v["payload"]["id"].clone());
    }
    let key = |v: &Value| v.to_string();
    let (mut want, mut got) = (ids.clone(), answered.clone());
    want.sort_by_key(key);
    got.sort_by_key(key);
    assert_eq!(got, want, "each of the upstream's requests got one answer, with its own id");
    let (cli, cli2) = (cli.await, cli2.await);
    assert_eq!(cli.code, 0, "{cli:?}");
    assert!(cli.json()["tools"].as_array().is_some_and(|t| t.len() > 3), "the hub's listing got the device's tools: {cli:?}");
    assert_eq!(cli2.code, 0, "{cli2:?}");
    // Nothing more reached the upstream: no answer to the hub's own requests.
    let extra = conn.received_json().into_iter().filter(|v| v["type"] == "mcp" && v["payload"]["result"]["tools"].is_array() && v["payload"]["id"] != 2).count();
    assert_eq!(extra, 0, "the hub's listing answers reached the upstream");
}

#[tokio::test]
async fn a_device_answering_ids_nobody_asked_is_dropped_and_never_reaches_the_upstream() {
    let mut up = FakeUpstream::start().await;
    let hub = HubProcess::start_capturing(&["--upstream", &up.ws_url.clone(), "--upstream-plain"], &[]).await;
    let mut device = common::ws::device_upgrade(&hub, D1, "c1", Some(TOKEN)).await.unwrap();
    device.send(Message::text(r#"{"type":"hello","version":1,"transport":"websocket"}"#)).await.unwrap();
    let mut conn = up.next_conn().await;
    for id in [json!(555), json!(HUB_ID_BASE + 999), json!("nobody")] {
        let answer = json!({"type": "mcp", "payload": {"jsonrpc": "2.0", "id": id, "result": {"content": []}}});
        device.send(Message::text(answer.to_string())).await.unwrap();
    }
    // A notification after them: it reaches the upstream, and nothing before it but the hello.
    device.send(Message::text(r#"{"type":"mcp","payload":{"jsonrpc":"2.0","method":"notifications/state_changed","params":{"v":1}}}"#)).await.unwrap();
    let next = conn.recv_json().await;
    assert_eq!(next["payload"]["method"], "notifications/state_changed", "{next}");
    let kinds: Vec<Value> = conn.received_json().into_iter().map(|v| v["type"].clone()).collect();
    assert_eq!(kinds, vec![json!("hello"), json!("mcp")]);
    hub.logged(|l| l.contains("answered an id nobody asked")).await;
}

#[tokio::test]
async fn a_frame_over_the_limit_from_the_upstream_closes_the_device_and_says_why() {
    let mut up = FakeUpstream::start().await;
    let hub = HubProcess::start_capturing(&["--upstream", &up.ws_url.clone(), "--upstream-plain"], &[]).await;
    let mut device = common::ws::device_upgrade(&hub, D1, "c1", Some(TOKEN)).await.unwrap();
    device.send(Message::text(r#"{"type":"hello","version":1,"transport":"websocket"}"#)).await.unwrap();
    let conn = up.next_conn().await;
    conn.send_raw(Message::text("x".repeat(2 << 20)));
    let code = loop {
        match tokio::time::timeout(DEADLINE, device.next()).await.expect("a close in time") {
            Some(Ok(Message::Close(c))) => break c.map(|c| u16::from(c.code)),
            Some(Ok(Message::Text(t))) => assert!(t.len() < 1 << 20, "the huge frame reached the device"),
            Some(Ok(_)) => {}
            other => panic!("no close frame: {other:?}"),
        }
    };
    assert_eq!(code, Some(1011));
    hub.logged(|l| l.contains("over the 1048576-byte limit")).await;
}

#[tokio::test]
async fn an_unreachable_upstream_closes_the_device_with_1011_and_is_counted() {
    // A port nothing listens on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("ws://{}/xiaozhi/v1/", closed.local_addr().unwrap());
    drop(closed);
    let hub = HubProcess::start_capturing(&["--upstream", &url, "--upstream-plain"], &[]).await;
    let mut device = common::ws::device_upgrade(&hub, D1, "c1", Some(TOKEN)).await.unwrap();
    let code = loop {
        match tokio::time::timeout(DEADLINE, device.next()).await.expect("a close in time") {
            Some(Ok(Message::Close(c))) => break c.map(|c| u16::from(c.code)),
            Some(Ok(_)) => {}
            other => panic!("no close frame: {other:?}"),
        }
    };
    assert_eq!(code, Some(1011));
    assert!(hub.metric("mcpdev_refusals_total{reason=\"upstream\"}").await >= 1.0);
    let log = hub.logged(|l| l.contains("cannot reach the upstream")).await;
    assert!(!log.contains(TOKEN), "the device's token is never logged: {log}");
}

#[tokio::test]
async fn an_upstream_that_stops_reading_slows_the_device_down_then_ends_the_relay() {
    // An upstream that completes the handshake and never reads again.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("ws://{}/xiaozhi/v1/", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        let _ws = tokio_tungstenite::accept_async(tcp).await.unwrap();
        std::future::pending::<()>().await;
    });
    let hub = HubProcess::start_capturing(&["--upstream", &url, "--upstream-plain"], &[]).await;
    let device = common::ws::device_upgrade(&hub, D1, "c1", Some(TOKEN)).await.unwrap();
    let (mut tx, mut rx) = device.split();
    tx.send(Message::text(r#"{"type":"hello","version":1,"transport":"websocket"}"#)).await.unwrap();
    // Audio as fast as the hub takes it: with backpressure the writes stall long before 256 MiB
    // (the kernel's buffers and the hub's bounded queue hold a few MiB).
    let frame = vec![0x5au8; 16 * 1024];
    let mut sent = 0usize;
    let held_back = loop {
        match tokio::time::timeout(Duration::from_secs(3), tx.send(Message::binary(frame.clone()))).await {
            Ok(Ok(())) if sent < 256 << 20 => sent += frame.len(),
            Ok(Ok(())) => break false,
            Ok(Err(e)) => panic!("the hub dropped the device instead of slowing it down, after {sent} bytes: {e}"),
            Err(_) => break true,
        }
    };
    assert!(held_back && sent < 64 << 20, "the hub took {sent} bytes for an upstream that reads nothing");
    // The upstream never reads: the relay ends within the write deadline (10 s) and the device
    // learns it.
    let ended = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(Ok(m)) = rx.next().await {
            if m.is_close() {
                break;
            }
        }
    })
    .await;
    assert!(ended.is_ok(), "the relay did not end");
    hub.logged(|l| l.contains("the upstream stopped reading")).await;
}

#[tokio::test]
async fn a_redirect_or_an_oversized_answer_from_the_upstream_ota_is_a_502_that_says_why() {
    let up = FakeUpstream::start().await;
    let hub_addr = |hub: &HubProcess| hub.device_url.trim_start_matches("ws://").split('/').next().unwrap().to_string();
    let body = r#"{"mac_address":"02:00:00:00:00:82","uuid":"c-82"}"#;
    let headers = [("Device-Id", "02:00:00:00:00:82"), ("Client-Id", "c-82"), ("Content-Type", "application/json")];
    for (path, says) in [("redirect/", "redirect"), ("huge/", "more than")] {
        let ota = format!("{}{path}", up.ota_url);
        let hub = HubProcess::start(&["--upstream", &up.ws_url.clone(), "--upstream-ota", &ota, "--upstream-plain"], &[]).await;
        let (status, _, answer) = common::ota::exchange(&hub_addr(&hub), "POST", "/xiaozhi/ota/", &headers, body, DEADLINE).await;
        let answer = String::from_utf8_lossy(&answer);
        assert_eq!(status, 502, "{answer}");
        assert!(answer.contains(says), "{answer}");
        assert!(!answer.contains("elsewhere.example"), "the redirect's target is not passed on: {answer}");
    }
}

#[tokio::test]
async fn a_device_is_relayed_only_once_approved_and_only_with_the_approved_client_id() {
    let mut up = FakeUpstream::start().await;
    let hub = HubProcess::start_admitting(&["--upstream", &up.ws_url.clone(), "--upstream-plain"], &[]).await;
    let (status, body) = common::ws::refused(common::ws::device_upgrade(&hub, D1, "the-device", Some(TOKEN)).await);
    assert_eq!(status, 401, "{body}");
    assert!(body.contains("relayed to its upstream with its own token"), "the advice fits a relayed device: {body}");
    let code: String = body.split(|c: char| !c.is_ascii_digit()).find(|w| w.len() == 6).unwrap_or_else(|| panic!("no code in {body}")).to_string();
    assert!(up.try_conn().is_none(), "the hub dialled the upstream for a device nobody approved");
    let approved = mcpdev(&hub, &["devices", "approve", &code]).await;
    assert_eq!(approved.code, 0, "{approved:?}");
    // Another Client-Id with the approved Device-Id stays out, whatever token it carries.
    let (status, _) = common::ws::refused(common::ws::device_upgrade(&hub, D1, "a-stranger", Some(TOKEN)).await);
    assert_eq!(status, 401);
    assert!(up.try_conn().is_none());
    let mut device = common::ws::device_upgrade(&hub, D1, "the-device", Some(TOKEN)).await.expect("the approved binding is relayed");
    device.send(Message::text(r#"{"type":"hello","version":1,"transport":"websocket"}"#)).await.unwrap();
    let conn = up.next_conn().await;
    assert_eq!(conn.headers.get("client-id").map(String::as_str), Some("the-device"));
}

#[tokio::test]
async fn a_hub_restart_loses_no_relayed_approval() {
    let mut up = FakeUpstream::start().await;
    let state = tempfile::tempdir().unwrap();
    let dir = state.path().to_string_lossy().into_owned();
    let env = [("MCPDEV_STATE_DIR", dir.as_str())];
    let args = ["--upstream", &up.ws_url.clone(), "--upstream-plain"];
    let hub = HubProcess::start_admitting(&args, &env).await;
    let (_, body) = common::ws::refused(common::ws::device_upgrade(&hub, D1, "the-device", Some(TOKEN)).await);
    let code: String = body.split(|c: char| !c.is_ascii_digit()).find(|w| w.len() == 6).unwrap_or_else(|| panic!("no code in {body}")).to_string();
    assert_eq!(mcpdev(&hub, &["devices", "approve", &code]).await.code, 0);
    drop(hub);
    let hub = HubProcess::start_admitting(&args, &env).await;
    let mut device = common::ws::device_upgrade(&hub, D1, "the-device", Some(TOKEN)).await.expect("still approved after the restart");
    device.send(Message::text(r#"{"type":"hello","version":1,"transport":"websocket"}"#)).await.unwrap();
    let conn = up.next_conn().await;
    assert_eq!(conn.headers.get("device-id").map(String::as_str), Some(D1));
}

#[tokio::test]
async fn an_upstream_that_never_answers_the_upgrade_gets_the_device_a_close_within_the_deadline() {
    // Slowloris upstream: takes the connection, reads the request, never answers.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("ws://{}/xiaozhi/v1/", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        let _held = tcp;
        std::future::pending::<()>().await;
    });
    let hub = HubProcess::start_capturing(&["--upstream", &url, "--upstream-plain"], &[]).await;
    let started = tokio::time::Instant::now();
    let mut device = common::ws::device_upgrade(&hub, D1, "c1", Some(TOKEN)).await.unwrap();
    let code = loop {
        match tokio::time::timeout(Duration::from_secs(30), device.next()).await.expect("a close within the deadline") {
            Some(Ok(Message::Close(c))) => break c.map(|c| u16::from(c.code)),
            Some(Ok(_)) => {}
            other => panic!("no close frame: {other:?}"),
        }
    };
    assert_eq!(code, Some(1011));
    assert!(started.elapsed() < Duration::from_secs(25), "{:?}", started.elapsed());
    hub.logged(|l| l.contains("did not complete its WebSocket handshake within 10 s")).await;
}
