//! `mcpdev init`: MCP `initialize` and what the device answered.

use super::output::outln;
use serde_json::{Value, json};

use super::output::{print_json, table};
use super::target::{Target, call_failure, onboarding_failure};
use crate::cli::{GlobalArgs, InitArgs};

pub async fn run(global: &GlobalArgs, args: InitArgs) -> anyhow::Result<()> {
    let vision = args.vision_url.clone().map(|url| (url, args.vision_token.clone().unwrap_or_default()));
    let (target, info) = Target::open(&args.target, global, vision.clone()).await?;
    let out = run_on(global, args, &target, info, vision).await;
    target.close().await;
    out
}

async fn run_on(
    global: &GlobalArgs,
    args: InitArgs,
    target: &Target,
    info: Value,
    vision: Option<(String, String)>,
) -> anyhow::Result<()> {
    // Through a hub, the answer the device gave to the hub's own initialize at onboarding, unless
    // --live (or --vision-url) asks for a fresh one. A direct device was initialized just now.
    let live = args.live || vision.is_some();
    let result = match &target {
        Target::Hub { .. } if live => {
            // Without --vision-url no vision capability is sent: the device keeps the hub's.
            let capabilities = vision.map_or(json!({}), |(url, token)| json!({"vision": {"url": url, "token": token}}));
            let params = json!({
                "protocolVersion": "2024-11-05",
                "capabilities": capabilities,
                "clientInfo": {"name": "mcpdev", "version": env!("CARGO_PKG_VERSION")},
            });
            let result = target.request("initialize", Some(params), args.target.timeout).await.map_err(call_failure)?;
            if let Some(err) = info["onboarding_error"].as_str() {
                eprintln!("warning: the device answered, but the hub's onboarding of it failed: {}", super::output::text(err));
            }
            result
        }
        _ => {
            if let Some(failed) = onboarding_failure(target.device_id(), &info) {
                return Err(failed);
            }
            json!({
                "protocolVersion": info["mcp_protocol_version"],
                "capabilities": info["capabilities"],
                "serverInfo": info["server_info"],
            })
        }
    };
    if global.json {
        print_json(&super::output::device_document(target.device_id(), &result));
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
    outln!("{}", super::output::render(&t));
    Ok(())
}
