//! `/mcp` tool calls on a session, answered by the bridge's direct path: what an MCP client gets
//! must be what rmcp would have answered, the device must get the same request, and what the
//! direct path does not take (unknown sessions, unknown tools, large bodies) must still get
//! rmcp's answers. Requests are sent as raw HTTP (reqwest) so their headers and bodies are the
//! test's to choose; the real SDK clients are in `interop_mcp_sdk`.

mod common;

use common::HubProcess;
use common::fake_device::{FakeDevice, tool};
use common::ws::DEADLINE;
use serde_json::{Value, json};

const ACCEPT: &str = "application/json, text/event-stream";
/// The same media types, with a quality value: rmcp takes these, the direct path leaves them.
const ACCEPT_VIA_RMCP: &str = "application/json;q=1, text/event-stream;q=1";

struct Answer {
    status: u16,
    content_type: String,
    /// The JSON-RPC message (from the JSON body, or the SSE event that carries it).
    message: Value,
}

struct Session {
    http: reqwest::Client,
    url: String,
    id: String,
}

impl Session {
    async fn open(hub: &HubProcess) -> Self {
        mcpdev::tls::install_crypto_provider();
        let http = reqwest::Client::new();
        let url = format!("{}/mcp", hub.host_url);
        let init = json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}});
        let resp = http.post(&url).header("accept", ACCEPT).json(&init).send().await.unwrap();
        assert_eq!(resp.status(), 200);
        let id = resp.headers()["mcp-session-id"].to_str().unwrap().to_string();
        let mut session = Self { http, url, id };
        let initialized = session.post(ACCEPT, &json!({"jsonrpc":"2.0","method":"notifications/initialized"})).await;
        assert_eq!(initialized.status, 202);
        session
    }

    async fn post(&mut self, accept: &str, body: &Value) -> Answer {
        let resp = self.http.post(&self.url).header("accept", accept).header("mcp-session-id", &self.id).json(body).send().await.unwrap();
        answer(resp).await
    }

    async fn call(&mut self, accept: &str, id: u64, name: &str, arguments: Value) -> Answer {
        self.post(accept, &json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":name,"arguments":arguments}})).await
    }
}

async fn answer(resp: reqwest::Response) -> Answer {
    let status = resp.status().as_u16();
    let content_type = resp.headers().get("content-type").map(|v| v.to_str().unwrap().to_string()).unwrap_or_default();
    let text = tokio::time::timeout(DEADLINE, resp.text()).await.expect("the answer did not end in time").unwrap();
    let message = if content_type.starts_with("text/event-stream") {
        text.lines().filter_map(|l| l.strip_prefix("data:")).filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok()).find(|m| m.get("id").is_some()).unwrap_or(Value::Null)
    } else {
        serde_json::from_str(&text).unwrap_or(Value::String(text))
    };
    Answer { status, content_type, message }
}

async fn hub_with_lamp() -> (HubProcess, FakeDevice) {
    hub_with_lamp_env(&[]).await
}

async fn hub_with_lamp_env(env: &[(&str, &str)]) -> (HubProcess, FakeDevice) {
    let hub = HubProcess::start(&["--mcp-timeout", "30"], env).await;
    let device = FakeDevice::connect(&hub.device_url, "02:00:00:00:00:0a", vec![tool("lamp.set")]).await;
    (hub, device)
}

const LAMP: &str = "dev-02000000000a.lamp.set";

/// Calls through both paths, the device answering each with `reply` (or nothing when the
/// arguments are refused); returns the two JSON-RPC results.
async fn both_ways(session: &mut Session, device: &mut FakeDevice, arguments: Value, reply: Option<Value>) -> (Value, Value) {
    let mut results = Vec::new();
    for (n, accept) in [(1, ACCEPT), (2, ACCEPT_VIA_RMCP)] {
        let call = session.call(accept, n, LAMP, arguments.clone());
        let answered = match &reply {
            None => call.await,
            Some(reply) => {
                let (answered, ()) = tokio::join!(call, async {
                    let request = device.recv_request("tools/call").await;
                    assert_eq!(request["params"], json!({"name": "lamp.set", "arguments": arguments}));
                    let sid = device.session_id.clone();
                    let mut payload = json!({"jsonrpc":"2.0","id":request["id"]});
                    payload.as_object_mut().unwrap().extend(reply.as_object().unwrap().clone());
                    device.send(json!({"session_id": sid, "type":"mcp","payload": payload})).await;
                });
                answered
            }
        };
        assert_eq!(answered.status, 200);
        let expected_type = if accept == ACCEPT { "application/json" } else { "text/event-stream" };
        assert!(answered.content_type.starts_with(expected_type), "{} for {accept}", answered.content_type);
        assert_eq!(answered.message["id"], n);
        results.push(answered.message);
    }
    let via_rmcp = results.pop().unwrap();
    let direct = results.pop().unwrap();
    (direct, via_rmcp)
}

#[tokio::test]
async fn a_sessions_tool_call_is_answered_directly_as_rmcp_answers_it() {
    let (hub, mut device) = hub_with_lamp().await;
    let mut session = Session::open(&hub).await;
    // The first call after rmcp last served the session is taken directly.
    let ok = json!({"result": {"content": [{"type": "text", "text": "lamp at 5"}]}});
    let (direct, via_rmcp) = both_ways(&mut session, &mut device, json!({"n": 5}), Some(ok)).await;
    // The hub names the device that answered in `_meta` (issue 33), on both paths alike.
    assert_eq!(direct["result"], json!({"content": [{"type": "text", "text": "lamp at 5"}], "isError": false, "_meta": {"mcpdev/device_id": "02:00:00:00:00:0a"}}));
    assert_eq!(direct["result"], via_rmcp["result"]);
    // The stock firmware's image shape, normalised the same way.
    let image = json!({"result": {"content": [{"type": "image", "image": "{\"mimeType\":\"image/png\",\"data\":\"iVBO\"}"}]}});
    let (direct, via_rmcp) = both_ways(&mut session, &mut device, json!({"n": 6}), Some(image)).await;
    assert_eq!(direct["result"]["content"], json!([{"type": "image", "mimeType": "image/png", "data": "iVBO"}]));
    assert_eq!(direct["result"], via_rmcp["result"]);
    // A device's error.
    let failed = json!({"error": {"code": -32000, "message": "the lamp is broken"}});
    let (direct, via_rmcp) = both_ways(&mut session, &mut device, json!({"n": 7}), Some(failed)).await;
    assert_eq!(direct["result"]["isError"], true);
    assert!(direct["result"]["content"][0]["text"].as_str().unwrap().contains("the lamp is broken"), "{direct}");
    assert_eq!(direct["result"], via_rmcp["result"]);
    // Arguments its schema refuses: the same tool error, and nothing sent to the device (its
    // next request is the next call's).
    let (direct, via_rmcp) = both_ways(&mut session, &mut device, json!({"n": 500}), None).await;
    assert_eq!(direct["result"]["isError"], true);
    assert!(direct["result"]["content"][0]["text"].as_str().unwrap().starts_with("invalid arguments, nothing was sent"), "{direct}");
    assert_eq!(direct["result"], via_rmcp["result"]);
    let ok = json!({"result": {"content": []}});
    let (direct, _) = both_ways(&mut session, &mut device, json!({"n": 8}), Some(ok)).await;
    assert_eq!(direct["result"], json!({"content": [], "isError": false, "_meta": {"mcpdev/device_id": "02:00:00:00:00:0a"}}));
    // A result that is no result shape at all (a string, a number): passed on as text, by both
    // paths, and the session goes on.
    for (n, odd) in [(9, json!("done")), (10, json!(5)), (11, json!([]))] {
        let (direct, via_rmcp) = both_ways(&mut session, &mut device, json!({"n": n}), Some(json!({"result": odd}))).await;
        assert_eq!(direct["result"], json!({"content": [{"type": "text", "text": odd.to_string()}], "isError": false, "_meta": {"mcpdev/device_id": "02:00:00:00:00:0a"}}), "{odd}");
        assert_eq!(direct["result"], via_rmcp["result"]);
    }
}

#[tokio::test]
async fn what_the_direct_path_does_not_take_gets_rmcps_answers() {
    let (hub, mut device) = hub_with_lamp().await;
    let mut session = Session::open(&hub).await;
    // An unknown tool: rmcp's JSON-RPC error.
    let unknown = session.call(ACCEPT, 1, "dev-02000000000a.nope", json!({})).await;
    assert!(unknown.content_type.starts_with("text/event-stream"), "{}", unknown.content_type);
    assert_eq!(unknown.message["error"]["code"], -32602, "{}", unknown.message);
    // The hub's own tool.
    let listed = session.call(ACCEPT, 2, "list_devices", json!({})).await;
    assert!(listed.content_type.starts_with("text/event-stream"));
    assert!(listed.message["result"]["content"][0]["text"].as_str().unwrap().contains("02:00:00:00:00:0a"), "{}", listed.message);
    // A body over the direct path's 64 KiB: rmcp's, and the call still reaches the device.
    let pad = "x".repeat(70 * 1024);
    let (big, ()) = tokio::join!(session.call(ACCEPT, 3, LAMP, json!({"n": 1, "pad": pad})), async {
        let request = device.recv_request("tools/call").await;
        assert_eq!(request["params"]["arguments"]["pad"].as_str().map(str::len), Some(70 * 1024));
        device.reply(&request["id"], json!({"content": []})).await;
    });
    assert!(big.content_type.starts_with("text/event-stream"));
    assert_eq!(big.message["result"]["isError"], false);
    // A session rmcp does not hold, and one ended by DELETE: 404, as rmcp answers them.
    let mut stranger = Session { http: session.http.clone(), url: session.url.clone(), id: "not-a-session".into() };
    assert_eq!(stranger.call(ACCEPT, 4, LAMP, json!({"n": 1})).await.status, 404);
    let deleted = session.http.delete(&session.url).header("mcp-session-id", &session.id).send().await.unwrap();
    assert_eq!(deleted.status(), 204);
    assert_eq!(session.call(ACCEPT, 5, LAMP, json!({"n": 1})).await.status, 404);
    // No session at all: rmcp's refusal, not a call.
    let bare = session.http.post(&session.url).header("accept", ACCEPT).json(&json!({"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":LAMP,"arguments":{"n":1}}})).send().await.unwrap();
    assert_eq!(bare.status(), 400);
}

#[tokio::test]
async fn a_call_in_flight_ends_when_the_client_cancels_it() {
    let (hub, mut device) = hub_with_lamp().await;
    let mut session = Session::open(&hub).await;
    let mut canceller = Session { http: session.http.clone(), url: session.url.clone(), id: session.id.clone() };
    let (cancelled, late) = tokio::join!(session.call(ACCEPT, 41, LAMP, json!({"n": 1})), async {
        // The call has reached the device, which does not answer; the client gives up on it.
        let request = device.recv_request("tools/call").await;
        let sent = canceller.post(ACCEPT, &json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":41,"reason":"user"}})).await;
        assert_eq!(sent.status, 202);
        request
    });
    assert!(cancelled.content_type.starts_with("application/json"));
    assert_eq!(cancelled.message["id"], 41);
    assert_eq!(cancelled.message["error"]["message"], "cancelled by the client", "{}", cancelled.message);
    // The device's late answer is dropped, and the next call works.
    device.reply(&late["id"], json!({"content": [{"type": "text", "text": "late"}]})).await;
    let (next, ()) = tokio::join!(session.call(ACCEPT, 42, LAMP, json!({"n": 2})), async {
        let request = device.recv_request("tools/call").await;
        device.reply(&request["id"], json!({"content": [{"type": "text", "text": "on time"}]})).await;
    });
    assert_eq!(next.message["result"]["content"][0]["text"], "on time");
    // A cancellation naming no call in flight goes to rmcp, which accepts it too.
    let stray = session.post(ACCEPT, &json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":41}})).await;
    assert_eq!(stray.status, 202);
}

#[tokio::test]
async fn a_call_whose_body_never_completes_is_cut_off_and_stalls_nobody() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (hub, mut device) = hub_with_lamp_env(&[("MCPDEV_BODY_TIMEOUT", "1s")]).await;
    let mut session = Session::open(&hub).await;
    // A call on a live session (so the direct path reads its body) that sends 1 byte of 100.
    let addr = hub.host_url.trim_start_matches("http://").to_string();
    let mut slow = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nAccept: {ACCEPT}\r\nContent-Type: application/json\r\nMcp-Session-Id: {}\r\nContent-Length: 100\r\n\r\n{{",
        session.id
    );
    slow.write_all(head.as_bytes()).await.unwrap();
    // Meanwhile the same session's calls are answered.
    let (answered, ()) = tokio::join!(session.call(ACCEPT, 1, LAMP, json!({"n": 3})), async {
        let request = device.recv_request("tools/call").await;
        device.reply(&request["id"], json!({"content": []})).await;
    });
    assert_eq!(answered.message["result"]["isError"], false);
    // The slow one is refused once the body deadline passes, with a reason, not left hanging.
    let mut got = Vec::new();
    let _ = tokio::time::timeout(DEADLINE, slow.read_to_end(&mut got)).await.expect("the slow call was never ended");
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with("HTTP/1.1 400") && text.contains("the request body could not be read"), "{text}");
}

/// rmcp's client sends a `progressToken` with every request. A call answered before its first
/// report is answered alone, as one JSON body, as without a token (before, every such call went
/// through rmcp as an event stream of its stages, at three times the hub's CPU). With the wait
/// for reports at a minute, no load turns this one into a stream.
#[tokio::test]
async fn a_call_with_a_progress_token_answered_before_its_first_report_is_one_json_body() {
    let hub = HubProcess::start(&["--mcp-timeout", "30", "--mcp-progress-after", "60s"], &[]).await;
    let mut device = FakeDevice::connect(&hub.device_url, "02:00:00:00:00:0a", vec![tool("lamp.set")]).await;
    let mut session = Session::open(&hub).await;
    for (id, token) in [(1, json!("rmcp-1")), (2, json!(77))] {
        let body = json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":LAMP,"arguments":{"n":id},"_meta":{"progressToken":token}}});
        let (answered, ()) = tokio::join!(session.post(ACCEPT, &body), async {
            let request = device.recv_request("tools/call").await;
            // The device is offered progress under the hub's own token, never the host's.
            let given = request["params"]["_meta"]["progressToken"].as_str().unwrap_or_default().to_string();
            assert!(given.starts_with("mcpdev-"), "{request}");
            device.reply(&request["id"], json!({"content": [{"type": "text", "text": "lit"}]})).await;
        });
        assert!(answered.content_type.starts_with("application/json"), "{}: {}", answered.content_type, answered.message);
        assert_eq!(answered.message["id"], id);
        assert_eq!(answered.message["result"]["content"][0]["text"], "lit");
    }
}

/// A call that waits past `--mcp-progress-after` (here at once) on the direct path: its answer
/// becomes an event stream, "sent to the device" first, the device's own progress relayed on
/// the host's token, "answered by the device", then the answer; a cancelled one ends its stream
/// with the cancellation.
#[tokio::test]
async fn a_call_that_waits_streams_its_stages_then_its_answer_and_can_be_cancelled() {
    let hub = HubProcess::start(&["--mcp-timeout", "30", "--mcp-progress-after", "0s"], &[]).await;
    let mut device = FakeDevice::connect(&hub.device_url, "02:00:00:00:00:0a", vec![tool("lamp.set")]).await;
    let session = Session::open(&hub).await;
    let body = json!({"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":LAMP,"arguments":{"n":1},"_meta":{"progressToken":"host-t"}}});
    let resp = session.http.post(&session.url).header("accept", ACCEPT).header("mcp-session-id", &session.id).json(&body).send().await.unwrap();
    assert!(resp.headers()["content-type"].to_str().unwrap().starts_with("text/event-stream"));
    let request = device.recv_request("tools/call").await;
    let token = request["params"]["_meta"]["progressToken"].clone();
    let sid = device.session_id.clone();
    let note = json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": token, "progress": 1, "total": 2, "message": "half <b>"}});
    device.send(json!({"session_id": sid, "type": "mcp", "payload": note})).await;
    device.reply(&request["id"], json!({"content": [{"type": "text", "text": "lit"}]})).await;
    let text = tokio::time::timeout(DEADLINE, resp.text()).await.expect("the stream ended").unwrap();
    let messages: Vec<Value> = text.lines().filter_map(|l| l.strip_prefix("data:")).filter_map(|d| serde_json::from_str(d.trim()).ok()).collect();
    let (answer, reports) = messages.split_last().expect("messages");
    assert_eq!(answer["id"], 5, "the answer ends the stream: {text}");
    assert_eq!(answer["result"]["content"][0]["text"], "lit");
    assert!(reports.iter().all(|m| m["method"] == "notifications/progress" && m["params"]["progressToken"] == "host-t"), "{text}");
    let said: Vec<&str> = reports.iter().filter_map(|m| m["params"]["message"].as_str()).collect();
    assert_eq!(said.first(), Some(&"sent to the device"), "{text}");
    assert_eq!(said.last(), Some(&"answered by the device"), "{text}");
    assert!(reports.windows(2).all(|w| w[0]["params"]["progress"].as_f64() < w[1]["params"]["progress"].as_f64()), "reports rise: {text}");

    // Cancelled while it streams: the stream ends with the cancellation, and the next call works.
    let mut canceller = Session { http: session.http.clone(), url: session.url.clone(), id: session.id.clone() };
    let body = json!({"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":LAMP,"arguments":{"n":2},"_meta":{"progressToken":"host-u"}}});
    let resp = session.http.post(&session.url).header("accept", ACCEPT).header("mcp-session-id", &session.id).json(&body).send().await.unwrap();
    assert!(resp.headers()["content-type"].to_str().unwrap().starts_with("text/event-stream"));
    device.recv_request("tools/call").await;
    let sent = canceller.post(ACCEPT, &json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":6,"reason":"user"}})).await;
    assert_eq!(sent.status, 202);
    let text = tokio::time::timeout(DEADLINE, resp.text()).await.expect("the stream ended").unwrap();
    let last: Value = text.lines().filter_map(|l| l.strip_prefix("data:")).filter_map(|d| serde_json::from_str(d.trim()).ok()).next_back().expect("a message");
    assert_eq!(last["id"], 6, "{text}");
    assert_eq!(last["error"]["message"], "cancelled by the client", "{text}");
}
