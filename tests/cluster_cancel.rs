//! A cancel reaches a device another hub serves as it reaches one of the host's own hub (issue
//! 45.2), with real processes: Mosquitto, two `mcpdev serve`, the device on hub B, the MCP host
//! on hub A. Each way a call can be given up — `tasks/cancel`, a task's TTL running out, a host
//! that sends `notifications/cancelled` for its plain call — must bring the device
//! `notifications/cancelled` naming the request it was sent, over the hubs' direct link
//! (`--cluster-link`) and over the broker alike, long before the call's own timeout (120 s
//! here: a cancel that only came with the timeout fails the test).

mod common;

use std::time::{Duration, Instant};

use common::HubProcess;
use common::fake_device::{FakeDevice, tool};
use common::mcp_session::{ACCEPT, Session};
use common::mqtt::Mosquitto;
use common::ws::DEADLINE;
use serde_json::{Value, json};

const DEVICE: &str = "02:00:00:00:00:4c";
const CAMERA: &str = "dev-02000000004c.camera.take";

/// Two hubs on one Mosquitto, with a direct link between them when `link`; the device on hub
/// B; back once hub A offers its tool on `/mcp`: the broker and the hubs' state (kept while the
/// test runs), the hubs, the device.
async fn pair(link: bool) -> ((Mosquitto, Vec<tempfile::TempDir>), Vec<HubProcess>, FakeDevice) {
    let broker = Mosquitto::start().await;
    let url = broker.url();
    let mut args = vec!["--mqtt", url.as_str(), "--mcp-timeout", "120"];
    if link {
        args.extend(["--cluster-link", "127.0.0.1:0"]);
    }
    let (hubs, dirs) = HubProcess::cluster(2, &args, false).await;
    let device = FakeDevice::connect(&hubs[1].device_url, DEVICE, vec![tool("camera.take")]).await;
    let (mut s, _) = Session::open(&hubs[0], "/mcp", "127.0.0.1").await;
    let deadline = Instant::now() + DEADLINE;
    loop {
        let tools = s.ask("tools/list", json!({})).await;
        if tools["result"]["tools"].as_array().is_some_and(|t| t.iter().any(|t| t["name"] == CAMERA)) {
            break;
        }
        assert!(Instant::now() < deadline, "hub A never offered hub B's device: {tools}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    ((broker, dirs), hubs, device)
}

/// The device's next `notifications/cancelled` (other messages skipped); fails the test if none
/// comes within `within`.
async fn cancelled(device: &mut FakeDevice, within: Duration) -> Value {
    tokio::time::timeout(within, async {
        loop {
            let m = device.recv().await;
            if m["payload"]["method"] == "notifications/cancelled" {
                return m["payload"]["params"].clone();
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("the device was not told of the cancel within {within:?}"))
}

/// How long a cancel may take to reach the device, whatever the path: far below the call's
/// timeout (120 s) and the tasks' TTL (600 s), far above what a busy machine adds to a hop (a
/// run beside a release build at load 8 took more than 8 s once).
const BOUND: Duration = Duration::from_secs(30);

async fn every_way_of_giving_up_reaches_the_device(link: bool) {
    let (_kept, hubs, mut device) = pair(link).await;
    let (mut s, _) = Session::open(&hubs[0], "/mcp", "127.0.0.1").await;

    // tasks/cancel.
    let task = s.task(CAMERA, 600_000).await;
    let id = task["taskId"].as_str().unwrap().to_string();
    let call = device.recv_request("tools/call").await;
    let answer = s.ask("tasks/cancel", json!({"taskId": id})).await;
    assert_eq!(answer["result"]["status"], "cancelled", "{answer}");
    assert_eq!(cancelled(&mut device, BOUND).await["requestId"], call["id"], "tasks/cancel (link: {link})");

    // A task whose TTL runs out while its call runs.
    let task = s.task(CAMERA, 1_000).await;
    assert_eq!(task["status"], "working", "{task}");
    let call = device.recv_request("tools/call").await;
    assert_eq!(cancelled(&mut device, BOUND).await["requestId"], call["id"], "the TTL (link: {link})");

    // A plain call its host gives up with notifications/cancelled.
    let mut waiter = s.again(500);
    let plain = tokio::spawn(async move { waiter.post("tools/call", json!({"name": CAMERA, "arguments": {"n": 1}})).await });
    let call = device.recv_request("tools/call").await;
    let note = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 501, "reason": "the user gave up"}});
    let sent = s.http.post(&s.url).header("accept", ACCEPT).header("mcp-session-id", &s.id).json(&note).send().await.unwrap();
    assert!(sent.status().is_success(), "{sent:?}");
    assert_eq!(cancelled(&mut device, BOUND).await["requestId"], call["id"], "notifications/cancelled (link: {link})");
    plain.abort();

    // The requests went the way this variant means (three calls, and the hub's own look-ups).
    let path = if link { "link" } else { "broker" };
    let sent = hubs[0].metric(&format!("mcpdev_cluster_requests_total{{path=\"{path}\"}}")).await;
    assert!(sent >= 3.0, "{sent} requests went on the {path} path");
}

#[tokio::test]
async fn a_cancel_a_ttl_and_a_host_giving_up_reach_a_device_on_another_hub_over_the_direct_link() {
    every_way_of_giving_up_reaches_the_device(true).await;
}

#[tokio::test]
async fn a_cancel_a_ttl_and_a_host_giving_up_reach_a_device_on_another_hub_over_the_broker() {
    every_way_of_giving_up_reaches_the_device(false).await;
}
