//! `tools/call`: results of every kind, argument validation in the reference's order, and errors.

mod common;

use common::{argument_error, call, call_request, error_reply, full_device, parse, reply, text_result};

#[test]
fn set_volume_succeeds_with_true_and_changes_state() {
    let mut d = full_device();
    let r = reply(
        &mut d,
        r#"{"jsonrpc":"2.0","method":"tools/call","id":3,"params":{"name":"self.audio_speaker.set_volume","arguments":{"volume":50}}}"#,
    );
    // Reference §4.6, success reply, byte for byte.
    assert_eq!(r, r#"{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"true"}],"isError":false}}"#);
    assert_eq!(d.state().volume, 50);
}

#[test]
fn bool_results_are_true_and_false_text() {
    let mut d = full_device();
    assert_eq!(call(&mut d, "test.flag", r#"{"enable":true}"#), text_result("true"));
    assert_eq!(call(&mut d, "test.flag", r#"{"enable":false}"#), text_result("false"));
    // `false` is still a success: an unknown theme, as on the stock firmware.
    assert_eq!(call(&mut d, "self.screen.set_theme", r#"{"theme":"pink"}"#), text_result("false"));
    assert_eq!(d.state().theme, "light");
    assert_eq!(call(&mut d, "self.screen.set_theme", r#"{"theme":"dark"}"#), text_result("true"));
    assert_eq!(d.state().theme, "dark");
}

#[test]
fn int_results_are_decimal_text() {
    let mut d = full_device();
    assert_eq!(call(&mut d, "test.count", "{}"), r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"0"}],"isError":false}}"#);
    call(&mut d, "test.flag", r#"{"enable":true}"#);
    assert_eq!(call(&mut d, "test.count", "{}"), text_result("2"));
    assert_eq!(call(&mut d, "test.unbounded", r#"{"n":-9223372036854775808}"#), text_result("-9223372036854775808"));
}

#[test]
fn string_results_are_escaped() {
    let mut d = full_device();
    let r = call(&mut d, "test.echo", r#"{"text":"a \"b\" \\ c\n\u0000 é"}"#);
    assert_eq!(
        r,
        r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"a \"b\" \\ c\n\u0000 é"}],"isError":false}}"#
    );
    assert_eq!(parse(&r)["result"]["content"][0]["text"], "a \"b\" \\ c\n\u{0} é");
}

#[test]
fn json_results_are_serialized_text() {
    let mut d = full_device();
    let r = call(&mut d, "self.get_device_status", "{}");
    assert_eq!(
        r,
        r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"{\"audio_speaker\":{\"volume\":70},\"screen\":{\"theme\":\"light\"}}"}],"isError":false}}"#
    );
    let text = parse(&r)["result"]["content"][0]["text"].as_str().unwrap().to_string();
    assert_eq!(parse(&text), serde_json::json!({"audio_speaker": {"volume": 70}, "screen": {"theme": "light"}}));
}

#[test]
fn image_audio_and_resource_content() {
    let mut d = full_device();
    assert_eq!(
        call(&mut d, "test.image", "{}"),
        r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"a red dot"},{"type":"image","data":"iVBORw0KGgo=","mimeType":"image/png"}],"isError":false}}"#
    );
    assert_eq!(
        call(&mut d, "test.audio", "{}"),
        r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"audio","data":"T2dnUw==","mimeType":"audio/ogg"}],"isError":false}}"#
    );
    assert_eq!(
        call(&mut d, "test.resource", "{}"),
        r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"resource","resource":{"uri":"file:///log.txt","mimeType":"text/plain","text":"line \"1\"\nline 2"}}],"isError":false}}"#
    );
}

#[test]
fn tool_output_error_is_a_result_with_is_error_true() {
    let mut d = full_device();
    assert_eq!(
        call(&mut d, "test.soft_fail", "{}"),
        r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"Motor stalled"}],"isError":true}}"#
    );
}

#[test]
fn tool_error_is_internal_error() {
    let mut d = full_device();
    assert_eq!(call(&mut d, "test.hard_fail", "{}"), error_reply(-32603, "Unexpected status code: 404"));
    assert_eq!(call(&mut d, "test.undeclared", "{}"), error_reply(-32603, "Property not found: nope"));
}

#[test]
fn defaults_are_filled_in() {
    let mut d = full_device();
    assert_eq!(call(&mut d, "self.otto.action", "{}"), text_result("sit steps=3 speed=700 direction=1 amount=0 arm_swing=50"));
    assert_eq!(
        call(&mut d, "self.otto.action", r#"{"action":"wave","speed":3000,"direction":-1}"#),
        text_result("wave steps=3 speed=3000 direction=-1 amount=0 arm_swing=50")
    );
    // Leaving `arguments` out, or giving null, is the same as giving none.
    let no_args = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"self.otto.action"}}"#;
    assert_eq!(reply(&mut d, no_args), text_result("sit steps=3 speed=700 direction=1 amount=0 arm_swing=50"));
    assert_eq!(call(&mut d, "self.otto.action", "null"), text_result("sit steps=3 speed=700 direction=1 amount=0 arm_swing=50"));
    // A null value counts as absent.
    assert_eq!(
        call(&mut d, "self.otto.action", r#"{"steps":null}"#),
        text_result("sit steps=3 speed=700 direction=1 amount=0 arm_swing=50")
    );
    assert_eq!(call(&mut d, "test.flag_default", "{}"), text_result("true"));
    assert_eq!(call(&mut d, "test.flag_default", r#"{"enable":false}"#), text_result("false"));
}

#[test]
fn undeclared_arguments_are_ignored() {
    let mut d = full_device();
    assert_eq!(call(&mut d, "self.audio_speaker.set_volume", r#"{"volume":10,"extra":"x","more":[1]}"#), text_result("true"));
    assert_eq!(d.state().volume, 10);
    assert_eq!(call(&mut d, "self.reboot", r#"{"now":true}"#), text_result("true"));
}

#[test]
fn user_only_tools_are_still_callable() {
    let mut d = full_device();
    assert_eq!(call(&mut d, "self.reboot", "{}"), text_result("true"));
    assert!(d.state().rebooted);
    assert_eq!(call(&mut d, "self.get_system_info", "{}"), text_result(r#"{"chip_model_name":"esp32c3","version":2}"#));
}

#[test]
fn integral_floats_are_integers_but_fractions_are_not() {
    let mut d = full_device();
    assert_eq!(call(&mut d, "self.audio_speaker.set_volume", r#"{"volume":50.0}"#), text_result("true"));
    assert_eq!(d.state().volume, 50);
    assert_eq!(call(&mut d, "self.audio_speaker.set_volume", r#"{"volume":5e1}"#), text_result("true"));
    assert_eq!(call(&mut d, "self.audio_speaker.set_volume", r#"{"volume":-0.0}"#), text_result("true"));
    assert_eq!(d.state().volume, 0);
    for v in ["50.9", "0.5", "99.999"] {
        assert_eq!(
            call(&mut d, "self.audio_speaker.set_volume", &format!(r#"{{"volume":{v}}}"#)),
            argument_error("Invalid type for argument: volume (expected integer)", "volume"),
            "{v}"
        );
    }
    assert_eq!(d.state().volume, 0, "a rejected call does not run the tool");
    // Integral values beyond i64 are out of range, not of the wrong type.
    assert_eq!(call(&mut d, "test.unbounded", r#"{"n":1e16}"#), text_result("10000000000000000"));
    assert_eq!(
        call(&mut d, "test.unbounded", r#"{"n":18446744073709551615}"#),
        argument_error("Value exceeds maximum allowed: 9223372036854775807", "n")
    );
    assert_eq!(
        call(&mut d, "test.unbounded", r#"{"n":-1e300}"#),
        argument_error("Value is below minimum allowed: -9223372036854775808", "n")
    );
    assert_eq!(
        call(&mut d, "self.audio_speaker.set_volume", r#"{"volume":1e20}"#),
        argument_error("Value exceeds maximum allowed: 100", "volume")
    );
    assert_eq!(
        call(&mut d, "self.audio_speaker.set_volume", r#"{"volume":-1e20}"#),
        argument_error("Value is below minimum allowed: 0", "volume")
    );
}

#[test]
fn range_errors_name_the_bound() {
    let mut d = full_device();
    assert_eq!(
        call(&mut d, "self.audio_speaker.set_volume", r#"{"volume":101}"#),
        argument_error("Value exceeds maximum allowed: 100", "volume")
    );
    assert_eq!(
        call(&mut d, "self.audio_speaker.set_volume", r#"{"volume":-1}"#),
        argument_error("Value is below minimum allowed: 0", "volume")
    );
    assert_eq!(
        call(&mut d, "self.audio_speaker.set_volume", r#"{"volume":2147483648}"#),
        argument_error("Value exceeds maximum allowed: 100", "volume")
    );
    assert_eq!(
        call(&mut d, "self.otto.action", r#"{"direction":-2}"#),
        argument_error("Value is below minimum allowed: -1", "direction")
    );
    // The bounds themselves are allowed.
    assert_eq!(call(&mut d, "self.audio_speaker.set_volume", r#"{"volume":100}"#), text_result("true"));
    assert_eq!(call(&mut d, "self.audio_speaker.set_volume", r#"{"volume":0}"#), text_result("true"));
    assert_eq!(d.state().volume, 0);
}

#[test]
fn missing_required_argument() {
    let mut d = full_device();
    assert_eq!(
        call(&mut d, "self.audio_speaker.set_volume", "{}"),
        argument_error("Missing valid argument: volume", "volume")
    );
    assert_eq!(
        call(&mut d, "self.audio_speaker.set_volume", r#"{"volume":null}"#),
        argument_error("Missing valid argument: volume", "volume")
    );
    let no_args = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"self.screen.set_theme"}}"#;
    assert_eq!(reply(&mut d, no_args), argument_error("Missing valid argument: theme", "theme"));
}

#[test]
fn wrong_types_are_errors_even_with_a_default() {
    let mut d = full_device();
    for (tool, args, arg, kind) in [
        ("self.audio_speaker.set_volume", r#"{"volume":"50"}"#, "volume", "integer"),
        ("self.audio_speaker.set_volume", r#"{"volume":true}"#, "volume", "integer"),
        ("self.audio_speaker.set_volume", r#"{"volume":[50]}"#, "volume", "integer"),
        ("self.screen.set_theme", r#"{"theme":1}"#, "theme", "string"),
        ("self.screen.set_theme", r#"{"theme":{"name":"dark"}}"#, "theme", "string"),
        ("test.flag", r#"{"enable":1}"#, "enable", "boolean"),
        ("test.flag", r#"{"enable":"true"}"#, "enable", "boolean"),
        // With a default: stricter than the stock firmware, which would silently use the default.
        ("test.flag_default", r#"{"enable":"no"}"#, "enable", "boolean"),
        ("self.otto.action", r#"{"steps":"3"}"#, "steps", "integer"),
        ("self.otto.action", r#"{"action":5}"#, "action", "string"),
    ] {
        assert_eq!(
            call(&mut d, tool, args),
            argument_error(&format!("Invalid type for argument: {arg} (expected {kind})"), arg),
            "{tool} {args}"
        );
    }
    assert_eq!(d.state().calls, 0, "no handler ran");
}

#[test]
fn properties_are_validated_in_declaration_order() {
    let mut d = full_device();
    // `steps` is declared before `speed`, so its error is the one reported.
    assert_eq!(
        call(&mut d, "self.otto.action", r#"{"speed":1,"steps":0}"#),
        argument_error("Value is below minimum allowed: 1", "steps")
    );
}

#[test]
fn params_errors_in_reference_order() {
    let mut d = full_device();
    // 1. params missing.
    assert_eq!(reply(&mut d, r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#), error_reply(-32602, "Missing params"));
    // params not an object is refused before tools/call looks at it.
    assert_eq!(
        reply(&mut d, r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":["x"]}"#),
        error_reply(-32602, "Invalid params: must be an object")
    );
    // 2. name missing or not a string (even with bad arguments).
    for params in [r#"{}"#, r#"{"name":5}"#, r#"{"name":null,"arguments":3}"#] {
        assert_eq!(
            reply(&mut d, &format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{params}}}"#)),
            error_reply(-32602, "Missing name"),
            "{params}"
        );
    }
    // 3. arguments present but not an object (even for an unknown tool).
    for args in ["3", "\"x\"", "[]", "true"] {
        assert_eq!(call(&mut d, "self.nope", args), error_reply(-32602, "Invalid arguments"), "{args}");
    }
    // 4. unknown tool.
    assert_eq!(call(&mut d, "self.nope", "{}"), error_reply(-32602, "Unknown tool: self.nope"));
    assert_eq!(d.state().calls, 0);
}

#[test]
fn unknown_tool_name_is_escaped_in_the_message() {
    let mut d = full_device();
    let r = reply(&mut d, r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x\"y\\z\n"}}"#);
    assert_eq!(r, r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"Unknown tool: x\"y\\z\n"}}"#);
    assert_eq!(parse(&r)["error"]["message"], "Unknown tool: x\"y\\z\n");
}

#[test]
fn tool_error_message_is_escaped() {
    use mcp_device::{McpServer, Tool, ToolError};
    let mut d = McpServer::new("b", "1", ());
    d.add_tool(Tool::new("t", "d", |_, _| Err(ToolError::new("bad \"path\" C:\\x\r\n")))).unwrap();
    let r = d.handle(&call_request("t", "{}")).unwrap();
    assert_eq!(r, r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"bad \"path\" C:\\x\r\n"}}"#);
    assert_eq!(parse(&r)["error"]["message"], "bad \"path\" C:\\x\r\n");
}

#[test]
fn argument_error_data_is_escaped() {
    use mcp_device::{McpServer, Property, Tool};
    let mut d = McpServer::new("b", "1", ());
    d.add_tool(Tool::new("t", "d", |_, _| Ok(true.into())).property(Property::integer("a\"b"))).unwrap();
    let r = d.handle(&call_request("t", "{}")).unwrap();
    assert_eq!(
        r,
        r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"Missing valid argument: a\"b","data":{"argument":"a\"b"}}}"#
    );
    let v = parse(&r);
    assert_eq!(v["error"]["data"]["argument"], "a\"b");
    let r = d.handle(&call_request("t", r#"{"a\"b":7}"#)).unwrap();
    assert_eq!(r, text_result("true"));
}

#[test]
fn string_id_is_echoed_on_call_results_and_errors() {
    let mut d = full_device();
    let r = reply(&mut d, r#"{"jsonrpc":"2.0","id":"c-1","method":"tools/call","params":{"name":"test.flag","arguments":{"enable":true}}}"#);
    assert_eq!(r, r#"{"jsonrpc":"2.0","id":"c-1","result":{"content":[{"type":"text","text":"true"}],"isError":false}}"#);
    let r = reply(&mut d, r#"{"jsonrpc":"2.0","id":"c-2","method":"tools/call","params":{"name":"nope"}}"#);
    assert_eq!(r, r#"{"jsonrpc":"2.0","id":"c-2","error":{"code":-32602,"message":"Unknown tool: nope"}}"#);
}

#[test]
fn handlers_queue_notifications_in_the_outbox() {
    let mut d = full_device();
    call(&mut d, "self.audio_speaker.set_volume", r#"{"volume":30}"#);
    call(&mut d, "self.audio_speaker.set_volume", r#"{"volume":30}"#); // unchanged: nothing queued
    assert_eq!(d.outbox().len(), 1);
    assert_eq!(
        d.outbox().pop().unwrap(),
        r#"{"jsonrpc":"2.0","method":"notifications/state_changed","params":{"newState":30,"oldState":70,"what":"audio_speaker.volume"}}"#
    );
    assert!(d.outbox().is_empty());
}

#[test]
fn handle_into_appends_after_existing_text() {
    let mut d = full_device();
    let mut out = String::from("prefix:");
    assert!(d.handle_into(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#, &mut out));
    assert_eq!(out, r#"prefix:{"jsonrpc":"2.0","id":1,"result":{}}"#);
    // An error after a partly written reply leaves only the error after the prefix.
    let mut out = String::from("prefix:");
    assert!(d.handle_into(&call_request("test.hard_fail", "{}"), &mut out));
    assert_eq!(out, format!("prefix:{}", error_reply(-32603, "Unexpected status code: 404")));
    // Nothing written for a notification.
    let mut out = String::from("prefix:");
    assert!(!d.handle_into(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#, &mut out));
    assert_eq!(out, "prefix:");
}
