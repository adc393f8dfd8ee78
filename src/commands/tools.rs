//! `mcpdev tools list`: every tool of a device, all pages.

use super::output::outln;
use serde_json::Value;

use super::column_stream::ColumnStream;
use super::output::{print_serialized, table};

/// Past this many tools, `tools list` prints its table as it goes, this many rows at a time (its
/// columns as wide as the widest cell so far), instead of laying out one table of them all.
const STREAM_ROWS: usize = 1000;
use super::target::{Target, onboarding_failure, refresh};
use crate::cli::{GlobalArgs, ToolsListArgs};

pub fn is_user_only(tool: &Value) -> bool {
    tool.pointer("/annotations/audience").and_then(Value::as_array).is_some_and(|a| a.len() == 1 && a[0] == "user")
}

pub async fn list(global: &GlobalArgs, args: ToolsListArgs) -> anyhow::Result<()> {
    let (target, info) = Target::open(&args.target, global, None).await?;
    let out = list_on(global, args, &target, info).await;
    target.close().await;
    out
}

async fn list_on(
    global: &GlobalArgs,
    args: ToolsListArgs,
    target: &Target,
    mut info: Value,
) -> anyhow::Result<()> {
    if args.refresh {
        info = refresh(target, info, args.target.timeout).await?;
    }
    if let Some(failed) = onboarding_failure(target.device_id(), &info) {
        return Err(failed);
    }
    let all: &[Value] = info["tools"].as_array().map_or(&[], Vec::as_slice);
    let hidden = all.iter().filter(|t| is_user_only(t)).count();
    let tools: Vec<&Value> = all.iter().filter(|t| args.user_tools || !is_user_only(t)).collect();
    let tools_warning = info["tools_warning"].as_str();
    if let Some(w) = tools_warning {
        eprintln!("warning: {}", super::output::text(w));
    }
    if global.json {
        /// The document, borrowing the tools (a `json!` of them would copy every one).
        #[derive(serde::Serialize)]
        struct Listing<'a> {
            device_id: &'a str,
            tools: &'a [&'a Value],
            #[serde(skip_serializing_if = "Option::is_none")]
            tools_warning: Option<&'a str>,
        }
        print_serialized(&Listing { device_id: target.device_id(), tools: &tools, tools_warning });
        return Ok(());
    }
    let row = |tool: &Value| {
        let mut name = tool["name"].as_str().unwrap_or_default().to_string();
        if is_user_only(tool) {
            name.push_str(" (user)");
        }
        let description = tool["description"].as_str().unwrap_or_default();
        vec![name, description.to_string(), crate::args::signature(&tool["inputSchema"])]
    };
    if tools.len() > STREAM_ROWS {
        // A table of all of them would hold every row several times over (a hostile server's
        // 100,000 tools took ~1.7 KB each): printed as it goes, a chunk at a time.
        use std::io::IsTerminal;
        let color = super::output::use_color(global.color, std::io::stdout().is_terminal());
        let mut stream = ColumnStream::new(&["tool", "description", "parameters"], color);
        for chunk in tools.chunks(STREAM_ROWS) {
            let rows: Vec<Vec<String>> = chunk.iter().map(|t| row(t)).collect();
            crate::exit::write_stdout(stream.lines(&rows).as_bytes());
        }
    } else {
        let mut t = table(global, &["tool", "description", "parameters"]);
        for tool in &tools {
            t.add_row(row(tool));
        }
        outln!("{}", super::output::render(&t));
    }
    if !global.quiet {
        let note = if hidden > 0 && !args.user_tools { format!(" ({hidden} user-only hidden; --user-tools shows them)") } else { String::new() };
        eprintln!("{} tool(s) on {}{note}", tools.len(), target.device_id());
        if fleet_face(&info, &tools) {
            eprintln!(
                "this mcpdev hub offers its fleet tools: search_devices finds a device; `mcpdev tools list --url …/devices/<id>/mcp` lists one device's tools, and `mcpdev call --url …/mcp <prefix>.<tool>` calls one"
            );
        }
    }
    Ok(())
}

/// Whether an MCP server's listing is an mcpdev hub's fleet face (its fleet tools, declared by
/// its capability, instead of every device's tools).
fn fleet_face(info: &Value, tools: &[&Value]) -> bool {
    let declared = info.pointer(&format!("/capabilities/experimental/{}", crate::bridge::fleet::CAPABILITY.replace('/', "~1"))).is_some();
    declared && crate::bridge::fleet::NAMES.iter().all(|n| tools.iter().any(|t| t["name"] == *n))
}
