//! The firmware's WebSocket session code (`hub_link::ws::session`), run on the host over std sockets against a
//! real WebSocket server (tokio-tungstenite, as in the mcpdev hub): headers, hello, MCP, button
//! notifications, both kinds of Ping, Close, a refused upgrade, a missing server hello, a dead
//! link, and the reboot tool.

#![allow(clippy::result_large_err, reason = "tungstenite handshake callbacks return an HTTP response as their error")]

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration as StdDuration;

use embassy_sync::blocking_mutex::raw::NoopRawMutex;
use embassy_sync::channel::Channel;
use embassy_time::{Duration, Timer};
use futures_util::{SinkExt, StreamExt};
use edge_nal::TcpConnect;
use hub_link::tls::Stream;
use hub_link::{Board, End, Identity, Timing};
use mcp_device::{Call, DeviceLink, McpServer, Property, Tool, ToolError, ToolOutput, Transport};
use provisioning::HubUrl;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::http::StatusCode;

#[derive(Default)]
struct TestState {
    value: i64,
    reboot: bool,
}

fn set_value(s: &mut TestState, call: &mut Call<'_>) -> Result<ToolOutput, ToolError> {
    let new = call.args.int("value")?;
    let old = std::mem::replace(&mut s.value, new);
    call.outbox.state_changed("test.value", old.into(), new.into());
    Ok(true.into())
}

fn reboot(s: &mut TestState, _: &mut Call<'_>) -> Result<ToolOutput, ToolError> {
    s.reboot = true;
    Ok(true.into())
}

fn link() -> DeviceLink<TestState> {
    let mut server = McpServer::new("hub-link-test", "0", TestState::default());
    server
        .add_tool(Tool::new("test.set_value", "Sets a value.", set_value).property(Property::integer("value").range(0, 100)))
        .unwrap();
    server.add_tool(Tool::new("self.reboot", "Reboot.", reboot).user_only()).unwrap();
    DeviceLink::new(server, Transport::WebSocket { binary_version: 1 })
}

fn random() -> u32 {
    static STATE: AtomicU32 = AtomicU32::new(0x9E37_79B9);
    let x = STATE.load(Ordering::Relaxed);
    let x = x ^ (x << 13);
    let x = x ^ (x >> 17);
    let x = x ^ (x << 5);
    STATE.store(x, Ordering::Relaxed);
    x
}

fn fast() -> Timing {
    Timing {
        connect: Duration::from_secs(5),
        hello: Duration::from_millis(500),
        ping: Duration::from_millis(200),
        dead_after: Duration::from_millis(700),
        write: Duration::from_secs(2),
    }
}

/// What the device side saw: how the session ended, whether it got a hello, the final state.
struct DeviceResult {
    end: String,
    reboot_end: bool,
    greeted: bool,
    value: i64,
}

/// Runs one device session against `port` on its own thread (the firmware's code, std sockets),
/// pressing the BOOT button `presses` times after `press_after`.
fn device(port: u16, token: &str, timing: Timing, presses: u32, press_after: StdDuration) -> std::thread::JoinHandle<DeviceResult> {
    let token = token.to_string();
    std::thread::spawn(move || {
        futures_lite::future::block_on(async move {
            let url_text = format!("ws://127.0.0.1:{port}/xiaozhi/v1/");
            let url = HubUrl::parse(&url_text).unwrap();
            let id = Identity {
                device_id: "aa:bb:cc:dd:ee:01".into(),
                client_id: "3f1c0a52-0f5e-5d4e-9b3a-000000000001".into(),
                token: token.clone(),
                // Only the OTA endpoint gets the key: the upgrade below must not carry it.
                device_key: "ws-must-not-see-this-key".into(),
            };
            let channel: Channel<NoopRawMutex, u32, 8> = Channel::new();
            let board = Board {
                random,
                reboot_requested: |s: &TestState| s.reboot,
                system_info: |_| String::new(),
                user_agent: "test/0",
                presses: &channel,
                trust: None,
            };
            let mut link = link();
            let (mut rx, mut http) = (vec![0u8; 8192], vec![0u8; 2048]);
            let mut greeted = false;
            let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
            let stack = edge_nal_std::Stack::new();
            let mut stream = Stream::Plain(stack.connect(addr).await.unwrap());
            let session =
                hub_link::ws::session(&mut stream, &url, &id, &mut link, &board, &timing, &mut rx, &mut http, &mut greeted);
            let press = async {
                Timer::after(Duration::from_millis(press_after.as_millis() as u64)).await;
                for n in 1..=presses {
                    channel.send(n).await;
                }
            };
            let (end, ()) = embassy_futures::join::join(session, press).await;
            DeviceResult {
                reboot_end: matches!(end, End::Reboot),
                end: end.to_string(),
                greeted,
                value: link.server.state().value,
            }
        })
    })
}

type Ws = tokio_tungstenite::WebSocketStream<tokio::net::TcpStream>;

/// Accepts one WebSocket, returning it and the request headers (lower-case names).
async fn accept(listener: &TcpListener) -> (Ws, Vec<(String, String)>) {
    let (tcp, _) = listener.accept().await.unwrap();
    let mut headers = Vec::new();
    let ws = tokio_tungstenite::accept_hdr_async(tcp, |req: &Request, resp: Response| {
        headers = req
            .headers()
            .iter()
            .map(|(k, v)| (k.as_str().to_string(), v.to_str().unwrap_or("").to_string()))
            .collect();
        assert_eq!(req.uri().path(), "/xiaozhi/v1/");
        Ok::<_, ErrorResponse>(resp)
    })
    .await
    .unwrap();
    (ws, headers)
}

/// The next text message as JSON, answering nothing else; fails after 3 s.
async fn next_json(ws: &mut Ws) -> Value {
    loop {
        let msg = tokio::time::timeout(StdDuration::from_secs(3), ws.next()).await.expect("a message in time");
        match msg.expect("stream open").expect("no error") {
            Message::Text(t) => return serde_json::from_str(&t).expect("device JSON"),
            Message::Ping(_) | Message::Pong(_) => continue,
            other => panic!("unexpected {other:?}"),
        }
    }
}

fn server_hello() -> Message {
    Message::text(
        json!({"type":"hello","transport":"websocket","session_id":"s-1",
               "audio_params":{"format":"opus","sample_rate":24000,"channels":1,"frame_duration":60}})
        .to_string(),
    )
}

fn mcp(payload: Value) -> Message {
    Message::text(json!({"session_id":"s-1","type":"mcp","payload":payload}).to_string())
}

async fn listener() -> (TcpListener, u16) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    (l, port)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_whole_session() {
    let (listener, port) = listener().await;
    let dev = device(port, "tok-123", fast(), 2, StdDuration::from_millis(300));
    let (mut ws, headers) = accept(&listener).await;
    let header = |name: &str| headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
    assert_eq!(header("device-id").as_deref(), Some("aa:bb:cc:dd:ee:01"));
    assert_eq!(header("client-id").as_deref(), Some("3f1c0a52-0f5e-5d4e-9b3a-000000000001"));
    assert_eq!(header("protocol-version").as_deref(), Some("1"));
    assert_eq!(header("authorization").as_deref(), Some("Bearer tok-123"));
    assert_eq!(header("host"), Some(format!("127.0.0.1:{port}")));
    assert_eq!(header("mcpdev-device-key"), None, "the device key goes to the OTA endpoint only");
    assert!(headers.iter().all(|(_, v)| !v.contains("ws-must-not-see")), "{headers:?}");

    let hello = next_json(&mut ws).await;
    assert_eq!(hello["type"], "hello");
    assert_eq!(hello["version"], 1);
    assert_eq!(hello["transport"], "websocket");
    assert_eq!(hello["features"]["mcp"], true);
    ws.send(server_hello()).await.unwrap();

    ws.send(mcp(json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"capabilities":{}}}))).await.unwrap();
    let init = next_json(&mut ws).await;
    assert_eq!(init["session_id"], "s-1");
    assert_eq!(init["payload"]["result"]["protocolVersion"], "2024-11-05");

    ws.send(mcp(json!({"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"cursor":"","withUserTools":true}})))
        .await
        .unwrap();
    let list = next_json(&mut ws).await;
    let names: Vec<&str> =
        list["payload"]["result"]["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["test.set_value", "self.reboot"]);

    ws.send(mcp(json!({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"test.set_value","arguments":{"value":42}}})))
        .await
        .unwrap();
    let reply = next_json(&mut ws).await;
    assert_eq!(reply["payload"]["id"], 3);
    assert_eq!(reply["payload"]["result"]["content"][0]["text"], "true");
    let note = next_json(&mut ws).await;
    assert_eq!(note["payload"]["method"], "notifications/state_changed");
    assert_eq!(note["payload"]["params"]["newState"], 42);

    // The two button presses, as notifications.
    for n in 1..=2 {
        let note = next_json(&mut ws).await;
        assert_eq!(note["type"], "mcp");
        assert_eq!(note["payload"]["params"]["what"], "button.boot", "{note}");
        assert_eq!(note["payload"]["params"]["presses"], n);
    }

    // The device pings by itself, and answers ours.
    ws.send(Message::Ping(b"hub".to_vec().into())).await.unwrap();
    let (mut got_ping, mut got_pong) = (false, false);
    let until = tokio::time::Instant::now() + StdDuration::from_secs(2);
    while !(got_ping && got_pong) && tokio::time::Instant::now() < until {
        match tokio::time::timeout(StdDuration::from_millis(500), ws.next()).await {
            Ok(Some(Ok(Message::Ping(_)))) => got_ping = true,
            Ok(Some(Ok(Message::Pong(p)))) => {
                assert_eq!(&p[..], b"hub");
                got_pong = true;
            }
            Ok(Some(Ok(other))) => panic!("unexpected {other:?}"),
            _ => {}
        }
    }
    assert!(got_ping, "the device sends WebSocket Pings");
    assert!(got_pong, "the device answers our Ping");

    // Keepalive: over two dead_after periods the link stays up because tungstenite answers Pings.
    let until = tokio::time::Instant::now() + StdDuration::from_millis(1500);
    while tokio::time::Instant::now() < until {
        if let Ok(Some(msg)) = tokio::time::timeout(StdDuration::from_millis(100), ws.next()).await {
            assert!(matches!(msg.unwrap(), Message::Ping(_)));
        }
    }

    ws.close(None).await.unwrap();
    let result = tokio::task::spawn_blocking(move || dev.join().unwrap()).await.unwrap();
    assert!(result.greeted);
    assert_eq!(result.value, 42);
    assert!(result.end.contains("closed the WebSocket"), "{}", result.end);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_upgrade_is_reported_with_its_status() {
    let (listener, port) = listener().await;
    let dev = device(port, "", fast(), 0, StdDuration::ZERO);
    let (tcp, _) = listener.accept().await.unwrap();
    let _ = tokio_tungstenite::accept_hdr_async(tcp, |req: &Request, _resp: Response| {
        assert!(req.headers().get("authorization").is_none(), "no token, no Authorization header");
        let mut e = ErrorResponse::new(Some("no".into()));
        *e.status_mut() = StatusCode::UNAUTHORIZED;
        Err(e)
    })
    .await;
    let result = tokio::task::spawn_blocking(move || dev.join().unwrap()).await.unwrap();
    assert!(!result.greeted);
    assert!(result.end.contains("(401)"), "{}", result.end);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_server_hello_times_out() {
    let (listener, port) = listener().await;
    let dev = device(port, "", fast(), 0, StdDuration::ZERO);
    let (mut ws, _) = accept(&listener).await;
    assert_eq!(next_json(&mut ws).await["type"], "hello");
    // Keep reading (so Pings are answered) but never say hello.
    let reader = tokio::spawn(async move { while let Some(Ok(_)) = ws.next().await {} });
    let result = tokio::task::spawn_blocking(move || dev.join().unwrap()).await.unwrap();
    reader.abort();
    assert!(!result.greeted);
    assert_eq!(result.end, "timed out waiting for the server hello");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_link_is_dropped() {
    let (listener, port) = listener().await;
    let dev = device(port, "", fast(), 0, StdDuration::ZERO);
    let (mut ws, _) = accept(&listener).await;
    assert_eq!(next_json(&mut ws).await["type"], "hello");
    ws.send(server_hello()).await.unwrap();
    // Stop reading: tungstenite answers Pings only while the stream is read, so the device hears
    // nothing from now on.
    let started = std::time::Instant::now();
    let result = tokio::task::spawn_blocking(move || dev.join().unwrap()).await.unwrap();
    assert!(result.greeted);
    assert!(result.end.contains("link dead"), "{}", result.end);
    let took = started.elapsed();
    assert!(took >= StdDuration::from_millis(650) && took < StdDuration::from_secs(3), "{took:?}");
    drop(ws);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reboot_tool_answers_then_ends_the_session() {
    let (listener, port) = listener().await;
    let dev = device(port, "", fast(), 0, StdDuration::ZERO);
    let (mut ws, _) = accept(&listener).await;
    next_json(&mut ws).await;
    ws.send(server_hello()).await.unwrap();
    ws.send(mcp(json!({"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"self.reboot"}}))).await.unwrap();
    let reply = next_json(&mut ws).await;
    assert_eq!(reply["payload"]["result"]["content"][0]["text"], "true");
    // Then a Close (1001, going away) about a second later.
    let closed = loop {
        match tokio::time::timeout(StdDuration::from_secs(3), ws.next()).await.unwrap() {
            Some(Ok(Message::Close(frame))) => break frame,
            Some(Ok(Message::Ping(_))) => continue,
            other => panic!("unexpected {other:?}"),
        }
    };
    assert_eq!(closed.map(|f| u16::from(f.code)), Some(1001));
    let result = tokio::task::spawn_blocking(move || dev.join().unwrap()).await.unwrap();
    assert!(result.reboot_end, "{}", result.end);
}
