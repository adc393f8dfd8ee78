//! `serve --upstream` with a device library nobody on this team wrote: a xiaozhi-sdk device
//! (`tests/interop/xiaozhi_sdk_device.py`, `common::sdk`) connects to the hub, which relays it to
//! an upstream that speaks as xiaozhi-esp32-server does (`common::upstream`); the upstream and the
//! CLI each call a tool on it, and each gets its own answer.

mod common;

use common::sdk::SdkDevices;
use common::upstream::FakeUpstream;
use common::{HubProcess, mcpdev};
use serde_json::{Value, json};

const D1: &str = "aa:bb:cc:00:00:71";

#[tokio::test]
async fn an_sdk_device_keeps_its_upstream_while_the_cli_calls_it() {
    let mut up = FakeUpstream::open().await;
    let hub = HubProcess::start(&["--upstream", &up.ws_url.clone(), "--upstream-plain"], &[]).await;
    let _device = SdkDevices::start(&hub, &[D1]).await;
    let mut conn = up.next_conn().await;
    assert_eq!(conn.headers.get("device-id").map(String::as_str), Some(D1));
    // The upstream's own initialize (with its vision URL, which the SDK insists on) and listing.
    let tools = conn.listed().await;
    assert_eq!(tools.len(), 6, "{tools:?}");
    let listed = mcpdev(&hub, &["tools", "list", "-d", D1, "--wait", "30s", "--json"]).await;
    assert_eq!(listed.code, 0, "{listed:?}");
    assert_eq!(listed.json()["tools"].as_array().map(Vec::len), Some(6));

    // The upstream sets the theme while the CLI sets the volume; then each reads the status.
    conn.send(json!({"type": "mcp", "payload": {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "set_theme", "arguments": {"theme": "dark"}}}}));
    let cli = mcpdev(&hub, &["call", "set_volume", "volume=33", "-d", D1, "--json"]).await;
    assert_eq!(cli.code, 0, "{cli:?}");
    let theirs = conn.answer(json!(3)).await;
    assert!(theirs["payload"]["result"]["content"][0]["text"].as_str().unwrap_or_default().contains("dark"), "{theirs}");
    let status = mcpdev(&hub, &["call", "get_device_status", "-d", D1, "--json"]).await;
    let text = status.json()["content"][0]["text"].as_str().unwrap_or_default().to_string();
    let v: Value = serde_json::from_str(&text).unwrap_or_default();
    assert_eq!((v["audio_speaker"]["volume"].as_i64(), v["screen"]["theme"].as_str()), (Some(33), Some("dark")), "both calls reached the one device: {text}");

    // Nothing of the hub's reached the upstream: answers to ids 1, 2 and 3 only.
    let ids: Vec<Value> = conn.received_json().into_iter().filter(|v| v["type"] == "mcp" && v["payload"].get("method").is_none()).map(|v| v["payload"]["id"].clone()).collect();
    assert_eq!(ids, vec![json!(1), json!(2), json!(3)]);
}
