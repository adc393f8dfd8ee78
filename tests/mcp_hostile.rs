//! Issue 22 items 7, 9 and 12: what a hostile MCP client or device can make the bridge hold or
//! do, over the hub's real listeners. Each peer is a raw socket from its own loopback address
//! (127.0.0.2, 127.0.0.3 …); every wait polls for a condition with a deadline.

mod common;

use std::time::Duration;

use common::HubProcess;
use common::raw_http::{self, MCP_HEADERS, addr_of, initialize, request};

const DEADLINE: Duration = Duration::from_secs(20);

/// Polls `check` until it is true, or fails with `what` after [`DEADLINE`].
async fn eventually<F: std::future::Future<Output = bool>>(what: &str, mut check: impl FnMut() -> F) {
    let until = tokio::time::Instant::now() + DEADLINE;
    while !check().await {
        assert!(tokio::time::Instant::now() < until, "not within {DEADLINE:?}: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// An `initialize` on `/mcp` from `from`: the answer.
async fn open_session(hub: &HubProcess, from: &str, path: &str, id: u32) -> raw_http::Answer {
    request(from, addr_of(&hub.host_url), "POST", path, &MCP_HEADERS, &initialize(id)).await
}

#[tokio::test]
async fn mcp_sessions_are_capped_per_peer_and_in_total_and_come_back_when_they_end() {
    let hub = HubProcess::start_capturing(&["--mcp-max-sessions", "6", "--mcp-max-sessions-per-peer", "4"], &[]).await;
    let _sim = common::spawn_mcpdev(&["sim", "--url", &hub.device_url, "--device-id", "02:00:00:00:00:31"], &[]);
    let out = common::mcpdev(&hub, &["tools", "list", "-d", "02:00:00:00:00:31", "--wait", "20s", "--json"]).await;
    assert_eq!(out.code, 0, "{out:?}");
    let to = addr_of(&hub.host_url);

    // The flooding peer: its cap, then a refusal that says what was wrong and answers its id.
    let mut sessions = Vec::new();
    for (i, path) in ["/mcp", "/mcp", "/devices/02:00:00:00:00:31/mcp", "/mcp"].into_iter().enumerate() {
        let a = open_session(&hub, "127.0.0.2", path, i as u32).await;
        assert_eq!(a.status, 200, "{a:?}");
        sessions.push((path, a.header("mcp-session-id").expect("a session id").to_string()));
    }
    for (id, path) in [(40, "/mcp"), (41, "/devices/02:00:00:00:00:31/mcp"), (42, "/mcp")] {
        let a = open_session(&hub, "127.0.0.2", path, id).await;
        assert_eq!(a.status, 503, "{a:?}");
        assert_eq!(a.header("retry-after"), Some("5"));
        let error = a.json();
        assert_eq!(error["id"], id, "{error}");
        assert_eq!(error["error"]["code"], -32000);
        let message = error["error"]["message"].as_str().unwrap();
        assert!(message.contains("from 127.0.0.2") && message.contains("--mcp-max-sessions-per-peer 4"), "{message}");
    }
    // The legacy SSE transport counts the same.
    let refused = request("127.0.0.2", to, "GET", "/sse", &[("Accept", "text/event-stream")], "").await;
    assert_eq!(refused.status, 503, "{refused:?}");

    // Another peer still gets in, up to the total; an SSE stream holds a session while open.
    let a = open_session(&hub, "127.0.0.3", "/mcp", 1).await;
    assert_eq!(a.status, 200, "{a:?}");
    let mut sse = raw_http::connect_from("127.0.0.3", to).await;
    raw_http::send(&mut sse, "GET", "/sse", &[("Accept", "text/event-stream")], "").await;
    assert_eq!(raw_http::read_head(&mut sse).await.0, 200);
    let a = open_session(&hub, "127.0.0.1", "/mcp", 7).await;
    assert_eq!(a.status, 503, "{a:?}");
    assert!(a.json()["error"]["message"].as_str().unwrap().contains("--mcp-max-sessions 6"), "{a:?}");

    // Sessions that end give their place back: a DELETE, and a closed SSE stream.
    let (path, id) = sessions.pop().unwrap();
    let gone = request("127.0.0.2", to, "DELETE", path, &[("Mcp-Session-Id", &id)], "").await;
    assert!(gone.status == 204 || gone.status == 200, "{gone:?}");
    eventually("a deleted session's place is free for another peer", || async { open_session(&hub, "127.0.0.1", "/mcp", 8).await.status == 200 }).await;
    drop(sse);
    eventually("a closed SSE stream's place is free", || async { open_session(&hub, "127.0.0.4", "/mcp", 9).await.status == 200 }).await;
    // The sessions that stayed still work.
    let (path, id) = &sessions[0];
    let list = request("127.0.0.2", to, "POST", path, &[MCP_HEADERS[0], MCP_HEADERS[1], ("Mcp-Session-Id", id)], r#"{"jsonrpc":"2.0","id":3,"method":"tools/list"}"#).await;
    assert_eq!(list.status, 200, "{list:?}");
    assert!(list.json()["result"]["tools"].as_array().is_some_and(|t| !t.is_empty()), "{list:?}");

    // Every refusal was logged, rate-limited: one line for this burst, not one each.
    let log = hub.stderr.as_ref().unwrap().lock().unwrap().clone();
    let lines = log.lines().filter(|l| l.contains("MCP session refused")).count();
    assert!((1..=2).contains(&lines), "refusals logged {lines} times:\n{log}");
}
