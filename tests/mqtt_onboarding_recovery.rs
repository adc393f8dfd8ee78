//! A device the hub could not onboard is onboarded later, while it stays connected, through a
//! real broker (Mosquitto): what a fleet joining a busy hub needs (issue 36's 100,000-device
//! runs left thousands of MQTT devices without tools for good before this).
//!
//! The device here never says hello twice: everything it gets, it gets from the hub's own
//! retries. Step timeouts are 1 s (`--onboarding-timeout`); the wait before onboarding again
//! after a failed round is the hub's default (30 s), so the test takes about 40 s.

mod common;

use common::fake_device::tool;
use common::mqtt::{Mosquitto, MqttDevice};
use common::{HubProcess, mcpdev, spawn_mcpdev};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

const D1: &str = "02:00:00:00:00:31";

/// The next MCP request with this method, however long it takes (the device's own `recv` gives
/// up after 10 s; the hub's next round comes 30 s after a failed one).
async fn next_request(device: &mut MqttDevice, method: &str) -> Value {
    loop {
        let m = device.rx.recv().await.expect("the device's connection runs");
        if m["type"] == "mcp" && m["payload"]["method"] == method && m["payload"].get("id").is_some() {
            return m["payload"].clone();
        }
    }
}

#[tokio::test]
async fn a_device_that_failed_onboarding_is_onboarded_again_and_its_late_answer_counts() {
    let mosquitto = Mosquitto::start().await;
    let broker = mosquitto.url();
    let hub = HubProcess::start(&["--mqtt", &broker, "--onboarding-timeout", "1s"], &[]).await;
    let mut watch = spawn_mcpdev(&["watch", "--json", "-d", D1], &[("MCPDEV_HUB", hub.host_url.as_str())]);
    let mut events = BufReader::new(watch.child.stdout.take().unwrap()).lines();
    let mut next = async || -> Value {
        let line = tokio::time::timeout(std::time::Duration::from_secs(60), events.next_line()).await.expect("an event in time");
        serde_json::from_str(&line.unwrap().expect("watch runs")).unwrap()
    };
    assert_eq!(next().await["event"], "watching");

    let mut device = MqttDevice::connect(&broker, D1).await;
    device.hello().await;

    // Round 1: the device hears every `initialize` and answers none, until the hub gives up.
    let mut asked = 0;
    let failed = loop {
        tokio::select! {
            // The device's requests first: the last `initialize` of the round is read before the
            // failure it ends in, so it is not taken for the next round's.
            biased;
            request = device.recv_request("initialize") => {
                asked += 1;
                assert!(request["id"].is_number(), "{request}");
            }
            ev = next() => {
                assert_ne!(ev["event"], "ready", "nothing was answered: {ev}");
                if ev["event"] == "onboarding_failed" {
                    break ev;
                }
            }
        }
    };
    assert!(asked >= 2, "a failed step is sent again before the hub gives up ({asked} initialize requests)");
    assert!(failed["error"].as_str().unwrap().contains("initialize"), "{failed}");
    let listed = mcpdev(&hub, &["devices", "--json"]).await;
    assert_eq!(listed.code, 0, "{listed:?}");
    let row = listed.json().as_array().unwrap().iter().find(|d| d["device_id"] == D1).cloned().expect("the device stays listed");
    assert_eq!(row["onboarding"]["failed"], true, "{row}");

    // Round 2, on the hub's own (no hello): the device answers the first `initialize` only once
    // its retry has come, as a device behind a busy broker does, and never answers the retry.
    let first = tokio::time::timeout(std::time::Duration::from_secs(60), next_request(&mut device, "initialize")).await.expect("the hub onboards the device again");
    let retry = device.recv_request("initialize").await;
    assert_ne!(first["id"], retry["id"]);
    device.reply(&first["id"], json!({"protocolVersion":"2024-11-05","capabilities":{"tools":{}},"serverInfo":{"name":"slow-mqtt","version":"1"}})).await;
    // From here it answers as any device does (a listing after a retry is confirmed by a second
    // one), and counts what it is asked.
    let asked = device.respond_forever(vec![tool("self.slow.ping")]);
    let ready = loop {
        let ev = next().await;
        assert_ne!(ev["event"], "onboarding_failed", "the late answer was the step's: {ev}");
        if ev["event"] == "ready" {
            break ev;
        }
    };
    assert_eq!(ready["tools"], 1, "{ready}");
    assert_eq!(asked.get("initialize"), 0, "the late answer ended the step: no `initialize` was sent after it");
    assert!(asked.get("tools/list") >= 1);

    // Served as any device is: its tool listed and called through the hub.
    let tools = mcpdev(&hub, &["tools", "list", "-d", D1, "--json"]).await;
    assert_eq!(tools.code, 0, "{tools:?}");
    assert_eq!(tools.json()["tools"][0]["name"], "self.slow.ping");
    let listed = mcpdev(&hub, &["devices", "--json"]).await;
    let row = listed.json().as_array().unwrap().iter().find(|d| d["device_id"] == D1).cloned().unwrap();
    assert_eq!((row["phase"].as_str(), row["onboarding"]["failed"].as_bool()), (Some("ready"), Some(false)), "{row}");
    watch.child.kill().await.unwrap();
}
