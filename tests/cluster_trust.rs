//! Issue 44.8: a cluster trusts only its own hubs. Presence records, claims and forwarded device
//! messages open only with the cluster's hub secret (`mqtt::cluster_seal`), and hubs read uplinks
//! through a share group named from the secret, so:
//! - a `serve` with another hub secret on the same broker and `--mqtt-group` takes no share of the
//!   cluster's uplinks (every call of a host succeeds), and each side names the other in its log;
//! - a broker client without the secret (anonymous broker: the MAC is the only line) cannot move
//!   a device with a forged claim, declare a hub alive, or speak for a device with a forged
//!   forwarded message; each is refused, logged and counted;
//! - on Mosquitto with dynamic security and the per-cluster roles docs/mqtt.md gives, another
//!   cluster's hub login can neither read a device's downlink (a host's call arguments) nor join
//!   this cluster's share group, nor publish as a device.

mod common;

use std::time::{Duration, Instant};

use common::mqtt::{HUB_LOGINS, Mosquitto, MqttDevice, connect_once, hub_role};
use common::{HubProcess, Outcome, mcpdev};
use mcpdev::hub::secret::HubSecret;
use mcpdev::mqtt::{cluster_seal, topics};
use serde_json::{Value, json};

const DEV: &str = "c4:44:00:00:08:01";

fn echo_tool() -> Vec<Value> {
    vec![json!({"name":"t.echo","description":"echo","inputSchema":{"type":"object","properties":{"secret":{"type":"string"},"n":{"type":"integer"}}}})]
}

/// Polls until `needle` is in `hub`'s log `n` times (within 10 s).
async fn logged(hub: &HubProcess, needle: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    let log = hub.stderr.clone().expect("a hub started with its stderr collected");
    while !log.lock().unwrap().contains(needle) {
        assert!(Instant::now() < deadline, "the hub did not log {needle:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Calls the device through `hub` until it answers (it is onboarded), within 20 s.
async fn until_answers(hub: &HubProcess) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let out = mcpdev(hub, &["call", "t.echo", "n=1", "-d", DEV, "--json", "--timeout", "3s"]).await;
        if out.code == 0 {
            return;
        }
        assert!(Instant::now() < deadline, "the device never answered: {out:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// `n` calls of the device through `hub`, each with a secret argument; the failed ones.
async fn calls(hub: &HubProcess, n: usize) -> Vec<Outcome> {
    let mut failed = Vec::new();
    for i in 0..n {
        let arg = format!("secret=hunter2-{i}");
        let out = mcpdev(hub, &["call", "t.echo", &arg, "-d", DEV, "--json", "--timeout", "5s"]).await;
        if out.code != 0 || out.json()["content"][0]["text"] != "ok" {
            failed.push(out);
        }
    }
    failed
}

/// A hub with its own secret on `url` (no `--approve-all` given: admitting every device here).
async fn stranger_hub(url: &str, env: &[(&str, &str)]) -> (HubProcess, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    common::write_secret(dir.path(), &"42".repeat(32));
    let state = dir.path().to_string_lossy().into_owned();
    let mut env = env.to_vec();
    env.push(("MCPDEV_STATE_DIR", &state));
    let hub = HubProcess::start_with(&["--approve-all", "--mqtt", url], &env, true).await;
    (hub, dir)
}

/// A `serve` with another hub secret joins the broker with the same `--mqtt-group`: it is in a
/// share group of its own, so all 30 calls through the cluster's hub succeed (10 of 30 failed
/// when it took a share of the uplinks); each hub names the other in its log. Then a broker
/// client without the secret forges a presence and a claim that would hand the device to a hub
/// that does not exist, a claim sealed for another device, one sealed with another secret, and a
/// forwarded "answer": each is refused, logged and counted, and the device stays served.
#[tokio::test]
async fn another_secret_takes_no_uplinks_and_forged_claims_move_nothing() {
    let broker = Mosquitto::start().await;
    let (hubs, _dirs) = HubProcess::cluster(1, &["--mqtt", &broker.url()], true).await;
    let hub = &hubs[0];
    let me = hub.info["hub_id"].as_str().unwrap().to_string();
    let (stranger, _sdir) = stranger_hub(&broker.url(), &[]).await;
    let theirs = stranger.info["hub_id"].as_str().unwrap().to_string();
    let mut dev = MqttDevice::connect(&broker.url(), DEV).await;
    dev.hello().await;
    let counts = dev.respond_forever(echo_tool());
    until_answers(hub).await;

    let before = counts.get("tools/call");
    let failed = calls(hub, 30).await;
    assert!(failed.is_empty(), "{} of 30 calls failed with a stranger hub on the broker: {failed:?}", failed.len());
    assert_eq!(counts.get("tools/call"), before + 30, "each call reached the device once");
    logged(hub, &format!("refused the presence of hub {theirs:?} on this broker (a presence whose MAC does not verify")).await;
    logged(&stranger, &format!("refused the presence of hub {me:?} on this broker")).await;

    let key = topics::key_for(DEV).unwrap();
    let before = hub.metric("mcpdev_refusals_total{reason=\"cluster_record\"}").await;
    let intruder = connect_once(broker.port, "intruder", None).await.unwrap();
    let other = HubSecret::from_bytes(&[0x42; 32]);
    let secret = common::cluster_secret();
    let forged: [(String, Vec<u8>); 5] = [
        (format!("mcpdev/hubs/evil00000001"), json!({"hub": "evil00000001"}).to_string().into_bytes()),
        (format!("mcpdev/claims/{key}"), b"evil00000001".to_vec()),
        (format!("mcpdev/claims/{key}"), cluster_seal::seal_claim(&secret, &topics::key_for("c4:44:00:00:08:02").unwrap(), "evil00000001")),
        (format!("mcpdev/claims/{key}"), cluster_seal::seal_claim(&other, &key, &theirs)),
        (format!("mcpdev/fwd/{me}/{key}"), json!({"session_id":"x","type":"mcp","payload":{"jsonrpc":"2.0","id":1,"result":{}}}).to_string().into_bytes()),
    ];
    for (topic, payload) in forged {
        intruder.client.publish(topic, rumqttc::QoS::AtLeastOnce, true, payload).await.unwrap();
    }
    logged(hub, "refused the presence of hub \"evil00000001\" on this broker (an unsigned presence").await;
    logged(hub, &format!("refused a message passed on for {key:?} (an unsigned fwd")).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while hub.metric("mcpdev_refusals_total{reason=\"cluster_record\"}").await < before + 5.0 {
        assert!(Instant::now() < deadline, "every forgery is counted");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The device is still this hub's, and answers; a hub that joins later is not fooled either
    // (the owner put its claim back on the broker, over the forgeries).
    let rows = mcpdev(hub, &["devices", "--json"]).await.json();
    assert!(rows.as_array().unwrap().iter().any(|d| d["device_id"] == DEV && d.get("session_id").is_some()), "still served here: {rows}");
    let failed = calls(hub, 3).await;
    assert!(failed.is_empty(), "after forged claims: {failed:?}");
    let (late, _ldir) = HubProcess::cluster(1, &["--mqtt", &broker.url()], true).await;
    let out = mcpdev(&late[0], &["call", "t.echo", "n=2", "-d", DEV, "--json", "--timeout", "10s"]).await;
    assert_eq!(out.code, 0, "through a hub that joined after the forgeries: {out:?}");
    // Clearing this hub's presence (an empty retained message, as a hub's last will, carries no
    // MAC) makes the other hub take the device over, as after a crash; the hub says it is alive
    // again, and the device is reachable through both hubs: moved at worst, never left unserved.
    let mut watch = connect_once(broker.port, "presence-watch", None).await.unwrap();
    assert!(watch.subscribe(&format!("mcpdev/hubs/{me}")).await.starts_with("Success"));
    let _retained = watch.recv().await;
    intruder.client.publish(format!("mcpdev/hubs/{me}"), rumqttc::QoS::AtLeastOnce, true, Vec::<u8>::new()).await.unwrap();
    loop {
        let m = watch.recv().await;
        let p = m["payload"].as_str().unwrap_or_default();
        if !p.is_empty() {
            let record = p.split_once('\n').expect("sealed").1;
            assert!(cluster_seal::open_presence(&secret, &me, p.as_bytes()).is_ok(), "{p}");
            assert!(record.contains(&me));
            break;
        }
    }
    until_answers(hub).await;
    until_answers(&late[0]).await;
}

/// Mosquitto with dynamic security, as docs/mqtt.md sets it up for two clusters on one broker:
/// each cluster's hubs have a role of their own. A login with the other cluster's role cannot
/// subscribe to a device's downlink (where a host's call arguments go), to plain uplinks, or to
/// this cluster's share group, nor publish as the device; the claims it may publish (sealed with
/// its own secret, or bare) move nothing; while that cluster's `serve` runs on the same broker,
/// all 30 calls succeed and none of their arguments reaches that login.
#[tokio::test]
async fn another_clusters_hub_login_reads_no_downlink_on_mosquitto() {
    let broker = Mosquitto::start_dynsec().await;
    let other = HubSecret::from_bytes(&[0x42; 32]);
    let their_group = cluster_seal::share_group(&other, "mcpdev");
    for line in hub_role("mcpdev-hub-other", &their_group) {
        broker.ctrl(&line.iter().map(String::as_str).collect::<Vec<_>>()).await;
    }
    let (their_user, their_password) = ("mcpdev-hub-other-1", "other-cluster-password-01");
    broker.ctrl(&["createClient", their_user, "-p", their_password]).await;
    broker.ctrl(&["addClientRole", their_user, "mcpdev-hub-other"]).await;
    // The device's own login, as `--mqtt-dynsec` makes it (mqtt::dynsec::device_role).
    let key = topics::key_for(DEV).unwrap();
    let role = mcpdev::mqtt::dynsec::device_role(&key);
    broker.ctrl(&["createRole", &key]).await;
    for acl in role["acls"].as_array().unwrap() {
        let (kind, topic) = (acl["acltype"].as_str().unwrap(), acl["topic"].as_str().unwrap());
        let allow = if acl["allow"] == true { "allow" } else { "deny" };
        broker.ctrl(&["addRoleACL", &key, kind, topic, allow, &acl["priority"].to_string()]).await;
    }
    broker.ctrl(&["createClient", &key, "-p", "device-password-0123", "-c", &key]).await;
    broker.ctrl(&["addClientRole", &key, &key]).await;

    let state = tempfile::tempdir().unwrap();
    common::write_secret(state.path(), &common::cluster_secret_hex());
    let dir = state.path().to_string_lossy().into_owned();
    let url = broker.url_as(HUB_LOGINS[0].0);
    let hub = HubProcess::start_with(&["--approve-all", "--mqtt", &url], &[("MCPDEV_MQTT_PASSWORD", HUB_LOGINS[0].1), ("MCPDEV_STATE_DIR", &dir)], true).await;
    let (stranger, _sdir) = stranger_hub(&broker.url_as(their_user), &[("MCPDEV_MQTT_PASSWORD", their_password)]).await;
    let login = mcpdev::mqtt::conn::BrokerUrl { host: "127.0.0.1".into(), port: broker.port, tls: false, username: Some(key.clone()), password: Some("device-password-0123".into()) };
    let mut dev = MqttDevice::connect_to(&login, &key).await;
    dev.hello().await;
    let counts = dev.respond_forever(echo_tool());
    until_answers(&hub).await;

    let mut spy = connect_once(broker.port, "spy", Some((their_user, their_password))).await.expect("the other cluster's hub login");
    let ours = common::mqtt::cluster_share_group();
    for filter in ["mcpdev/down/+", &topics::downlink(&key), "mcpdev/#", "#", "mcpdev/up/+", &topics::uplink(&key), &format!("$share/{ours}/mcpdev/up/+"), "$share/x/mcpdev/down/+"] {
        assert_eq!(spy.subscribe(filter).await, "Failure", "another cluster's hub login subscribed to {filter}");
    }
    // What its role lets it read: the hubs' topics and its own share group.
    for filter in ["mcpdev/claims/+", "mcpdev/hubs/+", &format!("$share/{their_group}/mcpdev/up/+")] {
        assert!(spy.subscribe(filter).await.starts_with("Success"), "{filter}");
    }
    // Its role may publish claims: a forged one, sealed with its own secret, and a bare one,
    // naming its hub, for the device (retained, as claims are). They move nothing.
    let theirs = stranger.info["hub_id"].as_str().unwrap().to_string();
    for claim in [cluster_seal::seal_claim(&other, &key, &theirs), theirs.clone().into_bytes()] {
        spy.client.publish(format!("mcpdev/claims/{key}"), rumqttc::QoS::AtLeastOnce, true, claim).await.unwrap();
    }
    let before = counts.get("tools/call");
    let failed = calls(&hub, 30).await;
    assert!(failed.is_empty(), "{} of 30 calls failed with the other cluster's hub on the broker: {failed:?}", failed.len());
    assert_eq!(counts.get("tools/call"), before + 30, "each call reached the device once");
    logged(&hub, &format!("refused a claim of {key:?}")).await;
    logged(&hub, &format!("refused the presence of hub {theirs:?} on this broker")).await;
    // Everything the spy received up to its own marker: no call argument among it.
    spy.client.publish("mcpdev/claims/spy-marker", rumqttc::QoS::AtLeastOnce, false, "marker").await.unwrap();
    loop {
        let m = spy.recv().await;
        let text = m.to_string();
        assert!(!text.contains("hunter2"), "the other cluster's login read {m}");
        if m["topic"] == "mcpdev/claims/spy-marker" {
            break;
        }
    }
}
