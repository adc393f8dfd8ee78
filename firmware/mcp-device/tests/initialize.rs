//! `initialize` and `ping`, and the echo of request ids.

mod common;

use common::{parse, reply, stock_device};
use mcp_device::{McpServer, PROTOCOL_VERSION, Vision};

const INIT_REPLY: &str = r#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2024-11-05","capabilities":{"tools":{}},"serverInfo":{"name":"test-board","version":"2.4.2"}}}"#;

#[test]
fn initialize_answers_the_fixed_protocol_version_and_server_info() {
    let mut d = stock_device();
    let r = reply(&mut d, r#"{"jsonrpc":"2.0","method":"initialize","id":1,"params":{"protocolVersion":"2025-06-18","capabilities":{}}}"#);
    assert_eq!(r, INIT_REPLY);
    assert_eq!(PROTOCOL_VERSION, "2024-11-05");
    assert_eq!(d.vision(), None);
}

#[test]
fn initialize_without_params_is_answered() {
    let mut d = stock_device();
    assert_eq!(reply(&mut d, r#"{"jsonrpc":"2.0","method":"initialize","id":1}"#), INIT_REPLY);
}

#[test]
fn initialize_keeps_the_vision_url_and_token() {
    let mut d = stock_device();
    let r = reply(
        &mut d,
        r#"{"jsonrpc":"2.0","method":"initialize","id":1,"params":{"capabilities":{"vision":{"url":"https://v.example/explain","token":"t"}}}}"#,
    );
    assert_eq!(r, INIT_REPLY, "vision does not change the reply");
    assert_eq!(d.vision(), Some(&Vision { url: "https://v.example/explain".into(), token: "t".into() }));

    // A later initialize with another vision replaces it; one without a token keeps an empty one.
    reply(&mut d, r#"{"jsonrpc":"2.0","method":"initialize","id":2,"params":{"capabilities":{"vision":{"url":"http://other/"}}}}"#);
    assert_eq!(d.vision(), Some(&Vision { url: "http://other/".into(), token: String::new() }));

    // A vision without a string url is not a vision setting: the previous one stays.
    reply(&mut d, r#"{"jsonrpc":"2.0","method":"initialize","id":3,"params":{"capabilities":{"vision":{"url":5,"token":"x"}}}}"#);
    assert_eq!(d.vision(), Some(&Vision { url: "http://other/".into(), token: String::new() }));
}

#[test]
fn server_info_is_escaped() {
    let mut d = McpServer::new("board \"q\" \\ x", "1.0\n", ());
    let r = d.handle(r#"{"jsonrpc":"2.0","method":"initialize","id":1}"#).unwrap();
    assert_eq!(
        r,
        r#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2024-11-05","capabilities":{"tools":{}},"serverInfo":{"name":"board \"q\" \\ x","version":"1.0\n"}}}"#
    );
    let v = parse(&r);
    assert_eq!(v["result"]["serverInfo"]["name"], "board \"q\" \\ x");
    assert_eq!(v["result"]["serverInfo"]["version"], "1.0\n");
}

#[test]
fn ping_answers_an_empty_result() {
    let mut d = stock_device();
    assert_eq!(reply(&mut d, r#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#), r#"{"jsonrpc":"2.0","id":7,"result":{}}"#);
    assert_eq!(
        reply(&mut d, r#"{"jsonrpc":"2.0","id":"p","method":"ping","params":{}}"#),
        r#"{"jsonrpc":"2.0","id":"p","result":{}}"#
    );
}

#[test]
fn numeric_ids_are_echoed_exactly() {
    let mut d = stock_device();
    for id in ["0", "1", "-5", "2147483647", "2147483648", "9007199254740993", "18446744073709551615", "-9223372036854775808", "1.5"] {
        let r = reply(&mut d, &format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#));
        assert_eq!(r, format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{}}}}"#));
    }
}

#[test]
fn string_ids_are_echoed_exactly() {
    let mut d = stock_device();
    for id in [r#""""#, r#""abc""#, r#""42""#, r#""a\"b\\c""#, r#""\u00e9\n""#] {
        let r = reply(&mut d, &format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#));
        let want: serde_json::Value = serde_json::from_str(id).unwrap();
        assert_eq!(parse(&r)["id"], want, "{r}");
        assert_eq!(parse(&r)["result"], serde_json::json!({}));
    }
    // Escaping is JSON's minimal form: quotes and backslashes escaped, non-ASCII kept as is.
    let r = reply(&mut d, r#"{"jsonrpc":"2.0","id":"a\"b\\c\u00e9","method":"ping"}"#);
    assert_eq!(r, "{\"jsonrpc\":\"2.0\",\"id\":\"a\\\"b\\\\cé\",\"result\":{}}");
}

#[test]
fn key_order_of_the_request_does_not_matter() {
    let mut d = stock_device();
    let r = reply(&mut d, r#"{"params":{},"id":1,"method":"initialize","jsonrpc":"2.0"}"#);
    assert_eq!(r, INIT_REPLY);
}
