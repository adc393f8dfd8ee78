//! `mcpdev prompts list|get`: an MCP server's prompts.
//!
//! Rules:
//! - A prompt's arguments are typed and checked as a tool's are (`name=value`, `--args-json`;
//!   [`crate::args`]) against a schema made of its declared arguments (strings; `required` as
//!   declared; no others): a missing, unknown or misspelt argument is refused before anything is
//!   sent (exit 7), with a suggestion.
//! - Text from the server is data, escaped for the terminal; `--json` prints the server's answer
//!   whole under its name (`device_id`), as for devices.

use serde_json::{Map, Value, json};

use super::mcp_server::{connect, failure};
use super::output::{device_document, outln, print_json, render, table, text};
use crate::cli::{GlobalArgs, PromptGetArgs, PromptsCommand};
use crate::exit::{CodedError, Exit};

pub async fn run(global: &GlobalArgs, command: PromptsCommand) -> anyhow::Result<()> {
    match command {
        PromptsCommand::List(args) => {
            let (conn, endpoint) = connect(&args, "prompts list").await?;
            let prompts = conn.list_all("prompts/list", "prompts", json!({}), args.timeout, None).await;
            conn.close().await;
            list(global, &endpoint.name(), &prompts.map_err(failure)?);
            Ok(())
        }
        PromptsCommand::Get(args) => get(global, args).await,
    }
}

/// The JSON Schema a prompt's declared arguments amount to: string properties, `required` as
/// declared, nothing else accepted.
pub fn schema(prompt: &Value) -> Value {
    let mut properties = Map::new();
    let mut required = Vec::new();
    for a in prompt["arguments"].as_array().into_iter().flatten() {
        let Some(name) = a["name"].as_str() else { continue };
        let mut p = json!({"type": "string"});
        if let Some(d) = a["description"].as_str() {
            p["description"] = json!(d);
        }
        properties.insert(name.to_string(), p);
        if a["required"] == true {
            required.push(json!(name));
        }
    }
    json!({"type": "object", "properties": properties, "required": required, "additionalProperties": false})
}

fn list(global: &GlobalArgs, name: &str, prompts: &[Value]) {
    if global.json {
        print_json(&device_document(name, &json!({"prompts": prompts})));
        return;
    }
    let mut t = table(global, &["prompt", "description", "arguments"]);
    for p in prompts {
        t.add_row(vec![
            p["name"].as_str().unwrap_or_default().to_string(),
            p["description"].as_str().unwrap_or_default().to_string(),
            crate::args::signature(&schema(p)),
        ]);
    }
    outln!("{}", render(&t));
    if !global.quiet {
        eprintln!("{} prompt(s) on {}", prompts.len(), text(name));
    }
}

async fn get(global: &GlobalArgs, args: PromptGetArgs) -> anyhow::Result<()> {
    let (conn, endpoint) = connect(&args.server, "prompts get").await?;
    let out = get_on(global, &args, &conn, &endpoint.name()).await;
    conn.close().await;
    out
}

async fn get_on(global: &GlobalArgs, args: &PromptGetArgs, conn: &crate::links::mcp::McpConnection, name: &str) -> anyhow::Result<()> {
    let wanted = |p: &Value| p["name"] == args.name.as_str();
    let prompts = conn.list_all("prompts/list", "prompts", json!({}), args.server.timeout, Some(&wanted)).await.map_err(failure)?;
    let Some(prompt) = prompts.iter().find(|p| wanted(p)) else {
        let names = prompts.iter().filter_map(|p| p["name"].as_str());
        let hint = match crate::args::suggest(&args.name, names).as_slice() {
            [] => "; `mcpdev prompts list` shows them all".to_string(),
            s => format!("; did you mean {}?", s.iter().map(|n| format!("'{n}'")).collect::<Vec<_>>().join(" or ")),
        };
        return Err(CodedError::new(Exit::InvalidCall, format!("the MCP server at {name} has no prompt '{}'{hint}", args.name)).into());
    };
    let schema = schema(prompt);
    let arguments = crate::args::build_arguments(&schema, &args.args, args.args_json.as_deref())
        .map_err(|e| CodedError::new(Exit::InvalidCall, e.to_string().replace("this tool", "this prompt")))?;
    if let Err(errors) = crate::args::validate(&schema, &arguments) {
        let lines: Vec<String> = errors.iter().map(|e| format!("  {e}")).collect();
        let msg = format!("the arguments do not fit prompt {}'s arguments; nothing was sent:\n{}", args.name, lines.join("\n"));
        return Err(CodedError::new(Exit::InvalidCall, msg).into());
    }
    let result = conn.request("prompts/get", Some(json!({"name": args.name, "arguments": arguments})), args.server.timeout).await.map_err(failure)?;
    if global.json {
        print_json(&device_document(name, &result));
        return Ok(());
    }
    if let Some(d) = result["description"].as_str() {
        outln!("# {}", text(d));
    }
    for m in result["messages"].as_array().into_iter().flatten() {
        outln!("[{}]", text(m["role"].as_str().unwrap_or("?")));
        let c = &m["content"];
        match c["type"].as_str() {
            Some("text") => outln!("{}", text(c["text"].as_str().unwrap_or_default())),
            Some(kind @ ("image" | "audio")) => outln!("[{kind} {}, {} base64 characters]", text(c["mimeType"].as_str().unwrap_or("?")), c["data"].as_str().map_or(0, str::len)),
            _ => print_json(c),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prompts_arguments_become_a_strict_string_schema() {
        let p = json!({"name": "greet", "arguments": [{"name": "name", "required": true}, {"name": "times"}]});
        let s = schema(&p);
        let args = crate::args::build_arguments(&s, &["name=007".into()], None).unwrap();
        assert_eq!(args, json!({"name": "007"}), "a number-looking value stays a string");
        assert!(crate::args::validate(&s, &json!({})).is_err(), "a required argument is required");
        assert!(crate::args::build_arguments(&s, &["nmae=x".into()], None).is_err(), "an unknown argument is refused");
    }
}
