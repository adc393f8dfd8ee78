//! A device that streams progress faster than its MCP host reads (issue 45.6): the hub keeps the
//! latest report per call, not every one, so what the host finally reads is a short, rising
//! series ending in the call's answer, whatever the device sent. The host here does not read
//! at all while the device sends, through a socket with a 4 KiB receive buffer (so the kernel
//! cannot hold the reports for it); had the hub queued every report, the host would read all
//! of them afterwards.

mod common;

use std::time::Duration;

use common::HubProcess;
use common::fake_device::{FakeDevice, tool};
use common::mcp_session::Session;
use common::raw_http::{addr_of, read_head, send};
use serde_json::{Value, json};
use tokio::io::AsyncReadExt;

const DEVICE: &str = "02:00:00:00:00:6e";
const SLOW: &str = "dev-02000000006e.camera.take";
/// Reports the device sends during one call (about 12 MB of events if all were passed on,
/// three times what the hub's socket send buffer may hold at most).
const REPORTS: u32 = 30_000;

#[tokio::test]
async fn a_device_streaming_progress_to_a_host_that_does_not_read_costs_one_report() {
    let hub = HubProcess::start(&["--mcp-timeout", "120"], &[]).await;
    let mut device = FakeDevice::connect(&hub.device_url, DEVICE, vec![tool("camera.take")]).await;
    let (s, _) = Session::open(&hub, "/mcp", "127.0.0.1").await;

    // The host's call, from a socket that holds almost nothing unread.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut tcp = socket.connect(addr_of(&hub.host_url)).await.unwrap();
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": SLOW, "arguments": {"n": 1}, "_meta": {"progressToken": "p"}}}).to_string();
    let headers = [("Accept", "application/json, text/event-stream"), ("Content-Type", "application/json"), ("Mcp-Session-Id", s.id.as_str())];
    send(&mut tcp, "POST", "/mcp", &headers, &body).await;
    let call = device.recv_request("tools/call").await;
    let token = call["params"]["_meta"]["progressToken"].clone();
    assert!(token.is_string(), "the hub asked the device for progress: {call}");

    // The device streams its reports, then answers; the host reads nothing meanwhile.
    let sid = device.session_id.clone();
    let pad = "x".repeat(150);
    for n in 1..=REPORTS {
        let note = json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": token, "progress": n, "total": REPORTS + 1, "message": format!("step {n} {pad}")}});
        device.send(json!({"session_id": sid, "type": "mcp", "payload": note})).await;
    }
    device.reply(&call["id"], json!({"content": [{"type": "text", "text": "done"}]})).await;

    // Now the host reads everything the hub kept for it.
    let (status, _) = read_head(&mut tcp).await;
    assert_eq!(status, 200);
    let mut raw = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(60), async {
        let mut buf = vec![0u8; 1 << 16];
        loop {
            let n = tcp.read(&mut buf).await.unwrap();
            raw.extend_from_slice(&buf[..n]);
            // The stream ends with the call's answer.
            if n == 0 || String::from_utf8_lossy(&raw[raw.len().saturating_sub(4096)..]).contains("\"done\"") {
                return;
            }
        }
    });
    read.await.expect("the answer came");
    let text = String::from_utf8_lossy(&raw);
    let messages: Vec<Value> = text.lines().filter_map(|l| l.strip_prefix("data:")).filter_map(|d| serde_json::from_str(d.trim()).ok()).collect();
    let progress: Vec<&Value> = messages.iter().filter(|m| m["method"] == "notifications/progress").map(|m| &m["params"]).collect();
    assert!(messages.last().is_some_and(|m| m["result"]["content"][0]["text"] == "done"), "the answer ends the stream: {:?}", messages.last());
    assert!(progress.len() < (REPORTS / 2) as usize, "the host read {} of {REPORTS} reports: they were queued, not coalesced", progress.len());
    assert!(progress.windows(2).all(|w| w[0]["progress"].as_f64() < w[1]["progress"].as_f64()), "reports rise");
    assert_eq!(progress.last().map(|p| p["message"].clone()), Some(json!("answered by the device")), "the latest report is never lost");
    eprintln!("the host read {} progress reports of the device's {REPORTS}", progress.len());
}
