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
    each_from_its_source_address(&mut log, 6, "every device connects in time").await;
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

#[tokio::test]
async fn a_fleet_over_wss_connects_from_each_source_address_and_still_verifies_the_hub() {
    let state = tempfile::tempdir().unwrap();
    let dir = state.path().to_string_lossy().into_owned();
    let hub = HubProcess::start(&["--tls", "auto"], &[("MCPDEV_STATE_DIR", &dir)]).await;
    assert!(hub.device_url.starts_with("wss://"), "{}", hub.info);
    let ca = state.path().join("tls/ca.pem").to_string_lossy().into_owned();
    let mut log = hub.log;
    // The sim's own state directory, so that it trusts only the CA it is given.
    let own = tempfile::tempdir().unwrap();
    let own = own.path().to_string_lossy().into_owned();
    let _sim = spawn_mcpdev(
        &["sim", "--url", &hub.device_url, "--device-id", "02:00:00:00:51:00", "--count", "4", "--source-addr", "127.0.0.2,127.0.0.3"],
        &[("MCPDEV_CA_FILE", &ca), ("MCPDEV_STATE_DIR", &own)],
    );
    each_from_its_source_address(&mut log, 4, "every device connects over wss in time").await;
    // From a source address too, a hub the sim cannot verify gets no hello: it says why and stops.
    let mut sim = spawn_mcpdev(&["sim", "--url", &hub.device_url, "--device-id", "02:00:00:00:52:00", "--source-addr", "127.0.0.2"], &[("MCPDEV_STATE_DIR", &own)]);
    let status = tokio::time::timeout(Duration::from_secs(30), sim.child.wait()).await.expect("sim stops on an unverified hub").unwrap();
    assert_eq!(status.code(), Some(3), "an unverified hub is exit 3");
}

/// Reads the hub's event log until `n` devices connected, and checks that each came from the
/// source address its id's turn gives (even last byte: 127.0.0.2, odd: 127.0.0.3).
async fn each_from_its_source_address(log: &mut tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>, n: usize, what: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let mut from = std::collections::BTreeMap::new();
    while from.len() < n {
        let line = tokio::time::timeout_at(deadline, log.next_line()).await.unwrap_or_else(|_| panic!("{what}")).unwrap().expect("the hub runs");
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
