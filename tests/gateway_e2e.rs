//! Devices behind the xiaozhi MQTT gateway, end to end through `mcpdev serve`: a scripted
//! chat-server-side peer that behaves like the gateway with a cold cache (an id-only answer to
//! the first `initialize`, an empty first list, then a partial one) ends fully onboarded, and
//! `tools list --wait` never returns a partial list: an onboarding that needed a retry is
//! `ready` only once two listings in a row agree.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::fake_device::{FakeDevice, tool};
use common::{HubProcess, mcpdev};
use serde_json::{Value, json};

const FULL: usize = 32;

fn tools(n: usize) -> Vec<Value> {
    (0..n).map(|i| tool(&format!("self.t{i:02}"))).collect()
}

/// Answers like the gateway while its cache fills: initialize #1 gets `{"jsonrpc":"2.0","id":N}`,
/// tools/list #k the first `sizes[k]` tools (no cursor), the ones after the last size all 32.
async fn gateway(mut dev: FakeDevice, lists: Arc<AtomicUsize>, sizes: &'static [usize]) {
    let mut inits = 0;
    loop {
        let m = dev.recv().await;
        let p = &m["payload"];
        let Some(id) = p.get("id").cloned() else { continue };
        let sid = dev.session_id.clone();
        match p["method"].as_str() {
            Some("initialize") => {
                inits += 1;
                if inits == 1 {
                    dev.send(json!({"session_id": sid, "type": "mcp", "payload": {"jsonrpc": "2.0", "id": id}})).await;
                } else {
                    dev.reply(&id, json!({"protocolVersion": "2024-11-05", "serverInfo": {"name": "gateway-cache", "version": "1"}})).await;
                }
            }
            Some("tools/list") => {
                let n = sizes.get(lists.fetch_add(1, Ordering::SeqCst)).copied().unwrap_or(FULL);
                dev.reply(&id, json!({"tools": tools(n)})).await;
            }
            _ => {}
        }
    }
}

/// Connects as `id` through the gateway peer, says hello; the peer then answers by itself.
async fn connect(hub: &HubProcess, id: &str, sizes: &'static [usize]) -> (tokio::task::JoinHandle<()>, Arc<AtomicUsize>) {
    let mut req = tokio_tungstenite::tungstenite::client::IntoClientRequest::into_client_request(hub.device_url.as_str()).unwrap();
    req.headers_mut().insert("Device-Id", id.parse().unwrap());
    let (ws, _) = tokio_tungstenite::connect_async(req).await.unwrap();
    let mut dev = FakeDevice { ws, session_id: String::new() };
    dev.send(json!({"type": "hello", "version": 1, "features": {"mcp": true}, "transport": "websocket"})).await;
    let hello = dev.recv().await;
    assert_eq!(hello["type"], "hello");
    dev.session_id = hello["session_id"].as_str().unwrap().to_string();
    let lists = Arc::new(AtomicUsize::new(0));
    (tokio::spawn(gateway(dev, lists.clone(), sizes)), lists)
}

/// The case: `initialize` needed a retry, then the first list had 20 of 32 tools. Every
/// `tools list --wait`, from right after the hello on, returns all 32.
#[tokio::test]
async fn after_a_retried_initialize_tools_list_wait_never_returns_the_partial_list() {
    let hub = HubProcess::start(&[], &[]).await;
    let id = "aa:00:00:00:00:62";
    let started = Instant::now();
    let (peer, lists) = connect(&hub, id, &[20]).await;
    let mut seen = Vec::new();
    while started.elapsed() < Duration::from_secs(4) {
        let list = mcpdev(&hub, &["tools", "list", "-d", id, "--wait", "10s", "--json"]).await;
        assert_eq!(list.code, 0, "{list:?}");
        seen.push(list.json()["tools"].as_array().unwrap().len());
    }
    assert!(seen.iter().all(|&n| n == FULL), "a partial list was returned: {seen:?}");
    assert!(!peer.is_finished(), "the scripted gateway failed: {:?}", peer.await);
    // Partial, full, full (the two that agreed): nothing more.
    assert_eq!(lists.load(Ordering::SeqCst), 3);

    // A device that onboards cleanly is ready on its first list, with no agreement wait.
    let clean = "aa:00:00:00:00:63";
    let _dev = common::fake_device::FakeDevice::connect(&hub.device_url, clean, tools(2)).await;
    let at_once = Instant::now();
    let list = mcpdev(&hub, &["tools", "list", "-d", clean, "--wait", "10s", "--json"]).await;
    assert_eq!(list.json()["tools"].as_array().unwrap().len(), 2, "{list:?}");
    // This device answers one list only: an agreement re-list (1.5 s after the first) would go
    // unanswered and hold the wait to its 10 s. A bound far from both, which load cannot cross.
    assert!(at_once.elapsed() < Duration::from_secs(8), "{:?}", at_once.elapsed());
}

#[tokio::test]
async fn a_device_behind_a_cold_gateway_cache_ends_with_every_tool() {
    let hub = HubProcess::start(&[], &[]).await;
    let id = "aa:00:00:00:00:61";
    let started = Instant::now();
    let (peer, lists) = connect(&hub, id, &[0, 8]).await;

    // Ready once two listings agree, with nobody asking for a refresh.
    let deadline = started + Duration::from_secs(15);
    let last = loop {
        let list = mcpdev(&hub, &["tools", "list", "-d", id, "--wait", "10s", "--json"]).await;
        assert_eq!(list.code, 0, "{list:?}");
        if list.json()["tools"].as_array().unwrap().len() == FULL || Instant::now() > deadline {
            break list;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(last.json()["tools"].as_array().unwrap().len(), FULL, "{}", last.stdout);
    assert!(started.elapsed() < Duration::from_secs(10), "took {:?}", started.elapsed());
    assert!(!peer.is_finished(), "the scripted gateway failed: {:?}", peer.await);

    let hello = mcpdev(&hub, &["hello", "-d", id, "--json"]).await;
    let onboarding = &hello.json()["onboarding"];
    assert_eq!((onboarding["attempt"].as_u64(), onboarding["failed"].as_bool()), (Some(2), Some(false)), "{}", hello.stdout);
    assert_eq!(onboarding["last_error"], "initialize: the reply has neither result nor error");
    // Empty, partial, full, full again (the agreement): four listings, not a flood.
    assert_eq!(lists.load(Ordering::SeqCst), 4);
}

/// A device answering from a cache it is still filling (issue 33), without any failed step: the
/// k-th listing sees `fill[k]` tools cached (then all 32), served `page` at a time with a
/// `nextCursor` (a cache that pages what it has), or all in one page (the gateway's way).
async fn filling_cache(mut dev: FakeDevice, listings: Arc<AtomicUsize>, fill: &'static [usize], page: Option<usize>) {
    let mut cached = FULL;
    loop {
        let m = dev.recv().await;
        let p = &m["payload"];
        let Some(id) = p.get("id").cloned() else { continue };
        match p["method"].as_str() {
            Some("initialize") => dev.reply(&id, json!({"protocolVersion": "2024-11-05", "serverInfo": {"name": "filling-cache", "version": "1"}})).await,
            Some("tools/list") => {
                let cursor = p["params"]["cursor"].as_str().unwrap_or_default();
                let from: usize = if cursor.is_empty() {
                    cached = fill.get(listings.fetch_add(1, Ordering::SeqCst)).copied().unwrap_or(FULL);
                    0
                } else {
                    cursor.parse().unwrap()
                };
                let upto = page.map_or(cached, |n| (from + n).min(cached));
                let mut result = json!({"tools": tools(FULL)[from..upto]});
                if upto < cached {
                    result["nextCursor"] = json!(upto.to_string());
                }
                dev.reply(&id, result).await;
            }
            _ => {}
        }
    }
}

async fn connect_filling(hub: &HubProcess, id: &str, fill: &'static [usize], page: Option<usize>) -> (tokio::task::JoinHandle<()>, Arc<AtomicUsize>) {
    connect_cache(hub, id, fill, page, false).await
}

/// As [`connect_filling`]; `gateway`: as the xiaozhi MQTT gateway connects (its documented
/// chat-server URL with `?from=mqtt_gateway`, its bearer and protocol version 2, hello version 2).
async fn connect_cache(hub: &HubProcess, id: &str, fill: &'static [usize], page: Option<usize>, gateway: bool) -> (tokio::task::JoinHandle<()>, Arc<AtomicUsize>) {
    let url = if gateway { format!("{}?from=mqtt_gateway", hub.device_url) } else { hub.device_url.clone() };
    let mut req = tokio_tungstenite::tungstenite::client::IntoClientRequest::into_client_request(url.as_str()).unwrap();
    req.headers_mut().insert("Device-Id", id.parse().unwrap());
    if gateway {
        req.headers_mut().insert("Authorization", "Bearer test-token".parse().unwrap());
        req.headers_mut().insert("Protocol-Version", "2".parse().unwrap());
    }
    let (ws, _) = tokio_tungstenite::connect_async(req).await.unwrap();
    let mut dev = FakeDevice { ws, session_id: String::new() };
    dev.send(json!({"type": "hello", "version": if gateway { 2 } else { 1 }, "features": {"mcp": true}, "transport": "websocket"})).await;
    let hello = dev.recv().await;
    dev.session_id = hello["session_id"].as_str().unwrap().to_string();
    let listings = Arc::new(AtomicUsize::new(0));
    (tokio::spawn(filling_cache(dev, listings.clone(), fill, page)), listings)
}

/// Every `tools list --wait` from the hello on, for `span`: the lengths it returned.
async fn lists_seen(hub: &HubProcess, id: &str, span: Duration) -> Vec<usize> {
    let started = Instant::now();
    let mut seen = Vec::new();
    while started.elapsed() < span {
        let list = mcpdev(hub, &["tools", "list", "-d", id, "--wait", "10s", "--json"]).await;
        assert_eq!(list.code, 0, "{list:?}");
        seen.push(list.json()["tools"].as_array().unwrap().len());
    }
    seen
}

/// A clean onboarding whose first list ends on a page as full as the pages before it (16 of 32
/// cached, in pages of 8): never shown; `tools list --wait` returns all 32 from the start.
#[tokio::test]
async fn a_first_list_ending_on_a_full_page_is_never_returned_by_tools_list_wait() {
    let hub = HubProcess::start(&[], &[]).await;
    let id = "aa:00:00:00:00:64";
    let (peer, listings) = connect_filling(&hub, id, &[16], Some(8)).await;
    let seen = lists_seen(&hub, id, Duration::from_secs(4)).await;
    assert!(seen.iter().all(|&n| n == FULL), "a partial list was returned: {seen:?}");
    assert!(!peer.is_finished(), "the scripted cache failed: {:?}", peer.await);
    // 16 (held), 32, 32 (the two that agreed): nothing more.
    assert_eq!(listings.load(Ordering::SeqCst), 3);
    let hello = mcpdev(&hub, &["hello", "-d", id, "--json"]).await;
    assert_eq!(hello.json()["onboarding"]["attempt"], 1, "no step failed: {}", hello.stdout);
}

/// The gateway's own way, on a device the hub knew: the device reconnects (a new voice session
/// through the gateway) while the gateway's cache is cold, and the first answer is one page of 8
/// of its 32 tools. Shorter than what the hub knew: held until a second listing agrees.
#[tokio::test]
async fn a_reconnected_device_answering_from_a_cold_cache_is_ready_only_with_every_tool() {
    let hub = HubProcess::start(&[], &[]).await;
    let id = "aa:00:00:00:00:65";
    let first = FakeDevice::connect(&hub.device_url, id, tools(FULL)).await;
    let list = mcpdev(&hub, &["tools", "list", "-d", id, "--wait", "10s", "--json"]).await;
    assert_eq!(list.json()["tools"].as_array().unwrap().len(), FULL, "{list:?}");
    drop(first);
    let (peer, listings) = connect_filling(&hub, id, &[8], None).await;
    let seen = lists_seen(&hub, id, Duration::from_secs(4)).await;
    assert!(seen.iter().all(|&n| n == FULL), "a partial list was returned: {seen:?}");
    assert!(!peer.is_finished(), "the scripted cache failed: {:?}", peer.await);
    assert_eq!(listings.load(Ordering::SeqCst), 3, "8 (held), 32, 32");
}

/// What each new Device-Id's cache holds at its first `tools/list` (then all 32), in turn: the
/// gateway's one page of 8, two, three, or all of them.
const COLD: [&[usize]; 4] = [&[8], &[16], &[24], &[]];

/// The first `ready` event of each of `ids` a `watch --json` shows (after `skip` of them), with
/// its tool count.
async fn first_ready(lines: &mut tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>, ids: &[String]) -> std::collections::HashMap<String, u64> {
    let mut ready = std::collections::HashMap::new();
    let read = tokio::time::timeout(Duration::from_secs(60), async {
        while ready.len() < ids.len() {
            let line = lines.next_line().await.unwrap().expect("the watch ended");
            let ev: Value = serde_json::from_str(&line).unwrap();
            let id = ev["device_id"].as_str().unwrap_or_default().to_string();
            if ev["event"] == "ready" && ids.contains(&id) {
                ready.entry(id).or_insert(ev["tools"].as_u64().unwrap());
            }
        }
    });
    read.await.unwrap_or_else(|_| panic!("not every device was ready in time: {} of {}", ready.len(), ids.len()));
    ready
}

/// The gateway scenario of issue 45.3: 30 Device-Ids the hub never saw come through the
/// gateway while its cache is cold (a first answer of 8, 16 or 24 of their 32 tools, with no
/// `nextCursor`, or all of them): every one is `ready` the first time with all 32. Then the same
/// 30 reconnect (known ids) through a cold cache again: the same.
#[tokio::test]
async fn thirty_new_ids_through_a_cold_gateway_are_ready_the_first_time_with_every_tool() {
    use tokio::io::AsyncBufReadExt;
    let hub = HubProcess::start(&[], &[]).await;
    let mut watch = common::spawn_mcpdev(&["watch", "--json"], &[("MCPDEV_HUB", hub.host_url.as_str()), ("MCPDEV_RUNTIME_DIR", hub.runtime_dir.as_str())]).child;
    let mut lines = tokio::io::BufReader::new(watch.stdout.take().unwrap()).lines();
    let first: Value = serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
    assert_eq!(first["event"], "watching");
    let ids: Vec<String> = (0..30).map(|i| format!("aa:00:00:00:01:{i:02x}")).collect();
    for round in ["new ids", "known ids"] {
        let mut peers = Vec::new();
        for (i, id) in ids.iter().enumerate() {
            peers.push(connect_cache(&hub, id, COLD[i % COLD.len()], None, true).await);
        }
        let ready = first_ready(&mut lines, &ids).await;
        let partial: Vec<_> = ready.iter().filter(|(_, n)| **n != FULL as u64).collect();
        assert!(partial.is_empty(), "{round}: ready with a partial first list: {partial:?}");
        for (peer, _) in &peers {
            assert!(!peer.is_finished(), "{round}: a scripted gateway peer failed");
        }
        for (peer, _) in peers {
            peer.abort();
        }
    }
}
