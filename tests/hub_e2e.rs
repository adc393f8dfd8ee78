//! The built binary end to end: `mcpdev serve` with virtual and scripted devices, and every
//! client-flow command, for people and for scripts, with the exit code of each failure class.

mod common;

use common::fake_device::{FakeDevice, tool};
use common::{HubProcess, mcpdev};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio_tungstenite::tungstenite::Message;

const D1: &str = "02:00:00:00:00:01";
const D2: &str = "02:00:00:00:00:02";

#[tokio::test]
async fn every_command_for_people_and_scripts_against_two_virtual_devices() {
    let hub = HubProcess::start(&["--demo", "2"], &[]).await;

    let list = mcpdev(&hub, &["tools", "list", "-d", D1, "--wait", "10s", "--json"]).await;
    assert_eq!(list.code, 0, "{list:?}");
    let names: Vec<String> = list.json()["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_string()).collect();
    assert_eq!(names, ["self.get_device_status", "self.audio_speaker.set_volume", "self.screen.set_brightness", "self.screen.set_theme"]);
    assert_eq!(list.json()["tools"][1]["inputSchema"]["properties"]["volume"], json!({"type":"integer","minimum":0,"maximum":100}));
    let all = mcpdev(&hub, &["tools", "list", "-d", D1, "--user-tools", "--json"]).await;
    assert_eq!(all.json()["tools"].as_array().unwrap().len(), 6);
    let human = mcpdev(&hub, &["tools", "list", "-d", D2, "--wait", "10s"]).await;
    assert_eq!(human.code, 0);
    assert!(human.stdout.contains("self.audio_speaker.set_volume") && human.stdout.contains("volume: int 0..100"), "{}", human.stdout);
    assert!(human.stderr.contains("2 user-only hidden"), "{}", human.stderr);

    let hello = mcpdev(&hub, &["hello", "-d", D1, "--json"]).await;
    assert_eq!(hello.code, 0);
    let h = hello.json();
    assert_eq!((h["device_id"].as_str(), h["transport"].as_str()), (Some(D1), Some("websocket")));
    assert_eq!(h["hello"]["features"]["mcp"], true);
    assert_eq!(h["hello"]["audio_params"]["sample_rate"], 16000);
    assert!(mcpdev(&hub, &["hello", "-d", D1]).await.stdout.contains("audio params"));

    let init = mcpdev(&hub, &["init", "-d", D1, "--json"]).await;
    assert_eq!(init.json()["device_id"], D1);
    assert_eq!(init.json()["protocolVersion"], "2024-11-05");
    assert_eq!(init.json()["serverInfo"]["name"], "mcpdev-sim");
    let fresh = mcpdev(&hub, &["init", "-d", D1, "--vision-url", "http://127.0.0.1:9/v", "--json"]).await;
    assert_eq!(fresh.code, 0, "{fresh:?}");
    assert_eq!(fresh.json()["capabilities"], json!({"tools":{}}));
    assert!(mcpdev(&hub, &["init", "-d", D1]).await.stdout.contains("mcpdev-sim"));

    // Calls are typed by the schema and reach the chosen device only.
    let call = mcpdev(&hub, &["call", "self.audio_speaker.set_volume", "volume=50", "-d", D1, "--json"]).await;
    assert_eq!(call.code, 0, "{call:?}");
    assert_eq!(call.json(), json!({"device_id": D1, "content":[{"type":"text","text":"true"}],"isError":false}));
    let status = |d: &'static str| {
        let hub = &hub;
        async move {
            let out = mcpdev(hub, &["call", "self.get_device_status", "-d", d, "--json"]).await;
            let text: Value = serde_json::from_str(out.json()["content"][0]["text"].as_str().unwrap()).unwrap();
            text["audio_speaker"]["volume"].clone()
        }
    };
    assert_eq!(status(D1).await, 50);
    assert_eq!(status(D2).await, 70, "the other device is untouched");
    let pretty = mcpdev(&hub, &["call", "self.get_device_status", "-d", D2]).await;
    assert!(pretty.stdout.contains("\"audio_speaker\": {"), "JSON text is pretty-printed: {}", pretty.stdout);
    let theme = mcpdev(&hub, &["call", "self.screen.set_theme", "theme=blue", "-d", D2]).await;
    assert_eq!((theme.code, theme.stdout.trim()), (0, "false"), "the stock 'false' is still a success");

    // Failure classes and their exit codes.
    let cases: [(&[&str], i32, &str); 8] = [
        (&["call", "self.get_device_status", "-d", "0a:00:00:00:00:99"], 4, "no connected device matches"),
        (&["call", "self.get_device_status"], 2, "choose one with --device"),
        (&["call", "self.audio_speaker.set_volum", "volume=1", "-d", D1], 7, "did you mean 'self.audio_speaker.set_volume'"),
        (&["call", "self.audio_speaker.set_volume", "volume=101", "-d", D1], 7, "must be at most 100"),
        (&["call", "self.audio_speaker.set_volume", "volume=loud", "-d", D1], 7, "volume"),
        (&["call", "self.audio_speaker.set_volume", "-d", D1], 7, "required"),
        (&["call", "self.audio_speaker.set_volume", "volume", "-d", D1], 7, "key=value"),
        (&["tools", "list", "-d", "02:00:00:00:00:0"], 2, "matches several devices"),
    ];
    for (args, code, needle) in cases {
        let out = mcpdev(&hub, args).await;
        assert_eq!(out.code, code, "{args:?}: {out:?}");
        assert!(out.stderr.contains(needle), "{args:?}: {}", out.stderr);
        assert!(out.stdout.is_empty(), "nothing but results on stdout: {args:?}");
    }
    let json_err = mcpdev(&hub, &["call", "self.nope", "-d", D1, "--json"]).await;
    let line: Value = serde_json::from_str(json_err.stderr.trim()).unwrap();
    assert_eq!(line["error"]["code"], 7);
    assert_eq!(mcpdev(&hub, &["hello", "--hub", "http://127.0.0.1:9"]).await.code, 4);
}

#[tokio::test]
async fn watch_streams_events_and_traffic_as_ndjson() {
    let hub = HubProcess::start(&["--demo", "1"], &[]).await;
    assert_eq!(mcpdev(&hub, &["hello", "-d", D1, "--wait", "10s"]).await.code, 0);
    let mut watch = common::spawn_mcpdev(&["watch", "--json", "--traffic", "-d", D1], &[("MCPDEV_HUB", hub.host_url.as_str())]);
    let mut counted = common::spawn_mcpdev(&["watch", "--json", "-d", D1, "--count", "1"], &[("MCPDEV_HUB", hub.host_url.as_str())]);
    let mut lines = BufReader::new(watch.child.stdout.take().unwrap()).lines();
    let mut counted_lines = BufReader::new(counted.child.stdout.take().unwrap()).lines();
    let first: Value = serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
    assert_eq!(common::unstamped(first), json!({"event":"watching","device":D1}));
    let first: Value = serde_json::from_str(&counted_lines.next_line().await.unwrap().unwrap()).unwrap();
    assert_eq!(first["event"], "watching");
    assert_eq!(mcpdev(&hub, &["call", "self.screen.set_brightness", "brightness=10", "-d", D1]).await.code, 0);
    // The call's frames and the device's notification; the hub's own confirming tools/list
    // (a moment after onboarding) may come in between and is left out.
    let mut events = Vec::new();
    while events.len() < 3 {
        let line = tokio::time::timeout(std::time::Duration::from_secs(20), lines.next_line()).await.expect("an event in time").unwrap().unwrap();
        let v: Value = serde_json::from_str(&line).unwrap();
        if v["payload"]["method"] != "tools/list" && v["payload"]["result"].get("tools").is_none() {
            events.push(v);
        }
    }
    assert_eq!((events[0]["event"].as_str(), events[0]["direction"].as_str()), (Some("traffic"), Some("out")));
    assert_eq!(events[0]["payload"]["params"], json!({"name":"self.screen.set_brightness","arguments":{"brightness":10}}));
    assert_eq!((events[1]["event"].as_str(), events[1]["direction"].as_str()), (Some("traffic"), Some("in")));
    assert!(events[1]["latency_ms"].as_f64().is_some());
    assert_eq!(events[2]["method"], "notifications/state_changed", "the notification, once, as its own event: {events:?}");
    watch.child.kill().await.unwrap();
    // --count 1 without --traffic: the notification, then exit 0.
    let note: Value = serde_json::from_str(&counted_lines.next_line().await.unwrap().unwrap()).unwrap();
    assert_eq!(note["event"], "notification");
    assert_eq!(counted.child.wait().await.unwrap().code(), Some(0));
}

#[tokio::test]
async fn misbehaving_devices_end_calls_with_distinct_exit_codes() {
    let hub = HubProcess::start(&[], &[]).await;
    let id = "aa:00:00:00:00:0a";
    let mut dev = FakeDevice::connect(&hub.device_url, id, vec![tool("t.one")]).await;
    assert_eq!(mcpdev(&hub, &["hello", "-d", id, "--wait", "10s"]).await.code, 0);

    // A device that never answers: timeout (6). Its late reply is dropped, not given to the next call.
    let (out, req) = tokio::join!(mcpdev(&hub, &["call", "t.one", "n=1", "--timeout", "300ms"]), dev.recv_request("tools/call"));
    assert_eq!(out.code, 6, "{out:?}");
    assert!(out.stderr.contains("did not answer within"), "{}", out.stderr);
    dev.reply(&req["id"], json!({"content":[{"type":"text","text":"late"}],"isError":false})).await;
    let second = async {
        let req = dev.recv_request("tools/call").await;
        assert_eq!(req["params"]["arguments"], json!({"n": 2}));
        dev.reply(&req["id"], json!({"content":[{"type":"text","text":"second"}],"isError":false})).await;
    };
    let (out, ()) = tokio::join!(mcpdev(&hub, &["call", "t.one", "n=2"]), second);
    assert_eq!((out.code, out.stdout.trim()), (0, "second"), "{out:?}");

    // isError: true and a JSON-RPC error without `code` are tool errors (5).
    let answer = async {
        let req = dev.recv_request("tools/call").await;
        dev.reply(&req["id"], json!({"content":[{"type":"text","text":"motor stalled"}],"isError":true})).await;
    };
    let (out, ()) = tokio::join!(mcpdev(&hub, &["call", "t.one", "n=3"]), answer);
    assert_eq!(out.code, 5, "{out:?}");
    assert!(out.stdout.contains("motor stalled") && out.stderr.contains("isError"), "{out:?}");
    let answer = async {
        let req = dev.recv_request("tools/call").await;
        let sid = dev.session_id.clone();
        dev.send(json!({"session_id":sid,"type":"mcp","payload":{"jsonrpc":"2.0","id":req["id"],"error":{"message":"Failed to capture photo"}}})).await;
    };
    let (out, ()) = tokio::join!(mcpdev(&hub, &["call", "t.one", "n=4"]), answer);
    assert_eq!(out.code, 5, "{out:?}");
    assert!(out.stderr.contains("Failed to capture photo"), "{}", out.stderr);

    // The stock firmware's unescaped quotes: the message still reaches the caller.
    let answer = async {
        let req = dev.recv_request("tools/call").await;
        let broken = format!(r#"{{"session_id":"{}","type":"mcp","payload":{{"jsonrpc":"2.0","id":{},"error":{{"message":"Unknown tool: a"b"}}}}}}"#, dev.session_id, req["id"]);
        dev.send_raw(Message::text(broken)).await;
    };
    let (out, ()) = tokio::join!(mcpdev(&hub, &["call", "t.one", "n=5"]), answer);
    assert_eq!(out.code, 5, "{out:?}");
    assert!(out.stderr.contains(r#"Unknown tool: a"b"#), "{}", out.stderr);

    // Disconnecting mid-call: unreachable (4), promptly, not a timeout.
    let drop_it = async {
        dev.recv_request("tools/call").await;
        dev.ws.close(None).await.unwrap();
    };
    let (out, ()) = tokio::join!(mcpdev(&hub, &["call", "t.one", "n=6", "--timeout", "30s"]), drop_it);
    assert_eq!(out.code, 4, "{out:?}");
    assert!(out.stderr.contains("disconnected"), "{}", out.stderr);
}

#[tokio::test]
async fn a_reconnect_with_the_same_device_id_replaces_the_old_session() {
    let hub = HubProcess::start(&[], &[]).await;
    let id = "aa:00:00:00:00:0b";
    let mut old = FakeDevice::connect(&hub.device_url, id, vec![tool("old.tool")]).await;
    assert_eq!(mcpdev(&hub, &["tools", "list", "-d", id, "--wait", "10s", "--json"]).await.json()["tools"][0]["name"], "old.tool");
    let _new = FakeDevice::connect(&hub.device_url, id, vec![tool("new.tool")]).await;
    old.expect_closed().await;
    let list = mcpdev(&hub, &["tools", "list", "-d", id, "--wait", "10s", "--json"]).await;
    assert_eq!(list.json()["tools"][0]["name"], "new.tool");
    let devices = mcpdev(&hub, &["tools", "list", "--json"]).await;
    assert_eq!(devices.code, 0, "exactly one device is registered: {devices:?}");
}

#[tokio::test]
async fn hostile_frames_are_survived_and_other_devices_are_unaffected() {
    let hub = HubProcess::start(&["--demo", "1"], &[]).await;
    let id = "aa:00:00:00:00:0c";
    let mut bad = FakeDevice::connect(&hub.device_url, id, vec![tool("t.x")]).await;
    bad.send_raw(Message::text("not json {")).await;
    bad.send_raw(Message::text(r#"{"type":"mcp","payload":"nope"}"#)).await;
    bad.send_raw(Message::text(r#"{"type":"galaxy","x":1}"#)).await;
    bad.send_raw(Message::text(r#"{"no_type":true}"#)).await;
    bad.send_raw(Message::binary(vec![0u8, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 8, 1, 2, 3])).await;
    bad.send_raw(Message::binary(vec![0u8, 0, 0, 200, 9, 9])).await;
    // Still served after the garbage:
    let answer = async {
        let req = bad.recv_request("tools/call").await;
        bad.reply(&req["id"], json!({"content":[{"type":"text","text":"still here"}],"isError":false})).await;
    };
    let (out, ()) = tokio::join!(mcpdev(&hub, &["call", "t.x", "n=1", "-d", id]), answer);
    assert_eq!((out.code, out.stdout.trim()), (0, "still here"), "{out:?}");
    // A frame over the size limit ends that device's link only.
    let huge = format!(r#"{{"type":"mcp","payload":{{"pad":"{}"}}}}"#, "x".repeat(2 << 20));
    let _ = futures_util::SinkExt::send(&mut bad.ws, Message::text(huge)).await;
    bad.expect_closed().await;
    let ok = mcpdev(&hub, &["call", "self.audio_speaker.set_volume", "volume=5", "-d", D1, "--wait", "10s"]).await;
    assert_eq!(ok.code, 0, "the hub and the other device are unaffected: {ok:?}");
}

#[tokio::test]
async fn device_tokens_are_checked_with_a_clear_reason() {
    let hub = HubProcess::start_admitting(&[], &[("MCPDEV_DEVICE_TOKEN", "s3cret,other")]).await;
    let connect = |token: Option<&str>| {
        let mut req = tokio_tungstenite::tungstenite::client::IntoClientRequest::into_client_request(hub.device_url.as_str()).unwrap();
        req.headers_mut().insert("Device-Id", "aa:00:00:00:00:0d".parse().unwrap());
        if let Some(t) = token {
            req.headers_mut().insert("Authorization", format!("Bearer {t}").parse().unwrap());
        }
        tokio_tungstenite::connect_async(req)
    };
    // Admission is on: a device that is neither approved nor holding a shared token gets a code.
    for (token, reason) in [(None, "is not admitted"), (Some("wrong"), "mcpdev devices approve")] {
        match connect(token).await {
            Err(tokio_tungstenite::tungstenite::Error::Http(resp)) => {
                assert_eq!(resp.status(), 401);
                let body = String::from_utf8_lossy(resp.body().as_deref().unwrap_or_default()).into_owned();
                assert!(body.contains(reason), "{body}");
            }
            other => panic!("expected 401, got {:?}", other.map(|_| ())),
        }
    }
    assert!(connect(Some("other")).await.is_ok());
    // A device without identity is refused with the reason, too.
    let bare = tokio_tungstenite::connect_async(hub.device_url.as_str()).await;
    assert!(matches!(bare, Err(tokio_tungstenite::tungstenite::Error::Http(r)) if r.status() == 400));
}

#[tokio::test]
async fn the_host_listener_refuses_foreign_origins_and_hosts() {
    let hub = HubProcess::start(&[], &[]).await;
    let link = format!("{}/api/v1/link", hub.host_url.replace("http://", "ws://"));
    let port = hub.host_url.rsplit(':').next().unwrap();
    // A loopback name with junk around it is no loopback name (issue 31): each is read whole, as
    // an RFC 3986 authority.
    let junk_hosts = [
        format!("[::1].evil.example:{port}"),
        format!("127.0.0.1.evil.example:{port}"),
        format!("localhost:{port}.evil.example"),
        format!("localhost:{port}@evil.example"),
        format!("evil.example@localhost:{port}"),
        format!("[fe80::1%25lo]:{port}"),
        "localhost:99999".to_string(),
        format!("127.1:{port}"),
    ];
    let mut refused = vec![("Origin", "https://evil.example".to_string()), ("Origin", format!("http://[::1].evil.example:{port}")), ("Host", "evil.example:80".to_string())];
    refused.extend(junk_hosts.into_iter().map(|h| ("Host", h)));
    for (name, value) in refused {
        let mut req = tokio_tungstenite::tungstenite::client::IntoClientRequest::into_client_request(link.as_str()).unwrap();
        req.headers_mut().insert(name, value.parse().unwrap());
        match tokio_tungstenite::connect_async(req).await {
            Err(tokio_tungstenite::tungstenite::Error::Http(resp)) => assert_eq!(resp.status(), 403, "{name}: {value}"),
            other => panic!("{name}: {value}: expected 403, got {:?}", other.map(|_| ())),
        }
    }
    // The same over plain HTTP, on /mcp.
    let addr = hub.host_url.trim_start_matches("http://").to_string();
    let (status, _, body) = common::ota::exchange(&addr, "POST", "/mcp", &[("Host", &format!("[::1].evil.example:{port}"))], "{}", common::ws::DEADLINE).await;
    assert_eq!(status, 403, "{}", String::from_utf8_lossy(&body));
    assert!(String::from_utf8_lossy(&body).contains("not a host[:port]"), "the refusal says why");
    let mut req = tokio_tungstenite::tungstenite::client::IntoClientRequest::into_client_request(link.as_str()).unwrap();
    req.headers_mut().insert("Origin", "http://localhost:6274".parse().unwrap());
    let port = req.uri().port_u16().unwrap();
    let token = mcpdev::links::control_token::for_client(req.uri().host().unwrap(), port, false).token().unwrap();
    req.headers_mut().insert("Authorization", format!("Bearer {token}").parse().unwrap());
    assert!(tokio_tungstenite::connect_async(req).await.is_ok(), "a loopback origin with the control token is fine");
}

#[tokio::test]
async fn wait_for_a_device_that_connects_later_and_listen_without_a_hub() {
    let hub = HubProcess::start(&[], &[]).await;
    let none = mcpdev(&hub, &["tools", "list"]).await;
    assert_eq!(none.code, 4);
    assert!(none.stderr.contains("--wait"), "{}", none.stderr);
    let waiting = mcpdev(&hub, &["call", "self.audio_speaker.set_volume", "volume=9", "-d", "02:00:00:00:00:31", "--wait", "20s"]);
    let device_url = hub.device_url.clone();
    let late_device = async move {
        let _sim = common::spawn_mcpdev(&["sim", "--url", &device_url, "--device-id", "02:00:00:00:00:31"], &[]);
        std::future::pending::<()>().await;
    };
    let out = tokio::select! { out = waiting => out, () = late_device => unreachable!() };
    assert_eq!((out.code, out.stdout.trim()), (0, "true"), "{out:?}");

    // --listen: no hub; accept the next device, do the step, exit.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let addr = format!("127.0.0.1:{port}");
    let listen = mcpdev(&hub, &["tools", "list", "--listen", &addr, "--json", "--wait", "20s"]);
    let url = format!("ws://{addr}/xiaozhi/v1/");
    let device = async move {
        // The virtual device retries with backoff until the listener is up.
        let _sim = common::spawn_mcpdev(&["sim", "--url", &url, "--device-id", "02:00:00:00:00:32"], &[]);
        std::future::pending::<()>().await;
    };
    let out = tokio::select! { out = listen => out, () = device => unreachable!() };
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(out.json()["device_id"], "02:00:00:00:00:32");
    assert_eq!(out.json()["tools"].as_array().unwrap().len(), 4);
}

/// `mcpdev devices` describes every device with its tools: with a large fleet (or large tool
/// lists) the answer is larger than a WebSocket frame's default 16 MiB limit, and must still
/// arrive whole.
#[tokio::test]
async fn devices_answers_larger_than_a_default_websocket_frame_arrive_whole() {
    let hub = HubProcess::start(&[], &[]).await;
    // 20 devices × 240 tools × ~3.8 KB: about 18 MB of tools in one answer.
    let description = "x".repeat(3_700);
    let tools: Vec<Value> = (0..240).map(|i| json!({"name": format!("t{i}"), "description": description, "inputSchema": {"type": "object"}})).collect();
    let mut devices = Vec::new();
    for i in 0..20 {
        let id = format!("0e:00:00:00:00:{i:02x}");
        devices.push(FakeDevice::connect(&hub.device_url, &id, tools.clone()).await);
        let ready = mcpdev(&hub, &["init", "-d", &id, "--wait", "20s", "--json"]).await;
        assert_eq!(ready.code, 0, "{ready:?}");
    }
    let listed = mcpdev(&hub, &["devices", "--json"]).await;
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    assert!(listed.stdout.len() > 16 << 20, "the answer is {} bytes, not over 16 MiB", listed.stdout.len());
    let all = listed.json();
    let all = all.as_array().expect("an array of devices");
    assert_eq!(all.len(), 20);
    assert!(all.iter().all(|d| d["tools"].as_array().map(Vec::len) == Some(240)), "every device with all its tools");
}
