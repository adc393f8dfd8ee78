//! Mosquitto with dynamic security, as docs/mqtt.md sets it up, and hubs that manage it
//! (`--mqtt-dynsec`): starting them, admitting a device through OTA, and waiting on the broker's
//! logins.

use super::mqtt::{DYNSEC_ADMIN, HUB_LOGINS, Mosquitto, Session, connect_once};
use super::ota::check_in_as;
use super::ws::DEADLINE;
use super::{HubProcess, Outcome, mcpdev};
use serde_json::Value;

pub async fn ok(hub: &HubProcess, args: &[&str]) -> Outcome {
    let out = mcpdev(hub, args).await;
    assert_eq!(out.code, 0, "mcpdev {args:?}: {out:?}");
    out
}

/// A hub on `broker` with hub login `login` of [`HUB_LOGINS`], its state in `state` (given the
/// cluster's hub secret unless it holds one), managing the broker's device
/// logins (`--mqtt-dynsec`, with the dynamic-security admin) unless `manage` is false.
pub async fn hub_on(broker: &Mosquitto, login: usize, state: &str, manage: bool) -> HubProcess {
    hub_as(broker, login, state, manage, DYNSEC_ADMIN.1, false).await
}

/// [`hub_on`], with `admin_password` for the dynamic-security admin, and the hub's log collected
/// when `capture`.
pub async fn hub_as(broker: &Mosquitto, login: usize, state: &str, manage: bool, admin_password: &str, capture: bool) -> HubProcess {
    let (user, password) = HUB_LOGINS[login];
    // The broker's hub role grants the share group of the cluster's secret (common::mqtt::hub_role).
    if !std::path::Path::new(state).join("hub-secret").exists() {
        super::write_secret(std::path::Path::new(state), &super::cluster_secret_hex());
    }
    let mut env = vec![("MCPDEV_MQTT_PASSWORD", password), ("MCPDEV_MQTT_ADMIN_USERNAME", DYNSEC_ADMIN.0), ("MCPDEV_MQTT_ADMIN_PASSWORD", admin_password), ("MCPDEV_STATE_DIR", state)];
    if capture {
        // What dynamic security did is logged at info.
        env.push(("RUST_LOG", "mcpdev=info"));
    }
    let url = broker.url_as(user);
    let mut args = vec!["--mqtt", url.as_str()];
    if manage {
        args.push("--mqtt-dynsec");
    }
    HubProcess::start_with(&args, &env, capture).await
}

/// The `mqtt` block's login.
pub fn login(answer: &Value) -> (String, String) {
    let m = &answer["mqtt"];
    (
        m["username"].as_str().unwrap_or_else(|| panic!("no mqtt.username in {answer}")).to_string(),
        m["password"].as_str().unwrap().to_string(),
    )
}

/// Asserts the broker refuses a CONNECT as `client_id` with `login`.
pub async fn refused(broker: &Mosquitto, client_id: &str, login: Option<(&str, &str)>, what: &str) {
    if let Ok(s) = connect_once(broker.port, client_id, login).await {
        drop(s);
        panic!("the broker let {what} in as {client_id}");
    }
}

/// Checks `mac` in at OTA with `uuid`, approves the code it got, and returns its login as the
/// next (admitted) check-in hands it out.
pub async fn admit(hub: &HubProcess, mac: &str, uuid: &str, rebind: bool) -> (String, String) {
    let first = check_in_as(hub, "hub.lan:8000", mac, uuid).await;
    let code = first["activation"]["code"].as_str().unwrap_or_else(|| panic!("no code in {first}")).to_string();
    let mut args = vec!["devices", "approve", code.as_str()];
    if rebind {
        args.push("--rebind");
    }
    ok(hub, &args).await;
    let again = check_in_as(hub, "hub.lan:8000", mac, uuid).await;
    assert!(again.get("activation").is_none(), "approved: {again}");
    let l = login(&again);
    assert_eq!(
        l,
        login(&first),
        "the first answer's login is the approved binding's own (py-xiaozhi connects with it)"
    );
    l
}

/// Connects as the device with its own login, retrying until the broker has it (a hub that only
/// imported the decision creates it in the background), within the deadline.
pub async fn connect_when_created(broker: &Mosquitto, (user, password): (&str, &str)) -> Session {
    let until = tokio::time::Instant::now() + DEADLINE;
    loop {
        match connect_once(broker.port, user, Some((user, password))).await {
            Ok(s) => return s,
            Err(e) if tokio::time::Instant::now() < until => {
                let _ = e;
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
            Err(e) => panic!("the device's own login never worked: {e}"),
        }
    }
}

/// Waits until the broker refuses `login` (a hub that only imported a revocation removes it in
/// the background), within the deadline.
pub async fn refused_eventually(broker: &Mosquitto, (user, password): (&str, &str)) {
    let until = tokio::time::Instant::now() + DEADLINE;
    while connect_once(broker.port, user, Some((user, password))).await.is_ok() {
        assert!(tokio::time::Instant::now() < until, "the login of {user} still works");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

