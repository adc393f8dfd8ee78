//! Malformed JSON-RPC: parse errors, invalid requests, unknown methods, and what gets no reply.

mod common;

use common::{Dev, error_reply, full_device, parse, reply};
use mcp_device::{DeviceLink, Inbound, McpServer, Transport};
use proptest::prelude::*;

fn null_id_error(code: i64, message: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":null,"error":{{"code":{code},"message":"{message}"}}}}"#)
}

#[test]
fn unknown_method() {
    let mut d = full_device();
    assert_eq!(
        reply(&mut d, r#"{"jsonrpc":"2.0","id":1,"method":"resources/list"}"#),
        error_reply(-32601, "Method not implemented: resources/list")
    );
    assert_eq!(reply(&mut d, r#"{"jsonrpc":"2.0","id":1,"method":""}"#), error_reply(-32601, "Method not implemented: "));
    let r = reply(&mut d, r#"{"jsonrpc":"2.0","id":1,"method":"x\"y\\"}"#);
    assert_eq!(r, r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"Method not implemented: x\"y\\"}}"#);
    assert_eq!(parse(&r)["error"]["message"], "Method not implemented: x\"y\\");
}

#[test]
fn not_json_is_a_parse_error_with_null_id() {
    let mut d = full_device();
    for (text, detail) in [
        ("", "EOF while parsing a value at line 1 column 0"),
        ("hello", "expected value at line 1 column 1"),
        (r#"{"jsonrpc":"2.0","id":1,"method":"ping""#, "EOF while parsing an object at line 1 column 39"),
        (r#"{"jsonrpc":"2.0","id":1,"method":"ping"} x"#, "trailing characters at line 1 column 42"),
        ("{'a':1}", "key must be a string at line 1 column 2"),
    ] {
        assert_eq!(reply(&mut d, text), null_id_error(-32700, &format!("Parse error: {detail}")), "{text:?}");
    }
    // Deep nesting is refused by the parser's recursion limit instead of overflowing the stack.
    let deep = "[".repeat(100_000);
    let r = reply(&mut d, &deep);
    assert_eq!(parse(&r)["error"]["code"], -32700);
    assert_eq!(parse(&r)["id"], serde_json::Value::Null);
}

#[test]
fn not_an_object_is_an_invalid_request() {
    let mut d = full_device();
    for text in ["1", "\"ping\"", "null", "true"] {
        assert_eq!(reply(&mut d, text), null_id_error(-32600, "Invalid Request: not an object"), "{text}");
    }
}

#[test]
fn batches_are_refused_whole() {
    let mut d = full_device();
    for text in ["[]", r#"[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"ping"}]"#] {
        assert_eq!(reply(&mut d, text), null_id_error(-32600, "Batches are not supported"), "{text}");
    }
}

#[test]
fn jsonrpc_must_be_2_0() {
    let mut d = full_device();
    let msg = r#"Invalid Request: jsonrpc must be \"2.0\""#;
    for jsonrpc in [None, Some("\"1.0\""), Some("2.0"), Some("null")] {
        let field = jsonrpc.map(|v| format!(r#""jsonrpc":{v},"#)).unwrap_or_default();
        let r = reply(&mut d, &format!(r#"{{{field}"id":1,"method":"ping"}}"#));
        assert_eq!(r, format!(r#"{{"jsonrpc":"2.0","id":1,"error":{{"code":-32600,"message":"{msg}"}}}}"#), "{jsonrpc:?}");
        assert_eq!(parse(&r)["error"]["message"], "Invalid Request: jsonrpc must be \"2.0\"");
    }
    // The id is echoed when it is valid, even on an invalid request.
    let r = reply(&mut d, r#"{"jsonrpc":"1.0","id":"s","method":"ping"}"#);
    assert_eq!(r, format!(r#"{{"jsonrpc":"2.0","id":"s","error":{{"code":-32600,"message":"{msg}"}}}}"#));
}

#[test]
fn id_must_be_a_number_or_a_string() {
    let mut d = full_device();
    for id in ["null", "true", "{}", "[1]"] {
        let r = reply(&mut d, &format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#));
        assert_eq!(r, null_id_error(-32600, "Invalid Request: id must be a number or a string"), "{id}");
    }
}

#[test]
fn method_must_be_a_string() {
    let mut d = full_device();
    for method in [Some("5"), Some("null"), Some("[\"ping\"]"), None] {
        let field = method.map(|v| format!(r#","method":{v}"#)).unwrap_or_default();
        let r = reply(&mut d, &format!(r#"{{"jsonrpc":"2.0","id":4{field}}}"#));
        assert_eq!(
            r,
            r#"{"jsonrpc":"2.0","id":4,"error":{"code":-32600,"message":"Invalid Request: method must be a string"}}"#,
            "{method:?}"
        );
    }
}

#[test]
fn notifications_get_no_reply() {
    let mut d = full_device();
    for msg in [
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}"#,
        // notifications/* is ignored even with an id (as the stock firmware does).
        r#"{"jsonrpc":"2.0","id":9,"method":"notifications/cancelled","params":{"requestId":1}}"#,
        // Any message without an id is a notification, whatever its method.
        r#"{"jsonrpc":"2.0","method":"ping"}"#,
        r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"self.reboot"}}"#,
        r#"{"jsonrpc":"2.0","method":"no/such/method"}"#,
        // An invalid notification is still not answered.
        r#"{"jsonrpc":"1.0","method":"ping"}"#,
        r#"{"method":"ping"}"#,
        r#"{"jsonrpc":"2.0","method":5}"#,
        r#"{"jsonrpc":"2.0"}"#,
        r#"{}"#,
    ] {
        assert_eq!(d.handle(msg), None, "{msg}");
    }
    assert!(!d.state().rebooted, "a tools/call notification does not run the tool");
    assert_eq!(d.state().calls, 0);
}

#[test]
fn responses_get_no_reply() {
    let mut d = full_device();
    for msg in [
        r#"{"jsonrpc":"2.0","id":1,"result":{}}"#,
        r#"{"jsonrpc":"2.0","id":1,"error":{"code":-1,"message":"x"}}"#,
        r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}"#,
        r#"{"id":"a","result":null}"#,
    ] {
        assert_eq!(d.handle(msg), None, "{msg}");
    }
}

#[test]
fn params_must_be_an_object_for_every_method() {
    let mut d = full_device();
    for method in ["initialize", "ping", "tools/list", "tools/call", "nope"] {
        let r = reply(&mut d, &format!(r#"{{"jsonrpc":"2.0","id":1,"method":"{method}","params":[1]}}"#));
        assert_eq!(r, error_reply(-32602, "Invalid params: must be an object"), "{method}");
    }
}

// ---- never panics -------------------------------------------------------------------------------

fn json_value() -> impl Strategy<Value = serde_json::Value> {
    use serde_json::Value;
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(Value::from),
        ".{0,12}".prop_map(Value::String),
        prop_oneof![
            Just("2.0"),
            Just("initialize"),
            Just("tools/list"),
            Just("tools/call"),
            Just("ping"),
            Just("notifications/initialized"),
            Just("self.audio_speaker.set_volume"),
            Just("self.otto.action"),
            Just("test.echo"),
            Just("self.reboot"),
        ]
        .prop_map(|s| Value::String(s.into())),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        let key = prop_oneof![
            Just("jsonrpc".to_string()),
            Just("id".to_string()),
            Just("method".to_string()),
            Just("params".to_string()),
            Just("name".to_string()),
            Just("arguments".to_string()),
            Just("cursor".to_string()),
            Just("withUserTools".to_string()),
            Just("volume".to_string()),
            Just("steps".to_string()),
            Just("text".to_string()),
            Just("capabilities".to_string()),
            Just("vision".to_string()),
            Just("url".to_string()),
            "[a-z]{1,6}",
        ];
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(key, inner, 0..6).prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A JSON-RPC-shaped request with arbitrary members, so the dispatch paths are reached often.
fn request_like() -> impl Strategy<Value = serde_json::Value> {
    use serde_json::Value;
    (
        prop::option::of(json_value()),
        prop::option::of(json_value()),
        prop::option::of(json_value()),
        prop::sample::select(vec!["initialize", "tools/list", "tools/call", "ping", "notifications/x", "zzz"]),
        any::<bool>(),
    )
        .prop_map(|(id, params, extra, method, well_formed_id)| {
            let mut m = serde_json::Map::new();
            m.insert("jsonrpc".into(), "2.0".into());
            m.insert("method".into(), method.into());
            match (well_formed_id, id) {
                (true, _) => {
                    m.insert("id".into(), 1.into());
                }
                (false, Some(id)) => {
                    m.insert("id".into(), id);
                }
                (false, None) => {}
            }
            if let Some(p) = params {
                m.insert("params".into(), p);
            }
            if let Some(e) = extra {
                m.insert("x".into(), e);
            }
            Value::Object(m)
        })
}

/// Checks what any reply must be: one JSON-RPC response object with exactly one of result/error.
fn check_reply(request: &str, reply: Option<String>) {
    let Some(reply) = reply else { return };
    let v: serde_json::Value = serde_json::from_str(&reply).unwrap_or_else(|e| panic!("{e}: {reply} (for {request})"));
    assert_eq!(v["jsonrpc"], "2.0", "{reply}");
    let has_result = v.get("result").is_some();
    let has_error = v.get("error").is_some();
    assert!(has_result != has_error, "{reply}");
    assert!(v["id"].is_null() || v["id"].is_number() || v["id"].is_string(), "{reply}");
    if has_error {
        let code = v["error"]["code"].as_i64().expect("error code");
        assert!([-32700, -32600, -32601, -32602, -32603].contains(&code), "{reply}");
        assert!(v["error"]["message"].is_string(), "{reply}");
    }
}

fn device() -> McpServer<Dev> {
    full_device()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn arbitrary_text_never_panics(text in ".{0,200}") {
        let mut d = device();
        let r = d.handle(&text);
        check_reply(&text, r);
    }

    #[test]
    fn arbitrary_bytes_as_lossy_text_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let mut d = device();
        let r = d.handle(&text);
        check_reply(&text, r);
    }

    #[test]
    fn arbitrary_json_never_panics(v in json_value()) {
        let text = v.to_string();
        let mut d = device();
        let r = d.handle(&text);
        // Anything that is not an object is answered (-32600); an object without an id never is.
        if !v.is_object() {
            prop_assert!(r.is_some());
        }
        if v.as_object().is_some_and(|o| !o.contains_key("id")) {
            prop_assert!(r.is_none(), "{}", text);
        }
        check_reply(&text, r);
    }

    #[test]
    fn request_shaped_json_never_panics(v in request_like()) {
        let text = v.to_string();
        let mut d = device();
        let r = d.handle(&text);
        let id = v.get("id");
        let notification = id.is_none() || v["method"].as_str().unwrap().starts_with("notifications/");
        prop_assert_eq!(r.is_none(), notification, "{}", text);
        if let Some(r) = &r {
            // The id comes back when it was a number or a string, otherwise null.
            let got: serde_json::Value = serde_json::from_str(r).unwrap();
            match id {
                // A float may come back one ulp off after two parses; integers and strings are exact.
                Some(serde_json::Value::Number(n)) if n.is_f64() => prop_assert!(got["id"].is_number()),
                Some(i @ (serde_json::Value::Number(_) | serde_json::Value::String(_))) => prop_assert_eq!(&got["id"], i),
                _ => prop_assert!(got["id"].is_null()),
            }
        }
        check_reply(&text, r);
    }

    #[test]
    fn link_never_panics_on_arbitrary_text(text in ".{0,200}", mqtt in any::<bool>()) {
        let mut link = link(mqtt);
        let mut out = String::new();
        let what = link.on_text(&text, &mut out);
        check_link_output(&text, &what, &out);
    }

    #[test]
    fn link_never_panics_on_arbitrary_json(v in json_value(), mqtt in any::<bool>()) {
        let text = v.to_string();
        let mut link = link(mqtt);
        let mut out = String::new();
        let what = link.on_text(&text, &mut out);
        check_link_output(&text, &what, &out);
    }

    #[test]
    fn link_never_panics_on_envelopes(
        kind in prop::sample::select(vec!["mcp", "hello", "goodbye", "tts", "x"]),
        session in prop::option::of(json_value()),
        transport in prop::option::of(prop_oneof![Just(serde_json::Value::from("websocket")), Just(serde_json::Value::from("udp")), json_value()]),
        udp in prop::option::of(json_value()),
        payload in prop_oneof![request_like(), json_value()],
        mqtt in any::<bool>(),
    ) {
        let mut m = serde_json::Map::new();
        m.insert("type".into(), kind.into());
        m.insert("payload".into(), payload.clone());
        if let Some(s) = session { m.insert("session_id".into(), s); }
        if let Some(t) = transport { m.insert("transport".into(), t); }
        if let Some(u) = udp { m.insert("udp".into(), u); }
        let text = serde_json::Value::Object(m).to_string();
        let mut link = link(mqtt);
        let mut out = String::new();
        let what = link.on_text(&text, &mut out);
        check_link_output(&text, &what, &out);
        if kind == "mcp" {
            prop_assert_eq!(what.clone() == Inbound::Ignored("mcp message without an object payload"), !payload.is_object());
        }
        // Whatever happened, the link still answers a ping afterwards.
        let mut out = String::new();
        let ping = r#"{"type":"mcp","payload":{"jsonrpc":"2.0","id":1,"method":"ping"}}"#;
        prop_assert_eq!(link.on_text(ping, &mut out), Inbound::Mcp { replied: true });
        prop_assert!(out.ends_with(r#","type":"mcp","payload":{"jsonrpc":"2.0","id":1,"result":{}}}"#), "{}", out);
    }
}

fn link(mqtt: bool) -> DeviceLink<Dev> {
    let transport = if mqtt { Transport::Mqtt } else { Transport::WebSocket { binary_version: 2 } };
    DeviceLink::new(full_device(), transport)
}

/// Output is written only for a replied MCP message, and is then one whole envelope.
fn check_link_output(text: &str, what: &Inbound, out: &str) {
    match what {
        Inbound::Mcp { replied: true } => {
            let v: serde_json::Value = serde_json::from_str(out).unwrap_or_else(|e| panic!("{e}: {out} (for {text})"));
            assert_eq!(v["type"], "mcp");
            assert!(v["session_id"].is_string());
            check_reply(text, Some(serde_json::to_string(&v["payload"]).unwrap()));
        }
        _ => assert_eq!(out, "", "{what:?} for {text}"),
    }
}
