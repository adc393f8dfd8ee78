//! `mcpdev hello`: who the device is and what it said in its hello.

use super::output::outln;
use serde_json::{Value, json};

use super::output::{print_json, table};
use super::target::Target;
use crate::cli::{GlobalArgs, HelloArgs};

pub async fn run(global: &GlobalArgs, args: HelloArgs) -> anyhow::Result<()> {
    if args.target.server.url.is_some() || args.target.server.stdio.is_some() {
        let msg = "MCP servers have no hello (that is the xiaozhi device handshake); use `mcpdev init --url …` (or --stdio …)";
        return Err(crate::exit::CodedError::new(crate::exit::Exit::Usage, msg).into());
    }
    let (_target, info) = Target::open(&args.target, global, None).await?;
    if global.json {
        let keys = ["device_id", "client_id", "transport", "protocol_version", "session_id", "hello", "connected_at_ms", "last_seen_ms"];
        let mut out: serde_json::Map<String, Value> = keys.iter().map(|k| (k.to_string(), info[*k].clone())).collect();
        for key in ["system_info", "phase", "onboarding", "onboarding_error", "tools_warning", "hub"] {
            if let Some(v) = info.get(key) {
                out.insert(key.into(), v.clone());
            }
        }
        print_json(&Value::Object(out));
        return Ok(());
    }
    let hello = &info["hello"];
    let mut t = table(global, &["field", "value"]);
    let text = |v: &Value| match v {
        Value::String(s) => s.clone(),
        Value::Null => "-".into(),
        other => other.to_string(),
    };
    let rows = [
        ("device id", info["device_id"].clone()),
        ("client id", info["client_id"].clone()),
        ("transport", info["transport"].clone()),
        ("binary protocol", info["protocol_version"].clone()),
        ("hello version", hello["version"].clone()),
        ("features", hello["features"].clone()),
        ("audio params", hello["audio_params"].clone()),
        ("session id", info["session_id"].clone()),
        ("connected since", json!(super::output::local_time(info["connected_at_ms"].as_u64().unwrap_or(0)))),
        ("onboarding", json!(onboarding_state(&info))),
    ];
    for (k, v) in rows {
        t.add_row(vec![k.to_string(), text(&v)]);
    }
    // In a cluster: the hub that serves the device.
    if info["hub"].is_string() {
        t.add_row(vec!["served by hub".to_string(), text(&info["hub"])]);
    }
    // What the device posted to the OTA endpoint, when it did.
    let si = &info["system_info"];
    if !si.is_null() {
        let board = [&si["board"]["name"], &si["board"]["type"]].into_iter().find_map(Value::as_str).unwrap_or("-");
        let app = format!("{} {}", si["application"]["name"].as_str().unwrap_or("-"), si["application"]["version"].as_str().unwrap_or(""));
        t.add_row(vec!["board (OTA)".to_string(), board.to_string()]);
        t.add_row(vec!["chip (OTA)".to_string(), text(&si["chip_model_name"])]);
        t.add_row(vec!["firmware (OTA)".to_string(), app.trim().to_string()]);
    }
    outln!("{}", super::output::render(&t));
    Ok(())
}

/// "ok", "ok after 3 attempts", or "failed at …": the onboarding state in a word or a line.
fn onboarding_state(info: &Value) -> String {
    let o = &info["onboarding"];
    if let Some(err) = info["onboarding_error"].as_str() {
        return err.to_string();
    }
    let attempt = o["attempt"].as_u64().unwrap_or(0);
    match (info["phase"].as_str(), o["last_error"].as_str()) {
        (Some("ready"), _) if attempt > 1 => format!("ok after {attempt} attempts"),
        (Some("ready"), _) => "ok".to_string(),
        (_, Some(err)) => format!("attempt {attempt} of {} (last: {err})", o["max_attempts"]),
        (phase, None) => phase.unwrap_or("-").to_string(),
    }
}
