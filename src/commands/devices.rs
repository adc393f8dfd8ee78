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
    let client = HubClient::connect(&args.hub).await.map_err(|e| {
        CodedError::new(Exit::Unreachable, format!("cannot reach the hub at {}: {e}", args.hub)).with_help("is `mcpdev serve` running? (--hub or MCPDEV_HUB names another hub)")
    })?;
    let request = match &args.command {
        None => json!({"op": "devices"}),
        Some(DevicesCommand::Approve { target }) => json!({"op": "approve", "target": target}),
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
    // In a cluster every row names the hub that serves the device ([`crate::hub::remote`]).
    let cluster = devices.iter().any(|d| d["hub"].is_string());
    let mut columns = vec!["device", "alias", "transport", "state", "tools", "connected since", "address"];
    if cluster {
        columns.push("hub");
    }
    let mut t = table(global, &columns);
    for d in &devices {
        let id = d["device_id"].as_str().unwrap_or_default();
        let alias = aliases.iter().filter(|(_, v)| v.eq_ignore_ascii_case(id)).map(|(k, _)| k.as_str()).min().unwrap_or("-");
        let state = match d["phase"].as_str() {
            Some("ready") => "ready",
            _ if d["onboarding_error"].is_string() => "failed",
            Some("disconnected") => "disconnected",
            _ => "onboarding",
        };
        let tools = d["tools"].as_array().map(|t| t.len() as u64).or_else(|| d["tool_count"].as_u64()).unwrap_or(0);
        let since = d["connected_at_ms"].as_u64().map_or_else(|| "-".into(), local_time);
        let address = d["remote"].as_str().unwrap_or("-");
        let mut row = vec![id.to_string(), alias.to_string(), text(&d["transport"]), state.to_string(), tools.to_string(), since, address.to_string()];
        if cluster {
            row.push(text(&d["hub"]));
        }
        t.add_row(row);
    }
    if !devices.is_empty() {
        outln!("{}", render(&t));
    }
    if !global.quiet {
        eprintln!("{} device(s) connected", devices.len());
    }
}

fn approved(global: &GlobalArgs, a: &Value) {
    let id = a["device_id"].as_str().unwrap_or_default();
    match a["token"].as_str() {
        // Printed to stdout only: the person passes it on to the device.
        Some(token) => {
            outln!("{token}");
            if !global.quiet {
                eprintln!("approved {id}. It cannot learn its token from an OTA check-in: give it the token above, e.g.");
                eprintln!("  MCPDEV_DEVICE_TOKEN=<token> mcpdev sim --device-id {id} --url ws://HUB:8000/xiaozhi/v1/");
            }
        }
        None => {
            if !global.quiet {
                eprintln!("approved {id}: its next activation poll or OTA check-in gets its token");
            }
            outln!("{id}");
        }
    }
}

fn revoked(global: &GlobalArgs, a: &Value) {
    let id = a["device_id"].as_str().unwrap_or_default();
    outln!("{id}");
    if !global.quiet {
        let was = if a["revoked"] == true { "revoked" } else { "was not admitted" };
        let gone = if a["disconnected"] == true { "; disconnected it" } else { "" };
        eprintln!("{id} {was}{gone}");
    }
}

fn pending(global: &GlobalArgs, answer: &Value) {
    let list = answer.as_array().cloned().unwrap_or_default();
    let mut t = table(global, &["code", "device", "via", "client id", "address", "since", "expires in"]);
    for p in &list {
        let since = p["since_ms"].as_u64().map_or_else(|| "-".into(), local_time);
        let expires = p["expires_in_ms"].as_u64().map_or_else(|| "-".into(), |ms| format!("{}s", ms / 1000));
        t.add_row(vec![text(&p["code"]), text(&p["device_id"]), text(&p["via"]), text(&p["client_id"]), text(&p["remote"]), since, expires]);
    }
    if !list.is_empty() {
        outln!("{}", render(&t));
    }
    if !global.quiet {
        let hint = if list.is_empty() { "" } else { "; admit one with `mcpdev devices approve CODE`" };
        eprintln!("{} device(s) waiting{hint}", list.len());
    }
}

fn admitted(global: &GlobalArgs, answer: &Value) {
    let list = answer["devices"].as_array().cloned().unwrap_or_default();
    let mut t = table(global, &["device", "client id", "approved at"]);
    for a in &list {
        let at = a["approved_at_ms"].as_u64().map_or_else(|| "-".into(), local_time);
        t.add_row(vec![text(&a["device_id"]), text(&a["client_id"]), at]);
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
