//! What people and scripts see from the real binary: `watch` shows each event once and stamps
//! its JSON, Ctrl-C ends every long-running command with 130, piped tables are plain text, and
//! man pages and completions come from the binary itself.

mod common;

use std::time::Duration;

use common::{HubProcess, mcpdev, spawn_mcpdev};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};

const DEV: &str = "02:00:00:00:00:01";

/// Reads NDJSON lines until `until` holds for one, with a deadline; returns every line read.
async fn read_until(lines: &mut tokio::io::Lines<BufReader<tokio::process::ChildStdout>>, until: impl Fn(&Value) -> bool) -> Vec<Value> {
    let mut seen = Vec::new();
    loop {
        let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line()).await.expect("an event in time").unwrap().expect("watch is running");
        let v: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
        let done = until(&v);
        seen.push(v);
        if done {
            return seen;
        }
    }
}

fn interrupt(child: &tokio::process::Child) {
    let pid = child.id().expect("running").to_string();
    assert!(std::process::Command::new("kill").args(["-INT", &pid]).status().unwrap().success());
}

#[tokio::test]
async fn watch_shows_a_notification_once_with_timestamps_and_ctrl_c_exits_130() {
    let hub = HubProcess::start(&["--demo", "1"], &[]).await;
    assert_eq!(mcpdev(&hub, &["hello", "-d", DEV, "--wait", "10s"]).await.code, 0);
    let mut watch = spawn_mcpdev(&["watch", "--json", "--traffic", "-d", DEV], &[("MCPDEV_HUB", hub.host_url.as_str())]);
    let mut lines = BufReader::new(watch.child.stdout.take().unwrap()).lines();
    read_until(&mut lines, |v| v["event"] == "watching").await;

    // Two calls: each changes the volume, and the device notifies the change.
    for volume in ["21", "22"] {
        let out = mcpdev(&hub, &["call", "self.audio_speaker.set_volume", &format!("volume={volume}"), "-d", DEV]).await;
        assert_eq!(out.code, 0, "{out:?}");
    }
    let events = read_until(&mut lines, |v| v["event"] == "notification" && v["params"]["newState"] == 22).await;
    let about = |state: i64| {
        events.iter().filter(|v| v.to_string().contains("notifications/state_changed") && (v["params"]["newState"] == state || v["payload"]["params"]["newState"] == state)).count()
    };
    assert_eq!(about(21), 1, "the first notification once: {events:#?}");
    assert_eq!(about(22), 1, "the second notification once: {events:#?}");
    assert!(events.iter().any(|v| v["event"] == "traffic" && v["direction"] == "out"), "--traffic still shows the calls: {events:#?}");
    for v in &events {
        let ts = v["ts"].as_str().unwrap_or_else(|| panic!("no ts: {v}"));
        humantime::parse_rfc3339(ts).unwrap_or_else(|e| panic!("ts {ts:?} is not RFC 3339: {e}"));
    }

    interrupt(&watch.child);
    let status = tokio::time::timeout(Duration::from_secs(10), watch.child.wait()).await.expect("watch stops").unwrap();
    assert_eq!(status.code(), Some(130));
}

#[tokio::test]
async fn ctrl_c_ends_sim_and_serve_with_130() {
    let hub = HubProcess::start(&[], &[]).await;
    let mut sim = spawn_mcpdev(&["sim", "--url", &hub.device_url, "--device-id", "02:00:00:00:00:31"], &[]);
    assert_eq!(mcpdev(&hub, &["hello", "-d", "02:00:00:00:00:31", "--wait", "10s"]).await.code, 0);
    interrupt(&sim.child);
    let status = tokio::time::timeout(Duration::from_secs(10), sim.child.wait()).await.expect("sim stops").unwrap();
    assert_eq!(status.code(), Some(130), "sim");

    let mut hub = hub;
    interrupt(&hub.running.child);
    let status = tokio::time::timeout(Duration::from_secs(10), hub.running.child.wait()).await.expect("serve stops").unwrap();
    assert_eq!(status.code(), Some(130), "serve");
}

#[tokio::test]
async fn a_piped_tool_table_is_plain_aligned_text() {
    let hub = HubProcess::start(&["--demo", "1"], &[]).await;
    let out = mcpdev(&hub, &["tools", "list", "-d", DEV, "--wait", "10s"]).await;
    assert_eq!(out.code, 0, "{out:?}");
    assert!(!out.stdout.contains(['│', '─', '┆', '╞']), "box drawing in piped output:\n{}", out.stdout);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert!(lines[0].starts_with("tool") && lines[0].contains("description"), "{}", out.stdout);
    let column = lines[0].find("description").unwrap();
    let row = lines.iter().find(|l| l.starts_with("self.audio_speaker.set_volume")).expect("the volume tool on a line of its own");
    assert_eq!(row.char_indices().nth(column).map(|(_, c)| c), Some('S'), "its description starts under the header:\n{}", out.stdout);
    assert!(lines.iter().all(|l| l.trim_end() == *l), "no trailing spaces");
}

#[tokio::test]
async fn man_pages_and_completions_come_from_the_binary() {
    let run = |args: &[&str]| std::process::Command::new(env!("CARGO_BIN_EXE_mcpdev")).args(args).output().unwrap();
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let man = run(&["man"]);
    assert!(man.status.success());
    assert_eq!(String::from_utf8(man.stdout).unwrap(), std::fs::read_to_string(repo.join("man/mcpdev.1")).unwrap(), "`mcpdev man` prints man/mcpdev.1");
    let man_call = run(&["man", "call"]);
    assert!(man_call.status.success());
    assert_eq!(String::from_utf8(man_call.stdout).unwrap(), std::fs::read_to_string(repo.join("man/mcpdev-call.1")).unwrap());
    let unknown = run(&["man", "no-such-command"]);
    assert_eq!(unknown.status.code(), Some(2), "an unknown page is a usage error");
    for (shell, file) in [("bash", "mcpdev.bash"), ("zsh", "_mcpdev"), ("fish", "mcpdev.fish"), ("powershell", "_mcpdev.ps1"), ("elvish", "mcpdev.elv")] {
        let out = run(&["completions", shell]);
        assert!(out.status.success(), "{shell}");
        let text = String::from_utf8(out.stdout).unwrap();
        assert_eq!(text, std::fs::read_to_string(repo.join("completions").join(file)).unwrap(), "`mcpdev completions {shell}` prints completions/{file}");
        assert!(!text.contains("generate-assets"), "{shell} completions offer the maintainers' command");
    }
}

/// Refused credentials exit 3 (the README's table) and say what happened in words: no Rust type
/// names, whichever way the refusal comes (401 without a token, 401 with a wrong one, 403 for an
/// Origin the hub does not allow, a refused SSE stream).
#[tokio::test]
async fn refused_credentials_exit_3_in_plain_words() {
    let hub = HubProcess::start(&["--demo", "1"], &[("MCPDEV_MCP_TOKEN", "right-token")]).await;
    let mcp = format!("{}/mcp", hub.host_url);
    let sse = format!("{}/sse", hub.host_url);
    let cases: [(&str, Vec<&str>, &str); 4] = [
        ("no token", vec!["tools", "list", "--url", &mcp], "asks for credentials (HTTP 401)"),
        ("wrong token", vec!["call", "list_devices", "--url", &mcp, "-H", "Authorization: Bearer wrong"], "HTTP 401"),
        ("foreign origin", vec!["init", "--url", &mcp, "-H", "Authorization: Bearer right-token", "-H", "Origin: http://evil.example"], "is not allowed"),
        ("legacy SSE", vec!["tools", "list", "--url", &sse], "401"),
    ];
    for (what, args, says) in cases {
        let out = mcpdev(&hub, &args).await;
        assert_eq!(out.code, 3, "{what}: {out:?}");
        assert!(out.stderr.contains(says), "{what}: {}", out.stderr);
        for noise in ["rmcp::", "reqwest::", "WorkerTransport", "Transport ["] {
            assert!(!out.stderr.contains(noise), "{what}: a Rust type name in {:?}", out.stderr);
        }
    }
    let ok = mcpdev(&hub, &["tools", "list", "--url", &mcp, "-H", "Authorization: Bearer right-token"]).await;
    assert_eq!(ok.code, 0, "{ok:?}");
}

/// `sim` stops at once on an answer that retrying cannot change, says the backend's reason, and
/// exits with the code for it; it does not retry forever.
#[tokio::test]
async fn sim_stops_on_permanent_errors_with_the_reason() {
    let hub = HubProcess::start_admitting(&["--mqtt", "embedded", "--mqtt-listen", "127.0.0.1:0"], &[("MCPDEV_DEVICE_TOKEN", "the-token")]).await;
    let broker = hub.info["mqtt"].as_str().expect("the listening line names the broker").to_string();
    let http_url = hub.device_url.replace("ws://", "http://");
    let cases: [(&str, Vec<&str>, i32, &str); 4] = [
        ("no token over WebSocket", vec!["sim", "--url", &hub.device_url], 3, "device token"),
        ("wrong token over WebSocket", vec!["sim", "--url", &hub.device_url], 3, "not admitted"),
        ("an http:// URL", vec!["sim", "--url", &http_url], 2, "cannot be used"),
        ("wrong MQTT password", vec!["sim", "--mqtt", &broker], 3, "refused this device's credentials"),
    ];
    for (what, args, code, says) in cases {
        let env: Vec<(&str, &str)> = if what.starts_with("wrong") { vec![("MCPDEV_DEVICE_TOKEN", "not-the-token")] } else { vec![] };
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcpdev"));
        cmd.args(&args).env_remove("MCPDEV_DEVICE_TOKEN").envs(env).stdin(std::process::Stdio::null()).kill_on_drop(true);
        let out = tokio::time::timeout(Duration::from_secs(20), cmd.output()).await.unwrap_or_else(|_| panic!("{what}: sim kept retrying")).unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{what}: {stderr}");
        assert!(stderr.contains(says), "{what}: {stderr}");
    }
}

/// `serve --json` logs each device's life as NDJSON after its `listening` line: connected, ready
/// and disconnected, each once, each with a timestamp; the listening line names addresses a
/// device can reach.
#[tokio::test]
async fn serve_json_logs_device_lifecycle_with_timestamps() {
    let mut hub = HubProcess::start(&[], &[]).await;
    let urls = hub.info["device_urls"].as_array().expect("device_urls in the listening line");
    assert_eq!(urls[0].as_str(), Some(hub.device_url.as_str()), "bound to 127.0.0.1, the one URL is the bound one");
    const SIM: &str = "02:00:00:00:00:41";
    let mut sim = spawn_mcpdev(&["sim", "--url", &hub.device_url, "--device-id", SIM], &[]);
    let mut next = async || -> Value {
        let line = tokio::time::timeout(Duration::from_secs(30), hub.log.next_line()).await.expect("a log line in time").unwrap().expect("the hub runs");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not NDJSON ({e}): {line}"))
    };
    let mut seen = Vec::new();
    for want in ["connected", "ready"] {
        loop {
            let v = next().await;
            let event = v["event"].as_str().unwrap_or_default().to_string();
            humantime::parse_rfc3339(v["ts"].as_str().unwrap_or_else(|| panic!("no ts: {v}"))).unwrap();
            assert_eq!(v["device_id"], SIM, "{v}");
            assert!(!["traffic", "notification", "hello"].contains(&event.as_str()), "the log is about lifecycle, not traffic: {v}");
            seen.push(event.clone());
            if event == want {
                break;
            }
        }
    }
    sim.child.kill().await.unwrap();
    loop {
        let v = next().await;
        if v["event"] == "disconnected" {
            assert_eq!(v["device_id"], SIM);
            break;
        }
    }
    assert_eq!(seen.iter().filter(|e| *e == "connected").count(), 1, "{seen:?}");
}

/// A reader that goes away (`mcpdev tools list | head -1`) ends a command quietly with 141, as
/// SIGPIPE ends `cat`: never a panic, never a 0. Stdout here is a pipe whose reading end is
/// already closed, so every write fails.
#[tokio::test]
async fn a_reader_that_goes_away_ends_the_command_quietly_with_141() {
    let hub = HubProcess::start(&["--demo", "1"], &[]).await;
    assert_eq!(mcpdev(&hub, &["hello", "-d", DEV, "--wait", "10s"]).await.code, 0);
    let commands: [&[&str]; 5] = [
        &["completions", "bash"],
        &["man"],
        &["tools", "list", "-d", DEV, "--json"],
        &["tools", "list", "-d", DEV],
        &["call", "self.get_device_status", "-d", DEV, "--json"],
    ];
    for args in commands {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_mcpdev"))
            .args(args)
            .env("MCPDEV_HUB", &hub.host_url)
            .env("MCPDEV_RUNTIME_DIR", &hub.runtime_dir)
            .stdout(writer)
            .stderr(std::process::Stdio::piped())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(141), "mcpdev {args:?}: {stderr}");
        assert!(!stderr.contains("panicked") && !stderr.contains("Broken pipe"), "mcpdev {args:?}: {stderr}");
    }
}
