//! `serve --upstream` (issue 43): what relaying a device costs the hub.
//!
//! Devices (in this process) send a 120-byte Opus-sized binary frame every 60 ms (about 17 a
//! second) and an upstream (in this process) echoes each back, so frames flow both ways; now and
//! then (every 2 s per device) the bench calls a tool on a device through the hub's control API
//! path (`mcpdev call`'s), to show the hub's calls ride along. Three set-ups, each its own process,
//! measured from `/proc`:
//!
//! - **hub**: `mcpdev serve --upstream` relaying every device to the echo upstream;
//! - **floor**: a bare WebSocket copy loop written for the bench (this binary, `floor` mode:
//!   tokio-tungstenite, one task per direction, no parsing);
//! - **direct**: the devices connected to `mcpdev serve` alone (no upstream), for memory.
//!
//! Reported per set-up and device count (1, 100, 1,000 by default; `MCPDEV_BENCH_DEVICES=1,100`):
//! CPU time per relayed frame (utime + stime of the relaying process over the window, divided by
//! the frames it passed both ways), the round trip device → relay → upstream → relay → device at
//! p50 and p99 against the same round trip with no relay in between (the added latency is the
//! difference), and VmRSS per device (after the devices connected, minus before).
//!
//! Run: `cargo bench --bench relay` (about 20 s per set-up and count; `MCPDEV_BENCH_SECS` sets
//! the measured window, 8 s by default). Loopback only.

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use tokio::io::AsyncBufReadExt;
use tokio::net::TcpListener;
use tokio::sync::Mutex;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::server::{Request, Response};

const FRAME: usize = 120;
const PERIOD: Duration = Duration::from_millis(60);

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    if args.get(1).map(String::as_str) == Some("floor") {
        let (listen, upstream) = (args[2].clone(), args[3].clone());
        rt.block_on(floor(listen, upstream));
        return;
    }
    rt.block_on(bench());
}

/// The bare relay: accept a device, open the upstream with its headers, copy frames both ways.
async fn floor(listen: String, upstream: String) {
    let listener = TcpListener::bind(&listen).await.unwrap();
    println!("{}", listener.local_addr().unwrap());
    loop {
        let (tcp, _) = listener.accept().await.unwrap();
        let upstream = upstream.clone();
        tokio::spawn(async move {
            let _ = tcp.set_nodelay(true);
            let mut headers = Vec::new();
            let Ok(device) = tokio_tungstenite::accept_hdr_async(tcp, |req: &Request, resp: Response| {
                headers = req.headers().iter().filter(|(k, _)| ["authorization", "device-id", "client-id", "protocol-version"].contains(&k.as_str())).map(|(k, v)| (k.clone(), v.clone())).collect();
                Ok(resp)
            })
            .await
            else {
                return;
            };
            let mut req = tokio_tungstenite::tungstenite::client::IntoClientRequest::into_client_request(upstream.as_str()).unwrap();
            for (k, v) in headers {
                req.headers_mut().insert(k, v);
            }
            let Ok((up, _)) = tokio_tungstenite::connect_async(req).await else { return };
            let (mut dtx, mut drx) = device.split();
            let (mut utx, mut urx) = up.split();
            let a = async move {
                while let Some(Ok(m)) = drx.next().await {
                    if utx.send(m).await.is_err() {
                        break;
                    }
                }
            };
            let b = async move {
                while let Some(Ok(m)) = urx.next().await {
                    if dtx.send(m).await.is_err() {
                        break;
                    }
                }
            };
            tokio::join!(a, b);
        });
    }
}

/// The echo upstream: answers the hello as xiaozhi-esp32-server does (no MCP), echoes every
/// binary frame. Counts frames.
async fn upstream(listener: TcpListener, frames: Arc<AtomicU64>) {
    loop {
        let (tcp, _) = listener.accept().await.unwrap();
        let frames = frames.clone();
        tokio::spawn(async move {
            let _ = tcp.set_nodelay(true);
            let Ok(ws) = tokio_tungstenite::accept_async(tcp).await else { return };
            let (mut tx, mut rx) = ws.split();
            while let Some(Ok(m)) = rx.next().await {
                match m {
                    Message::Binary(b) => {
                        frames.fetch_add(2, Ordering::Relaxed);
                        if tx.send(Message::Binary(b)).await.is_err() {
                            break;
                        }
                    }
                    Message::Text(t) if t.contains("\"hello\"") => {
                        let hello = r#"{"type":"hello","transport":"websocket","session_id":"bench","audio_params":{"format":"opus","sample_rate":24000,"channels":1,"frame_duration":60}}"#;
                        if tx.send(Message::text(hello)).await.is_err() {
                            break;
                        }
                    }
                    _ => {}
                }
            }
        });
    }
}

/// One device: says hello, answers MCP requests (an empty tool list, `{}` otherwise), sends a
/// timestamped frame every 60 ms and records each echo's round trip.
async fn device(url: String, mac: String, epoch: Instant, rtts: Arc<Mutex<Vec<u32>>>, stop: Instant) {
    let mut req = tokio_tungstenite::tungstenite::client::IntoClientRequest::into_client_request(url.as_str()).unwrap();
    req.headers_mut().insert("Device-Id", mac.parse().unwrap());
    req.headers_mut().insert("Client-Id", format!("bench-{mac}").parse().unwrap());
    req.headers_mut().insert("Authorization", "Bearer bench".parse().unwrap());
    let Ok((ws, _)) = tokio_tungstenite::connect_async(req).await else { return };
    let (mut tx, mut rx) = ws.split();
    tx.send(Message::text(r#"{"type":"hello","version":1,"transport":"websocket","features":{"mcp":true},"audio_params":{"format":"opus","sample_rate":16000,"channels":1,"frame_duration":60}}"#)).await.unwrap();
    let (answers_tx, mut answers) = tokio::sync::mpsc::unbounded_channel::<String>();
    let mine = Arc::new(Mutex::new(Vec::new()));
    let collected = mine.clone();
    let reader = tokio::spawn(async move {
        while let Some(Ok(m)) = rx.next().await {
            match m {
                Message::Binary(b) if b.len() >= 8 => {
                    let sent = u64::from_le_bytes(b[..8].try_into().unwrap());
                    let now = epoch.elapsed().as_micros() as u64;
                    collected.lock().await.push(now.saturating_sub(sent) as u32);
                }
                Message::Text(t) => {
                    let v: serde_json::Value = serde_json::from_str(&t).unwrap_or_default();
                    if let (Some(id), Some(method)) = (v["payload"].get("id"), v["payload"]["method"].as_str()) {
                        let result = if method == "tools/list" { serde_json::json!({"tools": [{"name": "bench.noop", "description": "", "inputSchema": {"type": "object", "properties": {}}}]}) } else { serde_json::json!({"content": [{"type": "text", "text": "ok"}]}) };
                        let _ = answers_tx.send(serde_json::json!({"type": "mcp", "payload": {"jsonrpc": "2.0", "id": id, "result": result}}).to_string());
                    }
                }
                _ => {}
            }
        }
    });
    let mut tick = tokio::time::interval(PERIOD);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut frame = vec![0u8; FRAME];
    while Instant::now() < stop {
        tokio::select! {
            _ = tick.tick() => {
                frame[..8].copy_from_slice(&(epoch.elapsed().as_micros() as u64).to_le_bytes());
                if tx.send(Message::binary(frame.clone())).await.is_err() { break }
            }
            Some(answer) = answers.recv() => if tx.send(Message::text(answer)).await.is_err() { break },
        }
    }
    let _ = tx.close().await;
    reader.abort();
    rtts.lock().await.extend(mine.lock().await.iter().copied());
}

fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
    let f: Vec<&str> = after.split_whitespace().collect();
    f.get(11).and_then(|u| u.parse::<u64>().ok()).unwrap_or(0) + f.get(12).and_then(|s| s.parse::<u64>().ok()).unwrap_or(0)
}

fn rss_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status.lines().find_map(|l| l.strip_prefix("VmRSS:")).and_then(|v| v.split_whitespace().next()).and_then(|v| v.parse().ok()).unwrap_or(0)
}

/// A started relay: its process, the device URL, and the control URL of a hub (for calls).
struct Relay {
    child: tokio::process::Child,
    device_url: String,
    host_url: Option<String>,
}

async fn start_hub(upstream: Option<&str>, state: &std::path::Path) -> Relay {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcpdev"));
    cmd.args(["serve", "--json", "--approve-all", "--device-addr", "127.0.0.1:0", "--host-addr", "127.0.0.1:0", "--max-device-connections", "5000", "--max-pre-hello-per-peer", "2000", "--max-pre-hello", "2000", "--max-queued-per-peer", "2000"]);
    if let Some(u) = upstream {
        cmd.args(["--upstream", u, "--upstream-plain"]);
    }
    cmd.env("MCPDEV_STATE_DIR", state).env("MCPDEV_RUNTIME_DIR", state).env("RUST_LOG", "warn").stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::null()).kill_on_drop(true);
    let mut child = cmd.spawn().expect("mcpdev serve");
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let line = lines.next_line().await.unwrap().expect("listening line");
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    let v: serde_json::Value = serde_json::from_str(&line).unwrap();
    Relay { child, device_url: v["devices"].as_str().unwrap().to_string(), host_url: v["host"].as_str().map(str::to_string) }
}

async fn start_floor(upstream: &str) -> Relay {
    let mut child = tokio::process::Command::new(std::env::current_exe().unwrap())
        .args(["floor", "127.0.0.1:0", upstream])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let addr = lines.next_line().await.unwrap().unwrap();
    Relay { child, device_url: format!("ws://{addr}/xiaozhi/v1/"), host_url: None }
}

fn percentile(sorted: &[u32], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize] as f64 / 1000.0
}

struct Run {
    rtts: Vec<u32>,
    cpu_s: f64,
    frames: u64,
    rss_per_device_kb: f64,
}

/// `n` devices through `url` for the window; `pid` is the relaying process (if any).
async fn run(n: usize, url: &str, pid: Option<u32>, frames: &Arc<AtomicU64>, window: Duration, host_url: Option<&str>, state: &std::path::Path) -> Run {
    let epoch = Instant::now();
    let rss_before = pid.map_or(0, rss_kb);
    let rtts = Arc::new(Mutex::new(Vec::new()));
    let warmup = Duration::from_secs(3) + Duration::from_millis(n as u64 * 2);
    let stop = Instant::now() + warmup + window;
    let mut tasks = Vec::new();
    for i in 0..n {
        let mac = format!("02:be:00:00:{:02x}:{:02x}", i / 256, i % 256);
        tasks.push(tokio::spawn(device(url.to_string(), mac, epoch, rtts.clone(), stop)));
    }
    tokio::time::sleep(warmup).await;
    rtts.lock().await.clear();
    let (cpu0, frames0) = (pid.map_or(0, cpu_ticks), frames.load(Ordering::Relaxed));
    let rss = pid.map_or(0, rss_kb);
    // A hub call now and then: every 2 s, to one device.
    let caller = host_url.map(|h| {
        let (h, state) = (h.to_string(), state.to_path_buf());
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(2)).await;
                let _ = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcpdev"))
                    .args(["call", "bench.noop", "-d", "02:be:00:00:00:00", "--timeout", "5s"])
                    .env("MCPDEV_HUB", &h)
                    .env("MCPDEV_RUNTIME_DIR", &state)
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status()
                    .await;
            }
        })
    });
    tokio::time::sleep(window).await;
    let (cpu1, frames1) = (pid.map_or(0, cpu_ticks), frames.load(Ordering::Relaxed));
    if let Some(c) = caller {
        c.abort();
    }
    for t in tasks {
        let _ = t.await;
    }
    let mut all = std::mem::take(&mut *rtts.lock().await);
    all.sort_unstable();
    Run { rtts: all, cpu_s: (cpu1 - cpu0) as f64 / 100.0, frames: frames1 - frames0, rss_per_device_kb: rss.saturating_sub(rss_before) as f64 / n as f64 }
}

async fn bench() {
    let counts: Vec<usize> = std::env::var("MCPDEV_BENCH_DEVICES").unwrap_or_else(|_| "1,100,1000".into()).split(',').filter_map(|s| s.trim().parse().ok()).collect();
    let window = Duration::from_secs(std::env::var("MCPDEV_BENCH_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(8));
    let frames = Arc::new(AtomicU64::new(0));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let up_url = format!("ws://{}/xiaozhi/v1/", listener.local_addr().unwrap());
    tokio::spawn(upstream(listener, frames.clone()));
    let state = tempfile::tempdir().unwrap();
    println!("| devices | set-up | CPU per frame | round trip p50 / p99 | added p50 / p99 | VmRSS per device |");
    println!("|---:|---|---:|---:|---:|---:|");
    for &n in &counts {
        let mut base: HashMap<&str, (f64, f64)> = HashMap::new();
        for setup in ["none", "floor", "hub", "direct"] {
            let relay = match setup {
                "none" => None,
                "floor" => Some(start_floor(&up_url).await),
                "hub" => Some(start_hub(Some(&up_url), state.path()).await),
                _ => Some(start_hub(None, state.path()).await),
            };
            let url = relay.as_ref().map_or(up_url.clone(), |r| r.device_url.clone());
            let pid = relay.as_ref().and_then(|r| r.child.id());
            let host = relay.as_ref().and_then(|r| r.host_url.clone()).filter(|_| setup == "hub");
            let r = run(n, &url, pid, &frames, window, host.as_deref(), state.path()).await;
            let (p50, p99) = (percentile(&r.rtts, 0.5), percentile(&r.rtts, 0.99));
            base.entry("none").or_insert((p50, p99));
            let (b50, b99) = base["none"];
            let cpu = if r.frames > 0 && pid.is_some() { format!("{:.1} µs", r.cpu_s * 1e6 / r.frames as f64) } else { "-".into() };
            let added = if setup == "none" || setup == "direct" { "-".into() } else { format!("{:.2} / {:.2} ms", p50 - b50, p99 - b99) };
            let rtt = if setup == "direct" { "-".into() } else { format!("{p50:.2} / {p99:.2} ms") };
            let rss = if pid.is_some() { format!("{:.1} KB", r.rss_per_device_kb) } else { "-".into() };
            let label = match setup {
                "none" => "no relay (device ↔ upstream)",
                "floor" => "bare copy loop (floor)",
                "hub" => "mcpdev serve --upstream",
                _ => "mcpdev serve, direct device",
            };
            println!("| {n} | {label} | {cpu} | {rtt} | {added} | {rss} |");
            drop(relay);
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}
