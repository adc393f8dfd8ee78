//! The xiaozhi envelope: every JSON message a device sends has a string `type`.
//! Known types are parsed; unknown ones are kept, never dropped silently.

use serde::Deserialize;
use serde::de;
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
/// The server hello a WebSocket device expects (reference §1.3): `transport` must be the string
/// "websocket" (the stock firmware crashes otherwise), and xiaozhi-sdk needs `session_id` and
/// `audio_params`.
pub fn websocket_server_hello(session_id: &str) -> String {
    serde_json::json!({
        "type": "hello",
        "transport": "websocket",
        "session_id": session_id,
        "audio_params": {"format": "opus", "sample_rate": 24000, "channels": 1, "frame_duration": 60},
    })
    .to_string()
}

/// The server hello an MQTT device expects (reference §2.2): `transport:"udp"` and the UDP block
/// where its audio goes, AES-128-CTR with `key` and a nonce that carries the stream's `ssrc`.
pub fn udp_server_hello(session_id: &str, server: &str, port: u16, ssrc: u32, key: &[u8; 16]) -> String {
    let key: String = key.iter().map(|b| format!("{b:02x}")).collect();
    serde_json::json!({
        "type": "hello",
        "transport": "udp",
        "session_id": session_id,
        "audio_params": {"format": "opus", "sample_rate": 24000, "channels": 1, "frame_duration": 60},
        "udp": {
            "server": server,
            "port": port,
            "encryption": "aes-128-ctr",
            "key": key,
            "nonce": format!("01000000{ssrc:08x}0000000000000000"),
        },
    })
    .to_string()
}

pub fn mcp_text(session_id: &str, payload: &impl serde::Serialize) -> String {
    #[derive(serde::Serialize)]
    struct Envelope<'a, P> {
        session_id: &'a str,
        #[serde(rename = "type")]
        kind: &'static str,
        payload: &'a P,
    }
    // Serializing the session's payloads cannot fail: a `Value` or a struct of strings and
    // numbers, with string keys.
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
    // A derived struct also reads an array as its fields in order: left to `parse`, as is
    // anything a `Value` might not read as the structs do.
    if !text.trim_start().starts_with('{') || !value_would_read(text) {
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

/// Whether `serde_json` would read `text` as a [`Value`] wherever the derived structs of
/// [`fast_response`] read it as JSON (they check its syntax, escapes and control characters, but
/// skip what they ignore without a depth limit and read numbers as text): nesting within
/// serde_json's 127 levels, and no number that could be out of `f64`'s range (one with an
/// exponent, or a run of more than 300 digits). No `\u` escape either: it may spell a key
/// (`"typ\u0065"`) that a struct would not see, or hold a lone surrogate a `Value` refuses. One
/// pass over the bytes, building nothing; `false` where in doubt, since [`parse`] then decides.
fn value_would_read(text: &str) -> bool {
    /// serde_json's recursion limit: a `Value` holds at most 127 levels of arrays and objects.
    const MAX_DEPTH: usize = 127;
    const MAX_DIGITS: usize = 300;
    let (mut depth, mut digits, mut in_string, mut escaped, mut prev) = (0usize, 0usize, false, false, 0u8);
    for &b in text.as_bytes() {
        if in_string {
            if escaped {
                if b == b'u' {
                    return false;
                }
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return false;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            // In JSON an `e` right after a digit can only be an exponent (`true` and `false`
            // never follow a digit).
            b'e' | b'E' if prev.is_ascii_digit() => return false,
            _ => {}
        }
        digits = if b.is_ascii_digit() { digits + 1 } else { 0 };
        if digits > MAX_DIGITS {
            return false;
        }
        prev = b;
    }
    true
}

/// The `envelope_session` fuzz target's check of [`fast_response`] ([`crate::fuzz`]), also run
/// by the tests below: panics unless the fast read of a device frame agrees with the full one
/// ([`parse`], then [`classify`](super::jsonrpc::classify)) wherever it reads one at all.
pub fn fuzz_fast_response(text: &str) {
    use super::jsonrpc::{RpcMessage, classify};
    let Some((id, result)) = fast_response(text) else { return };
    let full = match parse(text) {
        Ok(DeviceMessage::Mcp { payload, .. }) => classify(payload),
        other => panic!("the fast read took {text:?}, which the full parse reads as {other:?}"),
    };
    let result: Value = serde_json::from_str(result.get()).unwrap_or_else(|e| panic!("the fast read's result is not a Value ({e}): {text:?}"));
    assert_eq!(full, Ok(RpcMessage::Response { id, outcome: Ok(result) }), "the fast and full reads disagree on {text:?}");
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
            // Literals, fractions, and what only looks like a number or an escape inside a string.
            r#"{"type":"mcp","payload":{"id":3,"result":{"a":true,"b":false,"c":-1.25,"d":"1e400 \\u0041 \" ]]]"}}}"#.to_string(),
            // Nesting: the envelope's two levels and the result's 125 are serde_json's 127.
            deep(125),
        ];
        for text in &read {
            assert!(fast_response(text).is_some(), "not read fast: {text}");
            fuzz_fast_response(text);
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
            // An exponent, or a run of digits long enough to leave `f64`'s range: `parse` decides.
            r#"{"type":"mcp","payload":{"id":1,"result":1E5}}"#.to_string(),
            format!(r#"{{"type":"mcp","payload":{{"id":1,"result":{}}}}}"#, "9".repeat(400)),
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
