//! Admission in a cluster, with real processes (Mosquitto and three `mcpdev serve`): approvals and
//! revocations made through one hub hold on every hub, a revocation through one hub cuts a device
//! off on the hub that serves it, and admission records forged on the broker are refused and
//! logged (moved out of `cluster_e2e.rs`, one topic per file).

mod common;

use std::time::{Duration, Instant};

use common::cluster::{devices, local_rows, logged, mqtt_devices, mqtt_ids, owners, until_listed};
use common::mqtt::Mosquitto;
use common::{HubProcess, Outcome, mcpdev};

/// Three hubs that admit devices (no `--approve-all`), each with its own state directory holding
/// the same hub secret (docs/cluster.md), their stderr collected; the directories.
async fn three_admitting_hubs(broker: &Mosquitto) -> (Vec<HubProcess>, Vec<tempfile::TempDir>) {
    let secret: String = (0..32).map(|i| format!("{:02x}", (i * 37 + 11) % 256)).collect();
    let (mut hubs, mut dirs) = (Vec::new(), Vec::new());
    for _ in 0..3 {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hub-secret");
        std::fs::write(&path, &secret).unwrap();
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
        let state = dir.path().to_string_lossy().into_owned();
        hubs.push(HubProcess::start_with(&["--mqtt", &broker.url()], &[("MCPDEV_STATE_DIR", &state)], true).await);
        dirs.push(dir);
    }
    (hubs, dirs)
}

/// Approvals and revocations made through one hub hold on every hub: each MQTT device is approved
/// through another hub than the one that comes to serve it; a revocation through one hub cuts the
/// device off on the hub that serves it; an activation code one hub handed out is approved
/// through another, and the device's token then opens a third.
#[tokio::test]
async fn approvals_and_revocations_through_one_hub_hold_on_every_hub() {
    let broker = Mosquitto::start().await;
    let (hubs, _dirs) = three_admitting_hubs(&broker).await;
    let ids = mqtt_ids("cc:00:00:00:00", 6);
    for (i, id) in ids.iter().enumerate() {
        let approved = mcpdev(&hubs[i % 3], &["devices", "approve", id, "--json"]).await;
        assert_eq!(approved.code, 0, "{approved:?}");
    }
    for id in &ids {
        admitted_everywhere(&hubs, id, true).await;
    }
    // The devices talk once approved: whichever hub claims each one may serve it.
    let _counts = mqtt_devices(&broker, &ids).await;
    until_listed(&hubs[0], &ids, Duration::from_secs(20)).await;
    let owner = owners(&hubs.iter().collect::<Vec<_>>()).await;
    assert_eq!(owner.len(), ids.len(), "{owner:?}");
    let (target, served_by) = ids.iter().map(|id| (id.clone(), owner[id.as_str()])).find(|(_, h)| *h != 0).expect("some device on hubs 1 or 2");

    let revoked = mcpdev(&hubs[0], &["devices", "revoke", &target, "--json"]).await;
    assert_eq!(revoked.code, 0, "{revoked:?}");
    let r = revoked.json();
    assert_eq!((r["revoked"].as_bool(), r["disconnected"].as_bool()), (Some(true), Some(true)), "cut off on the hub that serves it: {r}");
    // Gone from the hub that served it, at once; no approval left on any hub.
    assert!(!local_rows(&devices(&hubs[served_by]).await).iter().any(|d| d["device_id"] == target.as_str()), "still served after its revocation");
    let call = mcpdev(&hubs[served_by], &["call", "t.echo", "-d", &target, "--wait", "0s"]).await;
    assert_eq!(call.code, 4, "{call:?}");
    admitted_everywhere(&hubs, &target, false).await;
    for (i, hub) in hubs.iter().enumerate() {
        let call = mcpdev(hub, &["call", "t.echo", "-d", &target, "--wait", "0s"]).await;
        assert_eq!(call.code, 4, "hub {i} still reaches the revoked device: {call:?}");
    }

    // A stock device checks in with hub 2 and shows its code; the person approves the code
    // through hub 0, which never saw it; the device's token then opens hub 1.
    const STOCK: &str = "cc:00:00:00:02:01";
    let act = common::ota::check_in(&hubs[2], "hub.lan:8000", STOCK).await;
    let code = act["activation"]["code"].as_str().expect("an activation code").to_string();
    let approved = mcpdev(&hubs[0], &["devices", "approve", &code, "--json"]).await;
    assert_eq!(approved.code, 0, "{approved:?}");
    assert_eq!(approved.json()["device_id"], STOCK);
    assert!(approved.json().get("record").is_none(), "the record stays between hubs: {}", approved.stdout);
    admitted_everywhere(&hubs, STOCK, true).await;
    let again = common::ota::check_in(&hubs[1], "hub.lan:8000", STOCK).await;
    let token = again["websocket"]["token"].as_str().unwrap_or_else(|| panic!("hub 1 hands the approved binding its token: {again}")).to_string();
    let ws = common::ws::device_upgrade(&hubs[1], STOCK, common::ota::CLIENT_ID, Some(&token)).await;
    assert!(ws.is_ok(), "the token of an approval made through hub 0 opens hub 1: {:?}", ws.err());
    let (status, _) = common::ws::refused(common::ws::device_upgrade(&hubs[0], STOCK, common::ota::CLIENT_ID, Some("0123456789abcdef0123456789abcdef")).await);
    assert_eq!(status, 401, "a wrong token is still refused");
    // A code hub 1 handed out is denied through hub 0: gone from hub 1's pending requests.
    const DENIED: &str = "cc:00:00:00:02:02";
    let act = common::ota::check_in(&hubs[1], "hub.lan:8000", DENIED).await;
    let denied_code = act["activation"]["code"].as_str().expect("an activation code").to_string();
    // `devices pending` through any hub lists every hub's requests, each with its hub.
    let row_of = |out: &Outcome| out.json().as_array().and_then(|rows| rows.iter().find(|p| p["code"] == denied_code.as_str()).cloned());
    let theirs = row_of(&mcpdev(&hubs[1], &["devices", "pending", "--json"]).await).expect("hub 1 lists its own request");
    let seen_from_0 = row_of(&mcpdev(&hubs[0], &["devices", "pending", "--json"]).await).expect("hub 0 lists hub 1's request");
    assert_eq!((seen_from_0["device_id"].as_str(), seen_from_0["hub"].as_str()), (Some(DENIED), theirs["hub"].as_str()), "{seen_from_0}");
    let table = mcpdev(&hubs[0], &["devices", "pending"]).await;
    assert!(table.stdout.contains(&denied_code) && table.stdout.contains(theirs["hub"].as_str().unwrap()), "the table names the hub: {}", table.stdout);
    let denied = mcpdev(&hubs[0], &["devices", "deny", &denied_code, "--json"]).await;
    assert_eq!(denied.code, 0, "{denied:?}");
    let pending = mcpdev(&hubs[1], &["devices", "pending", "--json"]).await;
    assert!(!pending.stdout.contains(&denied_code), "{pending:?}");
    let wrong = mcpdev(&hubs[0], &["devices", "approve", "000000"]).await;
    assert_ne!(wrong.code, 0, "a code no hub handed out is refused: {wrong:?}");
    assert!(wrong.stderr.contains("no other hub of the cluster has it either"), "{}", wrong.stderr);
}

/// Polls every hub's `devices admitted` until `device` is (or is not) in it, within 5 s.
async fn admitted_everywhere(hubs: &[HubProcess], device: &str, admitted: bool) {
    for (i, hub) in hubs.iter().enumerate() {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let list = mcpdev(hub, &["devices", "admitted", "--json"]).await;
            if list.json()["devices"].as_array().unwrap().iter().any(|d| d["device_id"] == device) == admitted {
                break;
            }
            assert!(Instant::now() < deadline, "hub {i} did not learn that {device} is {}admitted", if admitted { "" } else { "no longer " });
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// The adversary on the broker: a client that is not a hub publishes admission records under the
/// cluster's prefix, to admit a device nobody approved and to revoke one that was. Records sealed
/// with another hub secret, unsealed ones and ones filed under another device are refused and
/// logged by every hub, and change nothing; a genuine old approval replayed after a revocation
/// does not undo it.
#[tokio::test]
async fn forged_admission_records_are_refused_and_logged() {
    use mcpdev::hub::admission::{Admitted, Record};
    let broker = Mosquitto::start().await;
    let (hubs, _dirs) = three_admitting_hubs(&broker).await;
    const KEPT: &str = "ce:00:00:00:00:01";
    const INTRUDER: &str = "ce:00:00:00:00:66";
    const REVOKED: &str = "ce:00:00:00:00:02";
    assert_eq!(mcpdev(&hubs[1], &["devices", "approve", KEPT]).await.code, 0);
    assert_eq!(mcpdev(&hubs[1], &["devices", "approve", REVOKED]).await.code, 0);
    admitted_everywhere(&hubs, KEPT, true).await;
    admitted_everywhere(&hubs, REVOKED, true).await;

    let url = mcpdev::mqtt::conn::BrokerUrl::parse(&broker.url()).unwrap();
    let mut c = mcpdev::mqtt::conn::connect(url.options("intruder", Duration::from_secs(30), 1 << 20), None);
    // The genuine approval of REVOKED, as the broker keeps it (to replay it later).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let genuine = loop {
        match tokio::time::timeout_at(deadline, c.events.recv()).await.expect("the retained approval").unwrap() {
            mcpdev::mqtt::conn::ConnEvent::Up => c.client.subscribe(format!("mcpdev/admission/{REVOKED}"), rumqttc::QoS::AtLeastOnce).await.unwrap(),
            mcpdev::mqtt::conn::ConnEvent::Message(p) if !p.payload.is_empty() => break p.payload.to_vec(),
            _ => {}
        }
    };
    let far_future = 4_102_444_800_000; // 2100
    let other_secret = mcpdev::hub::secret::HubSecret::from_bytes(&[0x42; 32]);
    let approve_intruder = Record {
        device_id: INTRUDER.into(),
        at_ms: far_future,
        by: "evil".into(),
        approved: Some(Admitted { device_id: INTRUDER.into(), client_id: None, via: None, approved_at_ms: far_future, key_hash: None, nonce: "00".repeat(16), challenge: String::new() }),
    };
    let revoke_kept = Record { device_id: KEPT.into(), at_ms: far_future, by: "evil".into(), approved: None };
    let forgeries = [
        (INTRUDER, approve_intruder.seal(&other_secret)),
        (KEPT, revoke_kept.seal(&other_secret)),
        // Unsealed: a record with no MAC at all.
        (KEPT, serde_json::json!({"body": serde_json::to_string(&revoke_kept).unwrap(), "mac": ""}).to_string()),
        (KEPT, serde_json::to_string(&revoke_kept).unwrap()),
        // A genuine record filed under another device.
        (KEPT, String::from_utf8(genuine.clone()).unwrap()),
    ];
    for (device, text) in &forgeries {
        c.client.publish(format!("mcpdev/admission/{device}"), rumqttc::QoS::AtLeastOnce, true, text.clone()).await.unwrap();
    }
    for hub in &hubs {
        logged(hub, "an admission record for", forgeries.len()).await;
    }
    for (i, hub) in hubs.iter().enumerate() {
        let list = mcpdev(hub, &["devices", "admitted", "--json"]).await.json();
        let ids: Vec<&str> = list["devices"].as_array().unwrap().iter().filter_map(|d| d["device_id"].as_str()).collect();
        assert!(ids.contains(&KEPT) && !ids.contains(&INTRUDER), "hub {i} took a forged record: {ids:?}");
    }

    // Revoked through hub 2; then the genuine old approval replayed: still revoked everywhere.
    assert_eq!(mcpdev(&hubs[2], &["devices", "revoke", REVOKED]).await.code, 0);
    admitted_everywhere(&hubs, REVOKED, false).await;
    c.client.publish(format!("mcpdev/admission/{REVOKED}"), rumqttc::QoS::AtLeastOnce, true, genuine).await.unwrap();
    // Every hub answers the stale record with its later revocation: the broker ends on it.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        match tokio::time::timeout_at(deadline, c.events.recv()).await.expect("the revocation republished").unwrap() {
            mcpdev::mqtt::conn::ConnEvent::Message(p) if p.topic.ends_with(REVOKED) && String::from_utf8_lossy(&p.payload).contains(r#"\"approved\":null"#) => break,
            _ => {}
        }
    }
    admitted_everywhere(&hubs, REVOKED, false).await;
}
