//! A tolerant JSON-RPC 2.0 model for what devices send: numeric or string ids, errors with or
//! without `code`, and a salvage path for the stock firmware's unescaped error messages.

use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

/// A request id. Devices echo numbers as numbers (the stock firmware: int32 only).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Id {
    Num(i64),
    Str(String),
}

impl Id {
    pub fn from_value(v: &Value) -> Option<Id> {
        match v {
            Value::Number(n) => n.as_i64().or_else(|| n.as_f64().map(|f| f as i64)).map(Id::Num),
            Value::String(s) => Some(Id::Str(s.clone())),
            _ => None,
        }
    }

    pub fn to_value(&self) -> Value {
        match self {
            Id::Num(n) => json!(n),
            Id::Str(s) => json!(s),
        }
    }
}

/// A device's `result`, kept as the JSON text it sent: a caller that only passes it on (the
/// control API's `rpc`) copies it as it is, and one that reads it (the MCP bridge) parses it into
/// its own type, without a tree of it built in between. Built only from text that parses as a
/// [`Value`] (see [`crate::wire::envelope::fast_response`]) or from a `Value`, so
/// [`Self::to_value`] cannot fail.
#[derive(Debug, Clone)]
pub struct RawResult(Box<RawValue>);

impl RawResult {
    /// From text the caller checked parses as a [`Value`].
    pub(crate) fn from_checked(raw: &RawValue) -> Self {
        Self(raw.to_owned())
    }

    pub fn from_value(v: &Value) -> Self {
        // Serializing a `Value` cannot fail (its keys are strings).
        Self(serde_json::value::to_raw_value(v).unwrap_or_else(|_| RawValue::NULL.to_owned()))
    }

    /// The result's JSON text, as the device wrote it.
    pub fn text(&self) -> &str {
        self.0.get()
    }

    /// The text, without a copy.
    pub fn into_text(self) -> String {
        Box::<str>::from(self.0).into_string()
    }

    pub fn to_value(&self) -> Value {
        serde_json::from_str(self.0.get()).unwrap_or(Value::Null)
    }

    /// Whether this is a `tools/call` result that reports the tool failed (`isError: true`).
    /// Read without building a tree: only the `isError` member is kept.
    pub fn is_tool_error(&self) -> bool {
        #[derive(serde::Deserialize)]
        struct Flag {
            #[serde(rename = "isError", default)]
            is_error: Option<bool>,
        }
        serde_json::from_str::<Flag>(self.0.get()).is_ok_and(|f| f.is_error == Some(true))
    }
}

/// Two results are equal when they hold the same JSON, however it is spaced.
impl PartialEq for RawResult {
    fn eq(&self, other: &Self) -> bool {
        self.text() == other.text() || self.to_value() == other.to_value()
    }
}

/// A JSON-RPC error as a device sent it; `code` may be missing (the stock firmware never sends one).
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    pub code: Option<i64>,
    pub message: String,
    pub data: Option<Value>,
}

impl RpcError {
    /// The code to pass on to a standard client: the device's, else -32603 (internal error).
    pub fn code_or_internal(&self) -> i64 {
        self.code.unwrap_or(-32603)
    }

    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert("code".into(), json!(self.code_or_internal()));
        m.insert("message".into(), json!(self.message));
        if let Some(d) = &self.data {
            m.insert("data".into(), d.clone());
        }
        Value::Object(m)
    }
}

/// One JSON-RPC message, classified.
#[derive(Debug, Clone, PartialEq)]
pub enum RpcMessage {
    Request { id: Id, method: String, params: Option<Value> },
    Notification { method: String, params: Option<Value> },
    Response { id: Id, outcome: Result<Value, RpcError> },
}

/// The error message of a reply with an id but neither `result` nor `error` (the xiaozhi MQTT
/// gateway sends `{"jsonrpc":"2.0","id":1}` while its cache is cold): a failed answer, never a
/// success with `null`.
pub const EMPTY_REPLY: &str = "the reply has neither result nor error";

/// Classifies a payload. Tolerant: `jsonrpc` may be missing, an error may lack `code` or have a
/// non-string message; what cannot be classified is an `Err` that says why.
pub fn classify(mut v: Value) -> Result<RpcMessage, String> {
    let obj = v.as_object_mut().ok_or("JSON-RPC payload is not an object")?;
    if let Some(method) = obj.get("method") {
        let method = method.as_str().ok_or("method is not a string")?.to_string();
        let params = obj.get_mut("params").map(Value::take);
        return Ok(match obj.get("id").and_then(Id::from_value) {
            Some(id) => RpcMessage::Request { id, method, params },
            None => RpcMessage::Notification { method, params },
        });
    }
    let id = obj.get("id").and_then(Id::from_value).ok_or("response without a usable id")?;
    if let Some(err) = obj.get("error") {
        return Ok(RpcMessage::Response { id, outcome: Err(error_from(err)) });
    }
    match obj.get_mut("result") {
        Some(r) => Ok(RpcMessage::Response { id, outcome: Ok(r.take()) }),
        None => Ok(RpcMessage::Response { id, outcome: Err(RpcError { code: None, message: EMPTY_REPLY.into(), data: None }) }),
    }
}

fn error_from(err: &Value) -> RpcError {
    match err {
        Value::Object(e) => RpcError {
            code: e.get("code").and_then(Value::as_i64),
            message: match e.get("message") {
                Some(Value::String(s)) => s.clone(),
                Some(other) => other.to_string(),
                None => "error without a message".into(),
            },
            data: e.get("data").cloned(),
        },
        Value::String(s) => RpcError { code: None, message: s.clone(), data: None },
        other => RpcError { code: None, message: other.to_string(), data: None },
    }
}

/// Recovers an error reply from a frame that is not valid JSON because the stock firmware put an
/// unescaped `"` or `\` into the message (`…"error":{"message":"Unknown tool: a"b"}}}`).
/// Returns the id and the message as it was meant.
pub fn salvage_error(text: &str) -> Option<(Id, RpcError)> {
    let id_at = text.find("\"id\":")? + 5;
    let id_text: String = text[id_at..].trim_start().chars().take_while(|c| c.is_ascii_digit() || *c == '-').collect();
    let id = Id::Num(id_text.parse().ok()?);
    let key = "\"message\":\"";
    let start = text.find("\"error\":")? + text[text.find("\"error\":")?..].find(key)? + key.len();
    let rest = text[start..].trim_end();
    // The message runs to the closing quote before the run of closing braces at the very end.
    let body = rest.trim_end_matches('}').trim_end();
    let message = body.strip_suffix('"')?;
    let code = text[..start].find("\"code\":").and_then(|at| {
        let t: String = text[at + 7..].trim_start().chars().take_while(|c| c.is_ascii_digit() || *c == '-').collect();
        t.parse().ok()
    });
    Some((id, RpcError { code, message: message.to_string(), data: None }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_is_error_true_is_a_tool_error() {
        let of = |v: Value| RawResult::from_value(&v).is_tool_error();
        assert!(of(json!({"content": [], "isError": true})));
        for ok in [json!({"content": [], "isError": false}), json!({"content": []}), json!({"isError": null}), json!({"isError": "true"}), json!([1]), json!("isError")] {
            assert!(!of(ok.clone()), "{ok}");
        }
    }

    #[test]
    fn error_without_code_is_accepted() {
        let v = json!({"jsonrpc":"2.0","id":3,"error":{"message":"Unknown tool: self.foo"}});
        let RpcMessage::Response { id, outcome: Err(e) } = classify(v.clone()).unwrap() else { panic!() };
        assert_eq!(id, Id::Num(3));
        assert_eq!((e.code, e.code_or_internal(), e.message.as_str()), (None, -32603, "Unknown tool: self.foo"));
    }

    #[test]
    fn string_ids_and_notifications() {
        let v = json!({"jsonrpc":"2.0","id":"a","result":{}});
        assert!(matches!(classify(v.clone()).unwrap(), RpcMessage::Response { id: Id::Str(s), outcome: Ok(_) } if s == "a"));
        let v = json!({"jsonrpc":"2.0","method":"notifications/state_changed","params":{}});
        assert!(matches!(classify(v.clone()).unwrap(), RpcMessage::Notification { .. }));
        let RpcMessage::Response { id, outcome: Err(e) } = classify(json!({"jsonrpc":"2.0","id":1})).unwrap() else { panic!() };
        assert_eq!((id, e.message.as_str()), (Id::Num(1), EMPTY_REPLY));
        assert!(matches!(classify(json!({"id":1,"result":null})).unwrap(), RpcMessage::Response { outcome: Ok(Value::Null), .. }));
        assert!(classify(json!({"result":{}})).is_err());
        assert!(classify(json!([1])).is_err());
    }

    #[test]
    fn salvages_unescaped_quotes() {
        let text = r#"{"session_id":"s","type":"mcp","payload":{"jsonrpc":"2.0","id":7,"error":{"message":"Unknown tool: a"b\c"}}}"#;
        assert!(serde_json::from_str::<Value>(text).is_err());
        let (id, e) = salvage_error(text).unwrap();
        assert_eq!(id, Id::Num(7));
        assert_eq!(e.message, r#"Unknown tool: a"b\c"#);
        assert_eq!(salvage_error("garbage"), None);
    }
}
