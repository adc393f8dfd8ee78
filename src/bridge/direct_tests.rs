use axum::http::HeaderValue;
use rmcp::transport::streamable_http_server::session::SessionManager;

use super::*;
use crate::hub::{HubConfig, start};
use crate::bridge::sessions::SessionCaps;

fn body(v: serde_json::Value) -> Bytes {
    Bytes::from(v.to_string())
}

fn call_id(b: &Bytes) -> Option<String> {
    match parse(b)? {
        Message::Call { id, .. } => Some(id.get().to_string()),
        Message::Cancel { .. } => None,
    }
}

#[test]
fn plain_tool_calls_are_taken_and_their_name_and_arguments_kept() {
    let b = body(serde_json::json!({"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"dev-1.lamp","arguments":{"on":true},"_meta":{}}}));
    let Some(Message::Call { id, name, arguments, token }) = parse(&b) else { panic!("not taken") };
    assert_eq!(token, None);
    assert_eq!((id.get(), name.as_str()), ("7", "dev-1.lamp"));
    assert_eq!(arguments.unwrap()["on"], true);
    assert_eq!(call_id(&body(serde_json::json!({"jsonrpc":"2.0","id":"a-b","method":"tools/call","params":{"name":"x"}}))).as_deref(), Some("\"a-b\""));
    assert_eq!(call_id(&body(serde_json::json!({"jsonrpc":"2.0","id":-3,"method":"tools/call","params":{"name":"x"}}))).as_deref(), Some("-3"));
}

#[test]
fn a_call_with_a_progress_token_is_taken_with_its_token() {
    for token in [serde_json::json!("p-1"), serde_json::json!(7), serde_json::json!(-7)] {
        let b = body(serde_json::json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":{"progressToken": token}}}));
        let Some(Message::Call { token: taken, .. }) = parse(&b) else { panic!("not taken: {token}") };
        assert_eq!(taken, Some(token));
    }
}

#[test]
fn anything_but_a_plain_tool_call_is_left_to_rmcp() {
    let declined = [
        // no id, a null id, ids that are not a plain integer or a string
        r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"x"}}"#,
        r#"{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"x"}}"#,
        r#"{"jsonrpc":"2.0","id":1.5,"method":"tools/call","params":{"name":"x"}}"#,
        r#"{"jsonrpc":"2.0","id":1e3,"method":"tools/call","params":{"name":"x"}}"#,
        r#"{"jsonrpc":"2.0","id":{"a":1},"method":"tools/call","params":{"name":"x"}}"#,
        r#"{"jsonrpc":"2.0","id":123456789012345678901234,"method":"tools/call","params":{"name":"x"}}"#,
        // other methods, other versions of JSON-RPC, batches
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
        r#"{"jsonrpc":"1.0","id":1,"method":"tools/call","params":{"name":"x"}}"#,
        r#"[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}]"#,
        // params the bridge would not ignore: a task, a progress token that is no string or
        // integer, anything else in `_meta`, a per-request version
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":{"progressToken":1.5}}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":{"progressToken":{"a":1}}}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":{"progressToken":"p","other":1}}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","task":{"ttl":1}}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":7}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":[1]}}"#,
        // duplicate keys, extra members, not JSON, bad UTF-8
        r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"tools/call","params":{"name":"x"}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"},"extra":1}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}"#,
        // a cancellation of a request id no call could have
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1.5}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"notifications/cancelled","params":{"requestId":1}}"#,
    ];
    for text in declined {
        assert!(parse(&Bytes::from(text)).is_none(), "{text}");
    }
    assert!(parse(&Bytes::from_static(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"\xff\"}}")).is_none());
    let cancel = Bytes::from(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"r1","reason":"user"}}"#);
    assert!(matches!(parse(&cancel), Some(Message::Cancel { request_id }) if request_id.get() == "\"r1\""));
}

fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (k, v) in pairs {
        h.append(axum::http::HeaderName::from_bytes(k.as_bytes()).unwrap(), HeaderValue::from_str(v).unwrap());
    }
    h
}

const PLAIN: [(&str, &str); 3] = [("accept", "application/json, text/event-stream"), ("content-type", "application/json"), ("content-length", "100")];

#[test]
fn only_headers_rmcp_accepts_on_a_session_are_taken() {
    assert!(plain_json_headers(&headers(&PLAIN)));
    let with = |name: &str, value: &str| {
        let mut pairs: Vec<(&str, &str)> = PLAIN.iter().copied().filter(|(k, _)| *k != name).collect();
        pairs.push((name, value));
        plain_json_headers(&headers(&pairs))
    };
    assert!(with("accept", "Text/Event-Stream, APPLICATION/JSON"));
    assert!(with("content-type", "application/json; charset=utf-8"));
    assert!(with("mcp-protocol-version", "2025-06-18"));
    assert!(with("mcp-protocol-version", "2024-11-05"));
    // rmcp's to answer (406, 415, 400, 413, or its stateless path)
    assert!(!with("accept", "application/json"));
    assert!(!with("accept", "text/event-stream"));
    assert!(!with("accept", "application/json, text/event-stream;q=0"));
    assert!(!with("content-type", "text/plain"));
    assert!(!with("content-length", "65537"));
    assert!(!with("content-length", "many"));
    assert!(!with("mcp-protocol-version", "2026-07-28"));
    assert!(!with("mcp-protocol-version", "1999-01-01"));
    let chunked: Vec<_> = PLAIN.iter().copied().filter(|(k, _)| *k != "content-length").collect();
    assert!(!plain_json_headers(&headers(&chunked)));
}

async fn direct(sessions: Arc<LocalSessionManager>) -> Direct {
    let config = HubConfig { device_addr: "127.0.0.1:0".parse().unwrap(), host_addr: "127.0.0.1:0".parse().unwrap(), ..Default::default() };
    let running = start(config).await.unwrap();
    let shared = Arc::new(Shared { hub: running.hub.clone(), config: Default::default(), notifier: Default::default(), catalogues: Default::default(), sessions: SessionCaps::new(8, 8), fleet: Arc::new(crate::bridge::fleet::Fleet::new(32)), tasks: crate::bridge::tasks::Tasks::new(Default::default()), task_peers: Default::default() });
    Direct::new(shared, Scope::All, sessions)
}

#[tokio::test]
async fn only_sessions_rmcp_holds_and_served_lately_are_answered_here() {
    let sessions = Arc::new(LocalSessionManager::default());
    let (id, _transport) = sessions.create_session().await.unwrap();
    let mut direct = direct(sessions.clone()).await;
    let on = |session: &str| {
        let mut h = headers(&PLAIN);
        h.insert("mcp-session-id", HeaderValue::from_str(session).unwrap());
        h
    };
    // Until rmcp has served the session once, its worker's keep-alive is rmcp's to start.
    assert!(direct.session_of(&Method::POST, &on(&id)).await.is_none());
    direct.served_by_rmcp(&HeaderValue::from_str(&id).unwrap());
    assert_eq!(direct.session_of(&Method::POST, &on(&id)).await.as_deref(), Some(&*id));
    assert!(direct.session_of(&Method::GET, &on(&id)).await.is_none());
    // A session rmcp does not hold (never had, or ended) is not, whatever was noted of it.
    direct.served_by_rmcp(&HeaderValue::from_static("not-a-session"));
    assert!(direct.session_of(&Method::POST, &on("not-a-session")).await.is_none());
    // Past half the keep-alive, the next call goes through rmcp, which keeps the session alive.
    direct.fresh_for = Duration::ZERO;
    assert!(direct.session_of(&Method::POST, &on(&id)).await.is_none());
}

#[tokio::test]
async fn the_table_of_served_sessions_forgets_ended_ones() {
    let mut direct = direct(Arc::new(LocalSessionManager::default())).await;
    direct.fresh_for = Duration::ZERO;
    for i in 0..10_000 {
        direct.served_by_rmcp(&HeaderValue::from_str(&format!("session-{i}")).unwrap());
    }
    assert!(lock(&direct.served).at.len() <= 1024, "{}", lock(&direct.served).at.len());
}
