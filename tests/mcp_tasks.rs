//! MCP Tasks (2025-11-25) on the hub's MCP endpoints, as raw Streamable HTTP and legacy SSE
//! clients see them, with a scripted device whose answer the test holds back: a task answers at
//! once and its result comes once the device answers; `tasks/result` waits for it; a host that
//! reconnects fetches it; another requestor (another address) is answered as for an unknown id;
//! `tasks/cancel` frees the call; the caps and the TTL bound what a host that never fetches
//! leaves; progress reports a call's stages.

mod common;

use std::time::Duration;

use common::HubProcess;
use common::mcp_session::{ACCEPT, Session, without_id};
use common::fake_device::{FakeDevice, tool};
use common::ws::DEADLINE;
use serde_json::{Value, json};

const DEVICE: &str = "02:00:00:00:00:0b";
const SLOW: &str = "dev-02000000000b.camera.take";

async fn hub_with_camera(extra: &[&str]) -> (HubProcess, FakeDevice) {
    let mut args = vec!["--mcp-timeout", "30"];
    args.extend_from_slice(extra);
    let hub = HubProcess::start(&args, &[]).await;
    let device = FakeDevice::connect(&hub.device_url, DEVICE, vec![tool("camera.take"), tool("lamp.set")]).await;
    (hub, device)
}

#[tokio::test]
async fn a_task_answers_at_once_and_its_owner_fetches_the_result_from_any_session_but_nobody_else() {
    let (hub, mut device) = hub_with_camera(&[]).await;
    let (mut s, init) = Session::open(&hub, "/mcp", "127.0.0.1").await;
    assert_eq!(init["result"]["capabilities"]["tasks"], json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}));
    let tools = s.ask("tools/list", json!({})).await;
    let tools = tools["result"]["tools"].as_array().unwrap();
    let of = |name: &str| tools.iter().find(|t| t["name"] == name).cloned().unwrap();
    assert_eq!(of(SLOW)["execution"]["taskSupport"], "optional");
    assert!(of("list_devices").get("execution").is_none());

    // The task answers before the device is even asked.
    let task = s.task(SLOW, 60_000).await;
    assert_eq!(task["status"], "working", "{task}");
    let id = task["taskId"].as_str().unwrap().to_string();
    assert!(id.starts_with("hub/"), "{id}");
    let call = device.recv_request("tools/call").await;
    assert_eq!(call["params"]["name"], "camera.take");
    assert_eq!(s.ask("tasks/get", json!({"taskId": id})).await["result"]["status"], "working");

    // tasks/result waits for the device; the device answers; the result is the call's own.
    let mut waiter = s.again(100);
    let id2 = id.clone();
    let waiting = tokio::spawn(async move { waiter.ask("tasks/result", json!({"taskId": id2})).await });
    device.reply(&call["id"], json!({"content": [{"type": "text", "text": "a photo"}], "isError": false})).await;
    let result = tokio::time::timeout(DEADLINE, waiting).await.unwrap().unwrap();
    assert_eq!(result["result"]["content"][0]["text"], "a photo", "{result}");
    assert_eq!(result["result"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"], id);
    let got = s.ask("tasks/get", json!({"taskId": id})).await;
    assert_eq!(got["result"]["status"], "completed");
    assert!(got["result"]["createdAt"].as_str().unwrap().ends_with('Z') && got["result"]["ttl"] == 60_000);

    // A host that reconnects (a new session, same requestor) lists and fetches it.
    let (mut again, _) = Session::open(&hub, "/mcp", "127.0.0.1").await;
    let listed = again.ask("tasks/list", json!({})).await;
    assert!(listed["result"]["tasks"].as_array().unwrap().iter().any(|t| t["taskId"] == id), "{listed}");
    assert_eq!(again.ask("tasks/result", json!({"taskId": id})).await["result"]["content"][0]["text"], "a photo");

    // Another requestor, holding the id, learns nothing: the same answer as for a guessed id.
    let (mut other, _) = Session::open(&hub, "/mcp", "127.0.0.2").await;
    let guessed = format!("hub/{}", "0".repeat(32));
    for method in ["tasks/get", "tasks/result", "tasks/cancel"] {
        let theirs = other.ask(method, json!({"taskId": id})).await;
        let unknown = other.ask(method, json!({"taskId": guessed})).await;
        assert_eq!(theirs["error"]["code"], -32602, "{method}: {theirs}");
        assert_eq!(without_id(&theirs["error"], &id), without_id(&unknown["error"], &guessed), "{method}");
    }
    assert_eq!(other.ask("tasks/list", json!({})).await["result"]["tasks"], json!([]));
    // The owner's ended task cannot be cancelled.
    let late = s.ask("tasks/cancel", json!({"taskId": id})).await;
    assert_eq!(late["error"]["code"], -32602);
    assert!(late["error"]["message"].as_str().unwrap().contains("completed"), "{late}");
}

#[tokio::test]
async fn a_cancelled_task_ends_at_once_and_a_failing_tool_fails_its_task() {
    let (hub, mut device) = hub_with_camera(&[]).await;
    let (mut s, _) = Session::open(&hub, "/devices/02:00:00:00:00:0b/mcp", "127.0.0.1").await;
    let task = s.task("camera.take", 60_000).await;
    let id = task["taskId"].as_str().unwrap().to_string();
    let call = device.recv_request("tools/call").await;
    let cancelled = s.ask("tasks/cancel", json!({"taskId": id})).await;
    assert_eq!(cancelled["result"]["status"], "cancelled", "{cancelled}");
    // The device hears of it, naming the request it was sent.
    let note = loop {
        let m = device.recv().await;
        if m["payload"]["method"] == "notifications/cancelled" {
            break m["payload"].clone();
        }
    };
    assert_eq!(note["params"]["requestId"], call["id"], "{note}");
    let result = s.ask("tasks/result", json!({"taskId": id})).await;
    assert!(result["error"]["message"].as_str().unwrap().contains("cancelled"), "{result}");

    // isError from the tool: the task fails, and tasks/result is the tool's own result.
    let task = s.task("camera.take", 60_000).await;
    let id = task["taskId"].as_str().unwrap().to_string();
    let call = device.recv_request("tools/call").await;
    device.reply(&call["id"], json!({"content": [{"type": "text", "text": "lens cap on"}], "isError": true})).await;
    let result = s.ask("tasks/result", json!({"taskId": id})).await;
    assert_eq!(result["result"]["isError"], true);
    let got = s.ask("tasks/get", json!({"taskId": id})).await;
    assert_eq!((got["result"]["status"].as_str(), got["result"]["statusMessage"].as_str()), (Some("failed"), Some("lens cap on")));
    // The hub's own listing does not run as a task on /mcp.
    let (mut all, _) = Session::open(&hub, "/mcp", "127.0.0.1").await;
    let refused = all.ask("tools/call", json!({"name": "list_devices", "task": {}})).await;
    assert_eq!(refused["error"]["code"], -32601, "{refused}");
}

#[tokio::test]
async fn a_host_that_floods_tasks_and_never_fetches_them_meets_the_caps_and_the_ttl_frees_them() {
    let (hub, mut device) = hub_with_camera(&["--mcp-max-tasks-per-session", "3", "--mcp-max-tasks", "5"]).await;
    let (mut s, _) = Session::open(&hub, "/mcp", "127.0.0.1").await;
    for _ in 0..3 {
        assert_eq!(s.task(SLOW, 300).await["status"], "working");
    }
    let refused = s.ask("tools/call", json!({"name": SLOW, "arguments": {"n": 1}, "task": {}})).await;
    assert_eq!(refused["error"]["code"], -32000, "{refused}");
    assert!(refused["error"]["message"].as_str().unwrap().contains("--mcp-max-tasks-per-session 3"), "{refused}");
    // Another session has room of its own, up to the hub's total.
    let (mut t, _) = Session::open(&hub, "/mcp", "127.0.0.1").await;
    t.task(SLOW, 60_000).await;
    t.task(SLOW, 60_000).await;
    let refused = t.ask("tools/call", json!({"name": SLOW, "arguments": {"n": 1}, "task": {}})).await;
    assert!(refused["error"]["message"].as_str().unwrap().contains("--mcp-max-tasks 5"), "{refused}");
    // The first session's tasks live 300 ms: then they are gone, their calls with them, and
    // their places are free again.
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        let listed = s.ask("tasks/list", json!({})).await;
        if listed["result"]["tasks"].as_array().unwrap().len() == 2 {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "tasks outlived their ttl: {listed}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(s.task(SLOW, 60_000).await["status"], "working");
    for _ in 0..6 {
        device.recv_request("tools/call").await;
    }
}

#[tokio::test]
async fn a_call_with_a_progress_token_hears_its_stages() {
    let (hub, mut device) = hub_with_camera(&[]).await;
    let (s, _) = Session::open(&hub, "/mcp", "127.0.0.1").await;
    let body = json!({"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name": SLOW, "arguments": {"n": 1}, "_meta": {"progressToken": "p1"}}});
    let resp = s.http.post(&s.url).header("accept", ACCEPT).header("mcp-session-id", &s.id).json(&body).send().await.unwrap();
    assert!(resp.headers()["content-type"].to_str().unwrap().starts_with("text/event-stream"));
    let call = device.recv_request("tools/call").await;
    // Read the stream until the hub says it is waiting, then answer.
    let mut stream = resp.bytes_stream();
    let mut seen = String::new();
    use futures_util::StreamExt;
    while !seen.contains("waiting for the device") {
        let chunk = tokio::time::timeout(DEADLINE, stream.next()).await.expect("no progress in time").unwrap().unwrap();
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    // The device reports progress of its own, under the token the hub gave it.
    let token = call["params"]["_meta"]["progressToken"].clone();
    assert!(token.as_str().is_some_and(|t| t.starts_with("mcpdev-")), "{call}");
    let sid = device.session_id.clone();
    device.send(json!({"session_id": sid, "type": "mcp", "payload": {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": token, "progress": 1, "total": 2, "message": "half"}}})).await;
    while !seen.contains("half") {
        let chunk = tokio::time::timeout(DEADLINE, stream.next()).await.expect("the device's progress was not relayed").unwrap().unwrap();
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    device.reply(&call["id"], json!({"content": [{"type": "text", "text": "ok"}]})).await;
    while let Ok(Some(Ok(chunk))) = tokio::time::timeout(DEADLINE, stream.next()).await {
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    let progress: Vec<Value> = seen
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .filter(|m| m["method"] == "notifications/progress")
        .map(|m| m["params"].clone())
        .collect();
    let messages: Vec<&str> = progress.iter().map(|p| p["message"].as_str().unwrap()).collect();
    assert_eq!(messages, ["sent to the device", "waiting for the device", "half", "answered by the device"], "{seen}");
    assert!(progress.windows(2).all(|w| w[0]["progress"].as_f64() < w[1]["progress"].as_f64()));
    assert!(progress.iter().all(|p| p["progressToken"] == "p1"));
    assert!(seen.contains("\"ok\""), "{seen}");
}

/// The MCP Python SDK 1.x's own task client, over Streamable HTTP and legacy SSE: it sees the
/// capability and the tool's task support, creates a task, polls it to its end while the device
/// works, and fetches the device's answer.
#[tokio::test]
async fn the_python_sdks_task_client_runs_a_slow_tool_as_a_task() {
    let python = common::installed("MCPDEV_TEST_MCP1_PYTHON", common::repo_path(".ci/venv-mcp1/bin/python"), "the MCP Python SDK 1.x (.ci/test creates .ci/venv-mcp1)");
    let (hub, mut device) = hub_with_camera(&[]).await;
    for (transport, path) in [("http", "/mcp"), ("sse", "/sse")] {
        let child = tokio::process::Command::new(&python)
            .arg(common::repo_path("tests/interop/mcp_task_client.py"))
            .args(["--url", &format!("{}{path}", hub.host_url), "--transport", transport, "--tool", SLOW])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let call = tokio::time::timeout(Duration::from_secs(60), device.recv_request("tools/call")).await.expect("the SDK's task reached no device");
        device.reply(&call["id"], json!({"content": [{"type": "text", "text": "a photo"}], "isError": false})).await;
        let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output()).await.expect("the SDK client hung").unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{transport}: {text}");
        let steps: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        let step = |op: &str| steps.iter().find(|s| s["op"] == op).cloned().unwrap_or_else(|| panic!("{transport}: no {op} in {text}"));
        assert_eq!(step("connect")["capabilities"]["tasks"]["requests"]["tools"]["call"], json!({}), "{transport}");
        let tools = step("list_tools")["tools"].as_array().unwrap().clone();
        assert_eq!(tools.iter().find(|t| t["name"] == SLOW).unwrap()["execution"]["taskSupport"], "optional", "{transport}");
        let id = step("created")["task"]["taskId"].as_str().unwrap().to_string();
        assert_eq!(step("polled")["statuses"].as_array().unwrap().last().unwrap(), "completed", "{transport}");
        assert_eq!(step("result")["result"]["content"][0]["text"], "a photo", "{transport}");
        assert!(step("list")["ids"].as_array().unwrap().contains(&json!(id)), "{transport}");
    }
}

/// Two hubs of one cluster on Mosquitto: a host on hub A runs a task of a device that hub B
/// serves; the task is held by A, and its id says so (so hub B, asked for it, asks A).
#[tokio::test]
async fn a_task_on_one_hub_for_another_hubs_device_works_and_its_id_names_its_hub() {
    let broker = common::mqtt::Mosquitto::start().await;
    let (hubs, _dirs) = HubProcess::cluster(2, &["--mqtt", &broker.url(), "--mcp-timeout", "30"], false).await;
    let mut device = FakeDevice::connect(&hubs[1].device_url, DEVICE, vec![tool("camera.take")]).await;
    let hub_a = hubs[0].info["hub_id"].as_str().unwrap().to_string();
    let hub_b = hubs[1].info["hub_id"].as_str().unwrap().to_string();
    assert_ne!(hub_a, hub_b);
    // Until hub A knows the device (the cluster index carries it within a few seconds).
    let deadline = tokio::time::Instant::now() + DEADLINE;
    let (mut s, _) = Session::open(&hubs[0], "/mcp", "127.0.0.1").await;
    loop {
        let tools = s.ask("tools/list", json!({})).await;
        if tools["result"]["tools"].as_array().is_some_and(|t| t.iter().any(|t| t["name"] == SLOW)) {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "hub A never offered hub B's device: {tools}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let task = s.task(SLOW, 60_000).await;
    let id = task["taskId"].as_str().unwrap().to_string();
    assert!(id.starts_with(&format!("{hub_a}/")), "{id} should name hub A ({hub_a})");
    let call = device.recv_request("tools/call").await;
    device.reply(&call["id"], json!({"content": [{"type": "text", "text": "through the cluster"}]})).await;
    let result = s.ask("tasks/result", json!({"taskId": id})).await;
    assert_eq!(result["result"]["content"][0]["text"], "through the cluster", "{result}");
    // Hub B holds no such task, but its id names hub A: B asks A (tests/cluster_tasks.rs).
    let (mut on_b, _) = Session::open(&hubs[1], "/mcp", "127.0.0.1").await;
    let got = on_b.ask("tasks/get", json!({"taskId": id})).await;
    assert_eq!(got["result"]["status"], "completed", "{got}");
}

/// Ctrl-C during `mcpdev call -d` (the control API's path): the CLI ends, and the hub gives up
/// the call at once, telling the device with `notifications/cancelled`.
#[tokio::test]
async fn ctrl_c_during_a_call_cancels_it_on_the_hub() {
    let (hub, mut device) = hub_with_camera(&[]).await;
    let mut cli = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcpdev"))
        .args(["call", "camera.take", "n=1", "-d", DEVICE])
        .env("MCPDEV_HUB", &hub.host_url)
        .env("MCPDEV_RUNTIME_DIR", &hub.runtime_dir)
        .env("NO_COLOR", "1")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let call = device.recv_request("tools/call").await;
    // SAFETY: a signal to the child this test started.
    unsafe { libc::kill(cli.id().unwrap() as i32, libc::SIGINT) };
    let status = tokio::time::timeout(DEADLINE, cli.wait()).await.expect("the CLI did not end on Ctrl-C").unwrap();
    assert!(!status.success());
    let note = loop {
        let m = device.recv().await;
        if m["payload"]["method"] == "notifications/cancelled" {
            break m["payload"].clone();
        }
    };
    assert_eq!(note["params"]["requestId"], call["id"], "{note}");
}
