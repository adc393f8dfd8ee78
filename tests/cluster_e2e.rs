//! The cluster as one (issue 26), with real processes: Mosquitto (one broker per test) and three
//! `mcpdev serve` on it. MQTT devices are spread among the hubs by their claims, one WebSocket
//! device is attached to one hub; everything is reached through any hub. Then a hub is killed
//! (`kill -9`): its devices answer through the survivors within the bound, a call in flight ends
//! with a typed error, and no device is ever served by two hubs. Revocation through one hub cuts
//! a device off on the hub that serves it.

mod common;

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use common::fake_device::tool;
use common::mqtt::{Counts, Mosquitto, MqttDevice};
use common::{HubProcess, Outcome, mcp_sdk_client, mcpdev, spawn_mcpdev};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};

/// How soon the survivors take over a dead hub's MQTT devices (docs/cluster.md).
const TAKEOVER_BOUND: Duration = Duration::from_secs(5);

/// Three hubs of one cluster (the same hub secret), with their state directories.
async fn three_hubs(broker: &Mosquitto) -> (Vec<HubProcess>, Vec<tempfile::TempDir>) {
    HubProcess::cluster(3, &["--mqtt", &broker.url()], false).await
}

/// `devices --json` through `hub`.
async fn devices(hub: &HubProcess) -> Vec<Value> {
    let out = mcpdev(hub, &["devices", "--json"]).await;
    assert_eq!(out.code, 0, "{out:?}");
    out.json().as_array().cloned().unwrap_or_default()
}

/// The hub id `hub` gives itself: the `hub` of the devices it lists as its own (it lists them
/// with their full description, which has a `session_id`; other hubs' rows do not).
fn local_rows(rows: &[Value]) -> Vec<&Value> {
    rows.iter().filter(|d| d.get("session_id").is_some()).collect()
}

/// Polls `devices` through `hub` until `ids` are all listed ready, within `limit`; the rows.
async fn until_listed(hub: &HubProcess, ids: &[String], limit: Duration) -> Vec<Value> {
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
async fn owners(hubs: &[&HubProcess]) -> HashMap<String, usize> {
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
async fn watched(lines: &mut tokio::io::Lines<BufReader<tokio::process::ChildStdout>>, seen: impl Fn(&Value) -> bool) -> Value {
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

fn mqtt_ids(prefix: &str, n: usize) -> Vec<String> {
    (1..=n).map(|i| format!("{prefix}:{i:02x}")).collect()
}

async fn mqtt_devices(broker: &Mosquitto, ids: &[String]) -> Vec<Counts> {
    let mut counts = Vec::new();
    for id in ids {
        let mut dev = MqttDevice::connect(&broker.url(), id).await;
        dev.hello().await;
        counts.push(dev.respond_forever(vec![tool("t.echo")]));
    }
    counts
}

fn call_ok(out: &Outcome, id: &str) {
    assert_eq!(out.code, 0, "{id}: {out:?}");
    assert_eq!(out.json()["content"][0]["text"], "ok", "{id}: {out:?}");
}

/// From one hub: `devices` lists every device of the cluster with the hub that serves it,
/// `hello`, `tools list`, `call` and `watch` reach each of them (the WebSocket device attached
/// to another hub included), each call reaching its device exactly once.
#[tokio::test]
async fn any_hub_reaches_every_device_of_the_cluster() {
    let broker = Mosquitto::start().await;
    let (hubs, _dirs) = three_hubs(&broker).await;
    let ids = mqtt_ids("ca:00:00:00:00", 6);
    let counts = mqtt_devices(&broker, &ids).await;
    const WS: &str = "ca:00:00:00:01:01";
    let _ws = spawn_mcpdev(&["sim", "--url", &hubs[2].device_url, "--device-id", WS], &[]);
    let mut all = ids.clone();
    all.push(WS.to_string());

    let rows = until_listed(&hubs[0], &all, Duration::from_secs(20)).await;
    assert_eq!(rows.len(), all.len(), "each device listed once: {rows:#?}");
    let hub_ids: Vec<String> = {
        let mut v = Vec::new();
        for h in &hubs {
            // Every hub lists the whole cluster; its own rows carry its own id.
            let rows = until_listed(h, &all, Duration::from_secs(10)).await;
            let own: HashSet<&str> = local_rows(&rows).iter().map(|d| d["hub"].as_str().unwrap()).collect();
            v.push(own.into_iter().next().unwrap_or_default().to_string());
        }
        v
    };
    let ws_row = rows.iter().find(|d| d["device_id"] == WS).unwrap();
    assert_eq!(ws_row["hub"].as_str(), Some(hub_ids[2].as_str()), "the WebSocket device is listed with its hub");
    assert_eq!((ws_row["transport"].as_str(), ws_row["tool_count"].as_u64().is_some()), (Some("websocket"), true), "{ws_row}");
    let owner = owners(&hubs.iter().collect::<Vec<_>>()).await;
    assert_eq!(owner.len(), all.len(), "every device is served by exactly one hub: {owner:?}");
    assert!(owner.values().any(|h| *h != 0), "some devices are served by the other hubs: {owner:?}");
    for d in &rows {
        let id = d["device_id"].as_str().unwrap();
        assert_eq!(d["hub"].as_str(), Some(hub_ids[owner[id]].as_str()), "{id} is listed with the hub that serves it");
    }

    // The table names the hub too.
    let table = mcpdev(&hubs[0], &["devices"]).await;
    assert!(table.stdout.contains(&hub_ids[2]) && table.stdout.contains("hub"), "{table:?}");
    // Paged (`--page-size`): the cursor runs over every hub's devices, each once, in Device-Id
    // order, each with its hub.
    let paged = mcpdev(&hubs[0], &["devices", "--ndjson", "--page-size", "2"]).await;
    assert_eq!(paged.code, 0, "{paged:?}");
    let paged: Vec<Value> = paged.stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let mut expected = all.clone();
    expected.sort();
    assert_eq!(paged.iter().map(|d| d["device_id"].as_str().unwrap().to_string()).collect::<Vec<_>>(), expected, "{paged:#?}");
    for d in &paged {
        let id = d["device_id"].as_str().unwrap();
        assert_eq!(d["hub"].as_str(), Some(hub_ids[owner[id]].as_str()), "{id} is paged with the hub that serves it");
    }

    for (id, c) in ids.iter().zip(&counts) {
        let out = mcpdev(&hubs[0], &["call", "t.echo", "n=1", "-d", id, "--json"]).await;
        call_ok(&out, id);
        assert_eq!(c.get("tools/call"), 1, "{id}: the call reached the device once");
        assert_eq!(c.get("initialize"), 1, "{id}: onboarded once, by one hub");
        let hello = mcpdev(&hubs[0], &["hello", "-d", id, "--json"]).await;
        assert_eq!(hello.code, 0, "{hello:?}");
        assert_eq!((hello.json()["transport"].as_str(), hello.json()["hub"].as_str()), (Some("mqtt"), Some(hub_ids[owner[id.as_str()]].as_str())));
    }
    // The WebSocket device on hub 2, through hub 0: the simulator's own tool.
    let status = mcpdev(&hubs[0], &["call", "self.get_device_status", "-d", WS, "--json"]).await;
    assert_eq!(status.code, 0, "{status:?}");
    assert!(status.json()["content"][0]["text"].as_str().unwrap().contains("audio_speaker"), "{status:?}");
    let listed = mcpdev(&hubs[0], &["tools", "list", "-d", WS, "--json"]).await;
    assert!(listed.json()["tools"].as_array().unwrap().iter().any(|t| t["name"] == "self.audio_speaker.set_volume"), "{listed:?}");
    // A prefix that only another hub's device matches works as it does locally.
    let by_prefix = mcpdev(&hubs[0], &["hello", "-d", "ca0000000101", "--json"]).await;
    assert_eq!(by_prefix.json()["device_id"].as_str(), Some(WS), "{by_prefix:?}");
    // A device no hub serves is still "not found" (exit 4), not a hang.
    let absent = mcpdev(&hubs[0], &["call", "t.echo", "-d", "ca:00:00:00:09:99", "--wait", "0s"]).await;
    assert_eq!(absent.code, 4, "{absent:?}");

    // watch through hub 0 of the WebSocket device on hub 2: the traffic of a call made through hub 1.
    let mut watch = spawn_mcpdev(&["watch", "--json", "--traffic", "-d", WS], &[("MCPDEV_HUB", hubs[0].host_url.as_str()), ("MCPDEV_RUNTIME_DIR", hubs[0].runtime_dir.as_str())]);
    let mut lines = BufReader::new(watch.child.stdout.take().unwrap()).lines();
    let first: Value = serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
    assert_eq!(first["event"], "watching", "{first}");
    let set = mcpdev(&hubs[1], &["call", "self.audio_speaker.set_volume", "volume=33", "-d", WS, "--json"]).await;
    assert_eq!(set.code, 0, "{set:?}");
    let ev = watched(&mut lines, |v| v["payload"]["params"]["arguments"]["volume"] == 33).await;
    assert_eq!(ev["device_id"].as_str(), Some(WS));
    watch.child.kill().await.unwrap();

    // An MCP SDK client on hub 0 calls a device hub 1 or 2 serves, through its endpoint there.
    let (remote, c) = ids.iter().zip(&counts).find(|(id, _)| owner[id.as_str()] != 0).unwrap();
    let before = c.get("tools/call");
    let steps = serde_json::json!([{"op": "list_tools"}, {"op": "call", "name": "t.echo", "arguments": {"n": 5}}, {"op": "call", "name": "t.nope", "arguments": {}}]);
    let lines = mcp_sdk_client(&format!("{}/devices/{remote}/mcp", hubs[0].host_url), &steps).await;
    assert_eq!(lines[0]["op"], "connect", "{lines:?}");
    assert_eq!(lines[1]["pages"], serde_json::json!([["t.echo"]]), "the remote device's tools: {lines:?}");
    assert_eq!(lines[2]["result"]["content"][0]["text"], "ok", "{lines:?}");
    assert!(lines[3].get("error").is_some() || lines[3]["result"]["isError"] == true, "an unknown tool is refused: {lines:?}");
    assert_eq!(c.get("tools/call"), before + 1, "the SDK's call reached the device once");

    // /mcp on hub 0 offers every device of the cluster; its call of the remote device's tool.
    let name = format!("{}.t.echo", mcpdev::bridge::naming::prefix_for(remote, &HashMap::new()));
    let ws_tool = format!("{}.self.get_device_status", mcpdev::bridge::naming::prefix_for(WS, &HashMap::new()));
    let steps = serde_json::json!([{"op": "list_tools"}, {"op": "call", "name": name, "arguments": {"n": 6}}, {"op": "call", "name": ws_tool, "arguments": {}}]);
    let lines = mcp_sdk_client(&format!("{}/mcp", hubs[0].host_url), &steps).await;
    let offered: Vec<String> = serde_json::from_value(lines[1]["pages"].clone()).map(|p: Vec<Vec<String>>| p.concat()).unwrap_or_default();
    for id in &all {
        let prefix = mcpdev::bridge::naming::prefix_for(id, &HashMap::new());
        assert!(offered.iter().any(|t| t.starts_with(&format!("{prefix}."))), "/mcp offers {id}'s tools: {offered:?}");
    }
    assert_eq!(lines[2]["result"]["content"][0]["text"], "ok", "{lines:?}");
    assert_eq!(c.get("tools/call"), before + 2, "the /mcp call reached the device once");
    assert!(lines[3]["result"]["content"][0]["text"].as_str().unwrap_or_default().contains("audio_speaker"), "the WebSocket device on hub 2: {lines:?}");

    // The fleet tools on hub 0 (callable whatever the face) find, list and call the remote device.
    let steps = serde_json::json!([
        {"op": "call", "name": "search_devices", "arguments": {"query": remote}},
        {"op": "call", "name": "list_device_tools", "arguments": {"device": remote}},
        {"op": "call", "name": "call_device_tool", "arguments": {"device": remote, "tool": "t.echo", "arguments": {"n": 7}}},
        {"op": "call", "name": "search_devices", "arguments": {}},
    ]);
    let lines = mcp_sdk_client(&format!("{}/mcp", hubs[0].host_url), &steps).await;
    let found = &lines[1]["result"]["structuredContent"]["devices"];
    assert_eq!(found.as_array().map(Vec::len), Some(1), "search finds the remote device: {lines:?}");
    assert_eq!(found[0]["device_id"].as_str(), Some(remote.as_str()));
    let listed = lines[2]["result"]["structuredContent"].to_string();
    assert!(listed.contains("t.echo"), "its tools, from the hub that serves it: {lines:?}");
    assert_eq!(lines[3]["result"]["content"][0]["text"], "ok", "{lines:?}");
    assert_eq!(c.get("tools/call"), before + 3, "call_device_tool reached the remote device once");
    let everyone = lines[4]["result"]["structuredContent"].clone();
    assert_eq!(everyone["connected"].as_u64(), Some(all.len() as u64), "the fleet counts every device of the cluster: {everyone}");
    for id in &all {
        assert!(everyone.to_string().contains(id.as_str()), "search lists {id}, wherever it is served: {everyone}");
    }
}

/// `kill -9` of a hub: every MQTT device it served answers through the survivors within the
/// bound, idle ones included; a call in flight through a survivor ends at once with a typed
/// error; no device is ever served by two hubs.
#[tokio::test]
async fn a_dead_hubs_devices_answer_through_the_survivors_within_the_bound() {
    let broker = Mosquitto::start().await;
    let (mut hubs, _dirs) = three_hubs(&broker).await;
    let ids = mqtt_ids("cb:00:00:00:00", 9);
    let counts = mqtt_devices(&broker, &ids).await;
    // A device that takes its time: its call is in flight when its hub dies.
    const SLOW: &str = "cb:00:00:00:01:ff";
    let mut slow = MqttDevice::connect(&broker.url(), SLOW).await;
    slow.hello().await;
    slow.onboard(vec![tool("t.slow")]).await;
    let mut all = ids.clone();
    all.push(SLOW.to_string());
    until_listed(&hubs[0], &all, Duration::from_secs(20)).await;
    let owner = owners(&hubs.iter().collect::<Vec<_>>()).await;
    let victim = owner[SLOW];
    let (a, b) = ((victim + 1) % 3, (victim + 2) % 3);
    // Through a survivor, to the device on the victim.
    until_listed(&hubs[a], &all, Duration::from_secs(10)).await;
    let in_flight = tokio::spawn(mcpdev(&hubs[a], &["call", "t.slow", "n=1", "-d", SLOW, "--timeout", "60s"]));
    slow.recv_request("tools/call").await;
    let orphans: Vec<String> = all.iter().filter(|id| owner[id.as_str()] == victim).cloned().collect();
    let slow_counts = slow.respond_forever(vec![tool("t.slow")]);

    hubs[victim].running.child.kill().await.unwrap();
    let killed = Instant::now();
    let out = in_flight.await.unwrap();
    assert_eq!(out.code, 4, "the call in flight ends with an error: {out:?}");
    assert!(out.stderr.contains("went away before answering"), "a typed, explained error: {}", out.stderr);
    assert!(killed.elapsed() < Duration::from_secs(10), "ended by the hub's death, not by its 60 s timeout");

    // Every device of the dead hub answers through each survivor within the bound.
    let mut left: Vec<String> = orphans.clone();
    while !left.is_empty() {
        let mut still = Vec::new();
        for id in left {
            let tool = if id == SLOW { "t.slow" } else { "t.echo" };
            let out = mcpdev(&hubs[a], &["call", tool, "n=2", "-d", &id, "--json", "--timeout", "2s"]).await;
            if out.code != 0 {
                still.push(id);
            }
        }
        left = still;
        assert!(killed.elapsed() < TAKEOVER_BOUND || left.is_empty(), "not taken over within {TAKEOVER_BOUND:?}: {left:?}");
    }
    let took = killed.elapsed();
    eprintln!("{} device(s) of the dead hub answered again {took:?} after kill -9", orphans.len());
    let survivors = [&hubs[a], &hubs[b]];
    let after = owners(&survivors).await;
    for id in &all {
        assert!(after.contains_key(id), "{id} is served by a survivor: {after:?}");
    }
    for id in &orphans {
        let out = mcpdev(&hubs[b], &["call", if id == SLOW { "t.slow" } else { "t.echo" }, "n=3", "-d", id, "--json"]).await;
        assert_eq!(out.code, 0, "{id} through the other survivor: {out:?}");
    }
    // Devices of the survivors were not touched: onboarded once.
    for (id, c) in ids.iter().zip(&counts) {
        let expected = if orphans.contains(id) { 2 } else { 1 };
        assert_eq!(c.get("initialize"), expected, "{id}: onboarded by one hub, then once by its new one if it moved");
    }
    assert_eq!(slow_counts.get("initialize"), 1, "the slow device was onboarded again once, by one survivor");
}

/// Three hubs that admit devices (no `--approve-all`), each with its own state directory holding
/// the same hub secret (docs/cluster.md), their stderr collected; the directories.
async fn three_admitting_hubs(broker: &Mosquitto) -> (Vec<HubProcess>, Vec<tempfile::TempDir>) {
    let secret: String = (0..32).map(|i| format!("{:02x}", (i * 37 + 11) % 256)).collect();
    let (mut hubs, mut dirs) = (Vec::new(), Vec::new());
    for _ in 0..3 {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hub-secret");
        std::fs::write(&path, &secret).unwrap();
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
        let state = dir.path().to_string_lossy().into_owned();
        hubs.push(HubProcess::start_with(&["--mqtt", &broker.url()], &[("MCPDEV_STATE_DIR", &state)], true).await);
        dirs.push(dir);
    }
    (hubs, dirs)
}

/// Approvals and revocations made through one hub hold on every hub: each MQTT device is approved
/// through another hub than the one that comes to serve it; a revocation through one hub cuts the
/// device off on the hub that serves it; an activation code one hub handed out is approved
/// through another, and the device's token then opens a third.
#[tokio::test]
async fn approvals_and_revocations_through_one_hub_hold_on_every_hub() {
    let broker = Mosquitto::start().await;
    let (hubs, _dirs) = three_admitting_hubs(&broker).await;
    let ids = mqtt_ids("cc:00:00:00:00", 6);
    for (i, id) in ids.iter().enumerate() {
        let approved = mcpdev(&hubs[i % 3], &["devices", "approve", id, "--json"]).await;
        assert_eq!(approved.code, 0, "{approved:?}");
    }
    for id in &ids {
        admitted_everywhere(&hubs, id, true).await;
    }
    // The devices talk once approved: whichever hub claims each one may serve it.
    let _counts = mqtt_devices(&broker, &ids).await;
    until_listed(&hubs[0], &ids, Duration::from_secs(20)).await;
    let owner = owners(&hubs.iter().collect::<Vec<_>>()).await;
    assert_eq!(owner.len(), ids.len(), "{owner:?}");
    let (target, served_by) = ids.iter().map(|id| (id.clone(), owner[id.as_str()])).find(|(_, h)| *h != 0).expect("some device on hubs 1 or 2");

    let revoked = mcpdev(&hubs[0], &["devices", "revoke", &target, "--json"]).await;
    assert_eq!(revoked.code, 0, "{revoked:?}");
    let r = revoked.json();
    assert_eq!((r["revoked"].as_bool(), r["disconnected"].as_bool()), (Some(true), Some(true)), "cut off on the hub that serves it: {r}");
    // Gone from the hub that served it, at once; no approval left on any hub.
    assert!(!local_rows(&devices(&hubs[served_by]).await).iter().any(|d| d["device_id"] == target.as_str()), "still served after its revocation");
    let call = mcpdev(&hubs[served_by], &["call", "t.echo", "-d", &target, "--wait", "0s"]).await;
    assert_eq!(call.code, 4, "{call:?}");
    admitted_everywhere(&hubs, &target, false).await;
    for (i, hub) in hubs.iter().enumerate() {
        let call = mcpdev(hub, &["call", "t.echo", "-d", &target, "--wait", "0s"]).await;
        assert_eq!(call.code, 4, "hub {i} still reaches the revoked device: {call:?}");
    }

    // A stock device checks in with hub 2 and shows its code; the person approves the code
    // through hub 0, which never saw it; the device's token then opens hub 1.
    const STOCK: &str = "cc:00:00:00:02:01";
    let act = common::ota::check_in(&hubs[2], "hub.lan:8000", STOCK).await;
    let code = act["activation"]["code"].as_str().expect("an activation code").to_string();
    let approved = mcpdev(&hubs[0], &["devices", "approve", &code, "--json"]).await;
    assert_eq!(approved.code, 0, "{approved:?}");
    assert_eq!(approved.json()["device_id"], STOCK);
    assert!(approved.json().get("record").is_none(), "the record stays between hubs: {}", approved.stdout);
    admitted_everywhere(&hubs, STOCK, true).await;
    let again = common::ota::check_in(&hubs[1], "hub.lan:8000", STOCK).await;
    let token = again["websocket"]["token"].as_str().unwrap_or_else(|| panic!("hub 1 hands the approved binding its token: {again}")).to_string();
    let ws = common::ws::device_upgrade(&hubs[1], STOCK, common::ota::CLIENT_ID, Some(&token)).await;
    assert!(ws.is_ok(), "the token of an approval made through hub 0 opens hub 1: {:?}", ws.err());
    let (status, _) = common::ws::refused(common::ws::device_upgrade(&hubs[0], STOCK, common::ota::CLIENT_ID, Some("0123456789abcdef0123456789abcdef")).await);
    assert_eq!(status, 401, "a wrong token is still refused");
    // A code hub 1 handed out is denied through hub 0: gone from hub 1's pending requests.
    const DENIED: &str = "cc:00:00:00:02:02";
    let act = common::ota::check_in(&hubs[1], "hub.lan:8000", DENIED).await;
    let denied_code = act["activation"]["code"].as_str().expect("an activation code").to_string();
    // `devices pending` through any hub lists every hub's requests, each with its hub.
    let row_of = |out: &Outcome| out.json().as_array().and_then(|rows| rows.iter().find(|p| p["code"] == denied_code.as_str()).cloned());
    let theirs = row_of(&mcpdev(&hubs[1], &["devices", "pending", "--json"]).await).expect("hub 1 lists its own request");
    let seen_from_0 = row_of(&mcpdev(&hubs[0], &["devices", "pending", "--json"]).await).expect("hub 0 lists hub 1's request");
    assert_eq!((seen_from_0["device_id"].as_str(), seen_from_0["hub"].as_str()), (Some(DENIED), theirs["hub"].as_str()), "{seen_from_0}");
    let table = mcpdev(&hubs[0], &["devices", "pending"]).await;
    assert!(table.stdout.contains(&denied_code) && table.stdout.contains(theirs["hub"].as_str().unwrap()), "the table names the hub: {}", table.stdout);
    let denied = mcpdev(&hubs[0], &["devices", "deny", &denied_code, "--json"]).await;
    assert_eq!(denied.code, 0, "{denied:?}");
    let pending = mcpdev(&hubs[1], &["devices", "pending", "--json"]).await;
    assert!(!pending.stdout.contains(&denied_code), "{pending:?}");
    let wrong = mcpdev(&hubs[0], &["devices", "approve", "000000"]).await;
    assert_ne!(wrong.code, 0, "a code no hub handed out is refused: {wrong:?}");
    assert!(wrong.stderr.contains("no other hub of the cluster has it either"), "{}", wrong.stderr);
}

/// Polls every hub's `devices admitted` until `device` is (or is not) in it, within 5 s.
async fn admitted_everywhere(hubs: &[HubProcess], device: &str, admitted: bool) {
    for (i, hub) in hubs.iter().enumerate() {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let list = mcpdev(hub, &["devices", "admitted", "--json"]).await;
            if list.json()["devices"].as_array().unwrap().iter().any(|d| d["device_id"] == device) == admitted {
                break;
            }
            assert!(Instant::now() < deadline, "hub {i} did not learn that {device} is {}admitted", if admitted { "" } else { "no longer " });
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// Waits until `hub`'s stderr holds `n` lines with `needle`, within 10 s.
async fn logged(hub: &HubProcess, needle: &str, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    let log = hub.stderr.clone().expect("a hub started with its stderr collected");
    while log.lock().unwrap().matches(needle).count() < n {
        assert!(Instant::now() < deadline, "the hub did not log {needle:?} {n} time(s)");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The adversary on the broker: a client that is not a hub publishes admission records under the
/// cluster's prefix, to admit a device nobody approved and to revoke one that was. Records sealed
/// with another hub secret, unsealed ones and ones filed under another device are refused and
/// logged by every hub, and change nothing; a genuine old approval replayed after a revocation
/// does not undo it.
#[tokio::test]
async fn forged_admission_records_are_refused_and_logged() {
    use mcpdev::hub::admission::{Admitted, Record};
    let broker = Mosquitto::start().await;
    let (hubs, _dirs) = three_admitting_hubs(&broker).await;
    const KEPT: &str = "ce:00:00:00:00:01";
    const INTRUDER: &str = "ce:00:00:00:00:66";
    const REVOKED: &str = "ce:00:00:00:00:02";
    assert_eq!(mcpdev(&hubs[1], &["devices", "approve", KEPT]).await.code, 0);
    assert_eq!(mcpdev(&hubs[1], &["devices", "approve", REVOKED]).await.code, 0);
    admitted_everywhere(&hubs, KEPT, true).await;
    admitted_everywhere(&hubs, REVOKED, true).await;

    let url = mcpdev::mqtt::conn::BrokerUrl::parse(&broker.url()).unwrap();
    let mut c = mcpdev::mqtt::conn::connect(url.options("intruder", Duration::from_secs(30), 1 << 20), None);
    // The genuine approval of REVOKED, as the broker keeps it (to replay it later).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let genuine = loop {
        match tokio::time::timeout_at(deadline, c.events.recv()).await.expect("the retained approval").unwrap() {
            mcpdev::mqtt::conn::ConnEvent::Up => c.client.subscribe(format!("mcpdev/admission/{REVOKED}"), rumqttc::QoS::AtLeastOnce).await.unwrap(),
            mcpdev::mqtt::conn::ConnEvent::Message(p) if !p.payload.is_empty() => break p.payload.to_vec(),
            _ => {}
        }
    };
    let far_future = 4_102_444_800_000; // 2100
    let other_secret = mcpdev::hub::secret::HubSecret::from_bytes(&[0x42; 32]);
    let approve_intruder = Record {
        device_id: INTRUDER.into(),
        at_ms: far_future,
        by: "evil".into(),
        approved: Some(Admitted { device_id: INTRUDER.into(), client_id: None, via: None, approved_at_ms: far_future, key_hash: None, nonce: "00".repeat(16), challenge: String::new() }),
    };
    let revoke_kept = Record { device_id: KEPT.into(), at_ms: far_future, by: "evil".into(), approved: None };
    let forgeries = [
        (INTRUDER, approve_intruder.seal(&other_secret)),
        (KEPT, revoke_kept.seal(&other_secret)),
        // Unsealed: a record with no MAC at all.
        (KEPT, serde_json::json!({"body": serde_json::to_string(&revoke_kept).unwrap(), "mac": ""}).to_string()),
        (KEPT, serde_json::to_string(&revoke_kept).unwrap()),
        // A genuine record filed under another device.
        (KEPT, String::from_utf8(genuine.clone()).unwrap()),
    ];
    for (device, text) in &forgeries {
        c.client.publish(format!("mcpdev/admission/{device}"), rumqttc::QoS::AtLeastOnce, true, text.clone()).await.unwrap();
    }
    for hub in &hubs {
        logged(hub, "an admission record for", forgeries.len()).await;
    }
    for (i, hub) in hubs.iter().enumerate() {
        let list = mcpdev(hub, &["devices", "admitted", "--json"]).await.json();
        let ids: Vec<&str> = list["devices"].as_array().unwrap().iter().filter_map(|d| d["device_id"].as_str()).collect();
        assert!(ids.contains(&KEPT) && !ids.contains(&INTRUDER), "hub {i} took a forged record: {ids:?}");
    }

    // Revoked through hub 2; then the genuine old approval replayed: still revoked everywhere.
    assert_eq!(mcpdev(&hubs[2], &["devices", "revoke", REVOKED]).await.code, 0);
    admitted_everywhere(&hubs, REVOKED, false).await;
    c.client.publish(format!("mcpdev/admission/{REVOKED}"), rumqttc::QoS::AtLeastOnce, true, genuine).await.unwrap();
    // Every hub answers the stale record with its later revocation: the broker ends on it.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        match tokio::time::timeout_at(deadline, c.events.recv()).await.expect("the revocation republished").unwrap() {
            mcpdev::mqtt::conn::ConnEvent::Message(p) if p.topic.ends_with(REVOKED) && String::from_utf8_lossy(&p.payload).contains(r#"\"approved\":null"#) => break,
            _ => {}
        }
    }
    admitted_everywhere(&hubs, REVOKED, false).await;
}

/// The adversary: a broker client that is not a hub forges hub-to-hub requests. A request without
/// the MAC of the cluster's hub secret is dropped (the device never sees it), even in the name of
/// a live hub; a request that does not name a live hub as its sender is dropped; a flood from a
/// live hub (one holding the secret) is capped per peer, the excess answered `busy`.
#[tokio::test]
async fn forged_and_flooding_cluster_requests_are_refused() {
    let broker = Mosquitto::start().await;
    let (hubs, dirs) = three_hubs(&broker).await;
    let secret =
        mcpdev::hub::secret::HubSecret::load_or_create(&dirs[0].path().join("hub-secret")).unwrap();
    let seal = |v: &Value| {
        format!(
            "{}\n{v}",
            secret.mac(
                mcpdev::hub::secret::Purpose::ClusterRpc,
                v.to_string().as_bytes()
            )
        )
    };
    let ids = mqtt_ids("cd:00:00:00:00", 1);
    let counts = mqtt_devices(&broker, &ids).await;
    let rows = until_listed(&hubs[0], &ids, Duration::from_secs(20)).await;
    let owner_hub = rows[0]["hub"].as_str().unwrap().to_string();
    // The checks below call through the device's own hub: a call through another hub is a request
    // of that hub, and its slot (or the cancel of a watch it opened) would race the flood's count.
    let owner = &hubs[owners(&[&hubs[0], &hubs[1], &hubs[2]]).await[&ids[0]]];
    // Every live hub id, from their retained presence.
    let live = presence_records(&broker, 3).await;
    let mut c = intruder(&broker).await;
    let mut busy = 0;
    let peer = live.keys().find(|h| **h != owner_hub).unwrap().clone();
    let rpc = serde_json::json!({"op": "rpc", "device": ids[0], "method": "tools/call", "params": {"name": "t.echo", "arguments": {"n": 1}}, "timeout_ms": 5000});
    // Forged sender: dropped, signed or not.
    let forged = serde_json::json!({"c": 1, "from": "intruder", "op": rpc});
    c.client
        .publish(
            format!("mcpdev/rpc/{owner_hub}/q"),
            rumqttc::QoS::AtMostOnce,
            false,
            forged.to_string(),
        )
        .await
        .unwrap();
    c.client
        .publish(
            format!("mcpdev/rpc/{owner_hub}/q"),
            rumqttc::QoS::AtMostOnce,
            false,
            seal(&forged),
        )
        .await
        .unwrap();
    // A live hub's name without the secret's MAC (or with a wrong one): dropped.
    let unsigned = serde_json::json!({"c": 2, "from": peer, "op": rpc});
    c.client
        .publish(
            format!("mcpdev/rpc/{owner_hub}/q"),
            rumqttc::QoS::AtMostOnce,
            false,
            unsigned.to_string(),
        )
        .await
        .unwrap();
    let wrong = format!("{}\n{unsigned}", "00".repeat(32));
    c.client
        .publish(
            format!("mcpdev/rpc/{owner_hub}/q"),
            rumqttc::QoS::AtMostOnce,
            false,
            wrong,
        )
        .await
        .unwrap();
    let out = mcpdev(
        owner,
        &["call", "t.echo", "n=1", "-d", &ids[0], "--json"],
    )
    .await;
    call_ok(&out, &ids[0]);
    assert_eq!(counts[0].get("tools/call"), 1, "only the real call reached the device");

    // A flood from a live hub (signed with the secret): watches (which stay under way), 300 of them.
    c.client
        .subscribe(format!("mcpdev/rpc/{peer}/a"), rumqttc::QoS::AtMostOnce)
        .await
        .unwrap();
    for n in 0..300u64 {
        let w = serde_json::json!({"c": 1_000_000 + n, "from": peer, "op": {"op": "watch", "device": null, "traffic": false}});
        c.client
            .publish(
                format!("mcpdev/rpc/{owner_hub}/q"),
                rumqttc::QoS::AtMostOnce,
                false,
                seal(&w),
            )
            .await
            .unwrap();
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    let mut watching = 0;
    while busy + watching < 300 {
        match tokio::time::timeout_at(deadline, c.events.recv()).await.expect("an answer to every request").unwrap() {
            mcpdev::mqtt::conn::ConnEvent::Message(p) if p.topic.ends_with("/a") => {
                // Answers are sealed too: their MAC, a newline, the answer.
                let text = String::from_utf8_lossy(&p.payload);
                let (mac, answer) = text.split_once('\n').expect("a sealed answer");
                assert!(
                    secret.verify_mac(
                        mcpdev::hub::secret::Purpose::ClusterRpc,
                        answer.as_bytes(),
                        mac
                    ),
                    "{text}"
                );
                let v: Value = serde_json::from_str(answer).unwrap();
                if v["error"]["kind"] == "busy" {
                    busy += 1;
                } else if v["ok"].get("watching").is_some() {
                    watching += 1;
                }
            }
            _ => {}
        }
    }
    // The peer hub may have a request of its own under way here at the same moment (an on-demand
    // lookup of a device, sent in the background), which takes a slot of its 256.
    assert_eq!(watching + busy, 300);
    assert!((250..=256).contains(&watching), "256 under way per peer, the rest refused: {watching} watching, {busy} busy");
    // A cancelled request gives its slot back: the peer cancels every watch it has under way, and
    // its next request is served, not refused (a cancel used to leak the slot for good).
    for n in 0..300u64 {
        let cancel = serde_json::json!({"c": 1_000_000 + n, "from": peer, "cancel": true});
        c.client
            .publish(format!("mcpdev/rpc/{owner_hub}/q"), rumqttc::QoS::AtMostOnce, false, seal(&cancel))
            .await
            .unwrap();
    }
    for n in 0..250u64 {
        let w = serde_json::json!({"c": 2_000_000 + n, "from": peer, "op": {"op": "watch", "device": null, "traffic": false}});
        c.client
            .publish(format!("mcpdev/rpc/{owner_hub}/q"), rumqttc::QoS::AtMostOnce, false, seal(&w))
            .await
            .unwrap();
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    let mut again = HashSet::new();
    while again.len() < 250 {
        match tokio::time::timeout_at(deadline, c.events.recv()).await.expect("an answer to every new watch").unwrap() {
            mcpdev::mqtt::conn::ConnEvent::Message(p) if p.topic.ends_with("/a") => {
                let text = String::from_utf8_lossy(&p.payload);
                let (_, answer) = text.split_once('\n').expect("a sealed answer");
                let v: Value = serde_json::from_str(answer).unwrap();
                let id = v["id"].as_u64().unwrap_or_default();
                if id >= 2_000_000 {
                    assert_ne!(v["error"]["kind"], "busy", "a slot of a cancelled request was not given back: {v}");
                    again.insert(id);
                }
            }
            _ => {}
        }
    }
    // The hub still serves everyone else.
    let out = mcpdev(owner, &["call", "t.echo", "n=2", "-d", &ids[0], "--json"]).await;
    call_ok(&out, &ids[0]);
}

/// Calls `t.echo` on `id` through `hub` until it answers, within `limit`.
async fn until_answers(hub: &HubProcess, id: &str, limit: Duration, what: &str) {
    let deadline = Instant::now() + limit;
    loop {
        let out = mcpdev(hub, &["call", "t.echo", "n=1", "-d", id, "--json", "--timeout", "2s"]).await;
        if out.code == 0 {
            return call_ok(&out, id);
        }
        if Instant::now() >= deadline {
            panic!("{what}: {id} did not answer within {limit:?}: {out:?}; hub {} lists {:?}", hub.info["hub_id"], devices(hub).await);
        }
    }
}

/// Waits for a claim of the watched device by `hub_id` (claims come in broker order).
async fn until_claimed_by(claims: &mut common::mqtt::Session, hub_id: &str) {
    loop {
        let m = claims.recv().await;
        // A claim is `<MAC>\n<hub>` (mqtt::cluster_seal).
        if m["payload"].as_str().is_some_and(|p| p.ends_with(&format!("\n{hub_id}"))) {
            return;
        }
    }
}

/// A hub cut off from the broker while it serves a device (its socket closes, so the broker
/// publishes its will): the survivor takes the device over. Then the hub comes back and claims
/// its devices again, the last claim, which wins everywhere. The device stays served, by one
/// hub, and answers through both. (It was served by nobody: the returning hub dropped its link
/// when the survivor's retained claim came back first, and the survivor let go on seeing the
/// returning hub's claim. 50 devices of a 100,000-device run were lost so.)
#[tokio::test]
async fn a_hub_cut_off_from_the_broker_and_back_leaves_its_devices_served() {
    const DEV: &str = "cc:00:00:00:00:01";
    let broker = Mosquitto::start().await;
    let relays = [common::relay::Relay::start(broker.port).await, common::relay::Relay::start(broker.port).await];
    let urls = [relays[0].url(), relays[1].url()];
    let (hubs, _dirs) = HubProcess::cluster_of(&[&["--mqtt", &urls[0]], &["--mqtt", &urls[1]]], false).await;
    let mut dev = MqttDevice::connect(&broker.url(), DEV).await;
    dev.hello().await;
    let counts = dev.respond_forever(vec![tool("t.echo")]);
    until_listed(&hubs[0], &[DEV.to_string()], Duration::from_secs(20)).await;
    let back = owners(&hubs.iter().collect::<Vec<_>>()).await[DEV];
    let survivor = 1 - back;
    let hub_id = |i: usize| hubs[i].info["hub_id"].as_str().unwrap().to_string();
    let mut claims = common::mqtt::connect_once(broker.port, "claims-watcher", None).await.unwrap();
    let key = mcpdev::mqtt::topics::key_for(DEV).unwrap();
    assert!(claims.subscribe(&format!("mcpdev/claims/{key}")).await.starts_with("Success"));
    until_claimed_by(&mut claims, &hub_id(back)).await;

    relays[back].cut();
    until_claimed_by(&mut claims, &hub_id(survivor)).await;
    until_answers(&hubs[survivor], DEV, Duration::from_secs(10), "taken over by the survivor").await;

    relays[back].open();
    until_claimed_by(&mut claims, &hub_id(back)).await;
    until_answers(&hubs[back], DEV, Duration::from_secs(15), "served again by the hub that came back").await;
    until_answers(&hubs[survivor], DEV, Duration::from_secs(15), "through the survivor, served by the hub that came back").await;
    let after = owners(&hubs.iter().collect::<Vec<_>>()).await;
    assert_eq!(after.get(DEV), Some(&back), "served by the hub whose claim was last: {after:?}");
    assert!(counts.get("initialize") >= 2, "onboarded by its hub, then asked by the survivor: {}", counts.get("initialize"));
}

/// A hub's claim that reaches the broker after the hub let the device go (behind a broker that
/// stalls, or sent again by its client after a reconnect) is the last claim, so it wins on every
/// hub and the others let go of the device: the hub then serves it, asking it first. It left the
/// device on no hub: 2 to 16 MQTT devices of a 100,000-device run, whose Mosquitto stalled past
/// the hubs' keepalive while the fleet joined. Here the late claim is published for the hub, as
/// the broker would deliver it, after another hub's claim had taken the device.
#[tokio::test]
async fn a_hubs_own_claim_that_comes_back_late_is_served_not_left() {
    const DEV: &str = "cc:00:00:00:00:02";
    let broker = Mosquitto::start().await;
    let (hubs, _dirs) = HubProcess::cluster(1, &["--mqtt", &broker.url()], false).await;
    let hub = &hubs[0];
    let mut dev = MqttDevice::connect(&broker.url(), DEV).await;
    dev.hello().await;
    let counts = dev.respond_forever(vec![tool("t.echo")]);
    until_answers(hub, DEV, Duration::from_secs(20), "onboarded").await;

    let url = mcpdev::mqtt::conn::BrokerUrl::parse(&broker.url()).unwrap();
    let mut c = mcpdev::mqtt::conn::connect(url.options("late-claims", Duration::from_secs(30), 1 << 20), None);
    while !matches!(c.events.recv().await, Some(mcpdev::mqtt::conn::ConnEvent::Up)) {}
    let topic = format!("mcpdev/claims/{}", mcpdev::mqtt::topics::key_for(DEV).unwrap());
    // Another hub's claim (sealed with the cluster's secret, as a hub's): this hub lets the device go.
    let (secret, key) = (common::cluster_secret(), mcpdev::mqtt::topics::key_for(DEV).unwrap());
    c.client.publish(&topic, rumqttc::QoS::AtLeastOnce, true, mcpdev::mqtt::cluster_seal::seal_claim(&secret, &key, "0123456789ab")).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while devices(hub).await.iter().any(|d| d["device_id"] == DEV && d.get("session_id").is_some()) {
        assert!(Instant::now() < deadline, "the hub kept serving a device another hub claimed after it");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let asked = counts.get("initialize");
    // Then its own claim comes back, the last one.
    c.client.publish(&topic, rumqttc::QoS::AtLeastOnce, true, mcpdev::mqtt::cluster_seal::seal_claim(&secret, &key, hub.info["hub_id"].as_str().unwrap())).await.unwrap();
    until_answers(hub, DEV, Duration::from_secs(10), "served again once its own claim came back last").await;
    assert!(counts.get("initialize") > asked, "the device was asked again: {} then {}", asked, counts.get("initialize"));
}

/// A broker client that is not a hub, connected (within 10 s).
async fn intruder(broker: &Mosquitto) -> mcpdev::mqtt::conn::Connection {
    let url = mcpdev::mqtt::conn::BrokerUrl::parse(&broker.url()).unwrap();
    let mut c = mcpdev::mqtt::conn::connect(url.options("intruder", Duration::from_secs(30), 1 << 20), None);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !matches!(tokio::time::timeout_at(deadline, c.events.recv()).await.expect("the intruder connects").unwrap(), mcpdev::mqtt::conn::ConnEvent::Up) {}
    c
}

/// The presence record of every live hub (retained on the broker), by hub id, within 10 s.
async fn presence_records(broker: &Mosquitto, n: usize) -> HashMap<String, Value> {
    let url = mcpdev::mqtt::conn::BrokerUrl::parse(&broker.url()).unwrap();
    let mut c = mcpdev::mqtt::conn::connect(url.options("presence-reader", Duration::from_secs(30), 1 << 20), None);
    let mut records = HashMap::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while records.len() < n {
        match tokio::time::timeout_at(deadline, c.events.recv()).await.expect("every hub's presence record").unwrap() {
            mcpdev::mqtt::conn::ConnEvent::Up => c.client.subscribe("mcpdev/hubs/+", rumqttc::QoS::AtMostOnce).await.unwrap(),
            mcpdev::mqtt::conn::ConnEvent::Message(p) if !p.payload.is_empty() => {
                // `<MAC>\n<record>` (mqtt::cluster_seal).
                let record = p.payload.splitn(2, |b| *b == b'\n').nth(1).expect("a sealed presence record");
                records.insert(p.topic.trim_start_matches("mcpdev/hubs/").to_string(), serde_json::from_slice(record).unwrap());
            }
            _ => {}
        }
    }
    records
}

/// `--cluster-link`: hubs that offer a direct link get each other's requests on it, not through
/// the broker, and every device still answers through every hub (a watch too), each call
/// reaching its device once.
#[tokio::test]
async fn requests_between_hubs_take_the_direct_link_when_offered() {
    let broker = Mosquitto::start().await;
    let (hubs, _dirs) = HubProcess::cluster(3, &["--mqtt", &broker.url(), "--cluster-link", "127.0.0.1:0"], false).await;
    let ids = mqtt_ids("ce:00:00:00:00", 4);
    let counts = mqtt_devices(&broker, &ids).await;
    // Each hub advertises its link, signed; its `serve --json` line says where it listens.
    let records = presence_records(&broker, 3).await;
    for hub in &hubs {
        let id = hub.info["hub_id"].as_str().unwrap();
        assert_eq!(records[id]["link"]["addr"], hub.info["cluster_link"], "{records:?}");
    }
    for hub in &hubs {
        until_listed(hub, &ids, Duration::from_secs(20)).await;
    }
    let owner = owners(&hubs.iter().collect::<Vec<_>>()).await;
    let mut through_others = [0; 3];
    for (i, hub) in hubs.iter().enumerate() {
        for id in &ids {
            let out = mcpdev(hub, &["call", "t.echo", "n=1", "-d", id, "--json"]).await;
            call_ok(&out, id);
            if owner[id] != i {
                through_others[i] += 1;
            }
        }
    }
    for (d, id) in ids.iter().enumerate() {
        assert_eq!(counts[d].get("tools/call"), 3, "{id}: each call reached the device once");
    }
    // Every request one hub sent another went on a link (they were up long before the calls:
    // a hub connects as soon as it sees the other's presence).
    for (i, hub) in hubs.iter().enumerate() {
        let link = hub.metric("mcpdev_cluster_requests_total{path=\"link\"}").await;
        let via_broker = hub.metric("mcpdev_cluster_requests_total{path=\"broker\"}").await;
        assert!(link >= f64::from(through_others[i]), "hub {i}: {link} requests on the link, {via_broker} through the broker, {} calls to other hubs' devices", through_others[i]);
    }
    // A watch of another hub's device: its events come back on the link too.
    let (id, i) = ids.iter().find_map(|id| (owner[id] != 0).then(|| (id.clone(), owner[id]))).expect("a device on another hub");
    let mut watch = spawn_mcpdev(&["watch", "--json", "--traffic", "-d", &id], &[("MCPDEV_HUB", hubs[0].host_url.as_str()), ("MCPDEV_RUNTIME_DIR", hubs[0].runtime_dir.as_str())]);
    let mut lines = BufReader::new(watch.child.stdout.take().unwrap()).lines();
    let first: Value = serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
    assert_eq!(first["event"], "watching", "{first}");
    let before = hubs[0].metric("mcpdev_cluster_requests_total{path=\"link\"}").await;
    assert!(before >= f64::from(through_others[0]) + 1.0, "the watch went on the link too: {before}");
    call_ok(&mcpdev(&hubs[i], &["call", "t.echo", "n=77", "-d", &id, "--json"]).await, &id);
    let ev = watched(&mut lines, |v| v["payload"]["params"]["arguments"]["n"] == 77).await;
    assert_eq!(ev["device_id"].as_str(), Some(id.as_str()));
    watch.child.kill().await.unwrap();
}

/// The adversary on the network: a client that is not a hub reaches a hub's link. Without the
/// hub secret's proof bound to its own TLS session it is cut off (a proof made with the secret
/// for another session too), so is a flood of connections beyond the per-address cap, and a
/// presence record that advertises a link without the secret's MAC is not taken. Each is
/// logged and counted; the hubs' own link keeps working.
#[tokio::test]
async fn a_stranger_on_the_cluster_link_is_refused_and_logged() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let broker = Mosquitto::start().await;
    let (hubs, dirs) = HubProcess::cluster(2, &["--mqtt", &broker.url(), "--cluster-link", "127.0.0.1:0"], true).await;
    let secret = mcpdev::hub::secret::HubSecret::load_or_create(&dirs[0].path().join("hub-secret")).unwrap();
    let records = presence_records(&broker, 2).await;
    let (a, b) = (hubs[0].info["hub_id"].as_str().unwrap().to_string(), hubs[1].info["hub_id"].as_str().unwrap().to_string());
    let link = &records[&b]["link"];
    let addr: std::net::SocketAddr = link["addr"].as_str().unwrap().parse().unwrap();
    let pin = mcpdev::tls::parse_fingerprint(link["fp"].as_str().unwrap()).unwrap();
    let tls = mcpdev::tls::client::build(&mcpdev::tls::client::Trust { pin: Some(pin), ..Default::default() }, &[b"mcpdev-hub-link/1"]).unwrap();
    // Sends `hello` as the first frame over a fresh TLS session; whether the hub closed it then.
    let attempt = |hello: Value| {
        let tls = tls.clone();
        async move {
            let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
            let name = rustls::pki_types::ServerName::try_from("mcpdev-hub-link").unwrap();
            let mut s = tokio_rustls::TlsConnector::from(tls).connect(name, tcp).await.expect("TLS with the advertised certificate");
            let text = hello.to_string();
            s.write_all(&(text.len() as u32).to_be_bytes()).await.unwrap();
            s.write_all(text.as_bytes()).await.unwrap();
            s.flush().await.unwrap();
            let mut byte = [0u8; 1];
            let read = tokio::time::timeout(Duration::from_secs(10), s.read(&mut byte)).await.expect("the hub ends an unproven connection");
            assert!(matches!(read, Ok(0) | Err(_)), "the hub answered a stranger: {read:?}");
        }
    };
    // No secret: a made-up proof, as hub A.
    attempt(serde_json::json!({"from": a, "proof": "00".repeat(32)})).await;
    logged(&hubs[1], "a proof that does not verify", 1).await;
    // The secret, but a proof made for another session (as a proof seen elsewhere would be).
    let replayed = secret.mac(mcpdev::hub::secret::Purpose::ClusterLink, format!("hello\n{a}\n{b}\n{}", "00".repeat(32)).as_bytes());
    attempt(serde_json::json!({"from": a, "proof": replayed})).await;
    logged(&hubs[1], "a proof that does not verify", 2).await;
    assert!(hubs[1].metric("mcpdev_refusals_total{reason=\"cluster_link\"}").await >= 2.0, "refusals are counted");
    // A flood of connections that never prove anything: beyond 8 from one address, refused at once.
    let mut held = Vec::new();
    for _ in 0..8 {
        held.push(tokio::net::TcpStream::connect(addr).await.unwrap());
    }
    let mut ninth = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut byte = [0u8; 1];
    let read = tokio::time::timeout(Duration::from_secs(5), ninth.read(&mut byte)).await.expect("the ninth connection is closed at once");
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    logged(&hubs[1], "too many connections at once", 1).await;
    // The held ones are cut off by the deadline to prove the hub secret.
    for mut s in held {
        let read = tokio::time::timeout(Duration::from_secs(10), s.read(&mut byte)).await.expect("an unproven connection ends by its deadline");
        assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    }
    logged(&hubs[1], "did not prove the hub secret within", 1).await;
    // A broker client that is not a hub advertises a link for hub B without the secret's MAC.
    let c = intruder(&broker).await;
    let forged = serde_json::json!({"hub": b, "link": {"addr": "127.0.0.1:9", "fp": "ab".repeat(32), "mac": "00".repeat(32)}});
    c.client.publish(format!("mcpdev/hubs/{b}"), rumqttc::QoS::AtLeastOnce, false, forged.to_string()).await.unwrap();
    logged(&hubs[0], &format!("refused the presence of hub {b:?} on this broker (an unsigned presence"), 1).await;
    // Sealed as a presence record, but by another cluster's hub: refused the same way.
    let other = mcpdev::hub::secret::HubSecret::from_bytes(&[0x42; 32]);
    let sealed = mcpdev::mqtt::cluster_seal::seal_presence(&other, &b, &forged.to_string());
    c.client.publish(format!("mcpdev/hubs/{b}"), rumqttc::QoS::AtLeastOnce, false, sealed).await.unwrap();
    logged(&hubs[0], "a presence whose MAC does not verify", 1).await;
    // The hubs' own link still carries their requests: a device on B, called through A.
    let ids = mqtt_ids("cf:00:00:00:00", 4);
    let _counts = mqtt_devices(&broker, &ids).await;
    until_listed(&hubs[0], &ids, Duration::from_secs(20)).await;
    let owner = owners(&[&hubs[0], &hubs[1]]).await;
    let on_b = ids.iter().find(|id| owner[*id] == 1).expect("a device on hub B");
    let before = hubs[0].metric("mcpdev_cluster_requests_total{path=\"link\"}").await;
    let out = mcpdev(&hubs[0], &["call", "t.echo", "n=1", "-d", on_b, "--json"]).await;
    call_ok(&out, on_b);
    assert!(hubs[0].metric("mcpdev_cluster_requests_total{path=\"link\"}").await > before, "the call went on the link");
}
