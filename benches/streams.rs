//! Hub memory with slow readers while a device sends 1 MiB frames (issue 31): a command, not a
//! timed test.
//!
//! `cargo bench --bench streams` starts the built `mcpdev serve` (and, with
//! `STREAMS_BEFORE_BIN=/path/to/an/older/mcpdev`, that binary too, in the same run, one after the
//! other) on loopback, with a scratch state directory, and for each:
//!
//! 1. a device (a raw WebSocket client in this file) connects and onboards;
//! 2. with `STREAMS_READERS=0` nothing watches; by default three viewers open their stream and
//!    never read it (each socket with a 4 KiB receive buffer): the dashboard's traffic stream
//!    (`GET /dashboard/api/traffic?id=`), the control API's `watch --traffic`, and `/sse`;
//! 3. the device sends `STREAMS_FRAMES` (default 200) `notifications/message` frames of 1 MiB,
//!    as fast as the hub takes them, then answers one `tools/call` through the control API (so
//!    the hub has read every frame);
//! 4. the readers close, and after `STREAMS_SETTLE_S` (default 5 s) the hub's RSS is read again.
//!
//! It prints, per binary and case: the hub's RSS before the frames, its peak while they came
//! (sampled every 50 ms from /proc/PID/status), with the readers still open after the last
//! frame, and once they closed; and how long the frames took. The machine may be shared: the
//! figures are RSS, not time.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

const DEV: &str = "02:00:00:00:31:aa";

type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.replace('_', "").parse().ok()).unwrap_or(default)
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status.lines().find_map(|l| l.strip_prefix("VmRSS:")).and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok()).unwrap_or(0)
}

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

struct Hub {
    child: tokio::process::Child,
    host: String,
    device_url: String,
    token: String,
    _dir: tempfile::TempDir,
}

async fn start(bin: &str) -> anyhow::Result<Hub> {
    let dir = tempfile::tempdir()?;
    let mut cmd = tokio::process::Command::new(bin);
    cmd.args(["serve", "--json", "--approve-all", "--device-addr", "127.0.0.1:0", "--host-addr", "127.0.0.1:0", "-q"])
        .env("MCPDEV_STATE_DIR", dir.path())
        .env("MCPDEV_RUNTIME_DIR", dir.path())
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true);
    for (k, _) in std::env::vars() {
        if k.starts_with("MCPDEV_") && k != "MCPDEV_STATE_DIR" && k != "MCPDEV_RUNTIME_DIR" {
            cmd.env_remove(k);
        }
    }
    let mut child = cmd.spawn()?;
    let mut lines = BufReader::new(child.stdout.take().expect("piped")).lines();
    let line = tokio::time::timeout(Duration::from_secs(60), lines.next_line()).await??.ok_or_else(|| anyhow::anyhow!("the hub exited"))?;
    let v: Value = serde_json::from_str(&line)?;
    let host = v["host"].as_str().unwrap_or_default().trim_start_matches("http://").to_string();
    let device_url = v["devices"].as_str().unwrap_or_default().to_string();
    let port = host.rsplit(':').next().unwrap_or_default();
    let token_file = std::fs::read_to_string(PathBuf::from(dir.path()).join(format!("control-{port}.token")))?;
    let token = token_file.lines().next().unwrap_or_default().trim().to_string();
    // The rest of stdout is read and dropped (the hub must be able to write its event log).
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Ok(Hub { child, host, device_url, token, _dir: dir })
}

async fn device(url: &str) -> anyhow::Result<(Ws, String)> {
    let mut req = url.into_client_request()?;
    req.headers_mut().insert("Device-Id", DEV.parse()?);
    req.headers_mut().insert("Client-Id", "streams".parse()?);
    req.headers_mut().insert("Protocol-Version", "1".parse()?);
    let (mut ws, _) = tokio_tungstenite::connect_async(req).await?;
    ws.send(Message::text(json!({"type":"hello","version":1,"features":{"mcp":true},"transport":"websocket"}).to_string())).await?;
    let mut session = String::new();
    while let Some(msg) = tokio::time::timeout(Duration::from_secs(30), ws.next()).await? {
        let Message::Text(t) = msg? else { continue };
        let v: Value = serde_json::from_str(&t)?;
        if v["type"] == "hello" {
            session = v["session_id"].as_str().unwrap_or_default().to_string();
            continue;
        }
        let p = &v["payload"];
        let result = match p["method"].as_str() {
            Some("initialize") => json!({"protocolVersion":"2024-11-05","capabilities":{"tools":{}},"serverInfo":{"name":"streams","version":"1"}}),
            Some("tools/list") => json!({"tools":[{"name":"t","description":"t","inputSchema":{"type":"object"}}]}),
            _ => continue,
        };
        ws.send(Message::text(json!({"session_id":session,"type":"mcp","payload":{"jsonrpc":"2.0","id":p["id"],"result":result}}).to_string())).await?;
        if p["method"] == "tools/list" {
            return Ok((ws, session));
        }
    }
    anyhow::bail!("the hub closed before onboarding ended")
}

async fn slow_socket(host: &str) -> anyhow::Result<TcpStream> {
    let socket = tokio::net::TcpSocket::new_v4()?;
    socket.set_recv_buffer_size(4096)?;
    Ok(socket.connect(host.parse()?).await?)
}

/// Reads an HTTP answer's head and a first piece of its body, then stops reading.
async fn open_stream(host: &str, path: &str, token: &str) -> anyhow::Result<TcpStream> {
    let mut tcp = slow_socket(host).await?;
    let req = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\nAccept: text/event-stream\r\n\r\n");
    tcp.write_all(req.as_bytes()).await?;
    let mut buf = [0u8; 512];
    let n = tokio::time::timeout(Duration::from_secs(30), tcp.read(&mut buf)).await??;
    anyhow::ensure!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"), "{path}: {}", String::from_utf8_lossy(&buf[..n]));
    Ok(tcp)
}

async fn control(host: &str, token: &str, slow: bool) -> anyhow::Result<WebSocketStream<TcpStream>> {
    let mut req = format!("ws://{host}/api/v1/link").into_client_request()?;
    req.headers_mut().insert("Authorization", format!("Bearer {token}").parse()?);
    let tcp = if slow { slow_socket(host).await? } else { TcpStream::connect(host).await? };
    Ok(tokio_tungstenite::client_async(req, tcp).await?.0)
}

struct Row {
    bin: String,
    readers: bool,
    before: u64,
    peak: u64,
    held: u64,
    after: u64,
    took: Duration,
}

async fn run(label: &str, bin: &str, readers: bool, frames: usize, settle: Duration) -> anyhow::Result<Row> {
    let mut hub = start(bin).await?;
    let pid = hub.child.id().unwrap_or(0);
    let (mut ws, session) = device(&hub.device_url).await?;
    let mut held_open: Vec<Box<dyn std::any::Any + Send>> = Vec::new();
    if readers {
        held_open.push(Box::new(open_stream(&hub.host, &format!("/dashboard/api/traffic?id={DEV}"), &hub.token).await?));
        held_open.push(Box::new(open_stream(&hub.host, "/sse", &hub.token).await?));
        let mut watch = control(&hub.host, &hub.token, true).await?;
        watch.send(Message::text(json!({"id":1,"op":"watch","device":DEV,"traffic":true}).to_string())).await?;
        let _ = tokio::time::timeout(Duration::from_secs(30), watch.next()).await?;
        held_open.push(Box::new(watch));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = rss_kib(pid);
    let peak = Arc::new(AtomicU64::new(before));
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (peak, stop) = (peak.clone(), stop.clone());
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                peak.fetch_max(rss_kib(pid), Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
    };
    let data = "m".repeat((1 << 20) - 200);
    let frame = json!({"session_id":session,"type":"mcp","payload":{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":data}}}).to_string();
    let started = Instant::now();
    for _ in 0..frames {
        ws.send(Message::text(frame.clone())).await?;
    }
    // One call through the hub: answered once the hub has read every frame before it.
    let mut ctl = control(&hub.host, &hub.token, false).await?;
    ctl.send(Message::text(json!({"id":9,"op":"rpc","device":DEV,"method":"tools/call","params":{"name":"t","arguments":{}},"timeout_ms":600000}).to_string())).await?;
    loop {
        let Some(Ok(Message::Text(t))) = ws.next().await else { anyhow::bail!("the device's link ended") };
        let v: Value = serde_json::from_str(&t)?;
        if v["payload"]["method"] == "tools/call" {
            ws.send(Message::text(json!({"session_id":session,"type":"mcp","payload":{"jsonrpc":"2.0","id":v["payload"]["id"],"result":{"content":[]}}}).to_string())).await?;
            break;
        }
    }
    let _ = tokio::time::timeout(Duration::from_secs(600), ctl.next()).await?;
    let took = started.elapsed();
    let held = rss_kib(pid);
    drop(held_open);
    tokio::time::sleep(settle).await;
    let after = rss_kib(pid);
    stop.store(true, Ordering::Relaxed);
    let _ = sampler.await;
    let _ = hub.child.kill().await;
    Ok(Row { bin: label.to_string(), readers, before, peak: peak.load(Ordering::Relaxed), held, after, took })
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let frames = env_usize("STREAMS_FRAMES", 200);
    let settle = Duration::from_secs(env_usize("STREAMS_SETTLE_S", 5) as u64);
    let readers = env_usize("STREAMS_READERS", 1) > 0;
    let after_bin = std::env::var("STREAMS_AFTER_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_mcpdev").to_string());
    let mut bins = Vec::new();
    if let Ok(before) = std::env::var("STREAMS_BEFORE_BIN") {
        bins.push(("before", before));
    }
    bins.push(("after", after_bin));
    println!("{frames} frames of 1 MiB from one device; slow readers: {}", if readers { "dashboard traffic, watch --traffic, /sse (4 KiB receive buffers, never read)" } else { "none" });
    println!("| binary | readers | RSS before | peak | readers still open | {} s after they closed | frames took |", settle.as_secs());
    println!("|---|---|---:|---:|---:|---:|---:|");
    for (label, bin) in &bins {
        let cases: &[bool] = if readers { &[false, true] } else { &[false] };
        for &r in cases {
            let row = run(label, bin, r, frames, settle).await?;
            println!(
                "| {} | {} | {} | {} | {} | {} | {:.1} s |",
                row.bin,
                if row.readers { "3 slow" } else { "none" },
                mib(row.before),
                mib(row.peak),
                mib(row.held),
                mib(row.after),
                row.took.as_secs_f64()
            );
        }
    }
    Ok(())
}
