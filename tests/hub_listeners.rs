//! Issue 10 items 5, 7 and 9: slow or hostile connections cannot starve the hub, the host
//! listener serves only the hub's user, and secrets stay out of argv warnings and logs.
//! Raw TCP sockets are the hostile peers; every wait has a deadline.

mod common;

use std::net::SocketAddr;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::raw_http::{addr_of, connect_from};
use common::{HubProcess, mcpdev};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

const DEADLINE: Duration = Duration::from_secs(20);

/// Reads until the hub closes the connection; fails the test if it does not within `within`.
/// Returns what was read.
async fn closed_within(tcp: &mut TcpStream, within: Duration) -> Vec<u8> {
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    let deadline = tokio::time::Instant::now() + within;
    loop {
        match tokio::time::timeout_at(deadline, tcp.read(&mut buf)).await {
            Err(_) => panic!("the hub kept the connection open past {within:?} (read so far: {:?})", String::from_utf8_lossy(&got)),
            Ok(Ok(0)) | Ok(Err(_)) => return got,
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
        }
    }
}

/// A WebSocket upgrade that names a device, from the loopback address `from`; the hub's answer head.
async fn upgrade_from(from: &str, to: SocketAddr, mac: &str) -> (TcpStream, String) {
    let mut tcp = connect_from(from, to).await;
    let req = format!(
        "GET /xiaozhi/v1/ HTTP/1.1\r\nHost: {to}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nDevice-Id: {mac}\r\nClient-Id: 6f2a-{mac}\r\nProtocol-Version: 1\r\n\r\n"
    );
    tcp.write_all(req.as_bytes()).await.unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while !head.ends_with(b"\r\n\r\n") {
        match tokio::time::timeout_at(deadline, tcp.read(&mut byte)).await.expect("an answer in time") {
            Ok(1) => head.push(byte[0]),
            _ => break,
        }
    }
    (tcp, String::from_utf8_lossy(&head).into_owned())
}

/// `POST /mcp` initialize over a raw socket; the status code of the answer.
async fn post_mcp_initialize(host_url: &str) -> u16 {
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    let to = addr_of(host_url);
    let mut tcp = connect_from("127.0.0.1", to).await;
    let req = format!(
        "POST /mcp HTTP/1.1\r\nHost: {to}\r\nAccept: application/json, text/event-stream\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    tcp.write_all(req.as_bytes()).await.unwrap();
    let mut head = [0u8; 12];
    tokio::time::timeout(DEADLINE, tcp.read_exact(&mut head)).await.expect("/mcp answered in time").expect("/mcp answered");
    String::from_utf8_lossy(&head[9..12]).parse().unwrap()
}

/// A hub started by `cmd` (whose stdout and stderr this takes): the child, its `listening` line,
/// and its whole log (stderr, read as it comes so a full pipe never stalls the hub) once it ends.
async fn start_logged(mut cmd: tokio::process::Command) -> (tokio::process::Child, serde_json::Value, tokio::task::JoinHandle<String>) {
    let mut child = cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(true).spawn().unwrap();
    let mut stdout = tokio::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    tokio::time::timeout(DEADLINE, tokio::io::AsyncBufReadExt::read_line(&mut stdout, &mut line)).await.expect("hub started").unwrap();
    let info: serde_json::Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("no listening line ({e}): {line:?}"));
    let mut stderr = child.stderr.take().unwrap();
    let log = tokio::spawn(async move {
        let _keep_stdout_open = stdout;
        let mut all = Vec::new();
        let _ = stderr.read_to_end(&mut all).await;
        String::from_utf8_lossy(&all).into_owned()
    });
    (child, info, log)
}

#[tokio::test]
async fn slow_headers_are_closed_after_the_header_timeout_on_both_listeners() {
    let hub = HubProcess::start(&[], &[("MCPDEV_HEADER_TIMEOUT", "1s")]).await;
    let (devices, host) = (addr_of(&hub.device_url), addr_of(&hub.host_url));
    let started = Instant::now();
    let mut slow = Vec::new();
    for (i, to) in [devices, host].into_iter().cycle().take(20).enumerate() {
        let mut tcp = connect_from("127.0.0.1", to).await;
        // Half a header, or (every fifth) nothing at all.
        if i % 5 != 0 {
            tcp.write_all(b"POST /xiaozhi/ota/ HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Ty").await.unwrap();
        }
        slow.push(tcp);
    }
    for tcp in &mut slow {
        // hyper answers 408 or just closes; either way the socket ends.
        let got = closed_within(tcp, Duration::from_secs(8)).await;
        let text = String::from_utf8_lossy(&got);
        assert!(got.is_empty() || text.starts_with("HTTP/1.1 408"), "{text}");
    }
    assert!(started.elapsed() >= Duration::from_millis(900), "closed before the timeout: {:?}", started.elapsed());
}

#[tokio::test]
async fn a_body_that_never_completes_is_cut_off() {
    let hub = HubProcess::start(&[], &[("MCPDEV_BODY_TIMEOUT", "1s")]).await;
    let mut tcp = connect_from("127.0.0.1", addr_of(&hub.device_url)).await;
    tcp.write_all(b"POST /xiaozhi/ota/ HTTP/1.1\r\nHost: 127.0.0.1\r\nDevice-Id: 02:00:00:00:00:09\r\nContent-Length: 100\r\n\r\n{").await.unwrap();
    let got = closed_within(&mut tcp, Duration::from_secs(8)).await;
    let text = String::from_utf8_lossy(&got);
    assert!(text.is_empty() || text.starts_with("HTTP/1.1 4"), "{text}");
}

#[tokio::test]
async fn websockets_that_never_say_hello_are_closed_at_the_hello_deadline() {
    let hub = HubProcess::start(&[], &[("MCPDEV_HELLO_TIMEOUT", "1s"), ("MCPDEV_MAX_PRE_HELLO_PER_PEER", "100")]).await;
    let devices = addr_of(&hub.device_url);
    let mut silent = Vec::new();
    for i in 0..10 {
        let (tcp, head) = upgrade_from("127.0.0.1", devices, &format!("02:00:00:00:01:{i:02x}")).await;
        assert!(head.starts_with("HTTP/1.1 101"), "{head}");
        silent.push(tcp);
    }
    for tcp in &mut silent {
        // What comes before the end is the server's close frame.
        closed_within(tcp, Duration::from_secs(8)).await;
    }
}

#[tokio::test]
async fn a_flood_of_pre_hello_connections_from_one_peer_locks_out_nobody_else() {
    let hub = HubProcess::start(
        &[],
        &[
            ("MCPDEV_MAX_PRE_HELLO_PER_PEER", "4"),
            ("MCPDEV_MAX_QUEUED_PER_PEER", "4"),
            ("MCPDEV_ACCEPT_QUEUE_TIMEOUT", "10s"),
            ("MCPDEV_HELLO_TIMEOUT", "60s"),
        ],
    )
    .await;
    let devices = addr_of(&hub.device_url);
    let mut held = Vec::new();
    for i in 0..4 {
        let (tcp, head) = upgrade_from("127.0.0.2", devices, &format!("02:00:00:00:02:{i:02x}")).await;
        assert!(head.starts_with("HTTP/1.1 101"), "within the cap: {head}");
        held.push(tcp);
    }
    // Beyond the cap, the same peer's next 4 connections wait their turn: their requests are not
    // read while the peer's 4 silent connections hold its slots.
    let queued_at = Instant::now();
    let mut queued = Vec::new();
    for i in 4..8 {
        let mut tcp = connect_from("127.0.0.2", devices).await;
        let req = format!("GET /xiaozhi/v1/ HTTP/1.1\r\nHost: {devices}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nDevice-Id: 02:00:00:00:02:{i:02x}\r\n\r\n");
        tcp.write_all(req.as_bytes()).await.unwrap();
        queued.push(tcp);
    }
    // Beyond its share of the queue, a connection is closed at once, before any HTTP.
    for i in 8..16 {
        let mut tcp = connect_from("127.0.0.2", devices).await;
        let got = closed_within(&mut tcp, Duration::from_secs(2)).await;
        assert!(got.is_empty(), "connection {i} beyond the queue got an answer: {:?}", String::from_utf8_lossy(&got));
    }
    // Refused at once, not at the queue's 10 s deadline (a margin load cannot cross).
    assert!(queued_at.elapsed() < Duration::from_secs(7), "the refusals beyond the queue were not immediate: {:?}", queued_at.elapsed());
    // Another peer (the virtual device from 127.0.0.1) still onboards, and /mcp still answers.
    let _sim = common::spawn_mcpdev(&["sim", "--url", &hub.device_url, "--device-id", "02:00:00:00:00:77"], &[]);
    let out = mcpdev(&hub, &["tools", "list", "-d", "02:00:00:00:00:77", "--wait", "20s", "--json"]).await;
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(post_mcp_initialize(&hub.host_url).await, 200);
    // The waiting ones never got a turn (the flood held its slots): closed at the queue deadline,
    // with no answer, and not before it.
    for tcp in &mut queued {
        let got = closed_within(tcp, Duration::from_secs(20)).await;
        assert!(got.is_empty(), "a queued connection was served while its peer's slots were held: {:?}", String::from_utf8_lossy(&got));
    }
    assert!(queued_at.elapsed() >= Duration::from_millis(9900), "closed before the queue deadline: {:?}", queued_at.elapsed());
    drop(held);
}

#[tokio::test]
async fn a_fleet_behind_one_address_waits_its_turn_instead_of_being_reset() {
    // Caps far below the fleet: 60 devices from 127.0.0.1, 2 at a time before hello.
    let hub = HubProcess::start(&[], &[("MCPDEV_MAX_PRE_HELLO_PER_PEER", "2"), ("MCPDEV_MAX_PRE_HELLO", "3")]).await;
    let mut sim = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcpdev"));
    sim.args(["sim", "--url", &hub.device_url, "--device-id", "02:00:00:00:10:00", "--count", "60"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut sim = sim.spawn().unwrap();
    let mut stderr = sim.stderr.take().unwrap();
    let sim_log = tokio::spawn(async move {
        let mut all = Vec::new();
        let _ = stderr.read_to_end(&mut all).await;
        String::from_utf8_lossy(&all).into_owned()
    });
    let deadline = Instant::now() + DEADLINE;
    let ready = loop {
        let out = mcpdev(&hub, &["devices", "--json"]).await;
        let ready = out.json().as_array().map_or(0, |a| a.iter().filter(|d| d["phase"] == "ready").count());
        if ready == 60 || Instant::now() > deadline {
            break ready;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(ready, 60, "not every device onboarded in time");
    let _ = sim.start_kill();
    let log = tokio::time::timeout(DEADLINE, sim_log).await.expect("the simulator's log ends").unwrap();
    // No device saw its connection reset or refused: each one waited, then got in at once.
    assert!(!log.contains("connection failed"), "{log}");
}

#[tokio::test]
async fn the_host_listener_keeps_a_descriptor_reserve_under_a_device_flood() {
    // The hub runs with 300 descriptors (soft = hard, so it cannot raise them): devices get 44.
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = tokio::process::Command::new("sh");
    cmd.args(["-c", "ulimit -n 300 && exec \"$0\" \"$@\"", env!("CARGO_BIN_EXE_mcpdev")])
        .args(["serve", "--json", "-v", "--device-addr", "127.0.0.1:0", "--host-addr", "127.0.0.1:0"])
        .env("MCPDEV_MAX_PRE_HELLO_PER_PEER", "1000")
        .env("MCPDEV_MAX_PRE_HELLO", "1000")
        .env("MCPDEV_RUNTIME_DIR", dir.path());
    let (mut child, info, log) = start_logged(cmd).await;
    let devices = addr_of(info["devices"].as_str().unwrap());
    let host_url = info["host"].as_str().unwrap().to_string();
    // 400 connections (more than the hub's descriptors) from several loopback peers, all silent.
    let mut flood = Vec::new();
    for i in 0..400 {
        flood.push(connect_from(&format!("127.0.1.{}", 1 + i % 50), devices).await);
    }
    // The flood's excess was closed by the hub at once, so the count open stays within 44.
    let mut open = 0;
    for tcp in &mut flood {
        let mut b = [0u8; 1];
        // Still open: nothing to read (the refused ones read as closed at once).
        if tokio::time::timeout(Duration::from_millis(20), tcp.read(&mut b)).await.is_err() {
            open += 1;
        }
    }
    assert!(open <= 44, "{open} device-side connections held with 300 descriptors");
    assert!(open >= 30, "only {open} connections admitted: the cap is lower than expected");
    assert_eq!(post_mcp_initialize(&host_url).await, 200, "/mcp must still answer");
    let _ = child.start_kill();
    let stderr = tokio::time::timeout(DEADLINE, log).await.expect("log ends with the hub").unwrap();
    assert!(stderr.contains("fd_limit=300") && stderr.contains("device_connections=44"), "{stderr}");
    // The ceiling speaks: at start-up, what the limit allows and where to read how to raise it;
    // then the refusals at it, rate-limited (hundreds refused, a line or two written).
    assert!(stderr.contains("the open-file limit (300) allows 44 devices at most") && stderr.contains("Descriptor limits"), "{stderr}");
    let refusals = stderr.lines().filter(|l| l.contains("device refused at the connection ceiling")).count();
    assert!((1..=2).contains(&refusals), "{refusals} refusal lines: {stderr}");
    assert!(info["max_device_connections"] == 44 && info["fd_limit"] == 300, "the listening line says the ceiling: {info}");
}

// ---- Item 7: the host listener serves only the hub's user.

fn control_request(host_url: &str, origin: Option<&str>, token: Option<&str>) -> tokio_tungstenite::tungstenite::handshake::client::Request {
    let mut req = format!("{}/api/v1/link", host_url.replace("http://", "ws://")).into_client_request().unwrap();
    if let Some(o) = origin {
        req.headers_mut().insert("Origin", o.parse().unwrap());
    }
    if let Some(t) = token {
        req.headers_mut().insert("Authorization", format!("Bearer {t}").parse().unwrap());
    }
    req
}

async fn status_of(req: tokio_tungstenite::tungstenite::handshake::client::Request) -> (u16, String) {
    match tokio::time::timeout(DEADLINE, tokio_tungstenite::connect_async(req)).await.expect("answer in time") {
        Ok((_, resp)) => (resp.status().as_u16(), String::new()),
        Err(tokio_tungstenite::tungstenite::Error::Http(resp)) => {
            (resp.status().as_u16(), resp.body().as_deref().map(String::from_utf8_lossy).unwrap_or_default().into_owned())
        }
        Err(e) => panic!("{e}"),
    }
}

#[tokio::test]
async fn the_control_api_needs_the_hubs_token_even_from_a_localhost_page() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = dir.path().to_str().unwrap();
    let hub = HubProcess::start(&["--demo", "1"], &[("MCPDEV_RUNTIME_DIR", runtime)]).await;
    let port = addr_of(&hub.host_url).port();
    let file = dir.path().join(format!("control-{port}.token"));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&file).unwrap().permissions().mode() & 0o777, 0o600);
    }
    // The token, then the address the hub bound (the CLI sends the token only there).
    let contents = std::fs::read_to_string(&file).unwrap();
    let token = contents.lines().next().unwrap().to_string();
    assert_eq!(contents.lines().nth(1), Some(addr_of(&hub.host_url).to_string().as_str()), "{contents}");
    let (status, body) = status_of(control_request(&hub.host_url, Some("http://localhost:1234"), None)).await;
    assert_eq!(status, 401, "{body}");
    assert!(body.contains(&file.display().to_string()), "the refusal says where the CLI looks: {body}");
    assert_eq!(status_of(control_request(&hub.host_url, None, Some("not-the-token"))).await.0, 401);
    assert_eq!(status_of(control_request(&hub.host_url, Some("http://localhost:1234"), Some(token.trim()))).await.0, 101);

    // The CLI finds the token by itself, or takes MCPDEV_HUB_TOKEN; a wrong one is exit 3.
    let run = |env: &'static [(&'static str, &'static str)]| {
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcpdev"));
        cmd.args(["tools", "list", "--wait", "20s", "--hub", &hub.host_url]).env("MCPDEV_RUNTIME_DIR", runtime).env_remove("MCPDEV_HUB_TOKEN");
        for (k, v) in env {
            cmd.env(k, v);
        }
        async move { tokio::time::timeout(DEADLINE, cmd.kill_on_drop(true).output()).await.expect("command ended").unwrap() }
    };
    let ok = run(&[]).await;
    assert_eq!(ok.status.code(), Some(0), "{}", String::from_utf8_lossy(&ok.stderr));
    let wrong = run(&[("MCPDEV_HUB_TOKEN", "wrong")]).await;
    assert_eq!(wrong.status.code(), Some(3), "{}", String::from_utf8_lossy(&wrong.stderr));
    assert!(String::from_utf8_lossy(&wrong.stderr).contains("401"), "{}", String::from_utf8_lossy(&wrong.stderr));

    // The file goes with the hub.
    let HubProcess { mut running, .. } = hub;
    kill_gently(&mut running.child).await;
    assert!(!file.exists(), "the token file outlived the hub");
}

/// SIGINT (the hub's Ctrl-C path), then a deadline for it to exit.
async fn kill_gently(child: &mut tokio::process::Child) {
    let pid = child.id().unwrap() as i32;
    // SAFETY: sending a signal to our own child process.
    unsafe { libc::kill(pid, libc::SIGINT) };
    tokio::time::timeout(DEADLINE, child.wait()).await.expect("the hub exits on Ctrl-C").unwrap();
}

/// How to run a command as `nobody`, if this machine lets us; otherwise why not.
fn as_nobody() -> Result<Vec<String>, String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err("not root, so it cannot run a command as another user".into());
    }
    if !std::path::Path::new("/proc/net/tcp").exists() {
        return Err("no /proc/net/tcp".into());
    }
    let found = |p: &str| std::process::Command::new(p).arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok();
    if found("setpriv") {
        return Ok(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"].map(String::from).to_vec());
    }
    if found("runuser") {
        return Ok(["runuser", "-u", "nobody", "--"].map(String::from).to_vec());
    }
    Err("neither setpriv nor runuser is installed".into())
}

#[tokio::test]
async fn another_local_user_is_refused_by_the_control_api_and_mcp() {
    let prefix = match as_nobody() {
        Ok(p) => p,
        Err(why) => {
            eprintln!("SKIPPED another_local_user_is_refused_by_the_control_api_and_mcp: {why}");
            return;
        }
    };
    let dir = tempfile::tempdir().unwrap();
    // The binary where `nobody` can run it, and a home it can use.
    let bin = dir.path().join("mcpdev");
    std::fs::copy(env!("CARGO_BIN_EXE_mcpdev"), &bin).unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir(&home).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        for p in [dir.path(), &home] {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o777)).unwrap();
        }
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let runtime = dir.path().join("runtime");
    let hub = HubProcess::start(&["--demo", "1"], &[("MCPDEV_RUNTIME_DIR", runtime.to_str().unwrap())]).await;
    let run = |args: Vec<String>, nobody: bool| {
        let mut argv: Vec<String> = if nobody { prefix.clone() } else { Vec::new() };
        argv.push(bin.display().to_string());
        argv.extend(args);
        let mut cmd = tokio::process::Command::new(&argv[0]);
        cmd.args(&argv[1..])
            .env("HOME", &home)
            .env("MCPDEV_RUNTIME_DIR", &runtime)
            .env("MCPDEV_STATE_DIR", home.join("state"))
            .env_remove("MCPDEV_HUB_TOKEN")
            .env("NO_COLOR", "1")
            .current_dir(&home)
            .stdin(Stdio::null());
        async move {
            let out = tokio::time::timeout(DEADLINE, cmd.kill_on_drop(true).output()).await.expect("command ended").unwrap();
            (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
        }
    };
    let hub_list = || ["tools", "list", "--wait", "20s", "--hub", &hub.host_url].map(String::from).to_vec();
    let (code, stderr) = run(hub_list(), false).await;
    assert_eq!(code, Some(0), "the owner: {stderr}");
    let (code, stderr) = run(hub_list(), true).await;
    assert_eq!(code, Some(3), "nobody through the control API: {stderr}");
    assert!(stderr.contains("403") && stderr.contains("serves only the user who started it"), "{stderr}");
    // Even the token does not help another user on this machine.
    let contents = std::fs::read_to_string(runtime.join(format!("control-{}.token", addr_of(&hub.host_url).port()))).unwrap();
    let token = contents.lines().next().unwrap();
    let mut argv = prefix.clone();
    argv.push(bin.display().to_string());
    argv.extend(hub_list());
    let out = tokio::process::Command::new(&argv[0]).args(&argv[1..]).env("MCPDEV_HUB_TOKEN", token.trim()).env("HOME", &home).current_dir(&home).kill_on_drop(true).output();
    let out = tokio::time::timeout(DEADLINE, out).await.expect("command ended").unwrap();
    assert_eq!(out.status.code(), Some(3), "nobody with the token: {}", String::from_utf8_lossy(&out.stderr));
    // /mcp: the owner is served, nobody is refused.
    let mcp = format!("{}/mcp", hub.host_url);
    let mcp_list = || ["tools", "list", "--url", &mcp].map(String::from).to_vec();
    let (code, stderr) = run(mcp_list(), false).await;
    assert_eq!(code, Some(0), "the owner on /mcp: {stderr}");
    let (code, stderr) = run(mcp_list(), true).await;
    assert_eq!(code, Some(3), "nobody on /mcp: {stderr}");
    assert!(stderr.contains("403"), "{stderr}");
}

#[tokio::test]
async fn a_hub_reachable_from_other_machines_needs_an_mcp_token() {
    for args in [&["--allowed-host", "hub.lan"][..], &["--host-addr", "0.0.0.0:0"][..]] {
        let mut all = vec!["serve", "--device-addr", "127.0.0.1:0"];
        all.extend_from_slice(args);
        let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcpdev")).args(&all).env_remove("MCPDEV_MCP_TOKEN").stdin(Stdio::null()).kill_on_drop(true).output();
        let out = tokio::time::timeout(DEADLINE, out).await.expect("refused at once").unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains("MCPDEV_MCP_TOKEN"), "{stderr}");
    }
    // With a token it starts.
    let hub = HubProcess::start(&["--allowed-host", "hub.lan"], &[("MCPDEV_MCP_TOKEN", "s3cret-mcp")]).await;
    assert!(hub.host_url.starts_with("http://"));
}

// ---- Item 9: secrets.

#[tokio::test]
async fn the_vision_token_stays_out_of_trace_logs() {
    const TOKEN: &str = "vision-secret-6b1f0c2e9d";
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcpdev"));
    // An external vision service: its token goes to every device verbatim in `initialize`.
    cmd.args(["serve", "--json", "-vvv", "--approve-all", "--device-addr", "127.0.0.1:0", "--host-addr", "127.0.0.1:0", "--vision-url", "http://127.0.0.1:9/explain"])
        .env("MCPDEV_VISION_TOKEN", TOKEN)
        .env("MCPDEV_RUNTIME_DIR", dir.path())
        .env("MCPDEV_STATE_DIR", dir.path())
        .env_remove("RUST_LOG");
    let (mut child, info, log) = start_logged(cmd).await;
    let (devices, host) = (info["devices"].as_str().unwrap().to_string(), info["host"].as_str().unwrap().to_string());
    // A device onboards: initialize (with the vision token) went out over the WebSocket.
    let _sim = common::spawn_mcpdev(&["sim", "--url", &devices, "--device-id", "02:00:00:00:00:55"], &[]);
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcpdev"))
        .args(["tools", "list", "-d", "02:00:00:00:00:55", "--wait", "20s", "--hub", &host])
        .env("MCPDEV_RUNTIME_DIR", dir.path())
        .kill_on_drop(true).output();
    let out = tokio::time::timeout(DEADLINE, out).await.unwrap().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let _ = child.start_kill();
    let log = tokio::time::timeout(DEADLINE, log).await.expect("log ends with the hub").unwrap();
    assert!(log.contains("DEBUG"), "the hub logs verbosely at -vvv: {log}");
    let leaks: Vec<&str> = log.lines().filter(|l| l.contains(TOKEN)).collect();
    assert!(leaks.is_empty(), "the vision token is in the -vvv log: {leaks:#?}");
}

#[tokio::test]
async fn a_token_on_the_command_line_is_warned_about() {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcpdev"))
        .args(["init", "--vision-token", "abc", "--hub", "http://127.0.0.1:9", "--timeout", "2s"])
        .env_remove("MCPDEV_VISION_TOKEN")
        .kill_on_drop(true).output();
    let out = tokio::time::timeout(DEADLINE, out).await.unwrap().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--vision-token on the command line is visible to other users"), "{stderr}");
    // From the environment: no warning.
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcpdev")).args(["init", "--hub", "http://127.0.0.1:9"]).env("MCPDEV_VISION_TOKEN", "abc").kill_on_drop(true).output();
    let out = tokio::time::timeout(DEADLINE, out).await.unwrap().unwrap();
    assert!(!String::from_utf8_lossy(&out.stderr).contains("visible to other users"));
}
