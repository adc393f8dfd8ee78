//! `mcpdev check --mqtt URL --device ID`: a device checked straight through a broker, no hub in
//! between. Against `mcpdev sim` over a hub's embedded broker and over Mosquitto (every raw-frame
//! check runs and passes, the hello checks are skipped), against a scripted MQTT device that
//! breaks one rule (its check fails or warns), and the usage and reachability errors.

mod common;

use common::mqtt::{Mosquitto, MqttDevice};
use common::{HubProcess, Outcome, spawn_mcpdev};
use serde_json::{Value, json};

const D1: &str = "02:00:00:00:00:01";
const SCRIPTED: &str = "0a:00:00:00:00:42";

/// The checks that send raw frames: through a hub they are skipped, with `--mqtt` they run.
const RAW_FRAME_CHECKS: [&str; 8] =
    ["envelope.type", "hygiene.error_escaping", "hygiene.ids", "hygiene.in_flight", "hygiene.malformed_json", "hygiene.notification_no_reply", "initialize.initialized_no_reply", "timing.onboarding"];
/// Skipped over MQTT: the hello checks, and the session_id echo (the check sends no server hello).
const HELLO_CHECKS: [&str; 4] = ["envelope.session_id", "hello.features_mcp", "hello.fields", "hello.headers"];

/// Runs `mcpdev check --json --mqtt BROKER -d DEVICE ARGS` (`--wait 30s --timeout 5s` unless
/// given) with no hub (and the runtime dir of
/// `hub`, if any, where the embedded broker's credential is).
async fn check(broker: &str, device: &str, extra: &[&str], hub: Option<&HubProcess>) -> Outcome {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcpdev"));
    cmd.args(["check", "--json", "--mqtt", broker, "-d", device]);
    for (flag, default) in [("--wait", "30s"), ("--timeout", "5s")] {
        if !extra.contains(&flag) {
            cmd.args([flag, default]);
        }
    }
    cmd.args(extra).env("MCPDEV_HUB", "http://127.0.0.1:9").env("NO_COLOR", "1").kill_on_drop(true);
    if let Some(h) = hub {
        cmd.env("MCPDEV_RUNTIME_DIR", &h.runtime_dir);
    }
    let out = tokio::time::timeout(std::time::Duration::from_secs(90), cmd.output()).await.expect("check hung").unwrap();
    Outcome { code: out.status.code().unwrap_or(-1), stdout: String::from_utf8_lossy(&out.stdout).into_owned(), stderr: String::from_utf8_lossy(&out.stderr).into_owned() }
}

fn status_of(report: &Value, id: &str) -> String {
    let found = report["results"].as_array().unwrap().iter().find(|c| c["id"] == id);
    found.map_or_else(|| format!("missing from {report:#}"), |c| c["status"].as_str().unwrap().to_string())
}

fn not_passed(report: &Value) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = report["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["status"] != "pass")
        .map(|c| (c["id"].as_str().unwrap().to_string(), c["status"].as_str().unwrap().to_string()))
        .collect();
    v.sort();
    v
}

/// The simulator checked through `broker`: everything passes but the hello checks, which are
/// skipped with the reason; the raw-frame checks ran.
async fn the_simulator_passes(broker: &str, hub: Option<&HubProcess>) {
    let _sim = spawn_mcpdev(&["sim", "--mqtt", broker, "--extra-tools", "1"], &[]);
    let out = check(broker, D1, &["--call", "sim.extra.*", "--fuzz", "5"], hub).await;
    let report = out.json();
    let skipped: Vec<(String, String)> = HELLO_CHECKS.iter().map(|id| (id.to_string(), "skip".to_string())).collect();
    assert_eq!(not_passed(&report), skipped, "{report:#}");
    assert_eq!(out.code, 0, "{out:?}");
    for id in RAW_FRAME_CHECKS {
        assert_eq!(status_of(&report, id), "pass", "{id} ran over MQTT: {report:#}");
    }
    let hello = report["results"].as_array().unwrap().iter().find(|c| c["id"] == "hello.fields").unwrap();
    assert!(hello["reason"].as_str().unwrap().contains("over MQTT an idle device says no hello"), "{hello}");
    assert_eq!(report["device_id"], D1);
    assert_eq!(status_of(&report, "fuzz.sim.extra.tool_0001"), "pass", "--call and --fuzz work over MQTT: {report:#}");
}

#[tokio::test]
async fn the_simulator_passes_over_the_embedded_broker_of_a_hub() {
    let hub = HubProcess::start(&["--mqtt", "embedded", "--mqtt-listen", "127.0.0.1:0"], &[]).await;
    let broker = hub.info["mqtt"].as_str().unwrap().to_string();
    // The hub serves (and onboarded) the same device meanwhile; check needs none of it.
    the_simulator_passes(&broker, Some(&hub)).await;

    let absent = check(&broker, "0a:00:00:00:00:99", &["--wait", "1s", "--timeout", "1s"], Some(&hub)).await;
    assert_eq!(absent.code, 4, "{absent:?}");
    assert!(absent.stderr.contains("did not answer initialize over MQTT") && absent.stderr.contains("0a:00:00:00:00:99"), "{}", absent.stderr);
    let mut no_device = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcpdev"));
    no_device.args(["check", "--mqtt", &broker]).env_remove("MCPDEV_DEVICE").kill_on_drop(true);
    let no_device = tokio::time::timeout(std::time::Duration::from_secs(30), no_device.output()).await.unwrap().unwrap();
    assert_eq!(no_device.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&no_device.stderr).contains("--mqtt needs --device"));
}

#[tokio::test]
async fn the_simulator_passes_over_mosquitto_with_no_hub() {
    let broker = Mosquitto::start().await;
    the_simulator_passes(&broker.url(), None).await;
}

#[tokio::test]
async fn a_broker_that_cannot_be_reached_exits_4_and_is_named() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let url = format!("mqtt://127.0.0.1:{port}");
    let out = check(&url, D1, &["--timeout", "2s"], None).await;
    assert_eq!(out.code, 4, "{out:?}");
    assert!(out.stderr.contains(&format!("cannot reach the MQTT broker {url}")), "{}", out.stderr);
}

// ---- a scripted MQTT device that breaks one rule ----

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rule {
    None,
    RepliesToNotifications,
    StringIdAsNumber,
}

/// Answers MCP on its uplink the way the simulator does, but for `rule`. Like a device a hub also
/// serves, it publishes a reply to someone else's request (id 3) after every notification.
async fn scripted_device(mut dev: MqttDevice, rule: Rule) {
    let tool = json!({"name": "t.echo", "description": "Echo.", "inputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}}});
    while let Some(m) = dev.rx.recv().await {
        let p = &m["payload"];
        let (Some(method), "mcp") = (p["method"].as_str(), m["type"].as_str().unwrap_or_default()) else { continue };
        let Some(id) = p.get("id") else {
            dev.send(json!({"type": "mcp", "payload": {"jsonrpc": "2.0", "id": 3, "result": {"tools": []}}})).await;
            if rule == Rule::RepliesToNotifications {
                dev.send(json!({"type": "mcp", "payload": {"jsonrpc": "2.0", "id": null, "result": {}}})).await;
            }
            continue;
        };
        let answer = match (method, p["params"]["cursor"].as_str(), p["params"]["name"].as_str()) {
            ("initialize", ..) => json!({"result": {"protocolVersion": "2024-11-05", "capabilities": {"tools": {}}, "serverInfo": {"name": "scripted-mqtt", "version": "1"}}}),
            ("tools/list", Some("") | None, _) => json!({"result": {"tools": [tool]}}),
            ("tools/list", Some(_), _) => json!({"error": {"code": -32602, "message": "Invalid cursor"}}),
            ("tools/call", _, Some("t.echo")) if p["params"]["arguments"].is_object() => json!({"result": {"content": [{"type": "text", "text": "ok"}], "isError": false}}),
            ("tools/call", ..) => json!({"error": {"code": -32602, "message": format!("Invalid call of {}", p["params"]["name"])}}),
            ("ping", ..) => json!({"result": {}}),
            _ => json!({"error": {"code": -32601, "message": "Method not found"}}),
        };
        let mut payload = answer;
        payload["jsonrpc"] = json!("2.0");
        payload["id"] = if rule == Rule::StringIdAsNumber && id.is_string() { json!(0) } else { id.clone() };
        dev.send(json!({"type": "mcp", "payload": payload})).await;
    }
}

async fn check_scripted(rule: Rule, extra: &[&str]) -> Outcome {
    let broker = Mosquitto::start().await;
    let dev = MqttDevice::connect(&broker.url(), SCRIPTED).await;
    let device = tokio::spawn(scripted_device(dev, rule));
    let out = check(&broker.url(), SCRIPTED, extra, None).await;
    device.abort();
    out
}

#[tokio::test]
async fn a_scripted_device_that_breaks_nothing_passes_despite_a_hubs_traffic() {
    let out = check_scripted(Rule::None, &[]).await;
    let skipped: Vec<(String, String)> = HELLO_CHECKS.iter().map(|id| (id.to_string(), "skip".to_string())).collect();
    assert_eq!(not_passed(&out.json()), skipped, "{out:?}");
    assert_eq!(out.code, 0, "{out:?}");
}

#[tokio::test]
async fn a_device_answering_notifications_over_mqtt_fails_with_exit_10() {
    let out = check_scripted(Rule::RepliesToNotifications, &[]).await;
    let report = out.json();
    assert_eq!(status_of(&report, "hygiene.notification_no_reply"), "fail", "{report:#}");
    assert_eq!(status_of(&report, "initialize.initialized_no_reply"), "fail", "{report:#}");
    assert_eq!(out.code, 10, "{out:?}");
}

#[tokio::test]
async fn a_device_echoing_string_ids_as_numbers_over_mqtt_warns_and_fails_strict() {
    let out = check_scripted(Rule::StringIdAsNumber, &["--strict", "--timeout", "3s"]).await;
    let report = out.json();
    assert_eq!(not_passed(&report).into_iter().filter(|(_, s)| s != "skip").collect::<Vec<_>>(), [("hygiene.ids".to_string(), "warn".to_string())], "{report:#}");
    assert_eq!(out.code, 10, "{out:?}");
}
