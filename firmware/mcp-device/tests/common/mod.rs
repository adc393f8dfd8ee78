//! A test device shaped like a stock xiaozhi board, plus helpers shared by the test files.
#![allow(dead_code)]

use mcp_device::{ArgValue, Call, Content, McpServer, Property, Tool, ToolError, ToolOutput};
use serde_json::Value;

/// The reference's description of `self.audio_speaker.set_volume`, byte for byte.
pub const SET_VOLUME_DESCRIPTION: &str = "Set the volume of the audio speaker. If the current volume is unknown, you must call `self.get_device_status` tool first and then call this tool.";
pub const STATUS_DESCRIPTION: &str = "Provides the real-time information of the device, including the current status of the audio speaker, screen, battery, network, etc.";
pub const THEME_DESCRIPTION: &str = "Set the theme of the screen. The theme can be `light` or `dark`.";
pub const OTTO_DESCRIPTION: &str = "Make the robot perform an action.";
pub const SYSTEM_INFO_DESCRIPTION: &str = "Get the system information of the device.";
pub const REBOOT_DESCRIPTION: &str = "Reboot the system.";

/// The state the test tools act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dev {
    pub volume: i64,
    pub theme: String,
    pub rebooted: bool,
    /// How many times any handler ran (validation failures must not run it).
    pub calls: u32,
}

impl Default for Dev {
    fn default() -> Self {
        Self { volume: 70, theme: "light".into(), rebooted: false, calls: 0 }
    }
}

/// The stock-like tools, in the stock order: common tools, a board tool, then user-only tools.
pub fn stock_tools() -> Vec<Tool<Dev>> {
    vec![
        Tool::new("self.get_device_status", STATUS_DESCRIPTION, device_status),
        Tool::new("self.audio_speaker.set_volume", SET_VOLUME_DESCRIPTION, set_volume)
            .property(Property::integer("volume").range(0, 100)),
        Tool::new("self.screen.set_theme", THEME_DESCRIPTION, set_theme).property(Property::string("theme")),
        Tool::new("self.otto.action", OTTO_DESCRIPTION, otto_action)
            .property(Property::string("action").default("sit"))
            .property(Property::integer("steps").default(3).range(1, 100))
            .property(Property::integer("speed").default(700).range(100, 3000))
            .property(Property::integer("direction").default(1).range(-1, 1))
            .property(Property::integer("amount").default(0).range(0, 170))
            .property(Property::integer("arm_swing").default(50).range(0, 170)),
        Tool::new("self.get_system_info", SYSTEM_INFO_DESCRIPTION, system_info).user_only(),
        Tool::new("self.reboot", REBOOT_DESCRIPTION, reboot).user_only(),
    ]
}

/// Tools that exercise every kind of result and failure a handler can produce.
pub fn test_tools() -> Vec<Tool<Dev>> {
    vec![
        Tool::new("test.count", "Returns how many calls ran before this one, as an integer.", count),
        Tool::new("test.flag", "Echoes a boolean.", flag).property(Property::boolean("enable")),
        Tool::new("test.flag_default", "Echoes a boolean with a default.", flag)
            .property(Property::boolean("enable").default(true)),
        Tool::new("test.echo", "Echoes its text.", echo).property(Property::string("text")),
        Tool::new("test.image", "Returns a picture.", image),
        Tool::new("test.audio", "Returns a sound.", audio),
        Tool::new("test.resource", "Returns an embedded text resource.", resource),
        Tool::new("test.soft_fail", "Fails as a result with isError.", soft_fail),
        Tool::new("test.hard_fail", "Fails with a JSON-RPC error.", hard_fail),
        Tool::new("test.undeclared", "Reads an argument it never declared.", undeclared),
        Tool::new("test.unbounded", "An integer without a range.", unbounded).property(Property::integer("n")),
    ]
}

/// The stock-like device: `serverInfo` `test-board`/`2.4.2`.
pub fn stock_device() -> McpServer<Dev> {
    with_tools(McpServer::new("test-board", "2.4.2", Dev::default()), stock_tools())
}

/// The stock-like device plus the test tools.
pub fn full_device() -> McpServer<Dev> {
    with_tools(stock_device(), test_tools())
}

pub fn with_tools(mut server: McpServer<Dev>, tools: Vec<Tool<Dev>>) -> McpServer<Dev> {
    for t in tools {
        let name = t.name.clone();
        server.add_tool(t).unwrap_or_else(|e| panic!("{name}: {e:?}"));
    }
    server
}

/// Sends `message` and returns the reply, failing the test when there is none.
pub fn reply(server: &mut McpServer<Dev>, message: &str) -> String {
    server.handle(message).unwrap_or_else(|| panic!("no reply to {message}"))
}

/// A `tools/call` request with id 1.
pub fn call_request(name: &str, arguments: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"{name}","arguments":{arguments}}}}}"#)
}

/// The reply to a `tools/call` with id 1.
pub fn call(server: &mut McpServer<Dev>, name: &str, arguments: &str) -> String {
    reply(server, &call_request(name, arguments))
}

/// The reply text a successful call with id 1 gets when its result is one text block.
pub fn text_result(text: &str) -> String {
    let mut literal = String::new();
    mcp_device::push_str_literal(&mut literal, text);
    format!(r#"{{"jsonrpc":"2.0","id":1,"result":{{"content":[{{"type":"text","text":{literal}}}],"isError":false}}}}"#)
}

/// The reply text of a JSON-RPC error with id 1 and no `data`.
pub fn error_reply(code: i64, message: &str) -> String {
    let mut literal = String::new();
    mcp_device::push_str_literal(&mut literal, message);
    format!(r#"{{"jsonrpc":"2.0","id":1,"error":{{"code":{code},"message":{literal}}}}}"#)
}

/// The reply text of a -32602 argument error with id 1 and `data.argument`.
pub fn argument_error(message: &str, argument: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":1,"error":{{"code":-32602,"message":"{message}","data":{{"argument":"{argument}"}}}}}}"#)
}

/// The `result` text of a reply (everything between `"result":` and the closing brace), checked
/// to be the reply of request `id`.
pub fn result_text<'a>(reply: &'a str, id: &str) -> &'a str {
    let head = format!(r#"{{"jsonrpc":"2.0","id":{id},"result":"#);
    assert!(reply.starts_with(&head), "not a result reply for id {id}: {reply}");
    assert!(reply.ends_with('}'), "{reply}");
    &reply[head.len()..reply.len() - 1]
}

/// Parses a reply, failing the test if it is not JSON.
pub fn parse(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("reply is not JSON ({e}): {text}"))
}

/// A `tools/list` request.
pub fn list_request(id: u32, cursor: &str, with_user_tools: bool) -> String {
    let mut c = String::new();
    mcp_device::push_str_literal(&mut c, cursor);
    format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/list","params":{{"cursor":{c},"withUserTools":{with_user_tools}}}}}"#)
}

/// The JSON text `tools/list` shows for a tool.
pub fn tool_json<S>(tool: &Tool<S>) -> String {
    let mut s = String::new();
    tool.push_json(&mut s);
    s
}

/// Follows `nextCursor` from `""` and returns every page's result text.
pub fn all_pages<S>(server: &mut McpServer<S>, with_user_tools: bool) -> Vec<String> {
    let mut pages = Vec::new();
    let mut cursor = String::new();
    let bound = server.tools().len() + 1;
    for id in 1.. {
        assert!(id as usize <= bound, "paging did not terminate after {bound} pages");
        let r = server.handle(&list_request(id, &cursor, with_user_tools)).expect("tools/list is answered");
        let result = result_text(&r, &id.to_string()).to_string();
        let next = parse(&result).get("nextCursor").map(|c| c.as_str().expect("nextCursor is a string").to_string());
        pages.push(result);
        match next {
            Some(c) => cursor = c,
            None => return pages,
        }
    }
    unreachable!()
}

fn device_status(s: &mut Dev, _: &mut Call<'_>) -> Result<ToolOutput, ToolError> {
    s.calls += 1;
    // Keys in sorted order, so the text is the same whatever serde_json's map implementation.
    Ok(ToolOutput::json(&serde_json::json!({
        "audio_speaker": {"volume": s.volume},
        "screen": {"theme": s.theme},
    })))
}

fn set_volume(s: &mut Dev, call: &mut Call<'_>) -> Result<ToolOutput, ToolError> {
    s.calls += 1;
    let new = call.args.int("volume")?;
    let old = core::mem::replace(&mut s.volume, new);
    if old != new {
        call.outbox.state_changed("audio_speaker.volume", old.into(), new.into());
    }
    Ok(true.into())
}

fn set_theme(s: &mut Dev, call: &mut Call<'_>) -> Result<ToolOutput, ToolError> {
    s.calls += 1;
    let theme = call.args.str("theme")?;
    if theme != "light" && theme != "dark" {
        return Ok(false.into());
    }
    s.theme = theme.into();
    Ok(true.into())
}

fn otto_action(s: &mut Dev, call: &mut Call<'_>) -> Result<ToolOutput, ToolError> {
    s.calls += 1;
    let a = &call.args;
    Ok(ToolOutput::text(format!(
        "{} steps={} speed={} direction={} amount={} arm_swing={}",
        a.str("action")?,
        a.int("steps")?,
        a.int("speed")?,
        a.int("direction")?,
        a.int("amount")?,
        a.int("arm_swing")?,
    )))
}

fn system_info(s: &mut Dev, _: &mut Call<'_>) -> Result<ToolOutput, ToolError> {
    s.calls += 1;
    Ok(ToolOutput::json(&serde_json::json!({"chip_model_name": "esp32c3", "version": 2})))
}

fn reboot(s: &mut Dev, _: &mut Call<'_>) -> Result<ToolOutput, ToolError> {
    s.calls += 1;
    s.rebooted = true;
    Ok(true.into())
}

fn count(s: &mut Dev, _: &mut Call<'_>) -> Result<ToolOutput, ToolError> {
    s.calls += 1;
    Ok(i64::from(s.calls - 1).into())
}

fn flag(s: &mut Dev, call: &mut Call<'_>) -> Result<ToolOutput, ToolError> {
    s.calls += 1;
    Ok(call.args.bool("enable")?.into())
}

fn echo(s: &mut Dev, call: &mut Call<'_>) -> Result<ToolOutput, ToolError> {
    s.calls += 1;
    Ok(call.args.str("text")?.into())
}

fn image(s: &mut Dev, _: &mut Call<'_>) -> Result<ToolOutput, ToolError> {
    s.calls += 1;
    Ok(ToolOutput::text("a red dot")
        .with(Content::Image { data: "iVBORw0KGgo=".into(), mime_type: "image/png".into() }))
}

fn audio(s: &mut Dev, _: &mut Call<'_>) -> Result<ToolOutput, ToolError> {
    s.calls += 1;
    Ok(ToolOutput { content: vec![Content::Audio { data: "T2dnUw==".into(), mime_type: "audio/ogg".into() }], is_error: false })
}

fn resource(s: &mut Dev, _: &mut Call<'_>) -> Result<ToolOutput, ToolError> {
    s.calls += 1;
    Ok(ToolOutput {
        content: vec![Content::Resource {
            uri: "file:///log.txt".into(),
            mime_type: "text/plain".into(),
            text: "line \"1\"\nline 2".into(),
        }],
        is_error: false,
    })
}

fn soft_fail(s: &mut Dev, _: &mut Call<'_>) -> Result<ToolOutput, ToolError> {
    s.calls += 1;
    Ok(ToolOutput::error("Motor stalled"))
}

fn hard_fail(s: &mut Dev, _: &mut Call<'_>) -> Result<ToolOutput, ToolError> {
    s.calls += 1;
    Err(ToolError::new("Unexpected status code: 404"))
}

fn undeclared(s: &mut Dev, call: &mut Call<'_>) -> Result<ToolOutput, ToolError> {
    s.calls += 1;
    Ok(call.args.int("nope")?.into())
}

fn unbounded(s: &mut Dev, call: &mut Call<'_>) -> Result<ToolOutput, ToolError> {
    s.calls += 1;
    match call.args.get("n") {
        Some(ArgValue::Int(n)) => Ok((*n).into()),
        other => Err(ToolError::new(format!("unexpected {other:?}"))),
    }
}
