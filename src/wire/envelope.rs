//! The xiaozhi envelope: every JSON message a device sends has a string `type`.
//! Known types are parsed; unknown ones are kept, never dropped silently.

use serde::Deserialize;
use serde::de::{self, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;

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
/// with `json!` would copy the payload into a new tree first. The payload may be any
/// serializable type: the session writes its requests without building a tree of them at all.
pub fn mcp_text(session_id: &str, payload: &impl serde::Serialize) -> String {
    #[derive(serde::Serialize)]
    struct Envelope<'a, P> {
        session_id: &'a str,
        #[serde(rename = "type")]
        kind: &'static str,
        payload: &'a P,
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

/// The id and `result` of an `mcp` envelope that carries a JSON-RPC response with a result (what
/// a device sends most), read without building a tree of the message. `None` for any other
/// message, and for any text that [`parse`] might read differently (duplicate keys, a `\u`
/// escape, not JSON a [`Value`] can hold): [`parse`] then reads it. Where both read a message,
/// they agree: `parse` and [`super::jsonrpc::classify`] give `Response { id, outcome: Ok(v) }`
/// with `v` the result's text parsed (the `envelope_session` fuzz target checks it).
pub fn fast_response(text: &str) -> Option<(Id, &RawValue)> {
    #[derive(Deserialize)]
    struct Envelope<'a> {
        #[serde(rename = "type", borrow)]
        kind: &'a str,
        #[serde(borrow)]
        payload: &'a RawValue,
    }
    #[derive(Deserialize)]
    struct Payload<'a> {
        #[serde(default, borrow, deserialize_with = "present")]
        method: Option<&'a RawValue>,
        #[serde(default, borrow, deserialize_with = "present")]
        id: Option<&'a RawValue>,
        #[serde(default, borrow, deserialize_with = "present")]
        error: Option<&'a RawValue>,
        #[serde(default, borrow, deserialize_with = "present")]
        result: Option<&'a RawValue>,
    }
    /// A key that is present, even with `null`, is `Some` (`Option` alone reads `null` as absent).
    fn present<'de, D: de::Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
        <&RawValue>::deserialize(d).map(Some)
    }
    // A `\u` escape may spell a key (`"typ\u0065"`) or hold a lone surrogate a `Value` refuses;
    // a derived struct also reads an array as its fields in order. Both are left to `parse`.
    if text.contains("\\u") || !text.trim_start().starts_with('{') || !parses_as_value(text) {
        return None;
    }
    let envelope: Envelope = serde_json::from_str(text).ok()?;
    if envelope.kind != "mcp" || !envelope.payload.get().starts_with('{') {
        return None;
    }
    let payload: Payload = serde_json::from_str(envelope.payload.get()).ok()?;
    if payload.method.is_some() || payload.error.is_some() {
        return None;
    }
    let id = Id::from_value(&serde_json::from_str(payload.id?.get()).ok()?)?;
    Some((id, payload.result?))
}

/// Whether `serde_json` would read `text` as a [`Value`]: the same checks (numbers in range,
/// strings that decode, nesting within its limit), without building anything.
fn parses_as_value(text: &str) -> bool {
    struct Check;
    impl<'de> Deserialize<'de> for Check {
        fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            d.deserialize_any(Check)
        }
    }
    impl<'de> Visitor<'de> for Check {
        type Value = Check;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("any JSON value")
        }
        fn visit_bool<E>(self, _: bool) -> Result<Check, E> {
            Ok(Check)
        }
        fn visit_i64<E>(self, _: i64) -> Result<Check, E> {
            Ok(Check)
        }
        fn visit_u64<E>(self, _: u64) -> Result<Check, E> {
            Ok(Check)
        }
        fn visit_f64<E>(self, _: f64) -> Result<Check, E> {
            Ok(Check)
        }
        fn visit_str<E>(self, _: &str) -> Result<Check, E> {
            Ok(Check)
        }
        fn visit_unit<E>(self) -> Result<Check, E> {
            Ok(Check)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Check, A::Error> {
            while seq.next_element::<Check>()?.is_some() {}
            Ok(Check)
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Check, A::Error> {
            while map.next_key::<IgnoredAny>()?.is_some() {
                map.next_value::<Check>()?;
            }
            Ok(Check)
        }
    }
    serde_json::from_str::<Check>(text).is_ok()
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
    fn a_response_is_read_fast_only_where_the_full_parse_reads_it_the_same() {
        let deep = |n: usize| format!(r#"{{"type":"mcp","payload":{{"id":1,"result":{}1{}}}}}"#, "[".repeat(n), "]".repeat(n));
        let read = [
            r#"{"session_id":"s","type":"mcp","payload":{"jsonrpc":"2.0","id":5,"result":{"content":[{"type":"text","text":"a\nb"}],"isError":false}}}"#.to_string(),
            r#" { "type" : "mcp" , "payload" : { "id" : "x" , "result" : null } } "#.to_string(),
            r#"{"type":"mcp","payload":{"id":2.0,"result":[1,2]}}"#.to_string(),
            // Nesting: the envelope's two levels and the result's 125 are serde_json's 127.
            deep(125),
        ];
        for text in &read {
            assert!(fast_response(text).is_some(), "not read fast: {text}");
            crate::fuzz::fast_response_agrees(text);
        }
        let left_to_parse = [
            // Not a response with a result.
            r#"{"type":"mcp","payload":{"id":1,"method":"ping"}}"#.to_string(),
            r#"{"type":"mcp","payload":{"id":1,"error":null,"result":{}}}"#.to_string(),
            r#"{"type":"mcp","payload":{"id":1}}"#.to_string(),
            r#"{"type":"mcp","payload":{"id":null,"result":{}}}"#.to_string(),
            r#"{"type":"mcp","payload":{"result":{}}}"#.to_string(),
            r#"{"type":"mcp","payload":"{}"}"#.to_string(),
            r#"{"type":"listen","payload":{"id":1,"result":{}}}"#.to_string(),
            // Read differently by a derived struct than by a `Value`, or not a `Value` at all.
            r#"{"type":"hello","type":"mcp","payload":{"id":1,"result":{}}}"#.to_string(),
            r#"{"type":"mcp","payload":{"id":1,"result":{},"result":{"a":1}}}"#.to_string(),
            r#"{"typ\u0065":"mcp","payload":{"id":1,"result":{}}}"#.to_string(),
            r#"{"type":"mcp","payload":{"id":1,"result":"\ud800"}}"#.to_string(),
            r#"{"type":"mcp","payload":{"id":1,"result":1e400}}"#.to_string(),
            r#"["mcp",{"id":1,"result":{}}]"#.to_string(),
            r#"{"type":"mcp","payload":{"id":1,"result":{}}} trailing"#.to_string(),
            deep(126),
            deep(10_000),
        ];
        for text in &left_to_parse {
            assert!(fast_response(text).is_none(), "read fast: {text}");
        }
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
