//! `mcpdev init`: MCP `initialize` and what the device answered.

use serde_json::{Value, json};

use super::output::{print_json, table};
use super::target::{Target, call_failure};
use crate::cli::{GlobalArgs, InitArgs};

pub async fn run(global: &GlobalArgs, args: InitArgs) -> anyhow::Result<()> {
    let vision = args.vision_url.clone().map(|url| (url, args.vision_token.clone().unwrap_or_default()));
    let (target, info) = Target::open(&args.target, global, vision.clone()).await?;
    // Through a hub without new vision settings, the hub's own initialize (done at onboarding,
    // with the hub's vision endpoint) is the answer; a fresh one would only repeat it.
    let result = match (&target, vision) {
        (Target::Hub { .. }, Some((url, token))) => {
            let params = json!({
                "protocolVersion": "2024-11-05",
                "capabilities": {"vision": {"url": url, "token": token}},
                "clientInfo": {"name": "mcpdev", "version": env!("CARGO_PKG_VERSION")},
            });
            target.request("initialize", Some(params), args.target.timeout).await.map_err(call_failure)?
        }
        _ => json!({
            "protocolVersion": info["mcp_protocol_version"],
            "capabilities": info["capabilities"],
            "serverInfo": info["server_info"],
        }),
    };
    if let Some(err) = info["onboarding_error"].as_str() {
        eprintln!("warning: {err}");
    }
    if global.json {
        print_json(&json!({"device_id": target.device_id(), "result": result}));
        return Ok(());
    }
    let show = |v: &Value| match v {
        Value::String(s) => s.clone(),
        Value::Null => "-".into(),
        other => serde_json::to_string_pretty(other).unwrap_or_default(),
    };
    let mut t = table(global, &["field", "value"]);
    t.add_row(vec!["device id".to_string(), target.device_id().to_string()]);
    t.add_row(vec!["protocol version".to_string(), show(&result["protocolVersion"])]);
    t.add_row(vec!["server name".to_string(), show(&result["serverInfo"]["name"])]);
    t.add_row(vec!["server version".to_string(), show(&result["serverInfo"]["version"])]);
    t.add_row(vec!["capabilities".to_string(), show(&result["capabilities"])]);
    println!("{}", super::output::render(&t));
    Ok(())
}
