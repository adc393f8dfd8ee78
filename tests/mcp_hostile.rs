//! Issue 22 items 7, 9 and 12: what a hostile MCP client or device can make the bridge hold or
//! do, over the hub's real listeners. Each peer is a raw socket from its own loopback address
//! (127.0.0.2, 127.0.0.3 …); every wait polls for a condition with a deadline.

mod common;

use std::time::Duration;

use common::HubProcess;
use common::raw_http::{self, MCP_HEADERS, addr_of, initialize, request};
use serde_json::json;

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

/// Issue 36 (sessions a host never ends): when a cap is full, a new session takes the place of
/// the least recently used session its host left idle, instead of being refused; a session in
/// use (a request or a GET stream open) and another peer's sessions are never taken. The
/// reclaimed session's host gets 404 (start a new session); every reclaim is counted.
#[tokio::test]
async fn a_full_cap_reclaims_the_least_recently_used_idle_session_and_keeps_those_in_use() {
    // `--mcp-reclaim-idle 0s`: any session not in use is reclaimable, so the order is the test.
    let hub = HubProcess::start_capturing(&["--mcp-max-sessions-per-peer", "3", "--mcp-reclaim-idle", "0s"], &[]).await;
    let to = addr_of(&hub.host_url);
    let list = |id: &str| {
        let id = id.to_string();
        async move {
            request("127.0.0.2", to, "POST", "/mcp", &[MCP_HEADERS[0], MCP_HEADERS[1], ("Mcp-Session-Id", &id)], r#"{"jsonrpc":"2.0","id":3,"method":"tools/list"}"#).await.status
        }
    };
    let hub_ref = &hub;
    let open = |from: &'static str, n: u32| async move {
        let a = open_session(hub_ref, from, "/mcp", n).await;
        assert_eq!(a.status, 200, "{a:?}");
        a.header("mcp-session-id").expect("a session id").to_string()
    };
    let other = open("127.0.0.3", 1).await;
    let (a, b, c) = (open("127.0.0.2", 1).await, open("127.0.0.2", 2).await, open("127.0.0.2", 3).await);
    // C's host listens on its GET stream (in use); A's host makes a request (used after B).
    let mut stream = raw_http::connect_from("127.0.0.2", to).await;
    raw_http::send(&mut stream, "GET", "/mcp", &[("Accept", "text/event-stream"), ("Mcp-Session-Id", &c)], "").await;
    assert_eq!(raw_http::read_head(&mut stream).await.0, 200);
    assert_eq!(list(&a).await, 200);

    // A fourth session of the peer: B, idle longest and not in use, makes room.
    let d = open("127.0.0.2", 4).await;
    eventually("the reclaimed session is gone for its host", || async { list(&b).await == 404 }).await;
    assert_eq!(list(&a).await, 200, "a session used more recently is kept");
    assert_eq!(list(&d).await, 200);
    let theirs = request("127.0.0.3", to, "POST", "/mcp", &[MCP_HEADERS[0], MCP_HEADERS[1], ("Mcp-Session-Id", &other)], r#"{"jsonrpc":"2.0","id":3,"method":"tools/list"}"#).await;
    assert_eq!(theirs.status, 200, "another peer's session is never taken for this peer's cap: {theirs:?}");
    // C's stream was never cut: the hub still writes to it (a keepalive or an event) and the
    // session answers.
    assert_eq!(list(&c).await, 200, "a session with its GET stream open is in use, never reclaimed");
    drop(stream);

    // Counted and logged.
    let port = hub.host_url.rsplit(':').next().unwrap();
    let token = std::fs::read_to_string(std::path::Path::new(&hub.runtime_dir).join(format!("control-{port}.token"))).unwrap();
    let metrics = request("127.0.0.1", to, "GET", "/metrics", &[("Authorization", &format!("Bearer {}", token.trim()))], "").await;
    assert!(metrics.body.contains("mcpdev_mcp_sessions_reclaimed_total 1"), "{}", metrics.body);
    let log = hub.stderr.as_ref().unwrap().lock().unwrap().clone();
    assert!(log.contains("MCP session reclaimed"), "{log}");
}

/// A legacy SSE session (`GET /sse`), read as raw bytes: what the hub sent on its stream.
struct SseSession {
    tcp: tokio::net::TcpStream,
    from: &'static str,
    to: std::net::SocketAddr,
    post_path: String,
    seen: String,
}

impl SseSession {
    /// Opens the stream from `from`, initializes the session.
    async fn open(hub: &HubProcess, from: &'static str) -> Self {
        let to = addr_of(&hub.host_url);
        let mut tcp = raw_http::connect_from(from, to).await;
        raw_http::send(&mut tcp, "GET", "/sse", &[("Accept", "text/event-stream")], "").await;
        assert_eq!(raw_http::read_head(&mut tcp).await.0, 200);
        let mut s = Self { tcp, from, to, post_path: String::new(), seen: String::new() };
        s.read_until("the endpoint event", |seen| seen.contains("?sessionId=")).await;
        let data = s.seen.lines().find_map(|l| l.strip_prefix("data: ").filter(|d| d.contains("sessionId"))).unwrap();
        s.post_path = data.trim().to_string();
        s.post(&initialize(1)).await;
        s.read_until("the initialize answer", |seen| seen.contains("\"id\":1")).await;
        s.post(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).await;
        s
    }

    async fn post(&self, body: &str) {
        let a = request(self.from, self.to, "POST", &self.post_path, &[("Content-Type", "application/json")], body).await;
        assert_eq!(a.status, 202, "{a:?}");
    }

    /// Reads the stream until `done` holds for what was seen, within [`DEADLINE`].
    async fn read_until(&mut self, what: &str, done: impl Fn(&str) -> bool) {
        let until = tokio::time::Instant::now() + DEADLINE;
        while !done(&self.seen) {
            self.read_some(until).await.unwrap_or_else(|| panic!("not within {DEADLINE:?}: {what}; seen {}", self.seen));
        }
    }

    /// Reads what comes until `until`.
    async fn read_for(&mut self, until: tokio::time::Instant) {
        while self.read_some(until).await.is_some() {}
    }

    async fn read_some(&mut self, until: tokio::time::Instant) -> Option<()> {
        use tokio::io::AsyncReadExt;
        let mut buf = [0u8; 16384];
        match tokio::time::timeout_at(until, self.tcp.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => {
                self.seen.push_str(&String::from_utf8_lossy(&buf[..n]));
                Some(())
            }
            Ok(_) => panic!("the hub closed the SSE stream"),
            Err(_) => None,
        }
    }

    fn count(&self, needle: &str) -> usize {
        self.seen.matches(needle).count()
    }
}

const LIST_CHANGED: &str = "notifications/tools/list_changed";

/// Issue 22 item 9: a device that floods `notifications/tools/list_changed` (and answers each
/// listing at once, with a list that changes every time) is listed about once a second, and MCP
/// sessions hear `list_changed` about once a second, not once per notification.
#[tokio::test]
async fn a_list_changed_storm_is_coalesced_to_about_one_relist_and_one_notification_a_second() {
    use common::fake_device::{FakeDevice, tool};
    use futures_util::StreamExt;
    let hub = HubProcess::start(&[], &[]).await;
    let mut sse = SseSession::open(&hub, "127.0.0.1").await;
    let mut dev = FakeDevice::connect(&hub.device_url, "02:00:00:00:00:41", vec![tool("a")]).await;
    sse.read_until("list_changed for the device that joined", |s| s.contains(LIST_CHANGED)).await;
    let before = sse.count(LIST_CHANGED);

    let storm = Duration::from_secs(4);
    let start = tokio::time::Instant::now();
    let mut pace = tokio::time::interval(Duration::from_millis(2));
    let (mut notifications, mut listings) = (0u32, 0u32);
    let changed = json!({"session_id": dev.session_id, "type": "mcp", "payload": {"jsonrpc": "2.0", "method": LIST_CHANGED}});
    while start.elapsed() < storm {
        tokio::select! {
            _ = pace.tick() => {
                dev.send(changed.clone()).await;
                notifications += 1;
            }
            m = dev.ws.next() => {
                let Some(Ok(tokio_tungstenite::tungstenite::Message::Text(t))) = m else { panic!("the device's link ended: {m:?}") };
                let v: serde_json::Value = serde_json::from_str(&t).unwrap();
                if v["payload"]["method"] == "tools/list" {
                    listings += 1;
                    let tools: Vec<_> = (0..=listings).map(|i| tool(&format!("t{i}"))).collect();
                    dev.reply(&v["payload"]["id"], json!({"tools": tools})).await;
                } else if v["payload"]["method"] == "ping" {
                    dev.reply(&v["payload"]["id"], json!({})).await;
                }
            }
        }
    }
    // Whatever was still planned goes out within a second; then count.
    sse.read_for(tokio::time::Instant::now() + Duration::from_millis(2500)).await;
    let heard = sse.count(LIST_CHANGED) - before;
    eprintln!("{notifications} list_changed in {storm:?}: {listings} listings, {heard} list_changed to the MCP session");
    // At least 25 a second (a loaded machine sends fewer than the 500 a second paced): many
    // times the one listing a second the hub coalesces them to.
    assert!(notifications > 100, "the storm was a storm: {notifications} notifications");
    // 4 s of storm: a listing a second (plus the confirmation re-list and one planned at the end).
    assert!((3..=7).contains(&listings), "{listings} listings for {notifications} list_changed in {storm:?}");
    assert!((3..=8).contains(&heard), "the MCP session heard list_changed {heard} times in {storm:?}");
    // The session still works, with the device's latest tools.
    let out = common::mcpdev(&hub, &["tools", "list", "-d", "02:00:00:00:00:41", "--json"]).await;
    assert_eq!(out.code, 0, "{out:?}");
}

/// A Streamable HTTP session on `/mcp` from 127.0.0.1.
struct McpSession {
    to: std::net::SocketAddr,
    id: String,
    next: u32,
}

impl McpSession {
    async fn open(hub: &HubProcess) -> Self {
        let to = addr_of(&hub.host_url);
        let a = request("127.0.0.1", to, "POST", "/mcp", &MCP_HEADERS, &initialize(0)).await;
        assert_eq!(a.status, 200, "{a:?}");
        let id = a.header("mcp-session-id").unwrap().to_string();
        let s = Self { to, id, next: 1 };
        let a = request("127.0.0.1", to, "POST", "/mcp", &s.headers(), r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).await;
        assert_eq!(a.status, 202, "{a:?}");
        s
    }

    fn headers(&self) -> [(&str, &str); 3] {
        [MCP_HEADERS[0], MCP_HEADERS[1], ("Mcp-Session-Id", &self.id)]
    }

    async fn rpc(&mut self, method: &str, params: serde_json::Value) -> serde_json::Value {
        self.next += 1;
        let body = json!({"jsonrpc": "2.0", "id": self.next, "method": method, "params": params}).to_string();
        let a = request("127.0.0.1", self.to, "POST", "/mcp", &self.headers(), &body).await;
        assert_eq!(a.status, 200, "{a:?}");
        a.json()
    }

    /// One `tools/list` page: (name, description) of each tool, and the next cursor.
    async fn page(&mut self, cursor: Option<&str>) -> (Vec<(String, String)>, Option<String>) {
        let params = cursor.map_or(json!({}), |c| json!({"cursor": c}));
        let v = self.rpc("tools/list", params).await;
        let tools = v["result"]["tools"].as_array().unwrap_or_else(|| panic!("{v}"));
        let named = tools.iter().map(|t| (t["name"].as_str().unwrap().to_string(), t["description"].as_str().unwrap_or_default().to_string())).collect();
        (named, v["result"]["nextCursor"].as_str().map(str::to_string))
    }

    /// Every tool, page by page: name -> description.
    async fn all(&mut self) -> std::collections::BTreeMap<String, String> {
        let (mut all, mut cursor) = (std::collections::BTreeMap::new(), None);
        loop {
            let (tools, next) = self.page(cursor.as_deref()).await;
            for (name, description) in tools {
                assert!(all.insert(name.clone(), description).is_none(), "{name} listed twice");
            }
            match next {
                Some(c) => cursor = Some(c),
                None => return all,
            }
        }
    }

    /// The Device-Ids `list_devices` shows.
    async fn devices(&mut self) -> Vec<String> {
        let v = self.rpc("tools/call", json!({"name": "list_devices", "arguments": {}})).await;
        let devices = v["result"]["structuredContent"]["devices"].as_array().cloned().unwrap_or_default();
        devices.iter().map(|d| d["device_id"].as_str().unwrap().to_string()).collect()
    }
}

/// A tool whose description says which device offers it.
fn tool_of(name: &str, device: &str) -> serde_json::Value {
    json!({"name": name, "description": format!("{name} of {device}"), "inputSchema": {"type": "object", "properties": {}}})
}

/// Issue 22 item 12: with `--mcp-names plain`, a plain name stays with the device that got it
/// while it stays connected (a newcomer with a lower MAC, or one that re-lists, takes nothing);
/// a prefixed name never moves either; and no device can squat another's prefixed names.
#[tokio::test]
async fn plain_and_prefixed_names_never_move_to_another_device_while_it_is_connected() {
    use common::fake_device::FakeDevice;
    let hub = HubProcess::start(&["--mcp-names", "plain"], &[]).await;
    let mut mcp = McpSession::open(&hub).await;
    let b = "02:00:00:00:00:52";
    let mut dev_b = FakeDevice::connect(&hub.device_url, b, vec![tool_of("shared", b), tool_of("b_only", b)]).await;
    eventually("B's tools are offered", || async { McpSession::open(&hub).await.all().await.contains_key("b_only") }).await;
    let all = mcp.all().await;
    assert_eq!(all["shared"], format!("shared of {b}"));

    // A newcomer that sorts first, with the same tool, and one whose tool is named like A's
    // prefixed name.
    let a = "02:00:00:00:00:51";
    let mut dev_a = FakeDevice::connect(&hub.device_url, a, vec![tool_of("shared", a)]).await;
    let squatter = "02:00:00:00:00:53";
    let _dev_s = FakeDevice::connect(&hub.device_url, squatter, vec![tool_of("dev-020000000051.shared2", squatter), tool_of("dev-020000000051.shared", squatter)]).await;
    eventually("the newcomers' tools are offered", || async { McpSession::open(&hub).await.all().await.len() >= 6 }).await;
    let all = mcp.all().await;
    assert_eq!(all["shared"], format!("shared of {b}"), "the plain name stayed with B: {all:?}");
    assert_eq!(all["dev-020000000051.shared"], format!("shared of {a}"), "{all:?}");
    assert!(!all.contains_key("dev-020000000051.shared2"), "a device squatted another's prefix: {all:?}");
    assert_eq!(all["dev-020000000053.dev-020000000051.shared"], format!("dev-020000000051.shared of {squatter}"), "{all:?}");

    // A re-list of A (list_changed) changes nothing about who holds which name.
    dev_a.send(json!({"session_id": dev_a.session_id, "type": "mcp", "payload": {"jsonrpc": "2.0", "method": LIST_CHANGED}})).await;
    let list = dev_a.recv_request("tools/list").await;
    dev_a.reply(&list["id"], json!({"tools": [tool_of("shared", a), tool_of("a_new", a)]})).await;
    eventually("A's new tool is offered", || async { McpSession::open(&hub).await.all().await.contains_key("a_new") }).await;
    let all = mcp.all().await;
    assert_eq!(all["shared"], format!("shared of {b}"), "{all:?}");
    assert_eq!(all["dev-020000000051.shared"], format!("shared of {a}"), "{all:?}");

    // A call by the plain name reaches B, the holder.
    let b_answers = async {
        let call = dev_b.recv_request("tools/call").await;
        assert_eq!(call["params"]["name"], "shared");
        dev_b.reply(&call["id"], json!({"content": [{"type": "text", "text": "B ran it"}]})).await;
    };
    let (v, ()) = tokio::join!(mcp.rpc("tools/call", json!({"name": "shared", "arguments": {}})), b_answers);
    assert_eq!(v["result"]["content"][0]["text"], "B ran it", "{v}");
    drop(dev_b);
    eventually("B's tools are gone", || async { !McpSession::open(&hub).await.all().await.contains_key("b_only") }).await;
    // B left: A keeps its prefixed name (it never moves), and "shared" is free for a device
    // that joins now.
    let all = mcp.all().await;
    assert!(!all.contains_key("shared"), "{all:?}");
    assert_eq!(all["dev-020000000051.shared"], format!("shared of {a}"), "{all:?}");
    let c = "02:00:00:00:00:50";
    let _dev_c = FakeDevice::connect(&hub.device_url, c, vec![tool_of("shared", c)]).await;
    eventually("C takes the free plain name", || async { McpSession::open(&hub).await.all().await.get("shared").is_some_and(|d| d.ends_with(c)) }).await;
}

/// Issue 24: a `tools/list` in progress (3 tools a page) while devices leave and join returns
/// no tool twice and no tool of a device that had left before its page was read, and every tool
/// of the devices that stayed.
#[tokio::test]
async fn a_listing_in_progress_survives_churn_without_duplicates_or_departed_devices() {
    use common::fake_device::FakeDevice;
    let hub = HubProcess::start(&["--mcp-page-size", "3"], &[]).await;
    let mut mcp = McpSession::open(&hub).await;
    let mac = |i: u32| format!("02:00:00:00:01:{i:02x}");
    let tools = |i: u32| (0..4).map(|t| tool_of(&format!("t{t}"), &mac(i))).collect::<Vec<_>>();
    let mut devices: std::collections::BTreeMap<u32, FakeDevice> = std::collections::BTreeMap::new();
    for i in 0..6 {
        devices.insert(i, FakeDevice::connect(&hub.device_url, &mac(i), tools(i)).await);
    }
    eventually("six devices listed", || async { McpSession::open(&hub).await.all().await.len() == 1 + 6 * 4 }).await;

    let prefix = |i: u32| format!("dev-{}.", mac(i).replace(':', ""));
    let (mut seen, mut departed, mut next_new) = (Vec::<String>::new(), Vec::<u32>::new(), 6u32);
    let (first, mut cursor) = mcp.page(None).await;
    seen.extend(first.into_iter().map(|(n, _)| n));
    let mut step = 0;
    while let Some(c) = cursor {
        // Between pages: a device leaves (one not reached yet, one already listed, in turn) and
        // a new one joins; the next page is read once the hub has seen both.
        let leaving = if step % 2 == 0 { *devices.keys().next_back().unwrap() } else { *devices.keys().next().unwrap() };
        if step < 4 {
            drop(devices.remove(&leaving));
            departed.push(leaving);
            devices.insert(next_new, FakeDevice::connect(&hub.device_url, &mac(next_new), tools(next_new)).await);
            next_new += 1;
            let expected: Vec<String> = devices.keys().map(|i| mac(*i)).collect();
            eventually("the hub saw the churn", || async {
                let mut now = McpSession::open(&hub).await.devices().await;
                now.sort();
                now == expected
            })
            .await;
        }
        let (page, next) = mcp.page(Some(&c)).await;
        for (name, _) in page {
            assert!(!departed.iter().any(|d| name.starts_with(&prefix(*d))), "{name} of a device that left, at step {step}");
            assert!(!seen.contains(&name), "{name} listed twice");
            seen.push(name);
        }
        cursor = next;
        step += 1;
    }
    // Every tool of every device connected now (they all stayed or joined behind the cursor).
    for i in devices.keys() {
        for t in 0..4 {
            let name = format!("{}t{t}", prefix(*i));
            assert!(seen.contains(&name), "{name} missing from the listing: {seen:?}");
        }
    }
    assert!(seen.contains(&"list_devices".to_string()));
}

/// Issue 24, the fleet face: a `search_devices` listing in progress (2 devices a page) while
/// devices leave and join returns no device twice, no device that had left before its page was
/// read, and every device that stayed or joined behind the cursor.
#[tokio::test]
async fn a_fleet_search_in_progress_survives_churn_without_duplicates_or_departed_devices() {
    use common::fake_device::FakeDevice;
    let hub = HubProcess::start(&["--mcp-fleet-threshold", "2"], &[]).await;
    let mut mcp = McpSession::open(&hub).await;
    let mac = |i: u32| format!("02:00:00:00:02:{i:02x}");
    let mut devices: std::collections::BTreeMap<u32, FakeDevice> = std::collections::BTreeMap::new();
    for i in 0..8 {
        devices.insert(i, FakeDevice::connect(&hub.device_url, &mac(i), vec![tool_of("t", &mac(i))]).await);
    }
    let search = |cursor: Option<String>| json!({"name": "search_devices", "arguments": {"limit": 2, "cursor": cursor}});
    let connected = |want: usize| {
        let hub = &hub;
        async move {
            let v = McpSession::open(hub).await.rpc("tools/call", json!({"name": "search_devices", "arguments": {"limit": 1}})).await;
            v["result"]["structuredContent"]["connected"] == want
        }
    };
    eventually("eight devices connected", || connected(8)).await;
    let (tools, _) = mcp.page(None).await;
    assert_eq!(tools.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(), ["search_devices", "list_device_tools", "call_device_tool"]);

    let (mut seen, mut departed, mut next_new) = (Vec::<String>::new(), Vec::<String>::new(), 8u32);
    let mut cursor: Option<String> = None;
    for step in 0.. {
        let v = mcp.rpc("tools/call", search(cursor.clone())).await;
        let answer = &v["result"]["structuredContent"];
        for d in answer["devices"].as_array().unwrap_or_else(|| panic!("{v}")) {
            let id = d["device_id"].as_str().unwrap().to_string();
            assert!(!departed.contains(&id), "{id} had left, at step {step}");
            assert!(!seen.contains(&id), "{id} listed twice");
            seen.push(id);
        }
        cursor = answer["next_cursor"].as_str().map(str::to_string);
        if cursor.is_none() {
            break;
        }
        if step < 3 {
            // A device not reached yet and one already listed leave, in turn; one joins behind.
            let leaving = if step % 2 == 0 { *devices.keys().next_back().unwrap() } else { *devices.keys().next().unwrap() };
            drop(devices.remove(&leaving));
            departed.push(mac(leaving));
            devices.insert(next_new, FakeDevice::connect(&hub.device_url, &mac(next_new), vec![tool_of("t", &mac(next_new))]).await);
            next_new += 1;
            let want = devices.len();
            eventually("the hub saw the churn", || connected(want)).await;
        }
    }
    for i in devices.keys() {
        assert!(seen.contains(&mac(*i)), "{} missing from the search: {seen:?}", mac(*i));
    }
}

/// Issue 24: with `--mcp-names plain`, a device whose tools are named like the hub's fleet tools
/// (and `list_devices`) gets them prefixed; the plain names stay the hub's, on the direct path too.
#[tokio::test]
async fn fleet_tool_names_cannot_be_squatted_with_plain_names() {
    use common::fake_device::FakeDevice;
    let hub = HubProcess::start(&["--mcp-names", "plain"], &[]).await;
    let s = "02:00:00:00:00:5a";
    let names = ["search_devices", "list_device_tools", "call_device_tool", "list_devices"];
    let mut dev = FakeDevice::connect(&hub.device_url, s, names.iter().map(|n| tool_of(n, s)).collect()).await;
    let mut mcp = McpSession::open(&hub).await;
    eventually("the device's tools are offered", || async { McpSession::open(&hub).await.all().await.len() == 5 }).await;
    let all = mcp.all().await;
    for n in names {
        assert_eq!(all[&format!("dev-02000000005a.{n}")], format!("{n} of {s}"), "{all:?}");
    }
    assert!(!all["list_devices"].contains(s), "{all:?}");
    assert!(!all.contains_key("search_devices"), "the fleet tools are not listed below the threshold: {all:?}");
    // The plain name is the hub's: its answer, not the device's (which would wait for a reply).
    let v = mcp.rpc("tools/call", json!({"name": "search_devices", "arguments": {"query": "5a"}})).await;
    assert_eq!(v["result"]["structuredContent"]["devices"][0]["device_id"], s, "{v}");
    // The device's own tool of that name, through the fleet tool.
    let device_answers = async {
        let call = dev.recv_request("tools/call").await;
        assert_eq!(call["params"], json!({"name": "search_devices", "arguments": {}}));
        dev.reply(&call["id"], json!({"content": [{"type": "text", "text": "the device's own"}]})).await;
    };
    let call = json!({"name": "call_device_tool", "arguments": {"device": s, "tool": "search_devices"}});
    let (v, ()) = tokio::join!(mcp.rpc("tools/call", call), device_answers);
    assert_eq!(v["result"]["content"][0]["text"], "the device's own", "{v}");
}

/// Issue 24: `resources/list` on `/mcp` (two resources a device) is paged by Device-Id, so a
/// fleet's listing is many small answers, never one of every device; a cursor stays valid while
/// devices leave; a cursor that is not the hub's (control characters, or too long) is refused.
#[tokio::test]
async fn resources_are_listed_page_by_page_and_a_foreign_cursor_is_refused() {
    use common::fake_device::FakeDevice;
    let hub = HubProcess::start(&["--mcp-page-size", "4"], &[]).await;
    let mac = |i: u32| format!("02:00:00:00:02:{i:02x}");
    let mut devices: Vec<FakeDevice> = Vec::new();
    for i in 0..5 {
        devices.push(FakeDevice::connect(&hub.device_url, &mac(i), vec![tool_of("t", &mac(i))]).await);
    }
    eventually("five devices listed", || async { McpSession::open(&hub).await.devices().await.len() == 5 }).await;
    let mut mcp = McpSession::open(&hub).await;

    let first = mcp.rpc("resources/list", json!({})).await;
    let uris = |v: &serde_json::Value| v["result"]["resources"].as_array().unwrap_or_else(|| panic!("{v}")).iter().map(|r| r["uri"].as_str().unwrap().to_string()).collect::<Vec<_>>();
    assert_eq!(uris(&first), [0, 0, 1, 1].map(&mac).iter().enumerate().map(|(k, m)| if k % 2 == 0 { format!("mcpdev://devices/{m}") } else { format!("mcpdev://devices/{m}/notifications") }).collect::<Vec<_>>());
    let cursor = first["result"]["nextCursor"].as_str().expect("more pages follow").to_string();

    // A device of a later page leaves between two pages: the listing goes on without it.
    drop(devices.remove(2));
    eventually("the hub saw it leave", || async { McpSession::open(&hub).await.devices().await.len() == 4 }).await;
    let (mut rest, mut cursor) = (Vec::new(), Some(cursor));
    while let Some(c) = cursor {
        let page = mcp.rpc("resources/list", json!({"cursor": c})).await;
        rest.extend(uris(&page));
        cursor = page["result"]["nextCursor"].as_str().map(str::to_string);
    }
    assert_eq!(rest, [3, 4].iter().flat_map(|i| [format!("mcpdev://devices/{}", mac(*i)), format!("mcpdev://devices/{}/notifications", mac(*i))]).collect::<Vec<_>>());

    for forged in ["\u{1b}[2Jx".to_string(), "x".repeat(4096)] {
        let refused = mcp.rpc("resources/list", json!({"cursor": forged})).await;
        assert_eq!(refused["error"]["code"], -32602, "{refused}");
        assert!(refused["error"]["message"].as_str().unwrap().contains("start again without a cursor"), "{refused}");
    }
}

/// Issue 24: `list_devices` (kept callable in the fleet face) never answers with the whole
/// fleet: past 100 devices (or the threshold, if higher) it lists the first ones by Device-Id,
/// says it was truncated and points at `search_devices`.
#[tokio::test]
async fn list_devices_is_capped_and_says_where_the_rest_are() {
    let hub = HubProcess::start(&["--mcp-fleet-threshold", "2"], &[]).await;
    let state = tempfile::tempdir().unwrap();
    let _sims = common::spawn_mcpdev(&["sim", "--quiet", "--url", &hub.device_url, "--count", "103", "--device-id", "02:00:00:00:03:00"], &[("MCPDEV_STATE_DIR", state.path().to_str().unwrap())]);
    eventually("103 devices connected", || async {
        let out = common::mcpdev(&hub, &["devices", "--ndjson"]).await;
        out.stdout.lines().count() == 103
    })
    .await;
    let mut mcp = McpSession::open(&hub).await;
    let v = mcp.rpc("tools/call", json!({"name": "list_devices", "arguments": {}})).await;
    let listed = &v["result"]["structuredContent"];
    assert_eq!(listed["devices"].as_array().map(Vec::len), Some(100), "{listed}");
    assert_eq!(listed["devices"][0]["device_id"], "02:00:00:00:03:00");
    assert_eq!(listed["truncated"], true);
    assert!(listed["more"].as_str().unwrap().contains("search_devices"), "{listed}");
}
