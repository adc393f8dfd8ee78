//! `mcpdev watch` never drops events unsaid (issue 45.5): a watch whose output is not read while
//! a device sends 6,000 notifications falls behind, and says how many events it dropped —
//! "dropped N events" on stderr, and a `{"event":"lagged","skipped":N}` record in its `--json`
//! output — so that every notification is either shown or counted.

mod common;

use std::process::Stdio;
use std::time::Duration;

use common::HubProcess;
use common::fake_device::{FakeDevice, tool};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};

const DEVICE: &str = "02:00:00:00:00:7d";
const SENT: u64 = 6_000;

#[tokio::test]
async fn a_watch_that_falls_behind_says_how_many_events_it_dropped() {
    let hub = HubProcess::start(&[], &[]).await;
    let mut device = FakeDevice::connect(&hub.device_url, DEVICE, vec![tool("lamp.set")]).await;
    let env = [("MCPDEV_HUB", hub.host_url.as_str()), ("MCPDEV_RUNTIME_DIR", hub.runtime_dir.as_str())];
    let mut watch = common::spawn_mcpdev_with(&["watch", "--json", "-d", DEVICE], &env, Stdio::piped()).child;
    let mut lines = BufReader::new(watch.stdout.take().unwrap()).lines();
    let first: Value = serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
    assert_eq!(first["event"], "watching", "{first}");

    // The device floods; the watch's output is not read meanwhile (its pipe fills, then its
    // queue).
    let sid = device.session_id.clone();
    for n in 0..SENT {
        device.send(json!({"session_id": sid, "type": "mcp", "payload": {"jsonrpc": "2.0", "method": "notifications/state_changed", "params": {"n": n}}})).await;
    }

    // The hub handles a device's frames in order: once it has answered a request sent after the
    // flood, it has published every notification, whatever the load (reading the watch any
    // earlier could let it keep up, and test nothing).
    device.send(json!({"session_id": sid, "type": "mcp", "payload": {"jsonrpc": "2.0", "id": "barrier", "method": "x/after_the_flood"}})).await;
    let answered = tokio::time::timeout(Duration::from_secs(120), async {
        loop {
            let m = device.recv_within(Duration::from_secs(120)).await;
            if m["payload"]["id"] == "barrier" {
                return m;
            }
        }
    });
    let answer = answered.await.expect("the hub answered the request sent after the flood");
    assert!(answer["payload"]["error"].is_object(), "{answer}");

    // Now every notification is read, or counted as dropped.
    let (mut shown, mut skipped, mut records) = (0u64, 0u64, 0);
    let read = tokio::time::timeout(Duration::from_secs(60), async {
        while shown + skipped < SENT {
            let line = lines.next_line().await.unwrap().expect("the watch ended");
            let ev: Value = serde_json::from_str(&line).unwrap();
            match ev["event"].as_str() {
                Some("notification") => shown += 1,
                Some("lagged") => {
                    skipped += ev["skipped"].as_u64().expect("a count");
                    records += 1;
                }
                _ => {}
            }
        }
    });
    read.await.unwrap_or_else(|_| panic!("{shown} notifications shown and {skipped} said dropped, of {SENT}: the rest were dropped unsaid"));
    assert!(skipped > 0 && shown > 0, "the watch fell behind ({skipped} dropped, {shown} shown)");
    watch.kill().await.unwrap();
    let mut stderr = String::new();
    watch.stderr.take().unwrap().read_to_string(&mut stderr).await.unwrap();
    let said: Vec<&str> = stderr.lines().filter(|l| l.contains("dropped ") && l.contains(" event")).collect();
    assert_eq!(said.len(), records, "each record is said on stderr too: {stderr}");
}
