//! The xiaozhi envelope: every JSON message a device sends has a string `type`.
//! Known types are parsed; unknown ones are kept, never dropped silently.

use serde_json::Value;

use super::jsonrpc::{Id, RpcError, salvage_error};

/// A device's hello, with the fields a backend reads. Every field may be missing in the field.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Hello {
    pub version: Option<u8>,
    pub transport: Option<String>,
    pub mcp: bool,
    pub features: Value,
    pub audio_params: Option<Value>,
    /// The whole hello as sent.
    pub raw: Value,
}

/// One text message from a device.
#[derive(Debug, Clone, PartialEq)]
pub enum DeviceMessage {
    Hello(Hello),
    /// An MCP payload (any JSON-RPC message) with the session id the device echoed, if any.
    Mcp { session_id: Option<String>, payload: Value },
    /// An MCP error reply that was not valid JSON (unescaped quotes), recovered.
    SalvagedMcpError { id: Id, error: RpcError },
    Goodbye { session_id: Option<String> },
    /// `listen`, `abort`, and any type this hub does not act on.
    Other { kind: String, raw: Value },
}

/// Why a frame could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvelopeError {
    #[error("not valid JSON: {0}")]
    NotJson(String),
    #[error("message has no string \"type\"")]
    MissingType,
    #[error("mcp message without an object payload")]
    BadPayload,
}

/// The text of an `mcp` envelope around a JSON-RPC payload (keys in the stock firmware's order:
/// `session_id`, `type`, `payload`). Written straight from the payload: building the envelope
/// with `json!` would copy the payload into a new tree first.
pub fn mcp_text(session_id: &str, payload: &Value) -> String {
    #[derive(serde::Serialize)]
    struct Envelope<'a> {
        session_id: &'a str,
        #[serde(rename = "type")]
        kind: &'static str,
        payload: &'a Value,
    }
    // Serializing a `Value` with string keys cannot fail.
    serde_json::to_string(&Envelope { session_id, kind: "mcp", payload }).unwrap_or_default()
}

pub fn parse(text: &str) -> Result<DeviceMessage, EnvelopeError> {
    let mut v: Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => {
            if text.contains("\"mcp\"")
                && let Some((id, error)) = salvage_error(text)
            {
                return Ok(DeviceMessage::SalvagedMcpError { id, error });
            }
            return Err(EnvelopeError::NotJson(e.to_string()));
        }
    };
    let kind = v.get("type").and_then(Value::as_str).ok_or(EnvelopeError::MissingType)?;
    let session_id = v.get("session_id").and_then(Value::as_str).map(str::to_string);
    Ok(match kind {
        "hello" => DeviceMessage::Hello(Hello {
            version: v.get("version").and_then(Value::as_u64).and_then(|n| u8::try_from(n).ok()),
            transport: v.get("transport").and_then(Value::as_str).map(str::to_string),
            mcp: v.pointer("/features/mcp").and_then(Value::as_bool).unwrap_or(false),
            features: v.get("features").cloned().unwrap_or(Value::Null),
            audio_params: v.get("audio_params").cloned(),
            raw: v,
        }),
        // The payload is taken out of the envelope, not copied: it is all that is kept.
        "mcp" => match v.get_mut("payload") {
            Some(p) if p.is_object() => DeviceMessage::Mcp { session_id, payload: p.take() },
            _ => return Err(EnvelopeError::BadPayload),
        },
        "goodbye" => DeviceMessage::Goodbye { session_id },
        other => DeviceMessage::Other { kind: other.to_string(), raw: v },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_mcp_envelope_is_written_in_the_firmwares_key_order_and_reads_back() {
        let payload = serde_json::json!({"jsonrpc": "2.0", "id": 1, "result": {"a": "b\"c"}});
        let text = mcp_text("s\"1", &payload);
        assert_eq!(text, r#"{"session_id":"s\"1","type":"mcp","payload":{"jsonrpc":"2.0","id":1,"result":{"a":"b\"c"}}}"#);
        assert_eq!(parse(&text), Ok(DeviceMessage::Mcp { session_id: Some("s\"1".into()), payload }));
    }

    #[test]
    fn hello_with_missing_fields_is_kept() {
        let DeviceMessage::Hello(h) = parse(r#"{"type":"hello","features":{"mcp":true}}"#).unwrap() else { panic!() };
        assert_eq!((h.version, h.transport, h.mcp, h.audio_params), (None, None, true, None));
    }

    #[test]
    fn unknown_types_are_kept_and_bad_frames_explained() {
        assert!(matches!(parse(r#"{"type":"listen","state":"start"}"#).unwrap(), DeviceMessage::Other { kind, .. } if kind == "listen"));
        assert_eq!(parse("{}"), Err(EnvelopeError::MissingType));
        assert_eq!(parse(r#"{"type":"mcp","payload":1}"#), Err(EnvelopeError::BadPayload));
        assert!(matches!(parse("{nope"), Err(EnvelopeError::NotJson(_))));
    }
}
