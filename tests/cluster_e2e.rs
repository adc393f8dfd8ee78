//! The cluster as one (issue 26), with real processes: Mosquitto (one broker per test) and three
//! `mcpdev serve` on it. MQTT devices are spread among the hubs by their claims, one WebSocket
//! device is attached to one hub; everything is reached through any hub. Then a hub is killed
//! (`kill -9`): its devices answer through the survivors within the bound, a call in flight ends
//! with a typed error, and no device is ever served by two hubs. A hub cut off from the broker
//! and back, or whose own claim comes back late, leaves its devices served. Admission across
//! hubs is tested in `cluster_admission_e2e.rs`, requests between hubs in `cluster_requests_e2e.rs`.

mod common;

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use common::cluster::{call_ok, devices, local_rows, mqtt_devices, mqtt_ids, owners, three_hubs, until_listed, watched};
use common::fake_device::tool;
use common::mqtt::{Mosquitto, MqttDevice};
use common::{HubProcess, mcp_sdk_client, mcpdev, spawn_mcpdev};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};

/// How soon the survivors take over a dead hub's MQTT devices (docs/cluster.md).
const TAKEOVER_BOUND: Duration = Duration::from_secs(5);

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
