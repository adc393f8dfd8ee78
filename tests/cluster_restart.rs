//! An MCP host keeps calling devices of a hub that restarts (issue 45.4): three hubs with
//! `--cluster-link` on Mosquitto, MQTT devices spread over them, a host on hub A calling every
//! device of hub C back to back through `/mcp` while hub C is stopped with SIGTERM and started
//! again. A call that comes while the devices move waits for them (within `--mcp-timeout`), as
//! the CLI's requests do: not one call fails. Beside it, the adversary of the wait: a call for a
//! device nobody serves is still answered at once.

mod common;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::fake_device::tool;
use common::mcp_session::Session;
use common::mqtt::{MqttDevice, Mosquitto};
use common::{HubProcess, mcpdev};
use serde_json::{Value, json};

/// Each hub's own devices (`devices --json` rows with a session: the ones it serves).
async fn served_by(hubs: &[HubProcess], ids: &[String]) -> HashMap<String, usize> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let mut owner = HashMap::new();
        for (i, hub) in hubs.iter().enumerate() {
            let rows: Vec<Value> = serde_json::from_str(&mcpdev(hub, &["devices", "--json"]).await.stdout).unwrap_or_default();
            for d in rows.iter().filter(|d| d.get("session_id").is_some() && d["phase"] == "ready") {
                owner.insert(d["device_id"].as_str().unwrap().to_string(), i);
            }
        }
        if ids.iter().all(|id| owner.contains_key(id)) {
            return owner;
        }
        assert!(Instant::now() < deadline, "not every device is served: {owner:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn prefixed(id: &str) -> String {
    format!("dev-{}.t.echo", id.replace(':', ""))
}

#[tokio::test]
async fn an_mcp_host_calling_devices_of_a_restarting_hub_sees_no_failure() {
    let broker = Mosquitto::start().await;
    let url = broker.url();
    let args = ["--mqtt", url.as_str(), "--cluster-link", "127.0.0.1:0", "--mcp-timeout", "30"];
    let (mut hubs, dirs) = HubProcess::cluster(3, &args, false).await;
    let ids: Vec<String> = (1..=9).map(|i| format!("cd:00:00:00:00:{i:02x}")).collect();
    let mut counts = Vec::new();
    for id in &ids {
        let mut dev = MqttDevice::connect(&url, id).await;
        dev.hello().await;
        counts.push(dev.respond_forever(vec![tool("t.echo")]));
    }
    let owner = served_by(&hubs, &ids).await;
    let victim = owner[&ids[0]];
    let host = (victim + 1) % 3;
    let theirs: Vec<String> = ids.iter().filter(|id| owner[*id] == victim).cloned().collect();

    // The host on hub A sees the victim's devices.
    let (mut s, _) = Session::open(&hubs[host], "/mcp", "127.0.0.1").await;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let tools = s.ask("tools/list", json!({})).await;
        let names: Vec<&str> = tools["result"]["tools"].as_array().into_iter().flatten().filter_map(|t| t["name"].as_str()).collect();
        if theirs.iter().all(|id| names.contains(&prefixed(id).as_str())) {
            break;
        }
        assert!(Instant::now() < deadline, "hub A does not offer the victim's devices: {names:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // Calls back to back, from before the stop to after the restart.
    let stop = Arc::new(AtomicBool::new(false));
    let calls = {
        let (stop, theirs, mut s) = (stop.clone(), theirs.clone(), s.again(1000));
        tokio::spawn(async move {
            let (mut ok, mut failed) = (0u32, Vec::new());
            while !stop.load(Ordering::SeqCst) {
                for id in &theirs {
                    let started = Instant::now();
                    let answer = s.ask("tools/call", json!({"name": prefixed(id), "arguments": {"n": 1}})).await;
                    if answer["result"]["isError"] == false && answer["result"]["content"][0]["text"] == "ok" {
                        ok += 1;
                    } else {
                        failed.push(format!("{id} after {:?}: {answer}", started.elapsed()));
                    }
                }
            }
            (ok, failed)
        })
    };
    // Some calls go through before the stop.
    let before = counts.iter().map(|c| c.get("tools/call")).sum::<usize>();
    while counts.iter().map(|c| c.get("tools/call")).sum::<usize>() < before + 3 * theirs.len() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // SAFETY: a signal to a child this test started.
    unsafe { libc::kill(hubs[victim].running.child.id().unwrap() as i32, libc::SIGTERM) };
    let status = tokio::time::timeout(Duration::from_secs(20), hubs[victim].running.child.wait()).await.expect("the hub stops on SIGTERM").unwrap();
    assert!(!status.success() || status.code() == Some(130), "{status:?}");
    let state = dirs[victim].path().to_string_lossy().into_owned();
    let mut again = vec!["--approve-all"];
    again.extend_from_slice(&args);
    hubs[victim] = HubProcess::start_with(&again, &[("MCPDEV_STATE_DIR", &state)], false).await;
    // And calls go on after the restart.
    let after = counts.iter().map(|c| c.get("tools/call")).sum::<usize>();
    let deadline = Instant::now() + Duration::from_secs(30);
    while counts.iter().map(|c| c.get("tools/call")).sum::<usize>() < after + 3 * theirs.len() {
        assert!(Instant::now() < deadline, "calls stopped going through after the restart");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop.store(true, Ordering::SeqCst);
    let (ok, failed) = tokio::time::timeout(Duration::from_secs(60), calls).await.expect("the calls end").unwrap();
    assert!(failed.is_empty(), "{} of {} calls failed during the restart:\n{}", failed.len(), ok as usize + failed.len(), failed.join("\n"));
    eprintln!("{ok} calls to {} device(s) of the restarting hub, none failed", theirs.len());

    // A device nobody serves is answered at once, not waited for.
    let started = Instant::now();
    let unknown = s.ask("tools/call", json!({"name": "dev-cd00000000ff.t.echo", "arguments": {"n": 1}})).await;
    assert!(unknown.get("error").is_some() || unknown["result"]["isError"] == true, "{unknown}");
    assert!(started.elapsed() < Duration::from_secs(5), "answered at once: {:?}", started.elapsed());
}

