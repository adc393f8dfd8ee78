use super::*;

fn on(dir: &Path) -> Admission {
    Admission::load(&AdmissionConfig { state_dir: Some(dir.to_path_buf()), ..Default::default() }, &[]).unwrap()
}

const A: &str = "aa:bb:cc:dd:ee:01";
const B: &str = "aa:bb:cc:dd:ee:02";

fn ota<'a>(device_id: &'a str, client_id: &'a str, remote: &str) -> Requester<'a> {
    Requester { device_id, via: Via::Ota, client_id: Some(client_id), key_hash: None, remote: Some(remote.parse().unwrap()), reported: None }
}

fn pending(c: CheckIn) -> (Pending, String) {
    match c {
        CheckIn::Pending { pending, token } => (*pending, token),
        CheckIn::Admitted { .. } => panic!("admitted, expected pending"),
    }
}

fn admitted_token(c: CheckIn) -> String {
    match c {
        CheckIn::Admitted { token } => token,
        CheckIn::Pending { pending, .. } => panic!("pending with code {}, expected admitted", pending.code),
    }
}

#[test]
fn only_the_approved_requester_gets_in_and_keeps_its_token_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let adm = on(dir.path());
    let (victim, victim_token) = pending(adm.check_in(&ota(A, "uuid-victim", "10.0.0.5:1")).unwrap());
    let (thief, thief_token) = pending(adm.check_in(&ota(A, "uuid-thief", "10.0.0.66:1")).unwrap());
    assert_ne!(victim.code, thief.code, "another Client-Id is another request");
    assert_ne!(victim_token, thief_token);
    assert!(matches!(adm.admits(A, Some(&victim_token)), Err(Refusal::NotAdmitted { code: Some(c), .. }) if c == victim.code), "refused until approved, naming its code");
    assert_eq!(adm.activation(A, Some("uuid-victim"), None, None), Activation::Waiting(victim.code.clone()));
    let listed = adm.pending();
    assert!(listed.iter().all(|p| p.conflicts.iter().any(|c| c.contains("another request"))), "both are flagged: {listed:?}");

    let ok = adm.approve(&victim.code, false).unwrap();
    assert_eq!((ok.device_id.as_str(), ok.via, ok.token.is_none()), (A, Some(Via::Ota), true));
    assert_eq!(adm.admits(A, Some(&victim_token)), Ok(()), "the token of the first answer now works (py-xiaozhi)");
    assert!(adm.admits(A, Some(&thief_token)).is_err(), "the impostor's token never does");
    assert_eq!(adm.activation(A, Some("uuid-victim"), None, None), Activation::Approved);
    assert_ne!(adm.activation(A, Some("uuid-thief"), None, None), Activation::Approved);
    assert_eq!(admitted_token(adm.check_in(&ota(A, "uuid-victim", "10.0.0.7:1")).unwrap()), victim_token, "the stock device's next check-in gets it");
    let (_, again) = pending(adm.check_in(&ota(A, "uuid-thief", "10.0.0.66:1")).unwrap());
    assert_ne!(again, victim_token);
    // The impostor's request stays a conflict: approving it needs --rebind.
    let err = adm.approve(&thief.code, false).unwrap_err();
    assert!(err.contains("--rebind") && err.contains("uuid-thief"), "{err}");
    assert!(adm.pending().iter().any(|p| p.code == thief.code && p.conflicts.iter().any(|c| c.contains("admitted already"))));

    let restarted = on(dir.path());
    assert_eq!(restarted.admits(A, Some(&victim_token)), Ok(()), "kept across a restart");
    assert!(matches!(restarted.admits(B, Some(&victim_token)), Err(Refusal::NotAdmitted { .. })), "one device's token opens nothing else");
}

#[test]
fn a_device_key_binds_beyond_the_client_id() {
    let adm = on(tempfile::tempdir().unwrap().path());
    let key = key_hash("0123456789abcdef0123").unwrap();
    let mut r = ota(A, "uuid-a", "10.0.0.5:1");
    r.key_hash = Some(key.clone());
    let (p, token) = pending(adm.check_in(&r).unwrap());
    assert!(p.device_key);
    adm.approve(&p.code, false).unwrap();
    assert_eq!(admitted_token(adm.check_in(&r).unwrap()), token);
    // Same MAC, same (sniffed or computed) Client-Id, no key: nothing.
    let (_, other) = pending(adm.check_in(&ota(A, "uuid-a", "10.0.0.5:1")).unwrap());
    assert_ne!(other, token);
    assert_ne!(adm.activation(A, Some("uuid-a"), None, None), Activation::Approved);
    assert!(key_hash("short").is_err() && key_hash("with space 0123456789").is_err());
}

#[test]
fn approval_by_device_id_prints_a_token_that_ota_never_hands_out() {
    let adm = on(tempfile::tempdir().unwrap().path());
    let ok = adm.approve(A, false).unwrap();
    let token = ok.token.expect("printed once");
    assert_eq!(adm.admits(A, Some(&token)), Ok(()));
    for client in ["", "anything", "uuid-a"] {
        if let Ok(CheckIn::Admitted { .. }) = adm.check_in(&ota(A, client, "10.0.0.5:1")) {
            panic!("an OTA check-in with Client-Id {client:?} got the out-of-band token");
        }
    }
    let err = adm.approve(A, false).unwrap_err();
    assert!(err.contains("admitted already") && err.contains("--rebind"), "{err}");
    let again = adm.approve(A, true).unwrap();
    assert!(again.replaced.is_some());
    assert!(adm.admits(A, Some(&token)).is_err(), "a re-binding ends the old token");
    assert_eq!(adm.admits(A, Some(&again.token.unwrap())), Ok(()));
}

#[test]
fn a_revocation_holds_on_every_path_and_a_new_approval_issues_new_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let adm = Admission::load(&AdmissionConfig { state_dir: Some(dir.path().into()), gateway_tokens: vec!["gw-secret".into()], ..Default::default() }, &["shared".into()]).unwrap();
    let token = adm.approve(A, false).unwrap().token.unwrap();
    let vision = adm.vision_token(A);
    assert!(adm.verify_vision(A, &vision) && adm.may_serve(A));
    assert_eq!(adm.revoke(A).unwrap(), WasAdmitted::Approved);
    assert!(matches!(adm.admits(A, Some(&token)), Err(Refusal::Revoked { .. })));
    assert!(matches!(adm.admits(A, Some("shared")), Err(Refusal::Revoked { .. })), "a shared token does not bring it back");
    assert!(matches!(adm.admits_through_gateway(A, Some("gw-secret"), None, None), Some(Err(Refusal::Revoked { .. }))));
    assert!(!adm.verify_vision(A, &vision), "its vision token ends too");
    assert!(!adm.may_serve(A), "its MQTT uplinks are not served");
    assert!(adm.mqtt_login("GID_mcpdev@@@aa_bb_cc_dd_ee_01", &token).is_err());
    assert!(matches!(on(dir.path()).admits(A, Some(&token)), Err(Refusal::Revoked { .. })), "remembered across a restart");
    let new = adm.approve(A, false).unwrap().token.unwrap();
    assert_ne!(new, token, "re-approval issues a new token");
    assert!(adm.admits(A, Some(&token)).is_err() && adm.admits(A, Some(&new)).is_ok());
    assert_ne!(adm.vision_token(A), vision);
    let all = Admission::load(&AdmissionConfig { approve_all: true, ..Default::default() }, &[]).unwrap();
    assert_eq!(all.admits(B, None), Ok(()));
    assert_eq!(all.revoke(B).unwrap(), WasAdmitted::ApproveAll, "revoking on --approve-all says what let the device in");
    assert!(all.admits(B, None).is_err(), "--approve-all honours a revocation");
    assert_eq!(all.revoke(B).unwrap(), WasAdmitted::RevokedAlready);
}

#[test]
fn a_gateway_credential_admits_only_approved_device_ids() {
    let adm = Admission::load(&AdmissionConfig { gateway_tokens: vec!["gw-secret".into()], ..Default::default() }, &[]).unwrap();
    assert!(adm.admits_through_gateway(A, Some("not-the-gateway"), None, None).is_none(), "not a gateway credential: the normal rules apply");
    assert!(adm.is_gateway_credential(Some(" gw-secret ")) && !adm.is_gateway_credential(Some("gw-secre")) && !adm.is_gateway_credential(None) && !adm.is_gateway_credential(Some("")));
    let remote = Some("10.0.0.9:5000".parse().unwrap());
    let Some(Err(Refusal::NotAdmitted { code: Some(code), .. })) = adm.admits_through_gateway(A, Some("gw-secret"), None, remote) else { panic!("an unapproved Device-Id must wait") };
    assert!(matches!(adm.admits(A, Some("gw-secret")), Err(Refusal::NotAdmitted { .. })), "the credential is no device token");
    let ok = adm.approve(&code, false).unwrap();
    assert_eq!((ok.via, ok.token), (Some(Via::Gateway), None));
    assert_eq!(adm.admits_through_gateway(A, Some("gw-secret"), None, remote), Some(Ok(())));
    assert!(matches!(adm.admits_through_gateway(B, Some("gw-secret"), None, remote), Some(Err(Refusal::NotAdmitted { .. }))));
}

#[test]
fn websocket_requests_get_the_token_on_approval_and_codes_are_checked() {
    let adm = on(tempfile::tempdir().unwrap().path());
    let r = Requester { device_id: B, via: Via::Websocket, client_id: None, key_hash: None, remote: Some("127.0.0.1:5".parse().unwrap()), reported: None };
    let p = adm.request(&r).unwrap();
    let wrong = if p.code == "000000" { "000001" } else { "000000" };
    assert!(adm.approve(wrong, false).unwrap_err().contains("no device is waiting"));
    assert!(adm.approve("nonsense", false).unwrap_err().contains("neither"));
    let token = adm.approve(&p.code, false).unwrap().token.unwrap();
    assert_eq!(adm.admits(B, Some(&token)), Ok(()));
    assert_eq!(adm.device_token(B), Some(token));
    assert_eq!(adm.admitted().len(), 1);
    let d = adm.request(&Requester { device_id: A, ..r }).unwrap();
    assert_eq!(adm.deny(&d.code).unwrap().device_id, A);
    assert!(adm.approve(&d.code, false).is_err(), "a denied code is gone");
}

#[test]
fn modes_are_honoured() {
    let shared = Admission::load(&AdmissionConfig::default(), &["s3cret".into()]).unwrap();
    assert_eq!(shared.admits(A, Some("s3cret")), Ok(()));
    let resident = shared.admit_resident(B);
    assert_eq!(shared.admits(B, Some(&resident)), Ok(()), "in-process devices are admitted for this run");
    assert!(shared.admitted().is_empty(), "and not written down");
    assert!(shared.admits(A, Some("other")).is_err());
    let all = Admission::load(&AdmissionConfig { approve_all: true, ..Default::default() }, &[]).unwrap();
    assert_eq!(all.admits(A, None), Ok(()));
    assert!(matches!(all.check_in(&ota(A, "x", "10.0.0.1:1")), Ok(CheckIn::Admitted { .. })));
}

#[test]
fn a_malformed_file_stops_the_hub_with_advice() {
    let dir = tempfile::tempdir().unwrap();
    crate::paths::write_private(&dir.path().join("admitted.json"), b"{oops").unwrap();
    let err = Admission::load(&AdmissionConfig { state_dir: Some(dir.path().to_path_buf()), ..Default::default() }, &[]).err().unwrap().to_string();
    assert!(err.contains("remove it"), "{err}");
}

#[test]
fn a_file_from_before_bindings_keeps_its_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let old = format!(r#"{{"version":1,"devices":[{{"device_id":"{A}","client_id":"uuid-a","approved_at_ms":1}}]}}"#);
    crate::paths::write_private(&dir.path().join("admitted.json"), old.as_bytes()).unwrap();
    let adm = on(dir.path());
    let legacy = adm.secret.token(Purpose::Device, A);
    assert_eq!(adm.admits(A, Some(&legacy)), Ok(()));
}

/// Two hubs with the same secret (a cluster): each one's decisions, imported by the other,
/// give the same tokens there; a revocation made later holds whatever order the records
/// arrive in; a record made with another secret is refused.
#[test]
fn a_decision_imported_from_another_hub_verifies_the_same_tokens_and_a_later_revocation_holds() {
    let (d1, d2, d3) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let h1 = on(d1.path());
    std::fs::copy(d1.path().join("hub-secret"), d2.path().join("hub-secret")).unwrap();
    let h2 = on(d2.path());
    let stranger = on(d3.path());
    let (p, token) = pending(h1.check_in(&ota(A, "uuid-a", "10.0.0.5:1")).unwrap());
    h1.approve(&p.code, false).unwrap();
    let approval = h1.record(A, "h1").unwrap();
    assert!(h2.admits(A, Some(&token)).is_err(), "not yet known on h2");
    assert_eq!(h2.import(A, approval.as_bytes()), Ok(Imported::Applied { device_id: A.into(), revoked: false, cut: false }));
    assert_eq!(h2.admits(A, Some(&token)), Ok(()), "the same token verifies on h2");
    assert_eq!(admitted_token(h2.check_in(&ota(A, "uuid-a", "10.0.0.5:1")).unwrap()), token, "and h2 hands the approved binding its token");
    assert_eq!(h2.import(A, approval.as_bytes()), Ok(Imported::Same));
    // Revoked through h2, whose record is later than the approval even if its clock is not.
    h2.revoke(A).unwrap();
    let revocation = h2.record(A, "h2").unwrap();
    assert!(matches!(h1.import(A, revocation.as_bytes()), Ok(Imported::Applied { revoked: true, cut: true, .. })));
    assert!(matches!(h1.admits(A, Some(&token)), Err(Refusal::Revoked { .. })));
    // The old approval replayed (a late delivery, or a replay by a broker client) is older.
    assert_eq!(h1.import(A, approval.as_bytes()), Ok(Imported::Older));
    assert!(matches!(h1.admits(A, Some(&token)), Err(Refusal::Revoked { .. })), "an older approval never undoes a newer revocation");
    // Survives h1's restart (the import is on disk).
    drop(h1);
    assert!(on(d1.path()).is_revoked(A));
    // A record sealed with another secret, or filed under another device, is refused.
    stranger.approve(B, false).unwrap();
    let forged = stranger.record(B, "evil").unwrap();
    assert!(h2.import(B, forged.as_bytes()).unwrap_err().contains("MAC"));
    assert!(h2.device_token(B).is_none());
    assert!(h2.import(B, revocation.as_bytes()).unwrap_err().contains("filed under"));
}
