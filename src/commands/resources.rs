//! `mcpdev resources list|read|templates`: an MCP server's resources.
//!
//! Rules:
//! - Text from the server is data: every cell and line is escaped for the terminal; `--json`
//!   prints the server's answer whole, under the server's name (`device_id`), as for devices.
//! - A binary resource never reaches the terminal raw: it is summarised, or written with `--out`.
//! - A resource larger than one message may be (64 MiB) is refused, not read (exit 5).

use std::io::Write;

use base64::Engine;
use serde_json::{Value, json};

use super::mcp_server::{connect, failure};
use super::output::{device_document, outln, print_json, render, table, text};
use crate::cli::{GlobalArgs, ResourceReadArgs, ResourcesCommand, ServerArgs};
use crate::exit::{CodedError, Exit};

pub async fn run(global: &GlobalArgs, command: ResourcesCommand) -> anyhow::Result<()> {
    match command {
        ResourcesCommand::List(args) => listing(global, &args, "resources list", "resources/list", "resources").await,
        ResourcesCommand::Templates(args) => listing(global, &args, "resources templates", "resources/templates/list", "resourceTemplates").await,
        ResourcesCommand::Read(args) => read(global, args).await,
    }
}

/// A paged listing, shown as a table or as `{device_id, <key>: [...]}`.
async fn listing(global: &GlobalArgs, args: &ServerArgs, command: &str, method: &str, key: &str) -> anyhow::Result<()> {
    let (conn, endpoint) = connect(args, command).await?;
    let items = conn.list_all(method, key, json!({}), args.timeout, None).await;
    conn.close().await;
    let items = items.map_err(failure)?;
    let name = endpoint.name();
    if global.json {
        print_json(&device_document(&name, &json!({ key: items })));
        return Ok(());
    }
    let first = if key == "resources" { "uri" } else { "uri template" };
    let mut t = table(global, &[first, "name", "type", "description"]);
    for r in &items {
        let uri = r["uri"].as_str().or(r["uriTemplate"].as_str()).unwrap_or_default();
        let shown = r["title"].as_str().or(r["name"].as_str()).unwrap_or_default();
        t.add_row(vec![uri, shown, r["mimeType"].as_str().unwrap_or_default(), r["description"].as_str().unwrap_or_default()]);
    }
    outln!("{}", render(&t));
    if !global.quiet {
        let what = if key == "resources" { "resource(s)" } else { "resource template(s)" };
        eprintln!("{} {what} on {}", items.len(), text(&name));
    }
    Ok(())
}

async fn read(global: &GlobalArgs, args: ResourceReadArgs) -> anyhow::Result<()> {
    let (conn, endpoint) = connect(&args.server, "resources read").await?;
    let answer = conn.request("resources/read", Some(json!({"uri": args.uri})), args.server.timeout).await;
    conn.close().await;
    let result = answer.map_err(failure)?;
    let contents = result["contents"].as_array().cloned().unwrap_or_default();
    if let Some(path) = &args.out {
        let bytes = write_out(path, &contents)?;
        if !global.quiet {
            eprintln!("{} bytes of {} written to {}", bytes, text(&args.uri), text(&path.display().to_string()));
        }
    }
    if global.json {
        print_json(&device_document(&endpoint.name(), &result));
        return Ok(());
    }
    if args.out.is_some() {
        return Ok(());
    }
    for c in &contents {
        if let Some(body) = c["text"].as_str() {
            outln!("{}", text(body));
        } else if let Some(blob) = c["blob"].as_str() {
            let len = blob_bytes(blob)?.len();
            let mime = c["mimeType"].as_str().unwrap_or("application/octet-stream");
            outln!("[{} {}, {len} bytes; --out FILE saves it]", text(c["uri"].as_str().unwrap_or_default()), text(mime));
        }
    }
    Ok(())
}

fn blob_bytes(blob: &str) -> anyhow::Result<Vec<u8>> {
    base64::engine::general_purpose::STANDARD
        .decode(blob)
        .map_err(|e| CodedError::new(Exit::ToolError, format!("the server sent a blob that is not valid base64: {e}")).into())
}

/// Writes every content (text as UTF-8, blobs decoded) to `path`, in order; the bytes written.
fn write_out(path: &std::path::Path, contents: &[Value]) -> anyhow::Result<usize> {
    let cannot = |e: std::io::Error| CodedError::new(Exit::Usage, format!("cannot write {}: {e}", path.display()));
    let mut file = std::fs::File::create(path).map_err(cannot)?;
    let mut written = 0;
    for c in contents {
        let bytes = match (c["text"].as_str(), c["blob"].as_str()) {
            (Some(t), _) => t.as_bytes().to_vec(),
            (None, Some(b)) => blob_bytes(b)?,
            _ => continue,
        };
        file.write_all(&bytes).map_err(cannot)?;
        written += bytes.len();
    }
    Ok(written)
}
