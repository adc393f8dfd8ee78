//! Issue 31: a device proves itself on Mosquitto too. Each test runs a real Mosquitto with the
//! dynamic-security plugin (set up as docs/mqtt.md says) and hubs with `--mqtt-dynsec`: approval
//! creates the device's own login, a stranger (with a made-up MAC, with the victim's MAC, or with
//! the opt-in shared login) never gets a working one, revocation ends the broker session and
//! refuses later CONNECTs, a re-bind replaces the login, any hub of a cluster keeps the broker in
//! line, the broker converges after a hub restart or a fresh dynamic-security file, and a device
//! client is refused on the hubs' topics on each broker set-up the docs give.

mod common;

use common::dynsec::{admit, connect_when_created, hub_on, login, ok, refused, refused_eventually};
use common::mqtt::{HUB_LOGINS, Mosquitto, MqttDevice, connect_once};
use common::ota::check_in_as;
use common::ws::DEADLINE;
use common::HubProcess;
use mcpdev::mqtt::conn::BrokerUrl;
use mcpdev::mqtt::topics;
use serde_json::{Value, json};

const VICTIM: &str = "aa:bb:cc:00:31:01";
const VICTIM_UUID: &str = "31313131-2222-4333-8444-555555555501";
const STRANGER: &str = "02:66:00:00:31:99";
const STRANGER_UUID: &str = "66666666-7777-4888-8999-aaaaaaaa3199";

fn key(mac: &str) -> String {
    topics::key_for(mac).unwrap()
}

fn echo_tool() -> Vec<Value> {
    vec![json!({"name":"self.echo","description":"echo","inputSchema":{"type":"object","properties":{"secret":{"type":"string"}}}})]
}

/// Approval creates the device's own working login; a stranger with a made-up MAC, or with the
/// victim's MAC and its own Client-Id, gets a login that never works, cannot connect under the
/// victim's client id with anything it was given, and a host's call reaches the victim only.
#[tokio::test]
async fn approval_creates_the_devices_own_login_and_a_stranger_never_gets_one() {
    let broker = Mosquitto::start_dynsec().await;
    let state = tempfile::tempdir().unwrap();
    let hub = hub_on(&broker, 0, state.path().to_str().unwrap(), true).await;
    let (vkey, skey) = (key(VICTIM), key(STRANGER));

    // A stranger with a made-up MAC: its answer names the broker and its client id, and a
    // password that works nowhere.
    let stranger = check_in_as(&hub, "hub.lan:8000", STRANGER, STRANGER_UUID).await;
    assert!(stranger["activation"]["code"].is_string(), "{stranger}");
    let (suser, spass) = login(&stranger);
    assert_eq!(
        (suser.as_str(), stranger["mqtt"]["client_id"].as_str()),
        (skey.as_str(), Some(skey.as_str())),
        "{stranger}"
    );
    refused(&broker, &skey, Some((&suser, &spass)), "a request nobody approved").await;

    // The victim's first answer: refused until its code is approved, then its own login works.
    let first = check_in_as(&hub, "hub.lan:8000", VICTIM, VICTIM_UUID).await;
    let (vuser, vpass) = login(&first);
    refused(&broker, &vkey, Some((&vuser, &vpass)), "a device before its approval").await;
    let code = first["activation"]["code"].as_str().unwrap().to_string();
    ok(&hub, &["devices", "approve", &code]).await;
    let url = BrokerUrl { username: Some(vuser.clone()), password: Some(vpass.clone()), ..BrokerUrl::parse(&broker.url()).unwrap() };
    let mut dev = MqttDevice::connect_to(&url, &vkey).await;
    dev.hello().await;
    dev.onboard(echo_tool()).await;
    let counts = dev.respond_forever(echo_tool());

    // Everything the stranger was given or could try, under the victim's client id: refused.
    let impostor = check_in_as(&hub, "hub.lan:8000", VICTIM, STRANGER_UUID).await;
    assert!(
        impostor["activation"]["code"].is_string(),
        "the victim's MAC with another Client-Id is another request: {impostor}"
    );
    let (iuser, ipass) = login(&impostor);
    assert_ne!(ipass, vpass);
    for (what, l) in [
        ("no login", None),
        ("the stranger's own login", Some((suser.as_str(), spass.as_str()))),
        ("the victim's username with the stranger's password", Some((vuser.as_str(), spass.as_str()))),
        ("the impostor check-in's login", Some((iuser.as_str(), ipass.as_str()))),
        ("an empty password", Some((vuser.as_str(), ""))),
        ("a hub's username with a guess", Some((HUB_LOGINS[0].0, "guess"))),
    ] {
        refused(&broker, &vkey, l, what).await;
    }
    // A hub login is bound to no device, but the victim's login is bound to its client id.
    refused(&broker, &skey, Some((&vuser, &vpass)), "the victim's login under another client id").await;

    let out = ok(&hub, &["call", "self.echo", "secret=hunter2", "-d", VICTIM, "--json"]).await;
    assert_eq!(out.json()["content"][0]["text"], "ok", "{out:?}");
    assert_eq!(counts.get("tools/call"), 1, "the host's call reached the victim");
    let listed = ok(&hub, &["devices", "--json"]).await.json();
    let ids: Vec<&str> = listed.as_array().unwrap().iter().filter_map(|d| d["device_id"].as_str()).collect();
    assert_eq!(ids, [VICTIM], "the stranger was never onboarded: {listed}");
}

/// A stranger cannot kick the device off by connecting under its client id. A revocation removes
/// the device's login: the broker ends its session at once and refuses its
/// later CONNECTs; a new approval issues a new login, and a re-bind replaces it (the old session
/// ends, the old password stops working).
#[tokio::test]
async fn revocation_ends_the_broker_session_and_a_rebind_replaces_the_login() {
    let broker = Mosquitto::start_dynsec().await;
    let state = tempfile::tempdir().unwrap();
    let hub = hub_on(&broker, 0, state.path().to_str().unwrap(), true).await;
    let vkey = key(VICTIM);
    let (user, first) = admit(&hub, VICTIM, VICTIM_UUID, false).await;
    let mut session = connect_once(broker.port, &vkey, Some((&user, &first))).await.expect("the approved device connects");
    // A stranger's CONNECTs under its client id are refused before they could take its session over.
    for _ in 0..3 {
        refused(&broker, &vkey, Some((&vkey, "guess")), "a stranger").await;
        refused(&broker, &vkey, None, "a stranger with no login").await;
    }
    assert_eq!(session.subscribe(&topics::downlink(&vkey)).await, "Success(AtMostOnce)", "the device's session is still there");
    assert!(session.ended.borrow().is_none(), "the stranger kicked the device off the broker");

    ok(&hub, &["devices", "revoke", VICTIM]).await;
    session.wait_ended().await;
    refused(&broker, &vkey, Some((&user, &first)), "a revoked device").await;

    // Approved again: a new login; the old one stays dead.
    let (_, second) = admit(&hub, VICTIM, VICTIM_UUID, false).await;
    assert_ne!(second, first, "a new approval issues a new login");
    refused(&broker, &vkey, Some((&user, &first)), "the revoked login").await;
    let mut session = connect_once(broker.port, &vkey, Some((&user, &second))).await.expect("the new login works");

    // Re-bound to another Client-Id (the board was replaced): the old session ends.
    let (_, third) = admit(&hub, VICTIM, "31313131-2222-4333-8444-5555555555ff", true).await;
    session.wait_ended().await;
    refused(&broker, &vkey, Some((&user, &second)), "the replaced binding's login").await;
    connect_once(broker.port, &vkey, Some((&user, &third))).await.expect("the new binding's login works");
}

/// Two hubs on one broker: only the second manages the broker's logins, and it applies what the
/// first decides (the replicated admission records): an approval through hub 1 creates the
/// login, a revocation through hub 1 ends the device's session.
#[tokio::test]
async fn any_hub_of_a_cluster_keeps_the_brokers_logins_in_line() {
    let broker = Mosquitto::start_dynsec().await;
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let one = hub_on(&broker, 0, a.path().to_str().unwrap(), false).await;
    std::fs::copy(a.path().join("hub-secret"), b.path().join("hub-secret")).unwrap();
    let two = hub_on(&broker, 1, b.path().to_str().unwrap(), true).await;
    let (user, password) = admit(&one, VICTIM, VICTIM_UUID, false).await;
    let mut session = connect_when_created(&broker, (&user, &password)).await;
    ok(&one, &["devices", "revoke", VICTIM]).await;
    session.wait_ended().await;
    refused_eventually(&broker, (&user, &password)).await;
    drop(two);
}

/// The broker converges: a broker that lost its device logins (a fresh dynamic-security file)
/// gets them back from the hub; a hub that starts reconciles: an approved device whose login was
/// deleted gets it back, and a managed login nobody approved is removed.
#[tokio::test]
async fn the_broker_converges_after_a_fresh_dynsec_file_and_a_hub_restart() {
    let mut broker = Mosquitto::start_dynsec().await;
    let state = tempfile::tempdir().unwrap();
    let dir = state.path().to_str().unwrap().to_string();
    let hub = hub_on(&broker, 0, &dir, true).await;
    let (user, password) = admit(&hub, VICTIM, VICTIM_UUID, false).await;
    connect_once(broker.port, &user, Some((&user, &password))).await.expect("approved");

    broker.init_dynsec().await;
    connect_when_created(&broker, (&user, &password)).await;

    drop(hub);
    broker.ctrl(&["deleteClient", &user]).await;
    let planted = key(STRANGER);
    broker.ctrl(&["createClient", &planted, "-p", "planted-password"]).await;
    connect_once(broker.port, &planted, Some((&planted, "planted-password"))).await.expect("planted while no hub ran");
    let _hub = hub_on(&broker, 0, &dir, true).await;
    connect_when_created(&broker, (&user, &password)).await;
    refused_eventually(&broker, (&planted, "planted-password")).await;
}

/// What a device client tries on the hubs' topics. Writing: forgeries on every hub topic, then a
/// marker on its own uplink; a hub login watching `mcpdev/#` must see the marker and none of the
/// forgeries (`hub`: a login that reads every topic). Reading: subscriptions to every hub topic (refused in the SUBACK when
/// `suback_refuses`; Mosquitto's ACL file checks reads at delivery only), then hub messages on
/// those topics and a marker on the device's own downlink; the device must get the marker and
/// none of the hub messages.
async fn device_is_kept_off_hub_topics(broker: &Mosquitto, device: (&str, Option<(&str, &str)>), hub: (&str, &str), suback_refuses: bool) {
    let (client_id, login) = device;
    let mut watcher = connect_once(broker.port, "mcpdev-hub-watcher", Some(hub)).await.expect("the hub login");
    assert_eq!(watcher.subscribe("mcpdev/#").await, "Success(AtMostOnce)", "the watcher reads every topic");
    let mut dev = connect_once(broker.port, client_id, login).await.expect("the device logs in");
    let other = key("aa:bb:cc:00:31:77");
    for filter in ["mcpdev/#", "mcpdev/rpc/+/q", "mcpdev/admission/+", "mcpdev/claims/+", "mcpdev/index/+", "mcpdev/hubs/+", "$share/mcpdev/mcpdev/up/+", "mcpdev/up/+", &topics::downlink(&other), "#"]
    {
        let granted = dev.subscribe(filter).await;
        if suback_refuses {
            assert_eq!(granted, "Failure", "a device subscribed to {filter}");
        }
    }
    assert_eq!(dev.subscribe(&topics::downlink(client_id)).await, "Success(AtMostOnce)", "its own downlink");
    let hub_topics = [
        format!("mcpdev/admission/{VICTIM}"),
        format!("mcpdev/claims/{other}"),
        "mcpdev/rpc/somehub/q".into(),
        "mcpdev/hubs/evil".into(),
        "mcpdev/index/evil".into(),
        format!("mcpdev/fwd/somehub/{other}"),
        topics::uplink(&other),
        topics::downlink(&other),
    ];
    for (i, topic) in hub_topics.iter().enumerate() {
        dev.client.publish(topic, rumqttc::QoS::AtLeastOnce, false, format!("forged-{i}")).await.unwrap();
    }
    dev.client.publish(topics::uplink(client_id), rumqttc::QoS::AtLeastOnce, false, "marker").await.unwrap();
    loop {
        let m = watcher.recv().await;
        let payload = m["payload"].as_str().unwrap_or_default();
        assert!(!payload.starts_with("forged"), "a device's forgery reached a hub: {m}");
        if payload == "marker" {
            assert_eq!(m["topic"], topics::uplink(client_id).as_str());
            break;
        }
    }
    for (i, topic) in hub_topics.iter().enumerate() {
        watcher.client.publish(topic, rumqttc::QoS::AtLeastOnce, false, format!("hub-only-{i}")).await.unwrap();
    }
    watcher.client.publish(topics::downlink(client_id), rumqttc::QoS::AtLeastOnce, false, "marker-down").await.unwrap();
    loop {
        let m = dev.recv().await;
        let payload = m["payload"].as_str().unwrap_or_default();
        assert!(!payload.starts_with("hub-only"), "a device read a hub topic: {m}");
        if payload == "marker-down" {
            break;
        }
    }
}

/// The hubs' topics on Mosquitto with dynamic security: only hub logins read or write them.
#[tokio::test]
async fn a_device_is_refused_on_hub_topics_with_dynamic_security() {
    let broker = Mosquitto::start_dynsec().await;
    let state = tempfile::tempdir().unwrap();
    let hub = hub_on(&broker, 0, state.path().to_str().unwrap(), true).await;
    let (user, password) = admit(&hub, VICTIM, VICTIM_UUID, false).await;
    // The watcher reads and writes every topic: a hub's role no longer subscribes to `mcpdev/#`
    // (it would read devices' downlinks: common::mqtt::hub_role).
    broker.ctrl(&["createRole", "observer"]).await;
    for kind in ["publishClientSend", "publishClientReceive", "subscribePattern"] {
        broker.ctrl(&["addRoleACL", "observer", kind, "#", "allow"]).await;
    }
    broker.ctrl(&["createClient", "observer", "-p", "observer-password-0123"]).await;
    broker.ctrl(&["addClientRole", "observer", "observer"]).await;
    device_is_kept_off_hub_topics(&broker, (&user, Some((&user, &password))), ("observer", "observer-password-0123"), true).await;
}

/// The ACL file docs/cluster.md gives for Mosquitto without dynamic security (the shared device
/// login, opted in): a device client is kept off the hubs' topics there too.
#[tokio::test]
async fn a_device_is_refused_on_hub_topics_with_the_acl_file() {
    let acl = std::fs::read_to_string(common::repo_path("docs/cluster.md")).unwrap();
    let acl = acl.split("# /etc/mosquitto/acl\n").nth(1).and_then(|rest| rest.split("```").next()).expect("docs/cluster.md gives the ACL file").to_string();
    let broker = Mosquitto::start_acl_file(&[HUB_LOGINS[0], ("mcpdev-devices", "shared-device-password")], &acl).await;
    device_is_kept_off_hub_topics(&broker, (&key(VICTIM), Some(("mcpdev-devices", "shared-device-password"))), HUB_LOGINS[0], false).await;
}

/// The shared device login is an explicit opt-in: set without `--mqtt-shared-device-login`, the
/// hub refuses to start and says why; opted in, it warns, and a request nobody approved never
/// gets it (only the approved binding does).
#[tokio::test]
async fn the_shared_login_is_an_opt_in_that_no_unapproved_request_ever_gets() {
    let acl = "user mcpdev-hub-1\ntopic readwrite mcpdev/#\ntopic read $share/mcpdev/mcpdev/up/+\npattern write mcpdev/up/%c\npattern read mcpdev/down/%c\n";
    let broker = Mosquitto::start_acl_file(&[HUB_LOGINS[0], ("mcpdev-devices", "shared-device-password")], acl).await;
    let url = broker.url_as(HUB_LOGINS[0].0);
    let env = [("MCPDEV_MQTT_PASSWORD", HUB_LOGINS[0].1), ("MCPDEV_MQTT_DEVICE_USERNAME", "mcpdev-devices"), ("MCPDEV_MQTT_DEVICE_PASSWORD", "shared-device-password")];
    let state = tempfile::tempdir().unwrap();
    let dir = state.path().to_str().unwrap().to_string();
    let mut env_dir = env.to_vec();
    env_dir.push(("MCPDEV_STATE_DIR", &dir));
    let runtime = mcpdev::paths::runtime_dir().to_string_lossy().into_owned();
    env_dir.push(("MCPDEV_RUNTIME_DIR", &runtime));
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcpdev"));
    cmd.args(["serve", "--json", "--device-addr", "127.0.0.1:0", "--host-addr", "127.0.0.1:0", "--mqtt", &url]).envs(env_dir).stdin(std::process::Stdio::null()).kill_on_drop(true);
    let out = tokio::time::timeout(DEADLINE, cmd.output()).await.expect("the hub should stop at once").unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && said.contains("--mqtt-shared-device-login") && said.contains("any client id"),
        "the shared login without the opt-in must stop the hub, saying why: {out:?}"
    );

    let hub = HubProcess::start_with(&["--mqtt", &url, "--mqtt-shared-device-login"], &env, true).await;
    let log = hub.stderr.clone().unwrap();
    let stranger = check_in_as(&hub, "hub.lan:8000", STRANGER, STRANGER_UUID).await;
    let (suser, spass) = login(&stranger);
    assert_ne!(spass, "shared-device-password", "a request nobody approved got the shared login: {stranger}");
    assert_ne!(suser, "mcpdev-devices");
    refused(&broker, &key(STRANGER), Some((&suser, &spass)), "a request nobody approved").await;
    let impostor = check_in_as(&hub, "hub.lan:8000", VICTIM, STRANGER_UUID).await;
    assert_ne!(login(&impostor).1, "shared-device-password");
    let first = check_in_as(&hub, "hub.lan:8000", VICTIM, VICTIM_UUID).await;
    ok(&hub, &["devices", "approve", first["activation"]["code"].as_str().unwrap()]).await;
    let again = check_in_as(&hub, "hub.lan:8000", VICTIM, VICTIM_UUID).await;
    assert_eq!(
        login(&again),
        ("mcpdev-devices".to_string(), "shared-device-password".to_string()),
        "the approved binding gets the opted-in login"
    );
    let warned = log.lock().unwrap().clone();
    assert!(
        warned.contains("--mqtt-shared-device-login") && warned.contains("any client id"),
        "the start-up warning: {warned}"
    );
}
