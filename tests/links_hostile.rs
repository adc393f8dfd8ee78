//! Devices and clients that do not play along: a device that stops reading, one that never says
//! hello, one that floods malformed frames, a control client that floods requests, hosts asking
//! for devices that do not exist, and MCP calls to devices that are offline or onboarding.
//! Every wait has a deadline: on code that blocks, these tests fail instead of hanging.

mod common;

use std::process::Stdio;
use std::time::Duration;

use common::fake_device::{FakeDevice, tool};
use common::{HubProcess, mcpdev};
use futures_util::{SinkExt, StreamExt};
use mcpdev::links::mcp::{McpConnection, McpEndpoint, McpTransport};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

const STALLED: &str = "02:00:00:00:0a:01";
const OTHER: &str = "02:00:00:00:0a:02";

type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// A raw connection to the hub's control API; answers come out of order, so those not asked
/// for yet are kept.
struct Control {
    ws: futures_util::stream::SplitSink<Ws, Message>,
    incoming: tokio::sync::mpsc::UnboundedReceiver<Value>,
    kept: std::collections::HashMap<u64, std::collections::VecDeque<Value>>,
}

async fn control(hub: &HubProcess) -> Control {
    let url = format!("{}/api/v1/link", hub.host_url.replace("http://", "ws://"));
    let mut req = tokio_tungstenite::tungstenite::client::IntoClientRequest::into_client_request(url.as_str()).unwrap();
    // The control API serves only the hub's owner: send the token the hub wrote for its port.
    let port = req.uri().port_u16().unwrap();
    let token = mcpdev::links::control_token::for_client(req.uri().host().unwrap(), port, false).token().expect("the hub's control token");
    req.headers_mut().insert("Authorization", format!("Bearer {token}").parse().unwrap());
    let (ws, mut stream) = tokio_tungstenite::connect_async(req).await.expect("control API").0.split();
    let (tx, incoming) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Some(Ok(msg)) = stream.next().await {
            if let Message::Text(t) = msg
                && tx.send(serde_json::from_str(&t).unwrap()).is_err()
            {
                return;
            }
        }
    });
    Control { ws, incoming, kept: Default::default() }
}

async fn send(ctl: &mut Control, v: Value) {
    ctl.ws.send(Message::text(v.to_string())).await.unwrap();
}

/// The next control message with this id (events of watches included), within `limit`.
async fn answer(ctl: &mut Control, id: u64, limit: Duration) -> Value {
    if let Some(v) = ctl.kept.get_mut(&id).and_then(|q| q.pop_front()) {
        return v;
    }
    tokio::time::timeout(limit, async {
        loop {
            let v = ctl.incoming.recv().await.expect("control connection closed");
            match v["id"].as_u64() {
                Some(i) if i == id => return v,
                Some(i) => ctl.kept.entry(i).or_default().push_back(v),
                None => panic!("an answer without id: {v}"),
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no answer to control request {id} within {limit:?}"))
}

async fn mcp(hub: &HubProcess) -> McpConnection {
    let url = format!("{}/mcp", hub.host_url);
    let endpoint = McpEndpoint::Url { url, headers: Default::default(), transport: McpTransport::Http };
    McpConnection::connect(&endpoint, Duration::from_secs(10)).await.expect("MCP session")
}

async fn tool_names(conn: &McpConnection) -> Vec<String> {
    let tools = tokio::time::timeout(Duration::from_secs(10), conn.list_all_tools(Duration::from_secs(10))).await.expect("tools/list hung").expect("tools/list");
    tools.iter().map(|t| t["name"].as_str().unwrap().to_string()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_device_that_stops_reading_stalls_nobody_and_is_disconnected() {
    let hub = HubProcess::start(&["--mcp-timeout", "3s"], &[]).await;
    let mut ctl = control(&hub).await;
    send(&mut ctl, json!({"id": 1, "op": "watch", "device": STALLED})).await;
    assert_eq!(answer(&mut ctl, 1, Duration::from_secs(5)).await["ok"]["watching"], STALLED);
    let _other = FakeDevice::connect(&hub.device_url, OTHER, vec![tool("other_tool")]).await;
    let stalled = FakeDevice::connect_with_receive_buffer(&hub.device_url, STALLED, vec![tool("stalled_tool")], Some(16 * 1024)).await;

    // The device floods requests with huge method names (each echoed in an error) and never
    // reads again; the hub is also asked to send it big requests.
    let (sent_tx, mut sent) = tokio::sync::watch::channel(0usize);
    let mut ws = stalled.ws;
    let flood = tokio::spawn(async move {
        let method = "m".repeat(900_000);
        for i in 0..40u64 {
            let req = json!({"jsonrpc": "2.0", "id": 1000 + i, "method": method});
            let frame = json!({"session_id": "", "type": "mcp", "payload": req}).to_string();
            if ws.send(Message::text(frame)).await.is_err() {
                break;
            }
            sent_tx.send_replace(i as usize + 1);
        }
        ws // kept open, never read
    });
    let big = "x".repeat(900_000);
    for id in 10..26u64 {
        send(&mut ctl, json!({"id": id, "op": "rpc", "device": STALLED, "method": "tools/call", "params": {"name": "stalled_tool", "arguments": {"pad": big}}, "timeout_ms": 20_000})).await;
    }
    // Enough sent to fill any socket buffer, or the hub already hung up.
    let filled = tokio::time::timeout(Duration::from_secs(30), sent.wait_for(|n| *n >= 20));
    let _ = filled.await;

    // Everyone else is served meanwhile.
    let conn = tokio::time::timeout(Duration::from_secs(15), mcp(&hub)).await.expect("MCP initialize hung");
    let names = tool_names(&conn).await;
    assert!(names.contains(&"list_devices".to_string()) && names.iter().any(|n| n.ends_with(".other_tool")), "{names:?}");
    let listed = tokio::time::timeout(Duration::from_secs(10), conn.call_tool("list_devices", json!({}), Duration::from_secs(10))).await.expect("list_devices hung").unwrap();
    assert_ne!(listed["isError"], true, "{listed}");
    send(&mut ctl, json!({"id": 2, "op": "devices"})).await;
    let devices = answer(&mut ctl, 2, Duration::from_secs(10)).await;
    assert!(devices["ok"].as_array().unwrap().iter().any(|d| d["device_id"] == OTHER), "{devices}");
    let hello = tokio::time::timeout(Duration::from_secs(15), mcpdev(&hub, &["hello", "-d", OTHER, "--json"])).await.expect("hello hung");
    assert_eq!(hello.code, 0, "{hello:?}");

    // A call to the stalled device ends within its timeout: 6 (timeout) or 4 (gone).
    let started = std::time::Instant::now();
    let call = tokio::time::timeout(Duration::from_secs(20), mcpdev(&hub, &["call", "-d", STALLED, "stalled_tool", "n=1", "--timeout", "3s"])).await.expect("call hung");
    assert!(matches!(call.code, 4 | 6), "{call:?}");
    assert!(started.elapsed() < Duration::from_secs(15), "took {:?}", started.elapsed());

    // The hub hangs up on it, saying why, and every caller it had ends.
    let reason = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            let v = answer(&mut ctl, 1, Duration::from_secs(30)).await;
            if v["event"]["event"] == "disconnected" {
                return v["event"]["reason"].as_str().unwrap().to_string();
            }
        }
    })
    .await
    .expect("the stalled device was not disconnected");
    assert!(reason.starts_with("the device stopped reading"), "{reason}");
    for id in 10..26u64 {
        let a = answer(&mut ctl, id, Duration::from_secs(25)).await;
        assert!(["disconnected", "not_found", "timeout"].contains(&a["error"]["kind"].as_str().unwrap_or("")), "{a}");
    }
    flood.abort();
}

/// A hub whose stderr (its log) is read line by line.
async fn hub_with_log(extra: &[&str]) -> (tokio::process::Child, String, tokio::io::Lines<BufReader<tokio::process::ChildStderr>>) {
    let mut args = vec!["serve", "--json", "--approve-all", "--device-addr", "127.0.0.1:0", "--host-addr", "127.0.0.1:0"];
    args.extend_from_slice(extra);
    let state = std::env::temp_dir().join(format!("mcpdev-links-hostile-{}", std::process::id()));
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcpdev"))
        .env("MCPDEV_STATE_DIR", &state)
        .args(&args)
        .env("RUST_LOG", "info,rmcp=warn")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap()).lines();
    let line = tokio::time::timeout(Duration::from_secs(30), out.next_line()).await.expect("hub start").unwrap().expect("hub exited");
    let v: Value = serde_json::from_str(&line).unwrap();
    tokio::spawn(async move { while let Ok(Some(_)) = out.next_line().await {} });
    let lines = BufReader::new(child.stderr.take().unwrap()).lines();
    (child, v["devices"].as_str().unwrap().to_string(), lines)
}

#[tokio::test]
async fn a_thousand_malformed_frames_log_a_handful_of_lines_with_the_count() {
    let (_hub, url, mut log) = hub_with_log(&[]).await;
    let mut dev = FakeDevice::connect(&url, "02:00:00:00:0b:01", vec![tool("t")]).await;
    for _ in 0..1000 {
        dev.send_raw(Message::text("{not json")).await;
    }
    dev.ws.close(None).await.unwrap();
    // The hub's one limiter of lines a device can trigger: a few, then one line with the count
    // once its 10 s window is over.
    let lines = tokio::time::timeout(Duration::from_secs(60), async {
        let mut malformed = Vec::new();
        while let Some(line) = log.next_line().await.unwrap() {
            if line.contains("malformed message from a device") {
                malformed.push(line.clone());
            }
            if line.contains("02:00:00:00:0b:01: ") && line.contains("more warnings about what it sent") {
                malformed.push(line);
                return malformed;
            }
        }
        panic!("the hub's log ended");
    })
    .await
    .expect("no summary logged");
    assert!(lines.len() <= 8, "{} lines: {lines:#?}", lines.len());
    let logged = lines.len() as u64 - 1;
    let summed: u64 = lines.last().unwrap().split("02:00:00:00:0b:01: ").nth(1).and_then(|r| r.split(' ').next()).and_then(|n| n.parse().ok()).unwrap();
    assert_eq!(logged + summed, 1000, "every malformed frame is logged or summed up: {lines:#?}");
}

#[tokio::test]
async fn a_control_connection_keeps_no_state_for_finished_requests_and_caps_those_under_way() {
    let hub = HubProcess::start(&[], &[]).await;
    let mut ctl = control(&hub).await;
    for id in 1..=1000u64 {
        send(&mut ctl, json!({"id": id, "op": "devices"})).await;
    }
    // Every request is answered once: served, or refused as busy when too many were under way.
    for id in 1..=1000u64 {
        let a = answer(&mut ctl, id, Duration::from_secs(60)).await;
        assert!(a["ok"] == json!([]) || a["error"]["kind"] == "busy", "{a}");
    }
    send(&mut ctl, json!({"id": 5000, "op": "stats"})).await;
    assert_eq!(answer(&mut ctl, 5000, Duration::from_secs(5)).await["ok"]["in_flight"], 0);

    // Requests that wait (for a device that never comes) count until they end; beyond the cap,
    // the answer is `busy` at once.
    for id in 6000..6300u64 {
        send(&mut ctl, json!({"id": id, "op": "device", "device": "02:00:00:00:0c:01", "wait_ms": 60_000})).await;
    }
    for id in 6256..6300u64 {
        let a = answer(&mut ctl, id, Duration::from_secs(10)).await;
        assert_eq!(a["error"]["kind"], "busy", "{a}");
    }
    send(&mut ctl, json!({"id": 7000, "op": "stats"})).await;
    assert_eq!(answer(&mut ctl, 7000, Duration::from_secs(5)).await["ok"]["in_flight"], 256);
}

/// Answers the connection writes itself (`stats`) in a burst larger than its socket's queue:
/// the ones that wait for room are written once the client has taken the others.
#[tokio::test]
async fn a_burst_of_answers_larger_than_the_write_queue_all_arrive() {
    let hub = HubProcess::start(&[], &[]).await;
    let mut ctl = control(&hub).await;
    for id in 1..=1000u64 {
        ctl.ws.feed(Message::text(json!({"id": id, "op": "stats"}).to_string())).await.unwrap();
    }
    ctl.ws.flush().await.unwrap();
    for id in 1..=1000u64 {
        assert_eq!(answer(&mut ctl, id, Duration::from_secs(10)).await["ok"]["in_flight"], 0);
    }
}

#[tokio::test]
async fn unknown_devices_get_a_404_on_their_mcp_endpoint() {
    let hub = HubProcess::start(&[], &[]).await;
    let client = reqwest_free_get(&hub.host_url);
    for i in 0..50 {
        let (status, body) = client(&format!("/devices/02:00:00:00:{:02x}:{:02x}/mcp", i / 256, i % 256)).await;
        assert_eq!(status, 404, "{body}");
        assert!(body.contains("is not connected and has not connected since the hub started"), "{body}");
    }
    // A device that connected once keeps its endpoint.
    let dev = FakeDevice::connect(&hub.device_url, "02:00:00:00:0d:01", vec![tool("t")]).await;
    let (status, _) = client("/devices/02:00:00:00:0d:01/mcp").await;
    assert_ne!(status, 404);
    drop(dev);
}

/// A minimal HTTP/1.1 GET over a raw socket: status and body.
fn reqwest_free_get(base: &str) -> impl Fn(&str) -> std::pin::Pin<Box<dyn std::future::Future<Output = (u16, String)>>> {
    let addr = base.trim_start_matches("http://").to_string();
    move |path: &str| {
        let (addr, path) = (addr.clone(), path.to_string());
        Box::pin(async move {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let mut s = TcpStream::connect(&addr).await.unwrap();
            let req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\nConnection: close\r\n\r\n");
            s.write_all(req.as_bytes()).await.unwrap();
            let mut buf = Vec::new();
            let _ = tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut buf)).await;
            let text = String::from_utf8_lossy(&buf).into_owned();
            let status = text.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
            (status, text)
        })
    }
}

#[tokio::test]
async fn paging_through_mcp_lists_every_tool_once_as_devices_come_and_go() {
    let hub = HubProcess::start(&["--mcp-page-size", "3"], &[]).await;
    let a = FakeDevice::connect(&hub.device_url, "02:00:00:00:0e:01", (0..5).map(|i| tool(&format!("a{i}"))).collect()).await;
    let b = FakeDevice::connect(&hub.device_url, "02:00:00:00:0e:02", (0..4).map(|i| tool(&format!("b{i}"))).collect()).await;
    let mut ctl = control(&hub).await;
    send(&mut ctl, json!({"id": 1, "op": "device", "device": "02:00:00:00:0e:02", "wait_ms": 10_000})).await;
    assert!(answer(&mut ctl, 1, Duration::from_secs(15)).await.get("ok").is_some());
    let conn = mcp(&hub).await;
    let check = |names: Vec<String>, want: usize| {
        let mut unique = names.clone();
        unique.sort();
        unique.dedup();
        assert_eq!((names.len(), unique.len()), (want, want), "{names:?}");
    };
    check(tool_names(&conn).await, 1 + 5 + 4);

    send(&mut ctl, json!({"id": 2, "op": "watch", "device": "02:00:00:00:0e:02"})).await;
    answer(&mut ctl, 2, Duration::from_secs(5)).await;
    drop(b);
    tokio::time::timeout(Duration::from_secs(10), async {
        while answer(&mut ctl, 2, Duration::from_secs(10)).await["event"]["event"] != "disconnected" {}
    })
    .await
    .expect("no disconnect event");
    let names = tool_names(&conn).await;
    check(names.clone(), 1 + 5);
    assert!(!names.iter().any(|n| n.contains(".b")), "{names:?}");

    let _c = FakeDevice::connect(&hub.device_url, "02:00:00:00:0e:03", vec![tool("c0"), tool("c1")]).await;
    send(&mut ctl, json!({"id": 3, "op": "device", "device": "02:00:00:00:0e:03", "wait_ms": 10_000})).await;
    assert!(answer(&mut ctl, 3, Duration::from_secs(15)).await.get("ok").is_some());
    check(tool_names(&conn).await, 1 + 5 + 2);
    drop(a);
}

#[tokio::test]
async fn a_call_to_an_offline_or_onboarding_device_says_so() {
    let hub = HubProcess::start(&[], &[]).await;
    // Says hello, never answers initialize: it stays onboarding.
    let mut req = hub.device_url.as_str().into_client_request().unwrap();
    req.headers_mut().insert("Device-Id", "02:00:00:00:0f:01".parse().unwrap());
    req.headers_mut().insert("Client-Id", "c".parse().unwrap());
    let (mut ws, _) = tokio_tungstenite::connect_async(req).await.unwrap();
    ws.send(Message::text(json!({"type":"hello","version":1,"features":{"mcp":true},"transport":"websocket","audio_params":{"format":"opus","sample_rate":16000,"channels":1,"frame_duration":60}}).to_string())).await.unwrap();
    let mut ctl = control(&hub).await;
    // The device is in the registry a moment after its handshake: a wait (for a `ready` that never
    // comes) sees it arrive, then answers that it is not ready.
    send(&mut ctl, json!({"id": 1, "op": "device", "device": "02:00:00:00:0f:01", "wait_ms": 1000})).await;
    assert_eq!(answer(&mut ctl, 1, Duration::from_secs(5)).await["error"]["kind"], "not_ready");

    let conn = mcp(&hub).await;
    let r = conn.call_tool("dev-020000000f01.self.get_device_status", json!({}), Duration::from_secs(10)).await.expect("an isError result, not a protocol error");
    assert_eq!(r["isError"], true, "{r}");
    let text = r["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("02:00:00:00:0f:01") && text.contains("still onboarding"), "{text}");

    let r = conn.call_tool("dev-02000000ffff.light.on", json!({}), Duration::from_secs(10)).await.expect("an isError result, not a protocol error");
    assert_eq!(r["isError"], true, "{r}");
    assert!(r["content"][0]["text"].as_str().unwrap().contains("02:00:00:00:ff:ff is not connected"), "{r}");

    // A name that names no device stays an unknown tool.
    assert!(conn.call_tool("nonsense", json!({}), Duration::from_secs(10)).await.is_err());
    drop(ws);
}

/// Fires when dropped: stands for what a listener hands a link until the device's hello.
struct Permit(Option<tokio::sync::oneshot::Sender<()>>);

impl mcpdev::links::handle::UntilHello for Permit {}

impl Drop for Permit {
    fn drop(&mut self) {
        if let Some(tx) = self.0.take() {
            let _ = tx.send(());
        }
    }
}

/// Serves one raw socket with a link that wants a hello within 300 ms; returns the link's
/// events, the permit's drop signal and the client's socket.
async fn link_with_hello_timeout() -> (mcpdev::links::ring::Receiver, tokio::sync::oneshot::Receiver<()>, Ws, mcpdev::links::DeviceHandle) {
    use mcpdev::links::handle::{LinkSetup, Tracing};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("ws://{}/xiaozhi/v1/", listener.local_addr().unwrap());
    let client = tokio::spawn(async move { tokio_tungstenite::connect_async(url).await.unwrap().0 });
    let (tcp, _) = listener.accept().await.unwrap();
    let server = mcpdev::links::upgrade::accept_one(tcp, |_| Ok(())).await.unwrap().0;
    let (events, rx) = mcpdev::links::ring::channel(64, 1 << 20);
    let (dropped_tx, dropped) = tokio::sync::oneshot::channel();
    let identity = mcpdev::wire::identity::Identity { device_id: "02:00:00:00:10:01".into(), client_id: None, token: None, protocol_version: 1 };
    let session = mcpdev::session::SessionConfig::new("s", mcpdev::links::websocket::server_hello("s"));
    let setup = LinkSetup {
        identity,
        session,
        events,
        tracing: std::sync::Arc::new(Tracing::default()),
        generation: 1,
        remote: None,
        until_hello: Some(Box::new(Permit(Some(dropped_tx)))),
        hello_timeout: Some(Duration::from_millis(300)),
    };
    let handle = mcpdev::links::websocket::spawn(server, setup, || {});
    (rx, dropped, client.await.unwrap(), handle)
}

async fn disconnect_reason(events: &mut mcpdev::links::ring::Receiver) -> String {
    tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let ev = serde_json::to_value(events.recv().await.unwrap()).unwrap();
            if ev["event"] == "disconnected" {
                return ev["reason"].as_str().unwrap().to_string();
            }
        }
    })
    .await
    .expect("no disconnect within 10 s")
}

#[tokio::test]
async fn a_socket_that_never_says_hello_is_dropped_after_the_hello_timeout() {
    let (mut events, dropped, mut ws, _handle) = link_with_hello_timeout().await;
    assert_eq!(disconnect_reason(&mut events).await, "no hello within 300 ms");
    tokio::time::timeout(Duration::from_secs(5), dropped).await.expect("the permit was kept").unwrap();
    let end = tokio::time::timeout(Duration::from_secs(5), ws.next()).await.expect("socket left open");
    assert!(matches!(end, None | Some(Ok(Message::Close(_))) | Some(Err(_))), "{end:?}");
}

#[tokio::test]
async fn a_hello_releases_the_permit_and_lifts_the_hello_timeout() {
    let (mut events, dropped, mut ws, handle) = link_with_hello_timeout().await;
    ws.send(Message::text(json!({"type":"hello","version":1,"features":{"mcp":true},"transport":"websocket"}).to_string())).await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), dropped).await.expect("the permit was kept after hello").unwrap();
    // Well past the hello timeout the link is up: the session's own onboarding deadline (10 s)
    // is what ends it, not the hello timeout.
    let reason = tokio::time::timeout(Duration::from_secs(2), disconnect_reason(&mut events)).await;
    assert!(reason.is_err(), "disconnected: {reason:?}");
    assert!(handle.is_connected());
}

/// A device's link starts before the hub inserts it into the registry, so on a loaded machine it
/// can be onboarded, and its `ready` sent, before it is there to be found. A waiter that was
/// already waiting must still find it once it is inserted, with no further event from it.
#[tokio::test]
async fn a_waiter_finds_a_device_that_was_ready_before_it_was_registered() {
    use mcpdev::links::handle::{LinkSetup, Tracing};
    const DEV: &str = "02:00:00:00:10:02";
    let registry = mcpdev::hub::Registry::new(Default::default());
    let waiting = registry.wait_ready(Some(DEV), Duration::from_secs(10));
    tokio::pin!(waiting);
    // Polled once: it has looked (no such device) and now waits.
    tokio::select! {
        biased;
        _ = &mut waiting => panic!("found a device that is not there"),
        () = std::future::ready(()) => {}
    }

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("ws://{}/xiaozhi/v1/", listener.local_addr().unwrap());
    let device = tokio::spawn(async move { FakeDevice::connect(&url, DEV, vec![tool("t")]).await });
    let (tcp, _) = listener.accept().await.unwrap();
    let server = mcpdev::links::upgrade::accept_one(tcp, |_| Ok(())).await.unwrap().0;
    // The link's events go to a channel of its own: the registry hears nothing from this device.
    let (events, mut heard) = mcpdev::links::ring::channel(64, 1 << 20);
    let identity = mcpdev::wire::identity::Identity { device_id: DEV.into(), client_id: None, token: None, protocol_version: 1 };
    let session = mcpdev::session::SessionConfig::new("s", mcpdev::links::websocket::server_hello("s"));
    let setup = LinkSetup { identity, session, events, tracing: std::sync::Arc::new(Tracing::default()), generation: 1, remote: None, until_hello: None, hello_timeout: None };
    let handle = mcpdev::links::websocket::spawn(server, setup, || {});
    tokio::time::timeout(Duration::from_secs(10), async {
        while serde_json::to_value(heard.recv().await.unwrap()).unwrap()["event"] != "ready" {}
    })
    .await
    .expect("the device onboards");
    let _device = device.await.unwrap();

    registry.insert(handle);
    let (found, info) = tokio::time::timeout(Duration::from_secs(5), waiting).await.expect("the waiter woke on the insertion").expect("found");
    assert_eq!((found.device_id.as_str(), info.phase), (DEV, mcpdev::session::Phase::Ready));
}

/// A device on a raw TCP socket, after a real WebSocket handshake with the hub, so it can send
/// bytes no WebSocket library would; the hub's control API watches it.
struct RawDevice {
    tcp: TcpStream,
    ctl: Control,
}

impl RawDevice {
    async fn connect(hub: &HubProcess, device_id: &str) -> Self {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut ctl = control(hub).await;
        send(&mut ctl, json!({"id": 1, "op": "watch", "device": device_id})).await;
        assert_eq!(answer(&mut ctl, 1, Duration::from_secs(5)).await["ok"]["watching"], device_id);
        let authority = hub.device_url.trim_start_matches("ws://").split('/').next().unwrap().to_string();
        let mut tcp = TcpStream::connect(&authority).await.unwrap();
        let request = format!(
            "GET /xiaozhi/v1/ HTTP/1.1\r\nHost: {authority}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nDevice-Id: {device_id}\r\nClient-Id: raw\r\n\r\n"
        );
        tcp.write_all(request.as_bytes()).await.unwrap();
        let mut head = Vec::new();
        while !head.ends_with(b"\r\n\r\n") {
            let mut byte = [0u8; 1];
            let n = tokio::time::timeout(Duration::from_secs(5), tcp.read(&mut byte)).await.expect("the hub answered the handshake").unwrap();
            assert_eq!(n, 1, "the hub closed during the handshake: {}", String::from_utf8_lossy(&head));
            head.push(byte[0]);
        }
        let head = String::from_utf8(head).unwrap();
        assert!(head.starts_with("HTTP/1.1 101"), "{head}");
        assert!(head.contains("s3pPLMBiTxaQ9kYGzzhZRbK+xOo="), "the RFC 6455 example's accept key: {head}");
        Self { tcp, ctl }
    }

    async fn send_raw(&mut self, bytes: &[u8]) {
        use tokio::io::AsyncWriteExt;
        self.tcp.write_all(bytes).await.unwrap();
    }

    /// Reads exactly `n` bytes the hub sent.
    async fn read_exact(&mut self, n: usize) -> Vec<u8> {
        use tokio::io::AsyncReadExt;
        let mut buf = vec![0u8; n];
        tokio::time::timeout(Duration::from_secs(5), self.tcp.read_exact(&mut buf)).await.expect("the hub's frame came").unwrap();
        buf
    }

    async fn disconnect_reason(&mut self) -> String {
        loop {
            let v = answer(&mut self.ctl, 1, Duration::from_secs(10)).await;
            if v["event"]["event"] == "disconnected" {
                return v["event"]["reason"].as_str().unwrap().to_string();
            }
        }
    }
}

/// A client frame: final, masked with a fixed key, the length in as many bytes as it needs.
fn masked(opcode: u8, payload: &[u8]) -> Vec<u8> {
    let mask = [0x11, 0x22, 0x33, 0x44];
    let mut out = vec![0x80 | opcode];
    match payload.len() {
        n @ 0..=125 => out.push(0x80 | n as u8),
        n @ 126..=0xFFFF => {
            out.push(0x80 | 126);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            out.push(0x80 | 127);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    out.extend_from_slice(&mask);
    out.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
    out
}

#[tokio::test]
async fn the_hub_answers_a_devices_ping_and_echoes_its_close() {
    let hub = HubProcess::start(&[], &[]).await;
    let mut dev = RawDevice::connect(&hub, "02:00:00:00:0b:01").await;
    dev.send_raw(&masked(0x9, b"are you there")).await;
    let pong = dev.read_exact(2 + 13).await;
    assert_eq!((pong[0], pong[1], &pong[2..]), (0x8A, 13, &b"are you there"[..]), "an unmasked final pong with the ping's payload");
    dev.send_raw(&masked(0x8, &1001u16.to_be_bytes())).await;
    assert_eq!(dev.read_exact(4).await, [0x88, 2, 0x03, 0xE9], "the close code 1001 echoed");
    assert_eq!(dev.disconnect_reason().await, "closed by the device");
}

#[tokio::test]
async fn a_device_that_breaks_the_websocket_rules_is_disconnected_saying_which() {
    let hub = HubProcess::start(&[], &[]).await;
    // Unmasked, as a server would send it: a client must mask (RFC 6455 §5.1).
    let mut dev = RawDevice::connect(&hub, "02:00:00:00:0b:02").await;
    dev.send_raw(&[0x81, 0x02, b'h', b'i']).await;
    let reason = dev.disconnect_reason().await;
    assert!(reason.contains("not masked"), "{reason}");

    // Only the header of a 2 MiB text frame: refused at once, without reading (or keeping) the
    // megabytes it announces.
    let mut dev = RawDevice::connect(&hub, "02:00:00:00:0b:03").await;
    let header: Vec<u8> = [0x81, 0x80 | 127].into_iter().chain((2u64 << 20).to_be_bytes()).chain([1, 2, 3, 4]).collect();
    dev.send_raw(&header).await;
    let reason = dev.disconnect_reason().await;
    assert!(reason.contains("over the 1048576-byte limit"), "{reason}");

    // A continuation with no message to continue.
    let mut dev = RawDevice::connect(&hub, "02:00:00:00:0b:04").await;
    dev.send_raw(&masked(0x0, b"x")).await;
    let reason = dev.disconnect_reason().await;
    assert!(reason.contains("continuation"), "{reason}");
}
