//! How the hub ends a device's link, and says why.
//!
//! `mcpdev serve` stopped by a signal: SIGTERM (`kill`, systemd, docker) and SIGINT (Ctrl-C) run
//! the same shutdown. A WebSocket device gets a close frame (1001, going away), an MQTT device on
//! the embedded broker a `goodbye` with its session id, and the ready file and the control token
//! are gone when the hub has exited, with 130 either way.
//!
//! The adversary: a device that never reads nor answers the close. It must not hold the
//! shutdown up.
//!
//! A revocation and a replacement are each said as what they are, in the `disconnected` event
//! and the log (not "replaced or shut down by the hub" for all three).

mod common;

use std::time::Duration;

use common::fake_device::{FakeDevice, tool};
use common::mqtt::MqttDevice;
use common::{HubProcess, mcpdev};
use futures_util::StreamExt;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

const DEADLINE: Duration = Duration::from_secs(30);

struct Stopped {
    code: Option<i32>,
    ws_close: Option<CloseCode>,
    mqtt_goodbye: serde_json::Value,
    mqtt_session: String,
    ready_file_left: bool,
    token_left: bool,
    took: Duration,
}

/// A hub with a WebSocket device, an MQTT device (embedded broker) and, with `stuck`, a device
/// that has stopped reading; stopped by `signal`.
async fn stop_with(signal: i32, stuck: bool) -> Stopped {
    let runtime = tempfile::tempdir().unwrap();
    let ready = runtime.path().join("hub.ready");
    let args = ["--mqtt", "embedded", "--mqtt-listen", "127.0.0.1:0", "--ready-file", ready.to_str().unwrap()];
    let hub = HubProcess::start(&args, &[("MCPDEV_RUNTIME_DIR", runtime.path().to_str().unwrap())]).await;
    let port: u16 = hub.host_url.rsplit(':').next().unwrap().parse().unwrap();
    let token = runtime.path().join(format!("control-{port}.token"));
    assert!(ready.exists() && token.exists(), "the hub wrote its ready file and its token");

    let mut ws = FakeDevice::connect(&hub.device_url, "02:00:00:00:0a:01", vec![tool("ws.t")]).await;
    let mut mq = MqttDevice::connect(hub.info["mqtt"].as_str().unwrap(), "02:00:00:00:0a:02").await;
    mq.hello().await;
    mq.onboard(vec![tool("mq.t")]).await;
    // A device with a receive buffer of a few KB that never reads: the hub's writes to it stall.
    let _stuck = if stuck { Some(FakeDevice::connect_with_receive_buffer(&hub.device_url, "02:00:00:00:0a:03", vec![tool("st.t")], Some(4096)).await) } else { None };
    for d in ["02:00:00:00:0a:01", "02:00:00:00:0a:02"].iter().chain(stuck.then_some(&"02:00:00:00:0a:03")) {
        let out = mcpdev(&hub, &["tools", "list", "-d", d, "--wait", "20s", "--json"]).await;
        assert_eq!(out.code, 0, "{d} is onboarded: {out:?}");
    }

    let HubProcess { mut running, .. } = hub;
    let started = std::time::Instant::now();
    // SAFETY: sending a signal to our own child process.
    unsafe { libc::kill(running.child.id().unwrap() as i32, signal) };
    let ws_close = close_code(&mut ws).await;
    let mqtt_goodbye = tokio::time::timeout(DEADLINE, async {
        loop {
            let m = mq.recv().await;
            if m["type"] == "goodbye" {
                return m;
            }
        }
    })
    .await
    .expect("a goodbye over MQTT in time");
    let status = tokio::time::timeout(DEADLINE, running.child.wait()).await.expect("the hub exits").unwrap();
    Stopped {
        code: status.code(),
        ws_close,
        mqtt_goodbye,
        mqtt_session: mq.session_id.clone(),
        ready_file_left: ready.exists(),
        token_left: token.exists(),
        took: started.elapsed(),
    }
}

fn assert_clean(s: &Stopped, what: &str) {
    assert_eq!(s.code, Some(130), "{what}: stopped on request exits 130, as for Ctrl-C");
    assert_eq!(s.ws_close, Some(CloseCode::Away), "{what}: the WebSocket device got a close frame saying going away (1001)");
    assert_eq!(s.mqtt_goodbye["session_id"], s.mqtt_session.as_str(), "{what}: the MQTT goodbye carries the device's session: {}", s.mqtt_goodbye);
    assert!(!s.mqtt_session.is_empty());
    assert!(!s.ready_file_left, "{what}: the ready file outlived the hub");
    assert!(!s.token_left, "{what}: the control token outlived the hub");
}

#[tokio::test]
async fn sigterm_says_goodbye_to_every_device_and_leaves_no_ready_file_or_token() {
    let s = stop_with(libc::SIGTERM, false).await;
    assert_clean(&s, "SIGTERM");
}

#[tokio::test]
async fn sigint_runs_the_same_shutdown() {
    let s = stop_with(libc::SIGINT, false).await;
    assert_clean(&s, "SIGINT");
}

#[tokio::test]
async fn a_device_that_does_not_read_does_not_hold_the_shutdown_up() {
    let s = stop_with(libc::SIGTERM, true).await;
    assert_clean(&s, "SIGTERM with a stuck device");
    // The goodbyes are bounded (3 s for all, 2 s per closing socket), whatever the device does.
    assert!(s.took < Duration::from_secs(8), "the shutdown took {:?}", s.took);
}

/// The `reason` of the next `disconnected` event of `device` in the hub's NDJSON log.
async fn disconnect_reason(hub: &mut HubProcess, device: &str) -> String {
    tokio::time::timeout(DEADLINE, async {
        loop {
            let line = hub.log.next_line().await.unwrap().expect("the hub's log goes on");
            let v: serde_json::Value = serde_json::from_str(&line).unwrap_or_default();
            if v["event"] == "disconnected" && v["device_id"] == device {
                return v["reason"].as_str().unwrap_or_default().to_string();
            }
        }
    })
    .await
    .expect("a disconnected event in time")
}

async fn close_code(dev: &mut FakeDevice) -> Option<CloseCode> {
    tokio::time::timeout(DEADLINE, async {
        loop {
            match dev.ws.next().await {
                Some(Ok(Message::Close(frame))) => return frame.map(|f| f.code),
                Some(Ok(_)) => {}
                None | Some(Err(_)) => return None,
            }
        }
    })
    .await
    .expect("closed in time")
}

#[tokio::test]
async fn a_revoked_device_is_told_and_logged_as_revoked_and_a_replaced_one_as_replaced() {
    let mut hub = HubProcess::start(&[], &[]).await;
    const A: &str = "02:00:00:00:0b:01";
    let mut first = FakeDevice::connect(&hub.device_url, A, vec![tool("t")]).await;
    // The same Device-Id again: the older connection is replaced.
    let mut second = FakeDevice::connect(&hub.device_url, A, vec![tool("t")]).await;
    let why = disconnect_reason(&mut hub, A).await;
    assert!(why.contains("replaced by a newer connection"), "{why}");
    assert_eq!(close_code(&mut first).await, None, "a replaced connection gets a plain close");

    let out = mcpdev(&hub, &["devices", "revoke", A, "--json"]).await;
    assert_eq!(out.json()["disconnected"], true, "{out:?}");
    let why = disconnect_reason(&mut hub, A).await;
    assert!(why.contains("revoked") && !why.contains("replaced") && !why.contains("shut"), "{why}");
    assert_eq!(close_code(&mut second).await, Some(CloseCode::Policy), "a revoked device hears 1008 (policy)");
}

/// The client side stops as the hub does: `sim` and `watch` end on SIGTERM (systemd, docker,
/// a test harness) with 130 as for Ctrl-C, not the shell's 143 of a process killed outright.
#[tokio::test]
async fn sim_and_watch_stop_on_sigterm_with_130() {
    use tokio::io::AsyncBufReadExt;
    let hub = HubProcess::start(&[], &[]).await;
    let state = tempfile::tempdir().unwrap();
    let spawn = |args: &[&str]| {
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcpdev"));
        cmd.args(args).env("MCPDEV_RUNTIME_DIR", &hub.runtime_dir).env("MCPDEV_STATE_DIR", state.path()).env_remove("MCPDEV_HUB").env("NO_COLOR", "1");
        cmd.stdout(std::process::Stdio::null()).stderr(std::process::Stdio::piped()).kill_on_drop(true);
        cmd.spawn().unwrap()
    };
    let mut sim = spawn(&["sim", "--url", &hub.device_url, "--device-id", "02:00:00:00:0a:21"]);
    let out = mcpdev(&hub, &["tools", "list", "-d", "02:00:00:00:0a:21", "--wait", "20s"]).await;
    assert_eq!(out.code, 0, "the virtual device is onboarded: {out:?}");
    let mut watch = spawn(&["watch", "--hub", &hub.host_url]);
    let mut said = tokio::io::BufReader::new(watch.stderr.take().unwrap()).lines();
    let started = tokio::time::timeout(DEADLINE, async {
        while let Ok(Some(line)) = said.next_line().await {
            if line.starts_with("watching") {
                return true;
            }
        }
        false
    });
    assert!(started.await.unwrap_or(false), "watch says it is watching");

    for (what, child) in [("sim", &mut sim), ("watch", &mut watch)] {
        // SAFETY: sending a signal to our own child process.
        unsafe { libc::kill(child.id().unwrap() as i32, libc::SIGTERM) };
        let status = tokio::time::timeout(DEADLINE, child.wait()).await.expect("it ends").unwrap();
        assert_eq!(status.code(), Some(130), "{what} on SIGTERM");
    }
}

/// A fleet reconnects the moment a restarted hub listens, before it has said `listening` (here:
/// while it waits up to 5 s for a broker that is down). The event log (`serve --json`) reports
/// such a device from its first event: it subscribed to the events before any listener served.
#[tokio::test]
async fn a_device_that_connects_before_the_hub_says_listening_is_in_its_event_log() {
    use tokio::io::AsyncBufReadExt;
    const DEVICE: &str = "02:00:00:00:0a:21";
    let dead_broker = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let broker = format!("mqtt://{}", dead_broker.local_addr().unwrap());
    drop(dead_broker);
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let device_addr = format!("127.0.0.1:{port}");
    let dir = tempfile::tempdir().unwrap();
    let dir_path = dir.path().to_str().unwrap();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcpdev"))
        .args(["serve", "--json", "--approve-all", "--device-addr", &device_addr, "--host-addr", "127.0.0.1:0", "--mqtt", &broker])
        .env("MCPDEV_STATE_DIR", dir_path)
        .env("MCPDEV_RUNTIME_DIR", dir_path)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let mut listening = Box::pin(lines.next_line());

    // The device knocks until the listener takes it (the hub is up, its `listening` not said).
    let connected = tokio::time::timeout(DEADLINE, async {
        while tokio::net::TcpStream::connect(&device_addr).await.is_err() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        FakeDevice::connect(&format!("ws://{device_addr}/xiaozhi/v1/"), DEVICE, vec![tool("early.t")]).await
    });
    let _device = tokio::select! {
        device = connected => device.expect("the device is onboarded in time"),
        line = &mut listening => panic!("the hub said listening before the device got in: {line:?}"),
    };
    let first = tokio::time::timeout(DEADLINE, listening).await.expect("listening in time").unwrap().unwrap();
    assert!(first.contains("\"listening\""), "{first}");
    let seen: Vec<String> = tokio::time::timeout(DEADLINE, async {
        let mut seen = Vec::new();
        while let Some(line) = lines.next_line().await.unwrap() {
            let v: serde_json::Value = serde_json::from_str(&line).unwrap();
            if v["device_id"] == DEVICE {
                seen.push(v["event"].as_str().unwrap().to_string());
                if seen.iter().any(|e| e == "ready") {
                    return seen;
                }
            }
        }
        panic!("the hub's log ended: {seen:?}");
    })
    .await
    .expect("the early device's events in the log");
    assert_eq!(seen.first().map(String::as_str), Some("connected"), "{seen:?}");
}
