//! Device bootstrap through the OTA endpoint (reference §0, §3), with the built binary: the
//! answer's shape as stock firmware reads it, and virtual devices that check in and then
//! connect over what they were told — WebSocket from a hub without MQTT, MQTT from one with it.

mod common;

use common::ota::{check_in, http};
use common::{HubProcess, mcpdev, spawn_mcpdev};
use serde_json::json;

fn port_of(url: &str) -> u16 {
    url.rsplit(':').next().unwrap().split('/').next().unwrap().parse().unwrap()
}

#[tokio::test]
async fn ota_answers_have_the_shapes_stock_firmware_reads() {
    let dir = tempfile::tempdir().unwrap();
    let image = dir.path().join("xiaozhi.bin");
    std::fs::write(&image, b"\xe9firmware image").unwrap();
    let image_arg = image.to_str().unwrap();
    let hub = HubProcess::start(
        &["--mqtt", "embedded", "--mqtt-listen", "127.0.0.1:0", "--firmware", image_arg, "--firmware-version", "2.4.3", "--timezone-offset", "480"],
        &[("MCPDEV_DEVICE_TOKEN", "tok-1")],
    )
    .await;
    let device_port = port_of(&hub.device_url);
    let broker_port = port_of(hub.info["mqtt"].as_str().unwrap());
    let before = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64;
    let r = check_in(&hub, "hub.example:9999", "AA:BB:CC:DD:EE:01").await;

    // server_time: milliseconds, and the offset in minutes.
    let ts = r["server_time"]["timestamp"].as_u64().unwrap();
    assert!(ts >= before && ts < before + 60_000, "timestamp {ts} is in ms");
    assert_eq!(r["server_time"]["timezone_offset"], 480);
    // websocket: the name the device used, the device listener's real port, the device's own token
    // (this hub admits every device: --approve-all), never the shared one.
    assert_eq!(r["websocket"]["url"], format!("ws://hub.example:{device_port}/xiaozhi/v1/"));
    assert_eq!(r["websocket"]["version"], 1);
    let own = r["websocket"]["token"].as_str().unwrap();
    assert!(own.len() == 32 && own != "tok-1", "{own}");
    // mqtt (the device prefers it when present): every key the firmware copies into NVS.
    let m = &r["mqtt"];
    let key = "GID_mcpdev@@@aa_bb_cc_dd_ee_01";
    assert_eq!(m["endpoint"], format!("hub.example:{broker_port}"));
    assert_eq!(m["client_id"], key);
    assert_eq!((m["username"].as_str(), m["password"].as_str()), (Some(""), Some("tok-1")), "the embedded broker takes a device token as password");
    assert_eq!(m["publish_topic"], format!("mcpdev/up/{key}"));
    assert_eq!(m["subscribe_topic"], format!("mcpdev/down/{key}"));
    assert_eq!(m["keepalive"], 240);
    let strings = ["endpoint", "client_id", "username", "password", "publish_topic", "subscribe_topic"];
    assert!(strings.iter().all(|k| m[k].is_string()) && m["keepalive"].is_u64(), "{m}");
    // firmware: offered, and the hub serves the binary at that URL.
    assert_eq!(r["firmware"], json!({"version": "2.4.3", "url": format!("http://hub.example:{device_port}/xiaozhi/ota/firmware.bin"), "force": 0}));
    let (status, bytes) = http(&hub, "GET", "/xiaozhi/ota/firmware.bin", &[], "").await;
    assert_eq!((status, bytes.as_slice()), (200, &b"\xe9firmware image"[..]));
    // No activation is asked for; /activate says done.
    assert!(r.get("activation").is_none());
    assert_eq!(http(&hub, "POST", "/xiaozhi/ota/activate", &[("Device-Id", "aa:bb:cc:dd:ee:01")], "{}").await.0, 200);
    // A request the firmware would never send is refused with a reason.
    let (status, why) = http(&hub, "POST", "/xiaozhi/ota/", &[], "{}").await;
    assert_eq!(status, 400);
    assert!(String::from_utf8_lossy(&why).contains("Device-Id"));

    // A hub without MQTT, without token or firmware: websocket only, with the device's own token.
    let plain = HubProcess::start(&[], &[]).await;
    let r = check_in(&plain, "10.1.2.3", "aa:bb:cc:dd:ee:02").await;
    assert!(r.get("mqtt").is_none() && r.get("firmware").is_none());
    assert_eq!(r["websocket"]["url"], format!("ws://10.1.2.3:{}/xiaozhi/v1/", port_of(&plain.device_url)));
    assert_eq!(r["websocket"]["token"].as_str().map(str::len), Some(32));
    assert_eq!(r["server_time"]["timezone_offset"], 0);
}

/// Checks in, connects over what the answer said, and `hello` shows the posted system info.
async fn bootstraps_over(hub: &HubProcess, device: &str, transport: &str) {
    let ota = hub.info["ota"].as_str().unwrap().to_string();
    let _sim = spawn_mcpdev(&["sim", "--ota", &ota, "--device-id", device], &[]);
    let hello = mcpdev(hub, &["hello", "-d", device, "--wait", "15s", "--json"]).await;
    assert_eq!(hello.code, 0, "{hello:?}");
    let h = hello.json();
    assert_eq!(h["transport"], transport);
    assert_eq!(h["system_info"]["mac_address"], device);
    assert_eq!(h["system_info"]["board"]["name"], "mcpdev-sim");
    let table = mcpdev(hub, &["hello", "-d", device]).await;
    assert!(table.stdout.contains("board (OTA)") && table.stdout.contains("mcpdev-sim"), "{}", table.stdout);
    let call = mcpdev(hub, &["call", "self.audio_speaker.set_volume", "volume=5", "-d", device]).await;
    assert_eq!((call.code, call.stdout.trim()), (0, "true"), "{call:?}");
}

#[tokio::test]
async fn a_virtual_device_bootstraps_from_ota_over_websocket_then_over_mqtt() {
    let ws_hub = HubProcess::start(&[], &[]).await;
    bootstraps_over(&ws_hub, "02:00:00:00:0a:01", "websocket").await;
    let mqtt_hub = HubProcess::start(&["--mqtt", "embedded", "--mqtt-listen", "127.0.0.1:0"], &[]).await;
    bootstraps_over(&mqtt_hub, "02:00:00:00:0a:02", "mqtt").await;
}
