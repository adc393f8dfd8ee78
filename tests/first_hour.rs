//! The first hour with mcpdev (issue 34), as a newcomer meets it: `sim` beside `serve --demo`, the
//! errors for the usual mistakes (the wrong port, no hub, a typo in an argument), and a hub that
//! is quiet when all is well. Each test drives the built binary against a real hub on ephemeral
//! loopback ports.

mod common;

use std::process::Stdio;
use std::time::Duration;

use common::{HubProcess, mcpdev};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};

const DEMO1: &str = "02:00:00:00:00:01";

/// `mcpdev ARGS` with exactly this environment beside the test's own (no `MCPDEV_HUB` unless given).
async fn run(args: &[&str], env: &[(&str, &str)]) -> common::Outcome {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcpdev"));
    cmd.args(args).env_remove("MCPDEV_HUB").env_remove("MCPDEV_SIM_URL").env_remove("MCPDEV_DEVICE_ADDR").env("NO_COLOR", "1").stdin(Stdio::null()).kill_on_drop(true);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = tokio::time::timeout(Duration::from_secs(60), cmd.output()).await.expect("command hung").unwrap();
    common::Outcome { code: out.status.code().unwrap_or(-1), stdout: String::from_utf8_lossy(&out.stdout).into_owned(), stderr: String::from_utf8_lossy(&out.stderr).into_owned() }
}

/// A running `mcpdev sim` whose stderr is kept: it says which Device-Ids it took.
struct Sim {
    child: tokio::process::Child,
    said: std::sync::Arc<std::sync::Mutex<String>>,
}

impl Sim {
    fn said(&self) -> String {
        self.said.lock().unwrap().clone()
    }
}

async fn start_sim(args: &[&str], env: &[(&str, &str)]) -> Sim {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcpdev"));
    cmd.arg("sim").args(args).env_remove("MCPDEV_SIM_URL").env_remove("MCPDEV_DEVICE_ADDR").env("NO_COLOR", "1");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped()).kill_on_drop(true).spawn().unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let said = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let into = said.clone();
    tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            let mut all = into.lock().unwrap();
            all.push_str(&line);
            all.push('\n');
        }
    });
    Sim { child, said }
}

async fn ready(hub: &HubProcess, id: &str) {
    let out = mcpdev(hub, &["tools", "list", "-d", id, "--wait", "20s", "--json"]).await;
    assert_eq!(out.code, 0, "{id} is ready: {out:?}");
}

#[tokio::test]
async fn sim_beside_the_demo_moves_on_to_a_free_id_and_prints_it() {
    let hub = HubProcess::start(&["--demo", "2"], &[]).await;
    let state = tempfile::tempdir().unwrap();
    let env = [("MCPDEV_STATE_DIR", state.path().to_str().unwrap())];
    // The demo has 01 and 02: the first sim moves on to 03, and says so.
    let a = start_sim(&["--url", &hub.device_url], &env).await;
    ready(&hub, "02:00:00:00:00:03").await;
    assert!(a.said().contains("02:00:00:00:00:02 is taken on the hub; this device is 02:00:00:00:00:03 instead"), "{}", a.said());
    // A second sim on this machine starts a block further on: no two runs share an id.
    let b = start_sim(&["--url", &hub.device_url], &env).await;
    ready(&hub, "02:00:00:01:86:a1").await;
    assert!(b.said().contains("from 02:00:00:01:86:a1"), "{}", b.said());
    let listed: Value = serde_json::from_str(&mcpdev(&hub, &["devices", "--json"]).await.stdout).unwrap();
    let ids: Vec<&str> = listed.as_array().unwrap().iter().map(|d| d["device_id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["02:00:00:00:00:01", "02:00:00:00:00:02", "02:00:00:00:00:03", "02:00:00:01:86:a1"], "both demo devices and both sims");
    for id in ["02:00:00:00:00:01", "02:00:00:00:00:02"] {
        assert_eq!(mcpdev(&hub, &["hello", "-d", id]).await.code, 0, "the demo device {id} is untouched");
    }
    drop((a.child, b.child));
}

#[tokio::test]
async fn sim_follows_mcpdev_device_addr_as_serve_does() {
    let hub = HubProcess::start(&[], &[]).await;
    let port = hub.device_url.rsplit(':').next().unwrap().split('/').next().unwrap().to_string();
    let state = tempfile::tempdir().unwrap();
    let addr = format!("0.0.0.0:{port}");
    let sim = start_sim(&["--device-id", "02:00:00:00:ad:d1"], &[("MCPDEV_STATE_DIR", state.path().to_str().unwrap()), ("MCPDEV_DEVICE_ADDR", &addr)]).await;
    ready(&hub, "02:00:00:00:ad:d1").await;
    drop(sim.child);
}

#[tokio::test]
async fn a_taken_device_id_is_refused_with_advice_that_breaks_no_other_device() {
    let state = tempfile::tempdir().unwrap();
    let env = [("MCPDEV_STATE_DIR", state.path().to_str().unwrap())];
    for approve_all in [false, true] {
        let hub = if approve_all { HubProcess::start(&["--demo", "1"], &[]).await } else { HubProcess::start_admitting(&["--demo", "1"], &[]).await };
        ready(&hub, DEMO1).await;
        let out = run(&["sim", "--url", &hub.device_url, "--device-id", DEMO1], &env).await;
        assert_eq!(out.code, 2, "a usage mistake (approve_all {approve_all}): {out:?}");
        assert!(out.stderr.contains("one of this hub's own virtual devices") && out.stderr.contains("--device-id"), "{out:?}");
        assert!(!out.stderr.contains("--rebind"), "no advice that would lock the demo device out: {out:?}");
        assert_eq!(mcpdev(&hub, &["hello", "-d", DEMO1]).await.code, 0, "the demo device is still there");
    }
    // A device connected with its own token: another one with its Device-Id is told to pick its own.
    let hub = HubProcess::start_admitting(&[], &[]).await;
    const REAL: &str = "aa:bb:cc:00:34:01";
    let approved = mcpdev(&hub, &["devices", "approve", REAL]).await;
    assert_eq!(approved.code, 0, "{approved:?}");
    let token = approved.stdout.trim().to_string();
    let mut with_token = env.to_vec();
    with_token.push(("MCPDEV_DEVICE_TOKEN", &token));
    let owner = start_sim(&["--url", &hub.device_url, "--device-id", REAL], &with_token).await;
    ready(&hub, REAL).await;
    let out = run(&["sim", "--url", &hub.device_url, "--device-id", REAL], &env).await;
    assert_eq!(out.code, 3, "refused for want of its credential: {out:?}");
    assert!(out.stderr.contains("belongs to a device connected to this hub") && out.stderr.contains("--device-id"), "{out:?}");
    assert_eq!(mcpdev(&hub, &["hello", "-d", REAL]).await.code, 0, "the connected device stays");
    drop(owner.child);
}

#[tokio::test]
async fn approving_rebinding_or_revoking_a_demo_device_is_refused_with_the_reason() {
    let hub = HubProcess::start_admitting(&["--demo", "1"], &[]).await;
    ready(&hub, DEMO1).await;
    for args in [&["devices", "approve", DEMO1][..], &["devices", "approve", DEMO1, "--rebind"], &["devices", "revoke", DEMO1]] {
        let out = mcpdev(&hub, args).await;
        assert_ne!(out.code, 0, "{args:?}: {out:?}");
        assert!(out.stderr.contains("one of this hub's own virtual devices (serve --demo)"), "{args:?}: {out:?}");
    }
    let admitted = mcpdev(&hub, &["devices", "admitted", "--json"]).await;
    assert!(!admitted.stdout.contains(DEMO1), "nothing was written for it: {admitted:?}");
    assert_eq!(mcpdev(&hub, &["call", "self.get_device_status", "-d", DEMO1]).await.code, 0, "it still answers");
}

#[tokio::test]
async fn the_wrong_port_is_named_for_the_cli_and_for_a_device() {
    let hub = HubProcess::start(&["--demo", "1"], &[]).await;
    let device_port = hub.device_url.trim_start_matches("ws://").split('/').next().unwrap().to_string();
    let wrong_hub = format!("http://{device_port}");
    for args in [&["tools", "list", "-d", DEMO1][..], &["devices"], &["check", "-d", DEMO1], &["dashboard", "--no-open"], &["watch"]] {
        let out = run(args, &[("MCPDEV_HUB", &wrong_hub), ("MCPDEV_RUNTIME_DIR", &hub.runtime_dir)]).await;
        assert_eq!(out.code, 2, "{args:?}: {out:?}");
        assert!(out.stderr.contains("is the hub's device listener") && out.stderr.contains("--hub http://127.0.0.1:8001"), "{args:?}: {out:?}");
    }
    let host = hub.host_url.trim_start_matches("http://");
    let out = run(&["sim", "--url", &format!("ws://{host}/xiaozhi/v1/")], &[]).await;
    assert_eq!(out.code, 2, "{out:?}");
    assert!(out.stderr.contains("is the hub's host listener") && out.stderr.contains("device listener"), "{out:?}");
    assert!(!out.stderr.contains("log-in") && !out.stderr.contains("dashboard log"), "{out:?}");
}

#[tokio::test]
async fn no_hub_is_the_same_words_and_code_for_every_command() {
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", free.local_addr().unwrap());
    drop(free);
    let runtime = tempfile::tempdir().unwrap();
    let env = [("MCPDEV_HUB", url.as_str()), ("MCPDEV_RUNTIME_DIR", runtime.path().to_str().unwrap())];
    for args in [&["tools", "list"][..], &["call", "self.get_device_status"], &["hello"], &["init"], &["devices"], &["devices", "pending"], &["watch"], &["check"], &["dashboard", "--no-open"]] {
        let out = run(args, &env).await;
        assert_eq!(out.code, 4, "{args:?}: {out:?}");
        assert!(out.stderr.contains(&format!("no hub is listening at {url}")), "{args:?}: {out:?}");
        assert!(!out.stderr.contains("token file"), "not blamed on a token file: {args:?}: {out:?}");
    }
}

#[tokio::test]
async fn the_same_mistake_gets_the_same_exit_code_in_check_and_call() {
    let hub = HubProcess::start(&["--demo", "2"], &[]).await;
    ready(&hub, DEMO1).await;
    ready(&hub, "02:00:00:00:00:02").await;
    let call = mcpdev(&hub, &["call", "self.get_device_status"]).await;
    let check = mcpdev(&hub, &["check"]).await;
    assert_eq!((call.code, check.code), (2, 2), "an ambiguous device is a usage mistake in both:\n{call:?}\n{check:?}");
    assert!(!check.stderr.contains("is `mcpdev serve` running"), "{check:?}");
    let missing = mcpdev(&hub, &["check", "-d", "aa:bb:cc:dd:ee:ff"]).await;
    assert_eq!(missing.code, mcpdev(&hub, &["call", "x", "-d", "aa:bb:cc:dd:ee:ff"]).await.code, "{missing:?}");
}

#[tokio::test]
async fn an_argument_the_tool_lacks_is_named_with_the_closest_one() {
    let hub = HubProcess::start(&["--demo", "1"], &[]).await;
    ready(&hub, DEMO1).await;
    for word in ["vol=50", "v=50", "Volume=50"] {
        let out = mcpdev(&hub, &["call", "self.audio_speaker.set_volume", word, "-d", DEMO1]).await;
        assert_eq!(out.code, 7, "{word}: {out:?}");
        let name = word.split('=').next().unwrap();
        assert!(out.stderr.contains(&format!("argument '{name}': not declared")) && out.stderr.contains("did you mean 'volume'?"), "{word}: {out:?}");
    }
    for flag in [&["--volume", "50"][..], &["--volume=50"]] {
        let mut args = vec!["call", "self.audio_speaker.set_volume"];
        args.extend_from_slice(flag);
        args.extend_from_slice(&["-d", DEMO1]);
        let out = mcpdev(&hub, &args).await;
        assert_eq!(out.code, 2, "{out:?}");
        assert!(out.stderr.contains("write volume=50"), "{out:?}");
        assert!(!out.stderr.contains("-- --volume"), "not clap's tip: {out:?}");
    }
}

/// `devices approve` of a `sim` refused over loopback names the loopback URL the sim used, not
/// the LAN address people on other machines use.
#[tokio::test]
async fn approving_a_refused_sim_names_the_address_it_used() {
    let hub = HubProcess::start_admitting(&["--device-addr", "0.0.0.0:0"], &[]).await;
    let port = hub.device_url.rsplit(':').next().unwrap().split('/').next().unwrap().to_string();
    let url = format!("ws://127.0.0.1:{port}/xiaozhi/v1/");
    let sim = run(&["sim", "--url", &url, "--device-id", "02:00:00:00:00:5a"], &[]).await;
    let code: String = sim.stderr.split("devices approve ").nth(1).unwrap_or_default().chars().take_while(char::is_ascii_digit).collect();
    assert_eq!(code.len(), 6, "the refused sim prints its code: {sim:?}");
    let approved = mcpdev(&hub, &["devices", "approve", &code]).await;
    assert_eq!(approved.code, 0, "{approved:?}");
    let line = approved.stderr.lines().find(|l| l.contains("mcpdev sim")).unwrap_or_else(|| panic!("a sim line: {approved:?}"));
    assert!(line.ends_with(&format!("--url {url}")), "{line}");
}

/// A CLI whose runtime directory is not the hub's finds no control token: it says so first, in a
/// few words, with what to do, and not the hub's words about remote tokens.
#[tokio::test]
async fn a_cli_with_another_runtime_directory_is_told_the_real_cause_first() {
    let hub = HubProcess::start(&["--demo", "1"], &[]).await;
    let elsewhere = tempfile::tempdir().unwrap();
    let dir = elsewhere.path().to_string_lossy().into_owned();
    let out = run(&["devices", "--hub", &hub.host_url], &[("MCPDEV_RUNTIME_DIR", &dir), ("MCPDEV_HUB_TOKEN", ""), ("MCPDEV_HUB_TOKEN_FILE", "")]).await;
    assert_eq!(out.code, 3, "{out:?}");
    let first = out.stderr.lines().next().unwrap_or_default();
    let port = hub.host_url.rsplit(':').next().unwrap();
    assert!(first.contains("none was sent") && first.contains(&format!("{dir}/control-{port}.token, which does not exist")), "the cause first: {out:?}");
    assert!(first.contains("MCPDEV_RUNTIME_DIR"), "what to do: {out:?}");
    assert!(!out.stderr.contains("remote-token create"), "not the hub's words for another machine: {out:?}");
    assert!(out.stderr.len() < 400, "short: {out:?}");
}

/// A slow tool's timeout says how to wait longer: `--timeout` (`--task` where the tool runs as a
/// task: `commands::call::tests`).
#[tokio::test]
async fn a_timeout_on_a_slow_tool_says_how_to_wait_longer() {
    let hub = HubProcess::start(&[], &[]).await;
    // A device that takes its time: it never answers a call.
    let _device = common::fake_device::FakeDevice::connect(&hub.device_url, "02:00:00:00:00:0c", vec![common::fake_device::tool("camera.take")]).await;
    let out = mcpdev(&hub, &["call", "camera.take", "n=1", "-d", "02:00:00:00:00:0c", "--timeout", "1s"]).await;
    assert_eq!(out.code, 6, "a timeout: {out:?}");
    assert!(out.stderr.contains("--timeout 1m"), "{out:?}");
    assert!(!out.stderr.contains("--task"), "a device tool called directly is no task: {out:?}");
    // The same through the hub's /mcp, as an MCP client.
    let mcp = format!("{}/mcp", hub.host_url);
    let out = mcpdev(&hub, &["call", "dev-02000000000c.camera.take", "n=1", "--url", &mcp, "--timeout", "1s"]).await;
    assert_eq!(out.code, 6, "a timeout: {out:?}");
    assert!(out.stderr.contains("--timeout 1m"), "{out:?}");
}

/// A value of the wrong type is told like one out of range: the range, and that nothing was sent.
#[tokio::test]
async fn a_value_of_the_wrong_type_gets_the_range_and_nothing_is_sent() {
    let hub = HubProcess::start(&["--demo", "1"], &[]).await;
    ready(&hub, DEMO1).await;
    let calls = || hub.metric("mcpdev_calls_total{outcome=\"ok\"}");
    let before = calls().await;
    for word in ["volume=abc", "volume=500", "volume=5.5"] {
        let out = mcpdev(&hub, &["call", "self.audio_speaker.set_volume", word, "-d", DEMO1]).await;
        assert_eq!(out.code, 7, "{word}: {out:?}");
        assert!(out.stderr.contains("nothing was sent") && out.stderr.contains("(allowed 0..100)"), "{word}: {out:?}");
    }
    assert_eq!(calls().await, before, "nothing reached the device");
    // The counter counts: a right value is a call.
    assert_eq!(mcpdev(&hub, &["call", "self.audio_speaker.set_volume", "volume=50", "-d", DEMO1]).await.code, 0);
    assert_eq!(calls().await, before + 1.0);
}

#[tokio::test]
async fn a_tool_description_reads_as_lines() {
    let hub = HubProcess::start(&["--demo", "1"], &[]).await;
    ready(&hub, DEMO1).await;
    let out = mcpdev(&hub, &["tools", "list", "-d", DEMO1]).await;
    assert_eq!(out.code, 0, "{out:?}");
    assert!(!out.stdout.contains("\\n"), "no literal \\n in a description: {}", out.stdout);
    // Piped, a row is one line (issue 45.8): the description's second line follows its first
    // on the tool's own row, as words.
    let status = out.stdout.lines().find(|l| l.starts_with("self.get_device_status")).expect("the tool's row");
    assert!(status.contains("etc. Use this tool for:"), "the description's lines are one row's words: {}", out.stdout);
    assert!(!out.stdout.lines().any(|l| l.trim_start().starts_with("Use this tool for:")), "no row is split: {}", out.stdout);
}

/// `serve` under an open-file limit: its note is info (not shown by default) when the ceiling is
/// ample, a warning when it is near for any fleet.
async fn serve_stderr(nofile: u32) -> String {
    let state = tempfile::tempdir().unwrap();
    let script = format!("ulimit -n {nofile} && exec \"$0\" serve --json --device-addr 127.0.0.1:0 --host-addr 127.0.0.1:0");
    let mut cmd = tokio::process::Command::new("/bin/sh");
    cmd.args(["-c", &script, env!("CARGO_BIN_EXE_mcpdev")]).env("MCPDEV_STATE_DIR", state.path()).env("MCPDEV_RUNTIME_DIR", state.path()).env("NO_COLOR", "1");
    let out = signalled_after_first_line(cmd, "\"listening\"", libc::SIGTERM).await;
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Runs `cmd`, waits for its first line on stdout (which must contain `expect`), sends it
/// `signal`, and returns how it ended: with 130, the exit code of a clean stop.
async fn signalled_after_first_line(mut cmd: tokio::process::Command, expect: &str, signal: i32) -> std::process::Output {
    let mut child = cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(true).spawn().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = tokio::time::timeout(Duration::from_secs(30), lines.next_line()).await.unwrap().unwrap().unwrap();
    assert!(first.contains(expect), "{first}");
    // SAFETY: a signal to our own child.
    unsafe { libc::kill(child.id().unwrap() as i32, signal) };
    let out = tokio::time::timeout(Duration::from_secs(30), child.wait_with_output()).await.unwrap().unwrap();
    assert_eq!(out.status.code(), Some(130), "{out:?}");
    out
}

#[tokio::test]
async fn serve_is_quiet_when_all_is_well_and_ends_by_signal_without_an_error_line() {
    let quiet = serve_stderr(4096).await;
    assert!(!quiet.contains("WARN") && !quiet.contains("open-file limit"), "a sound limit is no warning:\n{quiet}");
    assert!(!quiet.contains("{\"error\""), "SIGTERM, the caller's own signal, is no error line in --json mode:\n{quiet}");
    let near = serve_stderr(600).await;
    assert!(near.contains("WARN") && near.contains("open-file limit"), "a ceiling of a few hundred devices is:\n{near}");
}

#[tokio::test]
async fn watch_json_ended_by_a_signal_writes_no_error_line() {
    let hub = HubProcess::start(&[], &[]).await;
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcpdev"));
    cmd.args(["watch", "--json"]).env("MCPDEV_HUB", &hub.host_url).env("MCPDEV_RUNTIME_DIR", &hub.runtime_dir);
    let out = signalled_after_first_line(cmd, "\"watching\"", libc::SIGINT).await;
    assert_eq!(String::from_utf8_lossy(&out.stderr), "", "no {{\"error\":…}} line after Ctrl-C");
}
