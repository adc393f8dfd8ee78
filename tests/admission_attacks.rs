//! Admission against a stranger who knows the MAC (issue 22, defects 1, 2, 3, 6, 10, 11), each
//! over the hub's real listeners: the OTA takeover, approval by Device-Id, revocation on every
//! path (WebSocket, embedded broker, Mosquitto, vision), the pending-list flood, both activation
//! styles, and gateways.

mod common;

use common::mqtt::{Mosquitto, MqttDevice};
use common::ota::{check_in_as, http};
use common::ws::{closed, device_upgrade as ws, refused};
use common::{HubProcess, Outcome, mcpdev};
use serde_json::{Value, json};

const VICTIM: &str = "aa:bb:cc:00:22:01";
const VICTIM_UUID: &str = "11111111-2222-4333-8444-555555555555";
const THIEF_UUID: &str = "66666666-7777-4888-8999-aaaaaaaaaaaa";

async fn ok(hub: &HubProcess, args: &[&str]) -> Outcome {
    let out = mcpdev(hub, args).await;
    assert_eq!(out.code, 0, "mcpdev {args:?}: {out:?}");
    out
}

async fn pending(hub: &HubProcess) -> Vec<Value> {
    ok(hub, &["devices", "pending", "--json"]).await.json().as_array().cloned().unwrap()
}

async fn activate(hub: &HubProcess, device: &str, client_id: &str) -> u16 {
    http(hub, "POST", "/xiaozhi/ota/activate", &[("Device-Id", device), ("Client-Id", client_id)], "{}").await.0
}

fn token_of(answer: &Value) -> String {
    answer["websocket"]["token"].as_str().unwrap_or_else(|| panic!("no websocket.token in {answer}")).to_string()
}

/// Defect 1: the thief checks in with the victim's MAC and its own Client-Id. It gets a request of
/// its own; approving the code on the victim's screen lets in the victim only, at every step.
#[tokio::test]
async fn a_stranger_with_the_victims_mac_never_gets_the_victims_approval() {
    let hub = HubProcess::start_admitting(&[], &[]).await;
    let victim = check_in_as(&hub, "hub.lan:8000", VICTIM, VICTIM_UUID).await;
    let code = victim["activation"]["code"].as_str().unwrap().to_string();
    let thief = check_in_as(&hub, "hub.lan:8000", VICTIM, THIEF_UUID).await;
    let thief_code = thief["activation"]["code"].as_str().unwrap().to_string();
    assert_ne!(thief_code, code, "the thief's check-in is another request, not a refresh of the victim's");

    // The person approving sees both, side by side, flagged.
    let list = pending(&hub).await;
    let mine = list.iter().find(|p| p["code"] == code.as_str()).unwrap();
    assert_eq!(mine["client_id"], VICTIM_UUID, "the victim's request keeps the victim's Client-Id: {mine}");
    assert!(mine["conflicts"][0].as_str().unwrap().contains(&thief_code), "{mine}");
    let human = ok(&hub, &["devices", "pending"]).await;
    assert!(human.stderr.contains("conflict"), "the table warns: {human:?}");

    ok(&hub, &["devices", "approve", &code]).await;
    assert_eq!(activate(&hub, VICTIM, THIEF_UUID).await, 202, "the thief's poll does not see the victim's approval");
    assert_eq!(activate(&hub, VICTIM, VICTIM_UUID).await, 200);
    let thief_again = check_in_as(&hub, "hub.lan:8000", VICTIM, THIEF_UUID).await;
    assert!(thief_again["activation"]["code"].is_string(), "{thief_again}");
    for token in [token_of(&thief), token_of(&thief_again)] {
        assert_eq!(ws(&hub, VICTIM, THIEF_UUID, Some(&token)).await.err().map(|e| e.0), Some(401), "the thief's tokens open nothing");
    }
    let _victim = ws(&hub, VICTIM, VICTIM_UUID, Some(&token_of(&victim))).await.expect("the victim is in with its first answer's token");

    // Approving the thief's request would re-bind the device: refused without --rebind, and says why.
    let out = mcpdev(&hub, &["devices", "approve", &thief_code]).await;
    assert_eq!(out.code, 2, "{out:?}");
    assert!(out.stderr.contains("--rebind") && out.stderr.contains(THIEF_UUID), "{out:?}");
}

/// Defect 1, variant: a WebSocket-only device waits with a code; the thief's OTA check-in for that
/// MAC does not turn the request into one whose token it collects.
#[tokio::test]
async fn an_ota_check_in_does_not_take_over_a_websocket_request() {
    let hub = HubProcess::start_admitting(&[], &[]).await;
    const DEV: &str = "aa:bb:cc:00:22:02";
    let (status, body) = refused(ws(&hub, DEV, VICTIM_UUID, None).await);
    assert_eq!(status, 401);
    let thief = check_in_as(&hub, "hub.lan:8000", DEV, THIEF_UUID).await;
    let list = pending(&hub).await;
    let ws_request = list.iter().find(|p| p["via"] == "websocket" && p["device_id"] == DEV).expect("the WebSocket request is still there");
    let code = ws_request["code"].as_str().unwrap();
    assert!(body.contains(code), "{body}");
    let token = ok(&hub, &["devices", "approve", code]).await.stdout.trim().to_string();
    assert_eq!(token.len(), 32, "a WebSocket request's approval prints its token");
    let thief_again = check_in_as(&hub, "hub.lan:8000", DEV, THIEF_UUID).await;
    for t in [token_of(&thief), token_of(&thief_again)] {
        assert_ne!(t, token);
    }
    assert!(thief_again["activation"]["code"].is_string(), "{thief_again}");
    ws(&hub, DEV, VICTIM_UUID, Some(&token)).await.expect("the device is in with the printed token");
}

/// Defect 2: after an approval by Device-Id, no OTA check-in gets the token, with any Client-Id or
/// none; and re-binding an admitted device needs --rebind, after which the old token is dead.
#[tokio::test]
async fn an_approval_by_device_id_never_hands_the_token_out_over_ota() {
    let hub = HubProcess::start_admitting(&[], &[]).await;
    const DEV: &str = "aa:bb:cc:00:22:03";
    let token = ok(&hub, &["devices", "approve", DEV]).await.stdout.trim().to_string();
    assert_eq!(token.len(), 32);
    for client in [VICTIM_UUID, THIEF_UUID, "", "x"] {
        let r = check_in_as(&hub, "hub.lan:8000", DEV, client).await;
        assert_ne!(r["websocket"]["token"].as_str(), Some(token.as_str()), "Client-Id {client:?} collected the token: {r}");
        assert!(r["activation"]["code"].is_string(), "{r}");
    }
    let (status, body) = http(&hub, "POST", "/xiaozhi/ota/", &[("Device-Id", DEV)], "{}").await;
    assert_eq!(status, 200);
    assert!(!String::from_utf8_lossy(&body).contains(&token), "a bare MAC check-in collected the token");

    let out = mcpdev(&hub, &["devices", "approve", DEV]).await;
    assert_eq!(out.code, 2, "already admitted: {out:?}");
    assert!(out.stderr.contains("--rebind"), "{out:?}");
    let mut live = ws(&hub, DEV, VICTIM_UUID, Some(&token)).await.expect("in with the token");
    let rebound = ok(&hub, &["devices", "approve", DEV, "--rebind"]).await;
    assert!(rebound.stderr.contains("replaced"), "says what it replaces: {rebound:?}");
    let new = rebound.stdout.trim().to_string();
    assert_ne!(new, token);
    closed(&mut live).await;
    assert_eq!(ws(&hub, DEV, VICTIM_UUID, Some(&token)).await.err().map(|e| e.0), Some(401), "the old token is dead");
    ws(&hub, DEV, VICTIM_UUID, Some(&new)).await.expect("the new one works");
}

/// Defect 10, both client styles, with MQTT on the embedded broker: py-xiaozhi checks in once,
/// polls /activate and connects with the first answer; stock firmware checks in again. Each is in
/// as soon as its code is approved; an impostor's settings never work.
#[tokio::test]
async fn both_activation_styles_finish_without_a_restart_and_an_impostor_gets_nothing() {
    let hub = HubProcess::start_admitting(&["--mqtt", "embedded", "--mqtt-listen", "127.0.0.1:0"], &[]).await;
    const PY: &str = "aa:bb:cc:00:22:10";
    let first = check_in_as(&hub, "hub.lan:8000", PY, VICTIM_UUID).await;
    let code = first["activation"]["code"].as_str().unwrap().to_string();
    let mqtt = &first["mqtt"];
    assert!(mqtt["password"].as_str().is_some_and(|p| !p.is_empty()), "the first answer carries MQTT settings: {first}");
    let impostor = check_in_as(&hub, "hub.lan:8000", PY, THIEF_UUID).await;
    let login = |m: &Value| broker_login(m);
    let refused = |m: &Value| {
        let url = login(m);
        let key = m["client_id"].as_str().unwrap().to_string();
        async move { mqtt_refused(&url, &key).await }
    };
    assert!(refused(mqtt).await, "refused before approval");
    assert_eq!(activate(&hub, PY, VICTIM_UUID).await, 202);
    ok(&hub, &["devices", "approve", &code]).await;
    assert_eq!(activate(&hub, PY, VICTIM_UUID).await, 200);
    assert!(refused(&impostor["mqtt"]).await, "the impostor's settings stay refused");
    // py-xiaozhi: no second check-in, straight to the broker with the first answer's login.
    let mut dev = MqttDevice::connect_to(&login(mqtt), mqtt["client_id"].as_str().unwrap()).await;
    dev.hello().await;
    dev.onboard(vec![json!({"name":"self.ping","description":"p","inputSchema":{"type":"object","properties":{}}})]).await;
    let _counts = dev.respond_forever(vec![json!({"name":"self.ping","description":"p","inputSchema":{"type":"object","properties":{}}})]);
    ok(&hub, &["call", "self.ping", "-d", PY, "--wait", "10s"]).await;

    // Stock firmware: `{}` to /activate, then it checks in again and gets its token.
    const STOCK: &str = "aa:bb:cc:00:22:11";
    let first = check_in_as(&hub, "hub.lan:8000", STOCK, VICTIM_UUID).await;
    let code = first["activation"]["code"].as_str().unwrap().to_string();
    ok(&hub, &["devices", "approve", &code]).await;
    assert_eq!(activate(&hub, STOCK, VICTIM_UUID).await, 200);
    let again = check_in_as(&hub, "hub.lan:8000", STOCK, VICTIM_UUID).await;
    assert!(again.get("activation").is_none(), "{again}");
    assert!(!refused(&again["mqtt"]).await, "the stock device's second check-in logs in");
}

/// The broker and login an OTA answer's `mqtt` block gives.
fn broker_login(m: &Value) -> mcpdev::mqtt::conn::BrokerUrl {
    let mut url = mcpdev::mqtt::conn::BrokerUrl::parse(&format!("mqtt://{}", m["endpoint"].as_str().unwrap())).unwrap();
    url.username = m["username"].as_str().map(str::to_string);
    url.password = m["password"].as_str().map(str::to_string);
    url
}

/// Whether the broker refuses this login (a CONNACK with an error, or the connection closed).
async fn mqtt_refused(url: &mcpdev::mqtt::conn::BrokerUrl, key: &str) -> bool {
    let (client, mut el) = rumqttc::AsyncClient::new(url.options(key, std::time::Duration::from_secs(30), 1 << 20), 8);
    let outcome = tokio::time::timeout(common::ws::DEADLINE, async {
        loop {
            match el.poll().await {
                Ok(rumqttc::Event::Incoming(rumqttc::Packet::ConnAck(a))) => return a.code != rumqttc::ConnectReturnCode::Success,
                Ok(_) => {}
                Err(_) => return true,
            }
        }
    })
    .await
    .expect("the broker answers the CONNECT");
    let _ = client.disconnect().await;
    outcome
}

/// Defect 3 on the embedded broker: a revoked MQTT device is kicked at once, its login refused,
/// its hello does not bring it back, and its vision token stops working.
#[tokio::test]
async fn a_revoked_mqtt_device_is_cut_off_on_the_embedded_broker() {
    let hub = HubProcess::start_admitting(&["--mqtt", "embedded", "--mqtt-listen", "127.0.0.1:0"], &[]).await;
    const DEV: &str = "aa:bb:cc:00:22:20";
    let first = check_in_as(&hub, "hub.lan:8000", DEV, VICTIM_UUID).await;
    ok(&hub, &["devices", "approve", first["activation"]["code"].as_str().unwrap()]).await;
    let m = &first["mqtt"];
    let url = broker_login(m);
    let mut dev = MqttDevice::connect_to(&url, m["client_id"].as_str().unwrap()).await;
    dev.hello().await;
    let tools = vec![json!({"name":"self.ping","description":"p","inputSchema":{"type":"object","properties":{}}})];
    let init = dev.recv_request("initialize").await;
    let vision = init["params"]["capabilities"]["vision"].clone();
    dev.reply(&init["id"], json!({"protocolVersion":"2024-11-05","capabilities":{"tools":{}},"serverInfo":{"name":"fake-mqtt","version":"1"}})).await;
    let list = dev.recv_request("tools/list").await;
    dev.reply(&list["id"], json!({"tools": tools})).await;
    let client = dev.client.clone();
    let key = dev.key.clone();
    let _counts = dev.respond_forever(tools);
    ok(&hub, &["call", "self.ping", "-d", DEV, "--wait", "10s"]).await;
    assert_eq!(vision_upload(&hub, DEV, vision["token"].as_str().unwrap()).await, 200, "the vision token works while admitted");

    let revoked = ok(&hub, &["devices", "revoke", DEV, "--json"]).await.json();
    assert_eq!(revoked["disconnected"], true, "{revoked}");
    // Whatever the device publishes now (a hello on its old connection, if it had one) reaches no link.
    let _ = client.publish(mcpdev::mqtt::topics::uplink(&key), rumqttc::QoS::AtMostOnce, false, json!({"type":"hello","version":3,"transport":"udp"}).to_string()).await;
    assert!(mqtt_refused(&url, &key).await, "its later CONNECTs are refused");
    let out = mcpdev(&hub, &["call", "self.ping", "-d", DEV]).await;
    assert_eq!(out.code, 4, "a revoked device is unreachable: {out:?}");
    assert_eq!(vision_upload(&hub, DEV, vision["token"].as_str().unwrap()).await, 401, "its vision token is dead");
}

/// Defect 3 with Mosquitto: the hub cannot kick anyone there, so it serves no link for a revoked
/// device, even when it says hello again.
#[tokio::test]
async fn a_revoked_device_on_mosquitto_is_not_served_again() {
    let broker = Mosquitto::start().await;
    let hub = HubProcess::start_admitting(&["--mqtt", &broker.url()], &[]).await;
    const DEV: &str = "aa:bb:cc:00:22:21";
    ok(&hub, &["devices", "approve", DEV]).await;
    let tools = vec![json!({"name":"self.ping","description":"p","inputSchema":{"type":"object","properties":{}}})];
    let mut dev = MqttDevice::connect(&broker.url(), DEV).await;
    dev.hello().await;
    dev.onboard(tools.clone()).await;
    let uplink = (dev.client.clone(), dev.key.clone());
    let counts = dev.respond_forever(tools);
    ok(&hub, &["call", "self.ping", "-d", DEV, "--wait", "10s"]).await;
    ok(&hub, &["devices", "revoke", DEV]).await;
    let before = counts.get("initialize");
    uplink.0.publish(mcpdev::mqtt::topics::uplink(&uplink.1), rumqttc::QoS::AtMostOnce, false, json!({"type":"hello","version":3,"transport":"udp"}).to_string()).await.unwrap();
    let out = mcpdev(&hub, &["call", "self.ping", "-d", DEV, "--wait", "3s"]).await;
    assert_eq!(out.code, 4, "the revoked device is not served again after its hello: {out:?}");
    assert_eq!(counts.get("initialize"), before, "and it was not onboarded again");
}

async fn vision_upload(hub: &HubProcess, device: &str, token: &str) -> u16 {
    let boundary = "XBOUNDARY";
    let body = format!("--{boundary}\r\nContent-Disposition: form-data; name=\"question\"\r\n\r\nwhat?\r\n--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"camera.jpg\"\r\nContent-Type: image/jpeg\r\n\r\n\u{ff}\u{d8}x\r\n--{boundary}--\r\n");
    let ctype = format!("multipart/form-data; boundary={boundary}");
    let auth = format!("Bearer {token}");
    http(hub, "POST", "/mcp/vision/explain", &[("Device-Id", device), ("Authorization", &auth), ("Content-Type", &ctype)], &body).await.0
}

/// Defect 6: one peer floods check-ins with made-up MACs; it is slowed (429) and evicts only its
/// own requests, and the real device's code stays approvable.
#[tokio::test]
async fn a_flood_of_check_ins_cannot_push_out_a_real_devices_code() {
    let hub = HubProcess::start_admitting(&[], &[]).await;
    let real = check_in_as(&hub, "hub.lan:8000", VICTIM, VICTIM_UUID).await;
    let code = real["activation"]["code"].as_str().unwrap().to_string();
    let mut refused = 0;
    for i in 0..300u32 {
        let mac = format!("02:66:00:00:{:02x}:{:02x}", i / 256, i % 256);
        let (status, _) = http(&hub, "POST", "/xiaozhi/ota/", &[("Device-Id", &mac), ("Client-Id", "flood")], "{}").await;
        assert!(status == 200 || status == 429, "{status}");
        refused += usize::from(status == 429);
    }
    // 300 requests take far less than the minute the sustained rate (5/s after a burst of 20) needs.
    assert!(refused > 0, "the flood is slowed");
    let list = pending(&hub).await;
    assert!(list.len() <= 32 + 1, "the flood holds at most its share (32 per address): {} requests", list.len());
    assert!(list.iter().any(|p| p["code"] == code.as_str()), "the real device's code is still listed");
    ok(&hub, &["devices", "approve", &code]).await;
}

/// A stock check-in (`Device-Id`, `Client-Id`, `{}`) to the device listener from the loopback
/// address `from`: the whole answer.
async fn check_in_from(hub: &HubProcess, from: &str, device: &str, client_id: &str) -> common::raw_http::Answer {
    let to = common::raw_http::addr_of(&hub.device_url);
    common::raw_http::request(from, to, "POST", "/xiaozhi/ota/", &[("Device-Id", device), ("Client-Id", client_id), ("Content-Type", "application/json")], "{}").await
}

/// A 429's `Retry-After`, in seconds: present, and within a code's life.
fn retry_after(a: &common::raw_http::Answer) -> u64 {
    let s: u64 = a.header("retry-after").and_then(|v| v.parse().ok()).unwrap_or_else(|| panic!("a 429 without Retry-After: {a:?}"));
    assert!((1..=600).contains(&s), "Retry-After: {s}");
    s
}

/// Issue 31, defect 3: one OTA check-in from each of 1,000 source addresses (ten /24s of
/// 127.0.0.0/8), so that every address holds one request and the real device's address ties for
/// "busiest". Its code survives and approves; the flood is refused with 429 and `Retry-After` once
/// its networks (64 each) and then the hub (256 in all) are full, and the refusals are counted.
#[tokio::test]
async fn a_flood_from_a_thousand_addresses_spares_a_real_devices_code() {
    let hub = HubProcess::start_admitting(&[], &[]).await;
    let real = check_in_from(&hub, "127.0.0.1", VICTIM, VICTIM_UUID).await;
    assert_eq!(real.status, 200, "{real:?}");
    let code = real.json()["activation"]["code"].as_str().unwrap().to_string();
    let (mut held, mut refused) = (0, 0);
    for i in 0..1_000u32 {
        let from = format!("127.0.{}.{}", i / 100, i % 100 + 2);
        let mac = format!("02:66:00:00:{:02x}:{:02x}", i / 256, i % 256);
        let a = check_in_from(&hub, &from, &mac, "flood").await;
        match a.status {
            200 => held += 1,
            429 => {
                retry_after(&a);
                refused += 1;
            }
            other => panic!("{from}: {other} {a:?}"),
        }
    }
    assert_eq!(held + 1, 256, "the hub holds as many requests as it keeps, and no more");
    assert_eq!(refused, 1_000 - held);
    let list = pending(&hub).await;
    assert!(list.len() <= 256, "{} requests listed", list.len());
    assert!(list.iter().any(|p| p["code"] == code.as_str()), "the real device's code is still listed");
    assert!(hub.metric("mcpdev_refusals_total{reason=\"admission_network\"}").await >= 1.0, "refusals by network are counted");
    assert!(hub.metric("mcpdev_refusals_total{reason=\"admission_full\"}").await >= 1.0, "refusals of a full hub are counted");
    ok(&hub, &["devices", "approve", &code]).await;
    let after = check_in_from(&hub, "127.0.0.1", VICTIM, VICTIM_UUID).await.json();
    assert!(after["activation"].is_null() && after["websocket"]["token"].is_string(), "the approved device gets its token: {after}");
}

/// Many addresses of one /24 (a LAN neighbour that takes many addresses): at most 64 requests,
/// then 429 with `Retry-After` naming the network; a device of another network still gets its
/// code, and so does one of that network once a person approves or denies what waits.
#[tokio::test]
async fn a_flood_from_one_network_is_refused_with_retry_after() {
    let hub = HubProcess::start_admitting(&[], &[]).await;
    let mut first_refusal = None;
    for i in 0..80u32 {
        let a = check_in_from(&hub, &format!("127.0.9.{}", i + 1), &format!("02:66:00:09:00:{i:02x}"), "flood").await;
        match (a.status, first_refusal.is_some()) {
            (200, false) => {}
            (429, false) => first_refusal = Some((i, a)),
            (429, true) => {
                retry_after(&a);
            }
            (status, _) => panic!("check-in {i}: {status} {a:?}"),
        }
    }
    let (at, a) = first_refusal.expect("the network is capped");
    assert_eq!(at, 64, "64 requests of one /24 are held");
    assert!(retry_after(&a) > 1, "Retry-After says when the first code of the network expires");
    assert!(a.body.contains("network"), "the refusal says why: {}", a.body);
    let other = check_in_from(&hub, "127.0.10.1", VICTIM, VICTIM_UUID).await;
    assert_eq!(other.status, 200, "another network is not held back: {other:?}");
    let waiting = pending(&hub).await;
    let in_net = waiting.iter().filter(|p| p["remote"].as_str().is_some_and(|r| r.starts_with("127.0.9."))).count();
    assert_eq!(in_net, 64);
    let denied = waiting.iter().find(|p| p["remote"].as_str().is_some_and(|r| r.starts_with("127.0.9."))).unwrap()["code"].as_str().unwrap().to_string();
    ok(&hub, &["devices", "deny", &denied]).await;
    assert_eq!(check_in_from(&hub, "127.0.9.200", "aa:bb:cc:00:22:09", VICTIM_UUID).await.status, 200, "a request denied makes room in its network");
}

/// The user beside the attacker: a classroom of 40 boards on one /24 and 5 behind one NAT address
/// check in at once; every one gets its code, `devices pending` lists them all, and each approves.
#[tokio::test]
async fn a_room_of_real_devices_on_one_network_all_get_their_codes() {
    let hub = HubProcess::start_admitting(&[], &[]).await;
    let mut codes = Vec::new();
    for i in 0..45u32 {
        let from = if i < 40 { format!("127.0.7.{}", i + 1) } else { "127.0.8.1".to_string() };
        let a = check_in_from(&hub, &from, &format!("aa:bb:cc:07:00:{i:02x}"), &format!("11111111-2222-4333-8444-5555555555{i:02x}")).await;
        assert_eq!(a.status, 200, "{from}: {a:?}");
        codes.push(a.json()["activation"]["code"].as_str().unwrap().to_string());
    }
    let listed = pending(&hub).await;
    assert_eq!(listed.len(), 45);
    for code in &codes {
        assert!(listed.iter().any(|p| p["code"] == code.as_str()), "{code} is listed");
        ok(&hub, &["devices", "approve", code]).await;
    }
    assert!(pending(&hub).await.is_empty());
}

/// Defect 11: a gateway credential plus an approved Device-Id gets in; the same credential with a
/// Device-Id nobody approved waits in `devices pending`, and gets in once its code is approved.
#[tokio::test]
async fn a_gateway_credential_admits_only_approved_device_ids() {
    let hub = HubProcess::start_admitting(&[], &[("MCPDEV_GATEWAY_TOKEN", "gateway-secret-0123")]).await;
    const APPROVED: &str = "aa:bb:cc:00:22:30";
    const STRANGER: &str = "aa:bb:cc:00:22:31";
    ok(&hub, &["devices", "approve", APPROVED]).await;
    ws(&hub, APPROVED, "gw", Some("gateway-secret-0123")).await.expect("an approved Device-Id through the gateway");
    let (status, body) = refused(ws(&hub, STRANGER, "gw", Some("gateway-secret-0123")).await);
    assert_eq!(status, 401, "{body}");
    let list = pending(&hub).await;
    let p = list.iter().find(|p| p["device_id"] == STRANGER && p["via"] == "gateway").unwrap_or_else(|| panic!("{list:?}"));
    let approved = ok(&hub, &["devices", "approve", p["code"].as_str().unwrap()]).await;
    assert_eq!(approved.stdout.trim(), STRANGER, "no token is printed for a gateway device: {approved:?}");
    ws(&hub, STRANGER, "gw", Some("gateway-secret-0123")).await.expect("in once approved");
    assert_eq!(ws(&hub, STRANGER, "gw", Some("wrong")).await.err().map(|e| e.0), Some(401), "the credential is needed");
}
