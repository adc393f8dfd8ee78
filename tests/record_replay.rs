//! `watch --record` and `sim --replay`: a recorded xiaozhi-sdk session replayed to another hub
//! gives the same `tools list` and `call` results; an unrecorded call gets the documented error;
//! a recording never holds the device token.

mod common;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use common::{HubProcess, Running, mcpdev, spawn_mcpdev};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};

const MAC: &str = "aa:bb:cc:00:00:21";
const DEADLINE: Duration = Duration::from_secs(60);

fn sdk_python() -> PathBuf {
    let from_env = std::env::var_os("MCPDEV_TEST_PYTHON").map(PathBuf::from);
    let fallback = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".ci/venv/bin/python");
    from_env.iter().chain([&fallback]).find(|p| p.exists()).cloned().unwrap_or_else(|| panic!("no Python with xiaozhi-sdk: run .ci/test or set MCPDEV_TEST_PYTHON"))
}

/// Starts `watch -d DEVICE --record FILE --json` and returns once it is subscribed.
async fn start_recording(hub: &HubProcess, device: &str, file: &Path) -> Running {
    let mut w = spawn_mcpdev(&["watch", "--json", "-d", device, "--record", file.to_str().unwrap()], &[("MCPDEV_HUB", &hub.host_url)]);
    let mut lines = BufReader::new(w.child.stdout.take().unwrap()).lines();
    let first = tokio::time::timeout(DEADLINE, lines.next_line()).await.expect("watch starts").unwrap().expect("a line");
    assert!(first.contains("\"watching\""), "{first}");
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    w
}

/// Waits until the recording has a line for which `pred` holds.
async fn wait_for_line(file: &Path, pred: impl Fn(&Value) -> bool) {
    tokio::time::timeout(DEADLINE, async {
        loop {
            let text = std::fs::read_to_string(file).unwrap_or_default();
            if text.lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()).any(|v| pred(&v)) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await; // polling a file, with a deadline
        }
    })
    .await
    .unwrap_or_else(|_| panic!("the recording never got the line; it holds:\n{}", std::fs::read_to_string(file).unwrap_or_default()));
}

fn tools_of(out: &common::Outcome) -> Value {
    assert_eq!(out.code, 0, "{out:?}");
    out.json()["tools"].clone()
}

#[tokio::test]
async fn a_recorded_sdk_session_replays_with_the_same_results() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("session.ndjson");
    let live = HubProcess::start(&[], &[]).await;
    let watch = start_recording(&live, MAC, &file).await;
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/interop/xiaozhi_sdk_device.py");
    let _sdk = tokio::process::Command::new(sdk_python())
        .arg(&script)
        .args(["--url", &live.device_url, "--mac", MAC])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let live_tools = tools_of(&mcpdev(&live, &["tools", "list", "--json", "-d", MAC, "--wait", "50s"]).await);
    let live_call = mcpdev(&live, &["call", "set_volume", "volume=30", "-d", MAC, "--json"]).await;
    assert_eq!(live_call.code, 0, "{live_call:?}");
    wait_for_line(&file, |v| v["direction"] == "in" && v["frame"]["result"]["content"].is_array() && v["frame"].to_string().contains("30")).await;
    drop(watch);

    let text = std::fs::read_to_string(&file).unwrap();
    let first: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(first["direction"], "identity");
    assert_eq!(first["device_id"], MAC);
    assert_eq!(first["hello"]["type"], "hello");
    assert!(first["client_id"].is_string() && first["protocol_version"].is_number(), "{first}");
    for line in text.lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        assert!(v["ts"].is_string() && v["direction"].is_string(), "{line}");
    }

    let replay_hub = HubProcess::start(&[], &[]).await;
    let _replay = spawn_mcpdev(&["sim", "--replay", file.to_str().unwrap(), "--url", &replay_hub.device_url], &[]);
    let replay_tools = tools_of(&mcpdev(&replay_hub, &["tools", "list", "--json", "-d", MAC, "--wait", "30s"]).await);
    assert_eq!(replay_tools, live_tools);
    let replay_call = mcpdev(&replay_hub, &["call", "set_volume", "volume=30", "-d", MAC, "--json"]).await;
    assert_eq!(replay_call.code, 0, "{replay_call:?}");
    assert_eq!(replay_call.json(), live_call.json());

    let unrecorded = mcpdev(&replay_hub, &["call", "set_volume", "volume=31", "-d", MAC]).await;
    assert_eq!(unrecorded.code, 5, "a JSON-RPC error from the device: {unrecorded:?}");
    assert!(
        unrecorded.stderr.contains("the recording holds no request tools/call") && unrecorded.stderr.contains(r#"closest recorded request: tools/call {"name":"set_volume","arguments":{"volume":30}}"#),
        "{unrecorded:?}"
    );
}

#[tokio::test]
async fn a_recording_holds_no_device_token() {
    const TOKEN: &str = "s3cret-device-token-7f3a";
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("session.ndjson");
    let hub = HubProcess::start(&[], &[("MCPDEV_DEVICE_TOKEN", TOKEN)]).await;
    let watch = start_recording(&hub, "02:00:00:00:00:31", &file).await;
    let _sim = spawn_mcpdev(&["sim", "--device-id", "02:00:00:00:00:31", "--url", &hub.device_url], &[("MCPDEV_DEVICE_TOKEN", TOKEN)]);
    wait_for_line(&file, |v| v["direction"] == "in" && v["frame"]["result"]["tools"].is_array()).await;
    drop(watch);
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.lines().next().unwrap().contains("\"identity\""));
    assert!(!text.contains(TOKEN), "the token leaked into the recording:\n{text}");
}

/// Issue 33, the common case: the SDK device is connected and ready before the recording starts.
/// `watch --record` attaches mid-session (it writes what the hub knows first, marked as such),
/// two calls are made (one succeeds, one fails with `isError`), and the recording replays to the
/// same hub under another id, beside the live device, with the same answers.
#[tokio::test]
async fn a_recording_started_mid_session_replays_beside_the_live_device() {
    const LIVE: &str = "aa:bb:cc:dd:ee:81";
    const COPY: &str = "aa:bb:cc:dd:ee:82";
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("mid.ndjson");
    let hub = HubProcess::start(&[], &[]).await;
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/interop/xiaozhi_sdk_device.py");
    let _sdk = tokio::process::Command::new(sdk_python())
        .arg(&script)
        .args(["--url", &hub.device_url, "--mac", LIVE])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let live_tools = tools_of(&mcpdev(&hub, &["tools", "list", "--json", "-d", LIVE, "--wait", "50s"]).await);

    let watch = start_recording(&hub, LIVE, &file).await;
    let live_call = mcpdev(&hub, &["call", "set_volume", "volume=30", "-d", LIVE, "--json"]).await;
    assert_eq!(live_call.code, 0, "{live_call:?}");
    let live_fail = mcpdev(&hub, &["call", "spin_motor", "rpm=5", "-d", LIVE, "--json"]).await;
    assert_eq!(live_fail.code, 5, "{live_fail:?}");
    wait_for_line(&file, |v| v["direction"] == "in" && v["frame"]["result"]["isError"] == true).await;
    drop(watch);

    let text = std::fs::read_to_string(&file).unwrap();
    let lines: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!((lines[0]["direction"].as_str(), lines[0]["device_id"].as_str(), lines[0]["from_hub"].as_bool()), (Some("identity"), Some(LIVE), Some(true)), "{text}");
    let from_hub: Vec<&str> = lines.iter().filter(|l| l["from_hub"] == true).filter_map(|l| l["frame"]["method"].as_str()).collect();
    assert_eq!(from_hub, ["initialize", "tools/list"], "what the hub knew, before the traffic:\n{text}");
    assert!(lines.iter().filter(|l| l["from_hub"] == true).all(|l| l["ts"].is_string()));

    let _replay = spawn_mcpdev(&["sim", "--replay", file.to_str().unwrap(), "--url", &hub.device_url, "--device-id", COPY], &[]);
    let copy_tools = tools_of(&mcpdev(&hub, &["tools", "list", "--json", "-d", COPY, "--wait", "30s"]).await);
    assert_eq!(copy_tools, live_tools);
    let copy_call = mcpdev(&hub, &["call", "set_volume", "volume=30", "-d", COPY, "--json"]).await;
    assert_eq!(copy_call.code, 0, "{copy_call:?}");
    assert_eq!(copy_call.json()["device_id"], COPY);
    assert_eq!(copy_call.json()["content"], live_call.json()["content"]);
    let copy_fail = mcpdev(&hub, &["call", "spin_motor", "rpm=5", "-d", COPY, "--json"]).await;
    assert_eq!(copy_fail.code, 5, "{copy_fail:?}");
    assert_eq!((copy_fail.json()["content"].clone(), copy_fail.json()["isError"].clone()), (live_fail.json()["content"].clone(), Value::Bool(true)));

    // Beside, not instead: the live device is still connected as itself, and still answers.
    let devices = mcpdev(&hub, &["devices", "--json"]).await.json();
    let row = |id: &str| devices.as_array().unwrap().iter().find(|d| d["device_id"] == id).cloned().unwrap_or_else(|| panic!("{id} not listed: {devices:#}"));
    assert_eq!((row(LIVE)["phase"].as_str(), row(COPY)["phase"].as_str()), (Some("ready"), Some("ready")));
    assert_ne!(row(LIVE)["client_id"], row(COPY)["client_id"], "the copy has a Client-Id of its own");
    assert_eq!(mcpdev(&hub, &["call", "set_volume", "volume=40", "-d", LIVE]).await.code, 0);
}

/// A `sim` flag that cannot apply to a replay is refused (exit 2), never ignored.
#[tokio::test]
async fn sim_flags_that_cannot_apply_to_a_replay_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("r.ndjson");
    std::fs::write(&file, r#"{"direction":"identity","device_id":"aa:bb:cc:00:00:09","hello":{"type":"hello"}}"#).unwrap();
    for flag in [["--count", "2"], ["--protocol-version", "2"], ["--profile", "stock"], ["--extra-tools", "3"]] {
        let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcpdev"))
            .args(["sim", "--replay", file.to_str().unwrap(), "--url", "ws://127.0.0.1:9/xiaozhi/v1/"])
            .args(flag)
            .output()
            .await
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flag:?}: {stderr}");
        assert!(stderr.contains("cannot be used with"), "{flag:?}: {stderr}");
    }
}
