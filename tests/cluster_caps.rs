//! The cluster beyond its caps (issue 36): three hubs on Mosquitto, each serving more devices
//! than its index lists (`--cluster-index-max 2`) and than stand-ins are kept
//! (`--cluster-stand-ins 2`). The last device of each hub (which no index lists) is reached from
//! every other hub, through the CLI and through `/mcp`'s fleet tools; `devices` says how many it
//! leaves out and where; the hub that leaves devices out logs it. The adversary, a broker client
//! that is not a hub, cannot list a device nor answer a hub's lookup.

mod common;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use common::mqtt::Mosquitto;
use common::{HubProcess, mcp_sdk_client, mcpdev, spawn_mcpdev};
use serde_json::{Value, json};

/// WebSocket devices on each hub (more than either cap).
const PER_HUB: usize = 4;

fn device(hub: usize, n: usize) -> String {
    format!("ce:00:00:00:{hub:02x}:{n:02x}")
}

/// `devices --json` through `hub`, and what it said on stderr.
async fn listing(hub: &HubProcess) -> (Vec<Value>, String) {
    let out = mcpdev(hub, &["devices", "--json"]).await;
    assert_eq!(out.code, 0, "{out:?}");
    (
        out.json().as_array().cloned().unwrap_or_default(),
        out.stderr,
    )
}

/// Waits (polling, within `limit`) until `check` holds of a hub's listing; the listing.
async fn until(
    hub: &HubProcess,
    limit: Duration,
    what: &str,
    check: impl Fn(&[Value], &str) -> bool,
) -> (Vec<Value>, String) {
    let deadline = Instant::now() + limit;
    loop {
        let (rows, stderr) = listing(hub).await;
        if check(&rows, &stderr) {
            return (rows, stderr);
        }
        assert!(
            Instant::now() < deadline,
            "{what} within {limit:?}: {rows:#?}\n{stderr}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn logged(hub: &HubProcess) -> String {
    hub.stderr
        .as_ref()
        .map(|s| s.lock().unwrap().clone())
        .unwrap_or_default()
}

async fn until_logged(hub: &HubProcess, needle: &str) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while !logged(hub).contains(needle) {
        assert!(
            Instant::now() < deadline,
            "the hub did not log {needle:?}:\n{}",
            logged(hub)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn every_device_is_reached_from_every_hub_beyond_every_cap() {
    let broker = Mosquitto::start().await;
    let caps = [
        "--mqtt",
        &broker.url(),
        "--cluster-index-max",
        "2",
        "--cluster-stand-ins",
        "2",
        "--mcp-fleet-threshold",
        "4",
    ];
    let (hubs, _dirs) = HubProcess::cluster(3, &caps, true).await;
    let count = PER_HUB.to_string();
    let _sims: Vec<_> = (0..3)
        .map(|i| {
            spawn_mcpdev(
                &[
                    "sim",
                    "--url",
                    &hubs[i].device_url,
                    "--count",
                    &count,
                    "--device-id",
                    &device(i, 1),
                ],
                &[],
            )
        })
        .collect();

    // Each hub serves its own devices; its id is the `hub` of its own rows.
    let mut hub_ids = Vec::new();
    for (i, hub) in hubs.iter().enumerate() {
        let mine: HashSet<String> = (1..=PER_HUB).map(|n| device(i, n)).collect();
        let (rows, _) = until(
            hub,
            Duration::from_secs(30),
            "its own devices ready",
            |rows, _| {
                rows.iter()
                    .filter(|d| {
                        d.get("session_id").is_some()
                            && d["phase"] == "ready"
                            && mine.contains(d["device_id"].as_str().unwrap_or_default())
                    })
                    .count()
                    == PER_HUB
            },
        )
        .await;
        hub_ids.push(
            rows.iter().find(|d| d.get("session_id").is_some()).unwrap()["hub"]
                .as_str()
                .unwrap()
                .to_string(),
        );
    }
    for hub in &hubs {
        until_logged(hub, "more devices than its cluster index lists").await;
    }

    // Through each hub: its own 4 and the 2 each other hub lists; the rest said, never hidden.
    for (j, hub) in hubs.iter().enumerate() {
        let (rows, stderr) = until(
            hub,
            Duration::from_secs(15),
            "every index and what it leaves out",
            |rows, stderr| {
                rows.len() == PER_HUB + 4
                    && (0..3)
                        .filter(|i| *i != j)
                        .all(|i| stderr.contains(&format!("2 more devices on hub {}", hub_ids[i])))
            },
        )
        .await;
        for i in (0..3).filter(|i| *i != j) {
            let listed: Vec<&str> = rows
                .iter()
                .filter(|d| d["hub"] == hub_ids[i].as_str())
                .filter_map(|d| d["device_id"].as_str())
                .collect();
            assert_eq!(
                listed,
                [device(i, 1), device(i, 2)],
                "hub {i} lists its first devices by id, not by arrival: {stderr}"
            );
        }
    }

    // The last device of each hub, from every other hub, through the CLI.
    #[allow(clippy::needless_range_loop, reason = "i names a hub and its id alike")]
    for i in 0..3 {
        let last = device(i, PER_HUB);
        for j in (0..3).filter(|j| *j != i) {
            let status = mcpdev(
                &hubs[j],
                &["call", "self.get_device_status", "-d", &last, "--json"],
            )
            .await;
            assert_eq!(status.code, 0, "{last} through hub {j}: {status:?}");
            assert!(
                status.json()["content"][0]["text"]
                    .as_str()
                    .unwrap_or_default()
                    .contains("audio_speaker"),
                "{status:?}"
            );
            let hello = mcpdev(&hubs[j], &["hello", "-d", &last, "--json"]).await;
            assert_eq!(
                hello.json()["hub"].as_str(),
                Some(hub_ids[i].as_str()),
                "{last} is served by hub {i}: {hello:?}"
            );
            // By a prefix that only it matches, too.
            let bare = last.replace(':', "");
            let by_prefix = mcpdev(&hubs[j], &["hello", "-d", &bare, "--json"]).await;
            assert_eq!(
                by_prefix.json()["device_id"].as_str(),
                Some(last.as_str()),
                "{by_prefix:?}"
            );
        }
    }

    // Through /mcp's fleet tools (the official Python SDK): found, listed and called, the last
    // and the next-to-last of each other hub: more devices than the 2 stand-ins kept.
    #[allow(clippy::needless_range_loop, reason = "j names a hub and its index alike")]
    for j in 0..3 {
        let mut steps = Vec::new();
        let wanted: Vec<String> = (0..3)
            .filter(|i| *i != j)
            .flat_map(|i| [device(i, PER_HUB), device(i, PER_HUB - 1)])
            .collect();
        for id in &wanted {
            steps.push(json!({"op": "call", "name": "search_devices", "arguments": {"query": id}}));
            steps.push(
                json!({"op": "call", "name": "list_device_tools", "arguments": {"device": id}}),
            );
            steps.push(json!({"op": "call", "name": "call_device_tool", "arguments": {"device": id, "tool": "self.get_device_status"}}));
        }
        steps.push(json!({"op": "call", "name": "search_devices", "arguments": {}}));
        let lines =
            mcp_sdk_client(&format!("{}/mcp", hubs[j].host_url), &Value::Array(steps)).await;
        assert_eq!(lines[0]["op"], "connect", "{lines:?}");
        for (k, id) in wanted.iter().enumerate() {
            let (found, tools, called) = (&lines[1 + 3 * k], &lines[2 + 3 * k], &lines[3 + 3 * k]);
            assert_eq!(
                found["result"]["structuredContent"]["devices"][0]["device_id"].as_str(),
                Some(id.as_str()),
                "search finds {id} through hub {j}: {found}"
            );
            assert!(
                tools["result"]["structuredContent"]
                    .to_string()
                    .contains("self.get_device_status"),
                "{id}'s tools through hub {j}: {tools}"
            );
            assert!(
                called["result"]["content"][0]["text"]
                    .as_str()
                    .unwrap_or_default()
                    .contains("audio_speaker"),
                "{id} called through hub {j}: {called}"
            );
        }
        let everyone = &lines.last().unwrap()["result"]["structuredContent"];
        assert_eq!(
            everyone["connected"].as_u64(),
            Some(3 * PER_HUB as u64),
            "the fleet counts every device of the cluster: {everyone}"
        );
        let unlisted: Vec<(String, u64)> = everyone["unlisted"]
            .as_array()
            .unwrap()
            .iter()
            .map(|u| {
                (
                    u["hub"].as_str().unwrap().to_string(),
                    u["devices"].as_u64().unwrap(),
                )
            })
            .collect();
        let mut expected: Vec<(String, u64)> = (0..3)
            .filter(|i| *i != j)
            .map(|i| (hub_ids[i].clone(), 2))
            .collect();
        expected.sort();
        assert_eq!(
            unlisted, expected,
            "search says which hubs leave devices out: {everyone}"
        );
    }

    // `call --url` through one hub's /mcp to another hub's last device (the CLI's fleet route).
    let last = device(2, PER_HUB);
    let name = format!(
        "{}.self.get_device_status",
        mcpdev::bridge::naming::prefix_for(&last, &Default::default())
    );
    let url = format!("{}/mcp", hubs[0].host_url);
    let out = mcpdev(&hubs[0], &["call", &name, "--url", &url, "--json"]).await;
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("audio_speaker"), "{out:?}");
}

/// The adversary: a broker client that is not a hub publishes an index shard (under a live hub's
/// name, without the secret's MAC) listing a device no hub serves, and sprays answers at a hub
/// while it looks up a device no index lists. Neither is taken: the device stays unknown, the
/// lookup finds the real device, and each refusal is logged.
#[tokio::test]
async fn a_broker_client_that_is_not_a_hub_cannot_list_devices_or_answer_lookups() {
    let broker = Mosquitto::start().await;
    let caps = ["--mqtt", &broker.url(), "--cluster-index-max", "1"];
    let (hubs, _dirs) = HubProcess::cluster(2, &caps, true).await;
    let _sim = spawn_mcpdev(
        &[
            "sim",
            "--url",
            &hubs[1].device_url,
            "--count",
            "2",
            "--device-id",
            &device(1, 1),
        ],
        &[],
    );
    let (rows, _) = until(
        &hubs[1],
        Duration::from_secs(30),
        "its devices ready",
        |rows, _| rows.iter().filter(|d| d["phase"] == "ready").count() == 2,
    )
    .await;
    let victim = rows[0]["hub"].as_str().unwrap().to_string();
    until(
        &hubs[0],
        Duration::from_secs(15),
        "hub 1's index",
        |_, stderr| stderr.contains("1 more devices on hub"),
    )
    .await;

    let url = mcpdev::mqtt::conn::BrokerUrl::parse(&broker.url()).unwrap();
    let mut c = mcpdev::mqtt::conn::connect(
        url.options("intruder", Duration::from_secs(30), 1 << 20),
        None,
    );
    // The live hubs' ids, from their retained presence: hub 0's is the other one.
    let mut live = HashSet::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while live.len() < 2 {
        match tokio::time::timeout_at(deadline, c.events.recv())
            .await
            .expect("two presence records")
            .unwrap()
        {
            mcpdev::mqtt::conn::ConnEvent::Up => c
                .client
                .subscribe("mcpdev/hubs/+", rumqttc::QoS::AtLeastOnce)
                .await
                .unwrap(),
            mcpdev::mqtt::conn::ConnEvent::Message(p) if !p.payload.is_empty() => {
                live.insert(p.topic.trim_start_matches("mcpdev/hubs/").to_string());
            }
            _ => {}
        }
    }
    let asker = live.into_iter().find(|h| *h != victim).unwrap();
    const FAKE: &str = "ce:ee:ee:ee:ee:ee";
    let mac = mcpdev::wire::identity::parse_mac(FAKE).unwrap();
    let shard = mcpdev::mqtt::presence::shard_of(&mac);
    let body = json!({"hub": victim, "shard": shard, "seq": u64::MAX, "left_out": 0, "devices": [[FAKE, "websocket", "ready", 3, 1]]});
    let forged = format!("{}\n{body}", "ab".repeat(32));
    c.client
        .publish(
            format!("mcpdev/index/{victim}/{shard}"),
            rumqttc::QoS::AtLeastOnce,
            false,
            forged,
        )
        .await
        .unwrap();
    until_logged(&hubs[0], "an index shard filed as hub").await;
    let out = mcpdev(&hubs[0], &["hello", "-d", FAKE, "--wait", "0s"]).await;
    assert_eq!(out.code, 4, "a forged index lists nothing: {out:?}");
    assert!(
        !listing(&hubs[0])
            .await
            .0
            .iter()
            .any(|d| d["device_id"] == FAKE)
    );

    // Answers sprayed at hub 0 while it looks up hub 1's unlisted device: every guessable id.
    let spray = {
        let client = c.client.clone();
        let topic = format!("mcpdev/rpc/{asker}/a");
        tokio::spawn(async move {
            for id in 1..2000u64 {
                let fake = json!({"id": id, "ok": {"device_id": FAKE, "phase": "ready", "transport": "websocket", "tools": []}});
                let _ = client
                    .publish(
                        topic.clone(),
                        rumqttc::QoS::AtMostOnce,
                        false,
                        fake.to_string(),
                    )
                    .await;
            }
        })
    };
    let last = device(1, 2);
    let hello = mcpdev(&hubs[0], &["hello", "-d", &last, "--json"]).await;
    assert_eq!(hello.code, 0, "{hello:?}");
    assert_eq!(
        hello.json()["device_id"].as_str(),
        Some(last.as_str()),
        "the real device, not a forged answer: {hello:?}"
    );
    spray.await.unwrap();
    until_logged(&hubs[0], "an answer that does not carry a valid MAC").await;
}

/// Mosquitto keeps at most 1,000 QoS 1 messages queued for a client (its default
/// `max_queued_messages`) beyond the 20 in flight, and drops the rest, retained ones included.
/// A hub that joins (or comes back to) a cluster whose other hub has claimed 1,500 devices still
/// learns every claim: an uplink of any of those devices is passed on to its owner, never
/// claimed. (Subscribed at QoS 1, a hub learned 1,020 of 19,000 claims, and took devices that
/// were served elsewhere.)
#[tokio::test]
async fn a_hub_learns_every_claim_of_a_big_cluster_on_mosquitto_as_configured_by_default() {
    use mcpdev::mqtt::topics;
    use rumqttc::QoS;
    const N: usize = 1500;
    const OTHER: &str = "0123456789ab";
    let broker = Mosquitto::start().await;
    let keys: Vec<String> = (0..N).map(|i| topics::key_for(&format!("cf:00:00:00:{:02x}:{:02x}", i / 256, i % 256)).unwrap()).collect();
    // Another hub, alive, that has claimed every one of them (retained, as hubs do).
    let seed = common::mqtt::connect_once(broker.port, "seed", None).await.unwrap();
    // Sealed with the cluster's hub secret, as that hub would.
    let secret = common::cluster_secret();
    let presence = mcpdev::mqtt::cluster_seal::seal_presence(&secret, OTHER, &json!({"hub": OTHER}).to_string());
    seed.client.publish(format!("{}{OTHER}", topics::HUBS), QoS::AtLeastOnce, true, presence).await.unwrap();
    for k in &keys {
        seed.client.publish(format!("{}{k}", topics::CLAIMS), QoS::AtLeastOnce, true, mcpdev::mqtt::cluster_seal::seal_claim(&secret, k, OTHER)).await.unwrap();
    }
    let mut watch = common::mqtt::connect_once(broker.port, "watcher", None).await.unwrap();
    // (`subscribe` skips what comes before its SUBACK: the retained claims come after the last.)
    watch.subscribe(&format!("{}{OTHER}/+", topics::FWD)).await;
    watch.subscribe(&format!("{}+", topics::CLAIMS)).await;
    let mut claimed = HashSet::new();
    while claimed.len() < N {
        let m = watch.recv().await;
        assert!(m["payload"].as_str().unwrap().ends_with(&format!("\n{OTHER}")), "{m}");
        claimed.insert(m["topic"].as_str().unwrap().to_string());
    }

    // A hub joins, then every device says hello.
    let (_hub, _dirs) = HubProcess::cluster(1, &["--mqtt", &broker.url()], false).await;
    let devices = common::mqtt::connect_once(broker.port, "devices", None).await.unwrap();
    for k in &keys {
        let hello = json!({"type":"hello","version":3,"transport":"udp","features":{"mcp":true}}).to_string();
        devices.client.publish(topics::uplink(k), QoS::AtMostOnce, false, hello).await.unwrap();
    }
    let mut forwarded = HashSet::new();
    while forwarded.len() < N {
        let m = watch.recv().await;
        let topic = m["topic"].as_str().unwrap();
        assert!(!topic.starts_with(topics::CLAIMS), "the hub claimed a device another live hub serves: {m}");
        forwarded.insert(topic.to_string());
    }
}
