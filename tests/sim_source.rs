//! Issue 24: `sim --source-addr` spreads a fleet over local source addresses (so one machine can
//! simulate more devices than one address's ports allow); an address that is not this machine's
//! is a usage error before any device connects.

mod common;

use std::time::Duration;

use common::{HubProcess, mcpdev, spawn_mcpdev};

#[tokio::test]
async fn a_fleet_connects_from_each_source_address_in_turn() {
    let hub = HubProcess::start(&[], &[]).await;
    // The hub's event log (its stdout) says where each device connected from.
    let mut log = hub.log;
    let _sim = spawn_mcpdev(&["sim", "--url", &hub.device_url, "--device-id", "02:00:00:00:50:00", "--count", "6", "--source-addr", "127.0.0.2,127.0.0.3"], &[]);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let mut from = std::collections::BTreeMap::new();
    while from.len() < 6 {
        let line = tokio::time::timeout_at(deadline, log.next_line()).await.expect("every device connects in time").unwrap().expect("the hub runs");
        let ev: serde_json::Value = serde_json::from_str(&line).unwrap();
        if ev["event"] == "connected" {
            from.insert(ev["device_id"].as_str().unwrap().to_string(), ev["remote"].as_str().unwrap_or_default().to_string());
        }
    }
    for (id, remote) in &from {
        let last = u8::from_str_radix(&id[id.len() - 2..], 16).unwrap();
        let expected = if last % 2 == 0 { "127.0.0.2:" } else { "127.0.0.3:" };
        assert!(remote.starts_with(expected), "{id} came from {remote}, not {expected}");
    }
}

#[tokio::test]
async fn a_source_address_that_is_not_this_machines_is_refused_before_connecting() {
    let hub = HubProcess::start(&[], &[]).await;
    let mut sim = spawn_mcpdev(&["sim", "--url", &hub.device_url, "--source-addr", "127.0.0.2,192.0.2.55"], &[]);
    let status = tokio::time::timeout(Duration::from_secs(20), sim.child.wait()).await.expect("sim exits at once").unwrap();
    assert_eq!(status.code(), Some(2));
    let listed = mcpdev(&hub, &["devices", "--json"]).await.json();
    assert_eq!(listed, serde_json::json!([]), "no device connected");
}
