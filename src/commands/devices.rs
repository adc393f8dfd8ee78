//! `mcpdev devices`: the connected devices; `approve`, `revoke`, `pending` and `admitted` manage
//! which devices the hub admits ([`crate::hub::admission`]), through the control API.

use super::output::outln;
use std::time::Duration;

use serde_json::{Value, json};

use super::output::{local_time, print_json, render, table};
use crate::cli::{DevicesArgs, DevicesCommand, GlobalArgs};
use crate::exit::{CodedError, Exit};
use crate::links::hub_client::{ControlError, HubClient};

/// How long one request to the hub may take.
const DEADLINE: Duration = Duration::from_secs(15);

pub async fn run(global: &GlobalArgs, args: DevicesArgs) -> anyhow::Result<()> {
    // A refusal, or a hub the local token is not for, is exit 3; an unreachable hub 4.
    let client = HubClient::open(&args.hub).await?;
    let request = match &args.command {
        None => json!({"op": "devices"}),
        Some(DevicesCommand::Approve { target, rebind }) => json!({"op": "approve", "target": target, "rebind": rebind}),
        Some(DevicesCommand::Deny { code }) => json!({"op": "deny", "code": code}),
        Some(DevicesCommand::Revoke { device }) => json!({"op": "revoke", "device": device}),
        Some(DevicesCommand::Pending) => json!({"op": "pending"}),
        Some(DevicesCommand::Admitted) => json!({"op": "admitted"}),
    };
    let answer = match tokio::time::timeout(DEADLINE, client.call(request)).await {
        Err(_) => return Err(CodedError::new(Exit::Timeout, format!("the hub did not answer within {DEADLINE:?}")).into()),
        Ok(Err(e)) => return Err(refused(e).into()),
        Ok(Ok(v)) => v,
    };
    if global.json {
        print_json(&answer);
        return Ok(());
    }
    match args.command {
        None => connected(global, &answer),
        Some(DevicesCommand::Approve { .. }) => approved(global, &answer),
        Some(DevicesCommand::Deny { .. }) => denied(global, &answer),
        Some(DevicesCommand::Revoke { .. }) => revoked(global, &answer),
        Some(DevicesCommand::Pending) => pending(global, &answer),
        Some(DevicesCommand::Admitted) => admitted(global, &answer),
    }
    Ok(())
}

fn refused(e: ControlError) -> CodedError {
    let exit = if e.kind == "bad_request" { Exit::Usage } else { Exit::Unreachable };
    let err = CodedError::new(exit, e.message.clone());
    if e.kind == "bad_request" && e.message.contains("unknown variant") {
        return err.with_help("this hub is older than this mcpdev and does not manage admission; update it");
    }
    err
}

fn text(v: &Value) -> String {
    v.as_str().map(str::to_string).unwrap_or_else(|| if v.is_null() { "-".into() } else { v.to_string() })
}

/// Plain `mcpdev devices`: every connected device (issue 13).
fn connected(global: &GlobalArgs, answer: &Value) {
    let devices = answer.as_array().cloned().unwrap_or_default();
    let aliases = crate::config::aliases();
    let mut t = table(global, &["device", "alias", "transport", "state", "tools", "connected since", "address"]);
    for d in &devices {
        let id = d["device_id"].as_str().unwrap_or_default();
        let alias = aliases.iter().filter(|(_, v)| v.eq_ignore_ascii_case(id)).map(|(k, _)| k.as_str()).min().unwrap_or("-");
        let state = match d["phase"].as_str() {
            Some("ready") => "ready",
            _ if d["onboarding_error"].is_string() => "failed",
            Some("disconnected") => "disconnected",
            _ => "onboarding",
        };
        let tools = d["tools"].as_array().map_or(0, Vec::len);
        let since = d["connected_at_ms"].as_u64().map_or_else(|| "-".into(), local_time);
        let address = d["remote"].as_str().unwrap_or("-");
        t.add_row(vec![id.to_string(), alias.to_string(), text(&d["transport"]), state.to_string(), tools.to_string(), since, address.to_string()]);
    }
    if !devices.is_empty() {
        outln!("{}", render(&t));
    }
    if !global.quiet {
        eprintln!("{} device(s) connected", devices.len());
    }
}

fn approved(global: &GlobalArgs, a: &Value) {
    let id = super::output::text(a["device_id"].as_str().unwrap_or_default());
    if !global.quiet
        && let Some(replaced) = a["replaced"].as_str()
    {
        eprintln!("re-bound {id}: replaced {}; its old tokens no longer work", super::output::text(replaced));
    }
    match a["token"].as_str() {
        // Printed to stdout only, once: the person passes it on to the device.
        Some(token) => {
            outln!("{token}");
            if !global.quiet {
                let how = if a["via"] == "websocket" { "it asked over WebSocket" } else { "it was approved by its Device-Id" };
                eprintln!("approved {id}; {how}, so it cannot learn this token from an OTA check-in. Give the device the token above: its WebSocket `Authorization: Bearer <token>` (and its MQTT password), e.g.");
                eprintln!("  MCPDEV_DEVICE_TOKEN=<token> mcpdev sim --device-id {id} --url ws://<hub>:<device port>/xiaozhi/v1/");
                eprintln!("A device that checks in at OTA should be approved by the code it shows instead.");
            }
        }
        None => {
            if !global.quiet {
                let next = if a["via"] == "gateway" { "its gateway's next connection for it gets in" } else { "its activation poll or next OTA check-in gets its token" };
                eprintln!("approved {id}: {next}");
            }
            outln!("{id}");
        }
    }
}

fn denied(global: &GlobalArgs, p: &Value) {
    let id = super::output::text(p["device_id"].as_str().unwrap_or_default());
    outln!("{id}");
    if !global.quiet {
        eprintln!("denied the request of {id} (code {}); it may ask again with a new code", text(&p["code"]));
    }
}

fn revoked(global: &GlobalArgs, a: &Value) {
    let id = super::output::text(a["device_id"].as_str().unwrap_or_default());
    outln!("{id}");
    if !global.quiet {
        let was = if a["revoked"] == true { "revoked" } else { "was not admitted" };
        let gone = if a["disconnected"] == true { "; disconnected it" } else { "" };
        eprintln!("{id} {was}{gone}");
    }
}

fn pending(global: &GlobalArgs, answer: &Value) {
    let list = answer.as_array().cloned().unwrap_or_default();
    let mut t = table(global, &["code", "device", "via", "client id", "address", "reported", "since", "expires in", "conflict"]);
    for p in &list {
        let since = p["since_ms"].as_u64().map_or_else(|| "-".into(), local_time);
        let expires = p["expires_in_ms"].as_u64().map_or_else(|| "-".into(), |ms| format!("{}s", ms / 1000));
        let reported = p["reported"].as_object().map_or_else(|| "-".into(), |r| r.values().filter_map(Value::as_str).collect::<Vec<_>>().join(", "));
        let conflict = p["conflicts"].as_array().filter(|c| !c.is_empty()).map_or_else(|| "-".into(), |c| c.iter().filter_map(Value::as_str).collect::<Vec<_>>().join("; "));
        t.add_row(vec![text(&p["code"]), text(&p["device_id"]), text(&p["via"]), text(&p["client_id"]), text(&p["remote"]), reported, since, expires, conflict]);
    }
    if !list.is_empty() {
        outln!("{}", render(&t));
    }
    if !global.quiet {
        let conflicts = list.iter().filter(|p| p["conflicts"].as_array().is_some_and(|c| !c.is_empty())).count();
        if conflicts > 0 {
            eprintln!("warning: {conflicts} request(s) conflict: the same Device-Id asked from another Client-Id, device key or address, or is admitted already. Approve only the code the device itself shows");
        }
        let hint = if list.is_empty() { "" } else { "; admit one with `mcpdev devices approve CODE` (the code on the device's screen or in its refusal)" };
        eprintln!("{} request(s) waiting{hint}", list.len());
    }
}

fn admitted(global: &GlobalArgs, answer: &Value) {
    let list = answer["devices"].as_array().cloned().unwrap_or_default();
    let mut t = table(global, &["device", "client id", "via", "device key", "approved at"]);
    for a in &list {
        let at = a["approved_at_ms"].as_u64().map_or_else(|| "-".into(), local_time);
        let key = if a["device_key"] == true { "yes" } else { "-" };
        let via = a["via"].as_str().unwrap_or("device id");
        t.add_row(vec![text(&a["device_id"]), text(&a["client_id"]), via.to_string(), key.to_string(), at]);
    }
    if !list.is_empty() {
        outln!("{}", render(&t));
    }
    if !global.quiet {
        eprintln!("{} device(s) admitted", list.len());
        if answer["approve_all"] == true {
            eprintln!("warning: this hub runs with --approve-all: every device is admitted");
        }
    }
}
