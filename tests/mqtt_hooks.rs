//! Issue 31: EMQX 5 asks the hub who may connect and what each client may do. These tests drive
//! the hub's hooks (`serve --mqtt-hooks`) exactly as EMQX 5's HTTP authenticator and HTTP
//! authorization source do with the configuration docs/mqtt.md gives: `POST` with
//! `content-type: application/json`, the secret header, and the body templates
//! (`{"clientid": "${clientid}", "username": "${username}", "password": "${password}",
//! "peerhost": "${peerhost}"}`; `{…, "topic": "${topic}", "action": "${action}"}`), reading
//! `{"result": "allow"|"deny"|"ignore", "is_superuser": …}` from a 200.

mod common;

use common::mqtt::Mosquitto;
use common::ota::{check_in_as, exchange};
use common::ws::DEADLINE;
use common::{HubProcess, Outcome, mcpdev};
use mcpdev::hub::secret::{HubSecret, Purpose};
use mcpdev::mqtt::topics;
use serde_json::{Value, json};

const SECRET: &str = "hook-secret-0123456789abcdef";
const VICTIM: &str = "aa:bb:cc:00:31:41";
const VICTIM_UUID: &str = "41414141-2222-4333-8444-555555555541";
const STRANGER: &str = "02:66:00:00:31:42";

async fn ok(hub: &HubProcess, args: &[&str]) -> Outcome {
    let out = mcpdev(hub, args).await;
    assert_eq!(out.code, 0, "mcpdev {args:?}: {out:?}");
    out
}

struct Hooks {
    addr: String,
}

impl Hooks {
    /// A request as EMQX sends it; the status and the JSON answer.
    async fn post(&self, path: &str, secret: Option<&str>, body: &str) -> (u16, Value) {
        let mut headers = vec![("Content-Type", "application/json")];
        if let Some(s) = secret {
            headers.push(("X-Mcpdev-Hook-Secret", s));
        }
        let (status, _, body) = exchange(&self.addr, "POST", path, &headers, body, DEADLINE).await;
        (status, serde_json::from_slice(&body).unwrap_or(Value::Null))
    }

    async fn authn(&self, clientid: &str, username: &str, password: &str) -> Value {
        let body = json!({"clientid": clientid, "username": username, "password": password, "peerhost": "10.0.0.66"});
        let (status, answer) = self.post("/mqtt/authn", Some(SECRET), &body.to_string()).await;
        assert_eq!(status, 200, "{answer}");
        assert_eq!(answer["is_superuser"], false, "nobody is a superuser: {answer}");
        answer
    }

    async fn authz(&self, clientid: &str, username: &str, action: &str, topic: &str) -> String {
        let body = json!({"clientid": clientid, "username": username, "topic": topic, "action": action, "peerhost": "10.0.0.66"});
        let (status, answer) = self.post("/mqtt/authz", Some(SECRET), &body.to_string()).await;
        assert_eq!(status, 200, "{answer}");
        answer["result"].as_str().unwrap_or_default().to_string()
    }
}

/// A hub with the hooks on an ephemeral loopback port (its state in `state`).
async fn hub_with_hooks(broker: &Mosquitto, state: &str) -> (HubProcess, Hooks) {
    let hub = HubProcess::start_admitting(&["--mqtt", &broker.url(), "--mqtt-hooks", "127.0.0.1:0"], &[("MCPDEV_MQTT_HOOK_SECRET", SECRET), ("MCPDEV_STATE_DIR", state)]).await;
    let url = hub.info["mqtt_hooks"].as_str().unwrap_or_else(|| panic!("no mqtt_hooks in {}", hub.info)).to_string();
    let addr = url.trim_start_matches("http://").to_string();
    assert!(addr.starts_with("127.0.0.1:"), "loopback: {addr}");
    (hub, Hooks { addr })
}

/// A device logs in as itself only, with its approval's token; a stranger never; a revoked
/// device no more; a hub with the cluster's hub password; a caller without the secret is not
/// heard.
#[tokio::test]
async fn emqx_authentication_lets_in_approved_devices_and_hubs_only() {
    let broker = Mosquitto::start().await;
    let state = tempfile::tempdir().unwrap();
    let (hub, hooks) = hub_with_hooks(&broker, state.path().to_str().unwrap()).await;
    let vkey = topics::key_for(VICTIM).unwrap();

    // Not EMQX: no secret, a wrong one, a body that is not JSON, one over the cap.
    let login = json!({"clientid": vkey, "username": vkey, "password": "x"}).to_string();
    assert_eq!(hooks.post("/mqtt/authn", None, &login).await.0, 401);
    assert_eq!(hooks.post("/mqtt/authn", Some("hook-secret-0123456789abcdeX"), &login).await.0, 401);
    assert_eq!(hooks.post("/mqtt/authn", Some(SECRET), "clientid=x").await.0, 400);
    assert_eq!(hooks.post("/mqtt/authz", Some(SECRET), &"x".repeat(8192)).await.0, 413);

    // A stranger with a made-up MAC, and the victim before its approval: the OTA answer's
    // password is refused.
    let stranger = check_in_as(&hub, "hub.lan:8000", STRANGER, "stranger").await;
    let skey = stranger["mqtt"]["client_id"].as_str().unwrap();
    assert_eq!(hooks.authn(skey, skey, stranger["mqtt"]["password"].as_str().unwrap()).await["result"], "deny");
    let first = check_in_as(&hub, "hub.lan:8000", VICTIM, VICTIM_UUID).await;
    let token = first["mqtt"]["password"].as_str().unwrap().to_string();
    assert_eq!(first["mqtt"]["username"], vkey.as_str());
    assert_eq!(hooks.authn(&vkey, &vkey, &token).await["result"], "deny", "not approved yet");
    ok(&hub, &["devices", "approve", first["activation"]["code"].as_str().unwrap()]).await;
    assert_eq!(hooks.authn(&vkey, &vkey, &token).await["result"], "allow", "its own login, once approved");

    // The victim's token under any other identity, and anything else under the victim's.
    let impostor = check_in_as(&hub, "hub.lan:8000", VICTIM, "impostor").await;
    for (clientid, username, password) in [
        (vkey.as_str(), vkey.as_str(), impostor["mqtt"]["password"].as_str().unwrap()),
        (vkey.as_str(), vkey.as_str(), ""),
        (vkey.as_str(), "someone", token.as_str()),
        (skey, skey, token.as_str()),
        ("GID_other@@@aa_bb_cc_00_31_41", "GID_other@@@aa_bb_cc_00_31_41", token.as_str()),
        (vkey.as_str(), "mcpdev-hub-1", token.as_str()),
    ] {
        assert_eq!(hooks.authn(clientid, username, password).await["result"], "deny", "{clientid} / {username}");
    }

    // Hubs: the password every hub derives from the shared hub secret.
    let secret = HubSecret::load_or_create(&state.path().join("hub-secret")).unwrap();
    let hub_password = secret.token(Purpose::Device, "mcpdev-hub");
    assert_eq!(hooks.authn("mcpdev-hub-x", "mcpdev-hub-1", &hub_password).await["result"], "allow");
    assert_eq!(hooks.authn("mcpdev-hub-x", "mcpdev-hub-1", "guess").await["result"], "deny");

    // Revoked: out, with the token that worked.
    ok(&hub, &["devices", "revoke", VICTIM]).await;
    assert_eq!(hooks.authn(&vkey, &vkey, &token).await["result"], "deny", "revoked");
    assert_eq!(hooks.authz(&vkey, &vkey, "publish", &topics::uplink(&vkey)).await, "deny", "a revoked device's live session may do nothing");
}

/// A device may publish its own uplink and subscribe its own downlink, nothing else: every hub
/// topic is refused to it, and allowed to hubs.
#[tokio::test]
async fn emqx_authorization_keeps_devices_off_hub_topics() {
    let broker = Mosquitto::start().await;
    let state = tempfile::tempdir().unwrap();
    let (hub, hooks) = hub_with_hooks(&broker, state.path().to_str().unwrap()).await;
    let vkey = topics::key_for(VICTIM).unwrap();
    ok(&hub, &["devices", "approve", VICTIM]).await;
    let other = topics::key_for("aa:bb:cc:00:31:77").unwrap();
    assert_eq!(hooks.authz(&vkey, &vkey, "publish", &topics::uplink(&vkey)).await, "allow");
    assert_eq!(hooks.authz(&vkey, &vkey, "subscribe", &topics::downlink(&vkey)).await, "allow");
    let hub_topics = [
        ("publish", format!("mcpdev/admission/{VICTIM}")),
        ("publish", format!("mcpdev/claims/{vkey}")),
        ("publish", "mcpdev/rpc/somehub/q".to_string()),
        ("publish", "mcpdev/hubs/evil".to_string()),
        ("publish", "mcpdev/index/evil".to_string()),
        ("publish", format!("mcpdev/fwd/somehub/{other}")),
        ("publish", topics::uplink(&other)),
        ("publish", topics::downlink(&vkey)),
        ("subscribe", "mcpdev/#".to_string()),
        ("subscribe", "mcpdev/rpc/+/q".to_string()),
        ("subscribe", "mcpdev/admission/+".to_string()),
        ("subscribe", "$share/mcpdev/mcpdev/up/+".to_string()),
        ("subscribe", "mcpdev/up/+".to_string()),
        ("subscribe", topics::downlink(&other)),
        ("subscribe", "#".to_string()),
    ];
    for (action, topic) in &hub_topics {
        assert_eq!(hooks.authz(&vkey, &vkey, action, topic).await, "deny", "a device may {action} {topic}");
    }
    let group = mcpdev::mqtt::cluster_seal::share_group(&HubSecret::load_or_create(&state.path().join("hub-secret")).unwrap(), "mcpdev");
    let shared = format!("$share/{group}/mcpdev/up/+");
    for (action, topic) in [
        ("subscribe", shared.as_str()),
        ("subscribe", "mcpdev/claims/+"),
        ("subscribe", "mcpdev/fwd/h1/+"),
        ("publish", "mcpdev/rpc/h2/q"),
        ("publish", "mcpdev/admission/aa:bb:cc:00:31:41"),
    ] {
        assert_eq!(hooks.authz("mcpdev-hub-h1", "mcpdev-hub-1", action, topic).await, "allow", "a hub may {action} {topic}");
    }
    // Nor with a device's downlink (a host's call arguments), plain uplinks, another cluster's
    // share group, or speaking as a device.
    let (down, up) = (topics::downlink(&vkey), topics::uplink(&vkey));
    for (action, topic) in [("subscribe", "#"), ("subscribe", "$SYS/#"), ("publish", "other/x"), ("subscribe", "mcpdev/#"), ("subscribe", "mcpdev/down/+"), ("subscribe", &down), ("subscribe", "mcpdev/up/+"), ("subscribe", "$share/mcpdev/mcpdev/up/+"), ("publish", &up)] {
        assert_eq!(hooks.authz("mcpdev-hub-h1", "mcpdev-hub-1", action, topic).await, "deny", "a hub has no business with {topic}");
    }
}

/// Opens a connection to `addr` from the loopback address `from` and sends `head` (not a whole
/// request: the hub waits for the rest).
async fn partial(from: &str, addr: &str, head: &str) -> std::io::Result<tokio::net::TcpStream> {
    use tokio::io::AsyncWriteExt;
    let socket = tokio::net::TcpSocket::new_v4()?;
    socket.bind(format!("{from}:0").parse().unwrap())?;
    let mut s = socket.connect(addr.parse().unwrap()).await?;
    s.write_all(head.as_bytes()).await?;
    Ok(s)
}

/// What the hub answers on `s` (its status line), or `None` when it closed without answering,
/// within `limit`.
async fn status_line(s: &mut tokio::net::TcpStream, limit: std::time::Duration) -> Option<String> {
    use tokio::io::AsyncReadExt;
    let mut buf = vec![0u8; 512];
    let n = tokio::time::timeout(limit, s.read(&mut buf)).await.expect("the hub answers or closes in time").unwrap_or(0);
    (n > 0).then(|| String::from_utf8_lossy(&buf[..n]).lines().next().unwrap_or_default().to_string())
}

/// Issue 44.7: the hooks listener checks the secret before it reads a body, gives a body a
/// deadline, and caps its connections per address and in all. 20,050 slow-body connections
/// without the secret took the hub to its descriptor limit, and the OTA, host and hooks listeners
/// all failed with "Too many open files". Here: a request without the secret that never sends its
/// body is answered 401 at once; one with the secret gets 408 once its body is late; and 3,000
/// connections from one address that never finish their headers are held to that address's share
/// (the rest closed at once, counted and logged) while EMQX (another address), OTA and the host
/// listener keep being served.
#[tokio::test]
async fn a_flood_of_slow_connections_on_the_hooks_leaves_every_listener_serving() {
    mcpdev::hub::budget::raise_fd_limit();
    let broker = Mosquitto::start().await;
    let state = tempfile::tempdir().unwrap();
    let hub = HubProcess::start_with(
        &["--mqtt", &broker.url(), "--mqtt-hooks", "127.0.0.1:0"],
        &[("MCPDEV_MQTT_HOOK_SECRET", SECRET), ("MCPDEV_STATE_DIR", state.path().to_str().unwrap())],
        true,
    )
    .await;
    let addr = hub.info["mqtt_hooks"].as_str().unwrap().trim_start_matches("http://").to_string();
    let hooks = Hooks { addr: addr.clone() };

    // No secret, a body announced and never sent: answered at once, the body never waited for.
    let head = "POST /mqtt/authn HTTP/1.1\r\nHost: emqx\r\nContent-Type: application/json\r\nContent-Length: 4000\r\n\r\n{";
    let mut s = partial("127.0.0.1", &addr, head).await.unwrap();
    let started = std::time::Instant::now();
    let line = status_line(&mut s, std::time::Duration::from_secs(3)).await;
    assert_eq!(line.as_deref(), Some("HTTP/1.1 401 Unauthorized"), "answered before the body");
    assert!(started.elapsed() < std::time::Duration::from_secs(2), "{:?}", started.elapsed());
    // The secret, and a body that stops coming: 408 after the body deadline, not the hub's 60 s.
    let head = format!("POST /mqtt/authn HTTP/1.1\r\nHost: emqx\r\nContent-Type: application/json\r\nX-Mcpdev-Hook-Secret: {SECRET}\r\nContent-Length: 4000\r\n\r\n{{");
    let mut s = partial("127.0.0.1", &addr, &head).await.unwrap();
    let limit = mcpdev::mqtt::hooks::BODY_DEADLINE + std::time::Duration::from_secs(5);
    assert_eq!(status_line(&mut s, limit).await.as_deref(), Some("HTTP/1.1 408 Request Timeout"));

    // The flood: 3,000 connections from 127.0.0.2 that never finish their headers.
    let before = hub.metric("mcpdev_refusals_total{reason=\"connection_cap\"}").await;
    let mut flood = Vec::new();
    for _ in 0..3000 {
        if let Ok(s) = partial("127.0.0.2", &addr, "POST /mqtt/authn HTTP/1.1\r\nContent-Length: 100\r\n").await {
            flood.push(s);
        }
    }
    assert!(flood.len() >= 2900, "the flood connected: {}", flood.len());
    let share = mcpdev::hub::conn_cap::HOOKS_CONNECTIONS / 2;
    // The kernel completes each connection before the hub's accept loop sees it: the count is
    // read until the hub has refused what it will (or 30 s passed).
    let counted = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    let mut refused = hub.metric("mcpdev_refusals_total{reason=\"connection_cap\"}").await - before;
    while refused < (flood.len() - share) as f64 && tokio::time::Instant::now() < counted {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        refused = hub.metric("mcpdev_refusals_total{reason=\"connection_cap\"}").await - before;
    }
    eprintln!("{} connections of the flood, {refused} refused at once, {share} held", flood.len());
    assert!(refused >= (flood.len() - share) as f64, "every connection beyond the address's {share} is refused and counted: {refused}");
    hub.logged(|l| l.contains("connection refused: this address holds its")).await; // the full listener is logged
    // Every listener still serves while the flood holds its connections: EMQX's hooks, OTA, the
    // host listener.
    assert_eq!(hooks.authn("GID_mcpdev@@@aa_bb_cc_00_31_99", "GID_mcpdev@@@aa_bb_cc_00_31_99", "wrong").await["result"], "deny");
    let answer = check_in_as(&hub, "hub.lan:8000", STRANGER, "66666666-7777-4888-8999-aaaaaaaa4407").await;
    assert!(answer["activation"]["code"].is_string(), "OTA answers: {answer}");
    ok(&hub, &["devices", "--json"]).await;
    drop(flood);
}
