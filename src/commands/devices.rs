//! `mcpdev devices`: the connected devices; `approve`, `revoke`, `pending` and `admitted` manage
//! which devices the hub admits ([`crate::hub::admission`]), through the control API.
//!
//! The listing is read a page at a time (`--page-size` devices per request, in Device-Id order),
//! and written as each page arrives: the hub never builds the whole fleet's answer, and the first
//! line comes after one page whatever the fleet. `--json` keeps its shape (one array of every
//! device, one device per line), `--ndjson` writes one device object per line. A hub too old to
//! page answers with the whole list at once; that is read as the only page.

use super::output::outln;
use std::collections::HashMap;
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
        None => return list(global, &args, &client).await,
        Some(DevicesCommand::Approve { target }) => json!({"op": "approve", "target": target}),
        Some(DevicesCommand::Revoke { device }) => json!({"op": "revoke", "device": device}),
        Some(DevicesCommand::Pending) => json!({"op": "pending"}),
        Some(DevicesCommand::Admitted) => json!({"op": "admitted"}),
    };
    let answer = ask(&client, request).await?;
    if global.json {
        print_json(&answer);
        return Ok(());
    }
    match args.command {
        None => unreachable!("listed above"),
        Some(DevicesCommand::Approve { .. }) => approved(global, &answer),
        Some(DevicesCommand::Revoke { .. }) => revoked(global, &answer),
        Some(DevicesCommand::Pending) => pending(global, &answer),
        Some(DevicesCommand::Admitted) => admitted(global, &answer),
    }
    Ok(())
}

async fn ask(client: &HubClient, request: Value) -> Result<Value, CodedError> {
    match tokio::time::timeout(DEADLINE, client.call(request)).await {
        Err(_) => Err(CodedError::new(Exit::Timeout, format!("the hub did not answer within {DEADLINE:?}"))),
        Ok(Err(e)) => Err(refused(e)),
        Ok(Ok(v)) => Ok(v),
    }
}

/// How the listing is written.
enum Listing {
    Table(Box<comfy_table::Table>, HashMap<String, String>),
    /// The JSON array, one device per line; the device held back until the next one says
    /// whether it needs a comma.
    Array(Option<Value>),
    Ndjson,
}

/// Plain `mcpdev devices`: every connected device (issue 13), a page at a time (issue 24).
async fn list(global: &GlobalArgs, args: &DevicesArgs, client: &HubClient) -> anyhow::Result<()> {
    let mut out = if args.ndjson {
        Listing::Ndjson
    } else if global.json {
        Listing::Array(None)
    } else {
        // Alias -> Device-Id, read once; looked up by Device-Id per row.
        let mut by_id = HashMap::new();
        for (alias, id) in crate::config::aliases() {
            let id = id.to_ascii_lowercase();
            if by_id.get(&id).is_none_or(|a: &String| alias < *a) {
                by_id.insert(id, alias);
            }
        }
        Listing::Table(Box::new(table(global, &["device", "alias", "transport", "state", "tools", "connected since", "address"])), by_id)
    };
    let (mut count, mut after) = (0usize, None::<String>);
    loop {
        let answer = ask(client, json!({"op": "devices", "limit": args.page_size, "after": after})).await?;
        let (devices, next) = match answer {
            // A hub that does not page: everything at once.
            Value::Array(all) => (all, None),
            mut page => (page["devices"].take().as_array_mut().map(std::mem::take).unwrap_or_default(), page["next"].as_str().map(str::to_string)),
        };
        // A cursor that does not move on would loop for ever: a broken hub, said as such.
        if next.is_some() && next == after {
            return Err(CodedError::new(Exit::Unreachable, "the hub's device listing did not move past its cursor").into());
        }
        count += devices.len();
        for d in devices {
            match &mut out {
                Listing::Ndjson => outln!("{d}"),
                Listing::Array(held) => match held.replace(d) {
                    Some(prev) => outln!("  {prev},"),
                    None => outln!("["),
                },
                Listing::Table(t, aliases) => {
                    t.add_row(row(&d, aliases));
                }
            }
        }
        match next {
            Some(n) => after = Some(n),
            None => break,
        }
    }
    match out {
        Listing::Ndjson => {}
        Listing::Array(Some(last)) => outln!("  {last}\n]"),
        Listing::Array(None) => outln!("[]"),
        Listing::Table(t, _) => {
            if count > 0 {
                outln!("{}", render(&t));
            }
        }
    }
    if !global.quiet && !global.json && !args.ndjson {
        eprintln!("{count} device(s) connected");
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

/// A device's row in the table.
fn row(d: &Value, aliases: &HashMap<String, String>) -> Vec<String> {
    let id = d["device_id"].as_str().unwrap_or_default();
    let alias = aliases.get(&id.to_ascii_lowercase()).map_or("-", String::as_str);
    let state = match d["phase"].as_str() {
        Some("ready") => "ready",
        _ if d["onboarding_error"].is_string() => "failed",
        Some("disconnected") => "disconnected",
        _ => "onboarding",
    };
    let tools = d["tools"].as_array().map_or(0, Vec::len);
    let since = d["connected_at_ms"].as_u64().map_or_else(|| "-".into(), local_time);
    let address = d["remote"].as_str().unwrap_or("-");
    vec![id.to_string(), alias.to_string(), text(&d["transport"]), state.to_string(), tools.to_string(), since, address.to_string()]
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
