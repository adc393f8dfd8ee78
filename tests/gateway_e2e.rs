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
    assert!(at_once.elapsed() < Duration::from_millis(1500), "{:?}", at_once.elapsed());
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
