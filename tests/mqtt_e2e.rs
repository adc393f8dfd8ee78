//! MQTT devices end to end, with the built binary: against Mosquitto (the Debian package, one
//! broker per test) and against the embedded broker. Virtual devices through `tools list`,
//! `call` and `watch`; the CLI straight through a broker; a broker restart mid-session; two hubs
//! on one broker; payload limits; goodbye.

mod common;

use common::fake_device::tool;
use common::mqtt::{Mosquitto, MqttDevice};
use common::{HubProcess, mcpdev, spawn_mcpdev};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

const D1: &str = "02:00:00:00:00:01";
const D2: &str = "02:00:00:00:00:02";

fn broker_of(hub: &HubProcess) -> String {
    hub.info["mqtt"].as_str().expect("the hub runs MQTT").to_string()
}

/// Runs `mcpdev ARGS` with no hub (for `--mqtt` direct access).
async fn mcpdev_direct(args: &[&str]) -> common::Outcome {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcpdev"))
        .args(args)
        .env("MCPDEV_HUB", "http://127.0.0.1:9")
        .env("NO_COLOR", "1")
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(std::time::Duration::from_secs(60), out).await.expect("command hung").unwrap();
    common::Outcome { code: out.status.code().unwrap_or(-1), stdout: String::from_utf8_lossy(&out.stdout).into_owned(), stderr: String::from_utf8_lossy(&out.stderr).into_owned() }
}

async fn volume(hub: &HubProcess, device: &str) -> Value {
    let out = mcpdev(hub, &["call", "self.get_device_status", "-d", device, "--json"]).await;
    assert_eq!(out.code, 0, "{out:?}");
    let text: Value = serde_json::from_str(out.json()["content"][0]["text"].as_str().unwrap()).unwrap();
    text["audio_speaker"]["volume"].clone()
}

/// Two virtual devices over MQTT: every client-flow command through the hub, and the CLI
/// straight through the broker.
async fn client_flow(hub: &HubProcess, broker: &str) {
    let _sim = spawn_mcpdev(&["sim", "--mqtt", broker, "--count", "2"], &[]);
    let list = mcpdev(hub, &["tools", "list", "-d", D1, "--wait", "10s", "--json"]).await;
    assert_eq!(list.code, 0, "{list:?}");
    let tools = list.json()["tools"].clone();
    let names: Vec<&str> = tools.as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["self.get_device_status", "self.audio_speaker.set_volume", "self.screen.set_brightness", "self.screen.set_theme"]);

    let hello = mcpdev(hub, &["hello", "-d", D2, "--wait", "10s", "--json"]).await;
    let h = hello.json();
    assert_eq!((h["transport"].as_str(), h["client_id"].as_str()), (Some("mqtt"), Some("GID_mcpdev@@@02_00_00_00_00_02")));
    assert_eq!((h["hello"]["transport"].as_str(), h["hello"]["version"].as_u64()), (Some("udp"), Some(3)));

    // watch: the subscription is live once its first line is out; then one call's traffic.
    let mut watch = spawn_mcpdev(&["watch", "--json", "--traffic", "-d", D1], &[("MCPDEV_HUB", hub.host_url.as_str())]);
    let mut lines = BufReader::new(watch.child.stdout.take().unwrap()).lines();
    let first: Value = serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
    assert_eq!(common::unstamped(first), json!({"event":"watching","device":D1}));
    let call = mcpdev(hub, &["call", "self.audio_speaker.set_volume", "volume=42", "-d", D1, "--json"]).await;
    assert_eq!(call.code, 0, "{call:?}");
    assert_eq!(call.json(), json!({"device_id": D1, "content":[{"type":"text","text":"true"}],"isError":false}));
    // The call's two frames; the hub's confirming tools/list after onboarding is left out.
    let mut frames = Vec::new();
    while frames.len() < 2 {
        let v: Value = serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
        if v["event"] == "traffic" && v["payload"]["method"] != "tools/list" && v["payload"]["result"].get("tools").is_none() {
            frames.push(v);
        }
    }
    let (out, back) = (frames[0].clone(), frames[1].clone());
    assert_eq!((out["event"].as_str(), out["direction"].as_str()), (Some("traffic"), Some("out")));
    assert_eq!(out["payload"]["params"], json!({"name":"self.audio_speaker.set_volume","arguments":{"volume":42}}));
    assert_eq!((back["direction"].as_str(), back["payload"]["result"]["content"][0]["text"].as_str()), (Some("in"), Some("true")));
    watch.child.kill().await.unwrap();
    assert_eq!(volume(hub, D1).await, 42);
    assert_eq!(volume(hub, D2).await, 70, "the other device is untouched");

    // No hub in between: the CLI is the device's backend through the broker.
    let direct = mcpdev_direct(&["call", "self.audio_speaker.set_volume", "volume=7", "--mqtt", broker, "-d", D2, "--json"]).await;
    assert_eq!(direct.code, 0, "{direct:?}");
    let listed = mcpdev_direct(&["tools", "list", "--mqtt", broker, "-d", D2, "--json"]).await;
    assert_eq!(listed.json()["tools"].as_array().unwrap().len(), 4, "{listed:?}");
    assert_eq!(volume(hub, D2).await, 7, "the hub still serves the device the CLI reached directly");
    let absent = mcpdev_direct(&["hello", "--mqtt", broker, "-d", "0a:00:00:00:00:99", "--timeout", "1s"]).await;
    assert_eq!(absent.code, 4, "{absent:?}");
    assert!(absent.stderr.contains("did not answer over MQTT"), "{}", absent.stderr);
    let no_device = mcpdev_direct(&["hello", "--mqtt", broker]).await;
    assert_eq!(no_device.code, 2, "{no_device:?}");
}

#[tokio::test]
async fn virtual_devices_over_mosquitto_through_tools_list_call_and_watch() {
    let broker = Mosquitto::start().await;
    let hub = HubProcess::start(&["--mqtt", &broker.url()], &[]).await;
    assert_eq!(broker_of(&hub), broker.url());
    client_flow(&hub, &broker.url()).await;
}

#[tokio::test]
async fn virtual_devices_over_the_embedded_broker_through_tools_list_call_and_watch() {
    let hub = HubProcess::start(&["--mqtt", "embedded", "--mqtt-listen", "127.0.0.1:0"], &[]).await;
    let broker = broker_of(&hub);
    client_flow(&hub, &broker).await;
}

/// Stock firmware never subscribes: the embedded broker subscribes it to its downlink.
#[tokio::test]
async fn the_embedded_broker_serves_a_device_that_never_subscribes() {
    let hub = HubProcess::start(&["--mqtt", "embedded", "--mqtt-listen", "127.0.0.1:0"], &[]).await;
    let url = mcpdev::mqtt::conn::BrokerUrl::parse(&broker_of(&hub)).unwrap();
    let key = mcpdev::mqtt::topics::key_for(D1).unwrap();
    let mut c = mcpdev::mqtt::conn::connect(url.options(&key, std::time::Duration::from_secs(30), 1 << 16), None);
    let hello = json!({"type":"hello","version":3,"transport":"udp","features":{"mcp":true},"audio_params":{"format":"opus","sample_rate":16000,"channels":1,"frame_duration":60}});
    let server_hello = async {
        loop {
            match c.events.recv().await.unwrap() {
                mcpdev::mqtt::conn::ConnEvent::Up => {
                    c.client.publish(mcpdev::mqtt::topics::uplink(&key), rumqttc::QoS::AtMostOnce, false, hello.to_string()).await.unwrap()
                }
                mcpdev::mqtt::conn::ConnEvent::Message(p) => {
                    assert_eq!(p.topic, mcpdev::mqtt::topics::downlink(&key));
                    return serde_json::from_slice::<Value>(&p.payload).unwrap();
                }
                _ => {}
            }
        }
    };
    let h = tokio::time::timeout(common::ws::DEADLINE, server_hello).await.expect("no server hello");
    assert_eq!(h["type"], "hello");
    assert_eq!(h["transport"], "udp");
    let udp = &h["udp"];
    assert_eq!(udp["port"].as_u64(), hub.info["udp_port"].as_u64());
    assert_eq!(udp["nonce"].as_str().unwrap().len(), 32);
    assert!(udp["nonce"].as_str().unwrap().starts_with("01000000"));
}

/// The broker dies mid-call: the call ends at once with a clear error, calls while it is down
/// fail the same way, no device leaves the registry, and calls work again once it is back.
#[tokio::test]
async fn a_broker_restart_mid_session_ends_calls_clearly_and_keeps_every_device() {
    const SLOW: &str = "aa:00:00:00:00:5e";
    let mut broker = Mosquitto::start().await;
    let hub = HubProcess::start(&["--mqtt", &broker.url()], &[]).await;
    let _sim = spawn_mcpdev(&["sim", "--mqtt", &broker.url()], &[]);
    let mut slow = MqttDevice::connect(&broker.url(), SLOW).await;
    slow.hello().await;
    slow.onboard(vec![tool("t.slow")]).await;
    assert_eq!(mcpdev(&hub, &["hello", "-d", D1, "--wait", "10s"]).await.code, 0);
    assert_eq!(mcpdev(&hub, &["hello", "-d", SLOW, "--wait", "10s"]).await.code, 0);

    let mut watch = spawn_mcpdev(&["watch", "--json", "-d", D1], &[("MCPDEV_HUB", hub.host_url.as_str())]);
    let mut events = BufReader::new(watch.child.stdout.take().unwrap()).lines();
    assert_eq!(serde_json::from_str::<Value>(&events.next_line().await.unwrap().unwrap()).unwrap()["event"], "watching");

    let in_flight = tokio::spawn(mcpdev(&hub, &["call", "t.slow", "n=1", "-d", SLOW, "--timeout", "120s"]));
    slow.recv_request("tools/call").await;
    let killed_at = std::time::Instant::now();
    broker.kill().await;
    let out = in_flight.await.unwrap();
    assert_eq!(out.code, 4, "{out:?}");
    assert!(out.stderr.contains("connection to the MQTT broker") && out.stderr.contains("was lost"), "{}", out.stderr);
    assert!(killed_at.elapsed() < std::time::Duration::from_secs(60), "ended by the outage, not by its 120 s timeout");

    let down = mcpdev(&hub, &["call", "self.get_device_status", "-d", D1]).await;
    assert_eq!(down.code, 4, "{down:?}");
    assert!(down.stderr.contains("is unreachable (reconnecting)"), "{}", down.stderr);
    for d in [D1, SLOW] {
        assert_eq!(mcpdev(&hub, &["hello", "-d", d]).await.code, 0, "{d} is still in the registry");
    }

    broker.run().await;
    // The virtual device says hello again after reconnecting: the hub answers and lists again.
    let relisted = async {
        while let Some(line) = events.next_line().await.unwrap() {
            let ev: Value = serde_json::from_str(&line).unwrap();
            if ev["event"] == "tools_changed" || ev["event"] == "ready" {
                return;
            }
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(30), relisted).await.expect("the device was not onboarded again after the restart");
    let call = mcpdev(&hub, &["call", "self.audio_speaker.set_volume", "volume=9", "-d", D1]).await;
    assert_eq!(call.code, 0, "{call:?}");
    assert_eq!(volume(&hub, D1).await, 9);
    assert_eq!(mcpdev(&hub, &["hello", "-d", SLOW]).await.code, 0, "the scripted device was never lost either");
}

/// Two hubs on one broker share the devices: each device is onboarded by exactly one hub, is in
/// exactly one registry, and every call is answered once, through either hub (the other one
/// passes it on to the owner: docs/cluster.md).
#[tokio::test]
async fn two_hubs_on_one_broker_serve_each_device_exactly_once() {
    let broker = Mosquitto::start().await;
    let (hubs, _dirs) = HubProcess::cluster(2, &["--mqtt", &broker.url()], false).await;
    let ids: Vec<String> = (1..=6).map(|i| format!("aa:00:00:00:01:{i:02x}")).collect();
    let mut counts = Vec::new();
    for id in &ids {
        let mut dev = MqttDevice::connect(&broker.url(), id).await;
        dev.hello().await;
        counts.push(dev.respond_forever(vec![tool("t.echo")]));
    }
    // Asked of both hubs at once: both answer, naming the one hub that serves it.
    let hubs_ref = &hubs;
    let asked = ids.iter().map(|id| async move {
        let a = mcpdev(&hubs_ref[0], &["hello", "-d", id, "--wait", "10s", "--json"]);
        let b = mcpdev(&hubs_ref[1], &["hello", "-d", id, "--wait", "10s", "--json"]);
        tokio::join!(a, b)
    });
    for (id, (a, b)) in ids.iter().zip(futures_util::future::join_all(asked).await) {
        assert_eq!((a.code, b.code), (0, 0), "{id}: {a:?}\n{b:?}");
        assert_eq!(a.json()["hub"], b.json()["hub"], "{id}: both hubs name the same server");
    }
    // Which hub serves each device: the one that lists it as its own (with its session).
    let mut owners = Vec::new();
    for id in &ids {
        let mut own = Vec::new();
        for (i, hub) in hubs.iter().enumerate() {
            let rows = mcpdev(hub, &["devices", "--json"]).await.json();
            if rows.as_array().unwrap().iter().any(|d| d["device_id"] == id.as_str() && d.get("session_id").is_some()) {
                own.push(i);
            }
        }
        assert_eq!(own.len(), 1, "{id}: exactly one hub must serve it: {own:?}");
        owners.push(own[0]);
    }
    for (id, c) in ids.iter().zip(&counts) {
        // Onboarded once: one listing, plus at most the one background confirmation re-list.
        assert_eq!((c.get("server_hello"), c.get("initialize")), (1, 1), "{id} onboarded once");
        assert!((1..=2).contains(&c.get("tools/list")), "{id}: {} tools/list", c.get("tools/list"));
    }
    for ((id, c), owner) in ids.iter().zip(&counts).zip(&owners) {
        for _ in 0..2 {
            let out = mcpdev(&hubs[*owner], &["call", "t.echo", "n=1", "-d", id, "--json"]).await;
            assert_eq!(out.code, 0, "{out:?}");
        }
        let other = mcpdev(&hubs[1 - owner], &["call", "t.echo", "n=1", "-d", id, "--json"]).await;
        assert_eq!(other.code, 0, "the other hub reaches {id} through its owner: {other:?}");
        assert_eq!(c.get("tools/call"), 3, "{id}: every call reached the device once");
        assert_eq!(c.get("initialize"), 1, "{id}: still onboarded once");
    }
    assert!(owners.contains(&0) && owners.contains(&1), "with six devices both hubs serve some (owners: {owners:?})");
}

/// Messages over the payload limit are refused in both directions; nothing else ends.
#[tokio::test]
async fn oversize_messages_are_refused_without_ending_the_link() {
    const DEV: &str = "aa:00:00:00:00:b1";
    let hub = HubProcess::start(&["--mqtt", "embedded", "--mqtt-listen", "127.0.0.1:0", "--mqtt-max-payload", "2048"], &[]).await;
    let mut dev = MqttDevice::connect(&broker_of(&hub), DEV).await;
    dev.hello().await;
    let open = json!({"name":"t.any","description":"any arguments","inputSchema":{"type":"object","properties":{}}});
    dev.onboard(vec![open]).await;
    assert_eq!(mcpdev(&hub, &["hello", "-d", DEV, "--wait", "10s"]).await.code, 0);

    // The device answers with 5000 bytes: over the limit.
    let (out, _) = tokio::join!(mcpdev(&hub, &["call", "t.any", "-d", DEV, "--timeout", "60s"]), async {
        let req = dev.recv_request("tools/call").await;
        let big = "x".repeat(5000);
        dev.reply(&req["id"], json!({"content":[{"type":"text","text":big}],"isError":false})).await;
    });
    assert_eq!(out.code, 4, "{out:?}");
    assert!(out.stderr.contains("over the 2048-byte payload limit"), "{}", out.stderr);

    let big_arg = json!({"blob": "y".repeat(4000)}).to_string();
    let refused = mcpdev(&hub, &["call", "t.any", "--args-json", &big_arg, "-d", DEV]).await;
    assert_eq!(refused.code, 4, "{refused:?}");
    assert!(refused.stderr.contains("over the 2048-byte MQTT payload limit") && refused.stderr.contains("nothing was sent"), "{}", refused.stderr);

    let (ok, _) = tokio::join!(mcpdev(&hub, &["call", "t.any", "-d", DEV, "--json"]), async {
        let req = dev.recv_request("tools/call").await;
        assert!(req["params"]["arguments"].get("blob").is_none(), "the refused request never reached the device");
        dev.reply(&req["id"], json!({"content":[{"type":"text","text":"fine"}],"isError":false})).await;
    });
    assert_eq!(ok.code, 0, "{ok:?}");
    assert_eq!(ok.json()["content"][0]["text"], "fine");
}

/// On Ctrl-C the hub says goodbye to MQTT devices with their session id (reference §2.4).
#[tokio::test]
async fn the_hub_says_goodbye_with_the_session_id_when_it_stops() {
    const DEV: &str = "aa:00:00:00:00:b2";
    let mut hub = HubProcess::start(&["--mqtt", "embedded", "--mqtt-listen", "127.0.0.1:0"], &[]).await;
    let mut dev = MqttDevice::connect(&broker_of(&hub), DEV).await;
    dev.hello().await;
    dev.onboard(vec![tool("t.x")]).await;
    assert_eq!(mcpdev(&hub, &["hello", "-d", DEV, "--wait", "10s"]).await.code, 0);
    let pid = hub.running.child.id().unwrap().to_string();
    assert!(std::process::Command::new("kill").args(["-INT", &pid]).status().unwrap().success());
    loop {
        let m = dev.recv().await;
        if m["type"] == "goodbye" {
            assert_eq!(m["session_id"].as_str(), Some(dev.session_id.as_str()));
            break;
        }
    }
    // Stopped by Ctrl-C like every long-running command: exit code 130.
    assert_eq!(hub.running.child.wait().await.unwrap().code(), Some(130));
}

/// MQTT says nothing when a device is switched off: a device that answers the keepalive pings
/// stays, one that falls silent leaves the registry after three keepalive periods, and comes back
/// with its next message. Through Mosquitto: the embedded broker would tell the hub the
/// connection closed, which ends the link at once (tests/mqtt_restart.rs).
#[tokio::test]
async fn a_silent_mqtt_device_leaves_the_registry_and_comes_back() {
    let mosquitto = Mosquitto::start().await;
    let broker = mosquitto.url();
    let hub = HubProcess::start(&["--mqtt", &broker, "--keepalive", "2s"], &[]).await;
    let sim = spawn_mcpdev(&["sim", "--mqtt", &broker], &[]);
    assert_eq!(mcpdev(&hub, &["hello", "-d", D1, "--wait", "10s"]).await.code, 0);

    let mut watch = spawn_mcpdev(&["watch", "--json", "--traffic", "-d", D1], &[("MCPDEV_HUB", hub.host_url.as_str())]);
    let mut events = BufReader::new(watch.child.stdout.take().unwrap()).lines();
    let mut next = async || -> Value {
        let line = tokio::time::timeout(std::time::Duration::from_secs(30), events.next_line()).await.expect("an event in time");
        serde_json::from_str(&line.unwrap().expect("watch runs")).unwrap()
    };
    assert_eq!(next().await["event"], "watching");
    // Alive: four keepalive pings answered (more than three periods), and no disconnect.
    let (mut pings, mut answered) = (Vec::new(), 0);
    while answered < 4 {
        let ev = next().await;
        assert_ne!(ev["event"], "disconnected", "a device that answers pings must stay: {ev}");
        if ev["event"] != "traffic" {
            continue;
        }
        if ev["direction"] == "out" && ev["payload"]["method"] == "ping" {
            pings.push(ev["payload"]["id"].clone());
        } else if ev["direction"] == "in" && pings.contains(&ev["payload"]["id"]) {
            answered += 1;
        }
        assert!(pings.len() <= 8, "pings go unanswered");
    }
    // Switched off (killed: no goodbye, and its broker connection just drops).
    drop(sim);
    let gone = loop {
        let ev = next().await;
        if ev["event"] == "disconnected" {
            break ev;
        }
    };
    assert!(gone["reason"].as_str().unwrap().contains("nothing heard from the device for 6 s"), "{gone}");
    let absent = mcpdev(&hub, &["hello", "-d", D1]).await;
    assert_eq!(absent.code, 4, "{absent:?}");

    let _sim = spawn_mcpdev(&["sim", "--mqtt", &broker], &[]);
    let back = mcpdev(&hub, &["hello", "-d", D1, "--wait", "10s", "--json"]).await;
    assert_eq!((back.code, back.json()["transport"].as_str()), (0, Some("mqtt")), "{back:?}");
}
