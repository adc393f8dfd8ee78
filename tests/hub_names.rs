//! A cluster's hubs as an operator sees them (issue 33): `serve` says its cluster hub id in the
//! `listening` event (and the banner), `--hub-name` gives it a name, and `devices` shows each
//! device's hub by that name, or by the id the hub said. A name that could carry escapes or read
//! as a flag is refused, and so is `--hub-name` on a hub without a cluster.

mod common;

use std::time::{Duration, Instant};

use common::fake_device::{FakeDevice, tool};
use common::mqtt::Mosquitto;
use common::{HubProcess, mcpdev};
use serde_json::Value;

const NAMED_DEV: &str = "cb:00:00:00:00:01";
const PLAIN_DEV: &str = "cb:00:00:00:00:02";

/// `devices --json` through `hub` until both devices are listed ready.
async fn both_listed(hub: &HubProcess) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let out = mcpdev(hub, &["devices", "--json"]).await;
        assert_eq!(out.code, 0, "{out:?}");
        let rows = out.json().as_array().cloned().unwrap_or_default();
        if [NAMED_DEV, PLAIN_DEV].iter().all(|id| rows.iter().any(|d| d["device_id"] == *id && d["phase"] == "ready")) {
            return rows;
        }
        assert!(Instant::now() < deadline, "not both listed ready: {rows:#?}");
        tokio::time::sleep(Duration::from_millis(100)).await; // polling the hub, with a deadline
    }
}

#[tokio::test]
async fn devices_shows_each_hub_by_its_name_or_by_the_id_serve_printed() {
    let broker = Mosquitto::start().await;
    // Hubs of one cluster share the hub secret (docs/cluster.md): each its own state directory
    // holding the same one, as `HubProcess::cluster` makes them.
    let secret: String = (0..32).map(|i| format!("{:02x}", (i * 53 + 7) % 256)).collect();
    let states: Vec<tempfile::TempDir> = (0..2)
        .map(|_| {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("hub-secret");
            std::fs::write(&path, &secret).unwrap();
            std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
            dir
        })
        .collect();
    let state = |i: usize| states[i].path().to_string_lossy().into_owned();
    let named = HubProcess::start(&["--mqtt", &broker.url(), "--hub-name", "rack-2.east"], &[("MCPDEV_STATE_DIR", &state(0))]).await;
    let plain = HubProcess::start(&["--mqtt", &broker.url()], &[("MCPDEV_STATE_DIR", &state(1))]).await;
    let id_of = |hub: &HubProcess| -> String {
        let id = hub.info["hub_id"].as_str().unwrap_or_else(|| panic!("no hub_id in the listening event: {}", hub.info)).to_string();
        assert!(id.len() == 12 && id.bytes().all(|b| b.is_ascii_hexdigit()), "{id}");
        id
    };
    let (named_id, plain_id) = (id_of(&named), id_of(&plain));
    assert_eq!(named.info["hub_name"], "rack-2.east");
    assert!(plain.info["hub_name"].is_null(), "{}", plain.info);

    let _a = FakeDevice::connect(&named.device_url, NAMED_DEV, vec![tool("self.a")]).await;
    let _b = FakeDevice::connect(&plain.device_url, PLAIN_DEV, vec![tool("self.b")]).await;
    // Through either hub: its own device and the other's, each with the hub that serves it.
    for through in [&named, &plain] {
        let rows = both_listed(through).await;
        let row = |id: &str| rows.iter().find(|d| d["device_id"] == id).unwrap().clone();
        assert_eq!((row(NAMED_DEV)["hub"].as_str(), row(NAMED_DEV)["hub_name"].as_str()), (Some(named_id.as_str()), Some("rack-2.east")), "{rows:#?}");
        assert_eq!((row(PLAIN_DEV)["hub"].as_str(), row(PLAIN_DEV).get("hub_name")), (Some(plain_id.as_str()), None), "{rows:#?}");
        let table = mcpdev(through, &["devices"]).await;
        assert_eq!(table.code, 0, "{table:?}");
        let line = |id: &str| table.stdout.lines().find(|l| l.contains(id)).unwrap_or_else(|| panic!("{id} not in\n{}", table.stdout)).to_string();
        assert!(line(NAMED_DEV).trim_end().ends_with("rack-2.east"), "by its name:\n{}", table.stdout);
        assert!(line(PLAIN_DEV).trim_end().ends_with(&plain_id), "by the id its banner printed:\n{}", table.stdout);
    }
}

#[tokio::test]
async fn a_hub_name_that_cannot_apply_or_could_carry_escapes_is_refused() {
    let run = |args: Vec<String>| async move {
        let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcpdev")).args(&args).env_remove("MCPDEV_MQTT").output().await.unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    for bad in ["\u{1b}[31mred", "-x", "a b", "<b>", "", "abcdefghijabcdefghijabcdefghijabc"] {
        // `--hub-name=VALUE`: a value that starts with `-` is the value, not another flag.
        let (code, stderr) = run(vec!["serve".into(), "--mqtt".into(), "embedded".into(), format!("--hub-name={bad}")]).await;
        assert_eq!(code, Some(2), "{bad:?}: {stderr}");
        assert!(stderr.contains("a hub name is 1 to 32 letters"), "{bad:?}: {stderr}");
    }
    let (code, stderr) = run(vec!["serve".into(), "--hub-name".into(), "rack-1".into()]).await;
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("--mqtt"), "{stderr}");
}
