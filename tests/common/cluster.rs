//! What the cluster end-to-end tests share (`cluster_e2e`, `cluster_admission_e2e`,
//! `cluster_requests_e2e`): three hubs on one broker, MQTT devices, and reading what the hubs list
//! and log.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::io::BufReader;

use super::fake_device::tool;
use super::mqtt::{Counts, Mosquitto, MqttDevice};
use super::{HubProcess, Outcome, mcpdev};

/// Three hubs of one cluster (the same hub secret), with their state directories.
pub async fn three_hubs(broker: &Mosquitto) -> (Vec<HubProcess>, Vec<tempfile::TempDir>) {
    HubProcess::cluster(3, &["--mqtt", &broker.url()], false).await
}

/// `devices --json` through `hub`.
pub async fn devices(hub: &HubProcess) -> Vec<Value> {
    let out = mcpdev(hub, &["devices", "--json"]).await;
    assert_eq!(out.code, 0, "{out:?}");
    out.json().as_array().cloned().unwrap_or_default()
}

/// The hub id `hub` gives itself: the `hub` of the devices it lists as its own (it lists them
/// with their full description, which has a `session_id`; other hubs' rows do not).
pub fn local_rows(rows: &[Value]) -> Vec<&Value> {
    rows.iter().filter(|d| d.get("session_id").is_some()).collect()
}

/// Polls `devices` through `hub` until `ids` are all listed ready, within `limit`; the rows.
pub async fn until_listed(hub: &HubProcess, ids: &[String], limit: Duration) -> Vec<Value> {
    let deadline = Instant::now() + limit;
    loop {
        let rows = devices(hub).await;
        let ready: HashSet<&str> = rows.iter().filter(|d| d["phase"] == "ready").filter_map(|d| d["device_id"].as_str()).collect();
        if ids.iter().all(|id| ready.contains(id.as_str())) {
            return rows;
        }
        assert!(Instant::now() < deadline, "not every device listed ready within {limit:?}: {rows:#?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Which hub serves each device, by asking every hub for its own devices; panics if two hubs
/// serve one device.
pub async fn owners(hubs: &[&HubProcess]) -> HashMap<String, usize> {
    let mut owner = HashMap::new();
    for (i, hub) in hubs.iter().enumerate() {
        for d in local_rows(&devices(hub).await) {
            let id = d["device_id"].as_str().unwrap().to_string();
            if let Some(other) = owner.insert(id.clone(), i) {
                panic!("{id} is served by hub {other} and hub {i} at once");
            }
        }
    }
    owner
}

/// Reads `watch --json --traffic` lines until a traffic event matches `seen`, within 15 s.
pub async fn watched(lines: &mut tokio::io::Lines<BufReader<tokio::process::ChildStdout>>, seen: impl Fn(&Value) -> bool) -> Value {
    let read = async {
        while let Some(line) = lines.next_line().await.unwrap() {
            let v: Value = serde_json::from_str(&line).unwrap();
            if v["event"] == "traffic" && seen(&v) {
                return v;
            }
        }
        panic!("watch ended");
    };
    tokio::time::timeout(Duration::from_secs(15), read).await.expect("the call's traffic was not watched through another hub")
}

pub fn mqtt_ids(prefix: &str, n: usize) -> Vec<String> {
    (1..=n).map(|i| format!("{prefix}:{i:02x}")).collect()
}

pub async fn mqtt_devices(broker: &Mosquitto, ids: &[String]) -> Vec<Counts> {
    let mut counts = Vec::new();
    for id in ids {
        let mut dev = MqttDevice::connect(&broker.url(), id).await;
        dev.hello().await;
        counts.push(dev.respond_forever(vec![tool("t.echo")]));
    }
    counts
}

pub fn call_ok(out: &Outcome, id: &str) {
    assert_eq!(out.code, 0, "{id}: {out:?}");
    assert_eq!(out.json()["content"][0]["text"], "ok", "{id}: {out:?}");
}

/// Waits until `hub`'s stderr holds `n` lines with `needle`, within 10 s.
pub async fn logged(hub: &HubProcess, needle: &str, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    let log = hub.stderr.clone().expect("a hub started with its stderr collected");
    while log.lock().unwrap().matches(needle).count() < n {
        assert!(Instant::now() < deadline, "the hub did not log {needle:?} {n} time(s)");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
