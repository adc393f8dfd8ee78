//! Clients that end leave nothing behind on the hub (issue 36): a one-shot MCP client closes its
//! session (`DELETE`), so a loop of `call --url` never meets the per-peer session cap; an MQTT
//! `sim` stopped with SIGTERM says goodbye and disconnects, so the hub drops it at once instead of
//! after three silent keepalive periods (180 s).

mod common;

use std::time::{Duration, Instant};

use common::mqtt::Mosquitto;
use common::{HubProcess, mcpdev, spawn_mcpdev};

#[tokio::test]
async fn one_shot_mcp_clients_close_their_sessions() {
    let hub = HubProcess::start(&["--demo", "1", "--mcp-max-sessions-per-peer", "2"], &[]).await;
    let url = format!("{}/mcp", hub.host_url);
    let listed = mcpdev(&hub, &["tools", "list", "--url", &url, "--json"]).await;
    assert_eq!(listed.code, 0, "{listed:?}");
    let name = listed.json()["tools"].as_array().unwrap().iter().filter_map(|t| t["name"].as_str()).find(|n| n.ends_with("get_device_status")).unwrap().to_string();
    // Five one-shot clients with room for two sessions: each gave its session back.
    for i in 0..5 {
        let out = mcpdev(&hub, &["call", &name, "--url", &url, "--json"]).await;
        assert_eq!(out.code, 0, "call --url number {} was refused: {out:?}", i + 1);
    }
}

#[tokio::test]
async fn an_mqtt_sim_stopped_with_sigterm_leaves_the_hub_at_once() {
    const ID: &str = "0d:00:00:00:00:01";
    let broker = Mosquitto::start().await;
    let hub = HubProcess::start(&["--mqtt", &broker.url()], &[]).await;
    let mut sim = spawn_mcpdev(&["sim", "--mqtt", &broker.url(), "--device-id", ID], &[]);
    let listed = mcpdev(&hub, &["hello", "-d", ID, "--wait", "20s", "--json"]).await;
    assert_eq!(listed.code, 0, "{listed:?}");
    let pid = sim.child.id().unwrap().to_string();
    assert!(std::process::Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let stopped = Instant::now();
    let status = tokio::time::timeout(Duration::from_secs(10), sim.child.wait()).await.expect("sim ends on SIGTERM").unwrap();
    assert!(!status.success(), "stopped on request: {status:?}");
    // Gone from the hub within seconds, not after 180 s of silence.
    loop {
        let out = mcpdev(&hub, &["devices", "--json"]).await;
        if !out.stdout.contains(ID) {
            break;
        }
        assert!(stopped.elapsed() < Duration::from_secs(15), "the hub still lists the stopped device: {out:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // And the reason says so.
    let again = mcpdev(&hub, &["call", "self.get_device_status", "-d", ID, "--wait", "0s"]).await;
    assert_eq!(again.code, 4, "{again:?}");
}
