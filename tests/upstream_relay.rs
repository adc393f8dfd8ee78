//! `serve --upstream`: a device keeps its own voice backend (an upstream written for the tests
//! that speaks as xiaozhi-esp32-server does, `common::upstream`) while the hub watches and calls
//! it. Devices: `mcpdev sim`, a raw WebSocket client, and xiaozhi-sdk (`upstream_sdk.rs`).

mod common;

use std::time::Duration;

use common::upstream::{FakeUpstream, TOKEN, UpConn};
use common::ws::DEADLINE;
use common::{HubProcess, mcpdev, spawn_mcpdev};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

const D1: &str = "02:00:00:00:00:71";
/// The first id of the hub's own requests to a relayed device (`links::relay::calls`).
const HUB_ID_BASE: i64 = 1 << 30;

async fn relaying_hub(up: &FakeUpstream, extra: &[&str]) -> HubProcess {
    let mut args = vec!["--upstream", up.ws_url.as_str(), "--upstream-plain"];
    args.extend_from_slice(extra);
    HubProcess::start(&args, &[]).await
}

/// A hub relaying `mcpdev sim` (D1, with the upstream's token) to a fresh upstream, once the
/// upstream listed the device and the hub has its tools.
async fn relayed_sim() -> (FakeUpstream, HubProcess, common::Running, UpConn) {
    let mut up = FakeUpstream::start().await;
    let hub = relaying_hub(&up, &[]).await;
    let sim = spawn_mcpdev(&["sim", "--url", &hub.device_url, "--device-id", D1], &[("MCPDEV_DEVICE_TOKEN", TOKEN)]);
    let mut conn = up.next_conn().await;
    conn.listed().await;
    assert_eq!(mcpdev(&hub, &["tools", "list", "-d", D1, "--wait", "30s", "--json"]).await.code, 0);
    (up, hub, sim, conn)
}

/// Every JSON-RPC id the upstream got an answer for, in order (panics on a request or anything
/// else MCP that is not an answer: the upstream never asked the device for those).
fn answered_ids(conn: &UpConn) -> Vec<Value> {
    conn.received_json()
        .into_iter()
        .filter(|v| v["type"] == "mcp")
        .filter(|v| v["payload"].get("method").is_none_or(|m| !m.as_str().unwrap_or_default().starts_with("notifications/")))
        .map(|v| {
            assert!(v["payload"].get("method").is_none(), "the upstream received a request it did not cause: {v}");
            v["payload"]["id"].clone()
        })
        .collect()
}

#[tokio::test]
async fn a_sim_keeps_its_upstream_while_the_cli_lists_and_calls_its_tools() {
    let mut up = FakeUpstream::start().await;
    let hub = relaying_hub(&up, &[]).await;
    let _sim = spawn_mcpdev(&["sim", "--url", &hub.device_url, "--device-id", D1], &[("MCPDEV_DEVICE_TOKEN", TOKEN)]);
    let mut conn = up.next_conn().await;
    // The device's own headers reached the upstream: its token, its identity.
    assert_eq!(conn.headers.get("authorization").map(String::as_str), Some(format!("Bearer {TOKEN}").as_str()));
    assert_eq!(conn.headers.get("device-id").map(String::as_str), Some(D1));
    assert!(conn.headers.get("client-id").is_some_and(|c| !c.is_empty()), "{:?}", conn.headers);
    assert_eq!(conn.headers.get("protocol-version").map(String::as_str), Some("1"));
    // The upstream initialized and listed the device itself, through the hub.
    let upstream_tools = conn.listed().await;
    assert!(upstream_tools.len() > 3, "{upstream_tools:?}");

    // The hub knows the same tools (its own listing, with its own ids) ...
    let listed = mcpdev(&hub, &["tools", "list", "-d", D1, "--wait", "30s", "--json"]).await;
    assert_eq!(listed.code, 0, "{listed:?}");
    let names = |tools: &[Value]| tools.iter().map(|t| t["name"].as_str().unwrap().to_string()).collect::<std::collections::BTreeSet<_>>();
    assert_eq!(names(listed.json()["tools"].as_array().unwrap()), names(&upstream_tools));
    // ... and the device's answer to the upstream's initialize is what `init` shows.
    let init = mcpdev(&hub, &["init", "-d", D1, "--json"]).await;
    assert_eq!(init.code, 0, "{init:?}");
    assert!(init.stdout.contains("2024-11-05"), "{}", init.stdout);

    // The upstream calls one tool while the CLI calls another: each gets its own answer.
    let cli = mcpdev(&hub, &["call", "self.audio_speaker.set_volume", "volume=42", "-d", D1, "--json"]);
    conn.send(json!({"type": "mcp", "payload": {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "self.get_device_status", "arguments": {}}}}));
    let cli = cli.await;
    assert_eq!(cli.code, 0, "{cli:?}");
    assert_eq!(cli.json()["isError"].as_bool().unwrap_or(false), false, "{cli:?}");
    let theirs = conn.answer(json!(3)).await;
    let status = theirs["payload"]["result"]["content"][0]["text"].as_str().unwrap_or_default();
    assert!(status.contains("audio_speaker"), "the upstream got get_device_status's answer, not set_volume's: {theirs}");
    // After the CLI's set_volume, the upstream's own call sees the volume the CLI set.
    conn.send(json!({"type": "mcp", "payload": {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "self.get_device_status", "arguments": {}}}}));
    let after = conn.answer(json!(4)).await;
    assert!(after["payload"]["result"]["content"][0]["text"].as_str().unwrap_or_default().contains("42"), "{after}");

    // The upstream never received a frame the hub originated: one hello (the device's), and
    // answers to exactly the ids it asked, each once.
    let hellos = conn.received_json().into_iter().filter(|v| v["type"] == "hello").count();
    assert_eq!(hellos, 1);
    let ids = answered_ids(&conn);
    let pages = ids.iter().filter(|id| **id == json!(2)).count();
    assert!(pages >= 1);
    assert_eq!(ids.iter().filter(|id| **id != json!(2)).cloned().collect::<Vec<_>>(), vec![json!(1), json!(3), json!(4)], "{ids:?}");
    assert!(ids.iter().all(|id| id.as_i64().is_some_and(|n| n < HUB_ID_BASE)));
}

#[tokio::test]
async fn watch_labels_each_frame_with_who_sent_it() {
    let (_up, hub, _sim, mut conn) = relayed_sim().await;
    let mut watch = spawn_mcpdev(&["watch", "--json", "--traffic", "-d", D1], &[("MCPDEV_HUB", hub.host_url.as_str())]);
    let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(watch.child.stdout.take().unwrap()));
    // The watch is live once it has sent its first line: wait for it by a call of our own.
    let mut seen = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let mut asked = false;
    while tokio::time::Instant::now() < deadline {
        if !asked {
            let cli = mcpdev(&hub, &["call", "self.get_device_status", "-d", D1, "--json"]).await;
            assert_eq!(cli.code, 0, "{cli:?}");
            conn.send(json!({"type": "mcp", "payload": {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "self.get_device_status", "arguments": {}}}}));
            conn.answer(json!(9)).await;
            asked = true;
        }
        let Ok(Ok(Some(line))) = tokio::time::timeout(Duration::from_secs(5), lines.next_line()).await else { asked = false; continue };
        let v: Value = serde_json::from_str(&line).unwrap();
        if v["event"] == "traffic" {
            seen.push((v["direction"].as_str().unwrap().to_string(), v["by"].as_str().unwrap_or("-").to_string(), v["payload"]["id"].clone()));
        }
        let has = |d: &str, by: &str| seen.iter().any(|(dd, b, _)| dd == d && b == by);
        if has("out", "host") && has("out", "upstream") && has("in", "device") {
            break;
        }
    }
    let has = |d: &str, by: &str| seen.iter().any(|(dd, b, _)| dd == d && b == by);
    assert!(has("out", "host") && has("out", "upstream") && has("in", "device"), "{seen:?}");
    assert!(seen.iter().any(|(d, by, id)| d == "out" && by == "upstream" && *id == json!(9)), "{seen:?}");
}

/// A device without the SDK: its binary frames, byte for byte.
async fn raw_device(hub: &HubProcess, device: &str, client: &str) -> common::ws::DeviceWs {
    common::ws::device_upgrade(hub, device, client, Some(TOKEN)).await.expect("the hub takes the device")
}

#[tokio::test]
async fn binary_frames_pass_byte_identical_both_ways_and_a_close_ends_both_sides() {
    let mut up = FakeUpstream::start().await;
    let hub = relaying_hub(&up, &[]).await;
    let mut device = raw_device(&hub, D1, "client-1").await;
    device.send(Message::text(json!({"type": "hello", "version": 1, "transport": "websocket", "audio_params": {"format": "opus", "sample_rate": 16000, "channels": 1, "frame_duration": 60}}).to_string())).await.unwrap();
    let mut conn = up.next_conn().await;
    let server_hello = next_text(&mut device).await;
    assert_eq!(server_hello["session_id"], conn.session_id, "the upstream's own hello, not the hub's: {server_hello}");
    let frames: Vec<Vec<u8>> = (0..64u32).map(|i| (0..(i * 37 % 1500 + 1)).map(|j| (j.wrapping_mul(31) ^ i.wrapping_mul(7)) as u8).collect()).collect();
    for f in &frames {
        device.send(Message::binary(f.clone())).await.unwrap();
    }
    for (i, f) in frames.iter().enumerate() {
        match conn.recv().await {
            Message::Binary(b) => assert_eq!(b.as_ref(), f.as_slice(), "frame {i} up"),
            other => panic!("frame {i}: {other:?}"),
        }
    }
    for f in frames.iter().rev() {
        conn.send_raw(Message::binary(f.clone()));
    }
    for (i, f) in frames.iter().rev().enumerate() {
        loop {
            match tokio::time::timeout(DEADLINE, device.next()).await.expect("a frame in time").unwrap().unwrap() {
                Message::Binary(b) => {
                    assert_eq!(b.as_ref(), f.as_slice(), "frame {i} down");
                    break;
                }
                Message::Text(_) | Message::Ping(_) | Message::Pong(_) => {}
                other => panic!("frame {i} down: {other:?}"),
            }
        }
    }
    // The upstream ends the session: the device gets a close with the upstream's code.
    conn.send_raw(Message::Close(Some(tokio_tungstenite::tungstenite::protocol::CloseFrame { code: 4000.into(), reason: "bye".into() })));
    let code = close_code(&mut device).await;
    assert_eq!(code, Some(4000));

    // A device that leaves ends its upstream session.
    let mut device = raw_device(&hub, D1, "client-1").await;
    device.send(Message::text(r#"{"type":"hello","version":1,"transport":"websocket"}"#)).await.unwrap();
    let mut conn = up.next_conn().await;
    device.close(None).await.unwrap();
    conn.ended().await;
}

async fn next_text(ws: &mut common::ws::DeviceWs) -> Value {
    loop {
        match tokio::time::timeout(DEADLINE, ws.next()).await.expect("a message in time").expect("open").expect("no error") {
            Message::Text(t) => return serde_json::from_str(&t).unwrap(),
            Message::Close(c) => panic!("closed: {c:?}"),
            _ => {}
        }
    }
}

/// The code of the close the device gets (waiting for it).
async fn close_code(ws: &mut common::ws::DeviceWs) -> Option<u16> {
    loop {
        match tokio::time::timeout(DEADLINE, ws.next()).await.expect("a close in time") {
            Some(Ok(Message::Close(c))) => return c.map(|c| u16::from(c.code)),
            Some(Ok(_)) => {}
            None | Some(Err(_)) => panic!("the connection ended without a close frame"),
        }
    }
}

#[tokio::test]
async fn the_ota_check_in_and_activate_pass_through_with_only_the_documented_rewrite() {
    let mut up = FakeUpstream::start().await;
    let hub = relaying_hub(&up, &["--upstream-ota", &up.ota_url.clone()]).await;
    let hub_addr = hub.device_url.trim_start_matches("ws://").split('/').next().unwrap().to_string();
    let up_addr = up.ota_url.trim_start_matches("http://").split('/').next().unwrap().to_string();
    let body = r#"{"mac_address":"02:00:00:00:00:72","uuid":"c-72","application":{"name":"xiaozhi","version":"1.6.0"}}"#;
    let headers = [("Device-Id", "02:00:00:00:00:72"), ("Client-Id", "c-72"), ("Content-Type", "application/json"), ("User-Agent", "bread-compact-wifi/1.6.0"), ("Accept-Language", "zh-CN"), ("Activation-Version", "2")];
    let (status, _, through_hub) = common::ota::exchange(&hub_addr, "POST", "/xiaozhi/ota/", &headers, body, DEADLINE).await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&through_hub));
    let (_, _, direct) = common::ota::exchange(&up_addr, "POST", "/xiaozhi/ota/", &headers, body, DEADLINE).await;
    let (through_hub, mut direct): (Value, Value) = (serde_json::from_slice(&through_hub).unwrap(), serde_json::from_slice(&direct).unwrap());
    // Only websocket.url changed, and mqtt is gone: the rest is the upstream's, byte for byte.
    direct["websocket"]["url"] = json!(hub.device_url);
    direct.as_object_mut().unwrap().remove("mqtt");
    assert_eq!(through_hub, direct);
    assert_eq!(through_hub["activation"]["code"], "654321", "the activation is the upstream's");
    // The upstream got the device's own headers and body.
    let (path, got, sent) = up.ota_requests.lock().unwrap()[0].clone();
    assert_eq!((path.as_str(), sent.as_str()), ("/xiaozhi/ota/", body));
    for (k, v) in headers {
        assert_eq!(got.get(&k.to_ascii_lowercase()).map(String::as_str), Some(v), "{k}: {got:?}");
    }
    // /activate passes through: 202 while the upstream says pending, then its 200.
    let (first, _, said) = common::ota::exchange(&hub_addr, "POST", "/xiaozhi/ota/activate", &headers, "{}", DEADLINE).await;
    assert_eq!((first, String::from_utf8_lossy(&said).into_owned()), (202, "pending upstream".to_string()));

    // A sim that bootstraps through the hub's OTA activates with the upstream, then connects to
    // the hub with the upstream's token, which reaches the upstream.
    let ota = format!("http://{hub_addr}/xiaozhi/ota/");
    let _sim = spawn_mcpdev(&["sim", "--ota", &ota, "--device-id", "02:00:00:00:00:73"], &[]);
    let mut conn = up.next_conn().await;
    assert_eq!(conn.headers.get("authorization").map(String::as_str), Some(format!("Bearer {TOKEN}").as_str()));
    conn.listed().await;
    let listed = mcpdev(&hub, &["tools", "list", "-d", "02:00:00:00:00:73", "--wait", "30s", "--json"]).await;
    assert_eq!(listed.code, 0, "{listed:?}");
}

#[tokio::test]
async fn check_through_the_hub_skips_what_would_disturb_the_upstream_and_says_why() {
    let (_up, hub, _sim, conn) = relayed_sim().await;
    let out = mcpdev(&hub, &["check", "--json", "-d", D1, "--timeout", "5s"]).await;
    let report = out.json();
    let results = report["results"].as_array().unwrap_or_else(|| panic!("{report:#}"));
    let of = |id: &str| results.iter().find(|c| c["id"] == id).unwrap_or_else(|| panic!("no {id}: {report:#}")).clone();
    for id in ["initialize.vision", "initialize.protocol_version", "initialize.server_info", "initialize.capabilities_tools"] {
        let c = of(id);
        assert_eq!(c["status"], "skip", "{c}");
        assert!(c["reason"].as_str().unwrap().contains("relayed to its upstream"), "{c}");
    }
    // The rest ran (through the hub, with the hub's own ids), and the device's answer to the
    // upstream's initialize stands for the check's.
    assert_eq!(of("tools_list.names")["status"], "pass", "{report:#}");
    assert!(report["server_info"].is_object(), "{report:#}");
    assert_eq!(out.code, 0, "{out:?}");
    // None of it reached the upstream.
    let requests_seen: Vec<Value> = conn.received_json().into_iter().filter(|v| v["type"] == "mcp" && v["payload"].get("method").is_none()).map(|v| v["payload"]["id"].clone()).collect();
    assert!(requests_seen.iter().all(|id| *id == json!(1) || *id == json!(2)), "{requests_seen:?}");
}

#[tokio::test]
async fn the_upstreams_own_call_is_recorded_and_replays_in_ci() {
    let (_up, hub, _sim, mut conn) = relayed_sim().await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("relayed.ndjson");
    let mut watch = spawn_mcpdev(&["watch", "--json", "-d", D1, "--record", file.to_str().unwrap()], &[("MCPDEV_HUB", &hub.host_url)]);
    let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(watch.child.stdout.take().unwrap()));
    let first = tokio::time::timeout(DEADLINE, lines.next_line()).await.expect("watch starts").unwrap().unwrap();
    assert!(first.contains("\"watching\""), "{first}");
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    // The backend's own call, as it happens.
    conn.send(json!({"type": "mcp", "payload": {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "self.get_device_status", "arguments": {}}}}));
    let theirs = conn.answer(json!(5)).await;
    let recorded = tokio::time::timeout(DEADLINE, async {
        loop {
            let text = std::fs::read_to_string(&file).unwrap_or_default();
            if text.lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()).any(|v| v["direction"] == "in" && v["frame"]["id"] == 5) {
                return text;
            }
            tokio::time::sleep(Duration::from_millis(50)).await; // polling a file, with a deadline
        }
    })
    .await
    .expect("the upstream's call reached the recording");
    assert!(recorded.lines().any(|l| l.contains("\"direction\":\"out\"") && l.contains("self.get_device_status")), "{recorded}");
    drop(watch);
    // Replayed to a hub of its own, a CI job gets the answer the backend got.
    let ci = HubProcess::start(&[], &[]).await;
    let _replay = spawn_mcpdev(&["sim", "--replay", file.to_str().unwrap(), "--url", &ci.device_url], &[]);
    let replayed = mcpdev(&ci, &["call", "self.get_device_status", "-d", D1, "--wait", "30s", "--json"]).await;
    assert_eq!(replayed.code, 0, "{replayed:?}");
    let mut answer = replayed.json();
    answer.as_object_mut().unwrap().remove("device_id");
    assert_eq!(answer, theirs["payload"]["result"], "{replayed:?}");
}

#[tokio::test]
async fn an_mcp_host_lists_and_calls_a_relayed_device_while_the_upstream_holds_it() {
    let (_up, hub, _sim, mut conn) = relayed_sim().await;
    let (mut host, _) = common::mcp_session::Session::open(&hub, &format!("/devices/{D1}/mcp"), "127.0.0.1").await;
    let listed = host.ask("tools/list", json!({})).await;
    let names: Vec<&str> = listed["result"]["tools"].as_array().unwrap_or_else(|| panic!("{listed}")).iter().filter_map(|t| t["name"].as_str()).collect();
    assert!(names.iter().any(|n| n.ends_with("get_device_status")), "{names:?}");
    let name = names.iter().find(|n| n.ends_with("audio_speaker.set_volume")).unwrap().to_string();
    let called = host.ask("tools/call", json!({"name": name, "arguments": {"volume": 23}})).await;
    assert_eq!(called["result"]["isError"].as_bool().unwrap_or(false), false, "{called}");
    // The upstream's own view: the device's state changed, and no answer to the host's call.
    conn.send(json!({"type": "mcp", "payload": {"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {"name": "self.get_device_status", "arguments": {}}}}));
    let theirs = conn.answer(json!(6)).await;
    assert!(theirs["payload"]["result"]["content"][0]["text"].as_str().unwrap_or_default().contains("23"), "{theirs}");
    assert!(answered_ids(&conn).iter().all(|id| [json!(1), json!(2), json!(6)].contains(id)), "{:?}", answered_ids(&conn));
}
