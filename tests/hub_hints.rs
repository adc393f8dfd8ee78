//! What the hub and the CLI tell a person: where each device connects from (`devices`, human and
//! `--json`), how to hand an approved device its token (true for any device and any port), and a
//! start-up banner that suggests only commands that work on this hub.

mod common;

use std::process::Stdio;

use common::fake_device::{FakeDevice, tool};
use common::mqtt::MqttDevice;
use common::{HubProcess, mcpdev};
use tokio::io::{AsyncBufReadExt, BufReader};

#[tokio::test]
async fn devices_shows_where_each_device_connects_from() {
    let hub = HubProcess::start(&["--mqtt", "embedded", "--mqtt-listen", "127.0.0.1:0"], &[]).await;
    let ws = FakeDevice::connect(&hub.device_url, "02:00:00:00:0c:01", vec![tool("t")]).await;
    let local = ws.ws.get_ref();
    let tokio_tungstenite::MaybeTlsStream::Plain(tcp) = local else { panic!("plain TCP") };
    let ws_addr = tcp.local_addr().unwrap().to_string();
    let mut mq = MqttDevice::connect(hub.info["mqtt"].as_str().unwrap(), "02:00:00:00:0c:02").await;
    mq.hello().await;
    mq.onboard(vec![tool("m")]).await;
    for d in ["02:00:00:00:0c:01", "02:00:00:00:0c:02"] {
        assert_eq!(mcpdev(&hub, &["tools", "list", "-d", d, "--wait", "20s"]).await.code, 0);
    }
    let json = mcpdev(&hub, &["devices", "--json"]).await.json();
    let address = |id: &str| json.as_array().unwrap().iter().find(|d| d["device_id"] == id).unwrap_or_else(|| panic!("{id}: {json}"))["address"].clone();
    assert_eq!(address("02:00:00:00:0c:01"), ws_addr.as_str(), "the WebSocket device's own address and port: {json}");
    let mqtt = address("02:00:00:00:0c:02");
    assert!(mqtt.as_str().is_some_and(|a| a.starts_with(hub.info["mqtt"].as_str().unwrap()) && a.contains("as ")), "the broker and the client id: {json}");
    let table = mcpdev(&hub, &["devices"]).await;
    assert_eq!(table.code, 0, "{table:?}");
    let row = table.stdout.lines().find(|l| l.contains("02:00:00:00:0c:01")).unwrap_or_else(|| panic!("{table:?}"));
    assert!(row.contains(&ws_addr), "the address column: {row}");
}

#[tokio::test]
async fn approve_names_this_hubs_own_device_url_and_any_device() {
    let hub = HubProcess::start_admitting(&[], &[]).await;
    let out = mcpdev(&hub, &["devices", "approve", "02:00:00:00:0c:03"]).await;
    assert_eq!(out.code, 0, "{out:?}");
    // The hub runs on an ephemeral port: the hint must name it, not 8000.
    let port = hub.device_url.rsplit(':').next().unwrap().split('/').next().unwrap();
    assert!(out.stderr.contains(&format!(":{port}/xiaozhi/v1/")), "the hub's own device port: {}", out.stderr);
    assert!(!out.stderr.contains(":8000/"), "no made-up port: {}", out.stderr);
    assert!(out.stderr.contains("Authorization: Bearer <token>"), "how any device sends it: {}", out.stderr);
    assert!(out.stderr.contains("mcpdev sim --device-id 02:00:00:00:0c:03"), "{}", out.stderr);
}

/// The banner `serve` prints on stderr (up to its last line).
async fn banner(extra: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcpdev"))
        .args(["serve", "--device-addr", "127.0.0.1:0", "--host-addr", "127.0.0.1:0", "--approve-all"])
        .args(extra)
        .env("MCPDEV_STATE_DIR", dir.path())
        .env("MCPDEV_RUNTIME_DIR", dir.path())
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut text = String::new();
    tokio::time::timeout(std::time::Duration::from_secs(30), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            text.push_str(&line);
            text.push('\n');
            if line.starts_with("Point a device at") {
                return;
            }
        }
    })
    .await
    .expect("the banner in time");
    text
}

#[tokio::test]
async fn the_banner_suggests_only_devices_this_hub_has() {
    let bare = banner(&[]).await;
    assert!(!bare.contains("02:00:00:00:00:01"), "no demo device, none suggested:\n{bare}");
    assert!(bare.contains("mcpdev devices --hub http://127.0.0.1:") && bare.contains("mcpdev tools list --wait"), "{bare}");
    let demo = banner(&["--demo", "1"]).await;
    assert!(demo.contains("--device 02:00:00:00:00:01"), "the demo device is there to try:\n{demo}");
}
