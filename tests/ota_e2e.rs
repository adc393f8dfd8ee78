//! Device bootstrap through the OTA endpoint (reference §0, §3), with the built binary: the
//! answer's shape as stock firmware reads it, and virtual devices that check in and then
//! connect over what they were told — WebSocket from a hub without MQTT, MQTT from one with it.

mod common;

use common::ota::check_in;
use common::{HubProcess, http, mcpdev, spawn_mcpdev};
use serde_json::json;


/// `device_id`'s own token from the hub secret in `state` (the hub's MCPDEV_STATE_DIR).
fn device_token(state: &tempfile::TempDir, device_id: &str) -> String {
    let secret = mcpdev::hub::secret::HubSecret::load_or_create(&state.path().join("hub-secret")).unwrap();
    secret.token(mcpdev::hub::secret::Purpose::Device, device_id)
}

fn port_of(url: &str) -> u16 {
    url.rsplit(':').next().unwrap().split('/').next().unwrap().parse().unwrap()
}

#[tokio::test]
async fn ota_answers_have_the_shapes_stock_firmware_reads() {
    let dir = tempfile::tempdir().unwrap();
    let image = dir.path().join("xiaozhi.bin");
    std::fs::write(&image, b"\xe9firmware image").unwrap();
    let image_arg = image.to_str().unwrap();
    let state = tempfile::tempdir().unwrap();
    let hub = HubProcess::start(
        &[
            "--mqtt", "embedded", "--mqtt-listen", "127.0.0.1:0", "--firmware", image_arg, "--firmware-version", "2.4.3", "--timezone-offset", "480",
            "--public-host", "hub.example",
        ],
        &[("MCPDEV_DEVICE_TOKEN", "tok-1"), ("MCPDEV_STATE_DIR", state.path().to_str().unwrap())],
    )
    .await;
    let own = device_token(&state, "aa:bb:cc:dd:ee:01");
    let device_port = port_of(&hub.device_url);
    let broker_port = port_of(hub.info["mqtt"].as_str().unwrap());
    let before = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64;
    let r = check_in(&hub, "other.example:9999", "AA:BB:CC:DD:EE:01").await;

    // server_time: milliseconds, and the offset in minutes.
    let ts = r["server_time"]["timestamp"].as_u64().unwrap();
    assert!(ts >= before && ts < before + 60_000, "timestamp {ts} is in ms");
    assert_eq!(r["server_time"]["timezone_offset"], 480);
    // websocket: the public name (not the Host the device sent), the device listener's real port,
    // the device's own token (never the configured shared one).
    assert_eq!(r["websocket"], json!({"url": format!("ws://hub.example:{device_port}/xiaozhi/v1/"), "token": own, "version": 1}));
    // mqtt (the device prefers it when present): every key the firmware copies into NVS.
    let m = &r["mqtt"];
    let key = "GID_mcpdev@@@aa_bb_cc_dd_ee_01";
    assert_eq!(m["endpoint"], format!("hub.example:{broker_port}"));
    assert_eq!(m["client_id"], key);
    assert_eq!((m["username"].as_str(), m["password"].as_str()), (Some(key), Some(own.as_str())), "the client id and the device's own token");
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

    // A hub without MQTT, without token or firmware: websocket only, at the address the request
    // came in on (not the Host it named), and the device's own token.
    let plain = HubProcess::start(&[], &[("MCPDEV_STATE_DIR", state.path().to_str().unwrap())]).await;
    let r = check_in(&plain, "10.1.2.3", "aa:bb:cc:dd:ee:02").await;
    assert!(r.get("mqtt").is_none() && r.get("firmware").is_none());
    assert_eq!(r["websocket"]["url"], format!("ws://127.0.0.1:{}/xiaozhi/v1/", port_of(&plain.device_url)));
    assert_eq!(r["websocket"]["token"], device_token(&state, "aa:bb:cc:dd:ee:02"));
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

/// Issue 10 item 4: a check-in with a victim's Device-Id and a forged `Host` changes nothing the
/// hub hands the victim; no answer carries the configured shared token; the body is capped.
#[tokio::test]
async fn a_check_in_cannot_redirect_another_device_or_get_the_shared_token() {
    let state = tempfile::tempdir().unwrap();
    let hub = HubProcess::start(
        &["--mqtt", "embedded", "--mqtt-listen", "127.0.0.1:0"],
        &[("MCPDEV_DEVICE_TOKEN", "shared-tok"), ("MCPDEV_STATE_DIR", state.path().to_str().unwrap())],
    )
    .await;
    const VICTIM: &str = "aa:bb:cc:dd:ee:10";
    // The attacker checks in as the victim, naming its own host.
    let r = check_in(&hub, "evil.example:9999", VICTIM).await;
    let text = r.to_string();
    assert!(!text.contains("evil.example"), "the answer follows the forged Host: {text}");
    assert!(!text.contains("shared-tok"), "the configured shared token was handed out: {text}");
    assert_eq!(r["mqtt"]["password"], device_token(&state, VICTIM));

    // The victim then comes over MQTT: its server hello (udp.server) and its initialize (vision
    // URL) name the hub, not the attacker.
    let broker = hub.info["mqtt"].as_str().unwrap();
    let url = mcpdev::mqtt::conn::BrokerUrl::parse(&format!("mqtt://x:{}@{}", device_token(&state, VICTIM), broker.trim_start_matches("mqtt://"))).unwrap();
    let mut victim = common::mqtt::MqttDevice::connect_to(&url, &mcpdev::mqtt::topics::key_for(VICTIM).unwrap()).await;
    // (No --public-host: the hub's own address on its default route, or loopback.)
    let hello = victim.hello().await;
    let server = hello["udp"]["server"].as_str().unwrap();
    assert!(server.parse::<std::net::IpAddr>().is_ok(), "udp.server is not the hub's address: {hello}");
    let init = victim.recv_request("initialize").await;
    let vision = &init["params"]["capabilities"]["vision"];
    assert!(vision["url"].as_str().unwrap().starts_with(&format!("http://{server}:")), "{vision}");
    assert!(!init.to_string().contains("evil.example"), "{init}");

    // A check-in larger than the cap is refused before it is read or kept (413).
    let big = format!("{{\"pad\":\"{}\"}}", "x".repeat(100_000));
    let (status, _) = post_oversize(&hub, VICTIM, &big).await;
    assert_eq!(status, 413);
    // Just under the cap is fine.
    let ok = json!({"mac_address": VICTIM, "pad": "x".repeat(60_000)}).to_string();
    assert_eq!(http(&hub, "POST", "/xiaozhi/ota/", &[("Device-Id", VICTIM), ("Content-Type", "application/json")], &ok).await.0, 200);
}

/// POSTs `body` to the OTA endpoint; the status. The hub may answer and close before it has read
/// it all, so a failed write is not an error here.
async fn post_oversize(hub: &HubProcess, device: &str, body: &str) -> (u16, Vec<u8>) {
    let len = body.len();
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = hub.device_url.trim_start_matches("ws://").split('/').next().unwrap().to_string();
    let mut s = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let head = format!("POST /xiaozhi/ota/ HTTP/1.1\r\nHost: {addr}\r\nDevice-Id: {device}\r\nContent-Type: application/json\r\nContent-Length: {len}\r\n\r\n");
    s.write_all(head.as_bytes()).await.unwrap();
    let _ = s.write_all(body.as_bytes()).await;
    let mut out = vec![0u8; 4096];
    let n = tokio::time::timeout(common::ws::DEADLINE, s.read(&mut out)).await.expect("no answer in time").unwrap();
    let text = String::from_utf8_lossy(&out[..n]).to_string();
    (text.split_whitespace().nth(1).unwrap_or("0").parse().unwrap(), out[..n].to_vec())
}
