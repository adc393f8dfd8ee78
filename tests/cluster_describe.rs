//! Issue 46.4: one description of a device, wherever it is. Two hubs on one Mosquitto, the same
//! kind of device (`mcpdev sim`: 6 tools, 2 of them user-only, named `mcpdev-sim`) on each: every
//! place that describes a device (the fleet tools' `search_devices`, the control API's `devices`)
//! gives the device of this hub and the device of the other hub the same fields with the same
//! values, but for the `hub` that serves it. Every wait polls with a deadline.

mod common;

use std::time::{Duration, Instant};

use common::mcp_session::Session;
use common::mqtt::Mosquitto;
use common::{HubProcess, mcpdev, spawn_mcpdev};
use serde_json::{Value, json};

const DEADLINE: Duration = Duration::from_secs(30);
const IDS: [&str; 2] = ["0d:00:00:00:46:01", "0d:00:00:00:46:02"];

/// `value` without the fields that name where the device is, or which device it is.
fn placeless(value: &Value) -> Value {
    let mut v = value.clone();
    for key in ["hub", "hub_name", "device_id", "prefix", "connected_at_ms"] {
        v.as_object_mut().unwrap().remove(key);
    }
    v
}

/// The summary fields of a `devices` row (a local row has the whole description beside them).
fn summary(row: &Value) -> Value {
    json!({"name": row["name"], "transport": row["transport"], "phase": row["phase"], "tool_count": row["tool_count"], "host_tools": row["host_tools"], "hub": row["hub"].is_string()})
}

#[tokio::test]
async fn a_device_is_described_alike_on_its_hub_and_on_another() {
    let broker = Mosquitto::start().await;
    let (hubs, _dirs) = HubProcess::cluster(2, &["--mqtt", &broker.url()], false).await;
    let _sims: Vec<_> = hubs.iter().zip(IDS).map(|(h, id)| spawn_mcpdev(&["sim", "--url", &h.device_url, "--device-id", id], &[])).collect();

    for (me, hub) in hubs.iter().enumerate() {
        // `devices --json`: both devices, ready, through this hub.
        let deadline = Instant::now() + DEADLINE;
        let rows = loop {
            let out = mcpdev(hub, &["devices", "--json"]).await;
            assert_eq!(out.code, 0, "{out:?}");
            let rows = out.json().as_array().cloned().unwrap_or_default();
            let ready = rows.iter().filter(|d| d["phase"] == "ready" && IDS.contains(&d["device_id"].as_str().unwrap_or_default())).count();
            // The other hub's row carries the name once its index says it.
            if ready == 2 && rows.iter().all(|d| d["name"].is_string()) {
                break rows;
            }
            assert!(Instant::now() < deadline, "hub {me}: both devices not listed ready and named in time: {rows:#?}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        let (local, remote) = (&rows[me], &rows[1 - me]);
        assert!(local["session_id"].is_string() && remote.get("session_id").is_none(), "hub {me}: {rows:#?}");
        assert_eq!(summary(local), summary(remote), "hub {me}: the same kind of device, described alike");
        assert_eq!(summary(local), json!({"name": "mcpdev-sim", "transport": "websocket", "phase": "ready", "tool_count": 6, "host_tools": 4, "hub": true}));
        assert_ne!(local["hub"], remote["hub"]);

        // `search_devices` on this hub's `/mcp`: the same entry for both, but its hub.
        let (mut mcp, _) = Session::open(hub, "/mcp", "127.0.0.1").await;
        let found = mcp.ask("tools/call", json!({"name": "search_devices", "arguments": {"query": "0d:00:00:00:46"}})).await;
        let devices = found["result"]["structuredContent"]["devices"].as_array().cloned().unwrap_or_default();
        assert_eq!(devices.iter().map(|d| d["device_id"].clone()).collect::<Vec<_>>(), IDS.map(Value::from), "{found}");
        assert_eq!(placeless(&devices[0]), placeless(&devices[1]), "hub {me}: {devices:#?}");
        assert_eq!(placeless(&devices[me]), json!({"name": "mcpdev-sim", "phase": "ready", "tools": 4, "matching_tools": []}));
        assert_eq!(devices[me]["hub"], local["hub"], "{devices:#?}");
        assert_eq!(devices[1 - me]["hub"], remote["hub"], "{devices:#?}");
        // The name is searched for on either hub's device alike.
        let by_name = mcp.ask("tools/call", json!({"name": "search_devices", "arguments": {"query": "MCPDEV-SIM"}})).await;
        let named = by_name["result"]["structuredContent"]["devices"].as_array().map_or(0, Vec::len);
        assert_eq!(named, 2, "{by_name}");
    }
}
