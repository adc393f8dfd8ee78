//! Devices behind the xiaozhi MQTT gateway, end to end through `mcpdev serve`: a scripted
//! chat-server-side peer that behaves like the gateway with a cold cache (an id-only answer to
//! the first `initialize`, an empty first list, then a partial one) ends fully onboarded.

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
/// tools/list #1 an empty list, #2 the first 8 tools (no cursor), later ones all 32.
async fn gateway(mut dev: FakeDevice, lists: Arc<AtomicUsize>) {
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
                let n = match lists.fetch_add(1, Ordering::SeqCst) {
                    0 => 0,
                    1 => 8,
                    _ => FULL,
                };
                dev.reply(&id, json!({"tools": tools(n)})).await;
            }
            _ => {}
        }
    }
}

#[tokio::test]
async fn a_device_behind_a_cold_gateway_cache_ends_with_every_tool() {
    let hub = HubProcess::start(&[], &[]).await;
    let id = "aa:00:00:00:00:61";
    let mut req = tokio_tungstenite::tungstenite::client::IntoClientRequest::into_client_request(hub.device_url.as_str()).unwrap();
    req.headers_mut().insert("Device-Id", id.parse().unwrap());
    let (ws, _) = tokio_tungstenite::connect_async(req).await.unwrap();
    let mut dev = FakeDevice { ws, session_id: String::new() };
    let started = Instant::now();
    dev.send(json!({"type": "hello", "version": 1, "features": {"mcp": true}, "transport": "websocket"})).await;
    let hello = dev.recv().await;
    assert_eq!(hello["type"], "hello");
    dev.session_id = hello["session_id"].as_str().unwrap().to_string();
    let lists = Arc::new(AtomicUsize::new(0));
    let peer = tokio::spawn(gateway(dev, lists.clone()));

    // Ready as soon as a list is complete; the confirmation re-list brings the rest. Polled with a
    // deadline: the hub must get there on its own, with nobody asking for a refresh.
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
    // Empty, partial, full: three listings, not a flood.
    assert_eq!(lists.load(Ordering::SeqCst), 3);
}
