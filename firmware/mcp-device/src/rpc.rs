//! JSON-RPC 2.0 error codes and reply framing.

use alloc::string::String;
use serde_json::Value;

use crate::json::{push_int, push_str_literal, push_value};

pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
pub const INTERNAL_ERROR: i64 = -32603;

/// A JSON-RPC error about to be sent: code, message and an optional `data` object.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    pub data: Option<Value>,
}

impl RpcError {
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        Self { code, message: message.into(), data: None }
    }

    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }
}

/// Appends `{"jsonrpc":"2.0","id":ID,` — the start every reply shares.
pub(crate) fn push_reply_head(out: &mut String, id: &Value) {
    out.push_str("{\"jsonrpc\":\"2.0\",\"id\":");
    push_value(out, id);
    out.push(',');
}

/// Appends a whole error reply.
pub(crate) fn push_error(out: &mut String, id: &Value, e: &RpcError) {
    push_reply_head(out, id);
    out.push_str("\"error\":{\"code\":");
    push_int(out, e.code);
    out.push_str(",\"message\":");
    push_str_literal(out, &e.message);
    if let Some(data) = &e.data {
        out.push_str(",\"data\":");
        push_value(out, data);
    }
    out.push_str("}}");
}
