//! A device's `tools/call` outcome as a standard MCP result: device quirks normalised.

use rmcp::model::{CallToolResult, ContentBlock, ResultType};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::session::CallError;
use crate::wire::jsonrpc::RawResult;

/// The device's result, with the stock firmware's image shape fixed and `isError` defaulted.
pub fn from_device(result: &RawResult) -> CallToolResult {
    let text = result.text();
    // Read straight from the device's text, unless a stock image block could be in it: no
    // "image" anywhere, nor a `\u` escape that could spell it. Same type, same rules as below.
    if text.starts_with('{')
        && !text.contains("image")
        && !text.contains("\\u")
        && let Ok(r) = serde_json::from_str::<CallToolResult>(text)
    {
        return complete(r);
    }
    from_tree(result.to_value())
}

fn from_tree(mut result: Value) -> CallToolResult {
    // A result that is not an object (`"done"`, `5`, `[]`) is no result shape: passed on as text.
    let Some(object) = result.as_object_mut() else {
        return CallToolResult::success(vec![ContentBlock::text(result.to_string())]);
    };
    if let Some(content) = object.get_mut("content").and_then(Value::as_array_mut) {
        for block in content.iter_mut() {
            if let (Some("image"), Some(inner)) = (block["type"].as_str(), block["image"].as_str())
                && let Ok(v) = serde_json::from_str::<Value>(inner)
            {
                *block = json!({"type": "image", "mimeType": v["mimeType"], "data": v["data"]});
            }
        }
    }
    if object.get("isError").is_none_or(Value::is_null) {
        object.insert("isError".into(), json!(false));
    }
    // Read from the tree in place: the fallback below still has it.
    match CallToolResult::deserialize(&result) {
        Ok(r) => complete(r),
        // Not a result shape at all: pass it on as text rather than failing the call.
        Err(_) => CallToolResult::success(vec![ContentBlock::text(result.to_string())]),
    }
}

/// Devices speak 2024-11-05, which has no `resultType`; 2026-07-28 requires it on every result
/// (rmcp strips it again for peers on older versions). A missing or null `isError` is `false`.
fn complete(mut r: CallToolResult) -> CallToolResult {
    r.is_error = Some(r.is_error.unwrap_or(false));
    r.result_type = Some(ResultType::COMPLETE);
    r
}

/// The `_meta` key of a `tools/call` result that names the device the call went to (its
/// Device-Id): MCP's place for what a server adds to a result, under this project's prefix (as
/// the capability `mcpdev/fleet`). Set by the hub on every device call's result, over whatever
/// the device put there, so a client of `/mcp` knows which device answered whichever face and
/// naming it used (`mcpdev call --url … --json` reports it as `device_id`).
pub const DEVICE_META: &str = "mcpdev/device_id";

/// `result` with [`DEVICE_META`] naming `device_id` in its `_meta`.
pub fn answered_by(mut result: CallToolResult, device_id: &str) -> CallToolResult {
    result.meta.get_or_insert_with(rmcp::model::MetaObject::new).0.insert(DEVICE_META.into(), Value::from(device_id));
    result
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_answering_device_is_named_in_meta_over_what_the_device_said() {
        let r = answered_by(from_device(&raw(r#"{"content":[],"_meta":{"mcpdev/device_id":"forged","k":1}}"#)), "aa:bb:cc:dd:ee:01");
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["_meta"], json!({"mcpdev/device_id": "aa:bb:cc:dd:ee:01", "k": 1}));
        let e = answered_by(from_error("aa:bb:cc:dd:ee:02", &CallError::Disconnected), "aa:bb:cc:dd:ee:02");
        assert_eq!(serde_json::to_value(&e).unwrap()["_meta"]["mcpdev/device_id"], "aa:bb:cc:dd:ee:02");
    }

    fn raw(text: &str) -> RawResult {
        RawResult::from_value(&serde_json::from_str(text).unwrap())
    }

    #[test]
    fn a_result_that_is_not_an_object_is_passed_on_as_text() {
        for text in [r#""done""#, "5", "[]", "true"] {
            let r = from_device(&raw(text));
            assert_eq!(r.is_error, Some(false));
            assert_eq!(serde_json::to_value(&r.content).unwrap(), json!([{"type": "text", "text": text}]), "{text}");
        }
        assert_eq!(from_device(&raw("null")).is_error, Some(false));
    }

    /// Read from the device's text or from a tree, a result comes out the same.
    #[test]
    fn the_text_and_the_tree_give_the_same_result() {
        let cases = [
            r#"{"content":[{"type":"text","text":"ok"}],"isError":false}"#,
            r#"{"content":[{"type":"text","text":"ok"}]}"#,
            r#"{"content":[{"type":"text","text":"ok"}],"isError":null}"#,
            r#"{"content":[{"type":"text","text":"no"}],"isError":true}"#,
            r#"{"content":[{"type":"text","text":"x"}],"structuredContent":{"a":1}}"#,
            r#"{"content":"not a list"}"#,
            r#"{"something":"else"}"#,
        ];
        for text in cases {
            let fast = from_device(&raw(text));
            let tree = from_tree(serde_json::from_str(text).unwrap());
            assert_eq!(serde_json::to_value(&fast).unwrap(), serde_json::to_value(&tree).unwrap(), "{text}");
            assert!(fast.is_error.is_some(), "{text}");
        }
    }

    #[test]
    fn the_stock_image_shape_is_fixed() {
        let inner = json!({"mimeType": "image/jpeg", "data": "AAAA"}).to_string();
        let text = json!({"content": [{"type": "image", "image": inner}]}).to_string();
        let r = serde_json::to_value(from_device(&raw(&text))).unwrap();
        assert_eq!(r["content"][0], json!({"type": "image", "mimeType": "image/jpeg", "data": "AAAA"}));
    }
}
