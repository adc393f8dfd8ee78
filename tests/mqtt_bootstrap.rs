//! Issue 12 item 2: an MQTT device bootstraps from the hub's default OTA answer. The device here
//! does what py-xiaozhi's OTA client and the stock firmware do: it refuses an `mqtt` block with
//! any of endpoint, client_id, username, password, publish_topic, subscribe_topic empty
//! ("MQTT配置不完整"), then logs in to the broker the block names with exactly that login and
//! those topics. Against the embedded broker (open, and with a device token required) and
//! against Mosquitto; each time a call through the hub reaches the device.
//! (xiaozhi-sdk 0.5.1, the Python device library in CI, speaks only WebSocket.)

mod common;

use common::fake_device::tool;
use common::mqtt::{MqttDevice, Mosquitto};
use common::{HubProcess, http, mcpdev};
use mcpdev::mqtt::conn::BrokerUrl;
use mcpdev::mqtt::topics;
use serde_json::{Value, json};

const FIELDS: [&str; 6] = ["endpoint", "client_id", "username", "password", "publish_topic", "subscribe_topic"];

/// Checks in like py-xiaozhi (Device-Id, Client-Id, its system info) and returns the `mqtt` block,
/// refusing it as py-xiaozhi does when a field is missing or empty.
async fn complete_mqtt_block(hub: &HubProcess, device: &str) -> Value {
    let body = json!({"mac_address": device, "uuid": "5f0c2a8e-2222-4222-8333-944455556666", "application": {"name": "py-xiaozhi", "version": "1.0"},
        "board": {"type": "py-xiaozhi", "name": "py-xiaozhi"}});
    let headers = [("Device-Id", device), ("Client-Id", "5f0c2a8e-2222-4222-8333-944455556666"), ("Content-Type", "application/json")];
    let (status, answer) = http(hub, "POST", "/xiaozhi/ota/", &headers, &body.to_string()).await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&answer));
    let answer: Value = serde_json::from_slice(&answer).unwrap();
    let m = answer["mqtt"].clone();
    for k in FIELDS {
        assert!(m[k].as_str().is_some_and(|v| !v.is_empty()), "MQTT配置不完整: `{k}` is missing or empty in {m}");
    }
    m
}

/// Logs in with the block's endpoint, client id, username and password, says hello on its
/// publish topic, and answers MCP on its subscribe topic; then `mcpdev call` reaches it.
async fn connects_with_the_block_and_is_called(hub: &HubProcess, device: &str, m: &Value) {
    let (host, port) = m["endpoint"].as_str().unwrap().rsplit_once(':').unwrap();
    let login = BrokerUrl {
        host: host.to_string(),
        port: port.parse().unwrap(),
        tls: false,
        username: m["username"].as_str().map(str::to_string),
        password: m["password"].as_str().map(str::to_string),
    };
    let key = m["client_id"].as_str().unwrap();
    // The helper publishes to uplink(key) and subscribes to downlink(key): the block's topics.
    assert_eq!((m["publish_topic"].as_str(), m["subscribe_topic"].as_str()), (Some(topics::uplink(key).as_str()), Some(topics::downlink(key).as_str())));
    let mut dev = MqttDevice::connect_to(&login, key).await;
    dev.hello().await;
    let counts = dev.respond_forever(vec![tool("self.lamp.turn_on")]);
    let hello = mcpdev(hub, &["hello", "-d", device, "--wait", "15s", "--json"]).await;
    assert_eq!((hello.code, hello.json()["transport"].as_str()), (0, Some("mqtt")), "{hello:?}");
    let call = mcpdev(hub, &["call", "self.lamp.turn_on", "n=1", "-d", device]).await;
    assert_eq!((call.code, call.stdout.trim()), (0, "ok"), "{call:?}");
    assert_eq!(counts.get("tools/call"), 1);
}

#[tokio::test]
async fn a_device_that_insists_on_a_complete_mqtt_block_connects_to_the_embedded_broker() {
    // Open hub: the embedded broker takes any login, and the block is complete anyway.
    let open = HubProcess::start(&["--mqtt", "embedded", "--mqtt-listen", "127.0.0.1:0"], &[]).await;
    let m = complete_mqtt_block(&open, "02:00:00:00:0b:01").await;
    assert_eq!(m["username"], m["client_id"], "the username is the client id");
    connects_with_the_block_and_is_called(&open, "02:00:00:00:0b:01", &m).await;

    // A hub that requires device tokens: the block carries the device's own token, which the
    // embedded broker accepts for that client id and no other.
    let state = tempfile::tempdir().unwrap();
    let locked = HubProcess::start(
        &["--mqtt", "embedded", "--mqtt-listen", "127.0.0.1:0"],
        &[("MCPDEV_DEVICE_TOKEN", "shared-secret"), ("MCPDEV_STATE_DIR", state.path().to_str().unwrap())],
    )
    .await;
    let m = complete_mqtt_block(&locked, "02:00:00:00:0b:02").await;
    assert_ne!(m["password"], "shared-secret", "the shared token is never handed out");
    connects_with_the_block_and_is_called(&locked, "02:00:00:00:0b:02", &m).await;

    // The same password under another device's client id is refused by the broker.
    let other = topics::key_for("02:00:00:00:0b:03").unwrap();
    let (host, port) = m["endpoint"].as_str().unwrap().rsplit_once(':').unwrap();
    let mut opts = rumqttc::MqttOptions::new(other, host, port.parse().unwrap());
    opts.set_credentials(m["username"].as_str().unwrap(), m["password"].as_str().unwrap());
    let (_client, mut events) = rumqttc::AsyncClient::new(opts, 4);
    let refused = tokio::time::timeout(common::ws::DEADLINE, events.poll()).await.expect("no CONNACK in time");
    assert!(
        matches!(refused, Err(rumqttc::ConnectionError::ConnectionRefused(rumqttc::ConnectReturnCode::BadUserNamePassword))),
        "another device's token was accepted: {refused:?}"
    );
}

#[tokio::test]
async fn a_device_that_insists_on_a_complete_mqtt_block_connects_to_mosquitto() {
    let broker = Mosquitto::start().await;
    let hub = HubProcess::start(
        &["--mqtt", &broker.url(), "--mqtt-shared-device-login"],
        &[("MCPDEV_MQTT_DEVICE_USERNAME", "devices"), ("MCPDEV_MQTT_DEVICE_PASSWORD", "devices-pass")],
    )
    .await;
    let m = complete_mqtt_block(&hub, "02:00:00:00:0b:04").await;
    assert_eq!((m["username"].as_str(), m["password"].as_str()), (Some("devices"), Some("devices-pass")), "a real broker with the shared login opted in: that login, for an admitted device");
    assert_eq!(m["endpoint"], format!("127.0.0.1:{}", broker.port));
    connects_with_the_block_and_is_called(&hub, "02:00:00:00:0b:04", &m).await;
}

/// After an OTA check-in the hub probes an MQTT device with `initialize` until it is heard from.
/// A device that checks in over and over (a boot loop, a flood) is probed once per schedule, not
/// once per check-in: ten check-ins within a second bring one first probe, not ten.
#[tokio::test]
async fn a_device_checking_in_again_and_again_is_probed_once() {
    let hub = HubProcess::start(&["--mqtt", "embedded", "--mqtt-listen", "127.0.0.1:0"], &[]).await;
    let device = "02:00:00:00:0b:11";
    let m = complete_mqtt_block(&hub, device).await;
    let (host, port) = m["endpoint"].as_str().unwrap().rsplit_once(':').unwrap();
    let login = BrokerUrl { host: host.to_string(), port: port.parse().unwrap(), tls: false, username: m["username"].as_str().map(str::to_string), password: m["password"].as_str().map(str::to_string) };
    // Listening on its topic, never saying hello: the hub's probe is all it hears.
    let mut dev = MqttDevice::connect_to(&login, m["client_id"].as_str().unwrap()).await;
    for _ in 0..9 {
        complete_mqtt_block(&hub, device).await;
    }
    // The schedule's first probe (id 2000000000, 2 s after the check-in), then its second (5 s).
    let mut first = 0;
    loop {
        let got = dev.recv().await;
        match got["payload"]["id"].as_i64() {
            Some(2_000_000_000) => first += 1,
            Some(2_000_000_001) => break,
            _ => {}
        }
    }
    assert_eq!(first, 1, "ten check-ins, one probe schedule");
}
