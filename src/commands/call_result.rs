//! A tool call's result, as people or programs read it (`call`, `call --task`, `tasks result`).
//!
//! Rules it enforces:
//! - `--json` prints the result as the device sent it, with the device that answered; otherwise
//!   JSON text is pretty-printed and device text is escaped for the terminal.
//! - Media is never written to the terminal: it is saved with `--save-images DIR`, or summarised
//!   (kind, type, size); content that is not valid base64 is an error naming the block.
//! - A result with `isError: true` exits 5 (the tool said it failed).

use std::path::Path;

use anyhow::Context;
use base64::Engine;
use serde_json::{Value, json};

use super::output::{outln, print_json};
use crate::cli::GlobalArgs;
use crate::exit::{CodedError, Exit};

/// A call's result, as people or programs read it; exit 5 when the tool says it failed.
pub fn show(global: &GlobalArgs, answered_by: &str, result: &Value, tool: &str, save_images: Option<&Path>) -> anyhow::Result<()> {
    let is_error = result["isError"].as_bool().unwrap_or(false);
    if global.json {
        print_json(&super::output::device_document(answered_by, result));
    } else {
        render(result, tool, save_images)?;
    }
    if is_error {
        return Err(CodedError::new(Exit::ToolError, format!("{tool} reported an error (isError: true)")).into());
    }
    Ok(())
}

/// Prints a result for people: JSON text pretty-printed, media saved or summarised.
fn render(result: &Value, tool: &str, save_dir: Option<&Path>) -> anyhow::Result<()> {
    let content = result["content"].as_array().cloned().unwrap_or_default();
    for (i, block) in content.iter().enumerate() {
        let block = normalise_stock_image(block);
        match block["type"].as_str() {
            Some("text") => {
                let text = block["text"].as_str().unwrap_or_default();
                match serde_json::from_str::<Value>(text) {
                    Ok(v @ (Value::Object(_) | Value::Array(_))) => print_json(&v),
                    _ => outln!("{}", super::output::text(text)),
                }
            }
            Some(kind @ ("image" | "audio")) => {
                let mime = block["mimeType"].as_str().unwrap_or("application/octet-stream");
                let data = base64::engine::general_purpose::STANDARD
                    .decode(block["data"].as_str().unwrap_or_default())
                    .with_context(|| format!("{kind} content {i} is not valid base64"))?;
                match save_dir {
                    Some(dir) => {
                        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
                        let ext = mime.rsplit('/').next().unwrap_or("bin").replace(['+', ';'], "_");
                        let path = dir.join(format!("{tool}-{i}.{ext}"));
                        std::fs::write(&path, &data).with_context(|| format!("writing {}", path.display()))?;
                        outln!("[{kind} {}, {} bytes, saved to {}]", super::output::text(mime), data.len(), super::output::text(&path.display().to_string()));
                    }
                    None => outln!("[{kind} {}, {} bytes; --save-images DIR saves it]", super::output::text(mime), data.len()),
                }
            }
            Some("resource") => print_json(&block["resource"]),
            _ => print_json(&block),
        }
    }
    Ok(())
}

/// The stock firmware's `{"type":"image","image":"<JSON of {type,mimeType,data}>"}` as standard content.
fn normalise_stock_image(block: &Value) -> Value {
    if let (Some("image"), Some(inner)) = (block["type"].as_str(), block["image"].as_str())
        && let Ok(v) = serde_json::from_str::<Value>(inner)
    {
        return json!({"type": "image", "mimeType": v["mimeType"], "data": v["data"]});
    }
    block.clone()
}
