//! A device's restarts over MQTT, end to end with the built binary: a scripted stock-style device
//! (tests/common/mqtt.rs: hello version 3, MCP while idle, killed as `kill -9` would, so its
//! socket closes with no DISCONNECT) against Mosquitto and against the embedded broker.
//!
//! - Restarted with another tool list: the new instance gets `initialize` with
//!   `capabilities.vision` again, `tools list` shows the new list, its new tools can be called,
//!   and a tool it no longer has is refused (exit 7).
//! - Restarted while it was being onboarded: the new instance ends fully onboarded (not at 0
//!   tools, not exit 9).
//! - Restarted without a hello after an OTA check-in (an idle stock device): onboarded again.
//! - Embedded broker: a closed connection ends the device's link at once (no `ready` device
//!   whose calls time out).
//! - The hub's own broker connection (`mqtt::conn`) against Mosquitto: a reader that falls
//!   behind a burst does not cost it its keepalive, and loses nothing.

mod common;

use std::time::{Duration, Instant};

use common::fake_device::tool;
use common::mqtt::{Mosquitto, MqttDevice};
use common::{HubProcess, mcpdev};
use mcpdev::mqtt::conn::BrokerUrl;
use mcpdev::mqtt::topics;
use serde_json::{Value, json};

fn tools(prefix: &str, n: usize) -> Vec<Value> {
    (0..n).map(|i| tool(&format!("t.{prefix}{i}"))).collect()
}

fn names(list: &[Value]) -> Vec<String> {
    list.iter().map(|t| t["name"].as_str().unwrap().to_string()).collect()
}

/// The hub's broker as a device reaches it.
fn broker_of(hub: &HubProcess) -> BrokerUrl {
    BrokerUrl::parse(hub.info["mqtt"].as_str().expect("the hub runs MQTT")).unwrap()
}

async fn connect(hub: &HubProcess, device: &str) -> MqttDevice {
    MqttDevice::connect_to(&broker_of(hub), &topics::key_for(device).unwrap()).await
}

/// Waits for the hub's `initialize`, checks it carries the vision settings, and answers it.
async fn answer_initialize(dev: &mut MqttDevice) {
    let init = dev.recv_request("initialize").await;
    let vision = &init["params"]["capabilities"]["vision"];
    assert!(vision["url"].as_str().is_some_and(|u| u.starts_with("http")), "{init}");
    assert!(vision["token"].as_str().is_some_and(|t| !t.is_empty()), "{init}");
    dev.reply(&init["id"], json!({"protocolVersion":"2024-11-05","capabilities":{"tools":{}},"serverInfo":{"name":"stock-style","version":"2.4.2"}})).await;
}

/// `tools list --wait` for `device`: must succeed; the tool names.
async fn listed(hub: &HubProcess, device: &str) -> Vec<String> {
    let out = mcpdev(hub, &["tools", "list", "-d", device, "--wait", "20s", "--json"]).await;
    assert_eq!(out.code, 0, "{out:?}");
    names(out.json()["tools"].as_array().unwrap())
}

/// Restarted with another tool list (7 tools, then 11 others).
async fn restart_with_other_tools(hub: &HubProcess, device: &str) {
    let (old, new) = (tools("old", 7), tools("new", 11));
    let mut first = connect(hub, device).await;
    first.hello().await;
    answer_initialize(&mut first).await;
    let list = first.recv_request("tools/list").await;
    first.reply(&list["id"], json!({"tools": old})).await;
    let killer = first.killer();
    first.respond_forever(old.clone());
    assert_eq!(listed(hub, device).await, names(&old));

    killer.kill();
    let mut second = connect(hub, device).await;
    second.hello().await;
    answer_initialize(&mut second).await;
    let list = second.recv_request("tools/list").await;
    second.reply(&list["id"], json!({"tools": new})).await;
    second.respond_forever(new.clone());
    assert_eq!(listed(hub, device).await, names(&new), "the new firmware's tools");
    let call = mcpdev(hub, &["call", "t.new10", "n=3", "-d", device, "--json"]).await;
    assert_eq!(call.code, 0, "{call:?}");
    assert_eq!(call.json()["content"][0]["text"], "ok");
    let gone = mcpdev(hub, &["call", "t.old0", "n=3", "-d", device]).await;
    assert_eq!(gone.code, 7, "the old firmware's tool is gone: {gone:?}");
}

/// Killed while it was being onboarded (it got `initialize` and never answered); the next
/// instance ends fully onboarded.
async fn restart_during_onboarding(hub: &HubProcess, device: &str) {
    let mut first = connect(hub, device).await;
    first.hello().await;
    first.recv_request("initialize").await;
    first.killer().kill();

    let all = tools("full", 9);
    let mut second = connect(hub, device).await;
    second.hello().await;
    answer_initialize(&mut second).await;
    second.respond_forever(all.clone());
    assert_eq!(listed(hub, device).await, names(&all));
    let hello = mcpdev(hub, &["hello", "-d", device, "--json"]).await;
    assert_eq!(hello.json()["onboarding"]["failed"], false, "{}", hello.stdout);
    let call = mcpdev(hub, &["call", "t.full8", "n=1", "-d", device]).await;
    assert_eq!(call.code, 0, "{call:?}");
}

#[tokio::test]
async fn a_device_restarted_over_mosquitto_is_onboarded_again() {
    let broker = Mosquitto::start().await;
    let hub = HubProcess::start(&["--mqtt", &broker.url()], &[]).await;
    restart_with_other_tools(&hub, "aa:00:00:00:07:01").await;
    restart_during_onboarding(&hub, "aa:00:00:00:07:02").await;
}

#[tokio::test]
async fn a_device_restarted_over_the_embedded_broker_is_onboarded_again() {
    let hub = HubProcess::start(&["--mqtt", "embedded", "--mqtt-listen", "127.0.0.1:0"], &[]).await;
    restart_with_other_tools(&hub, "aa:00:00:00:07:11").await;
    restart_during_onboarding(&hub, "aa:00:00:00:07:12").await;
}

/// An idle stock device says no hello after a restart; its OTA check-in is what tells: the
/// next thing it sends (the answer to the hub's probe) onboards it again.
#[tokio::test]
async fn a_device_that_checks_in_at_ota_after_a_restart_is_onboarded_again_without_a_hello() {
    const D: &str = "aa:00:00:00:07:21";
    let broker = Mosquitto::start().await;
    let hub = HubProcess::start(&["--mqtt", &broker.url()], &[]).await;
    let mut first = connect(&hub, D).await;
    first.hello().await;
    answer_initialize(&mut first).await;
    let list = first.recv_request("tools/list").await;
    first.reply(&list["id"], json!({"tools": tools("old", 2)})).await;
    let killer = first.killer();
    first.respond_forever(tools("old", 2));
    assert_eq!(listed(&hub, D).await.len(), 2);

    killer.kill();
    let host = hub.device_url.trim_start_matches("ws://").split('/').next().unwrap().to_string();
    let answer = common::ota::check_in(&hub, &host, D).await;
    assert!(answer["mqtt"].is_object(), "{answer}");
    let second = connect(&hub, D).await;
    let counts = second.respond_forever(tools("new", 3));
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let now = listed(&hub, D).await;
        if now == names(&tools("new", 3)) {
            break;
        }
        assert!(Instant::now() < deadline, "still {now:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Whatever it answered first (the hub's probe, or a re-list of the old instance's), the new
    // instance got an `initialize` and was listed.
    assert!(counts.get("initialize") >= 1 && counts.get("tools/list") >= 1, "{:?}", counts.0);
}

/// The embedded broker sees the device's connection close: its link ends at once, so it leaves
/// `devices` and a call says it is not connected (exit 4) instead of timing out (exit 6).
#[tokio::test]
async fn a_closed_embedded_broker_connection_ends_the_device_link_at_once() {
    const D: &str = "aa:00:00:00:07:31";
    let hub = HubProcess::start(&["--mqtt", "embedded", "--mqtt-listen", "127.0.0.1:0"], &[]).await;
    let mut dev = connect(&hub, D).await;
    dev.hello().await;
    dev.onboard(tools("x", 1)).await;
    let killer = dev.killer();
    dev.respond_forever(tools("x", 1));
    assert_eq!(listed(&hub, D).await.len(), 1);

    let killed = Instant::now();
    killer.kill();
    let connected = |v: &Value| v.as_array().unwrap().iter().any(|d| d["device_id"] == D);
    loop {
        let devices = mcpdev(&hub, &["devices", "--json"]).await;
        assert_eq!(devices.code, 0, "{devices:?}");
        if !connected(&devices.json()) {
            break;
        }
        // At once, not at the keepalive's end (the test device's is 30 s, so 45 s): a bound
        // between the two that load cannot cross.
        assert!(killed.elapsed() < Duration::from_secs(20), "still listed: {}", devices.stdout);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let asked = Instant::now();
    let call = mcpdev(&hub, &["call", "t.x0", "n=1", "-d", D, "--timeout", "30s"]).await;
    assert_eq!(call.code, 4, "{call:?}");
    assert!(asked.elapsed() < Duration::from_secs(20), "at once, not after the call's 30 s timeout: {:?}", asked.elapsed());
}

/// Attacker: a device that reconnects and says hello in a loop, to make the hub onboard it
/// again and again. Four onboardings in 30 s, counted across its connections; the fifth instance
/// gets its server hello but no `initialize`, and the hub warns.
#[tokio::test]
async fn a_device_that_reconnects_in_a_loop_is_onboarded_at_most_four_times_in_30_s() {
    use tokio::io::AsyncBufReadExt;
    const D: &str = "aa:00:00:00:07:41";
    let hub = HubProcess::start(&["--mqtt", "embedded", "--mqtt-listen", "127.0.0.1:0"], &[]).await;
    let mut watch = common::spawn_mcpdev(&["watch", "--json", "-d", D], &[("MCPDEV_HUB", hub.host_url.as_str()), ("MCPDEV_RUNTIME_DIR", hub.runtime_dir.as_str())]);
    let mut events = tokio::io::BufReader::new(watch.child.stdout.take().unwrap()).lines();
    let first: Value = serde_json::from_str(&events.next_line().await.unwrap().unwrap()).unwrap();
    assert_eq!(first["event"], "watching");
    for _ in 0..4 {
        let mut dev = connect(&hub, D).await;
        dev.hello().await;
        answer_initialize(&mut dev).await;
        dev.killer().kill();
    }
    let mut fifth = connect(&hub, D).await;
    fifth.hello().await;
    let warned = async {
        while let Some(line) = events.next_line().await.unwrap() {
            let ev: Value = serde_json::from_str(&line).unwrap();
            if ev["event"] == "warning" && ev["message"].as_str().is_some_and(|m| m.contains("more than 4 times in 30 s")) {
                return;
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(10), warned).await.expect("no warning about the onboarding budget");
    // The warning comes from the fifth instance's hello, after its server hello: nothing was sent.
    let hello = mcpdev(&hub, &["hello", "-d", D, "--json"]).await;
    assert_eq!(hello.code, 4, "{hello:?}");
    assert!(hello.stderr.contains("(awaiting_hello, 0 tools)"), "{}", hello.stderr);
    assert!(fifth.rx.try_recv().is_err(), "the fifth instance got no initialize");
}

/// A burst of 20,000 messages (1 KB each: five times the reader's channel, and more than the
/// sockets hold) reaches a connection with a 1 s keepalive whose reader reads nothing for 4 s
/// (as a hub's dispatcher behind a fleet that joins at once). Its event loop must keep polling,
/// so its pings go out: when it waited on the full channel instead, Mosquitto dropped it after
/// 1.5 keepalives, the clean session lost what was queued, and the hub reconnected into the next
/// burst. Every message then arrives, in order, and the connection never went down.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_behind_a_burst_keeps_the_broker_connection_and_every_message() {
    use mcpdev::mqtt::conn::{ConnEvent, connect};
    const BURST: usize = 20_000;
    let broker = Mosquitto::start().await;
    let url = BrokerUrl::parse(&broker.url()).unwrap();
    async fn until_up(c: &mut mcpdev::mqtt::conn::Connection) {
        loop {
            match tokio::time::timeout(Duration::from_secs(10), c.events.recv()).await.expect("connected within 10 s") {
                Some(ConnEvent::Up) => return,
                Some(ConnEvent::Down(why)) => eprintln!("not yet: {why}"),
                _ => {}
            }
        }
    }
    let mut reader = connect(url.options("backlog-reader", Duration::from_secs(1), 1 << 20), None);
    until_up(&mut reader).await;
    reader.client.subscribe("burst/#", rumqttc::QoS::AtMostOnce).await.unwrap();
    loop {
        match tokio::time::timeout(Duration::from_secs(10), reader.events.recv()).await.expect("subscribed within 10 s") {
            Some(ConnEvent::Subscribed) => break,
            other => assert!(!matches!(other, Some(ConnEvent::Down(_))), "went down before the burst"),
        }
    }
    let mut publisher = connect(url.options("backlog-publisher", Duration::from_secs(5), 1 << 20), None);
    until_up(&mut publisher).await;
    let pad = "x".repeat(1000);
    let sender = tokio::spawn(async move {
        for i in 0..BURST {
            publisher.client.publish("burst/n", rumqttc::QoS::AtMostOnce, false, format!("{i} {pad}")).await.unwrap();
        }
        // The marker goes out once the reader has been left alone for 4 keepalives.
        tokio::time::sleep(Duration::from_secs(4)).await;
        publisher.client.publish("burst/end", rumqttc::QoS::AtMostOnce, false, "end").await.unwrap();
        // Keep the publisher's connection (and read its events) until the reader is done.
        while publisher.events.recv().await.is_some() {}
    });
    // The reader reads nothing until the burst and the pause are over: that is the scenario.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let mut next = 0usize;
    loop {
        let event = tokio::time::timeout(Duration::from_secs(20), reader.events.recv()).await.expect("the burst and its marker within 20 s").expect("the connection task is alive");
        match event {
            ConnEvent::Message(p) if p.topic == "burst/end" => break,
            ConnEvent::Message(p) => {
                let text = String::from_utf8_lossy(&p.payload);
                let n: usize = text.split(' ').next().unwrap().parse().unwrap();
                assert_eq!(n, next, "messages arrive in order, none lost");
                next += 1;
            }
            ConnEvent::Down(why) => panic!("the connection went down with {next} of {BURST} messages read: {why}"),
            _ => {}
        }
    }
    assert_eq!(next, BURST, "every message of the burst arrived before the marker");
    sender.abort();
}
