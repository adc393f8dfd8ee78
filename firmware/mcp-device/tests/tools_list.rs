//! `tools/list`: the exact tool JSON and `inputSchema`, visibility of user-only tools, cursor errors.

mod common;

use common::{Dev, OTTO_DESCRIPTION, REBOOT_DESCRIPTION, SET_VOLUME_DESCRIPTION, STATUS_DESCRIPTION, THEME_DESCRIPTION};
use common::{SYSTEM_INFO_DESCRIPTION, error_reply, parse, reply, stock_device, tool_json};
use mcp_device::{Call, McpServer, Property, Tool, ToolError, ToolOutput};

fn status_json() -> String {
    format!(
        r#"{{"name":"self.get_device_status","description":"{STATUS_DESCRIPTION}","inputSchema":{{"type":"object","properties":{{}}}}}}"#
    )
}
fn volume_json() -> String {
    format!(
        r#"{{"name":"self.audio_speaker.set_volume","description":"{SET_VOLUME_DESCRIPTION}","inputSchema":{{"type":"object","properties":{{"volume":{{"type":"integer","minimum":0,"maximum":100}}}},"required":["volume"]}}}}"#
    )
}
fn theme_json() -> String {
    format!(
        r#"{{"name":"self.screen.set_theme","description":"{THEME_DESCRIPTION}","inputSchema":{{"type":"object","properties":{{"theme":{{"type":"string"}}}},"required":["theme"]}}}}"#
    )
}
fn otto_json() -> String {
    format!(
        r#"{{"name":"self.otto.action","description":"{OTTO_DESCRIPTION}","inputSchema":{{"type":"object","properties":{{"action":{{"type":"string","default":"sit"}},"steps":{{"type":"integer","default":3,"minimum":1,"maximum":100}},"speed":{{"type":"integer","default":700,"minimum":100,"maximum":3000}},"direction":{{"type":"integer","default":1,"minimum":-1,"maximum":1}},"amount":{{"type":"integer","default":0,"minimum":0,"maximum":170}},"arm_swing":{{"type":"integer","default":50,"minimum":0,"maximum":170}}}}}}}}"#
    )
}
fn system_info_json() -> String {
    format!(
        r#"{{"name":"self.get_system_info","description":"{SYSTEM_INFO_DESCRIPTION}","inputSchema":{{"type":"object","properties":{{}}}},"annotations":{{"audience":["user"]}}}}"#
    )
}
fn reboot_json() -> String {
    format!(
        r#"{{"name":"self.reboot","description":"{REBOOT_DESCRIPTION}","inputSchema":{{"type":"object","properties":{{}}}},"annotations":{{"audience":["user"]}}}}"#
    )
}

fn nop(_: &mut Dev, _: &mut Call<'_>) -> Result<ToolOutput, ToolError> {
    Ok(true.into())
}

#[test]
fn set_volume_is_the_reference_line_byte_for_byte() {
    // Reference §4.4, first example.
    let reference = r#"{"name":"self.audio_speaker.set_volume","description":"Set the volume of the audio speaker. If the current volume is unknown, you must call `self.get_device_status` tool first and then call this tool.","inputSchema":{"type":"object","properties":{"volume":{"type":"integer","minimum":0,"maximum":100}},"required":["volume"]}}"#;
    let d = stock_device();
    assert_eq!(tool_json(&d.tools()[1]), reference);
    assert_eq!(volume_json(), reference);
}

#[test]
fn snapshot_is_the_reference_line_byte_for_byte() {
    // Reference §4.4, second example: a required string, an integer with default and range, user-only.
    let reference = r#"{"name":"self.screen.snapshot","description":"Snapshot the screen and upload it to a specific URL","inputSchema":{"type":"object","properties":{"url":{"type":"string"},"quality":{"type":"integer","default":80,"minimum":1,"maximum":100}},"required":["url"]},"annotations":{"audience":["user"]}}"#;
    let tool: Tool<Dev> = Tool::new("self.screen.snapshot", "Snapshot the screen and upload it to a specific URL", nop)
        .property(Property::string("url"))
        .property(Property::integer("quality").default(80).range(1, 100))
        .user_only();
    assert_eq!(tool_json(&tool), reference);
}

#[test]
fn schema_shapes_for_every_property_kind() {
    let tool: Tool<Dev> = Tool::new("t", "d", nop)
        .property(Property::boolean("b"))
        .property(Property::boolean("bt").default(true))
        .property(Property::boolean("bf").default(false))
        .property(Property::integer("i"))
        .property(Property::integer("id").default(-7))
        .property(Property::integer("ir").range(-3, 3))
        .property(Property::string("s"))
        .property(Property::string("sd").default("x\"y\\z"));
    assert_eq!(
        tool_json(&tool),
        concat!(
            r#"{"name":"t","description":"d","inputSchema":{"type":"object","properties":{"#,
            r#""b":{"type":"boolean"},"bt":{"type":"boolean","default":true},"bf":{"type":"boolean","default":false},"#,
            r#""i":{"type":"integer"},"id":{"type":"integer","default":-7},"ir":{"type":"integer","minimum":-3,"maximum":3},"#,
            r#""s":{"type":"string"},"sd":{"type":"string","default":"x\"y\\z"}},"#,
            r#""required":["b","i","ir","s"]}}"#
        )
    );
    // `range` means nothing for other kinds, and a default of another kind is ignored.
    let odd: Tool<Dev> = Tool::new("t", "d", nop)
        .property(Property::string("s").range(1, 2))
        .property(Property::boolean("b").default(5))
        .property(Property::integer("i").default("x"));
    assert_eq!(
        tool_json(&odd),
        r#"{"name":"t","description":"d","inputSchema":{"type":"object","properties":{"s":{"type":"string"},"b":{"type":"boolean"},"i":{"type":"integer"}},"required":["s","b","i"]}}"#
    );
}

#[test]
fn upgrade_firmware_default_has_no_required_list() {
    // The stock `self.upgrade_firmware` quirk: its url has a default, so nothing is required.
    let tool: Tool<Dev> = Tool::new("self.upgrade_firmware", "Upgrade", nop)
        .property(Property::string("url").default("The URL of the firmware binary file to download and install"))
        .user_only();
    assert_eq!(
        tool_json(&tool),
        r#"{"name":"self.upgrade_firmware","description":"Upgrade","inputSchema":{"type":"object","properties":{"url":{"type":"string","default":"The URL of the firmware binary file to download and install"}}},"annotations":{"audience":["user"]}}"#
    );
}

#[test]
fn list_hides_user_only_tools_by_default() {
    let mut d = stock_device();
    let want = format!(
        r#"{{"jsonrpc":"2.0","id":2,"result":{{"tools":[{},{},{},{}]}}}}"#,
        status_json(),
        volume_json(),
        theme_json(),
        otto_json()
    );
    for req in [
        r#"{"jsonrpc":"2.0","method":"tools/list","id":2,"params":{"cursor":"","withUserTools":false}}"#,
        r#"{"jsonrpc":"2.0","method":"tools/list","id":2,"params":{}}"#,
        r#"{"jsonrpc":"2.0","method":"tools/list","id":2}"#,
        r#"{"jsonrpc":"2.0","method":"tools/list","id":2,"params":{"cursor":null}}"#,
        r#"{"jsonrpc":"2.0","method":"tools/list","id":2,"params":{"withSystemTools":false}}"#,
    ] {
        assert_eq!(reply(&mut d, req), want, "{req}");
    }
}

#[test]
fn list_shows_user_only_tools_when_asked() {
    let mut d = stock_device();
    let want = format!(
        r#"{{"jsonrpc":"2.0","id":2,"result":{{"tools":[{},{},{},{},{},{}]}}}}"#,
        status_json(),
        volume_json(),
        theme_json(),
        otto_json(),
        system_info_json(),
        reboot_json()
    );
    let modern = r#"{"jsonrpc":"2.0","method":"tools/list","id":2,"params":{"cursor":"","withUserTools":true}}"#;
    let legacy = r#"{"jsonrpc":"2.0","method":"tools/list","id":2,"params":{"cursor":"","withSystemTools":true}}"#;
    assert_eq!(reply(&mut d, modern), want);
    assert_eq!(reply(&mut d, legacy), want);
    // `withUserTools` wins over the legacy name when both are given.
    let both = r#"{"jsonrpc":"2.0","method":"tools/list","id":2,"params":{"withUserTools":false,"withSystemTools":true}}"#;
    assert_eq!(parse(&reply(&mut d, both))["result"]["tools"].as_array().unwrap().len(), 4);
}

#[test]
fn cursor_starts_at_the_named_tool_inclusive() {
    let mut d = stock_device();
    let r = reply(&mut d, r#"{"jsonrpc":"2.0","method":"tools/list","id":3,"params":{"cursor":"self.screen.set_theme"}}"#);
    assert_eq!(r, format!(r#"{{"jsonrpc":"2.0","id":3,"result":{{"tools":[{},{}]}}}}"#, theme_json(), otto_json()));
    // A cursor naming a hidden tool starts there and still hides it.
    let r = reply(&mut d, r#"{"jsonrpc":"2.0","method":"tools/list","id":3,"params":{"cursor":"self.get_system_info"}}"#);
    assert_eq!(r, r#"{"jsonrpc":"2.0","id":3,"result":{"tools":[]}}"#);
    let r = reply(&mut d, r#"{"jsonrpc":"2.0","method":"tools/list","id":3,"params":{"cursor":"self.reboot","withUserTools":true}}"#);
    assert_eq!(r, format!(r#"{{"jsonrpc":"2.0","id":3,"result":{{"tools":[{}]}}}}"#, reboot_json()));
}

#[test]
fn empty_registry_lists_no_tools() {
    let mut d: McpServer<Dev> = McpServer::new("b", "1", Dev::default());
    assert_eq!(
        d.handle(r#"{"jsonrpc":"2.0","method":"tools/list","id":1}"#).unwrap(),
        r#"{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}"#
    );
}

#[test]
fn unknown_cursor_is_invalid_params() {
    let mut d = stock_device();
    let r = reply(&mut d, r#"{"jsonrpc":"2.0","method":"tools/list","id":1,"params":{"cursor":"self.nope"}}"#);
    assert_eq!(r, error_reply(-32602, "Invalid cursor: self.nope"));
    // The cursor is escaped in the message.
    let r = reply(&mut d, r#"{"jsonrpc":"2.0","method":"tools/list","id":1,"params":{"cursor":"a\"b\\c"}}"#);
    assert_eq!(r, r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"Invalid cursor: a\"b\\c"}}"#);
    assert_eq!(parse(&r)["error"]["message"], "Invalid cursor: a\"b\\c");
}

#[test]
fn cursor_that_is_not_a_string_is_invalid_params() {
    let mut d = stock_device();
    for cursor in ["5", "true", "{}", "[]"] {
        let r = reply(&mut d, &format!(r#"{{"jsonrpc":"2.0","method":"tools/list","id":1,"params":{{"cursor":{cursor}}}}}"#));
        assert_eq!(r, error_reply(-32602, "Invalid cursor: must be a string"), "{cursor}");
    }
}

#[test]
fn with_user_tools_must_be_a_boolean() {
    let mut d = stock_device();
    for (key, value) in [("withUserTools", "1"), ("withUserTools", "\"true\""), ("withUserTools", "null"), ("withSystemTools", "1")] {
        let r = reply(&mut d, &format!(r#"{{"jsonrpc":"2.0","method":"tools/list","id":1,"params":{{"{key}":{value}}}}}"#));
        assert_eq!(r, error_reply(-32602, &format!("{key} must be a boolean")), "{key}: {value}");
    }
}

#[test]
fn list_params_must_be_an_object() {
    let mut d = stock_device();
    for params in ["[]", "\"x\"", "1", "null"] {
        let r = reply(&mut d, &format!(r#"{{"jsonrpc":"2.0","method":"tools/list","id":1,"params":{params}}}"#));
        assert_eq!(r, error_reply(-32602, "Invalid params: must be an object"), "{params}");
    }
}

#[test]
fn descriptions_and_property_names_are_escaped() {
    let tool: Tool<Dev> = Tool::new("esc.tool", "say \"hi\" to C:\\dir\n\ttab \u{1} \u{7f} é", nop)
        .property(Property::string("we\"ird\\name"))
        .property(Property::string("s").default("\"quoted\" \\ back"));
    let mut d = McpServer::new("b", "1", Dev::default());
    d.add_tool(tool).unwrap();
    let r = d.handle(r#"{"jsonrpc":"2.0","method":"tools/list","id":1}"#).unwrap();
    assert_eq!(
        r,
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"tools\":[{\"name\":\"esc.tool\",\
         \"description\":\"say \\\"hi\\\" to C:\\\\dir\\n\\ttab \\u0001 \u{7f} é\",\
         \"inputSchema\":{\"type\":\"object\",\"properties\":{\"we\\\"ird\\\\name\":{\"type\":\"string\"},\
         \"s\":{\"type\":\"string\",\"default\":\"\\\"quoted\\\" \\\\ back\"}},\"required\":[\"we\\\"ird\\\\name\"]}}]}}"
    );
    let v = parse(&r);
    let t = &v["result"]["tools"][0];
    assert_eq!(t["description"], "say \"hi\" to C:\\dir\n\ttab \u{1} \u{7f} é");
    assert_eq!(t["inputSchema"]["properties"]["we\"ird\\name"]["type"], "string");
    assert_eq!(t["inputSchema"]["properties"]["s"]["default"], "\"quoted\" \\ back");
    assert_eq!(t["inputSchema"]["required"][0], "we\"ird\\name");
}
