//! Device admission (issue 10 item 4): a device is admitted, not merely connected. With the built
//! binary, the stock firmware's OTA shapes (reference §3) and raw WebSocket clients.

mod common;

use common::ota::{CLIENT_ID, check_in, check_in_as, http};
use common::ws::{closed, refused};
use common::{HubProcess, Outcome, mcpdev, spawn_mcpdev};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio_tungstenite::tungstenite;

const A: &str = "aa:bb:cc:dd:ee:a1";
const B: &str = "aa:bb:cc:dd:ee:b2";

/// A WebSocket to the device listener as `device` (with the stock Client-Id) and `token`: the
/// socket, or the refusal's status and body.
async fn connect(hub: &HubProcess, device: &str, token: Option<&str>) -> Result<common::ws::DeviceWs, (u16, String)> {
    common::ws::device_upgrade(hub, device, CLIENT_ID, token).await
}

async fn ok(hub: &HubProcess, args: &[&str]) -> Outcome {
    let out = mcpdev(hub, args).await;
    assert_eq!(out.code, 0, "mcpdev {args:?}: {out:?}");
    out
}

/// The device ids `mcpdev devices --json` lists as connected.
async fn connected(hub: &HubProcess) -> Vec<String> {
    let v = ok(hub, &["devices", "--json"]).await.json();
    v.as_array().unwrap().iter().map(|d| d["device_id"].as_str().unwrap().to_string()).collect()
}

/// `mcpdev devices approve ID` for a device that has not asked: the token it prints.
async fn approve_id(hub: &HubProcess, device: &str) -> String {
    let token = ok(hub, &["devices", "approve", device]).await.stdout.trim().to_string();
    assert_eq!(token.len(), 32, "approve prints the device's token: {token:?}");
    token
}

#[tokio::test]
async fn the_stock_activation_flow_approves_a_device_by_its_code() {
    let hub = HubProcess::start_admitting(&[], &[]).await;
    assert_eq!(hub.info["approve_all"], false);

    // An unknown device: an activation block with code and challenge, and nothing to connect with.
    let r = check_in(&hub, "hub.lan:8000", A).await;
    let act = &r["activation"];
    let code = act["code"].as_str().expect("a code").to_string();
    assert!(code.len() == 6 && code.bytes().all(|b| b.is_ascii_digit()), "{act}");
    assert!(act["challenge"].as_str().is_some_and(|c| !c.is_empty()), "{act}");
    assert!(act["message"].as_str().unwrap().contains(&code), "{act}");
    assert!(act["timeout_ms"].as_u64().is_some_and(|t| t > 0), "{act}");
    // Settings come with the first answer (py-xiaozhi connects with them), but the token is bound
    // to this request: refused until its code is approved.
    let first_token = r["websocket"]["token"].as_str().expect("a token bound to this request").to_string();
    let (status, body) = refused(connect(&hub, A, Some(&first_token)).await);
    assert_eq!(status, 401);
    assert!(body.contains(&code), "the refusal names the request's code: {body}");
    assert_eq!(check_in(&hub, "hub.lan:8000", A).await["activation"]["code"], code.as_str(), "the code stays the same while it lives");

    // /activate: 202 while pending; a device that never checked in has nothing pending.
    let hub = &hub;
    let activate = |device: &'static str| async move { http(hub, "POST", "/xiaozhi/ota/activate", &[("Device-Id", device), ("Client-Id", CLIENT_ID)], "{}").await };
    assert_eq!(activate(A).await.0, 202);
    assert_eq!(activate(B).await.0, 404);
    let pending = ok(hub, &["devices", "pending", "--json"]).await.json();
    assert!(pending.as_array().unwrap().iter().any(|p| p["code"] == code.as_str() && p["device_id"] == A && p["via"] == "ota"), "{pending}");

    let approved = ok(hub, &["devices", "approve", &code]).await;
    assert_eq!(approved.stdout.trim(), A, "an OTA device learns its token itself; nothing secret is printed: {approved:?}");
    assert_eq!(activate(A).await.0, 200);

    // The next check-in carries the device's own token, and it opens the WebSocket for A only.
    let r = check_in(hub, "hub.lan:8000", A).await;
    assert!(r.get("activation").is_none(), "{r}");
    let token = r["websocket"]["token"].as_str().unwrap().to_string();
    assert_eq!(token, first_token, "the token of the first answer is the one approved");
    // The same Device-Id with another Client-Id does not get it: its own request and a token the
    // hub refuses.
    let other = check_in_as(hub, "hub.lan:8000", A, "another-uuid").await;
    assert!(other["activation"]["code"].is_string() && other["activation"]["code"] != code.as_str(), "{other}");
    let other_token = other["websocket"]["token"].as_str().unwrap();
    assert_ne!(other_token, token);
    assert_eq!(refused(connect(hub, A, Some(other_token)).await).0, 401);

    let _ws = connect(hub, A, Some(&token)).await.expect("A connects with its own token");
    assert!(connected(hub).await.contains(&A.to_string()));
    let admitted = ok(hub, &["devices", "admitted", "--json"]).await.json();
    assert!(admitted["devices"].as_array().unwrap().iter().any(|d| d["device_id"] == A), "{admitted}");
}

#[tokio::test]
async fn tokens_are_bound_to_their_device_and_revoke_disconnects() {
    let hub = HubProcess::start_admitting(&[], &[]).await;
    let token_a = approve_id(&hub, A).await;
    let token_b = approve_id(&hub, B).await;
    assert_ne!(token_a, token_b);

    let (status, body) = refused(connect(&hub, B, Some(&token_a)).await);
    assert_eq!(status, 401);
    assert!(body.contains("not this device's current token"), "{body}");
    let (status, body) = refused(connect(&hub, A, None).await);
    assert_eq!(status, 401);
    assert!(body.contains("sent no token"), "{body}");

    let mut ws = connect(&hub, A, Some(&token_a)).await.expect("A connects with its own token");
    // Another client reusing A's Device-Id without A's token does not take A's session over.
    let (status, _) = refused(connect(&hub, A, Some(&token_b)).await);
    assert_eq!(status, 401);
    assert!(connected(&hub).await.contains(&A.to_string()));

    let revoked = ok(&hub, &["devices", "revoke", A, "--json"]).await.json();
    assert_eq!((revoked["revoked"].as_bool(), revoked["disconnected"].as_bool()), (Some(true), Some(true)), "{revoked}");
    closed(&mut ws).await;
    let (status, body) = refused(connect(&hub, A, Some(&token_a)).await);
    assert_eq!(status, 401);
    assert!(body.contains("was revoked"), "{body}");
    // A new approval issues a new token; the old one stays dead.
    let again = approve_id(&hub, A).await;
    assert_ne!(again, token_a);
    assert_eq!(refused(connect(&hub, A, Some(&token_a)).await).0, 401);
    connect(&hub, A, Some(&again)).await.expect("the new token works");
}

#[tokio::test]
async fn a_websocket_only_device_is_pending_and_runs_with_the_token_approve_prints() {
    let hub = HubProcess::start_admitting(&[], &[]).await;
    const DEV: &str = "02:00:00:00:ad:01";
    let (status, body) = refused(connect(&hub, DEV, None).await);
    assert_eq!(status, 401);
    let pending = ok(&hub, &["devices", "pending", "--json"]).await.json();
    let entry = pending.as_array().unwrap().iter().find(|p| p["device_id"] == DEV).cloned().unwrap_or_else(|| panic!("{DEV} is not pending: {pending}"));
    assert_eq!(entry["via"], "websocket");
    let code = entry["code"].as_str().unwrap();
    assert!(body.contains(&format!("mcpdev devices approve {code}")), "the refusal says what to do: {body}");

    let approved = ok(&hub, &["devices", "approve", code]).await;
    let token = approved.stdout.trim();
    assert_eq!(token.len(), 32, "{approved:?}");
    assert!(approved.stderr.contains("MCPDEV_DEVICE_TOKEN="), "says how to give the device its token: {approved:?}");
    let _sim = spawn_mcpdev(&["sim", "--url", &hub.device_url, "--device-id", DEV], &[("MCPDEV_DEVICE_TOKEN", token)]);
    // The device came up with that token: a call through the hub works (`ok` asserts exit 0).
    ok(&hub, &["call", "self.audio_speaker.set_volume", "volume=7", "-d", DEV, "--wait", "10s"]).await;
}

#[tokio::test]
async fn approve_all_admits_anything_and_says_so_at_start_up() {
    let state = tempfile::tempdir().unwrap();
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcpdev"));
    cmd.args(["serve", "--json", "--approve-all", "--device-addr", "127.0.0.1:0", "--host-addr", "127.0.0.1:0"])
        .env("MCPDEV_STATE_DIR", state.path())
        .env_remove("RUST_LOG")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let mut child = cmd.spawn().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut stderr = BufReader::new(child.stderr.take().unwrap()).lines();
    let line = tokio::time::timeout(common::ws::DEADLINE, stdout.next_line()).await.unwrap().unwrap().unwrap();
    let info: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(info["approve_all"], true, "{info}");
    let warning = tokio::time::timeout(common::ws::DEADLINE, async {
        while let Some(l) = stderr.next_line().await.unwrap() {
            if l.contains("WARN") && l.contains("--approve-all") {
                return l;
            }
        }
        panic!("serve ended without the warning");
    })
    .await
    .expect("the start-up warning");
    assert!(warning.contains("every device is admitted"), "{warning}");

    let device_url = info["devices"].as_str().unwrap();
    let mut req = tungstenite::client::IntoClientRequest::into_client_request(device_url).unwrap();
    req.headers_mut().insert("Device-Id", A.parse().unwrap());
    assert!(tokio_tungstenite::connect_async(req).await.is_ok(), "any device, no token");
}

#[tokio::test]
async fn approvals_survive_a_restart_and_demo_devices_are_admitted() {
    let state = tempfile::tempdir().unwrap();
    let dir = state.path().to_str().unwrap().to_string();
    let env = [("MCPDEV_STATE_DIR", dir.as_str())];
    let first = HubProcess::start_admitting(&[], &env).await;
    let token = approve_id(&first, A).await;
    drop(first);

    let hub = HubProcess::start_admitting(&["--demo", "1"], &env).await;
    let _ws = connect(&hub, A, Some(&token)).await.expect("the approval and the token outlive the hub");
    let admitted = ok(&hub, &["devices", "admitted", "--json"]).await.json();
    assert_eq!(admitted["devices"][0]["device_id"], A, "{admitted}");
    // In-process demo devices get their own tokens, whatever the mode.
    ok(&hub, &["hello", "-d", "02:00:00:00:00:01", "--wait", "10s"]).await;
}

/// Issue 31: on an `--approve-all` hub, `devices revoke` reports what it recorded (revoked, and
/// that `--approve-all` had let the device in), and `sim --count 3` runs on when one of its
/// devices is revoked: that one ends alone, reported on stderr; the other two stay connected.
#[tokio::test]
async fn a_revoked_device_of_sim_count_ends_alone_and_revoke_reports_what_it_recorded() {
    let hub = HubProcess::start(&[], &[]).await;
    let sim_state = tempfile::tempdir().unwrap();
    let mut sim = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcpdev"))
        .args(["sim", "--url", &hub.device_url, "--device-id", "02:00:00:00:31:01", "--count", "3"])
        .env("MCPDEV_STATE_DIR", sim_state.path())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    for id in ["02:00:00:00:31:01", "02:00:00:00:31:02", "02:00:00:00:31:03"] {
        ok(&hub, &["hello", "-d", id, "--wait", "10s"]).await;
    }
    let revoked = ok(&hub, &["devices", "revoke", "02:00:00:00:31:02", "--json"]).await.json();
    assert_eq!(revoked["revoked"], true, "the revocation is recorded: {revoked}");
    assert_eq!((revoked["was"].as_str(), revoked["was_admitted"].as_bool(), revoked["disconnected"].as_bool()), (Some("approve_all"), Some(true), Some(true)), "{revoked}");
    let human = ok(&hub, &["devices", "revoke", "02:00:00:00:31:02"]).await;
    assert!(human.stderr.contains("revoked (it was revoked already"), "{human:?}");

    // The revoked device reconnects, is refused, and ends alone.
    let mut lines = BufReader::new(sim.stderr.take().unwrap()).lines();
    let report = tokio::time::timeout(std::time::Duration::from_secs(20), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if line.contains("device 02:00:00:00:31:02 stopped") {
                return line;
            }
        }
        panic!("sim's stderr ended without reporting the revoked device");
    })
    .await
    .expect("the refusal is reported");
    assert!(report.contains("was revoked") && report.contains("2 of 3 still run"), "{report}");
    assert!(sim.try_wait().unwrap().is_none(), "sim runs on");
    for id in ["02:00:00:00:31:01", "02:00:00:00:31:03"] {
        ok(&hub, &["hello", "-d", id]).await;
    }
    assert!(!connected(&hub).await.contains(&"02:00:00:00:31:02".to_string()));
}
