//! A device's `tools/call` outcome as a standard MCP result: device quirks normalised.

use rmcp::model::{CallToolResult, ContentBlock, ResultType};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::session::CallError;

/// The device's result, with the stock firmware's image shape fixed and `isError` defaulted.
pub fn from_device(mut result: Value) -> CallToolResult {
    if let Some(content) = result.get_mut("content").and_then(Value::as_array_mut) {
        for block in content.iter_mut() {
            if let (Some("image"), Some(inner)) = (block["type"].as_str(), block["image"].as_str())
                && let Ok(v) = serde_json::from_str::<Value>(inner)
            {
                *block = json!({"type": "image", "mimeType": v["mimeType"], "data": v["data"]});
            }
        }
    }
    if result.get("isError").is_none_or(Value::is_null) {
        result["isError"] = json!(false);
    }
    // Read from the tree in place: the fallback below still has it.
    match CallToolResult::deserialize(&result) {
        // Devices speak 2024-11-05, which has no `resultType`; 2026-07-28 requires it on every
        // result (rmcp strips it again for peers on older versions).
        Ok(mut r) => {
            r.result_type = Some(ResultType::COMPLETE);
            r
        }
        // Not a result shape at all: pass it on as text rather than failing the call.
        Err(_) => CallToolResult::success(vec![ContentBlock::text(result.to_string())]),
    }
}

/// A call that did not produce a device result, as a tool error the model can read.
pub fn from_error(device_id: &str, e: &CallError) -> CallToolResult {
    let text = match e {
        CallError::Device(rpc) => format!("device {device_id} reported an error: {}", rpc.message),
        CallError::Timeout(d) => format!("device {device_id} did not answer within {d:?}"),
        CallError::Disconnected => format!("device {device_id} is not connected (it disconnected before answering)"),
        CallError::Link(why) => format!("device {device_id} could not be reached: {why}"),
    };
    CallToolResult::error(vec![ContentBlock::text(text)])
}
