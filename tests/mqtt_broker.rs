//! The embedded broker against a raw MQTT client (packets encoded with rumqttc's codec, written
//! to a plain TCP socket): no topic, filter or will can kill it, and a device client only has
//! its own uplink and downlink. The hub and a `mcpdev sim --mqtt` device around it must keep
//! working. Also replays the broker fuzz corpus.

mod common;

use std::time::Duration;

use bytes::BytesMut;
use common::{HubProcess, mcpdev, spawn_mcpdev};
use mcpdev::mqtt::topics;
use rumqttc::mqttbytes::QoS;
use rumqttc::mqttbytes::v4::{Connect, ConnectReturnCode, LastWill, Login, Packet, Publish, Subscribe, SubscribeFilter, SubscribeReasonCode};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const D1: &str = "02:00:00:00:00:01";
const DEADLINE: Duration = Duration::from_secs(10);

/// A raw MQTT 3.1.1 client.
struct Raw {
    s: TcpStream,
    buf: BytesMut,
}

impl Raw {
    /// Connects and returns the CONNACK's code (`None`: closed without one).
    async fn connect(port: u16, client_id: &str, password: Option<&str>, will: Option<LastWill>) -> (Raw, Option<ConnectReturnCode>) {
        let s = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        let mut raw = Raw { s, buf: BytesMut::new() };
        let mut c = Connect::new(client_id);
        c.keep_alive = 30;
        c.last_will = will;
        c.login = password.map(|p| Login::new("", p));
        raw.send(Packet::Connect(c)).await;
        let code = match raw.recv().await {
            Some(Packet::ConnAck(a)) => Some(a.code),
            None => None,
            other => panic!("not a CONNACK: {other:?}"),
        };
        (raw, code)
    }

    async fn send(&mut self, p: Packet) {
        let mut out = BytesMut::new();
        p.write(&mut out, 1 << 20).unwrap();
        // The broker may have closed already; what it does next is what the test looks at.
        let _ = self.s.write_all(&out).await;
    }

    /// The next packet; `None` once the broker closed the connection.
    async fn recv(&mut self) -> Option<Packet> {
        loop {
            match Packet::read(&mut self.buf, 1 << 20) {
                Ok(p) => return Some(p),
                Err(rumqttc::mqttbytes::Error::InsufficientBytes(_)) => {}
                Err(e) => panic!("the broker sent a malformed packet: {e:?}"),
            }
            let n = tokio::time::timeout(DEADLINE, self.s.read_buf(&mut self.buf)).await.expect("the broker answered nothing in time");
            if !matches!(n, Ok(n) if n > 0) {
                return None;
            }
        }
    }

    /// PINGREQ, then what came first: `true` for PINGRESP (everything sent before was handled
    /// and the connection is open), `false` when the broker closed it.
    async fn still_open(&mut self) -> bool {
        self.send(Packet::PingReq).await;
        loop {
            match self.recv().await {
                Some(Packet::PingResp) => return true,
                Some(_) => {}
                None => return false,
            }
        }
    }

    async fn subscribe(&mut self, filters: &[&str]) -> Vec<SubscribeReasonCode> {
        let sub = Subscribe::new_many(filters.iter().map(|f| SubscribeFilter::new(f.to_string(), QoS::AtMostOnce)));
        self.send(Packet::Subscribe(sub)).await;
        loop {
            match self.recv().await.expect("connection closed instead of a SUBACK") {
                Packet::SubAck(a) => return a.return_codes,
                _ => continue,
            }
        }
    }

    async fn publish(&mut self, topic: &str, payload: &str, retain: bool) {
        let mut p = Publish::new(topic, QoS::AtLeastOnce, payload);
        p.pkid = 1;
        p.retain = retain;
        self.send(Packet::Publish(p)).await;
    }
}

fn broker_port(hub: &HubProcess) -> u16 {
    let url = mcpdev::mqtt::conn::BrokerUrl::parse(hub.info["mqtt"].as_str().expect("the hub runs MQTT")).unwrap();
    url.port
}

async fn volume(hub: &HubProcess) -> Value {
    let out = mcpdev(hub, &["call", "self.get_device_status", "-d", D1, "--json"]).await;
    assert_eq!(out.code, 0, "{out:?}");
    let text: Value = serde_json::from_str(out.json()["content"][0]["text"].as_str().unwrap()).unwrap();
    text["audio_speaker"]["volume"].clone()
}

/// Issue 10 item 1: one PUBLISH to `é/x` panicked inside rumqttc's `matches` under the state
/// mutex and killed the broker for good. Every bad topic, filter and will, then: a new client
/// still gets its CONNACK and the device is still callable through the hub.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_topic_filter_or_will_kills_the_embedded_broker() {
    let hub = HubProcess::start(&["--mqtt", "embedded", "--mqtt-listen", "127.0.0.1:0"], &[]).await;
    let port = broker_port(&hub);
    let _sim = spawn_mcpdev(&["sim", "--mqtt", hub.info["mqtt"].as_str().unwrap()], &[]);
    assert_eq!(mcpdev(&hub, &["hello", "-d", D1, "--wait", "10s"]).await.code, 0);

    // A watcher of every topic: valid multi-byte topics reach it, invalid ones never do.
    let (mut watcher, code) = Raw::connect(port, "watcher", None, None).await;
    assert_eq!(code, Some(ConnectReturnCode::Success));
    assert_eq!(watcher.subscribe(&["+/x", "é/#"]).await, [SubscribeReasonCode::Success(QoS::AtMostOnce); 2]);

    for (i, topic) in ["é/x", "+/x", "a/#/b", "#", "a/\u{0}/x", "€", "\u{10FFFF}/+"].into_iter().enumerate() {
        for retain in [false, true] {
            let (mut c, code) = Raw::connect(port, &format!("evil-{i}-{retain}"), None, None).await;
            assert_eq!(code, Some(ConnectReturnCode::Success));
            c.publish(topic, "boom", retain).await;
            let valid = mcpdev::mqtt::broker::topic::valid_name(topic).is_ok();
            assert_eq!(c.still_open().await, valid, "a PUBLISH to {topic:?} (retain {retain}): the connection stays open only for a valid topic");
        }
    }
    let (mut c, _) = Raw::connect(port, "filters", None, None).await;
    let codes = c.subscribe(&["a/#/b", "é/+", "a+", "\u{0}", "$share/g+/x", "mcpdev/down/+"]).await;
    let (ok, no) = (SubscribeReasonCode::Success(QoS::AtMostOnce), SubscribeReasonCode::Failure);
    assert_eq!(codes, [no, ok, no, no, no, ok], "0x80 for each invalid filter only");
    assert!(c.still_open().await, "an invalid filter does not close the connection");
    for topic in ["+/x", "a/#", "a/\u{0}", "é/+"] {
        let (_, code) = Raw::connect(port, "will", None, Some(LastWill::new(topic, "bye", QoS::AtMostOnce, true))).await;
        assert_ne!(code, Some(ConnectReturnCode::Success), "a will to {topic:?} is refused at CONNECT");
    }
    // A valid will to a multi-byte topic, dropped without DISCONNECT: it is delivered.
    let (will, code) = Raw::connect(port, "will-ok", None, Some(LastWill::new("é/x", "bye", QoS::AtMostOnce, false))).await;
    assert_eq!(code, Some(ConnectReturnCode::Success));
    drop(will);

    let mut seen = Vec::new();
    while seen.len() < 3 {
        match watcher.recv().await.expect("the watcher stays connected") {
            Packet::Publish(p) => seen.push((p.topic, String::from_utf8_lossy(&p.payload).into_owned())),
            _ => continue,
        }
    }
    assert_eq!(seen, [("é/x".to_string(), "boom".to_string()), ("é/x".into(), "boom".into()), ("é/x".into(), "bye".into())], "only the valid topic and the will");

    let (_, code) = Raw::connect(port, "after", None, None).await;
    assert_eq!(code, Some(ConnectReturnCode::Success), "a new client still gets its CONNACK");
    let call = mcpdev(&hub, &["call", "self.audio_speaker.set_volume", "volume=9", "-d", D1]).await;
    assert_eq!(call.code, 0, "the MQTT device is still callable through the hub: {call:?}");
    assert_eq!(volume(&hub).await, 9);
}

/// Issue 10 item 4 (the broker part): with device tokens, a client holding one is a device and
/// has only its own uplink and downlink; the hub (its own credential) and the CLI straight
/// through the broker (the hub's credential file) keep working.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_device_client_cannot_read_or_drive_other_devices() {
    let runtime = tempfile::tempdir().unwrap();
    let rt = runtime.path().to_str().unwrap();
    let env = [("MCPDEV_RUNTIME_DIR", rt)];
    let hub = HubProcess::start(&["--mqtt", "embedded", "--mqtt-listen", "127.0.0.1:0", "--device-token", "tok"], &env).await;
    let port = broker_port(&hub);
    let broker = hub.info["mqtt"].as_str().unwrap().to_string();
    assert!(!broker.contains('@'), "the broker URL shown carries no credential: {broker}");
    let _sim = spawn_mcpdev(&["sim", "--mqtt", &broker], &[("MCPDEV_MQTT_PASSWORD", "tok")]);
    assert_eq!(mcpdev(&hub, &["hello", "-d", D1, "--wait", "10s"]).await.code, 0);
    let victim = topics::key_for(D1).unwrap();
    let me = topics::key_for("02:00:00:00:00:66").unwrap();

    assert_eq!(Raw::connect(port, &me, None, None).await.1, Some(ConnectReturnCode::BadUserNamePassword), "no token");
    assert_eq!(Raw::connect(port, &me, Some("wrong"), None).await.1, Some(ConnectReturnCode::BadUserNamePassword));
    assert_eq!(Raw::connect(port, "sniffer", Some("tok"), None).await.1, Some(ConnectReturnCode::BadClientId), "not a device's client id");
    let foreign_will = LastWill::new(topics::downlink(&victim), "x", QoS::AtMostOnce, false);
    assert_ne!(Raw::connect(port, &me, Some("tok"), Some(foreign_will)).await.1, Some(ConnectReturnCode::Success), "a will to another device's downlink");

    let (mut evil, code) = Raw::connect(port, &me, Some("tok"), None).await;
    assert_eq!(code, Some(ConnectReturnCode::Success));
    let codes = evil.subscribe(&["#", &topics::downlink(&victim), "mcpdev/up/+", "$share/g/mcpdev/up/+", &topics::downlink(&me)]).await;
    let (ok, no) = (SubscribeReasonCode::Success(QoS::AtMostOnce), SubscribeReasonCode::Failure);
    assert_eq!(codes, [no, no, no, no, ok], "only its own downlink");
    // Its own uplink is fine (the connection stays open).
    evil.publish(&topics::uplink(&me), "{}", false).await;
    assert!(evil.still_open().await);
    // Another device's downlink: dropped and disconnected; the PINGREQ after it orders this
    // before the hub's own call below.
    let call = json!({"session_id": "", "type": "mcp", "payload": {"jsonrpc": "2.0", "id": 77, "method": "tools/call", "params": {"name": "self.audio_speaker.set_volume", "arguments": {"volume": 3}}}});
    evil.publish(&topics::downlink(&victim), &call.to_string(), false).await;
    assert!(!evil.still_open().await, "publishing to another device's downlink disconnects");
    assert_eq!(volume(&hub).await, 70, "the other device received nothing (its volume is unchanged)");

    // The CLI straight through the broker, as the hub (credential file of this user's hub).
    let direct = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcpdev"))
        .args(["call", "self.audio_speaker.set_volume", "volume=5", "--mqtt", &broker, "-d", D1])
        .env("MCPDEV_HUB", "http://127.0.0.1:9")
        .env("MCPDEV_RUNTIME_DIR", rt)
        .env_remove("MCPDEV_MQTT_PASSWORD")
        .kill_on_drop(true)
        .output();
    let direct = tokio::time::timeout(Duration::from_secs(60), direct).await.unwrap().unwrap();
    assert!(direct.status.success(), "{}", String::from_utf8_lossy(&direct.stderr));
    assert_eq!(volume(&hub).await, 5);
    // Another user (no credential file) is refused with a clear error.
    let elsewhere = tempfile::tempdir().unwrap();
    let refused = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcpdev"))
        .args(["call", "self.get_device_status", "--mqtt", &broker, "-d", D1, "--timeout", "5s"])
        .env("MCPDEV_HUB", "http://127.0.0.1:9")
        .env("MCPDEV_RUNTIME_DIR", elsewhere.path())
        .env_remove("MCPDEV_MQTT_PASSWORD")
        .kill_on_drop(true)
        .output();
    let refused = tokio::time::timeout(Duration::from_secs(60), refused).await.unwrap().unwrap();
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success() && stderr.contains("refused"), "{stderr}");
}

/// Every file of `fuzz/corpus/broker_packets/` (with the crashes found) through the fuzz entry point.
#[test]
fn the_broker_fuzz_corpus_replays_clean() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/broker_packets");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        mcpdev::mqtt::broker::fuzz_packets(&std::fs::read(&path).unwrap());
        n += 1;
    }
    assert!(n >= 10, "the corpus is there ({n} files)");
}
