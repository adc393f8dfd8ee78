//! `mcpdev call --task` and `mcpdev tasks result` through every MCP path of a hub (issue 45.1):
//! `/mcp` with prefixed names in the full face and in the fleet face, `/sse`, and
//! `/devices/<id>/mcp`. Each path declares the same task support for a device's tool, so the
//! CLI runs it as a task on each, and the result names the device that answered (not the URL).
//! Beside it, the adversary: the hub's own listing asked as a task is refused before anything is
//! sent, on every path.

mod common;

use common::fake_device::{FakeDevice, tool};
use common::{HubProcess, Outcome, mcpdev};
use serde_json::json;

const DEVICE: &str = "02:00:00:00:00:5a";
const PREFIXED: &str = "dev-02000000005a.camera.take";

/// `mcpdev call NAME n=1 --task --url URL --json` while the device answers `text`; what the
/// CLI printed.
async fn call_as_task(hub: &HubProcess, device: &mut FakeDevice, url: &str, name: &str, text: &str) -> Outcome {
    let cli = tokio::spawn(mcpdev(hub, &["call", name, "n=1", "--task", "--url", url, "--json"]));
    let call = device.recv_request("tools/call").await;
    assert_eq!(call["params"]["name"], "camera.take", "{url}: {call}");
    device.reply(&call["id"], json!({"content": [{"type": "text", "text": text}], "isError": false})).await;
    cli.await.unwrap()
}

/// The task id `call --task` named on stderr (`task <id>: working`).
fn task_id(stderr: &str) -> String {
    stderr.lines().find_map(|l| l.strip_prefix("task ")?.split_once(": ").map(|(id, _)| id.to_string())).unwrap_or_else(|| panic!("no task named: {stderr}"))
}

async fn every_path(hub: &HubProcess, device: &mut FakeDevice, face: &str) {
    let host = &hub.host_url;
    let paths = [
        (format!("{host}/mcp"), PREFIXED),
        (format!("{host}/sse"), PREFIXED),
        (format!("{host}/devices/{DEVICE}/mcp"), "camera.take"),
    ];
    for (n, (url, name)) in paths.iter().enumerate() {
        let text = format!("photo {n} ({face})");
        let out = call_as_task(hub, device, url, name, &text).await;
        assert_eq!(out.code, 0, "{face} {url}: {}", out.stderr);
        let doc = out.json();
        assert_eq!(doc["device_id"], DEVICE, "{face} {url}: {doc}");
        assert_eq!(doc["content"][0]["text"], text.as_str(), "{face} {url}: {doc}");
        // The task's result fetched again, by id: it names the device too (45.8).
        let id = task_id(&out.stderr);
        let again = mcpdev(hub, &["tasks", "result", &id, "--url", url, "--json"]).await;
        assert_eq!(again.code, 0, "{face} {url}: {}", again.stderr);
        let doc = again.json();
        assert_eq!(doc["device_id"], DEVICE, "{face} {url}: tasks result names the device, not the URL: {doc}");
        assert_eq!(doc["content"][0]["text"], text.as_str());
    }
    // The hub's own listing does not run as a task: refused by the CLI with nothing sent.
    let listing = if face == "fleet face" { "search_devices" } else { "list_devices" };
    for url in [format!("{host}/mcp"), format!("{host}/sse")] {
        let out = mcpdev(hub, &["call", listing, "--task", "--url", &url]).await;
        assert_eq!(out.code, 7, "{face} {url}: {out:?}");
        assert!(out.stderr.contains("does not run as a task"), "{face} {url}: {}", out.stderr);
    }
}

#[tokio::test]
async fn call_task_runs_a_device_tool_as_a_task_through_every_path_of_a_hub() {
    let hub = HubProcess::start(&["--mcp-timeout", "30"], &[]).await;
    let mut device = FakeDevice::connect(&hub.device_url, DEVICE, vec![tool("camera.take")]).await;
    every_path(&hub, &mut device, "full face").await;
    // Each task's call was timed as one (slow by design: left out of the p99 alert).
    assert!(hub.metric("mcpdev_call_duration_seconds_count{kind=\"task\"}").await >= 3.0);
}

#[tokio::test]
async fn call_task_runs_a_device_tool_as_a_task_through_the_fleet_face() {
    let hub = HubProcess::start(&["--mcp-timeout", "30", "--mcp-fleet-threshold", "0"], &[]).await;
    let mut device = FakeDevice::connect(&hub.device_url, DEVICE, vec![tool("camera.take")]).await;
    every_path(&hub, &mut device, "fleet face").await;
}
