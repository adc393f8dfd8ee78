//! Interop with a device library nobody on this team wrote: devices built with xiaozhi-sdk (PyPI,
//! pinned in `.ci/requirements.txt`) connect to `mcpdev serve`, and the CLI lists and calls their
//! tools. The devices are `tests/interop/xiaozhi_sdk_device.py`, run by the Python of `.ci/venv`
//! (`.ci/test` creates it and sets `MCPDEV_TEST_PYTHON`).
//!
//! The SDK's quirks this covers: it needs `audio_params` and `session_id` in the server hello and
//! both `capabilities.vision.url` and `.token` in `initialize` (or it never answers), it ignores
//! the `tools/list` cursor and `withUserTools`, it reports a failing handler as `isError: true`,
//! it validates no arguments itself, it never answers `ping`, and a call whose handler result it
//! cannot serialise gets no reply at all.

mod common;

use std::time::{Duration, Instant};

use common::sdk::SdkDevices;
use common::{HubProcess, mcpdev};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

const D1: &str = "aa:bb:cc:00:00:01";
const D2: &str = "aa:bb:cc:00:00:02";
const TOOLS: [&str; 6] = ["set_volume", "set_theme", "get_device_status", "spin_motor", "read_clock", "wait_for_button"];

/// The JSON a handler returned, as the SDK sends it: `json.dumps` text in one text block.
fn text_json(out: &common::Outcome) -> Value {
    let text = out.json()["content"][0]["text"].as_str().unwrap_or_else(|| panic!("no text content: {out:?}")).to_string();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("text is not JSON ({e}): {text}"))
}

#[tokio::test]
async fn two_sdk_devices_list_and_call_through_the_hub() {
    let hub = HubProcess::start(&[], &[]).await;
    let devices = SdkDevices::start(&hub, &[D1, D2]).await;

    // Onboarding went through: every tool, with the SDK's own schemas, on both devices.
    for d in [D1, D2] {
        let list = mcpdev(&hub, &["tools", "list", "--json", "-d", d, "--wait", "20s"]).await;
        assert_eq!(list.code, 0, "{list:?}");
        assert_eq!(list.json()["device_id"], d);
        let tools = list.json()["tools"].as_array().unwrap().clone();
        let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
        assert_eq!(names, TOOLS, "all at once, although the SDK ignores the cursor");
        assert_eq!(
            tools[0],
            json!({
                "name": "set_volume",
                "description": "Set the volume of the audio speaker. If the current volume is unknown, you must call `get_device_status` tool first and then call this tool.",
                "inputSchema": {"type": "object", "properties": {"volume": {"type": "integer", "minimum": 0, "maximum": 100}}, "required": ["volume"]},
            }),
            "tool_func and is_async stay on the device"
        );
        assert_eq!(tools[1]["inputSchema"], json!({"type":"object","properties":{"theme":{"type":"string"}},"required":["theme"]}));
    }
    let human = mcpdev(&hub, &["tools", "list", "-d", D2]).await;
    assert_eq!(human.code, 0, "{human:?}");
    assert!(human.stdout.contains("set_volume") && human.stdout.contains("volume: int 0..100"), "{}", human.stdout);
    assert!(human.stderr.contains("6 tool(s) on aa:bb:cc:00:00:02"), "{}", human.stderr);

    // What the SDK said in its hello, and its identity headers.
    let hello = mcpdev(&hub, &["hello", "--json", "-d", D1]).await;
    assert_eq!(hello.code, 0, "{hello:?}");
    let h = hello.json();
    assert_eq!(
        h["hello"],
        json!({
            "type": "hello", "version": 1, "transport": "websocket",
            "features": {"mcp": true, "consistent_sample_rate": false},
            "audio_params": {"format": "opus", "sample_rate": 16000, "channels": 1, "frame_duration": 60},
        })
    );
    assert_eq!((h["device_id"].as_str(), h["transport"].as_str(), h["protocol_version"].as_u64()), (Some(D1), Some("websocket"), Some(1)));
    let client_id = uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_DNS, D1.as_bytes()).to_string();
    assert_eq!(h["client_id"], client_id.as_str(), "Client-Id is uuid5(DNS, MAC)");
    assert!(h["session_id"].as_str().is_some_and(|s| !s.is_empty()), "{h}");

    // The SDK answered the hub's initialize (it only does with vision url and token), and answers
    // a fresh one with a caller's vision URL and an empty token as well.
    // `init --json` is the device's initialize result, fields at the top after `device_id`.
    let sdk_init = |device: &str| json!({"device_id": device, "protocolVersion": "2024-11-05", "capabilities": {"tools": {}}, "serverInfo": {"name": "", "version": "0.0.1"}});
    let init = mcpdev(&hub, &["init", "--json", "-d", D1]).await;
    assert_eq!((init.code, init.json()), (0, sdk_init(D1)), "{init:?}");
    let fresh = mcpdev(&hub, &["init", "--json", "-d", D2, "--vision-url", "http://127.0.0.1:9/explain"]).await;
    assert_eq!((fresh.code, fresh.json()), (0, sdk_init(D2)), "{fresh:?}");

    // Calls reach the chosen device only, and return what its handler returned.
    let call = mcpdev(&hub, &["call", "set_volume", "volume=30", "-d", D1, "--json"]).await;
    assert_eq!(call.code, 0, "{call:?}");
    assert_eq!(call.json(), json!({"device_id": D1, "content": [{"type": "text", "text": "{\"volume\": 30}"}], "isError": false}));
    let theme = mcpdev(&hub, &["call", "set_theme", "theme=dark", "-d", D2]).await;
    assert_eq!((theme.code, theme.stdout.as_str()), (0, "{\n  \"theme\": \"dark\"\n}\n"), "{theme:?}");
    let status = |d: &'static str| {
        let hub = &hub;
        async move { text_json(&mcpdev(hub, &["call", "get_device_status", "-d", d, "--json"]).await) }
    };
    assert_eq!(status(D1).await, json!({"device": D1, "audio_speaker": {"volume": 30}, "screen": {"theme": "light"}}));
    assert_eq!(status(D2).await, json!({"device": D2, "audio_speaker": {"volume": 50}, "screen": {"theme": "dark"}}));

    // A failing handler: the SDK answers isError:true with its own prefix; exit 5, text on stdout.
    let failed = mcpdev(&hub, &["call", "spin_motor", "rpm=3", "-d", D2]).await;
    assert_eq!(failed.code, 5, "{failed:?}");
    assert_eq!(failed.stdout, "工具调用失败: motor stalled at 3 rpm\n");
    assert!(failed.stderr.contains("spin_motor reported an error (isError: true)"), "{}", failed.stderr);
    let failed = mcpdev(&hub, &["call", "spin_motor", "rpm=3", "-d", D2, "--json"]).await;
    assert_eq!(failed.code, 5, "{failed:?}");
    assert_eq!(failed.json(), json!({"device_id": D2, "content": [{"type": "text", "text": "工具调用失败: motor stalled at 3 rpm"}], "isError": true}));

    // Invalid calls are refused before anything is sent (7). The SDK does not validate, so a
    // volume of 101 would have been applied: the device still reports 30.
    let cases: [(&[&str], &str); 5] = [
        (&["call", "set_volume", "volume=101", "-d", D1], "must be at most 100"),
        (&["call", "set_volume", "volume=loud", "-d", D1], "volume"),
        (&["call", "spin_motor", "-d", D1], "required"),
        (&["call", "set_volum", "volume=1", "-d", D1], "did you mean 'set_volume'"),
        (&["call", "stop_music", "-d", D1], "device aa:bb:cc:00:00:01 has no tool 'stop_music'"),
    ];
    for (args, needle) in cases {
        let out = mcpdev(&hub, args).await;
        assert_eq!(out.code, 7, "{args:?}: {out:?}");
        assert!(out.stderr.contains(needle), "{args:?}: {}", out.stderr);
        assert!(out.stdout.is_empty(), "{args:?}: {out:?}");
    }
    assert_eq!(status(D1).await["audio_speaker"]["volume"], 30, "nothing was sent");
    // --no-validate sends it anyway, and the SDK's handler takes it as it is.
    let forced = mcpdev(&hub, &["call", "set_volume", "volume=101", "--no-validate", "-d", D1, "--json"]).await;
    assert_eq!((forced.code, text_json(&forced)), (0, json!({"volume": 101})), "{forced:?}");

    // Two devices and no --device: the caller must choose.
    let unchosen = mcpdev(&hub, &["call", "get_device_status"]).await;
    assert_eq!(unchosen.code, 2, "{unchosen:?}");
    assert!(unchosen.stderr.contains("choose one with --device"), "{}", unchosen.stderr);
    drop(devices);
}

#[tokio::test]
async fn calls_the_sdk_never_answers_or_answers_late_end_as_timeouts() {
    let hub = HubProcess::start(&[], &[]).await;
    let mut device = SdkDevices::start(&hub, &[D1]).await;
    assert_eq!(mcpdev(&hub, &["tools", "list", "-d", D1, "--wait", "20s"]).await.code, 0);

    // Every MCP frame of the device, in order, so the test sees what was (not) answered.
    let env = [("MCPDEV_HUB", hub.host_url.as_str())];
    let mut watch = common::spawn_mcpdev(&["watch", "--json", "--traffic", "-d", D1], &env);
    let mut events = BufReader::new(watch.child.stdout.take().unwrap()).lines();
    // The hub lists the tools once more after onboarding (to catch a list a gateway cut short):
    // that listing's frames are not what this test watches for.
    let mut next_event = async || -> Value {
        loop {
            let line = tokio::time::timeout(Duration::from_secs(20), events.next_line()).await.expect("no event in time").unwrap();
            let v: Value = serde_json::from_str(&line.expect("watch ended early")).unwrap();
            let listing = v["payload"]["method"] == "tools/list" || v["payload"]["result"].get("tools").is_some();
            if !listing {
                return v;
            }
        }
    };
    assert_eq!(common::unstamped(next_event().await), json!({"event": "watching", "device": D1}));

    // read_clock's handler returns a datetime: the SDK cannot serialise it, logs, and never
    // answers. The call ends with 6 once --timeout has passed, not much later.
    let started = Instant::now();
    let silent = mcpdev(&hub, &["call", "read_clock", "-d", D1, "--timeout", "1s"]).await;
    let took = started.elapsed();
    assert_eq!(silent.code, 6, "{silent:?}");
    assert!(silent.stderr.contains("device aa:bb:cc:00:00:01 did not answer within 1s"), "{}", silent.stderr);
    assert!(silent.stdout.is_empty(), "{silent:?}");
    assert!(took >= Duration::from_secs(1) && took < Duration::from_secs(10), "took {took:?}");
    let sent = next_event().await;
    assert_eq!((sent["direction"].as_str(), &sent["payload"]["params"]), (Some("out"), &json!({"name": "read_clock", "arguments": {}})));

    // wait_for_button answers only when released: after the caller gave up. The late reply is
    // seen and dropped, and the next call gets its own answer.
    let late = mcpdev(&hub, &["call", "wait_for_button", "-d", D1, "--timeout", "500ms"]).await;
    assert_eq!(late.code, 6, "{late:?}");
    let sent = next_event().await;
    assert_eq!(sent["payload"]["params"]["name"], "wait_for_button");
    let id = sent["payload"]["id"].clone();
    device.press_button().await;
    let reply = next_event().await;
    assert_eq!(reply["direction"], "in");
    assert_eq!(
        reply["payload"],
        json!({"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text", "text": "{\"pressed\": true}"}], "isError": false}})
    );
    assert_eq!(common::unstamped(next_event().await), json!({"event": "late_reply", "device_id": D1, "id": id}));
    let next = mcpdev(&hub, &["call", "get_device_status", "-d", D1, "--json"]).await;
    assert_eq!((next.code, text_json(&next)["device"].as_str()), (0, Some(D1)), "{next:?}");
    let (out, back) = (next_event().await, next_event().await);
    assert_eq!((out["direction"].as_str(), back["direction"].as_str()), (Some("out"), Some("in")));
    assert_eq!(back["payload"]["id"], out["payload"]["id"]);
    watch.child.kill().await.unwrap();

    // No read_clock reply ever came, and the device is still connected and served.
    let hello = mcpdev(&hub, &["hello", "--json", "-d", D1]).await;
    assert_eq!(hello.code, 0, "{hello:?}");
}
