//! A hub that loses the broker keeps its view of the cluster (issue 46.1): an MCP host on it
//! still finds every device of the other hub with `search_devices`, and calls one, while the
//! hub is cut off and while its new connection is being made (connected, its subscriptions not
//! yet acknowledged, the retained presence records not yet replayed). Before, the reconnect
//! cleared every hub's presence and the view shrank until the replay was in: at 100,000
//! devices a listing through such a hub showed 43,905 of ~75,000 devices. And the other hub,
//! which saw the cut-off hub's will, still serves its requests on their proven direct link.

mod common;

use std::time::{Duration, Instant};

use common::cluster::until_listed;
use common::fake_device::tool;
use common::mcp_session::Session;
use common::mqtt::{Counts, Mosquitto, MqttDevice};
use common::relay::Relay;
use common::HubProcess;
use serde_json::json;

const IDS: [&str; 3] = ["ce:00:00:00:00:01", "ce:00:00:00:00:02", "ce:00:00:00:00:03"];

/// The device ids `search_devices` through the host's hub lists.
async fn searched(host: &mut Session) -> Vec<String> {
    let found = host.ask("tools/call", json!({"name": "search_devices", "arguments": {}})).await;
    let devices = found["result"]["structuredContent"]["devices"].as_array().cloned().unwrap_or_default();
    devices.iter().filter_map(|d| d["device_id"].as_str().map(str::to_string)).collect()
}

/// Every device of the other hub is listed through the host's hub, and a call of one reaches it.
async fn whole(host: &mut Session, counts: &Counts, device: &str, when: &str) {
    let listed = searched(host).await;
    for id in IDS {
        assert!(listed.iter().any(|l| l == id), "{when}: search_devices does not list {id}: {listed:?}");
    }
    let before = counts.get("tools/call");
    let started = Instant::now();
    let answer = host.ask("tools/call", json!({"name": "call_device_tool", "arguments": {"device": device, "tool": "t.echo", "arguments": {"n": 1}}})).await;
    assert_eq!(answer["result"]["content"][0]["text"], "ok", "{when}: the call of {device} after {:?}: {answer}", started.elapsed());
    assert_eq!(counts.get("tools/call"), before + 1, "{when}: the call reached the device once");
}

fn logged_times(hub: &HubProcess, needle: &str) -> usize {
    hub.stderr.as_ref().unwrap().lock().unwrap().matches(needle).count()
}

#[tokio::test]
async fn a_hub_that_loses_the_broker_keeps_the_cluster_in_view_and_in_reach() {
    let broker = Mosquitto::start().await;
    let relay = Relay::start(broker.port).await;
    let url = broker.url();
    // Hub B first, alone: it claims every device.
    let (mut hubs, mut dirs) = HubProcess::cluster_of(&[&["-v", "--mqtt", &url, "--cluster-link", "127.0.0.1:0"]], true).await;
    let mut counts = Vec::new();
    for id in IDS {
        let mut dev = MqttDevice::connect(&url, id).await;
        dev.hello().await;
        counts.push(dev.respond_forever(vec![tool("t.echo")]));
    }
    let ids: Vec<String> = IDS.iter().map(|s| s.to_string()).collect();
    until_listed(&hubs[0], &ids, Duration::from_secs(30)).await;
    // Hub A, the host's, behind the relay.
    let relayed = relay.url();
    let (a, a_dir) = HubProcess::cluster_of(&[&["-v", "--mqtt", &relayed, "--cluster-link", "127.0.0.1:0", "--mcp-timeout", "30"]], true).await;
    hubs.extend(a);
    dirs.extend(a_dir);
    let (b, a) = (&hubs[0], &hubs[1]);
    until_listed(a, &ids, Duration::from_secs(30)).await;
    let (mut host, _) = Session::open(a, "/mcp", "127.0.0.1").await;
    // The direct link from A to B is up: a call goes on it.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        whole(&mut host, &counts[0], IDS[0], "connected").await;
        if a.metric("mcpdev_cluster_requests_total{path=\"link\"}").await > 0.0 {
            break;
        }
        assert!(Instant::now() < deadline, "hub A's requests never took the direct link to hub B");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // A is cut off; B sees its will.
    let (ups, gone) = (logged_times(a, "MQTT broker connected"), logged_times(b, "presence record was cleared"));
    relay.cut();
    a.logged(|l| l.contains("MQTT broker unreachable")).await;
    b.logged(|l| l.matches("presence record was cleared").count() > gone).await;
    whole(&mut host, &counts[1], IDS[1], "while hub A is cut off from the broker").await;

    // A's new connection is up, nothing of its subscriptions has come yet.
    relay.hold();
    relay.open();
    a.logged(|l| l.matches("MQTT broker connected").count() > ups).await;
    whole(&mut host, &counts[2], IDS[2], "while hub A's subscriptions are replayed").await;

    // The replay comes: B's presence is in it, so nothing is dropped.
    const IN: &str = "the broker's presence records are all in";
    assert_eq!(logged_times(a, IN), 1, "not reconciled before the replay came");
    relay.release();
    let log = a.logged(|l| l.matches(IN).count() > 1).await;
    assert!(!log.contains("no longer on the broker"), "hub B's record came back: nothing was dropped: {log}");
    whole(&mut host, &counts[0], IDS[0], "after hub A's reconnect").await;
}
