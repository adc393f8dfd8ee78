//! Issue 31, items 2 and 4: what a device can make the hub hold for its viewers, and what it can
//! make the hub write to its log.
//!
//! - The attacker of the streams: a device that sends 1 MiB frames and floods small ones while
//!   every stream to a viewer is open and not read (the dashboard's traffic stream, the control
//!   API's `watch --traffic`, `/sse`, the Streamable HTTP GET stream of `/mcp`). The hub's event
//!   ring stays under its byte bound (`mcpdev_event_ring_peak_bytes`), a reader that resumes is
//!   told what it missed, big frames reach it as their size and a preview, and the ring is
//!   empty once the readers are gone.
//! - The attacker of the log: a device that reconnects in a loop. Its connect lines and its
//!   `serve --json` events are bounded, and what was held back is summed up with the right count
//!   and counted in `/metrics`.

mod common;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::HubProcess;
use common::fake_device::{FakeDevice, tool};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

const DEV: &str = "02:00:00:00:31:01";
const DEADLINE: Duration = Duration::from_secs(60);

fn token(hub: &HubProcess) -> String {
    let port = hub.host_url.rsplit(':').next().unwrap();
    let bytes = std::fs::read(PathBuf::from(&hub.runtime_dir).join(format!("control-{port}.token"))).unwrap();
    mcpdev::links::control_token::token_of(&bytes)
}

/// A connection to the host listener that reads slowly: a small receive buffer, so the hub's
/// writes back up soon after the reader stops.
async fn slow_socket(hub: &HubProcess) -> TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    socket.connect(common::raw_http::addr_of(&hub.host_url)).await.unwrap()
}

async fn metrics(hub: &HubProcess) -> String {
    let bearer = format!("Bearer {}", token(hub));
    let (status, _, body) = common::ota::exchange(hub.host_url.trim_start_matches("http://"), "GET", "/metrics", &[("Authorization", &bearer)], "", DEADLINE).await;
    assert_eq!(status, 200);
    String::from_utf8_lossy(&body).into_owned()
}

fn sample(text: &str, name: &str) -> f64 {
    text.lines().find(|l| l.starts_with(name) && l[name.len()..].starts_with(' ')).and_then(|l| l.rsplit(' ').next()).and_then(|v| v.parse().ok()).unwrap_or_else(|| panic!("{name} missing from\n{text}"))
}

/// Reads SSE events (`event:` name and `data:`) from a raw socket until `want` says done.
async fn read_sse_until(tcp: &mut TcpStream, mut want: impl FnMut(&str, &str) -> bool) {
    let mut buf = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    let mut seen = std::collections::BTreeMap::<String, usize>::new();
    tokio::time::timeout(DEADLINE, async {
        loop {
            let n = tcp.read(&mut chunk).await.unwrap();
            assert!(n > 0, "the stream ended");
            buf.extend_from_slice(&chunk[..n]);
            while let Some(end) = buf.windows(2).position(|w| w == b"\n\n") {
                let block = String::from_utf8_lossy(&buf[..end]).into_owned();
                buf.drain(..end + 2);
                let name = block.lines().find_map(|l| l.strip_prefix("event:")).map(str::trim).unwrap_or_default().to_string();
                let data: String = block.lines().filter_map(|l| l.strip_prefix("data:")).map(str::trim_start).collect();
                *seen.entry(name.clone()).or_default() += 1;
                if want(&name, &data) {
                    return;
                }
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("the awaited event in time; seen so far: {seen:?}"));
}

#[tokio::test]
async fn a_slow_reader_of_every_stream_never_makes_the_hub_hold_a_devices_megabytes() {
    let hub = HubProcess::start(&[], &[]).await;
    let mut device = FakeDevice::connect(&hub.device_url, DEV, vec![tool("t")]).await;
    let bearer = format!("Bearer {}", token(&hub));
    let host = common::raw_http::addr_of(&hub.host_url).to_string();

    // 1. The dashboard's traffic stream, read up to its `open` event.
    let mut dashboard = slow_socket(&hub).await;
    common::raw_http::send(&mut dashboard, "GET", &format!("/dashboard/api/traffic?id={DEV}"), &[("Authorization", &bearer)], "").await;
    assert_eq!(common::raw_http::read_head(&mut dashboard).await.0, 200);
    read_sse_until(&mut dashboard, |name, _| name == "open").await;

    // 2. The control API's watch with traffic, read up to its `watching` answer.
    let mut req = format!("ws://{host}/api/v1/link").into_client_request().unwrap();
    req.headers_mut().insert("Authorization", bearer.parse().unwrap());
    let (mut watch, _) = tokio_tungstenite::client_async(req, slow_socket(&hub).await).await.unwrap();
    watch.send(Message::text(json!({"id": 1, "op": "watch", "device": DEV, "traffic": true}).to_string())).await.unwrap();
    let first = tokio::time::timeout(DEADLINE, watch.next()).await.unwrap().unwrap().unwrap();
    assert!(first.to_text().unwrap().contains("watching"), "{first:?}");

    // 3. The legacy `/sse` stream and 4. the Streamable HTTP GET stream of `/mcp`, opened and
    // never read.
    let mut sse = slow_socket(&hub).await;
    common::raw_http::send(&mut sse, "GET", "/sse", &[("Authorization", &bearer), ("Accept", "text/event-stream")], "").await;
    assert_eq!(common::raw_http::read_head(&mut sse).await.0, 200);
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "slow", "version": "1"}}});
    let answer = common::raw_http::request("127.0.0.1", common::raw_http::addr_of(&hub.host_url), "POST", "/mcp", &[("Authorization", &bearer), ("Content-Type", "application/json"), ("Accept", "application/json, text/event-stream")], &init.to_string()).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    let session = answer.header("mcp-session-id").expect("a session id").to_string();
    let mut get = slow_socket(&hub).await;
    common::raw_http::send(&mut get, "GET", "/mcp", &[("Authorization", &bearer), ("Accept", "text/event-stream"), ("Mcp-Session-Id", &session), ("Mcp-Protocol-Version", "2025-06-18")], "").await;

    // The device: a flood of small notifications (more events than the ring's slots), then 1 MiB
    // frames, then it answers a call, which tells the test the hub has read everything before.
    let sid = device.session_id.clone();
    let small = json!({"session_id": sid, "type": "mcp", "payload": {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "tick"}}}).to_string();
    // Each frame is two events (its traffic and the notification); the readers' kernel buffers
    // take a few MiB before they stall, so twice the ring's slots are sure to overflow it.
    for _ in 0..(mcpdev::hub::registry::EVENT_RING * 2) {
        device.ws.feed(Message::text(small.clone())).await.unwrap();
    }
    let big_data = "m".repeat((1 << 20) - 200);
    let big = json!({"session_id": sid, "type": "mcp", "payload": {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": big_data}}}).to_string();
    assert!(big.len() <= 1 << 20 && big.len() > 1_000_000);
    for _ in 0..24 {
        device.ws.feed(Message::text(big.clone())).await.unwrap();
    }
    device.ws.flush().await.unwrap();
    let call = tokio::spawn(common::mcpdev(&hub, &["call", "t", "n=1", "-d", DEV, "--json"]));
    // The hub reads the flood first (a debug build on a shared machine may take a while).
    let request = tokio::time::timeout(DEADLINE, async {
        loop {
            let Some(Ok(Message::Text(t))) = device.ws.next().await else { panic!("the device's link ended") };
            let v: Value = serde_json::from_str(&t).unwrap();
            if v["payload"]["method"] == "tools/call" {
                return v["payload"].clone();
            }
        }
    })
    .await
    .expect("the call reaches the device after its flood");
    device.reply(&request["id"], json!({"content": [{"type": "text", "text": "done"}]})).await;
    let call = call.await.unwrap();
    assert_eq!(call.code, 0, "{call:?}");

    // The ring never held more than its bound, whatever the readers did.
    let text = metrics(&hub).await;
    let peak = sample(&text, "mcpdev_event_ring_peak_bytes");
    assert!(peak <= mcpdev::hub::registry::EVENT_RING_BYTES as f64, "peak {peak}");
    assert!(peak > 0.0);

    // The dashboard's reader resumes: it is told it fell behind, and the big frames arrive as
    // their size and a preview.
    let (mut lagged, mut big_seen) = (false, false);
    read_sse_until(&mut dashboard, |name, data| {
        lagged |= name == "lagged" && data.parse::<u64>().is_ok_and(|n| n > 0);
        if name == "traffic" {
            let v: Value = serde_json::from_str(data).unwrap();
            if let Some(bytes) = v["payload"]["truncated"]["bytes"].as_u64() {
                assert_eq!(bytes, big.len() as u64);
                assert_eq!(v["payload"]["method"], "notifications/message");
                assert!(data.len() < 8 * 1024, "a big frame reaches the viewer cut: {} bytes", data.len());
                big_seen = true;
            }
        }
        lagged && big_seen
    })
    .await;

    // The watch resumes too: a `lagged` event in the control API's own format.
    let mut watch_lagged = false;
    tokio::time::timeout(DEADLINE, async {
        while let Some(m) = watch.next().await {
            let v: Value = serde_json::from_str(m.unwrap().to_text().unwrap()).unwrap();
            if v["event"]["event"] == "lagged" && v["event"]["skipped"].as_u64().is_some_and(|n| n > 0) {
                watch_lagged = true;
                return;
            }
        }
    })
    .await
    .expect("the watch is told it fell behind");
    assert!(watch_lagged);

    // The readers go: nothing stays in the ring.
    drop((dashboard, watch, sse, get));
    let deadline = Instant::now() + DEADLINE;
    loop {
        let held = sample(&metrics(&hub).await, "mcpdev_event_ring_bytes");
        if held == 0.0 {
            break;
        }
        assert!(Instant::now() < deadline, "the ring still holds {held} bytes after its readers went");
        tokio::task::yield_now().await;
    }
}

/// One connection of a device that says hello, hears the hub's, and goes.
async fn connect_and_leave(url: &str, device_id: &str) {
    let mut req = url.into_client_request().unwrap();
    req.headers_mut().insert("Device-Id", device_id.parse().unwrap());
    req.headers_mut().insert("Client-Id", "looping".parse().unwrap());
    req.headers_mut().insert("Protocol-Version", "1".parse().unwrap());
    let (mut ws, _) = tokio_tungstenite::connect_async(req).await.unwrap();
    ws.send(Message::text(json!({"type":"hello","version":1,"features":{"mcp":true},"transport":"websocket"}).to_string())).await.unwrap();
    loop {
        match tokio::time::timeout(DEADLINE, ws.next()).await.expect("the hub's hello in time") {
            Some(Ok(Message::Text(t))) if t.contains("\"hello\"") => break,
            Some(Ok(_)) => {}
            other => panic!("the hub closed before its hello: {other:?}"),
        }
    }
    let _ = ws.close(None).await;
}

/// Whether a log line names this device and says `what`.
fn lines_with(log: &str, device: &str, what: &str) -> usize {
    log.lines().filter(|l| l.contains(device) && l.contains(what)).count()
}

/// The counts summed up in `"{device}: connected N more times"` lines (one per window), added.
fn summed_up(log: &str, device: &str) -> Option<u64> {
    let needle = format!("{device}: connected ");
    let counts: Vec<u64> = log.lines().filter_map(|l| l.split_once(&needle).and_then(|(_, rest)| rest.split(' ').next()).and_then(|n| n.parse().ok())).collect();
    (!counts.is_empty()).then(|| counts.iter().sum())
}

#[tokio::test]
async fn a_device_reconnecting_in_a_loop_is_summed_up_not_logged_line_by_line() {
    const LOOP: usize = 120;
    const LOOPER: &str = "02:00:00:00:31:02";
    // `-v`: connect lines are at info.
    let mut hub = HubProcess::start_capturing(&["-v"], &[]).await;
    let started = Instant::now();
    for _ in 0..LOOP {
        connect_and_leave(&hub.device_url, LOOPER).await;
    }
    let windows = started.elapsed().as_secs() / mcpdev::metrics::log_limit::WINDOW.as_secs() + 1;

    // The log: at most a few connect lines per window, and then one line with the rest's count.
    let stderr = hub.stderr.clone().unwrap();
    let deadline = Instant::now() + DEADLINE;
    let (logged, held) = loop {
        let log = stderr.lock().unwrap().clone();
        let logged = lines_with(&log, LOOPER, "device connected") as u64;
        assert!(logged <= u64::from(mcpdev::metrics::log_limit::PER_WINDOW) * windows, "{logged} connect lines in {windows} windows");
        if let Some(held) = summed_up(&log, LOOPER)
            && logged + held == LOOP as u64
        {
            break (logged, held);
        }
        assert!(Instant::now() < deadline, "no summary that accounts for every connect:\n{log}");
        tokio::task::yield_now().await;
    };
    assert!(held > 0 && logged > 0);
    let onboarding_warnings = lines_with(&stderr.lock().unwrap(), LOOPER, "asks to be onboarded more than");
    assert!(onboarding_warnings as u64 <= u64::from(mcpdev::metrics::log_limit::PER_WINDOW) * windows, "{onboarding_warnings}");

    // `serve --json`: a few events one by one, the rest in `suppressed` events whose counts
    // account for every connect, and whose `last` says how the device was left.
    let (mut connected, mut summed, mut last) = (0u64, 0u64, String::new());
    tokio::time::timeout(DEADLINE, async {
        while connected + summed < LOOP as u64 {
            let line = hub.log.next_line().await.unwrap().expect("the hub's log goes on");
            let v: Value = serde_json::from_str(&line).unwrap();
            if v["device_id"] != LOOPER {
                continue;
            }
            match v["event"].as_str().unwrap() {
                "connected" => connected += 1,
                "suppressed" => {
                    summed += v["counts"]["connected"].as_u64().unwrap_or(0);
                    last = v["last"].as_str().unwrap().to_string();
                    assert_eq!(v["count"].as_u64().unwrap(), v["counts"].as_object().unwrap().values().map(|n| n.as_u64().unwrap()).sum::<u64>());
                }
                _ => {}
            }
        }
    })
    .await
    .expect("the NDJSON log accounts for every connect");
    assert!(summed > 0, "the loop was summed up");
    assert!(connected <= u64::from(mcpdev::commands::serve_report::EVENTS_PER_WINDOW) * windows);
    assert!(["connected", "ready", "disconnected", "warning"].contains(&last.as_str()) || last.starts_with("onboarding"), "{last}");

    // `/metrics` counts what was held back, by kind.
    let text = metrics(&hub).await;
    assert!(sample(&text, "mcpdev_log_lines_suppressed_total{kind=\"connect\"}") >= held as f64, "{text}");
    assert!(sample(&text, "mcpdev_log_lines_suppressed_total{kind=\"event\"}") >= summed as f64);
}
