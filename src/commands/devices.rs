//! `mcpdev devices`: the connected devices; `approve`, `revoke`, `pending` and `admitted` manage
//! which devices the hub admits ([`crate::hub::admission`]), through the control API.
//!
//! The listing is read a page at a time (`--page-size` devices per request, in Device-Id order),
//! and written as each page arrives: the hub never builds the whole fleet's answer, and the first
//! line comes after one page whatever the fleet (the table too, unless it is one page at a
//! terminal: [`Listing::Table`]). `--json` keeps its shape (one array of every
//! device, one device per line), `--ndjson` writes one device object per line. A hub too old to
//! page answers with the whole list at once; that is read as the only page.

use super::output::outln;
use std::collections::HashMap;
use std::time::Duration;

use serde_json::{Value, json};

use super::column_stream::ColumnStream;
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
        None => return list(global, &args, &client).await,
        Some(DevicesCommand::Approve { target, rebind }) => json!({"op": "approve", "target": target, "rebind": rebind}),
        Some(DevicesCommand::Deny { code }) => json!({"op": "deny", "code": code}),
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
        Some(DevicesCommand::Deny { .. }) => denied(global, &answer),
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
    /// The table. At a terminal, a listing of one page is a box table; a longer one, or any
    /// piped, prints each page as it arrives in aligned columns ([`ColumnStream`]), so the first
    /// line never waits for the whole fleet. The `hub` column shows when the first rows have a
    /// hub (a cluster: every device there names its hub).
    Table { aliases: HashMap<String, String>, stream: Option<ColumnStream> },
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
        Listing::Table { aliases: by_id, stream: None }
    };
    let (mut count, mut after) = (0usize, None::<String>);
    // Hubs of the cluster that serve devices their index does not list (the last page's word).
    let mut unlisted = Vec::new();
    loop {
        let mut answer = ask(
            client,
            json!({"op": "devices", "limit": args.page_size, "after": after}),
        )
        .await?;
        if let Some(u) = answer.get_mut("unlisted").and_then(Value::as_array_mut) {
            unlisted = std::mem::take(u);
        }
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
        match &mut out {
            Listing::Ndjson => devices.iter().for_each(|d| outln!("{}", super::output::json_line(d))),
            Listing::Array(held) => {
                for d in devices {
                    match held.replace(d) {
                        Some(prev) => outln!("  {},", super::output::json_line(&prev)),
                        None => outln!("["),
                    }
                }
            }
            Listing::Table { aliases, stream } => {
                let rows: Vec<Vec<String>> = devices.iter().map(|d| row(d, aliases)).collect();
                print_rows(global, stream, rows, next.is_none());
            }
        }
        match next {
            Some(n) => after = Some(n),
            None => break,
        }
    }
    match out {
        Listing::Array(Some(last)) => outln!("  {}\n]", super::output::json_line(&last)),
        Listing::Array(None) => outln!("[]"),
        Listing::Ndjson | Listing::Table { .. } => {}
    }
    if !global.quiet && !global.json && !args.ndjson {
        eprintln!("{count} device(s) connected");
    }
    // Said whatever the format (on stderr): a listing never leaves devices out silently.
    for u in &unlisted {
        let hub = super::output::text(u["hub"].as_str().unwrap_or_default());
        eprintln!(
            "{} more devices on hub {hub} are not listed here (over its --cluster-index-max); reach one by its id (`mcpdev call -d ID …`)",
            u["devices"]
        );
    }
    Ok(())
}

/// One page of the table's rows: the whole table when it is the only page and stdout is a
/// terminal, else printed as it comes.
fn print_rows(global: &GlobalArgs, stream: &mut Option<ColumnStream>, mut rows: Vec<Vec<String>>, last: bool) {
    use std::io::IsTerminal;
    if rows.is_empty() {
        return;
    }
    if let Some(s) = stream {
        return crate::exit::write_stdout(s.lines(&rows).as_bytes());
    }
    let mut columns = vec!["device", "alias", "transport", "state", "tools", "connected since", "address"];
    if rows.iter().any(|r| r[7] != "-") {
        columns.push("hub");
    } else {
        rows.iter_mut().for_each(|r| r.truncate(7));
    }
    let terminal = std::io::stdout().is_terminal();
    if terminal && last {
        let mut t = table(global, &columns);
        for r in rows {
            t.add_row(r);
        }
        outln!("{}", render(&t));
    } else {
        let s = stream.insert(ColumnStream::new(&columns, super::output::use_color(global.color, terminal)));
        crate::exit::write_stdout(s.lines(&rows).as_bytes());
    }
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
    // A device another hub serves comes with its tool count, not its tools.
    let tools = d["tools"].as_array().map(|t| t.len() as u64).or_else(|| d["tool_count"].as_u64()).unwrap_or(0);
    let since = d["connected_at_ms"].as_u64().map_or_else(|| "-".into(), local_time);
    let address = d["address"].as_str().or_else(|| d["remote"].as_str()).unwrap_or("-");
    // In a cluster every device names the hub that serves it ([`crate::hub::remote`]): by the
    // name its operator gave it (`serve --hub-name`), else by its id (the `serve` banner's).
    let hub = if d["hub_name"].is_string() { &d["hub_name"] } else { &d["hub"] };
    vec![id.to_string(), alias.to_string(), text(&d["transport"]), state.to_string(), tools.to_string(), since, address.to_string(), text(hub)]
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
                // The hub's own device URL (an older hub does not say it).
                let url = a["device_url"].as_str().unwrap_or("ws://HUB:PORT/xiaozhi/v1/");
                eprintln!("approved {id}; {how}, so it cannot learn this token from an OTA check-in: give it the token above.");
                eprintln!("  Any device: connect to {url} with the header `Authorization: Bearer <token>`");
                eprintln!("  (a browser page: the query parameter `authorization=<token>`; stock firmware: its `websocket.token` setting).");
                eprintln!("  A virtual device: MCPDEV_DEVICE_TOKEN=<token> mcpdev sim --device-id {id} --url {url}");
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
        let was = match a["was"].as_str() {
            Some("approved") => "it was approved",
            Some("in_process") => "it ran inside the hub",
            Some("approve_all") => "it was admitted by --approve-all",
            Some("shared_token") => "a shared MCPDEV_DEVICE_TOKEN let it in",
            Some("revoked_already") => "it was revoked already",
            _ => "it was not admitted",
        };
        let gone = if a["disconnected"] == true { "; disconnected it" } else { "" };
        eprintln!("{id} revoked ({was}; only a new approval lets it in){gone}");
    }
}

fn pending(global: &GlobalArgs, answer: &Value) {
    let list = answer.as_array().cloned().unwrap_or_default();
    // In a cluster each request names the hub that holds it.
    let clustered = list.iter().any(|p| p.get("hub").is_some());
    let mut header = vec!["code", "device", "via", "client id", "address", "reported", "since", "expires in", "conflict"];
    if clustered {
        header.push("hub");
    }
    let mut t = table(global, &header);
    for p in &list {
        let since = p["since_ms"].as_u64().map_or_else(|| "-".into(), local_time);
        let expires = p["expires_in_ms"].as_u64().map_or_else(|| "-".into(), |ms| format!("{}s", ms / 1000));
        let reported = p["reported"].as_object().map_or_else(|| "-".into(), |r| r.values().filter_map(Value::as_str).collect::<Vec<_>>().join(", "));
        let conflict = p["conflicts"].as_array().filter(|c| !c.is_empty()).map_or_else(|| "-".into(), |c| c.iter().filter_map(Value::as_str).collect::<Vec<_>>().join("; "));
        let mut row = vec![text(&p["code"]), text(&p["device_id"]), text(&p["via"]), text(&p["client_id"]), text(&p["remote"]), reported, since, expires, conflict];
        if clustered {
            row.push(text(&p["hub"]));
        }
        t.add_row(row);
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
