//! Requests between the hubs of a cluster, with real processes (Mosquitto and three `mcpdev
//! serve`): forged and flooding hub-to-hub requests are refused, hubs that offer a direct link
//! (`--cluster-link`) take each other's requests on it, and a stranger on that link is refused and
//! logged (moved out of `cluster_e2e.rs`, one topic per file).

mod common;

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use common::cluster::{call_ok, logged, mqtt_devices, mqtt_ids, owners, three_hubs, until_listed, watched};
use common::mqtt::Mosquitto;
use common::{HubProcess, mcpdev, spawn_mcpdev};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};

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
    // Sixteen devices over two hubs' share group: all on hub A once in 32,768 runs (four: once in 8).
    let ids = mqtt_ids("cf:00:00:00:00", 16);
    let _counts = mqtt_devices(&broker, &ids).await;
    until_listed(&hubs[0], &ids, Duration::from_secs(20)).await;
    let owner = owners(&[&hubs[0], &hubs[1]]).await;
    let on_b = ids.iter().find(|id| owner[*id] == 1).expect("a device on hub B");
    let before = hubs[0].metric("mcpdev_cluster_requests_total{path=\"link\"}").await;
    let out = mcpdev(&hubs[0], &["call", "t.echo", "n=1", "-d", on_b, "--json"]).await;
    call_ok(&out, on_b);
    assert!(hubs[0].metric("mcpdev_cluster_requests_total{path=\"link\"}").await > before, "the call went on the link");
}
