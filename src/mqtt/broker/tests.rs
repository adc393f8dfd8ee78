//! The routing state with in-memory queues: roles, limits, wills, kicks.

use bytes::Bytes;
use rumqttc::mqttbytes::QoS;
use rumqttc::mqttbytes::v4::{Connect, ConnectReturnCode, LastWill, Packet, Publish, Subscribe, SubscribeFilter, SubscribeReasonCode, Unsubscribe};
use tokio::sync::{mpsc, oneshot};

use super::state::{Limits, Next, State, shared_filter};
use super::{Role, fuzz_packets};

const DEV: &str = "GID_mcpdev@@@aa_bb_cc_dd_ee_01";
const OTHER: &str = "GID_mcpdev@@@aa_bb_cc_dd_ee_02";

struct C {
    id: String,
    conn: u64,
    rx: mpsc::Receiver<Packet>,
    kick: oneshot::Receiver<()>,
}

impl C {
    fn drain(&mut self) -> Vec<Packet> {
        std::iter::from_fn(|| self.rx.try_recv().ok()).collect()
    }

    fn topics(&mut self) -> Vec<String> {
        self.drain().into_iter().filter_map(|p| if let Packet::Publish(p) = p { Some(p.topic) } else { None }).collect()
    }
}

fn join(s: &mut State, id: &str, role: Role, will: Option<LastWill>) -> Result<C, ConnectReturnCode> {
    let mut connect = Connect::new(id);
    connect.last_will = will;
    let (tx, rx) = mpsc::channel(s.limits().queue_for(&role));
    let (k, kick) = oneshot::channel();
    let conn = s.connect(id, &connect, role, tx, k).map_err(|(code, _)| code)?;
    let mut c = C { id: id.into(), conn, rx, kick };
    assert!(matches!(c.drain().as_slice(), [Packet::ConnAck(_)]));
    Ok(c)
}

fn device(id: &str) -> Role {
    Role::Device { client_id: id.into() }
}

fn publish(s: &mut State, c: &C, topic: &str, retain: bool) -> Next {
    let mut p = Publish::new(topic, QoS::AtMostOnce, "x");
    p.retain = retain;
    s.handle(&c.id, c.conn, Packet::Publish(p))
}

fn subscribe(s: &mut State, c: &mut C, filters: &[&str]) -> Vec<SubscribeReasonCode> {
    let sub = Subscribe::new_many(filters.iter().map(|f| SubscribeFilter::new(f.to_string(), QoS::AtMostOnce)));
    assert_eq!(s.handle(&c.id, c.conn, Packet::Subscribe(sub)), Next::Continue);
    match c.drain().first() {
        Some(Packet::SubAck(a)) => a.return_codes.clone(),
        other => panic!("no SUBACK: {other:?}"),
    }
}

const OK: SubscribeReasonCode = SubscribeReasonCode::Success(QoS::AtMostOnce);
const NO: SubscribeReasonCode = SubscribeReasonCode::Failure;

#[test]
fn invalid_topics_close_the_publisher_and_fail_in_subscribe_and_nothing_else_is_hurt() {
    let mut s = State::new(Limits::default());
    let mut hub = join(&mut s, "hub", Role::Hub, None).unwrap();
    assert_eq!(subscribe(&mut s, &mut hub, &["#", "+/x", "é/#"]), [OK, OK, OK]);
    for bad in ["é/x\0", "+/x", "a/#/b", "#", "a\0", ""] {
        let c = join(&mut s, "bad", Role::Hub, None).unwrap();
        assert!(matches!(publish(&mut s, &c, bad, false), Next::Close(_)), "{bad:?}");
        assert!(matches!(publish(&mut s, &c, bad, true), Next::Close(_)), "{bad:?} retained");
        s.end("bad", c.conn, false);
    }
    for bad in ["é/x\0", "a/#/b", "a#", "+a/x", "a\0", ""] {
        let mut c = join(&mut s, "bad", Role::Hub, None).unwrap();
        assert_eq!(subscribe(&mut s, &mut c, &[bad, "a/b"]), [NO, OK], "{bad:?}");
        s.end("bad", c.conn, false);
    }
    assert_eq!(subscribe(&mut s, &mut hub, &["a/#/b", "a+", "$share/g+/x", "$share/g/", "$share/g/a/#"]), [NO, NO, NO, NO, OK]);
    assert!(hub.topics().is_empty(), "no invalid topic was delivered");
    let c = join(&mut s, "good", Role::Hub, None).unwrap();
    assert_eq!(publish(&mut s, &c, "é/x", false), Next::Continue);
    assert_eq!(hub.topics(), ["é/x"], "a multi-byte topic is routed like any other");
}

#[test]
fn invalid_or_foreign_wills_refuse_the_connect() {
    let mut s = State::new(Limits::default());
    for topic in ["é/x\0", "+/x", "a/#/b"] {
        let will = LastWill::new(topic, "bye", QoS::AtMostOnce, true);
        assert_eq!(join(&mut s, "w", Role::Hub, Some(will)).err(), Some(ConnectReturnCode::NotAuthorized), "{topic:?}");
    }
    let foreign = LastWill::new(format!("mcpdev/up/{OTHER}"), "bye", QoS::AtMostOnce, false);
    assert_eq!(join(&mut s, DEV, device(DEV), Some(foreign)).err(), Some(ConnectReturnCode::NotAuthorized));
    let mut hub = join(&mut s, "hub", Role::Hub, None).unwrap();
    subscribe(&mut s, &mut hub, &["#"]);
    let own = LastWill::new(format!("mcpdev/up/{DEV}"), "bye", QoS::AtMostOnce, false);
    let d = join(&mut s, DEV, device(DEV), Some(own.clone())).unwrap();
    s.end(DEV, d.conn, false);
    assert_eq!(hub.topics(), [format!("mcpdev/up/{DEV}")], "the will goes out when the connection drops");
    let d = join(&mut s, DEV, device(DEV), Some(own)).unwrap();
    s.end(DEV, d.conn, true);
    assert!(hub.topics().is_empty(), "no will after DISCONNECT");
}

#[test]
fn a_device_uses_only_its_own_uplink_and_downlink() {
    let mut s = State::new(Limits::default());
    let mut hub = join(&mut s, "hub", Role::Hub, None).unwrap();
    subscribe(&mut s, &mut hub, &["$share/mcpdev/mcpdev/up/+"]);
    let mut other = join(&mut s, OTHER, device(OTHER), None).unwrap();
    let mut d = join(&mut s, DEV, device(DEV), None).unwrap();
    let codes = subscribe(&mut s, &mut d, &["#", &format!("mcpdev/down/{OTHER}"), "mcpdev/down/+", &format!("mcpdev/down/{DEV}"), "$share/x/#"]);
    assert_eq!(codes, [NO, NO, NO, OK, NO]);
    assert!(matches!(publish(&mut s, &d, &format!("mcpdev/down/{OTHER}"), false), Next::Close(_)));
    assert!(other.topics().is_empty(), "the other device got nothing");
    assert_eq!(publish(&mut s, &d, &format!("mcpdev/up/{DEV}"), false), Next::Continue);
    assert_eq!(hub.topics(), [format!("mcpdev/up/{DEV}")]);
    assert_eq!(publish(&mut s, &hub, &format!("mcpdev/down/{DEV}"), false), Next::Continue);
    assert_eq!(d.topics(), [format!("mcpdev/down/{DEV}")], "the auto-subscription to its downlink");
    assert!(other.topics().is_empty());
}

/// A stopping hub waits for this before its process (and the broker in it) ends: its goodbye to
/// a device is routed (the hub's DISCONNECT came after it) and taken by the device's writer.
#[test]
fn flushed_only_once_the_hub_left_and_every_queue_was_taken() {
    let mut s = State::new(Limits::default());
    let hub = join(&mut s, "hub", Role::Hub, None).unwrap();
    let mut d = join(&mut s, DEV, device(DEV), None).unwrap();
    assert!(!s.flushed_after("hub"), "the hub is still connected");
    assert_eq!(publish(&mut s, &hub, &format!("mcpdev/down/{DEV}"), false), Next::Continue);
    assert_eq!(s.handle(&hub.id, hub.conn, Packet::Disconnect), Next::Goodbye);
    s.end(&hub.id, hub.conn, true);
    assert!(!s.flushed_after("hub"), "the goodbye still waits in the device's queue");
    assert_eq!(d.topics(), [format!("mcpdev/down/{DEV}")]);
    assert!(s.flushed_after("hub"));
}

#[test]
fn what_a_client_can_make_the_broker_hold_is_bounded() {
    let limits = Limits { max_clients: 3, max_subscriptions: 3, max_group_members: 1, max_retained: 2, max_retained_bytes: 1000, hub_queue: 4, device_queue: 2 };
    let mut s = State::new(limits);
    let mut a = join(&mut s, "a", Role::Hub, None).unwrap();
    // The auto-subscription to `mcpdev/down/a` is the first of its 3.
    assert_eq!(subscribe(&mut s, &mut a, &["1", "2", "3", "1"]), [OK, OK, NO, OK], "3 subscriptions, a repeat is no new one");
    let mut b = join(&mut s, "b", Role::Hub, None).unwrap();
    assert_eq!(subscribe(&mut s, &mut b, &["$share/g/x"]), [OK]);
    let mut c = join(&mut s, "c", Role::Hub, None).unwrap();
    assert_eq!(subscribe(&mut s, &mut c, &["$share/g/x"]), [NO], "the group is full");
    assert_eq!(join(&mut s, "d", Role::Hub, None).err(), Some(ConnectReturnCode::ServiceUnavailable));
    for t in ["r1", "r2", "r3"] {
        assert_eq!(publish(&mut s, &c, t, true), Next::Continue);
    }
    assert_eq!(s.retained_count(), 2, "the third retained message is not kept");
    publish(&mut s, &c, "r1", false);
    let mut empty = Publish::new("r1", QoS::AtMostOnce, Bytes::new());
    empty.retain = true;
    s.handle("c", c.conn, Packet::Publish(empty));
    assert_eq!(s.retained_count(), 1, "an empty retained message clears one");
    // `a` does not read: its queue (4) fills and it is kicked; the others keep getting theirs.
    assert_eq!(subscribe(&mut s, &mut b, &["1"]), [OK]);
    let mut got = 0;
    for _ in 0..6 {
        publish(&mut s, &c, "1", false);
        got += b.topics().len();
    }
    assert!(a.kick.try_recv().is_ok(), "the client that does not read is disconnected");
    assert_eq!(got, 6, "routing to the others went on");
    assert!(matches!(s.handle("a", a.conn, Packet::PingReq), Next::Close(_)));
    assert_eq!(s.client_count(), 2);
}

/// Floods a device can send: retained uplinks are not kept (so a flood holds nothing and no hub
/// gets a stale one later), and QoS 2 publishes are answered without the broker holding any
/// state, until the device stops reading its answers and is disconnected.
#[test]
fn a_device_cannot_make_the_broker_keep_retained_or_qos2_state() {
    let mut s = State::new(Limits::default());
    let dev = join(&mut s, DEV, device(DEV), None).unwrap();
    let up = format!("mcpdev/up/{DEV}");
    for _ in 0..100 {
        assert_eq!(publish(&mut s, &dev, &up, true), Next::Continue);
    }
    assert_eq!(s.retained_count(), 0, "a device's retained uplink is not kept");
    let mut hub = join(&mut s, "hub", Role::Hub, None).unwrap();
    assert_eq!(subscribe(&mut s, &mut hub, &["mcpdev/up/+"]), [OK]);
    assert!(hub.topics().is_empty(), "a hub subscribing later gets no stale uplink");
    let mut next = Next::Continue;
    for pkid in 1..=(Limits::default().device_queue as u16 + 10) {
        let mut p = Publish::new(&up, QoS::ExactlyOnce, "x");
        p.pkid = pkid;
        next = s.handle(DEV, dev.conn, Packet::Publish(p));
        if next != Next::Continue {
            break;
        }
    }
    assert!(matches!(next, Next::Close(_)), "a device that never reads its PUBRECs is disconnected: {next:?}");
}

#[test]
fn takeover_and_unsubscribe() {
    let mut s = State::new(Limits::default());
    let mut first = join(&mut s, "x", Role::Hub, None).unwrap();
    subscribe(&mut s, &mut first, &["t", "$share/g/t"]);
    s.handle("x", first.conn, Packet::Unsubscribe(Unsubscribe::new("t")));
    assert!(matches!(first.drain().as_slice(), [Packet::UnsubAck(_)]));
    let mut second = join(&mut s, "x", Role::Hub, None).unwrap();
    assert!(first.kick.try_recv().is_ok(), "the old connection is kicked");
    s.end("x", first.conn, false);
    assert_eq!(s.client_count(), 1, "the old connection's end does not remove the new one");
    let p = join(&mut s, "p", Role::Hub, None).unwrap();
    publish(&mut s, &p, "t", false);
    assert!(second.topics().is_empty(), "subscriptions are not carried over (clean session)");
    assert_eq!(shared_filter("$share/hubs/mcpdev/up/+"), Some(("hubs", "mcpdev/up/+")));
    assert_eq!(shared_filter("mcpdev/up/+"), None);
    assert_eq!(shared_filter("$share//x"), None);
}

#[test]
fn the_fuzz_entry_point_takes_any_bytes() {
    fuzz_packets(&[]);
    fuzz_packets(&[0, 255]);
    for seed in 0..200u64 {
        let mut rng = fastrand::Rng::with_seed(seed);
        let data: Vec<u8> = (0..rng.usize(0..600)).map(|_| rng.u8(..)).collect();
        fuzz_packets(&data);
    }
}

/// Writes the seed corpus of the fuzz target (`cargo test --lib write_broker_fuzz_seeds -- --ignored`):
/// real CONNECT/SUBSCRIBE/PUBLISH/UNSUBSCRIBE/DISCONNECT bytes in the framing of
/// [`fuzz_packets`], with the `é/x` case among them.
#[test]
#[ignore]
fn write_broker_fuzz_seeds() {
    use rumqttc::mqttbytes::v4::Login;
    fn frame(out: &mut Vec<u8>, op: u8, packets: &[Packet]) {
        let mut b = bytes::BytesMut::new();
        for p in packets {
            p.write(&mut b, 4096).unwrap();
        }
        assert!(b.len() <= 255);
        out.extend([op, b.len() as u8]);
        out.extend_from_slice(&b);
    }
    let connect = |id: &str, user: &str, pass: Option<&str>, will: Option<LastWill>| {
        let mut c = Connect::new(id);
        c.login = pass.map(|p| Login::new(user, p));
        c.last_will = will;
        Packet::Connect(c)
    };
    let sub = |fs: &[&str]| Packet::Subscribe(Subscribe::new_many(fs.iter().map(|f| SubscribeFilter::new(f.to_string(), QoS::AtMostOnce))));
    let publ = |t: &str, retain: bool, qos: QoS| {
        let mut p = Publish::new(t, qos, "{\"type\":\"hello\"}");
        p.retain = retain;
        p.pkid = if qos == QoS::AtMostOnce { 0 } else { 7 };
        Packet::Publish(p)
    };
    let hub = connect("mcpdev-hub-1", "mcpdev-hub", Some("hubpw"), None);
    let up = format!("mcpdev/up/{DEV}");
    let dev = connect(DEV, "", Some("tok"), Some(LastWill::new(&up, "gone", QoS::AtMostOnce, false)));
    let other = connect(OTHER, "", Some("tok"), None);
    let mut seeds: Vec<Vec<u8>> = Vec::new();
    // The case: a hub-role subscriber, then PUBLISH to é/x.
    let mut s = Vec::new();
    frame(&mut s, 0, &[hub.clone(), sub(&["mcpdev/hubs/+", "#", "+/x"])]);
    frame(&mut s, 0, &[publ("é/x", false, QoS::AtMostOnce), publ("é/x", true, QoS::AtLeastOnce)]);
    seeds.push(s);
    // Devices: own topics, other topics, wills, takeover, unsubscribe, goodbye.
    let mut s = Vec::new();
    frame(&mut s, 0, &[hub.clone(), sub(&["$share/mcpdev/mcpdev/up/+", "mcpdev/claims/+"])]);
    frame(&mut s, 1, &[dev.clone(), publ(&up, false, QoS::AtMostOnce), sub(&["#", &format!("mcpdev/down/{DEV}")])]);
    frame(&mut s, 2, &[other.clone(), publ(&format!("mcpdev/down/{DEV}"), false, QoS::AtMostOnce)]);
    frame(&mut s, 0, &[publ(&format!("mcpdev/down/{DEV}"), false, QoS::ExactlyOnce), Packet::PubRel(rumqttc::mqttbytes::v4::PubRel::new(7))]);
    frame(&mut s, 1 | 4, &[]);
    frame(&mut s, 3, std::slice::from_ref(&dev));
    frame(&mut s, 0, &[Packet::Unsubscribe(Unsubscribe::new("$share/mcpdev/mcpdev/up/+")), Packet::PingReq, Packet::Disconnect]);
    seeds.push(s);
    // Invalid topics, filters and wills.
    let mut s = Vec::new();
    frame(&mut s, 0, &[hub.clone(), sub(&["a/#/b", "a+", "\0", "$share/g+/x", "$share//x", "é/#"])]);
    frame(&mut s, 1, &[connect("GID_x@@@aa_bb_cc_dd_ee_03", "", Some("tok"), Some(LastWill::new("a/\0", "x", QoS::AtMostOnce, true)))]);
    frame(&mut s, 2, &[connect("sniffer", "", Some("tok"), None)]);
    frame(&mut s, 3, &[connect("x", "mcpdev-hub", Some("nope"), None)]);
    frame(&mut s, 0, &[publ("+/x", false, QoS::AtMostOnce)]);
    seeds.push(s);
    // Retained messages and a subscriber that stops reading.
    let mut s = Vec::new();
    frame(&mut s, 0, &[hub.clone(), publ("r/1", true, QoS::AtMostOnce), publ("r/2", true, QoS::AtMostOnce), publ("r/é", true, QoS::AtMostOnce)]);
    frame(&mut s, 1, &[connect("mcpdev-hub-2", "mcpdev-hub", Some("hubpw"), None), sub(&["r/#"])]);
    for _ in 0..6 {
        frame(&mut s, 0, &[publ("r/3", false, QoS::AtMostOnce), publ("r/1", true, QoS::AtMostOnce)]);
    }
    frame(&mut s, 1 | 8, &[]);
    seeds.push(s);
    // Each packet alone for client 0 after a hub login.
    for p in [sub(&["+"]), publ("$SYS/x", false, QoS::AtMostOnce), Packet::PingReq, Packet::Disconnect, publ("a", true, QoS::AtLeastOnce)] {
        let mut s = Vec::new();
        frame(&mut s, 0, &[hub.clone(), p]);
        seeds.push(s);
    }
    for p in [dev, other, hub] {
        let mut s = Vec::new();
        frame(&mut s, 0, &[p]);
        seeds.push(s);
    }
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/broker_packets");
    std::fs::create_dir_all(&dir).unwrap();
    for (i, s) in seeds.iter().enumerate() {
        fuzz_packets(s);
        std::fs::write(dir.join(format!("seed-{i:02}")), s).unwrap();
    }
}
