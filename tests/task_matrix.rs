//! The task matrix of issue 45 ("done when"): create, get, result, cancel and progress of an MCP
//! task on each MCP path of a hub — `/mcp` with a prefixed name, `/sse`, `/devices/<id>/mcp`,
//! and the fleet tool `call_device_tool` — for a device of that hub and for a device of another
//! hub of its cluster (two hubs on Mosquitto), with the MCP Python SDK's own task client
//! (`tests/interop/mcp_task_matrix.py`). In every cell: the task answers at once and is
//! `working`, it completes with the device's answer, the host hears the device's own progress
//! under its token, and a cancel ends the second task and reaches the device as
//! `notifications/cancelled` naming the request it was sent. The adversary: another device on
//! each hub floods progress under every token the hubs hand out (`mcpdev-0` … `mcpdev-200`);
//! none of it reaches a host.

mod common;

use std::time::{Duration, Instant};

use common::HubProcess;
use common::fake_device::{FakeDevice, tool};
use common::mcp_session::Session;
use common::mqtt::Mosquitto;
use serde_json::{Value, json};
use tokio::sync::mpsc;

const LOCAL: &str = "02:00:00:00:00:8a";
const REMOTE: &str = "02:00:00:00:00:8b";
const NOISY: [&str; 2] = ["02:00:00:00:00:8c", "02:00:00:00:00:8d"];

/// A device that sends forged progress under every token a hub hands out, over and over.
async fn forge(mut device: FakeDevice) {
    let sid = device.session_id.clone();
    loop {
        for n in 0..=200 {
            let note = json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": format!("mcpdev-{n}"), "progress": 1, "total": 2, "message": "forged"}});
            device.send(json!({"session_id": sid, "type": "mcp", "payload": note})).await;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// What a device saw: the id of each `tools/call` it was sent and of each cancel it heard.
#[derive(Debug)]
enum Seen {
    /// A `tools/call`: its id and its `n` (1: task A's, 2: task B's).
    Call(Value, Value),
    Cancelled(Value),
}

/// Plays the device: a call with `n: 1` reports progress ("half") under the hub's token, then
/// answers "done"; a call with `n: 2` is left to be cancelled.
fn play(mut device: FakeDevice) -> mpsc::UnboundedReceiver<Seen> {
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        loop {
            // Quiet while an SDK client starts (seconds on a busy machine): only a hub silent
            // for minutes is a failure.
            let m = device.recv_within(Duration::from_secs(300)).await;
            let p = &m["payload"];
            match p["method"].as_str() {
                Some("tools/call") => {
                    let _ = tx.send(Seen::Call(p["id"].clone(), p["params"]["arguments"]["n"].clone()));
                    if p["params"]["arguments"]["n"] == 1 {
                        let token = p["params"]["_meta"]["progressToken"].clone();
                        let sid = device.session_id.clone();
                        let note = json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": token, "progress": 1, "total": 2, "message": "half"}});
                        device.send(json!({"session_id": sid, "type": "mcp", "payload": note})).await;
                        // The host's task is "working" before it ends: it asked for it first.
                        tokio::time::sleep(Duration::from_millis(300)).await;
                        device.reply(&p["id"], json!({"content": [{"type": "text", "text": "done"}], "isError": false})).await;
                    }
                }
                Some("notifications/cancelled") => {
                    let _ = tx.send(Seen::Cancelled(p["params"]["requestId"].clone()));
                }
                _ => {}
            }
        }
    });
    rx
}

async fn next_seen(seen: &mut mpsc::UnboundedReceiver<Seen>) -> Seen {
    tokio::time::timeout(Duration::from_secs(30), seen.recv()).await.expect("the device saw nothing in time").expect("the device task ended")
}

/// What the device saw of one cell: task A's call (which it answered), then task B's, cancelled
/// by the host right after it was created. The hub either sent B's call and then told the device
/// of the cancel (naming that request), or got the cancel before it sent the call and never sent
/// it (a busy machine): both are right; a call the device runs and is never told of is not. A
/// B call of an earlier cell that came late, and its cancel, are passed over.
async fn device_saw_one_cell(seen: &mut mpsc::UnboundedReceiver<Seen>, what: &str) {
    loop {
        match next_seen(seen).await {
            Seen::Call(_, n) if n == 1 => break,
            _ => continue,
        }
    }
    let b = match tokio::time::timeout(Duration::from_secs(10), seen.recv()).await {
        Ok(Some(Seen::Call(id, n))) if n == 2 => id,
        Ok(Some(other)) => panic!("{what}: after task A's call the device saw {other:?}"),
        Ok(None) => panic!("{what}: the device task ended"),
        Err(_) => {
            eprintln!("{what}: task B was cancelled before the hub sent its call");
            return;
        }
    };
    match next_seen(seen).await {
        Seen::Cancelled(id) => assert_eq!(id, b, "{what}: the cancel names task B's request"),
        other => panic!("{what}: task B's call was followed by {other:?}, not its cancel"),
    }
}

/// One cell: the SDK client's steps, as JSON lines.
async fn cell(url: &str, transport: &str, tool: &str, args_a: &Value, args_b: &Value) -> Vec<Value> {
    let python = common::installed("MCPDEV_TEST_MCP1_PYTHON", common::repo_path(".ci/venv-mcp1/bin/python"), "the MCP Python SDK 1.x (.ci/test creates .ci/venv-mcp1)");
    let out = tokio::process::Command::new(python)
        .arg(common::repo_path("tests/interop/mcp_task_matrix.py"))
        .args(["--url", url, "--transport", transport, "--tool", tool, "--args-a", &args_a.to_string(), "--args-b", &args_b.to_string()])
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(90), out).await.expect("the SDK client hung").unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{url} {tool}: {text}\n{}", String::from_utf8_lossy(&out.stderr));
    text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

#[tokio::test]
async fn every_task_operation_works_on_every_mcp_path_for_a_local_and_a_remote_device() {
    let broker = Mosquitto::start().await;
    let url = broker.url();
    let (hubs, _dirs) = HubProcess::cluster(2, &["--mqtt", &url, "--mcp-timeout", "60"], false).await;
    let mut seen_local = play(FakeDevice::connect(&hubs[0].device_url, LOCAL, vec![tool("camera.take")]).await);
    let mut seen_remote = play(FakeDevice::connect(&hubs[1].device_url, REMOTE, vec![tool("camera.take")]).await);
    let mut forgers = Vec::new();
    for (hub, id) in hubs.iter().zip(NOISY) {
        forgers.push(tokio::spawn(forge(FakeDevice::connect(&hub.device_url, id, vec![tool("lamp.set")]).await)));
    }
    // Until hub A offers hub B's device.
    let (mut s, _) = Session::open(&hubs[0], "/mcp", "127.0.0.1").await;
    let deadline = Instant::now() + Duration::from_secs(20);
    let prefixed = |id: &str| format!("dev-{}.camera.take", id.replace(':', ""));
    loop {
        let tools = s.ask("tools/list", json!({})).await;
        if tools["result"]["tools"].as_array().is_some_and(|t| t.iter().any(|t| t["name"] == prefixed(REMOTE).as_str())) {
            break;
        }
        assert!(Instant::now() < deadline, "hub A never offered hub B's device: {tools}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let host = &hubs[0].host_url;
    let mut cells = 0;
    for (device, seen) in [(LOCAL, &mut seen_local), (REMOTE, &mut seen_remote)] {
        let name = prefixed(device);
        let paths: [(String, &str, String, Value, Value); 4] = [
            (format!("{host}/mcp"), "http", name.clone(), json!({"n": 1}), json!({"n": 2})),
            (format!("{host}/sse"), "sse", name.clone(), json!({"n": 1}), json!({"n": 2})),
            (format!("{host}/devices/{device}/mcp"), "http", "camera.take".into(), json!({"n": 1}), json!({"n": 2})),
            (
                format!("{host}/mcp"),
                "http",
                "call_device_tool".into(),
                json!({"device": device, "tool": "camera.take", "arguments": {"n": 1}}),
                json!({"device": device, "tool": "camera.take", "arguments": {"n": 2}}),
            ),
        ];
        for (url, transport, tool, a, b) in &paths {
            let what = format!("{device} via {url} ({transport}) {tool}");
            let steps = cell(url, transport, tool, a, b).await;
            let step = |op: &str| steps.iter().find(|s| s["op"] == op).cloned().unwrap_or_else(|| panic!("{what}: no {op} in {steps:?}"));
            assert_eq!(step("created")["task"]["status"], "working", "{what}");
            assert_eq!(step("got")["status"], "working", "{what}: tasks/get while the device works");
            assert_eq!(step("result")["statuses"].as_array().unwrap().last().unwrap(), "completed", "{what}");
            assert_eq!(step("result")["result"]["content"][0]["text"], "done", "{what}");
            let progress = step("progress")["progress"].as_array().unwrap().clone();
            assert!(progress.iter().any(|p| p["message"] == "half" && p["progressToken"] == "matrix-a"), "{what}: the device's progress under the host's token: {progress:?}");
            assert!(!progress.iter().any(|p| p["message"] == "forged"), "{what}: another device's progress reached the host: {progress:?}");
            assert_eq!(step("cancelled")["status"], "cancelled", "{what}");
            device_saw_one_cell(seen, &what).await;
            cells += 1;
        }
    }
    assert_eq!(cells, 8);
    assert!(forgers.iter().all(|f| !f.is_finished()), "the forging devices kept at it");
}
