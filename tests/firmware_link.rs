//! The firmware's own connection code against the real hub. `firmware/hub-link` is what runs on
//! the chip; its `host_device` example runs that very code (`connect::attempt`) on the host over
//! std sockets, with firmware-like tools and the BOOT button on stdin. Here it:
//! - bootstraps from the hub's OTA endpoint onto MQTT through the embedded broker (as stock devices
//!   do), answers calls and sends a button notification;
//! - goes straight to Mosquitto with an `mqtt://` URL (Mosquitto does not subscribe clients the way
//!   EMQX's auto-subscribe does: the firmware's own SUBSCRIBE is what delivers its downlink), and
//!   comes back after a broker restart;
//! - bootstraps onto WebSocket when the hub runs no MQTT, with the token the OTA answer hands out;
//! - is refused by the embedded broker with a wrong token (and says to check it), and let in with
//!   the right one;
//! - on a hub in admission mode, does the activation dance: prints the code the OTA answer names,
//!   polls until `mcpdev devices approve CODE`, then connects with its own token;
//! - with a device key (as `mcpdev flash` provisions), is approved by its code, while a stranger with
//!   its MAC and its Client-Id but not its key gets no token that opens anything, before or after;
//! - with the CA of a real `serve --tls auto` (as `mcpdev flash` provisions it), onboards over
//!   `https://` OTA and `wss://`, and refuses another `serve --tls auto` hub (another CA, a
//!   certificate for the same names) before anything reaches it.

mod common;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::OnceLock;
use std::time::Duration;

use common::mqtt::Mosquitto;
use common::ota::{check_in_as, http};
use common::ws::device_upgrade;
use common::{HubProcess, mcpdev, spawn_mcpdev};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout};

const DEADLINE: Duration = Duration::from_secs(30);

/// Builds `host_device` once (in the firmware workspace, with its own toolchain file) and returns
/// the executable. The test profile, the one `cargo test` there uses: what CI's firmware test
/// step built is reused.
fn host_device_binary() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("firmware");
        let out = mcpdev::flash::build::cargo_in(&dir)
            .args(["build", "--profile", "test", "-p", "hub-link", "--example", "host_device", "--message-format=json-render-diagnostics"])
            .stderr(Stdio::inherit())
            .output()
            .expect("cargo runs");
        assert!(out.status.success(), "building the host_device example failed");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|line| mcpdev::flash::build::executable_from_message(line, "host_device"))
            .next_back()
            .expect("cargo names the example's executable")
    })
}

/// The firmware's connection code on the host: press the button with [`HostDevice::press`]; its
/// stdout says how each session ended.
struct HostDevice {
    child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
}

impl HostDevice {
    fn start(url: &str, token: &str, mac: &str) -> Self {
        Self::start_with(url, token, mac, &[])
    }

    /// [`HostDevice::start`] with extra environment (`MCPDEV_DEVICE_KEY`: secrets never in argv).
    fn start_with(url: &str, token: &str, mac: &str, env: &[(&str, &str)]) -> Self {
        let mut child = tokio::process::Command::new(host_device_binary())
            .args([url, token, mac])
            .env_remove("MCPDEV_DEVICE_KEY")
            .env_remove("MCPDEV_CLIENT_ID")
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("host_device starts");
        let stdin = child.stdin.take().unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        Self { child, stdin, lines }
    }

    async fn press(&mut self) {
        self.stdin.write_all(b"\n").await.unwrap();
        self.stdin.flush().await.unwrap();
    }

    /// The next stdout line that contains `text`.
    async fn line_with(&mut self, text: &str) -> String {
        let found = async {
            while let Some(line) = self.lines.next_line().await.unwrap() {
                if line.contains(text) {
                    return line;
                }
            }
            panic!("host_device exited before printing '{text}': {:?}", self.child.try_wait());
        };
        tokio::time::timeout(DEADLINE, found).await.unwrap_or_else(|_| panic!("host_device never printed '{text}'"))
    }
}

async fn hello(hub: &HubProcess, device: &str) -> Value {
    let out = mcpdev(hub, &["hello", "-d", device, "--wait", "20s", "--json"]).await;
    assert_eq!(out.code, 0, "{out:?}");
    out.json()
}

async fn set_volume_and_read_it_back(hub: &HubProcess, device: &str, volume: u8) {
    let call = mcpdev(hub, &["call", "self.audio_speaker.set_volume", &format!("volume={volume}"), "-d", device, "--json"]).await;
    assert_eq!(call.code, 0, "{call:?}");
    assert_eq!(call.json(), json!({"device_id": device, "content":[{"type":"text","text":"true"}],"isError":false}));
    let status = mcpdev(hub, &["call", "self.get_device_status", "-d", device, "--json"]).await;
    assert_eq!(status.code, 0, "{status:?}");
    let text = status.json()["content"][0]["text"].as_str().unwrap().to_string();
    let status: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(status["audio_speaker"]["volume"], volume, "{text}");
}

/// Follows `watch --json` for one device until an event satisfies `wanted`.
async fn watch_until(hub: &HubProcess, device: &str, wanted: impl Fn(&Value) -> bool, meanwhile: impl std::future::Future<Output = ()>) -> Value {
    let mut watch = spawn_mcpdev(&["watch", "--json", "-d", device], &[("MCPDEV_HUB", hub.host_url.as_str())]);
    let mut events = BufReader::new(watch.child.stdout.take().unwrap()).lines();
    let first: Value = serde_json::from_str(&events.next_line().await.unwrap().unwrap()).unwrap();
    assert_eq!(first["event"], "watching", "the subscription is live once its first line is out");
    meanwhile.await;
    let found = async {
        while let Some(line) = events.next_line().await.unwrap() {
            let ev: Value = serde_json::from_str(&line).unwrap();
            if wanted(&ev) {
                return ev;
            }
        }
        panic!("watch ended");
    };
    tokio::time::timeout(DEADLINE, found).await.expect("the awaited event never came")
}

#[tokio::test]
async fn the_firmware_bootstraps_from_ota_onto_mqtt_through_the_embedded_broker() {
    const DEV: &str = "02:00:00:fe:10:01";
    let hub = HubProcess::start(&["--mqtt", "embedded", "--mqtt-listen", "127.0.0.1:0"], &[]).await;
    let ota = hub.info["ota"].as_str().unwrap().to_string();
    let mut device = HostDevice::start(&ota, "", DEV);

    let h = hello(&hub, DEV).await;
    assert_eq!((h["transport"].as_str(), h["client_id"].as_str()), (Some("mqtt"), Some("GID_mcpdev@@@02_00_00_fe_10_01")));
    assert_eq!((h["hello"]["transport"].as_str(), h["hello"]["version"].as_u64()), (Some("udp"), Some(3)));
    assert_eq!(h["system_info"]["application"]["name"], "mcpdev-fw", "the OTA check-in's body is kept: {h}");
    assert_eq!(h["system_info"]["chip_model_name"], "host");

    set_volume_and_read_it_back(&hub, DEV, 33).await;

    // The BOOT button: a state_changed notification reaches the hub over MQTT.
    let pressed = watch_until(&hub, DEV, |ev| ev["event"] == "notification", device.press()).await;
    assert_eq!(pressed["method"], "notifications/state_changed", "{pressed}");
    assert_eq!(pressed["params"]["what"], "button.boot", "{pressed}");
    assert_eq!(pressed["params"]["presses"], 1, "{pressed}");

    // self.reboot: answered, then a goodbye and an MQTT DISCONNECT; the device checks in and
    // comes back (a board would reset; the host example reconnects).
    let back = watch_until(&hub, DEV, |ev| ev["event"] == "ready" || ev["event"] == "tools_changed", async {
        let reboot = mcpdev(&hub, &["call", "self.reboot", "-d", DEV, "--json"]).await;
        assert_eq!(reboot.code, 0, "{reboot:?}");
        assert!(device.line_with("session ended").await.contains("rebooting as asked"));
    })
    .await;
    assert_eq!(back["device_id"], DEV, "{back}");
    set_volume_and_read_it_back(&hub, DEV, 34).await;
}

#[tokio::test]
async fn the_firmware_goes_straight_to_mosquitto_and_comes_back_after_a_broker_restart() {
    const DEV: &str = "02:00:00:fe:10:02";
    let mut broker = Mosquitto::start().await;
    let hub = HubProcess::start(&["--mqtt", &broker.url()], &[]).await;
    let mut device = HostDevice::start(&broker.url(), "", DEV);

    let h = hello(&hub, DEV).await;
    assert_eq!(h["transport"], "mqtt", "{h}");
    set_volume_and_read_it_back(&hub, DEV, 12).await;

    broker.kill().await;
    let ended = device.line_with("session ended").await;
    assert!(ended.contains("closed the TCP connection") || ended.contains("TCP"), "{ended}");
    let back = watch_until(&hub, DEV, |ev| ev["event"] == "ready" || ev["event"] == "tools_changed", broker.run()).await;
    assert_eq!(back["device_id"], DEV, "{back}");
    set_volume_and_read_it_back(&hub, DEV, 64).await;
}

#[tokio::test]
async fn the_firmware_bootstraps_from_ota_onto_websocket_with_the_token_it_hands_out() {
    const DEV: &str = "02:00:00:fe:10:03";
    let hub = HubProcess::start(&[], &[("MCPDEV_DEVICE_TOKEN", "fw-secret")]).await;
    let ota = hub.info["ota"].as_str().unwrap().to_string();
    let _device = HostDevice::start(&ota, "", DEV);

    let h = hello(&hub, DEV).await;
    assert_eq!((h["transport"].as_str(), h["hello"]["transport"].as_str()), (Some("websocket"), Some("websocket")), "{h}");
    set_volume_and_read_it_back(&hub, DEV, 5).await;
}

#[tokio::test]
async fn the_broker_checks_the_firmware_token_and_the_firmware_says_what_to_fix() {
    const DEV: &str = "02:00:00:fe:10:04";
    let hub = HubProcess::start(&["--mqtt", "embedded", "--mqtt-listen", "127.0.0.1:0"], &[("MCPDEV_DEVICE_TOKEN", "fw-secret")]).await;
    let broker = hub.info["mqtt"].as_str().unwrap().to_string();

    let mut wrong = HostDevice::start(&broker, "not-the-token", DEV);
    let refused = wrong.line_with("session ended").await;
    assert!(refused.contains("refused the user name or password (4): check the device token"), "{refused}");
    drop(wrong);

    let _right = HostDevice::start(&broker, "fw-secret", DEV);
    assert_eq!(hello(&hub, DEV).await["transport"], "mqtt");
    set_volume_and_read_it_back(&hub, DEV, 21).await;
}

#[tokio::test]
async fn the_firmware_activates_with_its_code_and_comes_up_once_approved() {
    const DEV: &str = "02:00:00:fe:10:05";
    let hub = HubProcess::start_admitting(&[], &[]).await;
    let ota = hub.info["ota"].as_str().unwrap().to_string();
    let mut device = HostDevice::start(&ota, "", DEV);

    let line = device.line_with("activation code").await;
    let code: String = line.split("activation code ").nth(1).unwrap_or_default().chars().take_while(char::is_ascii_digit).collect();
    assert_eq!(code.len(), 6, "{line}");
    let approved = mcpdev(&hub, &["devices", "approve", &code]).await;
    assert_eq!(approved.code, 0, "{approved:?}");
    assert!(device.line_with("activated").await.contains("checking in again"));

    let h = hello(&hub, DEV).await;
    assert_eq!(h["transport"], "websocket", "{h}");
    set_volume_and_read_it_back(&hub, DEV, 9).await;
}

/// Issue 22 ("bind to a per-request secret"): the firmware sends its provisioned device key with
/// the check-in and the `/activate` polls. The stranger knows the MAC and the Client-Id (here the
/// MAC-derived one, which anyone can compute; a flashed board's is random but travels in clear
/// text) and checks in over raw HTTP with no key: its request is its own, its polls never see the
/// device's approval, and no token it is handed opens the device's WebSocket.
#[tokio::test]
async fn a_keyed_firmware_is_approved_by_its_code_and_a_stranger_without_the_key_gets_nothing() {
    const DEV: &str = "02:00:00:fe:10:06";
    const KEY: &str = "fw-key-0123456789abcdef0123456789";
    let hub = HubProcess::start_admitting(&[], &[]).await;
    let ota = hub.info["ota"].as_str().unwrap().to_string();
    let mut device = HostDevice::start_with(&ota, "", DEV, &[("MCPDEV_DEVICE_KEY", KEY)]);
    let intro = device.line_with("Client-Id").await;
    assert!(intro.contains("with a device key") && !intro.contains(KEY), "{intro}");
    let client_id: String = intro.split("Client-Id ").nth(1).unwrap_or_default().chars().take_while(|c| *c != ',').collect();
    assert_eq!(client_id.len(), 36, "{intro}");

    let line = device.line_with("activation code").await;
    let code: String = line.split("activation code ").nth(1).unwrap_or_default().chars().take_while(char::is_ascii_digit).collect();
    assert_eq!(code.len(), 6, "{line}");

    // Before the approval: the stranger's check-in is another request, with another code.
    let early = check_in_as(&hub, "hub.lan:8000", DEV, &client_id).await;
    let early_code = early["activation"]["code"].as_str().unwrap_or_else(|| panic!("the stranger is not admitted: {early}"));
    assert_ne!(early_code, code, "the keyless check-in did not refresh the keyed request: {early}");
    assert!(early["websocket"]["token"].is_string(), "a first answer carries settings (py-xiaozhi style): {early}");
    let pending = mcpdev(&hub, &["devices", "pending", "--json"]).await.json();
    let keyed = pending.as_array().unwrap().iter().find(|p| p["code"] == code.as_str()).unwrap_or_else(|| panic!("{pending}"));
    assert_eq!(keyed["device_key"], true, "the firmware's request is bound to its key: {keyed}");

    let approved = mcpdev(&hub, &["devices", "approve", &code]).await;
    assert_eq!(approved.code, 0, "{approved:?}");
    assert!(device.line_with("activated").await.contains("checking in again"));
    let h = hello(&hub, DEV).await;
    assert_eq!(h["transport"], "websocket", "{h}");

    // After it: the stranger's poll is not answered 200, its new check-in is still not admitted,
    // and neither token it was handed opens the device's WebSocket.
    let poll = http(&hub, "POST", "/xiaozhi/ota/activate", &[("Device-Id", DEV), ("Client-Id", &client_id)], "{}").await.0;
    assert_ne!(poll, 200, "the stranger's poll saw the device's approval");
    let late = check_in_as(&hub, "hub.lan:8000", DEV, &client_id).await;
    assert!(late["activation"]["code"].is_string(), "a keyless check-in is not the admitted device: {late}");
    for answer in [&early, &late] {
        if let Some(token) = answer["websocket"]["token"].as_str() {
            let refused = device_upgrade(&hub, DEV, &client_id, Some(token)).await.err().map(|e| e.0);
            assert_eq!(refused, Some(401), "a token handed to the stranger opens the device's WebSocket: {answer}");
        }
    }
    let bare = device_upgrade(&hub, DEV, &client_id, None).await.err().map(|e| e.0);
    assert_eq!(bare, Some(401), "no token, no way in");
    // The device is not disturbed: still the same one, still answering.
    set_volume_and_read_it_back(&hub, DEV, 17).await;
}

/// A hub with `--tls auto` and its own state directory, and the CA file it made there (what
/// `mcpdev flash` writes into a board's provisioning record).
async fn tls_hub(state: &Path) -> (HubProcess, String) {
    let dir = state.to_string_lossy().into_owned();
    let hub = HubProcess::start(&["--tls", "auto"], &[("MCPDEV_STATE_DIR", &dir)]).await;
    let ca = state.join("tls/ca.pem");
    assert!(ca.exists(), "serve --tls auto keeps its CA in the state directory: {}", hub.info);
    (hub, ca.to_string_lossy().into_owned())
}

#[tokio::test]
async fn the_firmware_onboards_over_https_and_wss_with_the_ca_of_serve_tls_auto() {
    const DEV: &str = "02:00:00:fe:10:07";
    let state = tempfile::tempdir().unwrap();
    let (hub, ca) = tls_hub(state.path()).await;
    // The OTA URL the hub prints is https://, and its device listener serves nothing in plain text:
    // a device that gets online there got online over TLS, verified against the hub's CA.
    let ota = hub.info["ota"].as_str().unwrap().to_string();
    assert!(ota.starts_with("https://"), "{}", hub.info);
    let _device = HostDevice::start_with(&ota, "", DEV, &[("MCPDEV_CA_FILE", &ca)]);
    let h = hello(&hub, DEV).await;
    assert_eq!(h["transport"].as_str(), Some("websocket"), "{h}");
    set_volume_and_read_it_back(&hub, DEV, 6).await;
}

#[tokio::test]
async fn the_firmware_refuses_a_hub_with_another_certificate() {
    const DEV: &str = "02:00:00:fe:10:08";
    // The board was provisioned with hub A's CA; hub B (another `serve --tls auto`, its own CA,
    // a certificate for the same names) answers at the URL it dials.
    let (state_a, state_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (_hub_a, ca_a) = tls_hub(state_a.path()).await;
    let (hub_b, _) = tls_hub(state_b.path()).await;
    for url in [hub_b.info["ota"].as_str().unwrap().to_string(), hub_b.device_url.clone()] {
        let mut device = HostDevice::start_with(&url, "", DEV, &[("MCPDEV_CA_FILE", &ca_a)]);
        let line = device.line_with("not issued by the provisioned hub CA").await;
        assert!(line.contains("127.0.0.1"), "the log names the host: {line}");
        let _ = device.child.kill().await;
    }
    let listed = mcpdev(&hub_b, &["devices", "--json"]).await;
    assert_eq!(listed.json(), json!([]), "nothing reached hub B, which admits every device: {listed:?}");
}

#[tokio::test]
async fn the_firmware_reaches_the_embedded_brokers_mqtts_with_the_hubs_ca() {
    const DEV: &str = "02:00:00:fe:10:09";
    // Tests listen on ephemeral ports, never on 8883, the only port on which devices read an OTA
    // mqtt endpoint as TLS: the hub says so at start, and the board is given the mqtts URL itself
    // (as `mcpdev flash --hub mqtts://…` provisions it).
    let mqtt = ["--tls", "auto", "--mqtt", "embedded", "--mqtt-listen", "127.0.0.1:0", "--mqtts-listen", "127.0.0.1:0"];
    let state = tempfile::tempdir().unwrap();
    let dir = state.path().to_string_lossy().into_owned();
    let hub = HubProcess::start_capturing(&mqtt, &[("MCPDEV_STATE_DIR", &dir)]).await;
    let ca = state.path().join("tls/ca.pem").to_string_lossy().into_owned();
    let broker = hub.info["mqtt"].as_str().unwrap().to_string();
    assert!(broker.starts_with("mqtts://"), "{}", hub.info);
    // The hub says devices would read its OTA mqtt endpoint as plain (its stderr is read as it comes).
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while !hub.stderr.as_ref().unwrap().lock().unwrap().contains("TLS only on port 8883") {
        assert!(tokio::time::Instant::now() < deadline, "no word of the mqtts port: {}", hub.stderr.as_ref().unwrap().lock().unwrap());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _device = HostDevice::start_with(&broker, "", DEV, &[("MCPDEV_CA_FILE", &ca)]);
    let h = hello(&hub, DEV).await;
    assert_eq!(h["transport"].as_str(), Some("mqtt"), "{h}");
    set_volume_and_read_it_back(&hub, DEV, 7).await;

    // A board provisioned with another hub's CA, at this broker's mqtts port: refused, never in.
    let other = tempfile::tempdir().unwrap();
    let (_other_hub, other_ca) = tls_hub(other.path()).await;
    let mut stranger = HostDevice::start_with(&broker, "", "02:00:00:fe:10:0a", &[("MCPDEV_CA_FILE", &other_ca)]);
    stranger.line_with("not issued by the provisioned hub CA").await;
    let listed = mcpdev(&hub, &["devices", "--json"]).await.json();
    assert!(listed.as_array().is_some_and(|a| a.iter().all(|d| d["device_id"] != "02:00:00:fe:10:0a")), "{listed}");
}
